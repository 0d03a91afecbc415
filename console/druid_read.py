"""The read endpoints Druid's query clients call, over Strata's selectors.

Druid's shapes, from its "Legacy metadata API" and "Service status API" pages:

- Broker: `GET /druid/v2/datasources` (queryable names), `/druid/v2/datasources/{ds}`
  (`{"dimensions": [...], "metrics": [...]}` of the segments visible over
  `interval`, by default the week before now as Druid's
  `druid.query.segmentMetadata.defaultHistory`; with `full`, per interval) and its
  `/dimensions` and `/metrics`.
- Coordinator: `GET /druid/coordinator/v1/datasources` (names; `simple`: counts,
  sizes and time span per tier; `full`: with the segments), `.../datasources/{ds}`
  (the same for one; 204 when the Coordinator does not know it, as Druid answers)
  and `/druid/coordinator/v1/loadstatus` (`simple`, `full`).
- Every service: `GET /status` (version, memory) and `GET /status/health` (`true`,
  without authentication, for load balancers).

How Strata maps Druid's cluster: queries read the published segments in deep
storage directly, so a used segment is loaded and served as soon as it is
published: one tier (`_default_tier`), one replica (replicatedSize = size), load
status always 100 % with nothing left to load.
"""

from __future__ import annotations

import os
import resource
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path

from django.urls import re_path
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from console import druid_schema as ds_schema
from console.druid import DruidView, druid_flag, druid_ts, segment_json
from console.druid_schema import druid_responses
from console.openapi import errors
from metastore import selectors
from metastore.druid.errors import SpecError
from metastore.intervals import Interval

TIER = "_default_tier"
# Druid's default for `druid.query.segmentMetadata.defaultHistory` (P1W): the
# Broker's column lists cover the week before now unless `interval` is given.
DEFAULT_HISTORY = timedelta(weeks=1)

# --- shapes ----------------------------------------------------------------------------


def _served() -> list[selectors.DataSourceSummary]:
    """The dataSources with used segments: what Druid's Coordinator and Broker know."""
    return [s for s in selectors.datasources_list() if s.segments]


def _simple_properties(summary: selectors.DataSourceSummary) -> dict:
    size = summary.size_bytes
    return {
        "tiers": {TIER: {"size": size, "segmentCount": summary.segments, "replicatedSize": size}},
        "segments": {
            "maxTime": druid_ts(summary.end),
            "size": size,
            "minTime": druid_ts(summary.start),
            "count": summary.segments,
            "replicatedSize": size,
        },
    }


def _full(summary: selectors.DataSourceSummary) -> dict:
    segments = selectors.segments_for(datasource=summary.name, with_datasource=True)
    return {
        "name": summary.name,
        "properties": {"created": druid_ts(summary.created_at)},
        "segments": [segment_json(s) for s in segments],
    }


def _interval_param(request) -> Interval:
    """Druid's `interval` (`start_end`, or `start/end`), else the default history."""
    text = request.query_params.get("interval")
    if not text:
        now = datetime.now(UTC)
        return Interval(now - DEFAULT_HISTORY, now)
    try:
        return Interval.parse(text.replace("_", "/"))
    except ValueError as exc:
        raise SpecError("interval", f"malformed interval {text!r}: {exc}") from None


def _columns(request, datasource: str) -> tuple[list[str], list[str]]:
    dims: list[str] = []
    metrics: list[str] = []
    for _, piece_dims, piece_metrics in selectors.visible_columns(
        datasource=datasource, interval=_interval_param(request)
    ):
        dims += [d for d in piece_dims if d not in dims]
        metrics += [m for m in piece_metrics if m not in metrics]
    return dims, metrics


def _columns_by_interval(request, datasource: str) -> dict[str, dict]:
    """`full`: each stretch of time with the columns served there, neighbouring
    stretches with the same columns merged (as Druid's Broker merges them)."""
    merged: list[tuple[Interval, list[str], list[str]]] = []
    for piece, dims, metrics in selectors.visible_columns(
        datasource=datasource, interval=_interval_param(request)
    ):
        if merged and merged[-1][0].end == piece.start and merged[-1][1:] == (dims, metrics):
            merged[-1] = (Interval(merged[-1][0].start, piece.end), dims, metrics)
        else:
            merged.append((piece, dims, metrics))
    return {str(iv): {"dimensions": d, "metrics": m} for iv, d, m in merged}


