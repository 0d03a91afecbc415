"""Druid's automatic compaction API over Strata's compaction configs and duty.

Coordinator: `/druid/coordinator/v1/config/compaction` (GET list, POST),
`.../config/compaction/{dataSource}` (GET, DELETE), `.../{dataSource}/history`
(and `.../config/compaction/history?dataSource=`), `.../taskslots` (POST
`ratio`, `max`), `.../cluster` (GET, POST), `/druid/coordinator/v1/compaction/status`
and `/progress`. Overlord: `POST /druid/indexer/v1/supervisor` with
`type: "autocompact"` writes the same config (supervisor id `autocompact__<ds>`).

Shapes are Druid's. Beside Druid's snapshot fields, each status entry carries
Strata's `intervals`: every interval with its status and typed reason.
`X-Druid-Author` / `X-Druid-Comment` fill the history's audit info.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, QueryDict
from django.urls import re_path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from console.druid import DruidView
from console.druid_schema import PATH_DATASOURCE, druid_responses
from console.security import parse_natural
from metastore import services
from metastore.druid.errors import SpecError
from metastore.duties.compaction import IntervalStatus, snapshot
from metastore.duties.kill_settings import kill_config
from metastore.intervals import Interval, format_ts
from metastore.selectors import compaction as reads
from metastore.services.compaction_config import cluster_json

_OBJECT = {"type": "object"}
_CONFIG_BODY = {"application/json": {"type": "object", "description": "DataSourceCompactionConfig"}}
_DS_QUERY = OpenApiParameter("dataSource", str)


def _audit(request) -> dict:
    return {
        "author": request.headers.get("X-Druid-Author", ""),
        "comment": request.headers.get("X-Druid-Comment", ""),
        "ip": request.META.get("REMOTE_ADDR", ""),
    }


def _config_or_404(datasource: str):
    config = reads.compaction_config(datasource=datasource)
    if config is None:
        raise Http404(f"dataSource {datasource} has no compaction config (auto-compaction is off)")
    return config


def interval_json(st: IntervalStatus) -> dict:
    """Strata's per-interval status, beside Druid's snapshot fields."""
    return {
        "interval": str(st.interval),
        "status": st.status,
        "reasonCode": st.code,
        "reason": st.reason,
        "segments": st.segments,
        "bytes": st.bytes,
        "taskId": st.task_id,
        "nextRetry": format_ts(st.next_retry) if st.next_retry else None,
    }


class CompactionConfigs(DruidView):
    """GET the configs with the slot settings; POST one dataSource's config."""

    @extend_schema(responses=druid_responses({200: _OBJECT}))
    def get(self, request):
        cluster = reads.compaction_cluster()
        return Response(
            {
                "compactionConfigs": [reads.config_json(c) for c in reads.compaction_configs()],
                "compactionTaskSlotRatio": cluster.slot_ratio,
                "maxCompactionTaskSlots": cluster.max_slots,
            }
        )

    @extend_schema(request=_CONFIG_BODY, responses=druid_responses({200: None}, 400, 415))
    def post(self, request):
        services.compaction_config_set(data=request.data, **_audit(request))
        return Response(status=200)


class CompactionConfigDetail(DruidView):
    @extend_schema(
        operation_id="druid_coordinator_v1_config_compaction_datasource_retrieve",
        parameters=[PATH_DATASOURCE],
        responses=druid_responses({200: _OBJECT}, 404),
    )
    def get(self, request, datasource):
        return Response(reads.config_json(_config_or_404(datasource)))

    @extend_schema(
        operation_id="druid_coordinator_v1_config_compaction_datasource_destroy",
        parameters=[PATH_DATASOURCE],
        responses=druid_responses({200: None}, 404),
    )
    def delete(self, request, datasource):
        if not services.compaction_config_delete(datasource=datasource, **_audit(request)):
            raise Http404(f"dataSource {datasource} has no compaction config")
        return Response(status=200)


def _history(request, datasource: str) -> Response:
    interval = None
    if request.query_params.get("interval"):
        try:
            interval = Interval.parse(request.query_params["interval"].replace("_", "/"))
        except ValueError as exc:
            raise SpecError("interval", f"malformed interval: {exc}") from None
    count = None
    if request.query_params.get("count") is not None:
        count = parse_natural(request.query_params["count"])
        if not count:
            raise SpecError("count", "must be a positive integer")
    rows = reads.compaction_history(datasource=datasource, interval=interval, count=count)
    return Response(
        [
            {
                "globalConfig": row.global_config,
                "compactionConfig": config,
                "auditInfo": {"author": row.author, "comment": row.comment, "ip": row.ip},
                "auditTime": format_ts(row.created_at),
            }
            for row, config in rows
        ]
    )


_HISTORY_PARAMS = [OpenApiParameter("interval", str), OpenApiParameter("count", int)]


class CompactionConfigHistory(DruidView):
    @extend_schema(
        operation_id="druid_coordinator_v1_config_compaction_datasource_history_retrieve",
        parameters=[PATH_DATASOURCE, *_HISTORY_PARAMS],
        responses=druid_responses({200: {"type": "array", "items": _OBJECT}}, 400),
    )
    def get(self, request, datasource):
        return _history(request, datasource)


