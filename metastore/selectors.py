"""Reads shared by the console, the REST API and the workers (bounded query counts)."""

from __future__ import annotations

import json
import threading
from collections.abc import Collection
from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import UTC, datetime, timedelta
from zlib import error as zlib_error

from django.db import DatabaseError, connection, transaction
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet, Sum

from metastore.checkpoint_codec import decode_refs, encode_refs
from metastore.intervals import Interval
from metastore.models import (
    FINAL_STATUSES,
    CommitKind,
    CommitLogEntry,
    DataSource,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
    TimelineCheckpoint,
    Worker,
)
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

_cache_lock = threading.Lock()
_timeline_cache: dict[str, tuple[int, Timeline]] = {}


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
    with _cache_lock:
        cached = _timeline_cache.get(datasource)
        if cached is not None and cached[0] == seq:
            return cached[1]
        if cached is not None and cached[0] < seq:
            timeline = _apply_commits(datasource, cached[1], cached[0], seq)
            if timeline is not None:
                _timeline_cache[datasource] = (seq, timeline)
                return timeline
    timeline = Timeline.build(_refs_at(datasource, seq, latest=True))
    with _cache_lock:
        _timeline_cache[datasource] = (seq, timeline)
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
        _timeline_cache.pop(datasource, None)
        _state_cache.pop(datasource, None)
        return None
    # The console's state of this timeline can follow the same change.
    state = _state_cache.get(datasource)
    if state is not None and state.latest_timeline is base:
        if (state.pending_seq is None and state.seq == after) or state.pending_seq == after:
            state.pending_spans.extend(spans)
            state.pending_added.extend(came)
            state.pending_seq = upto
            state.pending_timeline = timeline
        else:
            _state_cache.pop(datasource, None)
    return timeline


@dataclass(frozen=True)
class DataSourceSummary:
    name: str
    segments: int
    rows: int
    size_bytes: int
    start: object
    end: object
    active_tasks: int
    created_at: object = None


def datasources_list(*, name: str | None = None) -> list[DataSourceSummary]:
    """Every dataSource (or the one named) with its used segments' count, rows,
    bytes and time span, and its active tasks."""
    found = DataSource.objects.filter(name=name) if name is not None else DataSource.objects
    rows = (
        found.annotate(
            n=Count("segments", filter=Q(segments__used=True)),
            rows=Sum("segments__num_rows", filter=Q(segments__used=True)),
            size=Sum("segments__size_bytes", filter=Q(segments__used=True)),
            first=Min("segments__start", filter=Q(segments__used=True)),
            last=Max("segments__end", filter=Q(segments__used=True)),
        )
        .order_by("name")
        .values("name", "n", "rows", "size", "first", "last", "created_at")
    )
    active = dict(
        Task.objects.filter(status__in=("PENDING", "WAITING", "RUNNING"))
        .values_list("datasource")
        .annotate(c=Count("id"))
        .values_list("datasource", "c")
    )
    return [
        DataSourceSummary(
            name=r["name"],
            segments=r["n"] or 0,
            rows=r["rows"] or 0,
            size_bytes=r["size"] or 0,
            start=r["first"],
            end=r["last"],
            active_tasks=active.get(r["name"], 0),
            created_at=r["created_at"],
        )
        for r in rows
    ]


def segments_for(
    *,
    datasource: str,
    interval: Interval | None = None,
    used: bool | None = True,
) -> QuerySet[Segment]:
    qs = Segment.objects.filter(datasource__name=datasource)
    if used is not None:
        qs = qs.filter(used=used)
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return qs.order_by("start", "end", "version", "minor_version", "partition")


def segments_with_ids(*, ids: Collection[str]) -> QuerySet[Segment]:
    """The segments `ids` (used or not now), in segments_for's order."""
    return (
        Segment.objects.filter(id__in=list(ids))
        .select_related("datasource")
        .order_by("datasource__name", "start", "end", "version", "minor_version", "partition")
    )


