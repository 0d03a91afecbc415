"""The steps every task type shares: lock planning, reading as of a grant,
shard specs, staging files into deep storage, progress phases and publishing
exactly once.

Ingestion (`workers.runner`) and compaction (`workers.compaction`) both build on
these; neither imports the other's module.
"""

from __future__ import annotations

import logging
import shutil
import time
from datetime import timedelta
from pathlib import Path

from django.db import InterfaceError, OperationalError, connection

from metastore import locking, services
from metastore.intervals import Granularity, Interval
from metastore.models import CommitKind, CommitLogEntry, Task, TaskLock
from workers.jobs.compact import file_schema
from workers.paths import deep_storage_dir

log = logging.getLogger("workers.runner")


# How long the runner waits for the database to come back (a restart, a failover)
# to record a task's end or learn whether its publish committed.
DB_RECOVERY_S = 60.0


def into_deep_storage(
    staged: str | Path,
    *,
    datasource: str,
    interval: Interval,
    version: str,
    partition: int,
    ingestion,
    moved: list[Path],
) -> tuple[Path, dict]:
    """Move a staged segment file to its place in deep storage, recording its
    directory in `moved` (removed again unless the task publishes); its path
    there and its schema (read before the move, under `ingestion`'s metrics,
    rollup and query granularity)."""
    target_dir = deep_storage_dir(datasource, interval, version, partition)
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / "data.parquet"
    schema = file_schema(
        staged,
        metrics=ingestion.metrics,
        rollup=ingestion.rollup,
        query_granularity=ingestion.query_granularity,
    )
    moved.append(target_dir)
    shutil.move(staged, target)
    return target, schema


def retrying_db(call, timeout_s: float = DB_RECOVERY_S):
    """`call()`, retried while the database is unreachable (OperationalError,
    InterfaceError), with a fresh connection each time."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            log.warning("database unreachable; retrying", exc_info=True)
            connection.close()
            time.sleep(0.5)


def publish_once(task: Task, new_segments: list, note: str = "") -> CommitLogEntry:
    """Publish; if the connection drops during it (e.g. PostgreSQL restarts at
    COMMIT), find out once the database is back whether the commit happened: a
    committed publish is a success whose files must stay, an uncommitted one a
    failure whose files go. Never publish twice."""
    try:
        return services.segments_publish(task=task, segments=new_segments, note=note)
    except (OperationalError, InterfaceError):
        log.warning("connection lost while %s published; checking whether it committed", task.id)
        connection.close()
        committed = retrying_db(
            lambda: CommitLogEntry.objects.filter(task_id=task.id, kind=CommitKind.PUBLISH).first()
        )
        if committed is None:
            raise
        log.warning("the publish of %s had committed (commit %s)", task.id, committed.seq)
        return committed


_LAST_INSTANT = timedelta(microseconds=1)


def lock_intervals(
    intervals: list[Interval], granularity: str, *, touching: bool = True
) -> list[Interval]:
    """Intervals widened to segment-granularity boundaries and merged where they
    overlap, and where they touch unless `touching` is false."""
    gran = Granularity.from_name(granularity)
    widened = []
    for iv in intervals:
        # The first and last buckets only: an interval of many (an open-ended
        # one clipped to years of data) is not cut into all of them.
        first = next(iter(gran.iter_buckets(iv)))
        last = gran.bucket(max(iv.start, iv.end - _LAST_INSTANT))
        widened.append(Interval(first.start, last.end))
    return merge_intervals(widened, touching=touching)


def lock_plan(
    datasource: str, intervals: list[Interval], granularity: str, append: bool
) -> list[Interval]:
    """The intervals a task locks, all at once: its intervals widened to its
    segment granularity; an append also covers the chunks its rows go into
    now (`services.append_layout`), which may be wider (SPEC §5). An append's
    locks stay one per chunk where chunks only touch: an APPEND lock merged over
    several days would conflict with (and, at a higher priority, revoke) a
    compaction's REPLACE lock on one of them, which only needs to contain it."""
    wanted = lock_intervals(intervals, granularity, touching=not append)
    if append:
        layout = services.append_layout(datasource=datasource, intervals=wanted)
        wanted = merge_intervals(wanted + [chunk for _, chunk in layout], touching=False)
    return wanted


