"""The cluster endpoints Druid's operators and tools call, read-only, in Druid's shapes
(Druid's "Service status API", "Tasks API" and "Legacy metadata API" pages).

- Overlord and Coordinator leadership: `GET /druid/{indexer,coordinator}/v1/leader`
  (the leader's URL, as text) and `.../isLeader` (`{"leader": true}`). Strata has
  one metastore and no election: the server answering is the leader.
- `GET /druid/indexer/v1/workers`: the live task workers (heartbeat within
  STRATA_HEARTBEAT_TIMEOUT), each with its capacity and running tasks.
- `GET /druid/coordinator/v1/datasources/{ds}/intervals[?simple|?full]` and
  `.../segments[?full]`, `.../segments/{segmentId}`: the used segments by
  interval, newest first as Druid lists them; one server (`strata`) serves them.
- `GET /status/selfDiscovered/status` (`{"selfDiscovered": true}`), unauthenticated
  as Druid's for probes.
"""

from __future__ import annotations

from collections import defaultdict

from django.http import HttpResponse
from django.urls import re_path
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from console import druid_schema as ds_schema
from console.druid import DruidView, druid_error, druid_flag, druid_ts, segment_json
from console.druid_schema import druid_responses
from console.openapi import TEXT, json_object
from metastore import selectors

SERVER = "strata"
_DS = r"(?P<datasource>[^/]+)"
_FLAGS = [
    OpenApiParameter("simple", ds_schema.FLAG, description="sizes and counts"),
    ds_schema.FULL,
]
_SEGMENT_ID = OpenApiParameter(
    "segment_id", str, OpenApiParameter.PATH, pattern=r"^[^/\x00-\x1f\x7f]+$"
)
_NAMES = ds_schema.NAMES
_LEADER = {"type": "object", "properties": {"leader": {"type": "boolean"}}, "required": ["leader"]}


def _origin(request) -> str:
    return f"{request.scheme}://{request.get_host()}"


class Leader(DruidView):
    """GET /druid/{indexer,coordinator}/v1/leader: the leader's URL."""

    @extend_schema(
        responses={
            (200, "text/plain"): OpenApiResponse(TEXT, description="the leader's URL"),
            **druid_responses({}),
        }
    )
    def get(self, request):
        return HttpResponse(_origin(request), content_type="text/plain")


class IsLeader(DruidView):
    """GET /druid/{indexer,coordinator}/v1/isLeader: {"leader": true}."""

    @extend_schema(responses=druid_responses({200: _LEADER}))
    def get(self, request):
        return Response({"leader": True})


def _worker_json(worker: selectors.LiveWorker) -> dict:
    host = worker.name.rsplit(":", 1)[0]
    return {
        "worker": {
            "scheme": "http",
            "host": worker.name,
            "ip": host,
            "capacity": worker.capacity,
            "version": "0",
            "category": "_default_worker_category",
        },
        "currCapacityUsed": worker.busy,
        "currParallelIndexCapacityUsed": 0,
        "availabilityGroups": [],
        "runningTasks": worker.tasks,
        "lastCompletedTaskTime": druid_ts(worker.heartbeat_at),
        "blacklistedUntil": None,
    }


class Workers(DruidView):
    """GET /druid/indexer/v1/workers: the live workers and what they run."""

    @extend_schema(
        responses=druid_responses(
            {
                200: {
                    "type": "array",
                    "items": json_object("a worker, as Druid's ImmutableWorkerInfo"),
                }
            }
        )
    )
    def get(self, request):
        return Response([_worker_json(w) for w in selectors.task_slots().workers])


def _used(datasource: str):
    return selectors.segments_for(datasource=datasource, with_datasource=True)


def _by_interval(datasource: str) -> dict[str, list]:
    grouped: dict[str, list] = defaultdict(list)
    segments = sorted(_used(datasource), key=lambda s: (s.start, s.end), reverse=True)
    for seg in segments:
        grouped[str(seg.interval)].append(seg)
    return grouped


class DataSourceIntervals(DruidView):
    """GET /druid/coordinator/v1/datasources/{ds}/intervals[?simple|?full]."""

    @extend_schema(
        parameters=[ds_schema.PATH_DATASOURCE, *_FLAGS],
        responses=druid_responses(
            {200: {"anyOf": [_NAMES, {"type": "object", "additionalProperties": True}]}}
        ),
    )
    def get(self, request, datasource):
        grouped = _by_interval(datasource)
        if druid_flag(request, "full"):
            return Response(
                {
                    iv: {s.id: {"metadata": segment_json(s), "servers": [SERVER]} for s in segs}
                    for iv, segs in grouped.items()
                }
            )
        if druid_flag(request, "simple"):
            return Response(
                {
                    iv: {"size": sum(s.size_bytes for s in segs), "count": len(segs)}
                    for iv, segs in grouped.items()
                }
            )
        return Response(list(grouped))


class DataSourceSegments(DruidView):
    """GET /druid/coordinator/v1/datasources/{ds}/segments[?full]."""

    @extend_schema(
        parameters=[ds_schema.PATH_DATASOURCE, ds_schema.FULL],
        responses=druid_responses(
            {200: {"anyOf": [_NAMES, {"type": "array", "items": json_object("a DataSegment")}]}}
        ),
    )
    def get(self, request, datasource):
        segments = sorted(_used(datasource), key=lambda s: (s.start, s.end, s.id), reverse=True)
        if druid_flag(request, "full"):
            return Response([segment_json(s) for s in segments])
        return Response([s.id for s in segments])


class DataSourceSegment(DruidView):
    """GET /druid/coordinator/v1/datasources/{ds}/segments/{segmentId}."""

    @extend_schema(
        operation_id="druid_coordinator_v1_datasource_segment_retrieve",
        parameters=[ds_schema.PATH_DATASOURCE, _SEGMENT_ID],
        responses=druid_responses({200: json_object("{metadata, servers}")}, 404),
    )
    def get(self, request, datasource, segment_id):
        found = selectors.used_segment(datasource=datasource, segment_id=segment_id)
        if found is None:
            return druid_error(
                f"segment {segment_id} of {datasource} is not served", status.HTTP_404_NOT_FOUND
            )
        return Response({"metadata": segment_json(found), "servers": [SERVER]})


class SelfDiscovered(APIView):
    """GET /status/selfDiscovered/status: this server is up and discovered."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        auth=[],
        responses={
            200: {
                "type": "object",
                "properties": {"selfDiscovered": {"type": "boolean"}},
                "required": ["selfDiscovered"],
            }
        },
    )
    def get(self, request):
        return Response({"selfDiscovered": True})


urlpatterns = [
    *(
        re_path(rf"^druid/{service}/v1/{path}/?$", view.as_view())
        for service in ("indexer", "coordinator")
        for path, view in (("leader", Leader), ("isLeader", IsLeader))
    ),
    re_path(r"^druid/indexer/v1/workers/?$", Workers.as_view()),
    re_path(
        rf"^druid/coordinator/v1/datasources/{_DS}/intervals/?$", DataSourceIntervals.as_view()
    ),
    re_path(rf"^druid/coordinator/v1/datasources/{_DS}/segments/?$", DataSourceSegments.as_view()),
    re_path(
        rf"^druid/coordinator/v1/datasources/{_DS}/segments/(?P<segment_id>[^/]+)/?$",
        DataSourceSegment.as_view(),
    ),
    re_path(r"^status/selfDiscovered/status/?$", SelfDiscovered.as_view()),
]
