"""The nine confirmed row-loss paths of issue 10, each driven through the real
services (rows read back through `selectors.timeline_for`), and the runner's
real steps where the path goes through it."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from metastore import locking, selectors, services
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskLock, TaskStatus

pytestmark = pytest.mark.django_db

DS = "loss"
DAY = Interval.parse("2024-01-01/2024-01-02")


def day(n: int) -> Interval:
    return Interval(DAY.start + timedelta(days=n), DAY.start + timedelta(days=n + 1))


def hour(h: int, d: int = 0) -> Interval:
    start = DAY.start + timedelta(days=d, hours=h)
    return Interval(start, start + timedelta(hours=1))


def running(priority: int = 50, **context) -> Task:
    t = services.task_create(
        spec={"context": {"priority": priority, **context}},
        task_type="index_parallel",
        datasource=DS,
        enqueue=False,
    )
    assert services.task_claim(task_id=t.id, worker="test")
    t.refresh_from_db()
    return t


def new_segments(t: Task, alloc: services.Allocation, rows: int = 1) -> list[services.NewSegment]:
    return [
        services.NewSegment(
            interval=alloc.interval,
            version=alloc.version,
            partition=p,
            core_partitions=alloc.core_partitions,
            location=f"mem://{t.id}/{alloc.interval.start:%d%H}/{p}",
            num_rows=rows,
        )
        for p in alloc.partitions
    ]


def overwrite(
    interval: Interval, count: int = 1, lock_type: str = locking.EXCLUSIVE, chunks=None
) -> Task:
    """A task that locks `interval` and publishes `count` segments in each of `chunks`."""
    t = running()
    services.locks_acquire(task=t, intervals=[interval], lock_type=lock_type, timeout_ms=0)
    out = []
    for chunk in chunks or [interval]:
        alloc = services.segments_allocate(task=t, interval=chunk, count=count, append=False)
        out += new_segments(t, alloc)
    services.segments_publish(task=t, segments=out)
    services.task_finish(task_id=t.id, status=TaskStatus.SUCCESS)
    return t


def append(interval: Interval, lock_type: str = locking.EXCLUSIVE) -> services.Allocation:
    """An append of rows in `interval`, locking the chunks they go into as the runner does."""
    t = running()
    layout = services.append_layout(datasource=DS, intervals=[interval])
    chunks = sorted({chunk for _, chunk in layout}, key=lambda c: c.start)
    services.locks_acquire(task=t, intervals=chunks, lock_type=lock_type, timeout_ms=0)
    alloc = services.segments_allocate(task=t, interval=interval, count=1, append=True)
    services.segments_publish(task=t, segments=new_segments(t, alloc))
    services.task_finish(task_id=t.id, status=TaskStatus.SUCCESS)
    return alloc


def visible(interval: Interval = DAY, as_of: int | None = None) -> list[str]:
    """Ids of the visible (non-tombstone) segments over `interval`."""
    return sorted(
        {
            ref.id
            for _, ref in selectors.timeline_for(datasource=DS, as_of=as_of).lookup(interval)
            if not ref.tombstone
        }
    )


def created_by(t: Task) -> list[str]:
    return sorted(Segment.objects.filter(created_by=t).values_list("id", flat=True))


# --- path 4: only an active task acts -----------------------------------------------


def test_a_task_the_janitor_failed_can_no_longer_lock_allocate_or_publish():
    t = running()
    services.locks_acquire(task=t, intervals=[DAY], lock_type=locking.EXCLUSIVE, timeout_ms=0)
    alloc = services.segments_allocate(task=t, interval=DAY, count=1, append=False)
    # The janitor fails the task (its heartbeat went stale) while its worker runs on.
    services.task_finish(task_id=t.id, status=TaskStatus.FAILED, error="no heartbeat")
    with pytest.raises(services.TaskEnded, match="FAILED"):
        services.lock_acquire(task=t, interval=day(1), timeout_ms=0)
    with pytest.raises(services.TaskEnded, match="FAILED"):
        services.locks_acquire(task=t, intervals=[day(1), day(2)], lock_type=locking.EXCLUSIVE)
    with pytest.raises(services.TaskEnded):
        services.segments_allocate(task=t, interval=DAY, count=1, append=True)
    with pytest.raises(services.TaskEnded):
        services.segments_publish(task=t, segments=new_segments(t, alloc))
    assert not TaskLock.objects.exists()
    assert not Segment.objects.exists()
    assert Task.objects.get(id=t.id).status == TaskStatus.FAILED


def test_a_canceled_task_can_no_longer_lock_allocate_publish_or_kill():
    """SPEC §5: a task asked to cancel is no longer active, even while its worker
    has not yet noticed: allocation and kill refuse it as lock and publish do."""
    overwrite(DAY)
    services.segments_mark_used(datasource=DS, used=False, interval=DAY)
    t = running()
    services.locks_acquire(task=t, intervals=[DAY], lock_type=locking.EXCLUSIVE, timeout_ms=0)
    alloc = services.segments_allocate(task=t, interval=DAY, count=1, append=False)
    services.task_cancel(task_id=t.id)
    with pytest.raises(services.TaskCanceled):
        services.locks_acquire(task=t, intervals=[day(1)], lock_type=locking.EXCLUSIVE)
    with pytest.raises(services.TaskCanceled):
        services.segments_allocate(task=t, interval=DAY, count=1, append=False, sequence_name="b")
    with pytest.raises(services.TaskCanceled):
        services.segments_allocate_many(
            task=t, requests=[services.AllocationRequest(DAY, 1, "c")], append=False
        )
    with pytest.raises(services.TaskCanceled):
        services.segments_kill(task=t, interval=DAY)
    with pytest.raises(services.TaskCanceled):
        services.segments_publish(task=t, segments=new_segments(t, alloc))
    assert Segment.objects.filter(used=False).count() == 1  # the unused segment was not killed
    assert created_by(t) == []
    services.task_finish(task_id=t.id, status=TaskStatus.CANCELED)
    assert not TaskLock.objects.exists()


# --- path 1: a task's intervals are locked at once and each read as of its lock ---------


def test_a_kill_task_the_janitor_failed_deletes_nothing():
    overwrite(DAY)
    services.segments_mark_used(datasource=DS, used=False, interval=DAY)
    kill = running(priority=0)
    services.locks_acquire(task=kill, intervals=[DAY], lock_type=locking.EXCLUSIVE, timeout_ms=0)
    services.task_finish(task_id=kill.id, status=TaskStatus.FAILED, error="no heartbeat")
    with pytest.raises(services.TaskEnded, match="FAILED"):
        services.segments_kill(task=kill, interval=DAY)
    assert Segment.objects.filter(used=False).count() == 1


def test_locks_on_several_intervals_are_all_or_nothing():
    holder = running()
    services.locks_acquire(task=holder, intervals=[day(2)], lock_type=locking.EXCLUSIVE)
    replace = running(useConcurrentLocks=True)
    with pytest.raises(services.LockTimeout, match=holder.id):
        services.locks_acquire(
            task=replace, intervals=[day(0), day(2)], lock_type=locking.REPLACE, timeout_ms=300
        )
    # It held nothing while it waited: DAY1 stayed free for others all along.
    assert not TaskLock.objects.filter(task=replace).exists()
    services.task_finish(task_id=holder.id, status=TaskStatus.SUCCESS)
    locks = services.locks_acquire(
        task=replace, intervals=[day(0), day(2)], lock_type=locking.REPLACE, timeout_ms=0
    )
    assert [lk.interval for lk in locks] == [day(0), day(2)]
    assert len({lk.granted_seq for lk in locks}) == 1


def test_two_tasks_locking_the_same_days_in_opposite_order_both_finish():
    """Druid locks a task's intervals one at a time: a task holding DAY1 and
    waiting for DAY2 beside one holding DAY2 and waiting for DAY1 wait on each
    other until taskLockTimeout (5 minutes) fails one. Decided at once, all or
    nothing, one gets both days and the other waits holding neither."""
    a, b = running(), running()
    assert services.locks_try_acquire(
        task=a, intervals=[day(0), day(1)], lock_type=locking.EXCLUSIVE
    )
    assert (
        services.locks_try_acquire(task=b, intervals=[day(1), day(0)], lock_type=locking.EXCLUSIVE)
        is None
    )
    waiting = Task.objects.get(id=b.id)
    assert waiting.status == TaskStatus.WAITING
    assert {blocker["task"] for blocker in waiting.waiting_on} == {a.id}
    assert not TaskLock.objects.filter(task=b).exists()  # DAY2 was not taken meanwhile
    services.task_finish(task_id=a.id, status=TaskStatus.SUCCESS)
    locks = services.locks_try_acquire(
        task=b, intervals=[day(1), day(0)], lock_type=locking.EXCLUSIVE
    )
    assert [lk.interval for lk in locks] == [day(1), day(0)]
    assert Task.objects.get(id=b.id).status == TaskStatus.RUNNING
    services.task_finish(task_id=b.id, status=TaskStatus.SUCCESS)
    assert not TaskLock.objects.exists()


def _lock_both_days_then_end(
    task_id: str, intervals: list[Interval], start: threading.Barrier, ended: dict
) -> None:
    """One racer: lock both days (waiting as long as the default timeout allows),
    hold them a moment, end; record how it ended."""
    try:
        task = Task.objects.get(id=task_id)
        start.wait(timeout=30)
        locks = services.locks_acquire(task=task, intervals=intervals, lock_type=locking.EXCLUSIVE)
        assert [lk.interval for lk in locks] == intervals
        time.sleep(0.05)
        services.task_finish(task_id=task_id, status=TaskStatus.SUCCESS)
        ended[task_id] = "SUCCESS"
    except Exception as exc:  # reported by the test's assertion
        ended[task_id] = repr(exc)
    finally:
        connection.close()  # the thread's own connection


@pytest.mark.django_db(transaction=True)
def test_two_tasks_racing_for_the_same_days_in_opposite_order_both_finish_at_once():
    """The same race in two threads, each task waiting with the default
    taskLockTimeout (300 s): every round both tasks get both days in turn and
    finish within seconds, not after one times out."""
    for _ in range(5):
        tasks = {running().id: [day(0), day(1)], running().id: [day(1), day(0)]}
        start = threading.Barrier(len(tasks))
        ended: dict[str, str] = {}
        threads = [
            threading.Thread(target=_lock_both_days_then_end, args=(task_id, ivs, start, ended))
            for task_id, ivs in tasks.items()
        ]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert ended == {task_id: "SUCCESS" for task_id in tasks}
        assert time.monotonic() - began < 60  # far below the 300 s lock timeout
    assert not TaskLock.objects.exists()


def test_append_committing_into_a_later_interval_is_read_or_carried_never_lost():
    """The REPLACE task asks for DAY1 and DAY3 at once; an append commits into
    DAY3 after the grant: it is carried onto the replace's version."""
    base = overwrite(Interval(day(0).start, day(3).end), chunks=[day(n) for n in range(3)])
    replace = running(useConcurrentLocks=True)
    locks = services.locks_acquire(
        task=replace, intervals=[day(0), day(2)], lock_type=locking.REPLACE, timeout_ms=0
    )
    appended = append(day(2), lock_type=locking.APPEND)
    # The replace reads each interval as of its lock: the append is not in its input.
    read = {
        ref.id
        for lk in locks
        for _, ref in selectors.timeline_for(datasource=DS, as_of=lk.granted_seq).lookup(
            lk.interval
        )
    }
    assert read == {s for s in created_by(base) if "2024-01-02T" not in s.split("_")[1]}
    out = []
    for lk in locks:
        alloc = services.segments_allocate(
            task=replace, interval=lk.interval, count=1, append=False
        )
        out += new_segments(replace, alloc)
    services.segments_publish(task=replace, segments=out)
    upgraded = Segment.objects.filter(upgraded_from__startswith=f"{DS}_").values_list(
        "upgraded_from", flat=True
    )
    assert list(upgraded) == [Segment.make_id(DS, day(2), appended.version, appended.partitions[0])]
    on_day3 = visible(day(2))
    assert len(on_day3) == 2 and all(s.startswith(f"{DS}_{day(2).start:%Y-%m-%d}") for s in on_day3)


