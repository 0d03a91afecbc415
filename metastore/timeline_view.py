"""What the console draws from a timeline, as view models: per-chunk and
per-segment visibility of one commit's timeline (`state_of`), and the next
commit's made from it by redoing only the chunks the commits between touched
(`state_redone`, `state_moved`).

Pure core: standard library, ``metastore.intervals`` and ``metastore.timeline``.
The cache of one state per dataSource and the rows per chunk read from the
database are `metastore.selectors.states`'."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter

from metastore.intervals import Interval
from metastore.timeline import ChunkVisibility, SegmentRef, Timeline

__all__ = [
    "ChunkInfo",
    "Follow",
    "SegmentStates",
    "Spans",
    "TimelineState",
    "chunk_counts",
    "state_moved",
    "state_of",
    "state_redone",
]


@dataclass(frozen=True)
class Follow:
    """The commits applied to the timeline of a cached state since that state was
    made: the timeline they led to (at `seq`) and the spans of time they touched.
    Replaced, never changed, as more commits are applied."""

    seq: int
    spans: tuple[tuple[datetime, datetime], ...]
    timeline: Timeline


_partition_of = attrgetter("partition")
_tombstone_of = attrgetter("tombstone")


class ChunkInfo:
    """All segments of one (interval, version) in a timeline, with their visibility:
    the counts at once (from the chunk's visible segments), the segments themselves
    and each one's state only when asked (a page of the whole range draws chunks)."""

    __slots__ = (
        "interval",
        "version",
        "size",
        "complete",
        "n_visible",
        "n_partial",
        "n_overshadowed",
        "n_incomplete",
        "_members",
        "_shown_as",
        "_shown",
        "_shown_ids",
        "_segments",
        "_partial_aug",
        "_tombstones",
    )

    def __init__(self, chunk: ChunkVisibility) -> None:
        self.interval = chunk.interval
        self.version = chunk.version
        self.size = chunk.size
        self.complete = chunk.complete
        self._members = chunk.segments
        length = chunk.interval.end - chunk.interval.start
        if not chunk.complete or not chunk.shown:
            self._shown_as = "overshadowed"  # (an incomplete chunk's are all "incomplete")
        else:
            self._shown_as = "visible" if chunk.shown >= length else "partial"
        self._shown = chunk.visible
        self._shown_ids: frozenset[str] | None = None
        shown = len(chunk.visible) if self._shown_as != "overshadowed" else 0
        self.n_visible = shown if self._shown_as == "visible" else 0
        self.n_partial = shown if self._shown_as == "partial" else 0
        self.n_incomplete = 0 if chunk.complete else chunk.size
        self.n_overshadowed = chunk.size - shown  # with the incomplete chunk's
        self._segments = self._partial_aug = None
        self._tombstones = chunk.tombstones

    def status_of(self, ref: SegmentRef) -> str:
        """visible | partial | overshadowed | incomplete, of one of this chunk's segments."""
        if not self.complete:
            return "incomplete"
        ids = self._shown_ids
        if ids is None:
            ids = self._shown_ids = frozenset(r.id for r in self._shown)
        return self._shown_as if ref.id in ids else "overshadowed"

    @property
    def uniform_status(self) -> str | None:
        """The state all its segments are in, or None when they differ."""
        if not self.complete:
            return "incomplete"
        if self.n_visible == self.size:
            return "visible"
        if self.n_partial == self.size:
            return "partial"
        return "overshadowed" if self.n_overshadowed == self.size else None

    @property
    def segments(self) -> list[SegmentRef]:
        """Its segments, by partition."""
        found = self._segments
        if found is None:
            found = self._segments = sorted(self._members(), key=_partition_of)
        return found

    @property
    def partial_aug(self) -> frozenset[str]:
        """The ids whose atomic update group is not all present."""
        found = self._partial_aug
        if found is None:
            present = {r.partition for r in self.segments}
            found = frozenset(r.id for r in self.segments if not r.aug <= present)
            self._partial_aug = found
        return found

    @property
    def tombstones(self) -> int:
        found = self._tombstones
        if found is None:
            found = self._tombstones = sum(map(_tombstone_of, self._members()))
        return found


class SegmentStates(Mapping):
    """segment id -> visible | partial | overshadowed | incomplete, for every
    segment of a state's chunks: looked up through the chunk of the segment (by
    the timeline's id index), the whole mapping made only when iterated."""

    def __init__(self, timeline: Timeline, chunks: list[ChunkInfo]) -> None:
        self._timeline = timeline
        self._chunks = chunks
        self._by_key: dict[tuple, ChunkInfo] | None = None
        self._all: dict[str, str] | None = None

    def __getitem__(self, seg_id: str) -> str:
        ref = self._timeline.get(seg_id)
        if ref is None:
            raise KeyError(seg_id)
        by_key = self._by_key
        if by_key is None:
            by_key = self._by_key = {(c.interval, c.version): c for c in self._chunks}
        chunk = by_key.get((ref.interval, ref.version))
        if chunk is None:
            raise KeyError(seg_id)
        return chunk.status_of(ref)

    def _every(self) -> dict[str, str]:
        found = self._all
        if found is None:
            found = {}
            for c in self._chunks:
                if c.complete:
                    for r in c._members():
                        found[r.id] = c.status_of(r)
                else:
                    found.update(dict.fromkeys((r.id for r in c._members()), "incomplete"))
            self._all = found
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._every())

    def __len__(self) -> int:
        return sum(c.size for c in self._chunks)

    def items(self):
        return self._every().items()

    def values(self):
        return self._every().values()