class CompactionConfigHistoryByQuery(DruidView):
    """GET .../config/compaction/history?dataSource= (the same, named by parameter)."""

    @extend_schema(
        parameters=[_DS_QUERY, *_HISTORY_PARAMS],
        responses=druid_responses({200: {"type": "array", "items": _OBJECT}}, 400),
    )
    def get(self, request):
        datasource = request.query_params.get("dataSource")
        if not datasource:
            raise SpecError("dataSource", "is required")
        return _history(request, datasource)


def _number(request, name: str, kind):
    text = request.query_params.get(name)
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        raise SpecError(name, f"must be a number, got {text!r}") from None


class CompactionTaskSlots(DruidView):
    """POST .../config/compaction/taskslots?ratio=&max= (Druid's deprecated form)."""

    @extend_schema(
        parameters=[OpenApiParameter("ratio", float), OpenApiParameter("max", int)],
        request=None,
        responses=druid_responses({200: None}, 400),
    )
    def post(self, request):
        services.compaction_cluster_set(
            slot_ratio=_number(request, "ratio", float),
            max_slots=_number(request, "max", int),
            **_audit(request),
        )
        return Response(status=200)


class CompactionCluster(DruidView):
    """GET / POST the cluster-level compaction config."""

    @extend_schema(responses=druid_responses({200: _OBJECT}))
    def get(self, request):
        return Response(cluster_json(reads.compaction_cluster()))

    @extend_schema(
        request={"application/json": _OBJECT}, responses=druid_responses({200: None}, 400)
    )
    def post(self, request):
        data = request.data
        empty = request.META.get("CONTENT_LENGTH") in (None, "", "0")
        if empty or not isinstance(data, dict) or isinstance(data, QueryDict):
            raise SpecError("(body)", "give the cluster compaction config as a JSON object")
        if data.get("useSupervisors") or data.get("engine") not in (None, "native"):
            raise SpecError("engine", "compaction runs as Strata's duty on the native engine")
        _check_policy(data)
        ratio, most = data.get("compactionTaskSlotRatio"), data.get("maxCompactionTaskSlots")
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))):
            raise SpecError("compactionTaskSlotRatio", "must be a number from 0 to 1")
        if most is not None and (isinstance(most, bool) or not isinstance(most, int)):
            raise SpecError("maxCompactionTaskSlots", "must be an integer")
        services.compaction_cluster_set(slot_ratio=ratio, max_slots=most, **_audit(request))
        return Response(status=200)


def _check_policy(data: dict) -> None:
    policy = data.get("compactionPolicy")
    if policy is not None and (
        not isinstance(policy, dict) or policy.get("type") != "newestSegmentFirst"
    ):
        raise SpecError(
            "compactionPolicy.type",
            "only newestSegmentFirst (the duty's order: intervals compacted longest ago "
            "first, newest first among equals); fixedIntervalOrder and mostFragmentedFirst "
            "are not available",
        )
    if isinstance(policy, dict) and policy.get("priorityDatasource") is not None:
        raise SpecError(
            "compactionPolicy.priorityDatasource",
            "not available: dataSources share the slots in turn",
        )
    if data.get("storeCompactionStatePerSegment") is False:
        raise SpecError(
            "storeCompactionStatePerSegment",
            "every segment records its lastCompactionState here (no fingerprints)",
        )


# Druid's Coordinator dynamic config: the kill fields Strata honours come from
# the environment (read at start); the rest concern Historicals, which Strata
# does not have. A POST names the first field it cannot take, and why.
_DYNAMIC_ENV = {
    "killDataSourceWhitelist": "STRATA_KILL_DATASOURCES",
    "killTaskSlotRatio": "STRATA_KILL_TASK_SLOT_RATIO",
    "maxKillTaskSlots": "STRATA_KILL_MAX_TASK_SLOTS",
}
_DYNAMIC_REFUSED = {
    "killPendingSegmentsSkipList": "pending allocations are pruned when their task ends, "
    "keeping only what stops partition numbers being reused; none can be skipped",
    "killAllDataSources": "removed in Druid; an empty killDataSourceWhitelist kills all",
    "pauseCoordination": "turn a duty off with its setting (STRATA_KILL_ON, a deleted "
    "compaction config, STRATA_RETENTION_SECONDS=0)",
}


def dynamic_config_json() -> dict:
    kill = kill_config()
    return {
        "millisToWaitBeforeDeleting": 0,
        "killDataSourceWhitelist": list(kill.datasources),
        "killTaskSlotRatio": kill.task_slot_ratio,
        "maxKillTaskSlots": kill.max_task_slots,
        "killPendingSegmentsSkipList": [],
        "pauseCoordination": False,
        "strataKill": {
            "on": kill.on,
            "periodSeconds": settings.STRATA_KILL_PERIOD_SECONDS,
            "durationToRetain": str(kill.duration_to_retain),
            "ignoreDurationToRetain": kill.ignore_duration_to_retain,
            "bufferPeriod": str(kill.buffer_period),
            "maxSegments": kill.max_segments,
            "maxInterval": str(kill.max_interval) if kill.max_interval else "P0D",
        },
    }