# --- OpenAPI ---------------------------------------------------------------------------

_NAMES = ds_schema.NAMES
_INT = {"type": "integer"}
_SIMPLE_PROPERTIES = {
    "type": "object",
    "properties": {
        "tiers": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "properties": {"size": _INT, "segmentCount": _INT, "replicatedSize": _INT},
                "required": ["size", "segmentCount", "replicatedSize"],
            },
        },
        "segments": {
            "type": "object",
            "properties": {
                "maxTime": {"type": "string"},
                "size": _INT,
                "minTime": {"type": "string"},
                "count": _INT,
                "replicatedSize": _INT,
            },
            "required": ["maxTime", "size", "minTime", "count", "replicatedSize"],
        },
    },
    "required": ["tiers", "segments"],
}
_SIMPLE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "properties": _SIMPLE_PROPERTIES},
    "required": ["name", "properties"],
}
_COLUMNS = {
    "type": "object",
    "properties": {"dimensions": _NAMES, "metrics": _NAMES},
    "required": ["dimensions", "metrics"],
}
_INTERVAL = OpenApiParameter(
    "interval",
    str,
    description="start_end or start/end (ISO 8601); by default the week before now",
)
_SIMPLE_FLAG = OpenApiParameter("simple", ds_schema.FLAG, description="counts, sizes, times")
_FULL_FLAG = OpenApiParameter("full", ds_schema.FLAG, description="Druid's full answer")
_NOT_KNOWN = OpenApiResponse(description="no used segments of that dataSource (Druid's 204)")

# --- Broker ----------------------------------------------------------------------------


class BrokerDataSources(DruidView):
    """GET /druid/v2/datasources: the queryable dataSources."""

    @extend_schema(responses=druid_responses({200: _NAMES}))
    def get(self, request):
        return Response([s.name for s in _served()])


class BrokerDataSource(DruidView):
    """GET /druid/v2/datasources/{ds}[?interval=][&full]: its dimensions and metrics."""

    @extend_schema(
        operation_id="druid_v2_datasource_retrieve",
        parameters=[ds_schema.PATH_DATASOURCE, _INTERVAL, _FULL_FLAG],
        responses=druid_responses(
            {200: {"anyOf": [_COLUMNS, {"type": "object", "additionalProperties": _COLUMNS}]}},
        ),
    )
    def get(self, request, datasource):
        if druid_flag(request, "full"):
            return Response(_columns_by_interval(request, datasource))
        dims, metrics = _columns(request, datasource)
        return Response({"dimensions": dims, "metrics": metrics})


class BrokerColumns(DruidView):
    """GET /druid/v2/datasources/{ds}/dimensions | metrics[?interval=]."""

    which: str = "dimensions"

    @extend_schema(
        parameters=[ds_schema.PATH_DATASOURCE, _INTERVAL],
        responses=druid_responses({200: _NAMES}),
    )
    def get(self, request, datasource):
        dims, metrics = _columns(request, datasource)
        return Response(dims if self.which == "dimensions" else metrics)


# --- Coordinator -----------------------------------------------------------------------


class CoordinatorDataSources(DruidView):
    """GET /druid/coordinator/v1/datasources[?simple | ?full]."""

    @extend_schema(
        parameters=[_SIMPLE_FLAG, _FULL_FLAG],
        responses=druid_responses(
            {
                200: {
                    "anyOf": [
                        _NAMES,
                        {"type": "array", "items": _SIMPLE},
                        {"type": "array", "items": ds_schema.DATASOURCE_FULL},
                    ]
                }
            },
        ),
    )
    def get(self, request):
        served = _served()
        if druid_flag(request, "full"):
            return Response([_full(s) for s in served])
        if druid_flag(request, "simple"):
            return Response([{"name": s.name, "properties": _simple_properties(s)} for s in served])
        return Response([s.name for s in served])


