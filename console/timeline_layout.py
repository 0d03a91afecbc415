"""Where the interval view of a dataSource's timeline puts each mark: a pure
function of the timeline state, the window and the facts drawn over it (locks,
allocations being written, unused segments), with no markup and no Django.
`console.timeline_svg` draws the result.

One lane per version, newest on top; in a lane each chunk takes one row per
segment (by partition), then its unused segments and pending allocations below
them. Past MAX_SEGMENT_MARKS segments a chunk is one mark; past MAX_CHUNK_MARKS
chunks nothing is laid out (the page asks to zoom in). Locks take the rows above
the lanes, at most MAX_LOCK_ROWS of them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from metastore.intervals import Interval

MAX_SEGMENT_MARKS = 600  # above this the interval view draws one mark per chunk
MAX_CHUNK_MARKS = 1500  # above this it asks to zoom in
MAX_LOCK_ROWS = 12
LEFT = 170
WIDTH = 1100
ROW = 12
LANE_GAP = 6
LOCK_ROW = 14
TOP = 18
MAX_BY = 5  # ids named in a mark's data-overshadowed-by (the count says how many)


def x_of(t: datetime, window: Interval) -> float:
    """The x of time `t` in `window`, clamped to its edges."""
    span = (window.end - window.start).total_seconds()
    if t <= window.start:
        return LEFT
    if t >= window.end:
        return LEFT + WIDTH
    return LEFT + (t - window.start).total_seconds() / span * WIDTH


def span_of(interval: Interval, window: Interval) -> tuple[float, float]:
    """(x, width) of `interval` in `window`; a mark is never thinner than 0.8."""
    x0, x1 = x_of(interval.start, window), x_of(interval.end, window)
    return round(x0, 2), round(max(x1 - x0, 0.8), 2)


@dataclass(frozen=True)
class Lane:
    version: str
    y: float
    rows: int


@dataclass(frozen=True)
class ChunkMark:
    """All segments of one (interval, version), drawn as one mark."""

    interval: Interval
    version: str
    x: float
    y: float
    w: float
    segments: int
    status: str  # visible | overshadowed | mixed | incomplete
    shown_share: float  # of its segments, the share a query reads from (visible or partial)
    title: str


@dataclass(frozen=True)
class SegmentMark:
    id: str
    version: str
    partition: int
    status: str  # visible | partial | overshadowed | incomplete
    x: float
    y: float
    w: float
    flags: tuple[str, ...]  # tombstone, partial-aug, incomplete, upgraded
    overshadowed_by: tuple[str, ...]  # every one, sorted
    highlight: str  # "added" / "removed" on a commit's page, else ""
    visible_parts: tuple[tuple[Interval, float, float], ...]  # (interval, x, width) if partial
    label: tuple[str, ...]
    title: str


@dataclass(frozen=True)
class UnusedMark:
    id: str
    version: str
    partition: int
    tombstone: bool
    x: float
    y: float
    w: float


@dataclass(frozen=True)
class PendingMark:
    pk: Any
    task_id: str
    version: str
    partition: int
    x: float
    y: float
    w: float
    title: str


@dataclass(frozen=True)
class LockMark:
    pk: Any
    type: str
    holder: str
    priority: int
    revoked: bool
    x: float
    y: float
    w: float
    guide_height: float  # the dotted line down over the lanes
    text: str
    title: str


@dataclass(frozen=True)
class IntervalLayout:
    mode: str  # segments | chunks | zoom (nothing laid out)
    window: Interval
    segments: int  # in the window, unused ones included
    chunks: int
    height: float
    lanes: tuple[Lane, ...]
    marks: tuple  # in drawing order: chunks or segments, unused, pending, locks
    lock_rows: int

    @property
    def info(self) -> dict:
        return {
            "mode": self.mode,
            "segments": self.segments,
            "chunks": self.chunks,
            "marks": len(self.marks),
        }


def interval_layout(
    *,
    state,
    window: Interval,
    details: dict[str, tuple],
    locks=(),
    pendings=(),
    unused=(),
    highlight: dict[str, str] | None = None,
) -> IntervalLayout:
    """Lay out the interval view of `state` (a `TimelineState`) over `window`.

    `details`: id -> (rows, bytes, upgraded_from) of the segments, where known;
    `locks`, `pendings`, `unused`: objects with the fields of TaskLock,
    PendingSegment and Segment; `highlight`: id -> "added" | "removed"."""
    chunks = state.chunks_overlapping(window)
    total = sum(c.size for c in chunks) + len(unused)
    mode = "segments" if total <= MAX_SEGMENT_MARKS else "chunks"
    if mode == "chunks" and len(chunks) > MAX_CHUNK_MARKS:
        return IntervalLayout("zoom", window, total, len(chunks), 0, (), (), 0)
    lock_rows = min(len(locks), MAX_LOCK_ROWS)
    lock_h = LOCK_ROW * lock_rows + (6 if lock_rows else 0)
    lanes, bottom = _lanes(chunks, mode, unused, pendings, top=TOP + lock_h)
    height = max(bottom + 6, TOP + 40)
    lane_y = {lane.version: lane.y for lane in lanes}
    rows_taken: dict[tuple, int] = {}
    marks: list = []
    for c in chunks:
        y = lane_y[c.version]
        if mode == "chunks":
            rows_taken[(c.interval.start, c.interval.end, c.version)] = 1
            marks.append(_chunk_mark(c, y, window))
            continue
        rows_taken[(c.interval.start, c.interval.end, c.version)] = len(c.segments)
        for row, ref in enumerate(c.segments):
            marks.append(_segment_mark(state, c, ref, y + row * ROW, window, details, highlight))
    if mode == "segments":
        marks += _unused_marks(unused, lane_y, rows_taken, window)
    marks += _pending_marks(pendings, lane_y, rows_taken, window)
    marks += _lock_marks(locks[:lock_rows], window, height)
    return IntervalLayout(
        mode, window, total, len(chunks), height, tuple(lanes), tuple(marks), lock_rows
    )


def _lanes(chunks, mode: str, unused, pendings, *, top: float) -> tuple[list[Lane], float]:
    """One lane per version, newest first, as many rows high as its busiest chunk
    needs (with its unused segments and pending allocations); and the y below them."""
    rows: dict[str, int] = {}
    for c in chunks:
        need = c.size if mode == "segments" else 1
        rows[c.version] = max(rows.get(c.version, 0), need)
    extra: dict[tuple, int] = {}
    for seg in unused if mode == "segments" else ():
        key = (seg.start, seg.end, seg.version)
        extra[key] = extra.get(key, 0) + 1
    for p in pendings:
        key = (p.start, p.end, p.version)
        extra[key] = extra.get(key, 0) + 1
    for (s, e, v), k in extra.items():
        base = max(
            (
                c.size
                for c in chunks
                if c.version == v and c.interval.start == s and c.interval.end == e
            ),
            default=0,
        )
        if mode == "chunks":
            base = 1 if base else 0
        rows[v] = max(rows.get(v, 0), base + k)
    lanes, y = [], top
    for v in sorted(rows, reverse=True):
        lanes.append(Lane(v, y, rows[v]))
        y += rows[v] * ROW + LANE_GAP
    return lanes, y


def _chunk_mark(c, y: float, window: Interval) -> ChunkMark:
    n = c.size
    if not c.complete:
        status = "incomplete"
    elif c.n_visible == n:
        status = "visible"
    elif c.n_overshadowed == n:
        status = "overshadowed"
    else:
        status = "mixed"
    title = (
        f"{c.interval} v{c.version}: {n} segments — {c.n_visible} visible, "
        f"{c.n_partial} partially overshadowed, {c.n_overshadowed} overshadowed"
        f"{', ' + str(c.tombstones) + ' tombstones' if c.tombstones else ''}"
        f"{'' if c.complete else ', incomplete'}"
    )
    x, w = span_of(c.interval, window)
    share = (c.n_visible + c.n_partial) / n if n else 0.0
    return ChunkMark(c.interval, c.version, x, y, w, n, status, share, title)


def _segment_mark(state, c, ref, y: float, window: Interval, details, highlight) -> SegmentMark:
    timeline = state.timeline
    status = c.status_of(ref)
    by = sorted(timeline.overshadowed_by(ref.id)) if status in ("partial", "overshadowed") else []
    vis = timeline.visible_intervals(ref.id) if status == "partial" else []
    d = details.get(ref.id)
    upgraded_from = d[2] if d and d[2] else ""
    marked = (
        ("tombstone", "tombstone", ref.tombstone),
        ("partial-aug", "partial AUG", ref.id in c.partial_aug),
        ("incomplete", "incomplete", not c.complete),
        ("upgraded", "↑ upgraded", bool(upgraded_from)),
    )
    title = segment_title(ref, status, d, by, vis)
    if upgraded_from:
        title += f"\nupgraded from {upgraded_from}"
    parts = ()
    if status == "partial" and not ref.tombstone:
        parts = tuple((iv, *span_of(iv, window)) for iv in vis)
    x, w = span_of(c.interval, window)
    return SegmentMark(
        id=ref.id,
        version=ref.version,
        partition=ref.partition,
        status=status,
        x=x,
        y=y,
        w=w,
        flags=tuple(flag for flag, _, on in marked if on),
        overshadowed_by=tuple(by),
        highlight=(highlight or {}).get(ref.id, ""),
        visible_parts=parts,
        label=tuple(label for _, label, on in marked if on),
        title=title,
    )


def segment_title(ref, status: str, details: tuple | None, by: list[str], vis) -> str:
    """A segment mark's tooltip: id, status, rows and bytes, what overshadows it."""
    parts = [ref.id, f"status: {status}"]
    if details is not None:
        parts.append(f"{details[0]:,} rows, {details[1]:,} bytes")
    if ref.tombstone:
        parts.append("tombstone")
    if by:
        parts.append(
            "overshadowed by "
            + ", ".join(by[:3])
            + (f" and {len(by) - 3} more" if len(by) > 3 else "")
        )
    if status == "partial":
        parts.append("visible " + ", ".join(str(v) for v in vis))
    return "\n".join(parts)