def datasource_names() -> list[str]:
    """Every dataSource's name, whether it has used segments or not."""
    return list(DataSource.objects.order_by("name").values_list("name", flat=True))


def metric_types() -> dict[str, dict[str, str]]:
    """{dataSource: {metric column: aggregator type}} from the schemas of the used
    segments (a column's type in its newest segment wins). One query."""
    out: dict[str, dict[str, str]] = {}
    rows = (
        Segment.objects.filter(used=True)
        .exclude(schema={})
        .order_by("datasource__name", "created_at")
        .values_list("datasource__name", "schema")
    )
    for name, schema in rows:
        for metric in (schema or {}).get("metrics") or ():
            if isinstance(metric, dict) and metric.get("name"):
                out.setdefault(name, {})[metric["name"]] = metric.get("type")
    return out


@dataclass
class SegmentView:
    """A segment with its visibility, for pages and the API."""

    segment: Segment
    status: str  # visible | partial | overshadowed | unused
    complete: bool
    visible_intervals: list[Interval]
    overshadowed_by: list[str]


def segment_views(
    *, datasource: str, interval: Interval | None = None, used: bool | None = True
) -> list[SegmentView]:
    timeline = timeline_for(datasource=datasource)
    out = []
    for seg in segments_for(datasource=datasource, interval=interval, used=used):
        if not seg.used or timeline.get(seg.id) is None:
            out.append(SegmentView(seg, "unused", False, [], []))
            continue
        out.append(
            SegmentView(
                segment=seg,
                status=timeline.status(seg.id),
                complete=timeline.chunk_complete((seg.interval, seg.version)),
                visible_intervals=timeline.visible_intervals(seg.id),
                overshadowed_by=sorted(timeline.overshadowed_by(seg.id)),
            )
        )
    return out


def locks_list(
    *, datasource: str | None = None, datasources: Collection[str] | None = None
) -> QuerySet[TaskLock]:
    """The locks held, of one dataSource, of several (`datasources`), or of all."""
    qs = TaskLock.objects.select_related("task", "revoked_by")
    if datasource:
        qs = qs.filter(datasource=datasource)
    if datasources is not None:
        qs = qs.filter(datasource__in=datasources)
    return qs.order_by("datasource", "start", "created_at")


def tasks_list(
    *, status: str | None = None, datasource: str | None = None, type: str | None = None
) -> QuerySet[Task]:
    qs = Task.objects.defer("spec", "report")
    if status:
        qs = qs.filter(status=status.upper())
    if datasource:
        qs = qs.filter(datasource=datasource)
    if type:
        qs = qs.filter(type=type)
    return qs.order_by("-created_at")


def commits_for(*, datasource: str) -> QuerySet[CommitLogEntry]:
    return (
        CommitLogEntry.objects.filter(datasource=datasource).select_related("user").order_by("-seq")
    )


def unpublished_allocations(
    *, ended_after: datetime, ended_before: datetime
) -> list[PendingSegment]:
    """Segment ids handed to tasks that ended in [ended_after, ended_before) and
    never published under them: whatever such a task left in deep storage (a
    worker killed between writing and publishing) belongs to no segment."""
    published = Segment.objects.filter(
        datasource__name=OuterRef("datasource"),
        start=OuterRef("start"),
        end=OuterRef("end"),
        version=OuterRef("version"),
        partition=OuterRef("partition"),
    )
    return list(
        PendingSegment.objects.filter(
            task__status__in=FINAL_STATUSES,
            task__ended_at__gte=ended_after,
            task__ended_at__lt=ended_before,
        )
        .exclude(Exists(published))
        .order_by("id")
    )


def unpublished_allocations_of(*, task_id: str) -> list[PendingSegment]:
    """Segment ids handed to one task and not published under them (whatever
    it moved into deep storage for them belongs to no segment once it ends)."""
    published = Segment.objects.filter(
        datasource__name=OuterRef("datasource"),
        start=OuterRef("start"),
        end=OuterRef("end"),
        version=OuterRef("version"),
        partition=OuterRef("partition"),
    )
    return list(
        PendingSegment.objects.filter(task_id=task_id).exclude(Exists(published)).order_by("id")
    )


