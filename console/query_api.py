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
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from console.api import error_body
from console.druid_schema import SQL_REQUEST, SQL_RESPONSES
from console.openapi import responses
from console.security import StrataBasicAuthentication
from metastore.query import MAX_SEQ, MAX_SQL_CHARS, QueryError, run_query


class SqlText(serializers.CharField):
    """SQL text: a JSON string (DRF's CharField would also take 5 and read "5")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class QueryInput(serializers.Serializer):
    sql = SqlText(trim_whitespace=False, min_length=1, max_length=MAX_SQL_CHARS)
    as_of = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=MAX_SEQ
    )

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError(
                {unknown[0]: f"unknown field; accepted: {', '.join(self.fields)}"}
            )
        return attrs


class QueryOutput(serializers.Serializer):
    columns = serializers.ListField(child=serializers.CharField())
    rows = serializers.ListField(child=serializers.ListField())


class QueryView(APIView):
    """`{"sql": "...", "as_of": <commit seq>?}` -> `{"columns": [...], "rows": [[...]]}`."""

    strata_role = "viewer"  # a read, sent as POST

    @extend_schema(request=QueryInput, responses=responses({200: QueryOutput}, 400, 413, 415))
    def post(self, request):
        if not isinstance(request.data, dict):
            return Response(
                error_body('give a JSON object: {"sql": "...", "as_of": <commit>?}', "(body)"),
                status=status.HTTP_400_BAD_REQUEST,
            )
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
            return Response(error_body(exc.message, exc.field), status=status.HTTP_400_BAD_REQUEST)
        return Response({"columns": result.columns, "rows": result.rows})


_FORMATS = ("object", "array", "objectLines", "arrayLines", "csv")


class DruidSqlRefused(Exception):
    """A request body field /druid/v2/sql refuses."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def _druid_error(message: str, field: str | None = None) -> Response:
    """Druid's error shape for a query it refuses, with the field at fault beside it."""
    return Response(
        {
            "error": "druidException",
            "errorCode": "invalidInput",
            "persona": "USER",
            "category": "INVALID_INPUT",
            "errorMessage": message,
            "context": {},
            "field": field,
        },
        status=status.HTTP_400_BAD_REQUEST,
    )


_SCALAR = (str, int, float, bool, type(None))
_BIGINT = 2**63


def _druid_sql_request(body) -> tuple[str, str, bool, list]:
    """(query, resultFormat, header, parameter values) from Druid's SQL request body."""
    if not isinstance(body, dict):
        raise DruidSqlRefused("(body)", "give a JSON object with the SQL text in `query`")
    query = body.get("query")
    if not isinstance(query, str):
        raise DruidSqlRefused("query", "give the SQL text in the field `query`")
    # A field given as null is absent (as Jackson reads it); any other value is checked.
    fmt = body.get("resultFormat")
    fmt = "object" if fmt is None else fmt
    if fmt not in _FORMATS:
        raise DruidSqlRefused("resultFormat", f"{fmt!r} is not one of {', '.join(_FORMATS)}")
    header = body.get("header")
    if header is not None and not isinstance(header, bool):
        raise DruidSqlRefused("header", "must be true or false")
    context = body.get("context")
    context = {} if context is None else context
    if not isinstance(context, dict):
        raise DruidSqlRefused("context", "must be an object")
    zone = context.get("sqlTimeZone")
    if zone not in (None, "UTC", "Etc/UTC", "Z"):
        raise DruidSqlRefused("context.sqlTimeZone", f"only UTC is supported, not {zone!r}")
    parameters = body.get("parameters")
    parameters = [] if parameters is None else parameters
    if not isinstance(parameters, list):
        raise DruidSqlRefused("parameters", "must be an array of {'type': ..., 'value': ...}")
    values = []
    for i, p in enumerate(parameters):
        if not isinstance(p, dict) or "value" not in p:
            raise DruidSqlRefused(f"parameters[{i}]", "give {'type': ..., 'value': ...}")
        if not isinstance(p.get("type"), str | None):
            raise DruidSqlRefused(f"parameters[{i}].type", "must be a SQL type name")
        value = p["value"]
        if not isinstance(value, _SCALAR):
            raise DruidSqlRefused(
                f"parameters[{i}].value", "must be a string, a number, true, false or null"
            )
        if isinstance(value, int) and not -_BIGINT <= value < _BIGINT:
            raise DruidSqlRefused(f"parameters[{i}].value", "is out of the range of a BIGINT")
        values.append(value)
    return query, fmt, bool(header), values


class DruidSqlView(APIView):
    """Druid's SQL API: `{"query", "resultFormat"?, "header"?, "parameters"?, "context"?}`."""

    strata_role = "viewer"
    authentication_classes = [
        *api_settings.DEFAULT_AUTHENTICATION_CLASSES,
        StrataBasicAuthentication,
    ]

    def handle_exception(self, exc):
        # A body that is not JSON, or a field refused, gets Druid's error shape too.
        if isinstance(exc, exceptions.ParseError):
            field = getattr(exc, "field", "(body)")
            return _druid_error(f"{field}: {exc.detail}", field)
        if isinstance(exc, DruidSqlRefused):
            return _druid_error(str(exc), exc.field)
        return super().handle_exception(exc)

    @extend_schema(request=SQL_REQUEST, responses=SQL_RESPONSES)
    def post(self, request):
        sql, fmt, header, params = _druid_sql_request(request.data)
        try:
            result = run_query(sql=sql, params=params or None)
        except QueryError as exc:
            field = "query" if exc.field == "sql" else exc.field
            return _druid_error(f"{field}: {exc.message}", field)
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
