"""The nine confirmed row-loss paths of issue 10, each driven through the real
services (rows read back through `selectors.timeline_for`), and the runner's
real steps where the path goes through it."""

from __future__ import annotations

from datetime import timedelta

import pytest

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
    t = running()
    services.locks_acquire(task=t, intervals=[interval], lock_type=lock_type, timeout_ms=0)
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


# --- path 1: a task's intervals are locked at once and each read as of its lock ---------


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
