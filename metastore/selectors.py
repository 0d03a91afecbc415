"""Reads shared by the console, the REST API and the workers (bounded query counts)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from django.db.models import Count, Max, Min, Q, QuerySet, Sum

from metastore.intervals import Interval
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    DataSource,
    Segment,
    Task,
    TaskLock,
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
    return [
        SegmentRef(
            id=r[0],
            interval=Interval(r[1], r[2]),
            version=r[3],
            partition=r[4],
            minor_version=r[5],
            root_partitions=frozenset(r[6]) if r[6] else None,
            atomic_update_group=frozenset(r[7]) if r[7] else None,
            core_partitions=r[8],
            tombstone=r[9],
        )
        for r in rows
    ]


def last_commit_seq(*, datasource: str) -> int:
    return (
        CommitLogEntry.objects.filter(datasource=datasource).aggregate(m=Max("seq"))["m"] or 0
    )


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
        rows = Segment.objects.filter(datasource__name=datasource, id__in=ids).values_list(
            *_REF_FIELDS
        ) if ids else []
        return Timeline.build(_refs(rows))
    seq = last_commit_seq(datasource=datasource)
    with _cache_lock:
        cached = _timeline_cache.get(datasource)
        if cached is not None and cached[0] == seq:
            return cached[1]
    rows = Segment.objects.filter(datasource__name=datasource, used=True).values_list(*_REF_FIELDS)
    timeline = Timeline.build(_refs(rows))
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
    return CommitLogEntry.objects.filter(datasource=datasource).select_related("user").order_by(
        "-seq"
    )