# --- path 8: publish accepts only what was allocated to the task ---------------------


def test_publish_refuses_a_partition_never_allocated_at_the_locks_version():
    t = running()
    (lock,) = services.locks_acquire(task=t, intervals=[DAY], lock_type=locking.EXCLUSIVE)
    alloc = services.segments_allocate(task=t, interval=DAY, count=1, append=False)
    stray = services.NewSegment(
        interval=DAY, version=lock.version, partition=5, core_partitions=1, location="mem://x"
    )
    with pytest.raises(services.PublishError, match="not allocated"):
        services.segments_publish(task=t, segments=[*new_segments(t, alloc), stray])
    assert not Segment.objects.exists()


def test_an_append_locked_task_never_publishes_at_its_locks_version():
    base = overwrite(DAY)
    t = running(useConcurrentLocks=True)
    (lock,) = services.locks_acquire(task=t, intervals=[DAY], lock_type=locking.APPEND)
    with pytest.raises(services.ServiceError, match="APPEND"):
        services.segments_allocate(task=t, interval=DAY, count=1, append=False)
    overwriting = services.NewSegment(
        interval=DAY, version=lock.version, partition=0, core_partitions=1, location="mem://o"
    )
    with pytest.raises(services.PublishError):
        services.segments_publish(task=t, segments=[overwriting])
    assert visible() == created_by(base)


