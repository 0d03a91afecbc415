"""Lock box services on the database (SPEC §4-§5): grants, preemption, waits and
timeouts, versions, allocation, publish checks, kill and the commit log."""

from __future__ import annotations

import random
import time
from datetime import timedelta

import pytest
from conftest import TEST_WORKER

from metastore import selectors, services
from metastore.intervals import Interval, format_ts
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    DataSource,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
)

pytestmark = pytest.mark.django_db

DS = "wiki"
DAY = Interval.parse("2024-01-01/2024-01-02")


def task(
    priority: int = 50, kind: str = "index_parallel", *, claimed: bool = True, **context
) -> Task:
    """A task as a worker runs it: claimed (RUNNING), since only a RUNNING or
    WAITING task may lock, allocate or publish (SPEC §5). `claimed=False`
    leaves it PENDING, as if no worker had picked it up yet."""
    t = services.task_create(
        spec={"context": {"priority": priority, **context}},
        task_type=kind,
        datasource=DS,
        enqueue=False,
    )
    if claimed:
        assert services.task_claim(task_id=t.id, worker=TEST_WORKER)
        t.refresh_from_db()
    return t


def day(n: int) -> Interval:
    return Interval(DAY.start + timedelta(days=n), DAY.start + timedelta(days=n + 1))


def publish(t: Task, interval: Interval = DAY, count: int = 1, append: bool = False):
    alloc = services.segments_allocate(task=t, interval=interval, count=count, append=append)
    segs = [
        services.NewSegment(
            interval=interval,
            version=alloc.version,
            partition=p,
            core_partitions=alloc.core_partitions,
            location=f"mem://{t.id}/{p}",
            num_rows=1,
        )
        for p in alloc.partitions
    ]
    services.segments_publish(task=t, segments=segs)
    services.task_finish(task_id=t.id, status=TaskStatus.SUCCESS)
    return alloc


def test_priority_chain_of_revocations():
    low, mid, high = 10, 50, 90
    h = task(high)
    assert services.lock_try_acquire(task=h, interval=DAY, lock_type="EXCLUSIVE")
    s_high = task(high)
    assert services.lock_try_acquire(task=s_high, interval=DAY, lock_type="SHARED") is None
    s_high.refresh_from_db()
    assert s_high.status == TaskStatus.WAITING
    assert s_high.waiting_on[0]["task"] == h.id
    services.task_finish(task_id=s_high.id, status=TaskStatus.CANCELED)
    # revoke H's lock by hand-over: an even higher request takes it
    top = task(100)
    assert services.lock_try_acquire(task=top, interval=DAY, lock_type="EXCLUSIVE")
    assert TaskLock.objects.get(task=h).revoked
    services.task_finish(task_id=top.id, status=TaskStatus.SUCCESS)
    s_low = task(low)
    assert services.lock_try_acquire(task=s_low, interval=DAY, lock_type="SHARED")
    e_mid = task(mid)
    assert services.lock_try_acquire(task=e_mid, interval=DAY, lock_type="EXCLUSIVE")
    assert TaskLock.objects.get(task=s_low).revoked_by_id == e_mid.id
    s_h2 = task(high)
    assert services.lock_try_acquire(task=s_h2, interval=DAY, lock_type="SHARED")
    assert TaskLock.objects.get(task=e_mid).revoked_by_id == s_h2.id


def test_priority_10_revokes_priority_0_locks_on_three_days_and_not_the_reverse():
    holders = []
    for n in range(3):
        t = task(0)
        assert services.lock_try_acquire(
            task=t, interval=day(n), lock_type="SHARED" if n % 2 else "EXCLUSIVE"
        )
        holders.append(t)
    big = task(10)
    three_days = Interval(day(0).start, day(2).end)
    assert services.lock_try_acquire(task=big, interval=three_days, lock_type="EXCLUSIVE")
    assert TaskLock.objects.filter(task__in=holders, revoked=True).count() == 3
    small = task(0)
    assert services.lock_try_acquire(task=small, interval=day(1), lock_type="EXCLUSIVE") is None


def test_lock_wait_times_out_after_task_lock_timeout():
    holder = task(50)
    services.lock_acquire(task=holder, interval=DAY)
    waiter = task(50)
    started = time.monotonic()
    with pytest.raises(services.LockTimeout, match=holder.id):
        services.lock_acquire(task=waiter, interval=DAY, timeout_ms=1000)
    assert time.monotonic() - started >= 1.0
    waiter.refresh_from_db()
    assert waiter.status != TaskStatus.WAITING