def locations_under(*, directory: str) -> bool:
    """Whether any segment's file lies under `directory` (upgraded copies share files)."""
    return Segment.objects.filter(
        Q(location=directory) | Q(location__startswith=directory.rstrip("/") + "/")
    ).exists()


def stale_active_tasks(*, older_than: datetime) -> QuerySet[Task]:
    """RUNNING or WAITING tasks whose heartbeat stopped before `older_than` (a task
    waiting for a lock heartbeats too; a PENDING one has no worker yet)."""
    return Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING)).filter(
        Q(heartbeat_at__lt=older_than) | Q(heartbeat_at__isnull=True, created_at__lt=older_than)
    )


def pending_task_ids(*, created_before: datetime) -> list[str]:
    """Ids of the tasks still PENDING (no worker claimed them) created before then."""
    return list(
        Task.objects.filter(status=TaskStatus.PENDING, created_at__lt=created_before)
        .order_by("created_at")
        .values_list("id", flat=True)
    )


# --- the console's timeline reads ------------------------------------------------------------


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
        from bisect import bisect_left

        j = bisect_left(self.starts, interval.end)
        try:
            lowest = interval.start - self.max_length
        except OverflowError:
            lowest = interval.start.min.replace(tzinfo=interval.start.tzinfo)
        i = bisect_left(self.starts, lowest)
        return [c for c in self.chunks[i:j] if c.interval.end > interval.start]


_state_cache: dict[str, TimelineState] = {}


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


def _state_of(timeline: Timeline, seq: int | None) -> TimelineState:
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
        ids = {r.id for r in state.timeline.segments()}
        return chunk_rows(datasource=datasource, ids=ids, interval=interval)
    if state.rows is None:
        state.rows = chunk_rows(datasource=datasource)
    return state.rows


def _is_current(datasource: str, state: TimelineState) -> bool:
    with _cache_lock:
        return _state_cache.get(datasource) is state


def timeline_state(*, datasource: str, as_of: int | None = None) -> TimelineState:
    """The timeline and its per-chunk, per-segment visibility (kept per commit seq)."""
    timeline = timeline_for(datasource=datasource, as_of=as_of)
    if as_of is not None:
        return _state_of(timeline, as_of)
    with _cache_lock:
        entry = _timeline_cache.get(datasource)
        seq = entry[0] if entry is not None and entry[1] is timeline else None
        found = _state_cache.get(datasource)
        if found is not None and found.latest_timeline is timeline:
            if found.timeline is timeline and found.seq == seq:
                return found
            if seq is not None and found.pending_seq == seq:
                state = _state_moved(found, seq, datasource)
                _state_cache[datasource] = state
                return state
    state = _state_of(timeline, seq)
    with _cache_lock:
        _state_cache[datasource] = state
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


def segment_facts(*, ids) -> dict[str, tuple[int, int, str]]:
    """id -> (rows, bytes, upgraded_from) for a bounded set of segments."""
    return {
        r[0]: (r[1], r[2], r[3])
        for r in Segment.objects.filter(id__in=list(ids)).values_list(
            "id", "num_rows", "size_bytes", "upgraded_from"
        )
    }


def active_locks(*, datasource: str, interval: Interval | None = None) -> list[TaskLock]:
    qs = TaskLock.objects.filter(datasource=datasource).select_related("task")
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return list(qs.order_by("start", "created_at")[:200])


def pending_allocations(
    *, datasource: str, interval: Interval | None = None
) -> list[PendingSegment]:
    """Segment ids handed to active tasks and not published yet (being written)."""
    published = Segment.objects.filter(
        datasource__name=OuterRef("datasource"),
        start=OuterRef("start"),
        end=OuterRef("end"),
        version=OuterRef("version"),
        partition=OuterRef("partition"),
    )
    qs = PendingSegment.objects.filter(
        datasource=datasource, task__status__in=(TaskStatus.RUNNING, TaskStatus.WAITING)
    ).exclude(Exists(published))
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return list(qs.order_by("start", "version", "partition")[:500])