def kill(interval: Interval) -> None:
    t = services.task_create(spec={}, task_type="kill", datasource=DS, enqueue=False)
    services.task_claim(task_id=t.id, worker="test")
    services.locks_acquire(task=t, intervals=[interval], lock_type=locking.EXCLUSIVE)
    services.segments_kill(task=t, interval=interval)
    services.task_finish(task_id=t.id, status=TaskStatus.SUCCESS)


# --- path 5: an append goes into the visible chunk, not the highest used version -----


def test_append_lands_in_the_visible_version_not_a_newer_incomplete_one():
    v1 = overwrite(DAY)
    v2 = overwrite(DAY, count=2)
    services.segments_mark_used(datasource=DS, used=False, segment_ids=created_by(v2)[:1])
    assert visible() == created_by(v1)  # v2 is incomplete: v1 shows
    alloc = append(DAY)
    assert alloc.version == Segment.objects.get(id=created_by(v1)[0]).version
    assert len(visible()) == 2 and set(created_by(v1)) < set(visible())


# --- path 6: append versions stay of fixed width ------------------------------------


def test_ten_append_after_mark_unused_cycles_keep_a_fixed_width_version():
    versions = []
    for _ in range(11):
        alloc = append(DAY)
        versions.append(alloc.version)
        assert visible() == [Segment.make_id(DS, DAY, alloc.version, alloc.partitions[0])]
        services.segments_mark_used(datasource=DS, used=False, interval=DAY)
    assert {len(v) for v in versions} == {len("1970-01-01T00:00:00.000Z")}
    assert versions == sorted(set(versions))