class CoordinatorDynamicConfig(DruidView):
    """GET /druid/coordinator/v1/config: the kill settings in Druid's dynamic
    config shape (plus `strataKill`, the static `druid.coordinator.kill.*`). POST
    is refused naming the field: they are set in the environment."""

    @extend_schema(
        operation_id="druid_coordinator_v1_config_retrieve",
        responses=druid_responses({200: _OBJECT}),
    )
    def get(self, request):
        return Response(dynamic_config_json())

    @extend_schema(
        operation_id="druid_coordinator_v1_config_create",
        request={"application/json": _OBJECT},
        responses=druid_responses({200: None}, 400),
    )
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        for field in sorted(data):
            if field in _DYNAMIC_REFUSED:
                raise SpecError(field, _DYNAMIC_REFUSED[field])
            if field in _DYNAMIC_ENV:
                raise SpecError(field, f"set {_DYNAMIC_ENV[field]} in the environment")
            raise SpecError(field, "concerns Historicals and segment loading, which Strata has not")
        raise SpecError("(body)", "give the fields to change; they are set in the environment")


def _snapshots(datasource: str | None) -> list[dict]:
    plans = reads.compaction_plans(datasource=datasource)
    state = "RUNNING" if plans.last_run_at else "AWAITING_FIRST_RUN"
    out = []
    for ds, statuses in sorted(plans.statuses.items()):
        entry = snapshot(ds, statuses, status=state)
        entry["intervals"] = [interval_json(st) for st in statuses]
        out.append(entry)
    return out


class CompactionStatus(DruidView):
    """GET /druid/coordinator/v1/compaction/status[?dataSource=]."""

    @extend_schema(parameters=[_DS_QUERY], responses=druid_responses({200: _OBJECT}, 404))
    def get(self, request):
        datasource = request.query_params.get("dataSource") or None
        if datasource is not None:
            _config_or_404(datasource)
        return Response({"latestStatus": _snapshots(datasource)})


class CompactionProgress(DruidView):
    """GET /druid/coordinator/v1/compaction/progress?dataSource= -> remainingSegmentSize."""

    @extend_schema(parameters=[_DS_QUERY], responses=druid_responses({200: _OBJECT}, 400, 404))
    def get(self, request):
        datasource = request.query_params.get("dataSource")
        if not datasource:
            raise SpecError("dataSource", "is required")
        _config_or_404(datasource)
        (entry,) = _snapshots(datasource)
        return Response({"remainingSegmentSize": entry["bytesAwaitingCompaction"]})


class Supervisor(DruidView):
    """POST /druid/indexer/v1/supervisor: an `autocompact` supervisor is the
    dataSource's compaction config (Druid's compaction supervisor)."""

    @extend_schema(
        request={"application/json": _OBJECT}, responses=druid_responses({200: _OBJECT}, 400)
    )
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            raise SpecError("(body)", "give a supervisor spec (a JSON object)")
        if data.get("type") != "autocompact":
            raise SpecError(
                "type",
                f"supervisor type {data.get('type')!r} is not available; accepted: autocompact",
            )
        spec = data.get("spec")
        if not isinstance(spec, dict):
            raise SpecError("spec", "give the DataSourceCompactionConfig as spec")
        if data.get("suspended") is True:
            # A suspended compaction supervisor submits nothing: auto-compaction is off.
            name = spec.get("dataSource")
            if not isinstance(name, str) or not name:
                raise SpecError("spec.dataSource", "is required")
            services.compaction_config_delete(datasource=name, **_audit(request))
        else:
            try:
                services.compaction_config_set(data=spec, **_audit(request))
            except SpecError as exc:
                raise SpecError(f"spec.{exc.field}", exc.message) from None
        return Response({"id": f"autocompact__{spec['dataSource']}"})


_DS = r"(?P<datasource>[^/]+)"
_CFG = r"^druid/coordinator/v1/config/compaction"

urlpatterns = [
    re_path(r"^druid/coordinator/v1/config/?$", CoordinatorDynamicConfig.as_view()),
    re_path(rf"{_CFG}/?$", CompactionConfigs.as_view()),
    re_path(rf"{_CFG}/taskslots/?$", CompactionTaskSlots.as_view()),
    re_path(rf"{_CFG}/cluster/?$", CompactionCluster.as_view()),
    re_path(r"^druid/indexer/v1/compaction/config/cluster/?$", CompactionCluster.as_view()),
    re_path(rf"{_CFG}/history/?$", CompactionConfigHistoryByQuery.as_view()),
    re_path(rf"{_CFG}/{_DS}/history/?$", CompactionConfigHistory.as_view()),
    re_path(rf"{_CFG}/{_DS}/?$", CompactionConfigDetail.as_view()),
    re_path(r"^druid/coordinator/v1/compaction/status/?$", CompactionStatus.as_view()),
    re_path(r"^druid/coordinator/v1/compaction/progress/?$", CompactionProgress.as_view()),
    re_path(r"^druid/indexer/v1/supervisor/?$", Supervisor.as_view()),
]
