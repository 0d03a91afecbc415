"""What the console draws from a timeline: per-chunk and per-segment visibility,
computed once per commit sequence and then kept up to date with the parts of time
that later commits touched (the state follows its timeline's cache entry)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import datetime, timedelta

from django.db.models import Sum

from metastore.intervals import Interval
from metastore.models import Segment
from metastore.selectors import _cache
from metastore.selectors.timeline import timeline_for
from metastore.timeline import SegmentRef, Timeline


@dataclass
class ChunkInfo:
    """All segments of one (interval, version) in a timeline, with their visibility."""

    interval: Interval
    version: str
    segments: list[SegmentRef]  # by partition
    complete: bool
    partial_aug: frozenset[str]  # ids whose atomic update group is not all present
    tombstones: int
    n_visible: int
    n_partial: int
    n_overshadowed: int


@dataclass
class TimelineState:
    """What the console draws from a timeline, computed once per commit seq and
    then kept up to date with the parts of time that later commits touched."""

    seq: int | None
    timeline: Timeline
    chunks: list[ChunkInfo]  # by start
    starts: list[datetime]
    max_length: timedelta
    status: dict[str, str]  # id -> visible | partial | overshadowed | incomplete
    extent: Interval | None
    pending_seq: int | None = None  # the timeline moved on to this seq ...
    pending_spans: list[tuple[datetime, datetime]] = dc_field(default_factory=list)  # ... here
    pending_added: list[SegmentRef] = dc_field(default_factory=list)  # ... with these added
    pending_timeline: Timeline | None = None  # ... into this timeline (a copy of `timeline`)
    # (start, end, version) -> (rows, bytes) of the whole dataSource, read once per state
    rows: dict[tuple, tuple[int, int]] | None = None
    _counts: dict[str, int] | None = None

    @property
    def latest_timeline(self) -> Timeline:
        """The timeline the pending changes lead to (or this state's own)."""
        return self.timeline if self.pending_timeline is None else self.pending_timeline

    @property
    def counts(self) -> dict[str, int]:
        """How many segments are visible, partial, overshadowed, in incomplete chunks."""
        if self._counts is None:
            counts = {"visible": 0, "partial": 0, "overshadowed": 0, "incomplete": 0}
            for st in self.status.values():
                counts[st] += 1
            self._counts = counts
        return self._counts

    def chunks_overlapping(self, interval: Interval) -> list[ChunkInfo]:
        j = bisect_left(self.starts, interval.end)
        try:
            lowest = interval.start - self.max_length
        except OverflowError:
            lowest = interval.start.min.replace(tzinfo=interval.start.tzinfo)
        i = bisect_left(self.starts, lowest)
        return [c for c in self.chunks[i:j] if c.interval.end > interval.start]


def _chunk_infos(timeline: Timeline, refs) -> tuple[list[ChunkInfo], dict[str, str]]:
    """Per-chunk visibility of `refs` (whole chunks of `timeline`)."""
    chunks: dict[tuple, list[SegmentRef]] = {}
    for ref in refs:
        chunks.setdefault((ref.interval, ref.version), []).append(ref)
    status: dict[str, str] = {}
    infos: list[ChunkInfo] = []
    looked: dict[Interval, dict[str, timedelta]] = {}
    for (interval, version), members in chunks.items():
        members.sort(key=lambda r: r.partition)
        shown = looked.get(interval)
        if shown is None:
            shown = looked[interval] = {}
            for piece, ref in timeline.lookup(interval):
                shown[ref.id] = shown.get(ref.id, timedelta(0)) + (piece.end - piece.start)
        complete = timeline.chunk_complete((interval, version))
        present = {r.partition for r in members}
        length = interval.end - interval.start
        counts = {"visible": 0, "partial": 0, "overshadowed": 0, "incomplete": 0}
        for r in members:
            if not complete:
                st = "incomplete"
            elif r.id not in shown:
                st = "overshadowed"
            elif shown[r.id] >= length:
                st = "visible"
            else:
                st = "partial"
            status[r.id] = st
            counts[st] += 1
        infos.append(
            ChunkInfo(
                interval=interval,
                version=version,
                segments=members,
                complete=complete,
                partial_aug=frozenset(r.id for r in members if not r.aug <= present),
                tombstones=sum(1 for r in members if r.tombstone),
                n_visible=counts["visible"],
                n_partial=counts["partial"],
                n_overshadowed=counts["overshadowed"] + counts["incomplete"],
            )
        )
    return infos, status


def _state_from(timeline: Timeline, seq, infos: list[ChunkInfo], status) -> TimelineState:
    infos.sort(key=lambda c: (c.interval.start, c.interval.end, c.version))
    return TimelineState(
        seq=seq,
        timeline=timeline,
        chunks=infos,
        starts=[c.interval.start for c in infos],
        max_length=max((c.interval.end - c.interval.start for c in infos), default=timedelta(0)),
        status=status,
        extent=Interval(infos[0].interval.start, max(c.interval.end for c in infos))
        if infos
        else None,
    )


def state_of(timeline: Timeline, seq: int | None = None) -> TimelineState:
    """The visibility of every segment of `timeline`, computed afresh."""
    infos, status = _chunk_infos(timeline, timeline.segments())
    return _state_from(timeline, seq, infos, status)


def _state_moved(old: TimelineState, seq: int, datasource: str | None = None) -> TimelineState:
    """`old` brought to `seq`: only chunks overlapping the changed spans are redone
    (visibility elsewhere cannot have changed)."""
    timeline = old.latest_timeline
    spans = old.pending_spans

    def touched(start: datetime, end: datetime) -> bool:
        return any(s < end and start < e for s, e in spans)

    kept, redone = [], []
    for c in old.chunks:
        (redone if touched(c.interval.start, c.interval.end) else kept).append(c)
    status = old.status.copy()  # (dict.copy keeps its fast path after deletions; dict() does not)
    counts = dict(old._counts) if old._counts is not None else None
    # The segments now in the touched stretches: those of the old chunks there that
    # are still in the timeline, and those added since (every one lies in a span).
    redo: dict[str, SegmentRef] = {}
    for c in redone:
        for r in c.segments:
            st = status.pop(r.id, None)
            if counts is not None and st is not None:
                counts[st] -= 1
            if timeline.get(r.id) is r:
                redo[r.id] = r
    for r in old.pending_added:
        if timeline.get(r.id) is r:
            redo[r.id] = r
    infos, new_status = _chunk_infos(timeline, redo.values())
    status.update(new_status)
    state = _state_from(timeline, seq, kept + infos, status)
    if counts is not None:
        for st in new_status.values():
            counts[st] += 1
        state._counts = counts
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
                state = _state_moved(found, seq, datasource)
                _cache.states[datasource] = state
                return state
    state = state_of(timeline, seq)
    with _cache.lock:
        _cache.states[datasource] = state
    return state


def chunk_rows(
    *, datasource: str, ids: set[str] | None = None, interval: Interval | None = None
) -> dict[tuple, tuple[int, int]]:
    """(start, end, version) -> (rows, bytes) of the used segments (or of `ids`),
    of the chunks overlapping `interval` if given."""
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