# --- path 7: upgraded copies are allocations too -----------------------------------


def test_a_new_append_never_reuses_the_id_of_a_killed_upgraded_copy():
    overwrite(DAY)
    replace = running(useConcurrentLocks=True)
    services.locks_acquire(task=replace, intervals=[DAY], lock_type=locking.REPLACE)
    append(DAY, lock_type=locking.APPEND)
    alloc = services.segments_allocate(task=replace, interval=DAY, count=1, append=False)
    entry = services.segments_publish(task=replace, segments=new_segments(replace, alloc))
    (copy,) = Segment.objects.exclude(upgraded_from="")
    as_replaced = visible(as_of=entry.seq)
    assert copy.id in as_replaced
    services.segments_mark_used(datasource=DS, used=False, segment_ids=[copy.id])
    kill(DAY)
    late = append(DAY)
    assert late.version == copy.version and copy.partition not in late.partitions
    late_id = Segment.make_id(DS, DAY, late.version, late.partitions[0])
    # Time travel to the replace's commit never shows the later append's rows
    # (the killed copy is gone from history; nothing takes its place).
    assert late_id not in visible(as_of=entry.seq)
    assert set(visible(as_of=entry.seq)) <= set(as_replaced)
    assert late_id in visible()


# --- path 3: concurrent appends at two granularities never share a version -----------


def test_day_and_hour_appends_into_an_empty_interval_never_overlap_at_one_version():
    day_task = running(useConcurrentLocks=True)
    services.locks_acquire(task=day_task, intervals=[DAY], lock_type=locking.APPEND)
    day_alloc = services.segments_allocate(task=day_task, interval=DAY, count=1, append=True)
    hour_task = running(useConcurrentLocks=True)
    services.locks_acquire(task=hour_task, intervals=[hour(3)], lock_type=locking.APPEND)
    # Its rows would go into the DAY chunk the running append writes; its lock does not cover it.
    with pytest.raises(services.ServiceError, match="do not cover"):
        services.segments_allocate(task=hour_task, interval=hour(3), count=1, append=True)
    # Locking the chunk its rows go into (as the runner does), it joins that chunk.
    services.locks_acquire(task=hour_task, intervals=[DAY], lock_type=locking.APPEND)
    hour_alloc = services.segments_allocate(task=hour_task, interval=hour(3), count=1, append=True)
    assert (hour_alloc.interval, hour_alloc.version) == (DAY, day_alloc.version)
    assert hour_alloc.partitions != day_alloc.partitions
    services.segments_publish(task=day_task, segments=new_segments(day_task, day_alloc))
    services.segments_publish(task=hour_task, segments=new_segments(hour_task, hour_alloc))
    assert visible() == sorted(created_by(day_task) + created_by(hour_task))


