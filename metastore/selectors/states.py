"""The console's state of a dataSource's timeline (`metastore.timeline_view`):
made once per commit sequence and kept per process, then moved through the parts
of time that later commits touched (the state follows its timeline's cache
entry); as of a past commit, the current state with the commits after it
undone; and the rows and bytes per chunk, read from the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Sum

from metastore.intervals import Interval
from metastore.models import CommitLogEntry, Segment
from metastore.selectors import _cache
from metastore.selectors.timeline import apply_change, segment_refs, timeline_for
from metastore.timeline_view import (
    Follow,
    Spans,
    TimelineState,
    state_moved,
    state_of,
    state_redone,
)


def _moved(old: TimelineState, follow: Follow, datasource: str) -> TimelineState:
    """`state_moved`, with the rows per chunk `old` read carried over but those of
    the touched chunks, read again."""
    state = state_moved(old, follow)
    if old.rows is not None:
        spans = Spans(follow.spans)
        state.rows = _rows_carried(datasource, old.rows, spans)
    return state


def _rows_carried(datasource: str, rows: dict, spans: Spans) -> dict:
    """`rows` of the chunks `spans` did not touch, and of those it did, read anew."""
    kept = {k: v for k, v in rows.items() if not spans.overlap(k[0], k[1])}
    if spans.hull is not None:
        for k, v in chunk_rows(datasource=datasource, interval=spans.hull).items():
            if spans.overlap(k[0], k[1]):
                kept[k] = v
    return kept


def state_rows(*, datasource: str, state: TimelineState, interval: Interval | None = None):
    """Rows and bytes per chunk: of the current state from its cache (read once,
    then only the chunks later commits touched), else read for `interval`."""
    if state.seq is None or not _is_current(datasource, state):
        if state.rows is not None:  # a past state's, made with it (`past_state`)
            return state.rows
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
    """The timeline and its per-chunk, per-segment visibility (kept per commit seq;
    as of a past commit, `past_state`)."""
    if as_of is not None:
        return past_state(datasource=datasource, as_of=as_of)
    timeline = timeline_for(datasource=datasource)
    with _cache.lock:
        entry = _cache.timelines.get(datasource)
        seq = entry[0] if entry is not None and entry[1] is timeline else None
        found = _cache.states.get(datasource)
        follow = _cache.follows.get(datasource)
    if found is not None and follow is None and found.timeline is timeline and found.seq == seq:
        return found
    moved = found is not None and follow is not None and follow.timeline is timeline
    if moved and seq is not None and follow.seq == seq:  # (the database read out of the lock)
        return _kept(datasource, _moved(found, follow, datasource), (found, follow))
    return _kept(datasource, state_of(timeline, seq), None)


def _kept(datasource: str, state: TimelineState, moved_from) -> TimelineState:
    """`state`, made the cached one unless it was moved from a state (and its
    follow) that another thread replaced meanwhile."""
    with _cache.lock:
        if moved_from is None or (
            _cache.states.get(datasource) is moved_from[0]
            and _cache.follows.get(datasource) is moved_from[1]
        ):
            _cache.states[datasource] = state
            _cache.follows.pop(datasource, None)
    return state


# Past this many commits after the one wanted, its state is rebuilt from the
# checkpoint before it instead of from the current state with those commits undone.
UNDO_MAX = 2_000
# Past states kept per process: each holds its own timeline's id index (about
# 45 MB at 584,000 segments; its chunks are shared with the current timeline's).
PAST_KEPT = 3


def past_state(*, datasource: str, as_of: int) -> TimelineState:
    """The state as of commit `as_of`: the current state (kept per commit) with the
    commits after `as_of` undone, only the chunks overlapping what they changed
    redone (a chunk's visibility depends only on the segments overlapping it),
    kept per (dataSource, `as_of`, current seq). Its cost grows with those commits,
    not with the dataSource's segments. Past UNDO_MAX of them, or when the current
    state is not at a known seq, it is rebuilt from the checkpoint at or before
    `as_of` and the log after it."""
    current = timeline_state(datasource=datasource)
    key = (datasource, as_of, current.seq)
    with _cache.lock:
        found = _cache.past.get(key)
    if found is not None:
        return found
    undo = None
    if current.seq is not None and as_of <= current.seq:
        undo = list(
            CommitLogEntry.objects.filter(
                datasource=datasource, seq__gt=as_of, seq__lte=current.seq
            )
            .order_by("-seq")
            .values_list("added", "removed")[: UNDO_MAX + 1]
        )
    if undo is None or len(undo) > UNDO_MAX:
        state = state_of(timeline_for(datasource=datasource, as_of=as_of), as_of)
    else:
        state = _state_undone(datasource, current, as_of, undo)
    if current.seq is None:
        return state  # (kept only under a known seq: a later kill makes a new one)
    with _cache.lock:
        _cache.past[key] = state
        while len(_cache.past) > PAST_KEPT:
            del _cache.past[next(iter(_cache.past))]
    return state


def _state_undone(
    datasource: str, current: TimelineState, as_of: int, undo: list[tuple[list, list]]
) -> TimelineState:
    """`current` with the commits `undo` ((added, removed), newest first) undone:
    their added segments leave, their removed ones that still exist come back (a
    killed segment has no row: time travel never shows it)."""
    gone: set[str] = set()
    back: set[str] = set()
    for added, removed in undo:
        gone.update(added or ())
        back.difference_update(added or ())
        back.update(removed or ())
        gone.difference_update(removed or ())
    timeline = current.timeline.copy()
    missing = {sid for sid in back if timeline.get(sid) is None}  # (none of them is gone)
    came = list(segment_refs(datasource=datasource, ids=missing).values()) if missing else []
    touched = Spans(apply_change(timeline, gone, came))
    state = state_redone(current, timeline, as_of, touched)
    rows = state_rows(datasource=datasource, state=current)
    state.rows = {k: v for k, v in rows.items() if not touched.overlap(k[0], k[1])}
    redone = [c for c in state.chunks if touched.overlap(c.interval.start, c.interval.end)]
    if redone:
        ids = {r.id for c in redone for r in c.segments}
        state.rows.update(chunk_rows(datasource=datasource, ids=ids))
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
