"""SQL over the visible rows: `POST /api/v1/query` and Druid's `POST /druid/v2/sql`.

Both are reads sent as POST (viewers may run them) and both refuse anything but
a single query. Thin edges over `metastore.query.run_query`.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
import uuid
from dataclasses import dataclass, field

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
from metastore.druid.native_results import finite_json
from metastore.query import MAX_SEQ, MAX_SQL_CHARS, QueryError, run_query
from metastore.sql_druid import UNBOUND
from metastore.sql_druid_time import sql_time_zone, zone, zone_result
from metastore.sql_guard import SqlRefused


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

    @extend_schema(request=QueryInput, responses=responses({200: QueryOutput}, 400, 413, 415, 504))
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
            return Response(error_body(exc.message, exc.field), status=_http_status(exc))
        return Response({"columns": result.columns, "rows": finite_json(result.rows)})


def _http_status(exc: QueryError) -> int:
    """400 for a query refused, Druid's status for one over a bound (504, 400, 429)."""
    return getattr(exc, "http_status", status.HTTP_400_BAD_REQUEST)


def _druid_bound_error(exc: QueryError) -> Response:
    """Druid's error for a query over its time, size or concurrency bounds: the
    "Query execution failures" fields (error, errorMessage, errorClass, host) with
    the fields of Druid's newer error shape beside them, as Druid's SQL API sends
    a legacy query failure."""
    from django.conf import settings

    return Response(
        {
            "error": exc.druid_error,
            "errorMessage": exc.message,
            "errorClass": exc.error_class,
            "host": settings.STRATA_ADVERTISED_ADDRESS,
            "errorCode": "legacyQueryException",
            "persona": "OPERATOR",
            "category": exc.category,
            "context": {},
            "field": None,
        },
        status=_http_status(exc),
    )


# Druid's result formats, by their names in any case (Druid reads them so).
_FORMATS = {name.lower(): name for name in ("object", "array", "objectLines", "arrayLines", "csv")}


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


_BIGINT = 2**63
_INTEGER_TYPES = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT")
_DECIMAL_TYPES = ("DOUBLE", "FLOAT", "REAL", "DECIMAL")
_TEXT_TYPES = ("VARCHAR", "CHAR")
_PARAMETER_TYPES = (*_TEXT_TYPES, *_INTEGER_TYPES, *_DECIMAL_TYPES, "BOOLEAN")
_PARAMETER_TYPES += ("TIMESTAMP", "DATE", "ARRAY")


@dataclass(frozen=True)
class DruidSqlRequest:
    """Druid's SQL request body, checked (see Druid's "Druid SQL API" page)."""

    query: str
    result_format: str = "object"
    header: bool = False
    types_header: bool = False
    sql_types_header: bool = False
    parameters: list = field(default_factory=list)
    query_id: str = ""