def test_a_day_append_beside_a_running_hour_append_lands_at_hour_granularity():
    """A DAY append into an empty day where an HOUR append is running: its rows
    go into that HOUR chunk in hour 3 and into HOUR chunks of their own elsewhere
    (never a DAY chunk over the running HOUR one at the same version, never
    refused); both publish and every segment is visible."""
    hour_task = running(useConcurrentLocks=True)
    services.locks_acquire(task=hour_task, intervals=[hour(3)], lock_type=locking.APPEND)
    hour_alloc = services.segments_allocate(task=hour_task, interval=hour(3), count=1, append=True)
    day_task = running(useConcurrentLocks=True)
    # As one piece it is still refused: its rows go into 24 chunks.
    services.locks_acquire(task=day_task, intervals=[DAY], lock_type=locking.APPEND)
    with pytest.raises(services.ServiceError, match="split them by the append layout"):
        services.segments_allocate(task=day_task, interval=DAY, count=1, append=True)
    layout = services.append_layout(datasource=DS, intervals=[DAY])
    assert [piece for piece, _ in layout] == [hour(h) for h in range(24)]
    assert all(piece == chunk for piece, chunk in layout)
    services.locks_acquire(
        task=day_task, intervals=[c for _, c in layout], lock_type=locking.APPEND
    )
    allocs = services.segments_allocate_many(
        task=day_task,
        requests=[services.AllocationRequest(piece, 1) for piece, _ in layout],
        append=True,
    )
    assert {(a.interval, a.version) for a in allocs} == {
        (hour(h), hour_alloc.version) for h in range(24)
    }
    assert allocs[3].partitions != hour_alloc.partitions
    services.segments_publish(
        task=day_task, segments=[s for a in allocs for s in new_segments(day_task, a)]
    )
    services.segments_publish(task=hour_task, segments=new_segments(hour_task, hour_alloc))
    assert visible() == sorted(created_by(day_task) + created_by(hour_task))
    assert len(visible()) == 25


def test_a_day_append_beside_a_running_hour_append_in_tc_mode_waits_for_its_hour():
    hour_task = running()
    services.locks_acquire(task=hour_task, intervals=[hour(3)], lock_type=locking.EXCLUSIVE)
    services.segments_allocate(task=hour_task, interval=hour(3), count=1, append=True)
    layout = services.append_layout(datasource=DS, intervals=[DAY])
    assert [piece for piece, _ in layout] == [hour(h) for h in range(24)]
    day_task = running()
    with pytest.raises(services.LockTimeout):
        services.locks_acquire(
            task=day_task,
            intervals=[c for _, c in layout],
            lock_type=locking.EXCLUSIVE,
            timeout_ms=0,
        )
    assert not TaskLock.objects.filter(task=day_task).exists()


# --- path 9: late data lands in the chunk visible at its timestamp -------------------


def test_late_day_data_after_a_month_compaction_lands_in_the_month_chunk():
    month = Interval.parse("2024-01-01/2024-02-01")
    compacted = overwrite(month)
    alloc = append(day(4))
    assert alloc.interval == month
    assert visible(month) == sorted(
        created_by(compacted) + [Segment.make_id(DS, month, alloc.version, alloc.partitions[0])]
    )


# --- path 2: a DAY append beside an HOUR replace is never hidden --------------------


def test_a_day_append_allocated_before_an_hour_replace_publishes_stays_visible():
    """Found by the randomized histories: the append allocates its DAY chunk, a
    REPLACE over the day publishes HOUR chunks (tombstones where it has no rows),
    then the append publishes: it is carried onto every HOUR chunk over it."""
    overwrite(DAY)
    appender = running(useConcurrentLocks=True)
    services.locks_acquire(task=appender, intervals=[DAY], lock_type=locking.APPEND)
    alloc = services.segments_allocate(task=appender, interval=DAY, count=1, append=True)
    replace = running(useConcurrentLocks=True)
    services.locks_acquire(task=replace, intervals=[DAY], lock_type=locking.REPLACE)
    hours = []
    for h in range(24):
        a = services.segments_allocate(task=replace, interval=hour(h), count=1, append=False)
        hours.append(
            services.NewSegment(
                interval=a.interval,
                version=a.version,
                partition=0,
                core_partitions=0,
                tombstone=True,
            )
        )
    services.segments_publish(task=replace, segments=hours)
    services.segments_publish(task=appender, segments=new_segments(appender, alloc))
    appended = Segment.objects.get(created_by=appender, upgraded_from="")
    copies = Segment.objects.filter(upgraded_from=appended.id)
    assert sorted(c.interval.start.hour for c in copies) == list(range(24))
    assert all(c.location == appended.location for c in copies)
    assert len(visible()) == 24  # the appended rows, hour by hour; the old day is replaced