class CoordinatorDataSource(DruidView):
    """GET /druid/coordinator/v1/datasources/{ds}[?full]."""

    @extend_schema(
        operation_id="druid_coordinator_v1_datasource_retrieve",
        parameters=[ds_schema.PATH_DATASOURCE, _FULL_FLAG],
        responses={
            **druid_responses(
                {200: {"anyOf": [_SIMPLE_PROPERTIES, ds_schema.DATASOURCE_FULL]}},
            ),
            204: _NOT_KNOWN,
        },
    )
    def get(self, request, datasource):
        found = [s for s in selectors.datasources_list(name=datasource) if s.segments]
        if not found:
            return Response(status=status.HTTP_204_NO_CONTENT)
        if druid_flag(request, "full"):
            return Response(_full(found[0]))
        return Response(_simple_properties(found[0]))


class LoadStatus(DruidView):
    """GET /druid/coordinator/v1/loadstatus[?simple | ?full]: every used segment is
    served as soon as it is published (see the module's docstring)."""

    @extend_schema(
        parameters=[
            _SIMPLE_FLAG,
            _FULL_FLAG,
            OpenApiParameter("computeUsingClusterView", ds_schema.FLAG, description="accepted"),
        ],
        responses=druid_responses(
            {
                200: {
                    "type": "object",
                    "description": "dataSource -> percent loaded, or segments left to load "
                    "(simple), or tier -> dataSource -> segments left (full)",
                    "additionalProperties": {
                        "anyOf": [
                            {"type": "number"},
                            {"type": "object", "additionalProperties": _INT},
                        ]
                    },
                }
            },
        ),
    )
    def get(self, request):
        druid_flag(request, "computeUsingClusterView")  # checked; one replica in one tier
        names = [s.name for s in _served()]
        if druid_flag(request, "simple"):
            return Response({name: 0 for name in names})
        if druid_flag(request, "full"):
            return Response({TIER: {name: 0 for name in names}})
        return Response({name: 100.0 for name in names})


# --- status ----------------------------------------------------------------------------


def _version() -> str:
    try:
        return metadata.version("strata")
    except metadata.PackageNotFoundError:
        return "unknown"


def _memory() -> dict:
    """Druid's JVM memory fields for this web process: what it holds (resident
    memory) of what the machine has; no heap, so nothing free or direct."""
    page = os.sysconf("SC_PAGE_SIZE")
    try:
        held = int(Path("/proc/self/statm").read_text().split()[1]) * page
    except (OSError, ValueError, IndexError):
        held = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    machine = os.sysconf("SC_PHYS_PAGES") * page
    return {
        "maxMemory": machine,
        "totalMemory": held,
        "freeMemory": 0,
        "usedMemory": held,
        "directMemory": 0,
    }


_STATUS = {
    "type": "object",
    "properties": {
        "version": {"type": "string"},
        "modules": {"type": "array", "items": {"type": "object"}},
        "memory": {"type": "object", "additionalProperties": _INT},
    },
    "required": ["version", "modules", "memory"],
}


class ServiceStatus(DruidView):
    """GET /status: Strata's version and this process's memory, in Druid's shape."""

    @extend_schema(responses=druid_responses({200: _STATUS}))
    def get(self, request):
        return Response({"version": _version(), "modules": [], "memory": _memory()})


class ServiceHealth(APIView):
    """GET /status/health: `true` while the web process answers (no credentials,
    no throttle: load balancers and orchestrators poll it)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    @extend_schema(
        auth=[],
        responses={200: {"type": "boolean"}, **errors(400, 405)},
    )
    def get(self, request):
        return Response(True)


_DS = r"(?P<datasource>[^/]+)"

urlpatterns = [
    re_path(r"^druid/v2/datasources/?$", BrokerDataSources.as_view()),
    re_path(rf"^druid/v2/datasources/{_DS}/?$", BrokerDataSource.as_view()),
    re_path(
        rf"^druid/v2/datasources/{_DS}/dimensions/?$", BrokerColumns.as_view(which="dimensions")
    ),
    re_path(rf"^druid/v2/datasources/{_DS}/metrics/?$", BrokerColumns.as_view(which="metrics")),
    re_path(r"^druid/coordinator/v1/datasources/?$", CoordinatorDataSources.as_view()),
    re_path(rf"^druid/coordinator/v1/datasources/{_DS}/?$", CoordinatorDataSource.as_view()),
    re_path(r"^druid/coordinator/v1/loadstatus/?$", LoadStatus.as_view()),
    re_path(r"^status/?$", ServiceStatus.as_view()),
    re_path(r"^status/health/?$", ServiceHealth.as_view()),
]