def append_layout(datasource: str, buckets: list[Interval]) -> dict[Interval, list[tuple]]:
    """For each of an append's buckets, the (piece, chunk interval) pairs its rows
    split into now: one per chunk they go into (`services.append_layout`)."""
    return {
        bucket: services.append_layout(datasource=datasource, intervals=[bucket])
        for bucket in buckets
    }


def append_pieces(datasource: str, buckets: list[Interval]) -> dict[Interval, list[Interval]]:
    """For each of an append's buckets, the pieces its rows split into: one per
    chunk they go into (`services.append_layout`); a bucket inside one chunk is
    one piece, itself."""
    return {
        bucket: [piece for piece, _ in layout]
        for bucket, layout in append_layout(datasource, buckets).items()
    }


def append_needs_replan(
    task: Task, buckets: list[Interval], pieces: dict[Interval, list[Interval]]
) -> bool:
    """After allocation refused an append's pieces: whether planning and locking
    again can place them. Either the layout changed since `pieces` were split
    (a replace published chunks over its rows), or its rows now go into a chunk
    its time-chunk locks do not cover (an append at another granularity
    allocated a wider chunk over them meanwhile, e.g. a DAY at EPOCH over an
    HOUR append's locked hour). Both are legitimate concurrent histories:
    the runner splits again and locks the new chunks (`lock_plan`)."""
    layout = append_layout(task.datasource, buckets)
    if {bucket: [piece for piece, _ in pairs] for bucket, pairs in layout.items()} != pieces:
        return True
    held = [
        lk.interval
        for lk in TaskLock.objects.filter(
            task_id=task.id, granularity=locking.TIME_CHUNK, revoked=False
        )
    ]
    chunks = {chunk for pairs in layout.values() for _, chunk in pairs}
    return bool(held) and any(not any(h.contains(c) for h in held) for c in chunks)


def read_points(locks: list[TaskLock]) -> list[tuple[Interval, int]]:
    """(locked interval, commit seq) pairs: a task reads each interval it
    rewrites as of its own lock's grant (SPEC §5)."""
    return [(lk.interval, lk.granted_seq) for lk in locks if lk.granularity == locking.TIME_CHUNK]


def read_as_of_report(points: list[tuple[Interval, int]]) -> list[dict]:
    """The report's `readAsOf`: for each interval a replace or compaction
    rewrites, the commit seq as of which it took its input (its lock's grant).
    What committed there up to that seq is what it replaces; what commits
    there later (appends under concurrent locks) is carried onto its version,
    not read. SPEC §8's serial replay needs exactly this."""
    seen: dict[tuple[str, int], dict] = {}
    for interval, seq in sorted(points, key=lambda p: (p[0].start, p[0].end, p[1])):
        seen.setdefault((str(interval), seq), {"interval": str(interval), "seq": seq})
    return list(seen.values())


def merge_intervals(intervals: list[Interval], *, touching: bool = True) -> list[Interval]:
    """Intervals merged where they overlap (and where they touch, unless `touching`
    is false), in time order."""
    merged: list[Interval] = []
    for iv in sorted(intervals, key=lambda iv: iv.start):
        if merged and (iv.start < merged[-1].end or (touching and iv.start == merged[-1].end)):
            merged[-1] = Interval(merged[-1].start, max(merged[-1].end, iv.end))
        else:
            merged.append(iv)
    return merged


# Where each phase's progress lies in the task's 0..1 progress.
SINGLE_PASS_SPANS = {"phase 1": (0.02, 0.83)}
TWO_PHASE_SPANS = {"phase 1": (0.02, 0.5), "phase 2": (0.52, 0.35)}


def shard_spec(template: dict, partition: int, core_partitions: int) -> dict:
    """A staged segment's shard spec completed with its allocated partition number."""
    shard = {"partitionNum": partition, **template}
    if shard["type"] == "numbered":
        shard["partitions"] = core_partitions
    else:
        shard["numCorePartitions"] = core_partitions
    return shard
