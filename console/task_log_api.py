"""Druid's task log endpoint, `GET /druid/indexer/v1/task/{id}/log[?offset=N]`:
the log as plain text; offset 0 (the default) the whole log, positive from that
byte, negative the last that many bytes; 404 for an unknown task, an empty log
for one that has not run yet."""

from __future__ import annotations

from django.http import HttpResponse
from django.urls import re_path
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from console import druid_schema as ds_schema
from console.druid import DruidView, druid_error, task_or_404
from console.druid_schema import druid_responses
from metastore.task_logs import task_log_read

MAX_OFFSET = 2**62


OFFSET = OpenApiParameter(
    "offset",
    {"type": "integer", "minimum": -MAX_OFFSET, "maximum": MAX_OFFSET},
    description="0: the whole log; positive: from this byte on; negative: the last bytes",
)


class TaskLog(DruidView):
    @extend_schema(
        parameters=[ds_schema.PATH_TASK_ID, OFFSET],
        responses={
            (200, "text/plain"): OpenApiResponse({"type": "string"}, description="the task's log"),
            **druid_responses({}, 400, 404),
        },
    )
    def get(self, request, task_id):
        task_or_404(task_id)
        text = request.query_params.get("offset", "0")
        try:
            offset = int(text)
        except ValueError:
            return druid_error(f"offset must be an integer, not {text[:40]!r}", field="offset")
        if abs(offset) > MAX_OFFSET:
            return druid_error(f"offset out of range: {text[:40]}", field="offset")
        # A task that has not started yet has an empty log so far (Druid says 404,
        # which a client cannot tell from an unknown task).
        body = task_log_read(task_id=task_id, offset=offset) or b""
        return HttpResponse(body, content_type="text/plain; charset=utf-8")


urlpatterns = [re_path(r"^druid/indexer/v1/task/(?P<task_id>[^/]+)/log/?$", TaskLog.as_view())]
