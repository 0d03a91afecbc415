"""Strata's REST API for auto-compaction (the same configs as Druid's endpoints):

GET  /api/v1/compaction/configs              every config (Druid's JSON)
POST /api/v1/compaction/configs              create or replace one {..., "comment"?}
GET  /api/v1/compaction/configs/{ds}         one config, 404 if off
DELETE /api/v1/compaction/configs/{ds}       turn it off
GET  /api/v1/compaction/status?datasource=   per-interval status and reasons
"""

from __future__ import annotations

from django.http import Http404
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from console.druid_compaction import interval_json
from console.openapi import responses
from metastore import services
from metastore.druid.errors import SpecError
from metastore.duties.compaction import snapshot
from metastore.selectors import compaction as reads

_OBJECT = {"type": "object"}


def _author(request) -> dict:
    return {"author": request.user.get_username(), "ip": request.META.get("REMOTE_ADDR", "")}


class ConfigList(APIView):
    @extend_schema(
        responses=responses(
            {
                200: {
                    "type": "object",
                    "properties": {"configs": {"type": "array", "items": _OBJECT}},
                    "required": ["configs"],
                }
            }
        )
    )
    def get(self, request):
        """Every dataSource's config, in one object (a list is at most one per dataSource)."""
        return Response({"configs": [reads.config_json(c) for c in reads.compaction_configs()]})

    @extend_schema(
        request={"application/json": _OBJECT}, responses=responses({201: _OBJECT}, 400, 415)
    )
    def post(self, request):
        if not isinstance(request.data, dict):
            raise SpecError("(body)", "give a compaction config (a JSON object)")
        data = dict(request.data)
        comment = data.pop("comment", "")
        config = services.compaction_config_set(
            data=data, comment=str(comment or ""), **_author(request)
        )
        return Response(reads.config_json(config), status=201)


class ConfigDetail(APIView):
    @extend_schema(
        operation_id="api_v1_compaction_configs_datasource_retrieve",
        responses=responses({200: _OBJECT}, 404),
    )
    def get(self, request, datasource):
        config = reads.compaction_config(datasource=datasource)
        if config is None:
            raise Http404(f"auto-compaction is off for {datasource}")
        return Response(reads.config_json(config))

    @extend_schema(responses=responses({204: None}, 404))
    def delete(self, request, datasource):
        if not services.compaction_config_delete(datasource=datasource, **_author(request)):
            raise Http404(f"auto-compaction is off for {datasource}")
        return Response(status=204)


class Status(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("datasource", str)], responses=responses({200: _OBJECT})
    )
    def get(self, request):
        plans = reads.compaction_plans(datasource=request.query_params.get("datasource"))
        state = "RUNNING" if plans.last_run_at else "AWAITING_FIRST_RUN"
        return Response(
            {
                "slots": {"used": plans.used, "budget": plans.budget},
                "datasources": [
                    {
                        **snapshot(ds, statuses, status=state),
                        "intervals": [interval_json(st) for st in statuses],
                    }
                    for ds, statuses in sorted(plans.statuses.items())
                ],
            }
        )


urlpatterns = [
    path("compaction/configs", ConfigList.as_view(), name="api-compaction-configs"),
    path(
        "compaction/configs/<str:datasource>", ConfigDetail.as_view(), name="api-compaction-config"
    ),
    path("compaction/status", Status.as_view(), name="api-compaction-status"),
]