def _next_row(lane_y: dict, rows_taken: dict, start, end, version) -> float | None:
    """The y of the next free row under chunk (start, end, version), taking it."""
    if version not in lane_y:
        return None
    key = (start, end, version)
    row = rows_taken.get(key, 0)
    rows_taken[key] = row + 1
    return lane_y[version] + row * ROW


def _unused_marks(unused, lane_y, rows_taken, window: Interval) -> list[UnusedMark]:
    out = []
    for seg in unused:
        y = _next_row(lane_y, rows_taken, seg.start, seg.end, seg.version)
        if y is not None:
            x, w = span_of(Interval(seg.start, seg.end), window)
            out.append(UnusedMark(seg.id, seg.version, seg.partition, seg.tombstone, x, y, w))
    return out


def _pending_marks(pendings, lane_y, rows_taken, window: Interval) -> list[PendingMark]:
    out = []
    for p in pendings:
        y = _next_row(lane_y, rows_taken, p.start, p.end, p.version)
        if y is not None:
            x, w = span_of(Interval(p.start, p.end), window)
            title = (
                f"being written by {p.task_id}: partition {p.partition} of "
                f"{p.start}/{p.end} v{p.version}"
            )
            out.append(PendingMark(p.pk, p.task_id or "", p.version, p.partition, x, y, w, title))
    return out


def _lock_marks(locks, window: Interval, height: float) -> list[LockMark]:
    out = []
    for i, lock in enumerate(locks):
        x, w = span_of(lock.interval, window)
        y = TOP + LOCK_ROW * i
        revoked = " revoked" if lock.revoked else ""
        title = (
            f"{lock.type} lock on {lock.interval} held by {lock.task_id} "
            f"(priority {lock.priority}, version {lock.version}){revoked}"
        )
        text = f"{lock.type} {lock.task_id} p{lock.priority}{revoked}"
        out.append(
            LockMark(
                lock.pk, lock.type, lock.task_id, lock.priority, bool(lock.revoked),
                x, y, w, height - y - 4, text, title,
            )
        )  # fmt: skip
    return out
