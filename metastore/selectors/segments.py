"""Segments: by dataSource and interval, by id, with their visibility, their
columns, and the allocations handed out for segments not published yet."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import (
    BooleanField,
    DateTimeField,
    Exists,
    F,
    Func,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Value,
)

from metastore.intervals import Interval
from metastore.models import FINAL_STATUSES, CommitLogEntry, PendingSegment, Segment, TaskStatus
from metastore.selectors.states import timeline_state
from metastore.selectors.timeline import timeline_for


class _TimeRangesOverlap(Func):
    """tstzrange(start, end) && tstzrange(a, b): what the GiST index of the segments'
    time ranges (migration 0020, PostgreSQL) answers."""

    output_field = BooleanField()

    def as_sql(self, compiler, connection, **extra_context):
        sqls, params = [], []
        for expression in self.source_expressions:
            sql, more = compiler.compile(expression)
            sqls.append(sql)
            params.extend(more)
        return f"tstzrange({sqls[0]}, {sqls[1]}) && tstzrange({sqls[2]}, {sqls[3]})", params


def overlapping(qs: QuerySet[Segment], interval: Interval) -> QuerySet[Segment]:
    """`qs`'s segments overlapping `interval`. On PostgreSQL the time ranges' GiST
    index finds them wherever `interval` lies: the (start, end) b-trees bound only
    one side, so a window in the middle of a long history read every row before it."""
    qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    if connection.vendor != "postgresql":
        return qs
    bounds = (Value(interval.start, DateTimeField()), Value(interval.end, DateTimeField()))
    return qs.filter(_TimeRangesOverlap(F("start"), F("end"), *bounds))


def segments_for(
    *,
    datasource: str,
    interval: Interval | None = None,
    used: bool | None = True,
    with_datasource: bool = False,
) -> QuerySet[Segment]:
    """A dataSource's segments (used ones by default) overlapping `interval`, in
    time order; `with_datasource` reads each one's DataSource row with it."""
    qs = Segment.objects.filter(datasource__name=datasource)
    if with_datasource:
        qs = qs.select_related("datasource")
    if used is not None:
        qs = qs.filter(used=used)
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return qs.order_by("start", "end", "version", "minor_version", "partition")


def segment_ids_within(
    *, datasource: str, interval: Interval, versions: Collection[str]
) -> list[str]:
    """Ids of a dataSource's segments (used or not) wholly inside `interval` at
    one of `versions`."""
    return list(
        segments_for(datasource=datasource, interval=interval, used=None)
        .filter(start__gte=interval.start, end__lte=interval.end, version__in=list(versions))
        .values_list("id", flat=True)
    )


def used_segment(*, datasource: str, segment_id: str) -> Segment | None:
    """One used segment of a dataSource, with its DataSource row, or None."""
    return (
        Segment.objects.filter(datasource__name=datasource, used=True, id=segment_id)
        .select_related("datasource")
        .first()
    )


def segment_schemas(*, ids: Collection[str]) -> dict[str, dict]:
    """The recorded schema (metastore.schema) of each of the segments `ids`."""
    return dict(Segment.objects.filter(id__in=list(ids)).values_list("id", "schema"))


def segments_with_ids(*, ids: Collection[str]) -> QuerySet[Segment]:
    """The segments `ids` (used or not now), in segments_for's order."""
    return (
        Segment.objects.filter(id__in=list(ids))
        .select_related("datasource")
        .order_by("datasource__name", "start", "end", "version", "minor_version", "partition")
    )


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


def segment_facts(*, ids) -> dict[str, tuple[int, int, str]]:
    """id -> (rows, bytes, upgraded_from) for a bounded set of segments."""
    return {
        r[0]: (r[1], r[2], r[3])
        for r in Segment.objects.filter(id__in=list(ids)).values_list(
            "id", "num_rows", "size_bytes", "upgraded_from"
        )
    }


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


def _published_as_allocated():
    """A subquery: the segment published under a PendingSegment's allocation."""
    return Segment.objects.filter(
        datasource__name=OuterRef("datasource"),
        start=OuterRef("start"),
        end=OuterRef("end"),
        version=OuterRef("version"),
        partition=OuterRef("partition"),
    )


def unpublished_allocations(
    *, ended_after: datetime, ended_before: datetime
) -> list[PendingSegment]:
    """Segment ids handed to tasks that ended in [ended_after, ended_before) and
    never published under them: whatever such a task left in deep storage (a
    worker killed between writing and publishing) belongs to no segment."""
    published = _published_as_allocated()
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
    published = _published_as_allocated()
    return list(
        PendingSegment.objects.filter(task_id=task_id).exclude(Exists(published)).order_by("id")
    )


def locations_under(*, directory: str) -> bool:
    """Whether any segment's file lies under `directory` (upgraded copies share files)."""
    return Segment.objects.filter(
        Q(location=directory) | Q(location__startswith=directory.rstrip("/") + "/")
    ).exists()


def pending_allocations(
    *, datasource: str, interval: Interval | None = None
) -> list[PendingSegment]:
    """Segment ids handed to active tasks and not published yet (being written)."""
    published = _published_as_allocated()
    qs = PendingSegment.objects.filter(
        datasource=datasource, task__status__in=(TaskStatus.RUNNING, TaskStatus.WAITING)
    ).exclude(Exists(published))
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return list(qs.order_by("start", "version", "partition")[:500])


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


def unused_span(*, datasource: str) -> Interval | None:
    """The time the dataSource's unused segments cover, or None."""
    agg = Segment.objects.filter(datasource__name=datasource, used=False).aggregate(
        lo=Min("start"), hi=Max("end")
    )
    return Interval(agg["lo"], agg["hi"]) if agg["lo"] is not None else None


def unused_segments_in(*, datasource: str, interval: Interval, limit: int) -> list[Segment]:
    """The unused segments overlapping `interval` (at most `limit`), in time order."""
    return list(
        Segment.objects.filter(
            datasource__name=datasource, used=False, start__lt=interval.end, end__gt=interval.start
        ).order_by("start", "version", "partition")[:limit]
    )


def segments_extent(*, datasource: str, interval: Interval, used: bool | None) -> Interval | None:
    """The span of the dataSource's segments (used, unused, or either for None)
    overlapping `interval`, clipped to it; None when there is none. What an
    open-ended interval (Druid's ETERNITY) means when a task locks it."""
    qs = Segment.objects.filter(
        datasource__name=datasource, start__lt=interval.end, end__gt=interval.start
    )
    if used is not None:
        qs = qs.filter(used=used)
    agg = qs.aggregate(lo=Min("start"), hi=Max("end"))
    if agg["lo"] is None:
        return None
    return Interval(agg["lo"], agg["hi"]).intersection(interval)


def segments_span(*, ids: list[str]) -> Interval | None:
    """The time the segments `ids` cover together, or None if none exists."""
    agg = Segment.objects.filter(id__in=ids).aggregate(lo=Min("start"), hi=Max("end"))
    return Interval(agg["lo"], agg["hi"]) if agg["lo"] is not None else None


def segments_to_mark(
    *, datasource: str, used: bool, ids: list[str], interval: Interval | None, sample: int = 20
) -> tuple[int, list[str]]:
    """What marking `ids` (or the segments wholly inside `interval`) used or unused
    would change: how many segments, and the first `sample` ids."""
    qs = Segment.objects.filter(datasource__name=datasource)
    if ids:
        qs = qs.filter(id__in=ids)
    else:
        qs = qs.filter(start__gte=interval.start, end__lte=interval.end)
    qs = qs.filter(used=not used)
    return qs.count(), list(qs.values_list("id", flat=True)[:sample])
