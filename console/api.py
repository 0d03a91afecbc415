"""The REST API (SPEC §7): thin views over metastore services and selectors."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from console import openapi, segment_views
from console.openapi import responses
from console.pagination import (
    CommitCursorPagination,
    InvalidCursor,
    ListCursorPagination,
    LockCursorPagination,
    TaskCursorPagination,
    page_size,
)
from console.security import MAX_LIST_ITEMS, JSONRefused, PayloadTooLarge, parse_natural
from metastore import selectors, services
from metastore.druid.errors import SpecError
from metastore.druid.tasks import TASK_TYPES
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, DataSource, Task, TaskLock, TaskStatus
from metastore.selectors import retention as retention_selectors
from metastore.selectors import segment_list

log = logging.getLogger(__name__)


def _first_field(detail, prefix: str = "") -> str | None:
    """The dotted path of the first field a DRF ValidationError names."""
    if isinstance(detail, dict) and detail:
        key = next(iter(detail))
        name = f"{prefix}.{key}" if prefix else str(key)
        if key == "non_field_errors":
            name = prefix or "(body)"
        inner = _first_field(detail[key], name)
        return inner or name
    if isinstance(detail, list):
        for i, item in enumerate(detail):
            if isinstance(item, (dict, list)):
                inner = _first_field(item, f"{prefix}[{i}]")
                if inner:
                    return inner
    return None


def _message(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_message(v)}" for k, v in detail.items())
    if isinstance(detail, list):
        return "; ".join(_message(v) for v in detail)
    return str(detail)


class Conflict(Exception):
    """A request that the object's state refuses (409)."""


def error_body(message: str, field: str | None = None, **extra) -> dict:
    """The API's error body: `{"error", "field", "message"}` (console.openapi.ErrorOutput)."""
    return {
        "error": f"{field}: {message}" if field else message,
        "field": field,
        "message": message,
        **extra,
    }


