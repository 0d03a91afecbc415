"""SQL over the visible rows: `POST /api/v1/query` and Druid's `POST /druid/v2/sql`.

Both are reads sent as POST (viewers may run them) and both refuse anything but
a single query. Thin edges over `metastore.query.run_query`.
"""

from __future__ import annotations

import csv
import io
import json

from django.http import HttpResponse
from django.urls import re_path
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from console.api import error_body
from console.druid_schema import SQL_REQUEST, SQL_RESPONSES
from console.openapi import responses
from metastore.query import QueryError, run_query


class QueryInput(serializers.Serializer):
    sql = serializers.CharField(trim_whitespace=False, min_length=1)
    as_of = serializers.IntegerField(required=False, allow_null=True, min_value=0)


class QueryOutput(serializers.Serializer):
    columns = serializers.ListField(child=serializers.CharField())
    rows = serializers.ListField(child=serializers.ListField())


class QueryView(APIView):
    """`{"sql": "...", "as_of": <commit seq>?}` -> `{"columns": [...], "rows": [[...]]}`."""

    strata_role = "viewer"  # a read, sent as POST

    @extend_schema(request=QueryInput, responses=responses({200: QueryOutput}, 400, 413, 415))
    def post(self, request):
        data = QueryInput(data=request.data)
        if not data.is_valid():
            field, errors = next(iter(data.errors.items()))
            return Response(
                error_body(" ".join(str(e) for e in errors), field),
                status=status.HTTP_400_BAD_REQUEST,
            )
        try:
            result = run_query(
                sql=data.validated_data["sql"], as_of=data.validated_data.get("as_of")
            )
        except QueryError as exc:
            return Response(
                {"error": exc.message, "field": exc.field, "message": exc.message},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response({"columns": result.columns, "rows": result.rows})


_FORMATS = ("object", "array", "objectLines", "arrayLines", "csv")


def _druid_error(message: str) -> Response:
    """Druid's error shape for a query it refuses."""
    return Response(
        {
            "error": "druidException",
            "errorCode": "invalidInput",
            "persona": "USER",
            "category": "INVALID_INPUT",
            "errorMessage": message,
            "context": {},
        },
        status=status.HTTP_400_BAD_REQUEST,
    )


class DruidSqlView(APIView):
    """Druid's SQL API: `{"query", "resultFormat"?, "header"?, "parameters"?, "context"?}`."""

    strata_role = "viewer"
    authentication_classes = [
        *api_settings.DEFAULT_AUTHENTICATION_CLASSES,
        authentication.BasicAuthentication,
    ]

    def handle_exception(self, exc):
        # A body that is not JSON gets Druid's error shape too.
        if isinstance(exc, exceptions.ParseError):
            field = getattr(exc, "field", "(body)")
            return _druid_error(f"{field}: {exc.detail}")
        return super().handle_exception(exc)

    @extend_schema(request=SQL_REQUEST, responses=SQL_RESPONSES)
    def post(self, request):
        body = request.data
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return _druid_error("query: give the SQL text in the field `query`")
        fmt = body.get("resultFormat") or "object"
        if fmt not in _FORMATS:
            return _druid_error(f"resultFormat: {fmt!r} is not one of {', '.join(_FORMATS)}")
        context = body.get("context") or {}
        if not isinstance(context, dict):
            return _druid_error("context: must be an object")
        zone = context.get("sqlTimeZone")
        if zone not in (None, "UTC", "Etc/UTC", "Z"):
            return _druid_error(f"context.sqlTimeZone: only UTC is supported, not {zone!r}")
        params = []
        for i, p in enumerate(body.get("parameters") or []):
            if not isinstance(p, dict) or "value" not in p:
                return _druid_error(f"parameters[{i}]: give {{'type': ..., 'value': ...}}")
            params.append(p["value"])
        try:
            result = run_query(sql=body["query"], params=params or None)
        except QueryError as exc:
            return _druid_error(exc.message)
        header = bool(body.get("header"))
        if fmt == "object":
            return Response([dict(zip(result.columns, row, strict=True)) for row in result.rows])
        if fmt == "array":
            return Response(([result.columns] if header else []) + result.rows)
        if fmt == "csv":
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            if header:
                writer.writerow(result.columns)
            writer.writerows(result.rows)
            return HttpResponse(out.getvalue() + "\n", content_type="text/csv")
        lines = [result.columns] if header and fmt == "arrayLines" else []
        if fmt == "objectLines":
            lines += [dict(zip(result.columns, row, strict=True)) for row in result.rows]
        else:
            lines += result.rows
        text = "".join(json.dumps(line) + "\n" for line in lines) + "\n"
        return HttpResponse(text, content_type="text/plain")


urlpatterns = [
    re_path(r"^api/v1/query/?$", QueryView.as_view(), name="api-query"),
    re_path(r"^druid/v2/sql/?$", DruidSqlView.as_view(), name="druid-sql"),
]
