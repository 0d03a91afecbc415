"""A dataSource's timeline of used segments: the process's current one (one
immutable snapshot per commit sequence, shared by every reader) and one as of any
past commit (from the newest checkpoint at or before it and the log after it).

Reads only: checkpoints are written by `services.checkpoints`, after a publish."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from itertools import compress
from operator import attrgetter, not_

from django.db import connection

from metastore.checkpoint_codec import decode_refs
from metastore.models import CommitKind, CommitLogEntry, Segment, TimelineCheckpoint
from metastore.selectors import _cache
from metastore.timeline import (
    REF_COLUMNS,
    LogChange,
    SegmentRef,
    Timeline,
    collector_paused,
    fold_commits,
    refs_from_rows,
)
from metastore.timeline_view import Follow

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_id_of = attrgetter("id")

# On PostgreSQL the hot path skips Django's per-row conversion: times come as epoch
# microseconds and the JSON sets as text, only where they differ from {partition}.
_PG_REFS_SQL = """
SELECT s.id,
       (EXTRACT(EPOCH FROM s.start) * 1000000)::bigint,
       (EXTRACT(EPOCH FROM s."end") * 1000000)::bigint,
       s.version, s.partition, s.minor_version,
       CASE WHEN s.minor_version > 0 OR s.root_partitions <> jsonb_build_array(s.partition)
            THEN s.root_partitions::text END,
       CASE WHEN s.minor_version > 0 OR s.atomic_update_group <> jsonb_build_array(s.partition)
            THEN s.atomic_update_group::text END,
       s.core_partitions, s.tombstone
  FROM metastore_segment s JOIN metastore_datasource d ON d.id = s.datasource_id
 WHERE d.name = %s AND {where}
"""


def segment_row_refs(datasource: str, ids: set[str] | None = None) -> list[SegmentRef]:
    if connection.vendor == "postgresql":
        params: list = [datasource]
        if ids is None:
            where = "s.used"
        else:
            where = "s.id = ANY(%s)"
            params.append(list(ids))
        with connection.cursor() as cursor:
            cursor.execute(_PG_REFS_SQL.format(where=where), params)
            times: dict[int, datetime] = {}
            rows = []
            for r in cursor.fetchall():
                start = times.get(r[1]) or times.setdefault(
                    r[1], _EPOCH + timedelta(microseconds=r[1])
                )
                end = times.get(r[2]) or times.setdefault(
                    r[2], _EPOCH + timedelta(microseconds=r[2])
                )
                rows.append((r[0], start, end, *r[3:]))
        return refs_from_rows(rows)
    qs = Segment.objects.filter(datasource__name=datasource)
    qs = qs.filter(used=True) if ids is None else qs.filter(id__in=ids)
    return refs_from_rows(qs.values_list(*REF_COLUMNS))


def segment_refs(*, datasource: str, ids: set[str]) -> dict[str, SegmentRef]:
    """The SegmentRefs of those of `ids` that still exist in `datasource`, by id."""
    return {ref.id: ref for ref in segment_row_refs(datasource, ids)}


def last_commit_seq(*, datasource: str) -> int:
    # The newest entry, not MAX(seq): one probe of the (dataSource, seq) index
    # whether or not the planner has statistics (see lockbox_sql).
    newest = (
        CommitLogEntry.objects.filter(datasource=datasource)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return newest or 0


def used_ids_as_of(*, datasource: str, as_of: int) -> set[str]:
    """The ids of the segments that were used right after commit `as_of`: the
    newest checkpoint at or before it, then the log entries after that."""
    base_seq, base = checkpoint_at(datasource, as_of)
    used = {ref.id for ref in base} if base is not None else set()
    change = _log_change(datasource, base_seq, as_of)
    used.difference_update(change.removed)
    used.update(change.added)
    return used


def checkpoint_at(datasource: str, seq: int) -> tuple[int, list[SegmentRef] | None]:
    """(its seq, its refs) of the newest readable checkpoint at or before `seq`, or
    (0, None). One whose bytes do not decode is skipped, with a warning, for the
    one before it: it is never where a read starts (nor, for the service, the newest)."""
    below = seq + 1
    while True:
        found = (
            TimelineCheckpoint.objects.filter(datasource=datasource, seq__lt=below)
            .order_by("-seq")
            .values_list("seq", "refs")
            .first()
        )
        if found is None:
            return 0, None
        refs = _decoded(datasource, *found)
        if refs is not None:
            return found[0], refs
        below = found[0]


# Per dataSource, which of its checkpoints decode (seq -> bool), as this process
# found them: the service's due check reads each of them at most once. Bounded:
# past this many seqs a dataSource's are forgotten (it keeps fewer checkpoints).
_readable: dict[str, dict[int, bool]] = {}
_REMEMBERED = 256


def _remember(datasource: str, seq: int, readable: bool) -> None:
    known = _readable.setdefault(datasource, {})
    if len(known) >= _REMEMBERED:
        known.clear()
    known[seq] = readable


def _decoded(datasource: str, seq: int, data) -> list[SegmentRef] | None:
    """A checkpoint's refs, or None (logged, remembered) if its bytes do not decode."""
    try:
        refs = decode_refs(data)
    except Exception as exc:  # noqa: BLE001 - any decoding error: not a checkpoint
        log.warning(
            "timeline checkpoint %s #%s is unreadable (%s: %s); reading from the one before it",
            datasource,
            seq,
            type(exc).__name__,
            exc,
        )
        refs = None
    _remember(datasource, seq, refs is not None)
    return refs