def test_revoked_task_stays_revoked_after_the_preemptor_releases():
    victim = task(25)
    services.lock_acquire(task=victim, interval=DAY)
    preemptor = task(75)
    services.lock_acquire(task=preemptor, interval=DAY)
    services.task_finish(task_id=preemptor.id, status=TaskStatus.SUCCESS)
    with pytest.raises(services.LockRevoked, match=preemptor.id):
        services.lock_try_acquire(task=victim, interval=day(5))
    with pytest.raises(services.LockRevoked, match=preemptor.id):
        services.segments_allocate(task=victim, interval=DAY, count=1, append=False)
    with pytest.raises(services.LockRevoked):
        services.segments_publish(task=victim, segments=[])
    assert services.task_heartbeat(task_id=victim.id).revoked_reason


def test_segment_locks_by_partition_and_interval():
    a, b, c, d = task(50), task(50), task(50), task(50)
    seg = dict(lock_type="EXCLUSIVE", granularity="SEGMENT", version="v1")
    assert services.lock_try_acquire(task=a, interval=DAY, partition=3, **seg)
    assert services.lock_try_acquire(task=b, interval=DAY, partition=2, **seg)
    assert services.lock_try_acquire(task=c, interval=DAY, partition=3, **seg) is None
    wider = Interval(DAY.start, DAY.end + timedelta(hours=1))
    assert services.lock_try_acquire(task=d, interval=wider, partition=7, **seg) is None
    big = task(100)
    assert services.lock_try_acquire(task=big, interval=DAY, lock_type="EXCLUSIVE")
    assert set(TaskLock.objects.filter(revoked=True).values_list("task_id", flat=True)) == {
        a.id,
        b.id,
    }


def test_append_and_replace_on_a_year():
    year = Interval.parse("2024-01-01/2025-01-01")
    half = Interval.parse("2024-01-01/2024-07-01")
    app = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=app, interval=year, lock_type="APPEND")
    part = task(50)
    assert services.lock_try_acquire(task=part, interval=half, lock_type="REPLACE") is None
    services.task_finish(task_id=part.id, status=TaskStatus.CANCELED)
    rep = task(50)
    assert services.lock_try_acquire(task=rep, interval=year, lock_type="REPLACE")
    wider = task(50)
    assert (
        services.lock_try_acquire(
            task=wider, interval=Interval.parse("2023-01-01/2026-01-01"), lock_type="REPLACE"
        )
        is None
    )
    more = task(50)
    assert services.lock_try_acquire(task=more, interval=half, lock_type="APPEND")
    assert not TaskLock.objects.filter(revoked=True).exists()


def test_new_versions_rise_even_when_the_clock_is_behind():
    DataSource.objects.create(name=DS, last_version="2999-01-01T00:00:00.000Z")
    t = task(50)
    lock = services.lock_acquire(task=t, interval=DAY)
    assert lock.version == "2999-01-01T00:00:00.001Z"
    t2 = task(50)
    lock2 = services.lock_acquire(task=t2, interval=day(3))
    assert lock2.version > lock.version


def test_allocation_numbers_appends_and_overwrites_and_never_reuses_them():
    # appends into an empty chunk: EPOCH, partitions 0, 1, 2
    allocs = []
    for _ in range(3):
        t = task(50)
        services.lock_acquire(task=t, interval=DAY)
        allocs.append(publish(t, append=True))
    assert [a.partitions[0] for a in allocs] == [0, 1, 2]
    assert {a.version for a in allocs} == {"1970-01-01T00:00:00.000Z"}
    # two segment-locked overwrites: 32768, 32769, next minor version, roots unioned
    inputs = list(Segment.objects.order_by("partition"))
    c = task(25, "compact", forceTimeChunkLock=False)
    for seg in inputs[:2]:
        assert services.lock_try_acquire(
            task=c,
            interval=DAY,
            lock_type="EXCLUSIVE",
            granularity="SEGMENT",
            partition=seg.partition,
            version=seg.version,
        )
    over = services.segments_allocate_overwrite(
        task=c, input_segment_ids=[s.id for s in inputs[:2]], count=2
    )
    assert over.partitions == (32768, 32769)
    assert over.minor_version == 1 and over.root_partitions == (0, 1)
    # idempotent per (task, sequence name)
    again = services.segments_allocate_overwrite(
        task=c, input_segment_ids=[s.id for s in inputs[:2]], count=2
    )
    assert again.partitions == over.partitions
    services.task_finish(task_id=c.id, status=TaskStatus.FAILED, error="test ends it")
    # mark one unused, kill it: its number is never handed out again
    services.segments_mark_used(datasource=DS, used=False, segment_ids=[inputs[2].id])
    k = task(0, "kill")
    services.lock_acquire(task=k, interval=DAY, timeout_ms=2000)
    entry, _ = services.segments_kill(task=k, interval=DAY)
    assert entry.kind == CommitKind.KILL and entry.removed == [inputs[2].id]
    t = task(50)
    services.lock_acquire(task=t, interval=DAY)
    assert publish(t, append=True).partitions == (3,)


