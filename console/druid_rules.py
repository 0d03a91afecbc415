"""Druid's retention rules API (Coordinator): `/druid/coordinator/v1/rules`.

Shapes are those of Druid's "Retention rules API" reference: the rules map, a
dataSource's rules (`?full` adds the `_default` rules after them), POST of a whole
rule array with `X-Druid-Author` / `X-Druid-Comment` audit, and the audit history
(`?interval=` or `?count=`, not both; one week by default, as Druid's
`druid.audit.manager.auditHistoryMillis`). An invalid rule is a 400 naming the
field (`[1].period`), and nothing is stored. The rules are evaluated by the
retention duty (`metastore/duties/retention.py`), where the tier fields Druid
also accepts are explained as meaningless here.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.urls import re_path
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from console import druid_schema as ds_schema
from console.druid import DruidView, druid_flag, druid_ts
from console.druid_schema import druid_responses
from metastore import services
from metastore.druid.errors import SpecError
from metastore.duties.retention import DEFAULT_KEY, RULE_TYPES, RuleError, rules_json
from metastore.intervals import Interval
from metastore.selectors import retention as retention_selectors

AUDIT_WINDOW = timedelta(weeks=1)
MAX_COUNT = 10_000

_RULE = {
    "type": "object",
    "description": "A Druid retention rule (load, drop or broadcast)",
    "properties": {
        "type": {"type": "string", "enum": list(RULE_TYPES)},
        "interval": {"type": "string"},
        "period": {"type": "string"},
        "includeFuture": {"type": "boolean"},
        "tieredReplicants": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": 0},
        },
        "useDefaultTierForNull": {"type": "boolean"},
        "colocatedDataSources": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["type"],
}
_RULES = {"type": "array", "items": _RULE}
_AUDIT = {
    "type": "object",
    "properties": {
        "key": {"type": "string"},
        "type": {"type": "string", "enum": ["rules"]},
        "auditInfo": {
            "type": "object",
            "properties": {
                "author": {"type": "string"},
                "comment": {"type": "string"},
                "ip": {"type": "string"},
            },
            "required": ["author", "comment", "ip"],
        },
        "payload": {"type": "string", "description": "the rules, as JSON text"},
        "auditTime": {"type": "string"},
    },
    "required": ["key", "type", "auditInfo", "payload", "auditTime"],
}
_HISTORY_PARAMS = [
    OpenApiParameter("interval", str, description="ISO-8601 start/end (default: the last week)"),
    OpenApiParameter(
        "count",
        {"type": "integer", "minimum": 1, "maximum": MAX_COUNT},
        description="the newest n entries (not with interval)",
    ),
]


_HEADERS = {"author": "X-Druid-Author", "comment": "X-Druid-Comment"}


def _raise_field(exc: RuleError):
    raise SpecError(_HEADERS.get(exc.field, exc.field), exc.message) from None


class RulesMap(DruidView):
    """GET /druid/coordinator/v1/rules: {dataSource: [rules]}, `_default` included."""

    @extend_schema(
        responses=druid_responses({200: {"type": "object", "additionalProperties": _RULES}})
    )
    def get(self, request):
        return Response(retention_selectors.rules_map())


class DataSourceRules(DruidView):
    """GET|POST /druid/coordinator/v1/rules/{dataSource}."""

    @extend_schema(
        operation_id="druid_coordinator_v1_rules_datasource_retrieve",
        parameters=[
            ds_schema.PATH_DATASOURCE,
            OpenApiParameter("full", ds_schema.FLAG, description="add the _default rules"),
        ],
        responses=druid_responses({200: _RULES}),
    )
    def get(self, request, datasource):
        if datasource == DEFAULT_KEY:
            return Response(rules_json(retention_selectors.default_rules()))
        rules = retention_selectors.rules_stored(datasource=datasource) or []
        if druid_flag(request, "full"):
            rules = rules + [rule.to_json() for rule in retention_selectors.default_rules()]
        return Response(rules)

    @extend_schema(
        parameters=[
            ds_schema.PATH_DATASOURCE,
            OpenApiParameter("X-Druid-Author", str, OpenApiParameter.HEADER),
            OpenApiParameter("X-Druid-Comment", str, OpenApiParameter.HEADER),
        ],
        request={"application/json": _RULES},
        responses=druid_responses({200: None}, 400, 413, 415),
    )
    def post(self, request, datasource):
        try:
            services.rules_set(
                datasource=datasource,
                rules=request.data,
                author=request.headers.get("X-Druid-Author", ""),
                comment=request.headers.get("X-Druid-Comment", ""),
                ip=request.META.get("REMOTE_ADDR", ""),
                user=request.user,
            )
        except RuleError as exc:
            _raise_field(exc)
        return Response(status=200)


def _history_args(request) -> tuple[Interval | None, int | None]:
    params = request.query_params
    interval_text, count_text = params.get("interval"), params.get("count")
    if interval_text is not None and count_text is not None:
        raise SpecError("count", "give interval or count, not both")
    if count_text is not None:
        if not count_text.isdigit() or not 0 < int(count_text) <= MAX_COUNT:
            raise SpecError("count", f"must be an integer from 1 to {MAX_COUNT}")
        return None, int(count_text)
    if interval_text is None:
        now = timezone.now()
        return Interval(now - AUDIT_WINDOW, now + timedelta(seconds=1)), None
    try:
        return Interval.parse(interval_text), None
    except ValueError as exc:
        raise SpecError("interval", f"malformed interval: {exc}") from None


def _audit_json(entry) -> dict:
    return {
        "key": entry.key,
        "type": "rules",
        "auditInfo": {"author": entry.author, "comment": entry.comment, "ip": entry.ip},
        "payload": json.dumps(entry.payload, separators=(",", ":")),
        "auditTime": druid_ts(entry.created_at),
    }


class RulesHistory(DruidView):
    """GET /druid/coordinator/v1/rules[/{dataSource}]/history?interval=|count=."""

    @extend_schema(
        operation_id="druid_coordinator_v1_rules_datasource_history_retrieve",
        parameters=[ds_schema.PATH_DATASOURCE, *_HISTORY_PARAMS],
        responses=druid_responses({200: {"type": "array", "items": _AUDIT}}),
    )
    def get(self, request, datasource=None):
        interval, count = _history_args(request)
        entries = retention_selectors.rules_history(key=datasource, interval=interval, count=count)
        return Response([_audit_json(e) for e in entries])


class AllRulesHistory(RulesHistory):
    @extend_schema(
        parameters=_HISTORY_PARAMS,
        responses=druid_responses({200: {"type": "array", "items": _AUDIT}}),
    )
    def get(self, request):
        return super().get(request)


_DS = r"(?P<datasource>[^/]+)"

urlpatterns = [
    re_path(r"^druid/coordinator/v1/rules/?$", RulesMap.as_view()),
    re_path(r"^druid/coordinator/v1/rules/history/?$", AllRulesHistory.as_view()),
    re_path(rf"^druid/coordinator/v1/rules/{_DS}/history/?$", RulesHistory.as_view()),
    re_path(rf"^druid/coordinator/v1/rules/{_DS}/?$", DataSourceRules.as_view()),
]