def exception_handler(exc, context):
    """Every API error is a JSON body `{"error", "field", "message"}` (and DRF's
    `detail` where it has one). SpecError, refused JSON and validation errors
    are 400s naming the field; ServiceError a 400; Conflict a 409; DRF's other
    errors keep their status (403, 404, 405, 413, 415, 429); anything else is
    logged and becomes a 500 without a traceback."""
    if isinstance(exc, SpecError):
        taken = isinstance(exc, services.tasks.TaskIdTaken)
        return Response(
            {"error": str(exc), "field": exc.field, "message": exc.message},
            status=status.HTTP_409_CONFLICT if taken else status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, services.ServiceError):
        return Response(error_body(str(exc)), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, Conflict):
        return Response(error_body(str(exc)), status=status.HTTP_409_CONFLICT)
    if isinstance(exc, JSONRefused):
        return Response(
            {
                "error": f"{exc.field}: {exc.detail}",
                "field": exc.field,
                "message": str(exc.detail),
                "detail": f"JSON parse error - {exc.detail}",
            },
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(f"request body over {settings.STRATA_MAX_BODY_BYTES} bytes")
    response = drf_exception_handler(exc, context)
    if response is None:
        view = context.get("view")
        log.error(
            "unhandled error in %s", type(view).__name__ if view else "API view", exc_info=exc
        )
        return Response(
            error_body("internal server error (see the server log)"),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    detail = response.data
    if isinstance(exc, ValidationError):
        field = _first_field(detail) or "(body)"
        response.data = error_body(_message(detail), field, detail=detail)
    else:
        if isinstance(detail, dict) and "detail" in detail:
            detail = detail["detail"]
        response.data = error_body(_message(detail), getattr(exc, "field", None), detail=detail)
    return response


def _interval_param(request, name: str = "interval") -> Interval | None:
    value = request.query_params.get(name)
    if not value:
        return None
    try:
        return Interval.parse(value)
    except (ValueError, OverflowError) as exc:
        raise SpecError(name, f"malformed interval {value[:100]!r}: {exc}") from None


# --- serializers ------------------------------------------------------------------


class TaskListOutput(serializers.ModelSerializer):
    class Meta:
        model = Task
        fields = [
            "id",
            "type",
            "datasource",
            "status",
            "priority",
            "group_id",
            "created_at",
            "started_at",
            "ended_at",
            "phase",
            "progress",
            "error",
        ]


class TaskDetailOutput(serializers.ModelSerializer):
    stopping = serializers.CharField(read_only=True)

    class Meta:
        model = Task
        fields = TaskListOutput.Meta.fields + [
            "spec",
            "report",
            "waiting_on",
            "heartbeat_at",
            "worker",
            "cancel_requested",
            "stopping",
        ]


class LockOutput(serializers.ModelSerializer):
    interval = serializers.SerializerMethodField()
    task = serializers.CharField(source="task_id")
    task_status = serializers.CharField(source="task.status")
    revoked_by = serializers.CharField(source="revoked_by_id", allow_null=True)

    class Meta:
        model = TaskLock
        fields = [
            "id",
            "datasource",
            "interval",
            "type",
            "granularity",
            "version",
            "priority",
            "partition",
            "group_id",
            "task",
            "task_status",
            "revoked",
            "revoked_by",
            "created_at",
        ]

    def get_interval(self, obj) -> str:
        return str(obj.interval)


class SegmentOutput(serializers.Serializer):
    id = serializers.CharField(source="segment.id")
    interval = serializers.SerializerMethodField()
    version = serializers.CharField(source="segment.version")
    partition = serializers.IntegerField(source="segment.partition")
    minor_version = serializers.IntegerField(source="segment.minor_version")
    root_partitions = serializers.JSONField(source="segment.root_partitions")
    atomic_update_group = serializers.JSONField(source="segment.atomic_update_group")
    core_partitions = serializers.IntegerField(source="segment.core_partitions")
    tombstone = serializers.BooleanField(source="segment.tombstone")
    shard_spec = serializers.JSONField(source="segment.shard_spec")
    size_bytes = serializers.IntegerField(source="segment.size_bytes")
    num_rows = serializers.IntegerField(source="segment.num_rows")
    location = serializers.CharField(source="segment.location")
    used = serializers.BooleanField(source="segment.used")
    created_by = serializers.CharField(source="segment.created_by_id", allow_null=True)
    upgraded_from = serializers.CharField(source="segment.upgraded_from")
    schema = serializers.JSONField(source="segment.schema")
    compaction_state = serializers.JSONField(source="segment.compaction_state", allow_null=True)
    status = serializers.CharField()
    complete = serializers.BooleanField()
    visible_intervals = serializers.SerializerMethodField()
    overshadowed_by = serializers.ListField(child=serializers.CharField())

    def get_interval(self, obj) -> str:
        return str(obj.segment.interval)

    def get_visible_intervals(self, obj) -> list[str]:
        return [str(iv) for iv in obj.visible_intervals]


class CommitOutput(serializers.ModelSerializer):
    actor = serializers.CharField()

    class Meta:
        model = CommitLogEntry
        fields = [
            "seq",
            "datasource",
            "created_at",
            "kind",
            "actor",
            "task",
            "added",
            "removed",
            "note",
        ]


class StrictCharField(serializers.CharField):
    """A JSON string and only that: DRF's CharField would take the number 5 as "5"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class MarkInput(serializers.Serializer):
    interval = StrictCharField(required=False)
    segment_ids = serializers.ListField(
        child=StrictCharField(), required=False, max_length=MAX_LIST_ITEMS
    )

    def validate(self, attrs):
        if not attrs.get("interval") and not attrs.get("segment_ids"):
            raise serializers.ValidationError("give an interval or segment_ids")
        if attrs.get("interval"):
            try:
                attrs["interval"] = Interval.parse(attrs["interval"])
            except (ValueError, OverflowError) as exc:
                raise serializers.ValidationError(
                    {"interval": f"malformed interval: {exc}"}
                ) from None
        return attrs


# --- views ---------------------------------------------------------------------------

_TASK_ID = OpenApiParameter(
    "id", str, OpenApiParameter.PATH, description="a task id", pattern=r"^[^/\x00-\x1f\x7f]+$"
)
_DS_NAME = OpenApiParameter(
    "name",
    str,
    OpenApiParameter.PATH,
    description="a dataSource name",
    pattern=r"^[^/\x00-\x1f\x7f]+$",
)
_PAGE_PARAMS = [
    OpenApiParameter(
        "cursor",
        openapi.TEXT,
        description="where the page starts: from a previous page's next link (404 if invalid)",
    ),
    OpenApiParameter(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": 1000},
        description="page size (default 100, at most 1000)",
    ),
]
_INTERVAL = OpenApiParameter(
    "interval",
    str,
    description="ISO-8601 interval start/end; empty, as absent, is all time",
    pattern=r"^$|^[^/]+/[^/]+$",
)


class TaskCreated(serializers.Serializer):
    task = serializers.CharField(help_text="the new task's id")


class TaskViewSet(viewsets.ViewSet):
    """Submit, list, inspect and cancel tasks."""

    lookup_value_regex = "[^/]+"

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, enum=list(TaskStatus.values)),
            OpenApiParameter("datasource", openapi.TEXT),
            OpenApiParameter("type", str, enum=list(TASK_TYPES)),
            *_PAGE_PARAMS,
        ],
        responses=responses({200: openapi.paginated(TaskListOutput)}, 400, 404),
    )
    def list(self, request):
        status_param = request.query_params.get("status")
        if status_param and status_param.upper() not in TaskStatus.values:
            raise SpecError("status", f"unknown status; accepted: {', '.join(TaskStatus.values)}")
        type_param = request.query_params.get("type")
        if type_param and type_param not in TASK_TYPES:
            raise SpecError("type", f"unknown task type; accepted: {', '.join(TASK_TYPES)}")
        if type_param == "index":
            type_param = "index_parallel"  # stored under its canonical name
        tasks = selectors.tasks_list(
            status=status_param,
            datasource=request.query_params.get("datasource"),
            type=type_param,
        )
        paginator = TaskCursorPagination()
        page = paginator.paginate_queryset(tasks, request, view=self)
        return paginator.get_paginated_response(TaskListOutput(page, many=True).data)

    @extend_schema(
        request=openapi.task_spec_request(),
        responses=responses(
            {
                201: OpenApiResponse(
                    TaskCreated,
                    description="Recorded as PENDING and queued. A spec that fits the "
                    "schema may still be refused (400, naming the field) for what a schema "
                    "cannot say: intervals, input roots, dataSources to read.",
                )
            },
            400,
            409,
            413,
            415,
        ),
    )
    def create(self, request):
        task = services.task_submit(spec=request.data, user=request.user)
        return Response({"task": task.id}, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[_TASK_ID], responses=responses({200: TaskDetailOutput}, 404))
    def retrieve(self, request, pk=None):
        task = selectors.task_get(task_id=pk)
        if task is None:
            raise Http404(f"no task {pk}")
        return Response(TaskDetailOutput(task).data)

    @extend_schema(
        parameters=[_TASK_ID],
        request=None,
        responses=responses(
            {
                202: OpenApiResponse(
                    TaskDetailOutput,
                    description="A PENDING task is CANCELED now; a running one is asked to stop.",
                )
            },
            404,
            409,
        ),
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        task = selectors.task_get(task_id=pk)
        if task is None:
            raise Http404(f"no task {pk}")
        if not task.is_active:
            raise Conflict(f"task {pk} already ended ({task.status})")
        try:
            task = services.task_cancel(task_id=pk, user=request.user)
        except services.ServiceError as exc:  # it ended meanwhile
            raise Conflict(str(exc)) from None
        return Response(TaskDetailOutput(task).data, status=status.HTTP_202_ACCEPTED)


class LockListView(APIView):
    """The locks tasks hold, revoked ones included, in the order they were
    granted: oldest first."""

    @extend_schema(
        operation_id="api_v1_locks_list",  # a list, though its page is an object
        parameters=[OpenApiParameter("datasource", openapi.TEXT), *_PAGE_PARAMS],
        responses=responses({200: openapi.paginated(LockOutput)}, 400, 404),
    )
    def get(self, request):
        locks = selectors.locks_list(datasource=request.query_params.get("datasource"))
        paginator = LockCursorPagination()
        page = paginator.paginate_queryset(locks, request, view=self)
        return paginator.get_paginated_response(LockOutput(page, many=True).data)


class SegmentRowOutput(serializers.Serializer):
    """One segment of the Segments list: its state is what the timeline makes of it."""

    id = serializers.CharField()
    datasource = serializers.CharField()
    interval = serializers.CharField(help_text="ISO-8601 start/end, UTC")
    version = serializers.CharField()
    partition = serializers.IntegerField()
    shard_type = serializers.CharField()
    size_bytes = serializers.IntegerField(source="size")
    num_rows = serializers.IntegerField(source="rows")
    state = serializers.ChoiceField(choices=segment_list.STATES[:-1])
    tombstone = serializers.BooleanField()


def _segment_list_params() -> list[OpenApiParameter]:
    states = list(segment_list.STATES)
    sorts = [*segment_list.SORTS, *(f"-{k}" for k in segment_list.SORTS)]
    return [
        OpenApiParameter(
            "datasource",
            openapi.TEXT,
            description="a part of the dataSource's name, any case; '=name' for that name only",
        ),
        _INTERVAL,
        OpenApiParameter("version", openapi.TEXT, description="a prefix of the version"),
        OpenApiParameter("state", str, enum=states),
        OpenApiParameter("shard", str, enum=list(segment_list.SHARD_TYPES)),
        OpenApiParameter(
            "sort",
            str,
            enum=sorts,
            description=f"'-' first for descending (default {segment_list.DEFAULT_SORT})",
        ),
        *_PAGE_PARAMS,
    ]


class SegmentListView(APIView):
    """Every segment of every dataSource (the console's Segments view), filtered,
    sorted and paged by keyset: a page costs the same at any depth and keeps its
    place while segments are added. Follow `next` until it is null."""

    @extend_schema(
        operation_id="api_v1_segments_list",
        parameters=_segment_list_params(),
        responses=responses({200: openapi.paginated(SegmentRowOutput)}, 400, 404),
    )
    def get(self, request):
        get = request.query_params
        try:
            filters = segment_views.parse_filters(get)
            sort = segment_views.parse_sort(get)
        except segment_views.Refused as refused:
            raise SpecError(refused.field, refused.message) from None
        limit = page_size(request)
        after = None
        if get.get("cursor"):
            try:
                after = segment_views.decode_cursor(get["cursor"], sort)
            except segment_views.Refused:
                raise InvalidCursor() from None
        page = segment_list.segments_page(filters=filters, sort=sort, after=after, limit=limit)
        next_url = None
        if page.next_after is not None:
            query = get.copy()
            query["cursor"] = segment_views.encode_cursor(page.next_after)
            next_url = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
        results = SegmentRowOutput(page.rows, many=True).data
        return Response({"next": next_url, "previous": None, "results": results})


class SlotTaskOutput(serializers.Serializer):
    slot = serializers.IntegerField(source="number")
    task = serializers.CharField(source="task.id", allow_null=True, default=None)
    status = serializers.CharField(source="task.status", allow_null=True, default=None)
    type = serializers.CharField(source="task.type", allow_null=True, default=None)
    datasource = serializers.CharField(source="task.datasource", allow_null=True, default=None)
    phase = serializers.CharField(source="task.phase", allow_null=True, default=None)
    worker = serializers.CharField(source="task.worker", allow_null=True, default=None)
    started_at = serializers.DateTimeField(source="task.started_at", allow_null=True, default=None)
    waiting_on = serializers.JSONField(source="task.waiting_on", allow_null=True, default=None)


class PendingTaskOutput(serializers.Serializer):
    task = serializers.CharField(source="id")
    type = serializers.CharField()
    datasource = serializers.CharField()
    priority = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class LiveWorkerOutput(serializers.Serializer):
    name = serializers.CharField()
    nodename = serializers.CharField()
    queues = serializers.ListField(child=serializers.CharField())
    capacity = serializers.IntegerField()
    busy = serializers.IntegerField()
    free = serializers.IntegerField()
    tasks = serializers.ListField(child=serializers.CharField())
    heartbeat_at = serializers.DateTimeField()


class SlotsOutput(serializers.Serializer):
    capacity = serializers.IntegerField()
    busy = serializers.IntegerField()
    free = serializers.IntegerField()
    workers = LiveWorkerOutput(many=True)
    slots = SlotTaskOutput(many=True)
    pending = PendingTaskOutput(many=True)
    pending_count = serializers.IntegerField()
    pending_reason = serializers.SerializerMethodField()

    def get_pending_reason(self, obj) -> str | None:
        if not obj.pending_count:
            return None
        if obj.no_worker:
            return "no live worker"
        return "no free task slot" if obj.pending_for_slot else "queued: a free slot picks it up"


class SlotsView(APIView):
    """Task slots: the live workers' capacity (each registers its slots with its
    heartbeat), which task holds each slot (RUNNING, or WAITING for a lock), and
    the PENDING tasks queued because no slot is free."""

    @extend_schema(responses=responses({200: SlotsOutput}))
    def get(self, request):
        return Response(SlotsOutput(selectors.task_slots()).data)


class DataSourceOutput(serializers.Serializer):
    name = serializers.CharField()
    segments = serializers.IntegerField(help_text="used segments")
    rows = serializers.IntegerField()
    size_bytes = serializers.IntegerField()
    interval = serializers.CharField(allow_null=True, help_text="from the first to the last row")
    active_tasks = serializers.IntegerField()


class TimelinePieceOutput(serializers.Serializer):
    interval = serializers.CharField()
    segment = serializers.CharField()
    version = serializers.CharField()
    partition = serializers.IntegerField()
    tombstone = serializers.BooleanField()


class TimelineOutput(serializers.Serializer):
    datasource = serializers.CharField()
    as_of = serializers.IntegerField(allow_null=True)
    pieces = TimelinePieceOutput(many=True)


class MarkOutput(serializers.Serializer):
    changed = serializers.IntegerField(help_text="segments whose used flag changed")
    commit = serializers.IntegerField(allow_null=True, help_text="the commit, if any changed")


def _segment_key(view) -> tuple:
    seg = view.segment
    return (
        seg.start.isoformat(),
        seg.end.isoformat(),
        seg.version,
        seg.minor_version,
        seg.partition,
        seg.id,
    )


class DataSourceViewSet(viewsets.ViewSet):
    lookup_value_regex = "[^/]+"
    lookup_field = "name"

    def _get(self, name: str) -> DataSource:
        ds = selectors.datasource_get(name=name)
        if ds is None:
            raise Http404(f"no dataSource {name}")
        return ds

    @extend_schema(
        parameters=_PAGE_PARAMS,
        responses=responses({200: openapi.paginated(DataSourceOutput)}, 400, 404),
    )
    def list(self, request):
        """Every dataSource with the totals of its used segments, by name (in code
        point order)."""
        paginator = ListCursorPagination(lambda s: (s.name,))
        # Sorted here, as the cursor compares names, not by the database, whose
        # collation (en_US on PostgreSQL) may order them otherwise.
        summaries = sorted(selectors.datasources_list(), key=lambda s: s.name)
        page = paginator.paginate(summaries, request)
        return paginator.get_paginated_response(
            [
                {
                    "name": s.name,
                    "segments": s.segments,
                    "rows": s.rows,
                    "size_bytes": s.size_bytes,
                    "interval": str(Interval(s.start, s.end)) if s.start else None,
                    "active_tasks": s.active_tasks,
                }
                for s in page
            ]
        )

    @extend_schema(
        parameters=[
            _DS_NAME,
            _INTERVAL,
            OpenApiParameter(
                "used", str, enum=["true", "false", "all"], description="default true"
            ),
            OpenApiParameter("status", str, enum=["visible", "partial", "overshadowed"]),
            *_PAGE_PARAMS,
        ],
        responses=responses({200: openapi.paginated(SegmentOutput)}, 400, 404),
    )
    @action(detail=True, methods=["get"])
    def segments(self, request, name=None):
        self._get(name)
        used_param = (request.query_params.get("used") or "true").lower()
        if used_param not in ("true", "false", "all"):
            raise SpecError("used", "accepted: true, false, all")
        used = {"true": True, "false": False, "all": None}[used_param]
        wanted = request.query_params.get("status")
        if wanted and wanted not in ("visible", "partial", "overshadowed"):
            raise SpecError("status", "accepted: visible, partial, overshadowed")
        paginator = ListCursorPagination(_segment_key)
        interval = _interval_param(request)
        views = selectors.segment_views(datasource=name, interval=interval, used=used)
        if wanted:
            views = [v for v in views if v.status == wanted]
        page = paginator.paginate(views, request)
        return paginator.get_paginated_response(SegmentOutput(page, many=True).data)

    @extend_schema(
        parameters=[
            _DS_NAME,
            _INTERVAL,
            OpenApiParameter(
                "as_of",
                {"type": "integer", "minimum": 0, "maximum": 10**18 - 1},
                description="a commit sequence number (default: the latest)",
            ),
        ],
        responses=responses({200: TimelineOutput}, 400, 404),
    )
    @action(detail=True, methods=["get"])
    def timeline(self, request, name=None):
        self._get(name)
        as_of_text = request.query_params.get("as_of")
        as_of = parse_natural(as_of_text)
        if as_of_text is not None and as_of is None:
            raise SpecError("as_of", "must be a commit sequence number")
        if as_of is not None:
            refusal = retention_selectors.as_of_refusal(datasource=name, as_of=as_of)
            if refusal:
                raise SpecError("as_of", refusal)
        timeline = selectors.timeline_for(datasource=name, as_of=as_of)
        interval = _interval_param(request) or Interval.parse("0001-01-01/9999-12-31")
        pieces = timeline.lookup_pieces(interval, include_incomplete=False)
        return Response(
            {
                "datasource": name,
                "as_of": as_of,
                "pieces": [
                    {
                        "interval": str(p.interval),
                        "segment": p.segment.id,
                        "version": p.segment.version,
                        "partition": p.segment.partition,
                        "tombstone": p.segment.tombstone,
                    }
                    for p in pieces
                ],
            }
        )

    @extend_schema(
        parameters=[_DS_NAME, *_PAGE_PARAMS],
        responses=responses({200: openapi.paginated(CommitOutput)}, 400, 404),
    )
    @action(detail=True, methods=["get"])
    def commits(self, request, name=None):
        self._get(name)
        paginator = CommitCursorPagination()
        page = paginator.paginate_queryset(
            selectors.commits_for(datasource=name), request, view=self
        )
        return paginator.get_paginated_response(CommitOutput(page, many=True).data)

    def _mark(self, request, name, used: bool):
        self._get(name)
        data = MarkInput(data=request.data)
        data.is_valid(raise_exception=True)
        entry = services.segments_mark_used(
            datasource=name,
            used=used,
            interval=data.validated_data.get("interval"),
            segment_ids=data.validated_data.get("segment_ids"),
            user=request.user,
        )
        changed = len((entry.added if used else entry.removed) if entry else [])
        return Response({"changed": changed, "commit": entry.seq if entry else None})

    @extend_schema(
        parameters=[_DS_NAME],
        request=MarkInput,
        responses=responses({200: MarkOutput}, 400, 404, 413, 415),
    )
    @action(detail=True, methods=["post"], url_path="mark-unused")
    def mark_unused(self, request, name=None):
        return self._mark(request, name, used=False)

    @extend_schema(
        parameters=[_DS_NAME],
        request=MarkInput,
        responses=responses({200: MarkOutput}, 400, 404, 413, 415),
    )
    @action(detail=True, methods=["post"], url_path="mark-used")
    def mark_used(self, request, name=None):
        return self._mark(request, name, used=True)


# --- errors outside the API views (unrouted URLs, errors in middleware) ----------------


def _wants_json(request) -> bool:
    return request.path.startswith(("/api/", "/druid/"))


def handler404(request, exception=None):
    if _wants_json(request):
        return JsonResponse(error_body(f"not found: {request.path}"), status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request):
    if _wants_json(request):
        return JsonResponse(error_body("internal server error (see the server log)"), status=500)
    from django.views.defaults import server_error

    return server_error(request)


def handler400(request, exception=None):
    if _wants_json(request) and isinstance(exception, RequestDataTooBig):
        return JsonResponse(error_body("request body too large"), status=413)
    if _wants_json(request):
        return JsonResponse(error_body(f"bad request: {exception or ''}".strip()), status=400)
    from django.views.defaults import bad_request

    return bad_request(request, exception)


def handler403(request, exception=None):
    if _wants_json(request):
        return JsonResponse(error_body("forbidden"), status=403)
    from django.views.defaults import permission_denied

    return permission_denied(request, exception)
