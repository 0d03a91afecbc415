"""Where an append goes, which partition numbers are free, and what a publish
may contain (SPEC §5), free of Django and Spark.

The services read the facts (inside the dataSource's critical section, partly
in hand-written SQL for speed) and ask these functions what to do, the way the
lock box asks `metastore.locking.decide`; tests/test_allocation_reference.py
checks the services' answers against these functions on random histories.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from metastore.intervals import Interval

EPOCH_VERSION = "1970-01-01T00:00:00.000Z"
# Root partition numbers stay below this; segment-lock overwrites use the range above.
NON_ROOT_PARTITION_START = 32768

TIME_CHUNK = "TIME_CHUNK"
SEGMENT = "SEGMENT"
APPEND = "APPEND"


class AllocationRefused(Exception):
    """An append cannot be placed without hiding rows; the message is for people."""


@dataclass(frozen=True)
class ChunkFacts:
    """What allocation knows of one chunk `(interval, version)` overlapping a request.

    `top_root` is the highest root partition number (below 32768) ever
    published, upgraded or allocated there, used or not; None if none.
    """

    interval: Interval
    version: str
    core: int = 0
    top_root: int | None = None
    running_append: bool = False  # handed to an append that is still running
    history: bool = True  # any segment or allocation ever recorded there


@dataclass(frozen=True)
class AppendTarget:
    """The chunk an append's rows go into, and its partition numbers."""

    interval: Interval
    version: str
    core: int
    next_partition: int


def next_partition(core: int, top_root: int | None) -> int:
    """The first free root partition number of a chunk: after the highest ever
    handed out there (never reuse a number, even of an unused or killed
    segment), and never inside the core set."""
    return max(core, -1 if top_root is None else top_root + 1)


