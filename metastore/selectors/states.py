"""What the console draws from a timeline: per-chunk and per-segment visibility,
computed once per commit sequence and then kept up to date with the parts of time
that later commits touched (the state follows its timeline's cache entry)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import UTC, datetime, timedelta
from operator import attrgetter

from django.db import connection
from django.db.models import Sum

from metastore.intervals import Interval
from metastore.models import Segment
from metastore.selectors import _cache
from metastore.selectors.timeline import timeline_for
from metastore.timeline import ChunkVisibility, SegmentRef, Timeline

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
    """What the console draws from a timeline, computed once per commit seq and
    then kept up to date with the parts of time that later commits touched."""

    seq: int | None
    timeline: Timeline
    chunks: list[ChunkInfo]  # by start
    starts: list[datetime]
    max_length: timedelta
    extent: Interval | None
    pending_seq: int | None = None  # the timeline moved on to this seq ...
    pending_spans: list[tuple[datetime, datetime]] = dc_field(default_factory=list)  # ... here
    pending_added: list[SegmentRef] = dc_field(default_factory=list)  # ... with these added
    pending_timeline: Timeline | None = None  # ... into this timeline (a copy of `timeline`)
    # (start, end, version) -> (rows, bytes) of the whole dataSource, read once per state
    rows: dict[tuple, tuple[int, int]] | None = None
    _counts: dict[str, int] | None = None
    _status: SegmentStates | None = None

    @property
    def latest_timeline(self) -> Timeline:
        """The timeline the pending changes lead to (or this state's own)."""
        return self.timeline if self.pending_timeline is None else self.pending_timeline

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


def state_moved(old: TimelineState, seq: int, datasource: str | None = None) -> TimelineState:
    """`old` brought to `seq`: only chunks overlapping the changed spans are redone
    (visibility elsewhere cannot have changed; every segment added or removed lies
    in a span)."""
    timeline = old.latest_timeline
    spans = old.pending_spans

    def touched(start: datetime, end: datetime) -> bool:
        return any(s < end and start < e for s, e in spans)

    infos = [c for c in old.chunks if not touched(c.interval.start, c.interval.end)]
    redone: dict[tuple, ChunkVisibility] = {}
    for s, e in spans:
        for c in timeline.chunk_visibility(s, e):
            redone[(c.interval, c.version)] = c
    state = _state_from(timeline, seq, infos + [ChunkInfo(c) for c in redone.values()])
    if old.rows is not None and datasource is not None:
        rows = {k: v for k, v in old.rows.items() if not touched(k[0], k[1])}
        hull = Interval(min(s for s, _ in spans), max(e for _, e in spans)) if spans else None
        if hull is not None:
            for k, v in chunk_rows(datasource=datasource, interval=hull).items():
                if touched(k[0], k[1]):
                    rows[k] = v
        state.rows = rows
    return state


def state_rows(*, datasource: str, state: TimelineState, interval: Interval | None = None):
    """Rows and bytes per chunk: of the current state from its cache (read once,
    then only the chunks later commits touched), else read for `interval`."""
    if state.seq is None or not _is_current(datasource, state):
        # Only the segments of the chunks asked for: a commit's page of one day
        # must not send every segment id of a large dataSource to the database.
        if interval is None:
            ids = {r.id for r in state.timeline.segments()}
        else:
            ids = {r.id for c in state.chunks_overlapping(interval) for r in c.segments}
        return chunk_rows(datasource=datasource, ids=ids, interval=interval)
    if state.rows is None:
        state.rows = chunk_rows(datasource=datasource)
    return state.rows


def _is_current(datasource: str, state: TimelineState) -> bool:
    with _cache.lock:
        return _cache.states.get(datasource) is state


def timeline_state(*, datasource: str, as_of: int | None = None) -> TimelineState:
    """The timeline and its per-chunk, per-segment visibility (kept per commit seq)."""
    timeline = timeline_for(datasource=datasource, as_of=as_of)
    if as_of is not None:
        return state_of(timeline, as_of)
    with _cache.lock:
        entry = _cache.timelines.get(datasource)
        seq = entry[0] if entry is not None and entry[1] is timeline else None
        found = _cache.states.get(datasource)
        if found is not None and found.latest_timeline is timeline:
            if found.timeline is timeline and found.seq == seq:
                return found
            if seq is not None and found.pending_seq == seq:
                state = state_moved(found, seq, datasource)
                _cache.states[datasource] = state
                return state
    state = state_of(timeline, seq)
    with _cache.lock:
        _cache.states[datasource] = state
    return state


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# On PostgreSQL the sums come without Django's per-row conversion: the times as
# epoch microseconds, made datetimes once per distinct value.
_PG_ROWS_SQL = """
SELECT (EXTRACT(EPOCH FROM s.start) * 1000000)::bigint,
       (EXTRACT(EPOCH FROM s."end") * 1000000)::bigint,
       s.version, SUM(s.num_rows), SUM(s.size_bytes)
  FROM metastore_segment s
 WHERE s.datasource_id = (SELECT id FROM metastore_datasource WHERE name = %s) AND {where}
 GROUP BY s.start, s."end", s.version
"""


def chunk_rows(
    *, datasource: str, ids: set[str] | None = None, interval: Interval | None = None
) -> dict[tuple, tuple[int, int]]:
    """(start, end, version) -> (rows, bytes) of the used segments (or of `ids`),
    of the chunks overlapping `interval` if given."""
    if connection.vendor == "postgresql":
        return _pg_chunk_rows(datasource, ids, interval)
    qs = Segment.objects.filter(datasource__name=datasource)
    qs = qs.filter(used=True) if ids is None else qs.filter(id__in=list(ids))
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return {
        (r["start"], r["end"], r["version"]): (r["rows"] or 0, r["size"] or 0)
        for r in qs.values("start", "end", "version")
        .order_by()
        .annotate(rows=Sum("num_rows"), size=Sum("size_bytes"))
    }


def _pg_chunk_rows(datasource: str, ids, interval) -> dict[tuple, tuple[int, int]]:
    # The dataSource's id as one value (not a join): the index segment_used_chunk_rows
    # is then read in the GROUP BY's order, index-only, without a sort.
    where, params = [], [datasource]
    if ids is None:
        where.append("s.used")
    else:
        where.append("s.id = ANY(%s)")
        params.append(list(ids))
    if interval is not None:
        where.append('s.start < %s AND s."end" > %s')
        params += [interval.end, interval.start]
    with connection.cursor() as cursor:
        cursor.execute(_PG_ROWS_SQL.format(where=" AND ".join(where)), params)
        found = cursor.fetchall()
    times: dict[int, datetime] = {}
    out = {}
    for start, end, version, rows, size in found:
        s = times.get(start) or times.setdefault(start, _EPOCH + timedelta(microseconds=start))
        e = times.get(end) or times.setdefault(end, _EPOCH + timedelta(microseconds=end))
        out[(s, e, version)] = (int(rows or 0), int(size or 0))
    return out