def checkpoint_written(*, datasource: str, seq: int) -> None:
    """Remember that the checkpoint this process just stored at `seq` decodes."""
    _remember(datasource, seq, True)


def unreadable_checkpoints(*, datasource: str) -> list[int]:
    """The seqs of the dataSource's checkpoints this process found unreadable."""
    return [seq for seq, ok in tuple(_readable.get(datasource, {}).items()) if not ok]


def _newest_readable(datasource: str, seq: int) -> int | None:
    """The seq of the newest checkpoint at or before `seq` that decodes (each one
    decoded at most once per process; the usual newest one is known already)."""
    seqs = (
        TimelineCheckpoint.objects.filter(datasource=datasource, seq__lte=seq)
        .order_by("-seq")
        .values_list("seq", flat=True)
    )
    for found in seqs:
        ok = _readable.get(datasource, {}).get(found)
        if ok is None:
            data = (
                TimelineCheckpoint.objects.filter(datasource=datasource, seq=found)
                .values_list("refs", flat=True)
                .first()
            )
            ok = data is not None and _decoded(datasource, found, data) is not None
        if ok:
            return found
    return None


def checkpoint_due(*, datasource: str, seq: int, after: int) -> bool:
    """Whether a checkpoint at commit `seq` is due: there is no readable one at or
    before it, or more than `after` commits were logged since the newest one."""
    newest = _newest_readable(datasource, seq)
    if newest is None:
        return True
    tail = CommitLogEntry.objects.filter(datasource=datasource, seq__gt=newest, seq__lte=seq)
    return tail[: after + 1].count() > after


def _log_change(
    datasource: str, after: int, upto: int, *, limit: int | None = None
) -> LogChange | None:
    """The net change of the log entries in (after, upto] (`timeline.fold_commits`)."""
    entries = CommitLogEntry.objects.filter(
        datasource=datasource, seq__gt=after, seq__lte=upto
    ).values_list("added", "removed")
    return fold_commits(entries, limit=limit)


def refs_at(*, datasource: str, seq: int) -> list[SegmentRef]:
    """The refs of the segments used right after commit `seq`, the dataSource's
    last commit when the caller read it: what a checkpoint at `seq` holds."""
    return _refs_at(datasource, seq, latest=True)


def _refs_at(datasource: str, seq: int, *, latest: bool) -> list[SegmentRef]:
    """The refs of the segments used right after commit `seq` that still exist
    (killed segments are gone; their ids never come back).

    `latest`: `seq` was the dataSource's last commit when read, so with no
    checkpoint the used segment rows are read instead of the whole log (they
    agree for everything written through the services, and rows written around
    them, as benchmarks do, are then seen too)."""
    base_seq, base = checkpoint_at(datasource, seq)
    if base is None and latest:
        return segment_row_refs(datasource)
    change = _log_change(datasource, base_seq, seq)
    refs = base if base is not None else []
    if change.removed:  # (in C: the checkpoint may hold hundreds of thousands)
        gone = map(change.removed.__contains__, map(_id_of, refs))
        refs = list(compress(refs, map(not_, gone)))
    if change.added:
        missing = _not_among(refs, change.added)
        if missing:
            refs += segment_row_refs(datasource, missing)
    if not latest and base is not None:
        refs = _without_killed_after(datasource, seq, refs)
    return refs


def _not_among(refs: list[SegmentRef], ids) -> set[str]:
    """Those of `ids` that no ref in `refs` has (a few ids: a scan each, in C)."""
    if len(ids) > 8:
        present = set(map(_id_of, refs))
        return {sid for sid in ids if sid not in present}
    have = list(map(_id_of, refs))
    return {sid for sid in ids if sid not in have}


def _without_killed_after(datasource: str, seq: int, refs: list[SegmentRef]) -> list[SegmentRef]:
    """`refs` less the segments killed after commit `seq`: a checkpoint's refs of
    them would show files that are gone."""
    gone = {
        sid
        for (ids,) in CommitLogEntry.objects.filter(
            datasource=datasource, kind=CommitKind.KILL, seq__gt=seq
        ).values_list("removed")
        for sid in ids or ()
    }
    return [ref for ref in refs if ref.id not in gone] if gone else refs