def _flag(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise DruidSqlRefused(name, "must be true or false")
    return bool(value)


def _druid_sql_request(body) -> DruidSqlRequest:
    """Druid's SQL request body, each field checked; a field given as null is an
    absent one (as Jackson reads it)."""
    if not isinstance(body, dict):
        raise DruidSqlRefused("(body)", "give a JSON object with the SQL text in `query`")
    query = body.get("query")
    if not isinstance(query, str):
        raise DruidSqlRefused("query", "give the SQL text in the field `query`")
    fmt = body.get("resultFormat")
    fmt = "object" if fmt is None else fmt
    if not isinstance(fmt, str) or fmt.lower() not in _FORMATS:
        raise DruidSqlRefused(
            "resultFormat", f"{fmt!r} is not one of {', '.join(_FORMATS.values())} (any case)"
        )
    context = body.get("context")
    context = {} if context is None else context
    if not isinstance(context, dict):
        raise DruidSqlRefused("context", "must be an object")
    if context.get("sqlTimeZone") is not None:  # a time zone name or offset
        try:
            zone(context["sqlTimeZone"], "sqlTimeZone")
        except SqlRefused as exc:
            raise DruidSqlRefused(
                "context.sqlTimeZone",
                "give a time zone name or a whole-hour offset, e.g. 'America/Los_Angeles' "
                f"or '-08:00' ({str(exc).split(': ', 1)[1]})",
            ) from None
    query_id = context.get("sqlQueryId")
    if query_id is not None and not (isinstance(query_id, str) and 0 < len(query_id) <= 256):
        raise DruidSqlRefused("context.sqlQueryId", "must be a string of 1 to 256 characters")
    parameters = body.get("parameters")
    parameters = [] if parameters is None else parameters
    if not isinstance(parameters, list):
        raise DruidSqlRefused("parameters", "must be an array of {'type': ..., 'value': ...}")
    return DruidSqlRequest(
        query=query,
        result_format=_FORMATS[fmt.lower()],
        header=_flag(body, "header"),
        types_header=_flag(body, "typesHeader"),
        sql_types_header=_flag(body, "sqlTypesHeader"),
        parameters=[_parameter_value(i, p) for i, p in enumerate(parameters)],
        query_id=query_id or str(uuid.uuid4()),
    )


def _parameter_value(i: int, parameter):
    """The value of Druid's dynamic parameter `{"type": <SQL type>, "value": ...}`,
    as its type reads it (a TIMESTAMP from its text or epoch milliseconds)."""
    where = f"parameters[{i}]"
    if parameter is None:  # Druid's null entry: its `?` is unbound (refused when bound)
        return UNBOUND
    if not isinstance(parameter, dict) or "value" not in parameter:
        raise DruidSqlRefused(where, "give {'type': ..., 'value': ...}")
    kind, value = parameter.get("type"), parameter["value"]
    if kind is not None and not isinstance(kind, str):
        raise DruidSqlRefused(f"{where}.type", "must be a SQL type name")
    kind = (kind or "").upper()
    if kind and kind not in _PARAMETER_TYPES:
        raise DruidSqlRefused(
            f"{where}.type", f"{kind!r} is not one of {', '.join(_PARAMETER_TYPES)}"
        )
    if value is None:
        return None
    try:
        return _typed(kind, value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise DruidSqlRefused(f"{where}.value", f"is not a {kind or 'value'}: {exc}") from None


def _typed(kind: str, value):
    if kind == "ARRAY":
        if not isinstance(value, list):
            raise TypeError("give a JSON array")
        return [_typed("", item) if item is not None else None for item in value]
    if isinstance(value, dict | list):
        raise TypeError("give a string, a number, true or false")
    if isinstance(value, int) and not isinstance(value, bool) and not -_BIGINT <= value < _BIGINT:
        raise ValueError("out of the range of a BIGINT")
    if kind in _TEXT_TYPES:
        return value if isinstance(value, str) else json.dumps(value)
    if kind in _INTEGER_TYPES:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
        if isinstance(value, bool) or number is None or not -_BIGINT <= number < _BIGINT:
            raise ValueError(f"{value!r} is not a whole number in range")
        return number
    if kind in _DECIMAL_TYPES:
        if isinstance(value, bool):
            raise TypeError("true/false is not a number")
        number = float(value)
        if not math.isfinite(number):
            raise ValueError("not a finite number")
        return number
    if kind == "BOOLEAN":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise TypeError("give true or false")
        return value
    if kind in ("TIMESTAMP", "DATE"):
        moment = _timestamp(value)
        return moment.date() if kind == "DATE" else moment
    return value


def _timestamp(value) -> dt.datetime:
    """A TIMESTAMP parameter: epoch milliseconds, or ISO text (UTC unless it says)."""
    if isinstance(value, bool):
        raise TypeError("true/false is not a time")
    if isinstance(value, int | float):
        moment = dt.datetime.fromtimestamp(value / 1000, tz=dt.UTC)
    else:
        moment = dt.datetime.fromisoformat(value.strip().replace(" ", "T", 1))
        if moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC)
    # Naive UTC: how the engine compares `__time` (see metastore.query).
    return moment.replace(tzinfo=None)


_WHOLE_DECIMAL = re.compile(r"decimal\d*\(\d+, ?0\)")  # SUM of integers: a HUGEINT


def druid_types(arrow_type: str) -> tuple[str, str]:
    """Druid's (native, SQL) type names for a result column of this Arrow type."""
    name = arrow_type.lower()
    if name == "json":
        return "COMPLEX<json>", "COMPLEX<json>"
    if name.startswith("timestamp"):
        return "LONG", "TIMESTAMP"
    if name.startswith("date"):
        return "LONG", "DATE"
    if name in ("string", "large_string", "null"):
        return "STRING", "VARCHAR"
    if name == "bool":
        return "LONG", "BOOLEAN"
    if name.startswith(("int", "uint")) or _WHOLE_DECIMAL.fullmatch(name):
        return "LONG", "BIGINT"
    if name in ("float", "halffloat"):
        return "FLOAT", "FLOAT"
    if name == "double" or name.startswith("decimal"):
        return "DOUBLE", "DOUBLE"
    if name.startswith(("list", "large_list", "fixed_size_list")):
        element = name[name.find(":") + 1 : name.rfind(">")].strip() if ":" in name else "string"
        return f"ARRAY<{druid_types(element)[0]}>", "ARRAY"
    return "COMPLEX", "OTHER"


def _header_rows(request: DruidSqlRequest, result) -> list[list]:
    """The header rows of the array, arrayLines and csv formats: the names, then the
    native types and the SQL types when asked for."""
    if not request.header:
        return []
    rows = [list(result.columns)]
    types = [druid_types(t) for t in result.types] or [("COMPLEX", "OTHER")] * len(result.columns)
    if request.types_header:
        rows.append([native for native, _ in types])
    if request.sql_types_header:
        rows.append([sql for _, sql in types])
    return rows


def _header_object(request: DruidSqlRequest, result) -> dict:
    """The header of the object formats: each column's types, or null."""
    out = {}
    types = [druid_types(t) for t in result.types] or [("COMPLEX", "OTHER")] * len(result.columns)
    for column, (native, sql) in zip(result.columns, types, strict=True):
        described = {}
        if request.types_header:
            described["type"] = native
        if request.sql_types_header:
            described["sqlType"] = sql
        out[column] = described or None
    return out


def druid_sql_response(request: DruidSqlRequest, result):
    """The result in the request's format, with Druid's response headers."""
    fmt = request.result_format
    result_rows = finite_json(result.rows)  # NaN and Infinity as Druid's Jackson writes them
    rows: list
    if fmt in ("object", "objectLines"):
        rows = [dict(zip(result.columns, row, strict=True)) for row in result_rows]
        if request.header:
            rows.insert(0, _header_object(request, result))
    else:
        rows = _header_rows(request, result) + result_rows
    if fmt in ("object", "array"):
        response = Response(rows)
    elif fmt == "csv":
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows)
        response = HttpResponse(out.getvalue() + "\n", content_type="text/csv")
    else:
        text = "".join(json.dumps(line) + "\n" for line in rows) + "\n"
        response = HttpResponse(text, content_type="text/plain")
    response["X-Druid-SQL-Query-Id"] = request.query_id
    if request.header:
        response["X-Druid-SQL-Header-Included"] = "yes"
    return response


class DruidSqlView(APIView):
    """Druid's SQL API: `{"query", "resultFormat"?, "header"?, "typesHeader"?,
    "sqlTypesHeader"?, "parameters"?, "context"?}`."""

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
        sql_request = _druid_sql_request(request.data)
        sql, params = sql_request.query, sql_request.parameters
        context = request.data.get("context") or {}
        try:
            with sql_time_zone(context.get("sqlTimeZone")) as zone:
                result = run_query(
                    sql=sql,
                    params=params or None,
                    timeout_ms=context.get("timeout"),
                    druid_names=True,
                    druid_sql=True,
                )
            zone_result(result, zone)
        except QueryError as exc:
            if getattr(exc, "druid_error", None):
                return _druid_bound_error(exc)
            field = "query" if exc.field == "sql" else exc.field
            return _druid_error(f"{field}: {exc.message}", field)
        return druid_sql_response(sql_request, result)


urlpatterns = [
    re_path(r"^api/v1/query/?$", QueryView.as_view(), name="api-query"),
    re_path(r"^druid/v2/sql/?$", DruidSqlView.as_view(), name="druid-sql"),
]