def segment_detail(*, segment_id: str) -> dict | None:
    """A segment with what overshadows it, what it overshadows and its commit."""
    seg = Segment.objects.select_related("datasource", "created_by").filter(id=segment_id).first()
    if seg is None:
        return None
    name = seg.datasource.name
    state = timeline_state(datasource=name)
    timeline = state.timeline
    status = "unused"
    overshadowed_by: list[str] = []
    overshadows: list[str] = []
    visible: list[Interval] = []
    if seg.used and segment_id in timeline:
        status = state.status.get(segment_id, "overshadowed")
        overshadowed_by = sorted(timeline.overshadowed_by(segment_id))
        visible = timeline.visible_intervals(segment_id)
        if status in ("visible", "partial"):
            for chunk in state.chunks_overlapping(seg.interval):
                for ref in chunk.segments:
                    if (
                        ref.id != segment_id
                        and state.status.get(ref.id) in ("overshadowed", "partial")
                        and segment_id in timeline.overshadowed_by(ref.id)
                    ):
                        overshadows.append(ref.id)
    commit = (
        CommitLogEntry.objects.filter(datasource=name, added__contains=[segment_id])
        .select_related("user")
        .order_by("seq")
        .first()
        if connection.vendor == "postgresql"
        else next(
            (
                c
                for c in CommitLogEntry.objects.filter(datasource=name)
                .select_related("user")
                .order_by("seq")
                if segment_id in (c.added or [])
            ),
            None,
        )
    )
    return {
        "segment": seg,
        "status": status,
        "overshadowed_by": overshadowed_by,
        "overshadows": sorted(overshadows),
        "visible_intervals": visible,
        "commit": commit,
        "schema": getattr(seg, "schema", None),
        "compaction_state": getattr(seg, "compaction_state", None),
    }


def commit_neighbours(*, datasource: str) -> tuple[int, int]:
    agg = CommitLogEntry.objects.filter(datasource=datasource).aggregate(
        lo=Min("seq"), hi=Max("seq")
    )
    return agg["lo"] or 0, agg["hi"] or 0


@dataclass(frozen=True)
class TaskSlot:
    """One task slot: the task that holds it (RUNNING, or WAITING for a lock), or None."""

    number: int
    task: Task | None


@dataclass(frozen=True)
class LiveWorker:
    """A worker whose heartbeat is recent, with its task slots and what holds them."""

    name: str
    nodename: str
    queues: list[str]
    capacity: int
    heartbeat_at: datetime
    tasks: list[str]  # the ids of the tasks it runs (RUNNING or WAITING)

    @property
    def busy(self) -> int:
        return len(self.tasks)

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.busy)


@dataclass(frozen=True)
class TaskSlots:
    """Who holds the task slots, and the PENDING tasks queued for one.

    The capacity is the sum of the live workers' slots (each registers its own
    with its heartbeat), not a setting: a stopped or lost worker's slots are
    gone. A WAITING task holds its slot (its worker waits for the lock); a
    PENDING task has no slot yet. `pending_for_slot` says whether the PENDING
    tasks wait because every slot is taken (rather than being about to start);
    `no_worker` that no worker is alive to run them at all."""

    capacity: int
    slots: list[TaskSlot]
    pending: list[Task]
    pending_count: int
    workers: list[LiveWorker] = dc_field(default_factory=list)

    @property
    def busy(self) -> int:
        return sum(1 for slot in self.slots if slot.task is not None)

    @property
    def free(self) -> int:
        return len(self.slots) - self.busy

    @property
    def no_worker(self) -> bool:
        return not self.workers

    @property
    def pending_for_slot(self) -> bool:
        return self.pending_count > 0 and self.free == 0


_SLOT_FIELDS = (
    "id",
    "type",
    "datasource",
    "status",
    "priority",
    "created_at",
    "started_at",
    "phase",
    "progress",
    "worker",
    "waiting_on",
    "waiting_since",
)


