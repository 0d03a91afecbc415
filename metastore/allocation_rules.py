"""Where an append goes, which partition numbers are free, and what a publish
may contain (SPEC §5), free of Django and Spark.

The services read the facts (inside the dataSource's critical section, partly
in hand-written SQL for speed) and ask these functions what to do, the way the
lock box asks `metastore.locking.decide`; tests/test_allocation_reference.py
checks the services' answers against these functions on random histories.

Why an append whose rows go into a MONTH chunk waits while a compaction
rewrites some of its DAYs (and is not placed elsewhere): the append's APPEND
lock on the MONTH overlaps the compaction's REPLACE locks on the DAYs, so it
waits (up to its taskLockTimeout) and then lands in the compaction's DAY
chunks. Every other place for those rows loses them in some outcome:
- the MONTH chunk at its version, committed while the compaction runs: the
  compaction's DAY chunks (newer) overshadow that day of the MONTH, and its
  publish upgrades only appended segments its locks contain
  (`services.publish._replace_upgrades`), not a MONTH-wide one, so the rows
  vanish;
- a DAY chunk above the MONTH's version: it overshadows the MONTH's other
  rows of that day until the compaction publishes (SPEC §8: visible rows
  change only by commits of tasks that meant to change them);
- a DAY chunk below the MONTH's version, for the compaction to carry: hidden
  under the MONTH until then, and for ever if the compaction fails.
The first becomes safe if a replace's publish also upgrades appended segments
its locks only overlap (a copy per chunk of the replace, read only inside it,
as `_append_carry_overs` already does when the append publishes last) and
`locking.decide` then grants an APPEND lock over an interval partly
REPLACE-locked; until both, waiting is the safe answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from metastore.intervals import Interval
from metastore.locking import APPEND, SEGMENT, TIME_CHUNK

# The version of appends into an empty chunk (SPEC §2); the one definition.
EPOCH_VERSION = "1970-01-01T00:00:00.000Z"
# Root partition numbers stay below this; segment-lock overwrites use the range above.
NON_ROOT_PARTITION_START = 32768


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


def append_layout(
    *,
    interval: Interval,
    visible: Sequence[tuple[Interval, Interval, str]],
    chunks: Sequence[ChunkFacts],
    running_lock_versions: Iterable[str] = (),
) -> list[tuple[Interval, AppendTarget]]:
    """Where an append's rows in `interval` go, piece by piece, in time order (SPEC §5).

    `visible`: the timeline's visible pieces over `interval`, as (piece, chunk
    interval, chunk version). `chunks`: every chunk overlapping `interval`.

    1. Rows under a visible chunk go into that chunk, whatever its granularity
       (late data after a replace or compaction lands, visibly).
    2. Rows where nothing is visible (a gap) go into the chunk of a running
       append that contains the gap. If running appends write finer chunks
       inside the gap, all of one length L that tiles the gap (an HOUR append
       running inside a DAY), the gap is appended at L: rows under a running
       chunk join it, the other L-pieces get chunks of their own (rule 3), so
       late data lands and no two chunks of one version overlap (SPEC §3).
       A running append's chunk that only overlaps the gap otherwise is
       refused (two chunks of one version never overlap, and neither may hide
       the other's rows).
    3. Else into the gap itself at EPOCH, unless a chunk overlapping it has
       history at EPOCH (a killed or abandoned EPOCH chunk): then a fresh
       fixed-width version above every overlapping chunk's and below every
       running lock's.
    """
    by_key = {(c.interval, c.version): c for c in chunks}
    lock_versions = list(running_lock_versions)

    def target(chunk_interval: Interval, version: str) -> AppendTarget:
        facts = by_key.get((chunk_interval, version), ChunkFacts(chunk_interval, version))
        return AppendTarget(
            chunk_interval, version, facts.core, next_partition(facts.core, facts.top_root)
        )

    pieces: list[tuple[Interval, AppendTarget]] = []
    for piece, chunk, version in sorted(visible, key=lambda v: v[0].start):
        part = piece.intersection(interval)
        if part is None:
            continue
        if pieces and pieces[-1][1].interval == chunk and pieces[-1][1].version == version:
            if pieces[-1][0].end == part.start:
                pieces[-1] = (Interval(pieces[-1][0].start, part.end), pieces[-1][1])
                continue
            if pieces[-1][0].contains(part):
                continue
        pieces.append((part, target(chunk, version)))
    gaps, reached = [], interval.start
    for part, _ in pieces:
        if part.start > reached:
            gaps.append(Interval(reached, part.start))
        reached = max(reached, part.end)
    if reached < interval.end:
        gaps.append(Interval(reached, interval.end))
    for gap in gaps:
        pieces += _gap_pieces(gap, chunks, lock_versions, target)
    return sorted(pieces, key=lambda p: p[0].start)


# A gap appended at a running append's finer granularity is cut into at most
# this many pieces (a DAY of HOURs is 24, a leap YEAR of DAYs 366).
MAX_GAP_PIECES = 366


def _gap_pieces(gap, chunks, lock_versions, target) -> list[tuple[Interval, AppendTarget]]:
    running = [c for c in chunks if c.running_append and c.interval.overlaps(gap)]
    # Lowest version first, then the finest chunk: the same choice whatever order
    # the facts were read in (two running chunks of one version overlapping is
    # SPEC §3's forbidden state, but the answer must not depend on the database).
    for c in sorted(
        running, key=lambda c: (c.version, c.interval.end - c.interval.start, c.interval.start)
    ):
        if c.interval.contains(gap):
            return [(gap, target(c.interval, c.version))]
    if not running:
        return [(gap, _empty_target(gap, chunks, lock_versions, target))]
    units = _finer_units(gap, [c.interval for c in running])
    if units is None:
        c = running[0]
        raise AllocationRefused(
            f"cannot append {gap}: a running append is writing {c.interval} "
            "at another segment granularity; append at that granularity"
        )
    out = []
    for unit in units:
        joined = sorted((c for c in running if c.interval == unit), key=lambda c: c.version)
        if joined:
            out.append((unit, target(unit, joined[0].version)))
        else:
            out.append((unit, _empty_target(unit, chunks, lock_versions, target)))
    return out


def _finer_units(gap: Interval, inside: list[Interval]) -> list[Interval] | None:
    """`gap` cut into pieces of the one length of the `inside` intervals, if
    they all lie in the gap, share a length that tiles it, and fall on its
    tiles; else None."""
    lengths = {iv.end - iv.start for iv in inside}
    if len(lengths) != 1 or not all(gap.contains(iv) for iv in inside):
        return None
    unit = lengths.pop()
    span = gap.end - gap.start
    if span % unit or span // unit > MAX_GAP_PIECES:
        return None
    if any((iv.start - gap.start) % unit for iv in inside):
        return None
    return [Interval(gap.start + unit * i, gap.start + unit * (i + 1)) for i in range(span // unit)]


def _empty_target(gap, chunks, lock_versions, target) -> AppendTarget:
    """Rule 3: a chunk of its own for rows where nothing is visible or running."""
    overlapping = [c for c in chunks if c.interval.overlaps(gap) and c.history]
    if not any(c.version == EPOCH_VERSION for c in overlapping):
        return target(gap, EPOCH_VERSION)
    return target(gap, fresh_version((c.version for c in overlapping), lock_versions))


def append_target(
    *,
    interval: Interval,
    visible: Sequence[tuple[Interval, Interval, str]],
    chunks: Sequence[ChunkFacts],
    running_lock_versions: Iterable[str] = (),
) -> AppendTarget:
    """The one chunk all of an append's rows in `interval` go into (see
    `append_layout`); refused when they would go into several: the caller
    splits its rows by the layout first."""
    layout = append_layout(
        interval=interval,
        visible=visible,
        chunks=chunks,
        running_lock_versions=running_lock_versions,
    )
    if len(layout) == 1:
        return layout[0][1]
    names = ", ".join(f"{t.interval} v{t.version}" for _, t in layout)
    raise AllocationRefused(
        f"cannot append {interval} as one piece: its rows go into the chunks {names}; "
        "split them by the append layout"
    )


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


def chunks_left_out(required: Iterable[Interval], published: Iterable[Interval]) -> list[Interval]:
    """The chunks of `required` that the `published` intervals, together, do not
    cover. A replace with dropExisting publishes rows or a tombstone into every
    time chunk of its intervals (SPEC §6); a chunk left out would keep showing
    the rows it was asked to drop, under a task that says SUCCESS (Druid #18099)."""
    covered: list[Interval] = []
    for iv in sorted(published, key=lambda iv: iv.start):
        if covered and iv.start <= covered[-1].end:
            covered[-1] = Interval(covered[-1].start, max(covered[-1].end, iv.end))
        else:
            covered.append(iv)
    return [chunk for chunk in required if not any(c.contains(chunk) for c in covered)]


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