# Past this many segment ids changed since the cached timeline, rebuild it instead.
_INCREMENTAL_LIMIT = 20_000


def timeline_for(*, datasource: str, as_of: int | None = None) -> Timeline:
    """The timeline of a dataSource's used segments (or as of a commit sequence).

    The current timeline is cached per process with the commit seq it reflects;
    when the log moves, the entries after that seq are applied to a copy of it
    (their removed ids leave, their added ids that are still used come in)
    instead of rebuilding it, and the copy replaces it in the cache. Commits of
    one dataSource are serialized on its lock, so their seqs become visible in
    order. The database is read outside the cache's lock: threads that find the
    same stale entry may each do the work; the first to finish swaps it in.

    A process without it (and time travel) starts from the newest checkpoint at
    or before the commit wanted and replays the log after it (`_refs_at`).
    """
    if as_of is not None:
        return _built(datasource, as_of, latest=False)
    seq = last_commit_seq(datasource=datasource)
    with _cache.lock:
        cached = _cache.timelines.get(datasource)
    if cached is not None and cached[0] == seq:
        return cached[1]
    if cached is not None and cached[0] < seq:
        timeline = _applied(datasource, cached, seq)
        if timeline is not None:
            return timeline
    timeline = _built(datasource, seq, latest=True)
    with _cache.lock:
        current = _cache.timelines.get(datasource)
        if current is None or current[0] <= seq:
            _cache.timelines[datasource] = (seq, timeline)
    return timeline


def _built(datasource: str, seq: int, *, latest: bool) -> Timeline:
    """The timeline of `_refs_at`: the decode and the build under one pause of the
    cyclic collector, so that it walks what they made once, not once after each."""
    with collector_paused():
        return Timeline.build(_refs_at(datasource, seq, latest=latest))


def _applied(datasource: str, cached: tuple[int, Timeline], seq: int) -> Timeline | None:
    """The cached timeline brought to `seq` (swapped into the cache if it is
    still the entry there); None when rebuilding is cheaper or the entries do
    not fit (the entry is then dropped)."""
    after, base = cached
    change = _log_change(datasource, after, seq, limit=_INCREMENTAL_LIMIT)
    if change is None:
        return None
    came = _still_used(datasource, change.added)
    timeline = base.copy()  # `base` never changes: readers in other threads may hold it
    try:
        spans = apply_change(timeline, change.removed, came)
    except (KeyError, ValueError):
        timeline = spans = None
    with _cache.lock:
        if _cache.timelines.get(datasource) is not cached:
            return timeline  # another thread moved the entry on meanwhile
        if timeline is None:
            _cache.timelines.pop(datasource, None)
            _cache.states.pop(datasource, None)
            _cache.follows.pop(datasource, None)
            return None
        _cache.timelines[datasource] = (seq, timeline)
        _follow_state(datasource, base, timeline, (after, seq), spans)
    return timeline


def _still_used(datasource: str, ids) -> list[SegmentRef]:
    """The refs of those of `ids` still used now, in their order: a later unmark
    already shows in `used`."""
    refs = segment_row_refs(datasource, set(ids)) if ids else []
    if not refs:
        return []
    used = set(
        Segment.objects.filter(id__in=[r.id for r in refs], used=True).values_list("id", flat=True)
    )
    return [ref for ref in refs if ref.id in used]


def apply_change(
    timeline: Timeline, removed: set[str], came: list[SegmentRef]
) -> list[tuple[datetime, datetime]]:
    """Remove `removed` from `timeline` (those in it) and add `came`; the spans of
    time they touched. `timeline` must be one nobody else holds (a fresh copy)."""
    spans: list[tuple[datetime, datetime]] = []
    for sid in removed:
        ref = timeline.get(sid)
        if ref is not None:
            spans.append((ref.interval.start, ref.interval.end))
            timeline.remove(sid)
    for ref in came:
        spans.append((ref.interval.start, ref.interval.end))
        timeline.add(ref)
    return spans


def _follow_state(datasource: str, base: Timeline, timeline: Timeline, seqs, spans) -> None:
    """Record (under the cache's lock) that the console's state of `base` can
    follow the change to `timeline` (seqs (after, upto)), or drop the state when
    it is not at `after`. The state itself is never changed."""
    after, upto = seqs
    state = _cache.states.get(datasource)
    if state is None:
        return
    follow = _cache.follows.get(datasource)
    latest, at = (follow.timeline, follow.seq) if follow else (state.timeline, state.seq)
    if latest is not base:
        return
    if at == after:
        done = follow.spans if follow else ()
        _cache.follows[datasource] = Follow(upto, done + tuple(spans), timeline)
    else:
        _cache.states.pop(datasource, None)
        _cache.follows.pop(datasource, None)


def timeline_caches_clear() -> None:
    """Forget the current timelines and their console states (tests, benchmarks),
    and which checkpoints were found readable: as a fresh process."""
    _cache.clear()
    _readable.clear()