def _parse_version(version: str) -> datetime:
    return datetime.strptime(version, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _format_version(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def fresh_version(above: Iterable[str], below: Iterable[str]) -> str:
    """A version of the fixed ISO width that sorts strictly below every version
    in `below` (running locks' versions) and strictly above every version in
    `above` (what overlapping chunks ever used) that is below them: one
    millisecond past the highest such. Raises AllocationRefused when there is
    no room."""
    below = list(below)
    lowest = min(below, default=None)
    # Chunks a running lock will publish at (its own pending allocations) lie
    # above by design; the fresh version goes between the rest and them.
    highest = max((v for v in above if lowest is None or v < lowest), default=EPOCH_VERSION)
    try:
        candidate = _format_version(_parse_version(highest) + timedelta(milliseconds=1))
    except ValueError:  # a version written by hand in another shape
        raise AllocationRefused(f"cannot derive a version above {highest!r}") from None
    if lowest is not None and candidate >= lowest:
        raise AllocationRefused(
            f"no append version fits between {highest} and the running lock's {lowest}"
        )
    return candidate


def append_target(
    *,
    interval: Interval,
    visible: Sequence[tuple[Interval, Interval, str]],
    chunks: Sequence[ChunkFacts],
    running_lock_versions: Iterable[str] = (),
) -> AppendTarget:
    """Where an append whose rows lie in `interval` goes (SPEC §5).

    `visible`: the timeline's visible pieces over `interval`, as (piece, chunk
    interval, chunk version). `chunks`: every chunk overlapping `interval`.

    1. The chunk visible over the whole of `interval` wins, whatever its
       granularity: late data after a replace or compaction lands, visibly.
    2. Rows that would straddle visible chunks, or lie partly under one, are
       refused: no single chunk holds them without hiding some.
    3. Nothing visible: the chunk of a running append that contains
       `interval` (two chunks of one version never overlap); one that only
       overlaps it is refused for the same reason.
    4. Else `interval` at EPOCH, unless some chunk overlapping it has history
       at EPOCH (a killed or abandoned EPOCH chunk): then a fresh fixed-width
       version above every overlapping chunk's and below every running lock's.
    """
    by_key = {(c.interval, c.version): c for c in chunks}

    def target(chunk_interval: Interval, version: str) -> AppendTarget:
        facts = by_key.get((chunk_interval, version), ChunkFacts(chunk_interval, version))
        return AppendTarget(
            chunk_interval, version, facts.core, next_partition(facts.core, facts.top_root)
        )

    if visible:
        owners = {(chunk, version) for _, chunk, version in visible}
        if len(owners) == 1 and _union_covers({p for p, _, _ in visible}, interval):
            chunk, version = owners.pop()
            if chunk.contains(interval):
                return target(chunk, version)
        names = ", ".join(f"{c} v{v}" for c, v in sorted(owners, key=lambda o: o[0].start))
        raise AllocationRefused(
            f"cannot append {interval}: its rows would straddle the visible chunks {names}; "
            "append at their segment granularity"
        )
    running = [c for c in chunks if c.running_append and c.interval.overlaps(interval)]
    for c in sorted(running, key=lambda c: c.version):
        if c.interval.contains(interval):
            return target(c.interval, c.version)
    if running:
        c = running[0]
        raise AllocationRefused(
            f"cannot append {interval}: a running append is writing {c.interval} "
            "at another segment granularity; append at that granularity"
        )
    overlapping = [c for c in chunks if c.interval.overlaps(interval) and c.history]
    if not any(c.version == EPOCH_VERSION for c in overlapping):
        return target(interval, EPOCH_VERSION)
    version = fresh_version((c.version for c in overlapping), running_lock_versions)
    return target(interval, version)


def _union_covers(pieces: Iterable[Interval], interval: Interval) -> bool:
    reached = interval.start
    for piece in sorted(pieces, key=lambda p: p.start):
        if piece.start > reached:
            return False
        reached = max(reached, piece.end)
    return reached >= interval.end


@dataclass(frozen=True)
class HeldLock:
    """One of the publishing task's unrevoked locks."""

    interval: Interval
    type: str
    granularity: str
    version: str
    partition: int | None = None


@dataclass(frozen=True)
class Published:
    """One segment a task asks to publish."""

    interval: Interval
    version: str
    partition: int
    minor_version: int = 0


def publish_refusal(
    *,
    task_id: str,
    segment: Published,
    locks: Sequence[HeldLock],
    allocated: set[tuple[Interval, str, int]],
) -> str | None:
    """Why `segment` may not be published by the task, or None (SPEC §5).

    A publish contains only segments allocated to the task (its upgrades are
    computed by the publish itself); each lies under one of its unrevoked
    time-chunk locks or, for a segment-locked task, in a chunk it holds
    segment locks on; and a task holding only APPEND locks never publishes at
    one of its locks' own versions (that would overwrite the interval)."""
    where = f"{segment.interval} v{segment.version} p{segment.partition}"
    key = (segment.interval, segment.version, segment.partition)
    time_chunk = [
        lk
        for lk in locks
        if lk.granularity == TIME_CHUNK and lk.interval.contains(segment.interval)
    ]
    segment_locks = [
        lk
        for lk in locks
        if lk.granularity == SEGMENT
        and lk.interval == segment.interval
        and lk.version == segment.version
    ]
    if time_chunk:
        if all(lk.type == APPEND for lk in locks if lk.granularity == TIME_CHUNK) and any(
            lk.version == segment.version for lk in time_chunk
        ):
            return (
                f"cannot publish {where}: task {task_id} holds only APPEND locks and may "
                "not publish at a lock's own version"
            )
        if key not in allocated:
            return f"cannot publish {where}: it was not allocated to this task"
        return None
    if segment_locks:
        if key not in allocated:
            return f"cannot publish {where}: it was not allocated to this task"
        if segment.minor_version == 0 and not any(
            lk.partition == segment.partition for lk in segment_locks
        ):
            return f"cannot publish {where}: task {task_id} holds no lock on it"
        return None
    return f"cannot publish {where}: task {task_id} holds no lock covering it"
