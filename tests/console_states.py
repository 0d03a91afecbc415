"""One dataSource holding every state the console draws, built through
`metastore.services` only (the test claims its tasks as if it were their worker).

Days of March 2024, one per state:
  01 visible            02 partially overshadowed by an HOUR replace (00-06)
  03 overshadowed       04 overshadowed by a tombstone
  05 incomplete chunk   06 partial atomic update group (segment-lock overwrite)
  07 upgraded copy      08 unused
  09 locked and being written (a running task holds a lock and an allocation;
     another waits for the lock)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from metastore import locking, services
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, TaskStatus

DS = "states"
WORKER = "pytest"


def day(n: int) -> Interval:
    return Interval.parse(f"2024-03-{n:02d}/2024-03-{n + 1:02d}")


@dataclass
class States:
    ids: dict[str, list[str]] = field(default_factory=dict)
    running: str = ""
    waiter: str = ""
    lock_id: int = 0


def _task(spec_for, user=None):
    from metastore.models import Task

    with transaction.atomic():
        task = services.task_submit(spec=spec_for(DS), user=user)
        assert services.task_claim(task_id=task.id, worker=WORKER)
    return Task.objects.get(id=task.id)


def _new(alloc, partition, **kw) -> services.NewSegment:
    return services.NewSegment(
        interval=alloc.interval,
        version=alloc.version,
        partition=partition,
        core_partitions=kw.pop("core", alloc.core_partitions),
        location=f"/deep/{DS}/{alloc.interval.start:%d}/{alloc.version}/{partition}",
        num_rows=kw.pop("rows", 10),
        size_bytes=1000,
        shard_spec={"type": "numbered", "partitionNum": partition},
        **kw,
    )


def _publish(
    spec_for, interval: Interval, chunks: dict[Interval, int], *, only=None, tombstone=False
):
    task = _task(spec_for)
    services.lock_acquire(task=task, interval=interval)
    new = []
    for chunk, count in chunks.items():
        alloc = services.segments_allocate(task=task, interval=chunk, count=count, append=False)
        parts = alloc.partitions if only is None else alloc.partitions[:only]
        for p in parts:
            if tombstone:
                new.append(_new(alloc, p, core=0, rows=0, tombstone=True))
            else:
                new.append(_new(alloc, p))
    entry = services.segments_publish(task=task, segments=new)
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    return list(entry.added)


def build(spec_for, user=None) -> States:
    """`spec_for(datasource)` gives a valid ingestion spec (the tasks' recorded spec)."""
    st = States()
    base = _publish(
        spec_for,
        Interval(day(1).start, day(9).start),
        {day(n): (2 if n in (6,) else 1) for n in (1, 2, 3, 4, 6, 7, 8)},
    )
    by_day = {}
    for sid in base:
        by_day.setdefault(int(sid.split("_")[1][8:10]), []).append(sid)
    st.ids["visible"] = by_day[1]
    st.ids["partial"] = by_day[2]
    st.ids["overshadowed"] = by_day[3]
    st.ids["under_tombstone"] = by_day[4]
    st.ids["aug_base"] = sorted(by_day[6])
    st.ids["upgrade_source_chunk"] = by_day[7]
    # 02: an HOUR replace inside the day
    hours = Interval.parse("2024-03-02T00/2024-03-02T06")
    st.ids["hour"] = _publish(spec_for, hours, {hours: 1})
    # 03: a newer version of the whole day
    st.ids["newer"] = _publish(spec_for, day(3), {day(3): 1})
    # 04: a tombstone replaces the day
    st.ids["tombstone"] = _publish(spec_for, day(4), {day(4): 1}, tombstone=True)
    # 05: two partitions allocated, one published: the chunk is incomplete
    st.ids["incomplete"] = _publish(spec_for, day(5), {day(5): 2}, only=1)
    # 06: a segment-locked overwrite of both partitions publishes one of its two
    task = _task(spec_for)
    from metastore.models import Segment

    base6 = list(Segment.objects.filter(id__in=st.ids["aug_base"]).order_by("partition"))
    for seg in base6:
        services.lock_acquire(
            task=task,
            interval=day(6),
            granularity=locking.SEGMENT,
            partition=seg.partition,
            version=seg.version,
        )
    alloc = services.segments_allocate_overwrite(
        task=task, input_segment_ids=[s.id for s in base6], count=2
    )
    entry = services.segments_publish(
        task=task,
        segments=[
            _new(
                alloc,
                alloc.partitions[0],
                minor_version=alloc.minor_version,
                root_partitions=alloc.root_partitions,
                atomic_update_group=alloc.partitions,
            )
        ],
    )
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    st.ids["partial_aug"] = list(entry.added)
    # 07: an append races a replace; its segment is upgraded onto the replace's version
    appender = _task(spec_for)
    services.lock_acquire(task=appender, interval=day(7), lock_type=locking.APPEND)
    a_alloc = services.segments_allocate(task=appender, interval=day(7), count=1, append=True)
    replacer = _task(spec_for)
    services.lock_acquire(task=replacer, interval=day(7), lock_type=locking.REPLACE)
    r_alloc = services.segments_allocate(task=replacer, interval=day(7), count=1, append=False)
    r_entry = services.segments_publish(
        task=replacer, segments=[_new(r_alloc, r_alloc.partitions[0])]
    )
    services.task_finish(task_id=replacer.id, status=TaskStatus.SUCCESS)
    st.ids["replace7"] = list(r_entry.added)
    j_entry = services.segments_publish(
        task=appender, segments=[_new(a_alloc, a_alloc.partitions[0])]
    )
    services.task_finish(task_id=appender.id, status=TaskStatus.SUCCESS)
    st.ids["append7"] = [s for s in j_entry.added]
    # 08: marked unused by an operator
    services.segments_mark_used(datasource=DS, used=False, segment_ids=by_day[8], user=user)
    st.ids["unused"] = by_day[8]
    # 09: a running task holds a lock and an allocation it has not published
    running = _task(spec_for)
    lock = services.lock_acquire(task=running, interval=day(9))
    services.segments_allocate(task=running, interval=day(9), count=1, append=False)
    st.running = running.id
    st.lock_id = lock.pk
    # ... and another task waits for that lock
    waiter = _task(spec_for)
    assert services.lock_try_acquire(task=waiter, interval=day(9)) is None
    st.waiter = waiter.id
    return st


def commit_adding(datasource: str, segment_ids) -> CommitLogEntry:
    """The one commit that added all of `segment_ids` (a JSON containment lookup
    SQLite lacks, done in Python)."""
    wanted = set(segment_ids)
    (commit,) = [
        c
        for c in CommitLogEntry.objects.filter(datasource=datasource)
        if wanted <= set(c.added or [])
    ]
    return commit
