"""The nine confirmed row-loss paths of issue 10, each driven through the real
services (rows read back through `selectors.timeline_for`), and the runner's
real steps where the path goes through it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from metastore import locking, selectors, services
from metastore.intervals import Interval
from metastore.models import PendingSegment, Segment, Task, TaskLock, TaskStatus

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


def overwrite(interval: Interval, count: int = 1, lock_type: str = locking.EXCLUSIVE) -> Task:
    t = running()
    services.locks_acquire(task=t, intervals=[interval], lock_type=lock_type, timeout_ms=0)
    alloc = services.segments_allocate(task=t, interval=interval, count=count, append=False)
    services.segments_publish(task=t, segments=new_segments(t, alloc))
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