def live_workers(*, now: datetime | None = None) -> list[Worker]:
    """Workers whose last heartbeat is within STRATA_HEARTBEAT_TIMEOUT."""
    from django.conf import settings
    from django.utils import timezone

    since = (now or timezone.now()) - timedelta(seconds=float(settings.STRATA_HEARTBEAT_TIMEOUT))
    return list(Worker.objects.filter(heartbeat_at__gte=since).order_by("name"))


def task_slots(*, pending_limit: int = 50) -> TaskSlots:
    """The live workers' task slots with their tasks in start order, then the
    PENDING tasks oldest first (at most `pending_limit`). Three queries.

    Should more tasks run than the live workers have slots (a worker lost
    with its tasks not yet reaped), every one is shown, in slots beyond them."""
    workers = live_workers()
    holders = list(
        Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING))
        .only(*_SLOT_FIELDS)
        .order_by("started_at", "id")
    )
    live = []
    for w in workers:
        processes = set(w.processes or ()) | {w.name}
        live.append(
            LiveWorker(
                name=w.name,
                nodename=w.nodename,
                queues=list(w.queues or ()),
                capacity=w.capacity,
                heartbeat_at=w.heartbeat_at,
                tasks=[t.id for t in holders if t.worker in processes],
            )
        )
    capacity = sum(w.capacity for w in workers)
    slots = [
        TaskSlot(number=n + 1, task=holders[n] if n < len(holders) else None)
        for n in range(max(capacity, len(holders)))
    ]
    pending_qs = Task.objects.filter(status=TaskStatus.PENDING).only(*_SLOT_FIELDS)
    pending = list(pending_qs.order_by("created_at", "id")[: pending_limit + 1])
    pending_count = len(pending) if len(pending) <= pending_limit else pending_qs.count()
    return TaskSlots(
        capacity=capacity,
        slots=slots,
        pending=pending[:pending_limit],
        pending_count=pending_count,
        workers=live,
    )


def tasks_blocked_by(*, task_id: str, limit: int = 50) -> list[str]:
    """Ids of the WAITING tasks whose `waiting_on` names `task_id` (at most
    `limit`, oldest first). PostgreSQL filters by JSON containment; SQLite has no
    such lookup, so there the (few) waiting tasks are filtered here."""
    waiting = Task.objects.filter(status=TaskStatus.WAITING).order_by("created_at", "id")
    if connection.vendor == "postgresql":
        return list(
            waiting.filter(waiting_on__contains=[{"task": task_id}]).values_list("id", flat=True)[
                :limit
            ]
        )
    return [
        tid
        for tid, waiting_on in waiting.values_list("id", "waiting_on")
        if any(isinstance(b, dict) and b.get("task") == task_id for b in waiting_on or ())
    ][:limit]


def visible_columns(
    *, datasource: str, interval: Interval
) -> list[tuple[Interval, list[str], list[str]]]:
    """The dimension and metric names of the segments visible over `interval`
    (as Druid's Broker reports a dataSource's columns): one entry per visible
    piece of time, in time order, each with the names its segments record
    (metastore.schema), in order of first mention. Tombstones hold no columns."""
    pieces = timeline_for(datasource=datasource).lookup(interval)
    ids = {seg.id for _, seg in pieces if not seg.tombstone}
    schemas = dict(Segment.objects.filter(id__in=ids).values_list("id", "schema")) if ids else {}
    by_time: dict[Interval, tuple[list[str], list[str]]] = {}
    for piece, seg in pieces:
        if seg.tombstone:
            continue
        dims, metrics = by_time.setdefault(piece, ([], []))
        schema = schemas.get(seg.id) or {}
        for names, items in ((dims, schema.get("dimensions")), (metrics, schema.get("metrics"))):
            for item in items or ():
                name = item.get("name") if isinstance(item, dict) else None
                if isinstance(name, str) and name not in names:
                    names.append(name)
    return [(piece, dims, metrics) for piece, (dims, metrics) in by_time.items()]