def test_changing_granularity_needs_time_chunk_locks():
    t = task(50)
    services.lock_acquire(task=t, interval=DAY)
    publish(t)
    hour = Interval(DAY.start, DAY.start + timedelta(hours=1))
    t2 = task(50)
    services.lock_acquire(task=t2, interval=hour)
    publish(t2, interval=hour)
    segs = list(Segment.objects.all())
    c = task(25, "compact", forceTimeChunkLock=False)
    for seg in segs:
        services.lock_try_acquire(
            task=c,
            interval=seg.interval,
            lock_type="EXCLUSIVE",
            granularity="SEGMENT",
            partition=seg.partition,
            version=seg.version,
        )
    with pytest.raises(services.ServiceError, match="time-chunk locks"):
        services.segments_allocate_overwrite(
            task=c, input_segment_ids=[s.id for s in segs], count=1
        )


def test_publish_refuses_segments_outside_the_tasks_locks_and_publishes_nothing():
    t = task(50)
    services.lock_acquire(task=t, interval=DAY)
    alloc = services.segments_allocate(task=t, interval=DAY, count=1, append=False)
    good = services.NewSegment(interval=DAY, version=alloc.version, partition=0, core_partitions=1)
    bad = services.NewSegment(
        interval=day(2), version=alloc.version, partition=0, core_partitions=1
    )
    with pytest.raises(services.PublishError, match="holds no lock"):
        services.segments_publish(task=t, segments=[good, bad])
    assert not Segment.objects.exists()
    assert not CommitLogEntry.objects.exists()
    assert TaskLock.objects.filter(task=t).exists()  # still held: the task may retry or fail


def test_waiting_tasks_are_served_first_come_first_served():
    holder, first, second = task(50), task(50), task(50)
    services.lock_acquire(task=holder, interval=DAY)
    assert services.lock_try_acquire(task=first, interval=DAY) is None
    services.task_finish(task_id=holder.id, status=TaskStatus.SUCCESS)
    # `second` arrives after `first` queued: it waits behind it
    assert services.lock_try_acquire(task=second, interval=DAY) is None
    second.refresh_from_db()
    assert second.waiting_on[0]["task"] == first.id
    assert services.lock_try_acquire(task=first, interval=DAY)


def test_commit_log_rebuilds_the_timeline_as_of_any_entry():
    t1 = task(50)
    services.lock_acquire(task=t1, interval=DAY)
    publish(t1)
    seq1 = selectors.last_commit_seq(datasource=DS)
    t2 = task(50)
    services.lock_acquire(task=t2, interval=DAY)
    publish(t2)
    v1, v2 = sorted(Segment.objects.values_list("version", flat=True))
    now = selectors.timeline_for(datasource=DS)
    assert [ref.version for _, ref in now.lookup(DAY)] == [v2]
    past = selectors.timeline_for(datasource=DS, as_of=seq1)
    assert [ref.version for _, ref in past.lookup(DAY)] == [v1]
    services.segments_mark_used(datasource=DS, used=False, interval=DAY)
    assert selectors.timeline_for(datasource=DS).lookup(DAY) == []
    kinds = list(CommitLogEntry.objects.values_list("kind", flat=True))
    assert kinds == ["publish", "publish", "mark_unused"]
    assert format_ts(DAY.start) in Segment.objects.first().id


def test_a_pending_partition_of_a_failed_task_is_not_reused():
    t = task(50)
    services.lock_acquire(task=t, interval=DAY)
    services.segments_allocate(task=t, interval=DAY, count=2, append=True)
    services.task_finish(task_id=t.id, status=TaskStatus.FAILED, error="boom")
    t2 = task(50)
    services.lock_acquire(task=t2, interval=DAY)
    alloc = publish(t2, append=True)
    assert alloc.partitions == (0,) or alloc.version != "1970-01-01T00:00:00.000Z"
    assert PendingSegment.objects.filter(task=t).count() == 2


