"""Reads shared by the console, the REST API and the workers (bounded query counts)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.db.models import Count, Exists, Max, Min, OuterRef, Q, QuerySet, Sum

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
    return CommitLogEntry.objects.filter(datasource=datasource).aggregate(m=Max("seq"))["m"] or 0


def used_ids_as_of(*, datasource: str, as_of: int) -> set[str]:
    """The ids of the segments that were used right after commit `as_of`."""
    used: set[str] = set()
    for kind, added, removed in CommitLogEntry.objects.filter(
        datasource=datasource, seq__lte=as_of
    ).values_list("kind", "added", "removed"):
        used.difference_update(removed or [])
        used.update(added or [])
        if kind == CommitKind.KILL:
            used.difference_update(removed or [])
    return used


def timeline_for(*, datasource: str, as_of: int | None = None) -> Timeline:
    """The timeline of a dataSource's used segments (or as of a commit sequence).

    Two queries at most; the current timeline is cached per process and
    rebuilt when the dataSource's commit log moves.
    """
    if as_of is not None:
        ids = used_ids_as_of(datasource=datasource, as_of=as_of)
        return Timeline.build(_segment_refs(datasource, ids) if ids else [])
    seq = last_commit_seq(datasource=datasource)
    with _cache_lock:
        cached = _timeline_cache.get(datasource)
        if cached is not None and cached[0] == seq:
            return cached[1]
    timeline = Timeline.build(_segment_refs(datasource))
    with _cache_lock:
        _timeline_cache[datasource] = (seq, timeline)
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


def datasources_list() -> list[DataSourceSummary]:
    rows = (
        DataSource.objects.annotate(
            n=Count("segments", filter=Q(segments__used=True)),
            rows=Sum("segments__num_rows", filter=Q(segments__used=True)),
            size=Sum("segments__size_bytes", filter=Q(segments__used=True)),
            first=Min("segments__start", filter=Q(segments__used=True)),
            last=Max("segments__end", filter=Q(segments__used=True)),
        )
        .order_by("name")
        .values("name", "n", "rows", "size", "first", "last")
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


def locks_list(*, datasource: str | None = None) -> QuerySet[TaskLock]:
    qs = TaskLock.objects.select_related("task", "revoked_by")
    if datasource:
        qs = qs.filter(datasource=datasource)
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


@dataclass(frozen=True)
class TaskSlot:
    """One task slot: the task that holds it (RUNNING, or WAITING for a lock), or None."""

    number: int
    task: Task | None


@dataclass(frozen=True)
class TaskSlots:
    """Who holds the task slots, and the PENDING tasks queued for one.

    A WAITING task holds its slot (its worker process waits for the lock); a
    PENDING task has no slot yet. `pending_for_slot` says whether the PENDING
    tasks wait because every slot is taken (rather than being about to start)."""

    capacity: int
    slots: list[TaskSlot]
    pending: list[Task]
    pending_count: int

    @property
    def busy(self) -> int:
        return sum(1 for slot in self.slots if slot.task is not None)

    @property
    def free(self) -> int:
        return len(self.slots) - self.busy

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


def task_slots(*, pending_limit: int = 50) -> TaskSlots:
    """The STRATA_TASK_SLOTS slots with their tasks in start order, then the
    PENDING tasks oldest first (at most `pending_limit`). Two queries.

    The capacity is the configured STRATA_TASK_SLOTS; should more tasks run (more
    workers than configured), every one is shown, in slots beyond it."""
    from django.conf import settings

    holders = list(
        Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING))
        .only(*_SLOT_FIELDS)
        .order_by("started_at", "id")
    )
    capacity = max(int(settings.STRATA_TASK_SLOTS), len(holders))
    slots = [
        TaskSlot(number=n + 1, task=holders[n] if n < len(holders) else None)
        for n in range(capacity)
    ]
    pending_qs = Task.objects.filter(status=TaskStatus.PENDING).only(*_SLOT_FIELDS)
    pending = list(pending_qs.order_by("created_at", "id")[: pending_limit + 1])
    pending_count = len(pending) if len(pending) <= pending_limit else pending_qs.count()
    return TaskSlots(
        capacity=int(settings.STRATA_TASK_SLOTS),
        slots=slots,
        pending=pending[:pending_limit],
        pending_count=pending_count,
    )
