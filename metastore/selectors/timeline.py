"""A dataSource's timeline of used segments: the process's current one (one
immutable snapshot per commit sequence, shared by every reader) and one as of any
past commit (from the newest checkpoint at or before it and the log after it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zlib import error as zlib_error

from django.db import DatabaseError, connection, transaction

from metastore.checkpoint_codec import decode_refs, encode_refs
from metastore.intervals import Interval
from metastore.models import CommitKind, CommitLogEntry, Segment, TimelineCheckpoint
from metastore.selectors import _cache
from metastore.timeline import SegmentRef, Timeline

_REF_FIELDS = (
    "id",
    "start",
    "end",
    "version",
    "partition",
    "minor_version",
    "root_partitions",
    "atomic_update_group",
    "core_partitions",
    "tombstone",
)


def _refs(rows) -> list[SegmentRef]:
    """SegmentRefs from (id, start, end, version, partition, minor, roots, aug, core,
    tombstone) rows; equal intervals and root sets are shared, not rebuilt."""
    intervals: dict[tuple, Interval] = {}
    sets: dict[object, frozenset[int] | None] = {}
    out = []
    for r in rows:
        key = (r[1], r[2])
        interval = intervals.get(key)
        if interval is None:
            interval = intervals[key] = Interval(*key)
        out.append(
            SegmentRef(
                id=r[0],
                interval=interval,
                version=r[3],
                partition=r[4],
                minor_version=r[5],
                root_partitions=_as_set(r[6], sets),
                atomic_update_group=_as_set(r[7], sets),
                core_partitions=r[8],
                tombstone=r[9],
            )
        )
    return out


def _as_set(value, cache: dict) -> frozenset[int] | None:
    if not value:
        return None
    key = value if isinstance(value, str) else tuple(value)
    found = cache.get(key)
    if found is None:
        found = cache[key] = frozenset(json.loads(value) if isinstance(value, str) else value)
    return found


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

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


def _segment_refs(datasource: str, ids: set[str] | None = None) -> list[SegmentRef]:
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
        return _refs(rows)
    qs = Segment.objects.filter(datasource__name=datasource)
    qs = qs.filter(used=True) if ids is None else qs.filter(id__in=ids)
    return _refs(qs.values_list(*_REF_FIELDS))


def segment_refs(*, datasource: str, ids: set[str]) -> dict[str, SegmentRef]:
    """The SegmentRefs of those of `ids` that still exist in `datasource`, by id."""
    return {ref.id: ref for ref in _segment_refs(datasource, ids)}


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
    base_seq, base = _checkpoint_at(datasource, as_of)
    used = {ref.id for ref in base} if base is not None else set()
    _, added, removed = _replay(datasource, base_seq, as_of)
    used.difference_update(removed)
    used.update(added)
    return used


# A read that replays more commits than this past the newest checkpoint writes one.
_CHECKPOINT_AFTER = 32
# Checkpoints kept per dataSource: past this the older ones are thinned out (every
# other one goes), so time travel far back replays more, up to a bounded stretch.
_CHECKPOINTS_KEPT = 48
_CHECKPOINTS_NEWEST = 8  # never thinned


def _checkpoint_at(datasource: str, seq: int) -> tuple[int, list[SegmentRef] | None]:
    """(its seq, its refs) of the newest checkpoint at or before `seq`, or (0, None)."""
    found = (
        TimelineCheckpoint.objects.filter(datasource=datasource, seq__lte=seq)
        .order_by("-seq")
        .values_list("seq", "refs")
        .first()
    )
    if found is None:
        return 0, None
    try:
        return found[0], decode_refs(found[1])
    except (ValueError, KeyError, TypeError, zlib_error):
        return 0, None  # a checkpoint of an unknown format is ignored, never trusted


def _replay(datasource: str, after: int, upto: int) -> tuple[int, dict[str, None], set[str]]:
    """The log entries in (after, upto]: (how many, ids they leave used that were
    not, ids they leave unused), in commit order as `used_ids_as_of` defines it."""
    added: dict[str, None] = {}
    removed: set[str] = set()
    count = 0
    for kind, add, rem in CommitLogEntry.objects.filter(
        datasource=datasource, seq__gt=after, seq__lte=upto
    ).values_list("kind", "added", "removed"):
        count += 1
        for sid in rem or ():
            added.pop(sid, None)
            removed.add(sid)
        for sid in add or ():
            removed.discard(sid)
            added[sid] = None
        if kind == CommitKind.KILL:
            for sid in rem or ():
                added.pop(sid, None)
                removed.add(sid)
    return count, added, removed


def _refs_at(datasource: str, seq: int, *, latest: bool) -> list[SegmentRef]:
    """The refs of the segments used right after commit `seq` that still exist
    (killed segments are gone; their ids never come back).

    `latest`: `seq` was the dataSource's last commit when read, so with no
    checkpoint the used segment rows are read instead of the whole log (they
    agree for everything written through the services, and rows written around
    them, as benchmarks do, are then seen too)."""
    base_seq, base = _checkpoint_at(datasource, seq)
    if base is None and latest:
        refs = _segment_refs(datasource)
        # The rows are the state at `seq` only if no commit landed while reading them.
        if seq and last_commit_seq(datasource=datasource) == seq:
            _checkpoint_save(datasource, seq, refs)
        return refs
    count, added, removed = _replay(datasource, base_seq, seq)
    refs = base if base is not None else []
    if removed:
        refs = [ref for ref in refs if ref.id not in removed]
    if added:
        present = {ref.id for ref in refs}
        missing = {sid for sid in added if sid not in present}
        if missing:
            refs += _segment_refs(datasource, missing)
    if not latest and base is not None:
        # Checkpoint refs of segments killed after it would show files that are gone.
        gone = {
            sid
            for (ids,) in CommitLogEntry.objects.filter(
                datasource=datasource, kind=CommitKind.KILL, seq__gt=seq
            ).values_list("removed")
            for sid in ids or ()
        }
        if gone:
            refs = [ref for ref in refs if ref.id not in gone]
    if count > _CHECKPOINT_AFTER:
        _checkpoint_save(datasource, seq, refs)
    return refs


def _checkpoint_save(datasource: str, seq: int, refs: list[SegmentRef]) -> None:
    """Store a checkpoint (a derived cache: a failure to write one is ignored)."""
    try:
        with transaction.atomic():
            TimelineCheckpoint.objects.bulk_create(
                [
                    TimelineCheckpoint(
                        datasource=datasource, seq=seq, segments=len(refs), refs=encode_refs(refs)
                    )
                ],
                ignore_conflicts=True,
            )
            seqs = list(
                TimelineCheckpoint.objects.filter(datasource=datasource)
                .order_by("-seq")
                .values_list("seq", flat=True)
            )
            if len(seqs) > _CHECKPOINTS_KEPT:
                older = seqs[_CHECKPOINTS_NEWEST:]
                TimelineCheckpoint.objects.filter(
                    datasource=datasource, seq__in=older[1::2]
                ).delete()
    except (DatabaseError, ValueError):
        pass


# Past this many segment ids changed since the cached timeline, rebuild it instead.
_INCREMENTAL_LIMIT = 20_000


def timeline_for(*, datasource: str, as_of: int | None = None) -> Timeline:
    """The timeline of a dataSource's used segments (or as of a commit sequence).

    The current timeline is cached per process with the commit seq it reflects;
    when the log moves, the entries after that seq are applied to it (their
    removed ids leave, their added ids that are still used come in) instead of
    rebuilding it. Commits of one dataSource are serialized on its lock, so
    their seqs become visible in order.

    A process without it (and time travel) starts from the newest checkpoint at
    or before the commit wanted and replays the log after it (`_refs_at`).
    """
    if as_of is not None:
        return Timeline.build(_refs_at(datasource, as_of, latest=False))
    seq = last_commit_seq(datasource=datasource)
    with _cache.lock:
        cached = _cache.timelines.get(datasource)
        if cached is not None and cached[0] == seq:
            return cached[1]
        if cached is not None and cached[0] < seq:
            timeline = _apply_commits(datasource, cached[1], cached[0], seq)
            if timeline is not None:
                _cache.timelines[datasource] = (seq, timeline)
                return timeline
    timeline = Timeline.build(_refs_at(datasource, seq, latest=True))
    with _cache.lock:
        _cache.timelines[datasource] = (seq, timeline)
    return timeline


def _apply_commits(datasource: str, base: Timeline, after: int, upto: int) -> Timeline | None:
    """A copy of `base` (as of seq `after`) brought to seq `upto`; None when
    rebuilding is cheaper or the entries do not fit. `base` never changes: it may
    be in the hands of readers in other threads."""
    added: dict[str, None] = {}
    removed: set[str] = set()
    for _, add, rem in CommitLogEntry.objects.filter(
        datasource=datasource, seq__gt=after, seq__lte=upto
    ).values_list("kind", "added", "removed"):
        for sid in rem or ():
            added.pop(sid, None)
            removed.add(sid)
        for sid in add or ():
            removed.discard(sid)
            added[sid] = None
        if len(added) + len(removed) > _INCREMENTAL_LIMIT:
            return None
    refs = _segment_refs(datasource, set(added)) if added else []
    # Only ids still used now come in: a later unmark already shows in `used`.
    still_used = (
        set(
            Segment.objects.filter(id__in=[r.id for r in refs], used=True).values_list(
                "id", flat=True
            )
        )
        if refs
        else set()
    )
    spans: list[tuple[datetime, datetime]] = []
    came: list[SegmentRef] = []
    timeline = base.copy()
    try:
        for sid in removed:
            ref = timeline.get(sid)
            if ref is not None:
                spans.append((ref.interval.start, ref.interval.end))
                timeline.remove(sid)
        for ref in refs:
            if ref.id in still_used:
                spans.append((ref.interval.start, ref.interval.end))
                timeline.add(ref)
                came.append(ref)
    except (KeyError, ValueError):
        _cache.timelines.pop(datasource, None)
        _cache.states.pop(datasource, None)
        return None
    # The console's state of this timeline can follow the same change.
    state = _cache.states.get(datasource)
    if state is not None and state.latest_timeline is base:
        if (state.pending_seq is None and state.seq == after) or state.pending_seq == after:
            state.pending_spans.extend(spans)
            state.pending_added.extend(came)
            state.pending_seq = upto
            state.pending_timeline = timeline
        else:
            _cache.states.pop(datasource, None)
    return timeline


def timeline_caches_clear() -> None:
    """Forget the current timelines and their console states (tests, benchmarks)."""
    _cache.clear()