@dataclass
class TimelineState:
    """What the console draws from a timeline, computed once per commit seq; a
    later seq's is made from it through the parts of time the commits between
    touched (`state_moved`). Never changed once made, but for what it reads
    lazily and keeps (rows, counts, statuses: the same whenever read)."""

    seq: int | None
    timeline: Timeline
    chunks: list[ChunkInfo]  # by start
    starts: list[datetime]
    max_length: timedelta
    extent: Interval | None
    # (start, end, version) -> (rows, bytes) of the whole dataSource, read once per state
    rows: dict[tuple, tuple[int, int]] | None = None
    _counts: dict[str, int] | None = None
    _status: SegmentStates | None = None

    @property
    def status(self) -> SegmentStates:
        """id -> visible | partial | overshadowed | incomplete, of every segment."""
        if self._status is None:
            self._status = SegmentStates(self.timeline, self.chunks)
        return self._status

    @property
    def counts(self) -> dict[str, int]:
        """How many segments are visible, partial, overshadowed, in incomplete chunks."""
        if self._counts is None:
            self._counts = chunk_counts(self.chunks)
        return self._counts

    def chunks_overlapping(self, interval: Interval) -> list[ChunkInfo]:
        j = bisect_left(self.starts, interval.end)
        try:
            lowest = interval.start - self.max_length
        except OverflowError:
            lowest = interval.start.min.replace(tzinfo=interval.start.tzinfo)
        i = bisect_left(self.starts, lowest)
        return [c for c in self.chunks[i:j] if c.interval.end > interval.start]


def chunk_counts(chunks: Iterable[ChunkInfo]) -> dict[str, int]:
    """How many segments of `chunks` are visible, partial, overshadowed, in incomplete chunks."""
    visible = partial = overshadowed = incomplete = 0
    for c in chunks:
        visible += c.n_visible
        partial += c.n_partial
        overshadowed += c.n_overshadowed - c.n_incomplete
        incomplete += c.n_incomplete
    return {
        "visible": visible,
        "partial": partial,
        "overshadowed": overshadowed,
        "incomplete": incomplete,
    }


def _state_from(timeline: Timeline, seq, infos: list[ChunkInfo]) -> TimelineState:
    infos.sort(key=lambda c: (c.interval.start, c.interval.end, c.version))
    return TimelineState(
        seq=seq,
        timeline=timeline,
        chunks=infos,
        starts=[c.interval.start for c in infos],
        max_length=max((c.interval.end - c.interval.start for c in infos), default=timedelta(0)),
        extent=Interval(infos[0].interval.start, max(c.interval.end for c in infos))
        if infos
        else None,
    )


def state_of(timeline: Timeline, seq: int | None = None) -> TimelineState:
    """The visibility of every segment of `timeline`, computed afresh (per chunk)."""
    return _state_from(timeline, seq, [ChunkInfo(c) for c in timeline.chunk_visibility()])


def state_redone(
    old: TimelineState, timeline: Timeline, seq: int | None, spans: Spans
) -> TimelineState:
    """The state of `timeline` (at `seq`), which differs from `old`'s only within
    `spans`: the chunks overlapping them are redone, the others kept (a chunk's
    visibility depends only on the segments overlapping it, and every segment
    added or removed lies in a span). Rows per chunk are not carried over."""
    infos = [c for c in old.chunks if not spans.overlap(c.interval.start, c.interval.end)]
    redone: dict[tuple, ChunkVisibility] = {}
    for s, e in spans.merged:
        for c in timeline.chunk_visibility(s, e):
            redone[(c.interval, c.version)] = c
    return _state_from(timeline, seq, infos + [ChunkInfo(c) for c in redone.values()])


def state_moved(old: TimelineState, follow: Follow) -> TimelineState:
    """`old` brought to where `follow` led its timeline (rows not carried over)."""
    return state_redone(old, follow.timeline, follow.seq, Spans(follow.spans))


class Spans:
    """Spans of time, merged: whether one overlaps [start, end), by bisection."""

    def __init__(self, spans: Iterable[tuple[datetime, datetime]]) -> None:
        merged: list[list[datetime]] = []
        for s, e in sorted(spans):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.merged = [(s, e) for s, e in merged]
        self._ends = [e for _, e in merged]

    def overlap(self, start: datetime, end: datetime) -> bool:
        i = bisect_right(self._ends, start)
        return i < len(self.merged) and self.merged[i][0] < end

    @property
    def hull(self) -> Interval | None:
        """The interval from the first span's start to the last one's end."""
        return Interval(self.merged[0][0], self.merged[-1][1]) if self.merged else None