def test_replace_carries_an_append_made_at_a_coarser_granularity_meanwhile():
    """Once refused (the append would have been hidden); now the DAY append is
    carried onto the replace's HOUR chunk: a copy sharing its file, at the
    hour's interval, shows its rows in that hour; elsewhere it shows as is."""
    base = task(50)
    services.lock_acquire(task=base, interval=DAY)
    publish(base)
    replace = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=replace, interval=DAY, lock_type="REPLACE")
    append = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=append, interval=DAY, lock_type="APPEND")
    publish(append, append=True)  # a DAY segment, committed while the replace runs
    hour = Interval(DAY.start, DAY.start + timedelta(hours=1))
    alloc = services.segments_allocate(task=replace, interval=hour, count=1, append=False)
    services.segments_publish(
        task=replace,
        segments=[
            services.NewSegment(
                interval=hour, version=alloc.version, partition=0, core_partitions=1
            )
        ],
    )
    appended = Segment.objects.get(created_by=append)
    (copy,) = Segment.objects.filter(upgraded_from=appended.id)
    assert (copy.interval, copy.version, copy.location) == (hour, alloc.version, appended.location)
    pieces = {(piece, ref.id) for piece, ref in selectors.timeline_for(datasource=DS).lookup(DAY)}
    rest = Interval(hour.end, DAY.end)
    assert (hour, copy.id) in pieces and (rest, appended.id) in pieces


def test_appends_racing_into_a_chunk_whose_epoch_append_failed_share_one_fresh_version():
    failed = task(50)
    services.lock_acquire(task=failed, interval=DAY, lock_type="APPEND")
    services.segments_allocate(task=failed, interval=DAY, count=1, append=True)
    services.task_finish(task_id=failed.id, status=TaskStatus.FAILED, error="boom")
    first, second = task(50), task(50)
    for t in (first, second):
        assert services.lock_try_acquire(task=t, interval=DAY, lock_type="APPEND")
    a = services.segments_allocate(task=first, interval=DAY, count=1, append=True)
    b = services.segments_allocate(task=second, interval=DAY, count=1, append=True)
    assert a.version == b.version != "1970-01-01T00:00:00.000Z"
    assert set(a.partitions).isdisjoint(b.partitions)
    publish(first, append=True)
    publish(second, append=True)
    visible = {ref.id for _, ref in selectors.timeline_for(datasource=DS).lookup(DAY)}
    assert visible == set(Segment.objects.filter(used=True).values_list("id", flat=True))
    assert len(visible) == 2


def test_batch_allocation_gives_what_one_call_per_request_would():
    rng = random.Random(7)
    for round_ in range(5):
        append = rng.random() < 0.7
        names = "abc" if append else "a"  # an overwrite allocates a chunk's core set once
        requests = [
            services.AllocationRequest(day(rng.randrange(3)), rng.randint(1, 3), rng.choice(names))
            for _ in range(rng.randint(1, 12))
        ]
        one_by_one, batched = task(50), task(50)
        for t, ds in ((one_by_one, f"single{round_}"), (batched, f"batch{round_}")):
            Task.objects.filter(id=t.id).update(datasource=ds)
            t.datasource = ds
            services.lock_acquire(task=t, interval=Interval(day(0).start, day(2).end))
        expected = (
            [
                services.segments_allocate(
                    task=one_by_one,
                    interval=r.interval,
                    count=r.count,
                    append=append,
                    sequence_name=r.sequence_name,
                )
                for r in requests
            ]
            if append
            else None
        )
        got = services.segments_allocate_many(task=batched, requests=requests, append=append)
        again = services.segments_allocate_many(task=batched, requests=requests, append=append)
        assert got == again  # idempotent per (task, sequence name, interval)
        if append:
            assert [(a.interval, a.partitions, a.core_partitions, a.version) for a in got] == [
                (a.interval, a.partitions, a.core_partitions, a.version) for a in expected
            ]
        else:
            lock_version = TaskLock.objects.get(task=batched).version
            assert {a.version for a in got} == {lock_version}
            first = {}
            for r, a in zip(requests, got, strict=True):
                first.setdefault((r.interval, r.sequence_name), a)
                assert a == first[(r.interval, r.sequence_name)]


def test_a_batch_allocates_nothing_when_one_chunk_is_not_locked():
    t = task(50)
    services.lock_acquire(task=t, interval=day(0))
    with pytest.raises(services.PublishError, match="holds no lock covering"):
        services.segments_allocate_many(
            task=t,
            requests=[services.AllocationRequest(day(0), 1), services.AllocationRequest(day(1), 1)],
            append=True,
        )
    assert not PendingSegment.objects.exists()


