"""The REST API (SPEC §7): thin views over metastore services and selectors."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, JsonResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from console.security import JSONRefused, PayloadTooLarge
from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, DataSource, Task, TaskLock, TaskStatus
from metastore.specs import SpecError

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


def exception_handler(exc, context):
    """Every API error is a JSON body. SpecError, refused JSON and validation
    errors become 400s `{"error", "field", ...}` naming the field; ServiceError a
    400 `{"error"}`; DRF's other errors keep their status and `{"detail"}` body
    (401, 403, 404, 405, 413, 415, 429); anything else is logged and becomes a
    500 `{"error"}` without a traceback."""
    if isinstance(exc, SpecError):
        return Response(
            {"error": str(exc), "field": exc.field, "message": exc.message},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, services.ServiceError):
        return Response({"error": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
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
            {"error": "internal server error (see the server log)", "field": None},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    detail = response.data
    if isinstance(exc, ValidationError):
        field = _first_field(detail) or "(body)"
        response.data = {"error": f"{field}: {_message(detail)}", "field": field, "detail": detail}
    elif not isinstance(detail, dict) or "detail" not in detail:
        response.data = {"detail": detail}
    # Other errors keep DRF's {"detail": ...} body (401, 403, 404, 405, 413, 415, 429).
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
    class Meta:
        model = Task
        fields = TaskListOutput.Meta.fields + [
            "spec",
            "report",
            "waiting_on",
            "heartbeat_at",
            "worker",
            "cancel_requested",
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


class MarkInput(serializers.Serializer):
    interval = serializers.CharField(required=False)
    segment_ids = serializers.ListField(child=serializers.CharField(), required=False)

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


class TaskViewSet(viewsets.ViewSet):
    """Submit, list, inspect and cancel tasks."""

    lookup_value_regex = "[^/]+"

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, description=", ".join(TaskStatus.values)),
            OpenApiParameter("datasource", str),
            OpenApiParameter("type", str),
        ],
        responses=TaskListOutput(many=True),
    )
    def list(self, request):
        status_param = request.query_params.get("status")
        if status_param and status_param.upper() not in TaskStatus.values:
            raise SpecError("status", f"unknown status; accepted: {', '.join(TaskStatus.values)}")
        tasks = selectors.tasks_list(
            status=status_param,
            datasource=request.query_params.get("datasource"),
            type=request.query_params.get("type"),
        )
        limit_param = request.query_params.get("limit", "500")
        if not limit_param.isdigit() or int(limit_param) > 5000:
            raise SpecError("limit", "must be an integer from 0 to 5000")
        limit = int(limit_param)
        return Response(TaskListOutput(tasks[:limit], many=True).data)

    @extend_schema(request=dict, responses={201: dict})
    def create(self, request):
        task = services.task_submit(spec=request.data, user=request.user)
        return Response({"task": task.id}, status=status.HTTP_201_CREATED)

    @extend_schema(responses=TaskDetailOutput)
    def retrieve(self, request, pk=None):
        task = Task.objects.filter(id=pk).first()
        if task is None:
            raise Http404(f"no task {pk}")
        return Response(TaskDetailOutput(task).data)

    @extend_schema(request=None, responses=TaskDetailOutput)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        if not Task.objects.filter(id=pk).exists():
            raise Http404(f"no task {pk}")
        task = services.task_cancel(task_id=pk, user=request.user)
        return Response(TaskDetailOutput(task).data, status=status.HTTP_202_ACCEPTED)


class LockListView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("datasource", str)], responses=LockOutput(many=True)
    )
    def get(self, request):
        locks = selectors.locks_list(datasource=request.query_params.get("datasource"))
        return Response(LockOutput(locks, many=True).data)


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


class SlotsOutput(serializers.Serializer):
    capacity = serializers.IntegerField()
    busy = serializers.IntegerField()
    free = serializers.IntegerField()
    slots = SlotTaskOutput(many=True)
    pending = PendingTaskOutput(many=True)
    pending_count = serializers.IntegerField()
    pending_reason = serializers.SerializerMethodField()

    def get_pending_reason(self, obj) -> str | None:
        if not obj.pending_count:
            return None
        return "no free task slot" if obj.pending_for_slot else "queued: a free slot picks it up"


class SlotsView(APIView):
    """Task slots (STRATA_TASK_SLOTS): which task holds each (RUNNING, or WAITING
    for a lock), and the PENDING tasks queued because no slot is free."""

    @extend_schema(responses=SlotsOutput)
    def get(self, request):
        return Response(SlotsOutput(selectors.task_slots()).data)


class DataSourceViewSet(viewsets.ViewSet):
    lookup_value_regex = "[^/]+"
    lookup_field = "name"

    def _get(self, name: str) -> DataSource:
        ds = DataSource.objects.filter(name=name).first()
        if ds is None:
            raise Http404(f"no dataSource {name}")
        return ds

    @extend_schema(responses=dict)
    def list(self, request):
        return Response(
            [
                {
                    "name": s.name,
                    "segments": s.segments,
                    "rows": s.rows,
                    "size_bytes": s.size_bytes,
                    "interval": str(Interval(s.start, s.end)) if s.start else None,
                    "active_tasks": s.active_tasks,
                }
                for s in selectors.datasources_list()
            ]
        )

    @extend_schema(
        parameters=[
            OpenApiParameter("interval", str),
            OpenApiParameter("used", str, description="true (default), false or all"),
            OpenApiParameter("status", str, description="visible, partial or overshadowed"),
        ],
        responses=SegmentOutput(many=True),
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
        views = selectors.segment_views(
            datasource=name, interval=_interval_param(request), used=used
        )
        if wanted:
            views = [v for v in views if v.status == wanted]
        return Response(SegmentOutput(views, many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("interval", str), OpenApiParameter("as_of", int)],
        responses=dict,
    )
    @action(detail=True, methods=["get"])
    def timeline(self, request, name=None):
        self._get(name)
        as_of = request.query_params.get("as_of")
        if as_of is not None:
            if not as_of.isdigit() or len(as_of) > 18:
                raise SpecError("as_of", "must be a commit sequence number")
            as_of = int(as_of)
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

    @extend_schema(responses=CommitOutput(many=True))
    @action(detail=True, methods=["get"])
    def commits(self, request, name=None):
        self._get(name)
        return Response(CommitOutput(selectors.commits_for(datasource=name)[:1000], many=True).data)

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

    @extend_schema(request=MarkInput, responses=dict)
    @action(detail=True, methods=["post"], url_path="mark-unused")
    def mark_unused(self, request, name=None):
        return self._mark(request, name, used=False)

    @extend_schema(request=MarkInput, responses=dict)
    @action(detail=True, methods=["post"], url_path="mark-used")
    def mark_used(self, request, name=None):
        return self._mark(request, name, used=True)


# --- errors outside the API views (unrouted URLs, errors in middleware) ----------------


def _wants_json(request) -> bool:
    return request.path.startswith("/api/")


def handler404(request, exception=None):
    if _wants_json(request):
        return JsonResponse({"error": f"not found: {request.path}", "field": None}, status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


def handler500(request):
    if _wants_json(request):
        return JsonResponse(
            {"error": "internal server error (see the server log)", "field": None}, status=500
        )
    from django.views.defaults import server_error

    return server_error(request)


def handler400(request, exception=None):
    if _wants_json(request) and isinstance(exception, RequestDataTooBig):
        return JsonResponse({"detail": "request body too large", "field": None}, status=413)
    if _wants_json(request):
        return JsonResponse(
            {"error": f"bad request: {exception or ''}".strip(), "field": None}, status=400
        )
    from django.views.defaults import bad_request

    return bad_request(request, exception)


def handler403(request, exception=None):
    if _wants_json(request):
        return JsonResponse({"error": "forbidden", "field": None}, status=403)
    from django.views.defaults import permission_denied

    return permission_denied(request, exception)