def test_a_batch_puts_every_append_into_an_abandoned_epoch_chunk_on_one_fresh_version():
    failed = task(50)
    services.lock_acquire(task=failed, interval=DAY, lock_type="APPEND")
    services.segments_allocate(task=failed, interval=DAY, count=1, append=True)
    services.task_finish(task_id=failed.id, status=TaskStatus.FAILED, error="boom")
    t = task(50)
    services.lock_acquire(task=t, interval=DAY, lock_type="APPEND")
    a, b = services.segments_allocate_many(
        task=t,
        requests=[services.AllocationRequest(DAY, 2, "x"), services.AllocationRequest(DAY, 1, "y")],
        append=True,
    )
    assert a.version == b.version != "1970-01-01T00:00:00.000Z"
    assert (a.partitions, b.partitions) == ((0, 1), (2,))
    assert a.version == "1970-01-01T00:00:00.001Z"  # just above EPOCH, fixed width (SPEC §5)


def test_an_overwrite_allocates_a_chunks_core_set_once():
    t = task(50)
    services.lock_acquire(task=t, interval=Interval(day(0).start, day(3).end))
    services.segments_allocate(task=t, interval=DAY, count=2, append=False, sequence_name="a")
    with pytest.raises(services.ServiceError, match="allocates it once"):
        services.segments_allocate(task=t, interval=DAY, count=1, append=False, sequence_name="b")
    with pytest.raises(services.ServiceError, match="allocates the core set of"):
        services.segments_allocate_many(
            task=t,
            requests=[
                services.AllocationRequest(day(3), 1, "a"),
                services.AllocationRequest(day(3), 1, "b"),
            ],
            append=False,
        )
    assert PendingSegment.objects.count() == 2


def test_an_append_into_an_abandoned_epoch_chunk_stays_below_a_running_replace():
    failed = task(50)
    services.lock_acquire(task=failed, interval=DAY, lock_type="APPEND")
    services.segments_allocate(task=failed, interval=DAY, count=1, append=True)
    services.task_finish(task_id=failed.id, status=TaskStatus.FAILED, error="boom")
    replace = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=replace, interval=DAY, lock_type="REPLACE")
    append = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=append, interval=DAY, lock_type="APPEND")
    appended = publish(append, append=True)  # a fresh version, derived after the replace's
    replaced = services.segments_allocate(task=replace, interval=DAY, count=1, append=False)
    assert appended.version < replaced.version
    services.segments_publish(
        task=replace,
        segments=[
            services.NewSegment(
                interval=DAY,
                version=replaced.version,
                partition=0,
                core_partitions=1,
                location="mem://replace",
                num_rows=1,
            )
        ],
    )
    visible = [ref for _, ref in selectors.timeline_for(datasource=DS).lookup(DAY)]
    assert {ref.version for ref in visible} == {replaced.version}
    # The replace's rows and the append's (carried onto the replace's version) are visible.
    locations = set(
        Segment.objects.filter(id__in=[ref.id for ref in visible]).values_list(
            "location", flat=True
        )
    )
    assert locations == {"mem://replace", f"mem://{append.id}/{appended.partitions[0]}"}


def test_a_pending_task_no_worker_started_takes_no_lock():
    t = task(claimed=False)
    assert t.status == TaskStatus.PENDING
    with pytest.raises(services.ServiceError, match="PENDING"):
        services.lock_try_acquire(task=t, interval=DAY)
    assert not TaskLock.objects.filter(task=t).exists()


def test_a_pending_task_allocates_publishes_and_kills_nothing_until_claimed():
    t = task(claimed=False)
    seg = services.NewSegment(
        interval=DAY, version="v", partition=0, core_partitions=1, location="mem://p"
    )
    refused = [
        lambda: services.locks_acquire(task=t, intervals=[DAY], lock_type="EXCLUSIVE"),
        lambda: services.segments_allocate(task=t, interval=DAY, count=1, append=False),
        lambda: services.segments_allocate(task=t, interval=DAY, count=1, append=True),
        lambda: services.segments_allocate_overwrite(task=t, input_segment_ids=[], count=1),
        lambda: services.segments_publish(task=t, segments=[seg]),
        lambda: services.segments_kill(task=t, interval=DAY),
    ]
    for call in refused:
        with pytest.raises(services.TaskNotClaimed, match=f"task {t.id} is PENDING"):
            call()
    assert not TaskLock.objects.filter(task=t).exists()
    assert not PendingSegment.objects.filter(task=t).exists()
    assert not Segment.objects.exists()
    t.refresh_from_db()
    assert t.status == TaskStatus.PENDING  # refused, not queued as WAITING
    # Once a worker claims it, the same task locks.
    assert services.task_claim(task_id=t.id, worker=TEST_WORKER)
    assert services.lock_try_acquire(task=t, interval=DAY)
