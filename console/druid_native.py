"""Druid's native query endpoint, `POST /druid/v2`: a thin edge.

The body is compiled by the Druid dialect (`metastore.druid.native`) into SQL over
the dataSource's visible rows, run by the relational layer SQL uses
(`metastore.query.run_query`), and the rows are put in Druid's result shapes
(`metastore.druid.native_results`). Authenticated as the other Druid endpoints
(session, token or HTTP Basic); a viewer may query. Errors come in Druid's
query error shape, `{"error", "errorMessage", "errorClass", "host"}`, with the
field at fault named in `errorMessage`; HTTP 400, or the SQL layer's own status
(a timeout is a 504).
"""

from __future__ import annotations

import json
import threading

from django.http import HttpResponse
from django.urls import re_path
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions

from console.druid import DruidView
from console.druid_schema import NATIVE_REQUEST, NATIVE_RESPONSES
from metastore import query, selectors, time_stats
from metastore.druid import native
from metastore.druid.native_results import shape, to_json
from metastore.intervals import MAX_TS, MIN_TS, Interval
from metastore.sql_sources import latest_commits, visible_source

_INVALID = ("Unknown exception", "java.lang.IllegalArgumentException")
_UNSUPPORTED = ("Unsupported operation", "java.lang.UnsupportedOperationException")
_TOO_LARGE = ("Resource limit exceeded", "org.apache.druid.query.ResourceLimitExceededException")


def _druid_error(kind: tuple[str, str], message: str, http_status: int = 400) -> HttpResponse:
    error, error_class = kind
    body = {"error": error, "errorMessage": message, "errorClass": error_class, "host": None}
    return HttpResponse(json.dumps(body), status=http_status, content_type="application/json")


def _query_error(exc: query.QueryError) -> HttpResponse:
    """The SQL layer's refusal in Druid's shape: its own Druid error (a timeout, a
    result too large, no free query slot) where it names one."""
    druid_error = getattr(exc, "druid_error", None)
    if druid_error is not None:
        kind = (druid_error, getattr(exc, "error_class", _INVALID[1]))
        return _druid_error(kind, exc.message, getattr(exc, "http_status", 400))
    too_large = "rows" in exc.message and "more than" in exc.message
    return _druid_error(_TOO_LARGE if too_large else _INVALID, exc.message)


def _run(sql: str, timeout_ms: int | None, commits: dict[str, int], cuts=None) -> query.QueryResult:
    return query.run_query(sql=sql, timeout_ms=timeout_ms, commits=commits, cuts=cuts)


_schemas_lock = threading.Lock()
_schemas: dict[str, tuple[object, dict[str, str]]] = {}  # dataSource -> (its files, columns)


def table_kinds(datasource: str, commits: dict[str, int]) -> dict[str, str] | None:
    """The dataSource's columns (name -> kind), or None if there is no such table;
    kept while its visible files (kept per commit, metastore.sql_sources) stay.
    `commits`: every dataSource's newest commit, just read (`latest_commits`)."""
    if datasource not in commits:
        return None
    source = visible_source(datasource=datasource, seq=commits[datasource])
    with _schemas_lock:
        cached = _schemas.get(datasource)
    if cached is not None and cached[0] is source:
        return cached[1]
    probe = f"SELECT * FROM {query.quote_name(datasource)} LIMIT 0"
    result = query.run_query(sql=probe, commits=commits)
    kinds = native.column_kinds(result.columns, result.types)
    with _schemas_lock:
        if len(_schemas) > 10_000:
            _schemas.clear()
        _schemas[datasource] = (source, kinds)
    return kinds


def _segments(datasource: str) -> list[tuple[str, Interval, list[Interval], dict]]:
    """The visible segments with data: (id, interval, the pieces of it that show, the
    schema it recorded: metrics, rollup, queryGranularity)."""
    pieces: dict[str, tuple[Interval, list[Interval]]] = {}
    timeline = selectors.timeline_for(datasource=datasource)
    for piece, ref in timeline.lookup(Interval(MIN_TS, MAX_TS)):
        if not ref.tombstone:
            pieces.setdefault(ref.id, (ref.interval, []))[1].append(piece)
    schemas = selectors.segment_schemas(ids=list(pieces))
    return [
        (seg_id, interval, ivs, schemas.get(seg_id) or {})
        for seg_id, (interval, ivs) in pieces.items()
    ]


class FooterTimes:
    """`compile_query`'s `times` (native.TableTimes): from the Parquet footers of the
    visible files (metastore.time_stats) as of `commits`, which the query runs on."""

    def __init__(self, commits: dict[str, int]) -> None:
        self.commits = commits

    def _sources(self, tables: tuple[str, ...]) -> list | None:
        if any(t not in self.commits for t in tables):
            return None
        return [visible_source(datasource=t, seq=self.commits[t]) for t in tables]

    def stamp(self, tables: tuple[str, ...], intervals: list[Interval]) -> tuple | None:
        sources = self._sources(tables)
        return None if sources is None else time_stats.stamp_ms(sources, intervals)

    def within(self, tables: tuple[str, ...], intervals: list[Interval]) -> bool:
        sources = self._sources(tables)
        return sources is not None and time_stats.within(sources, intervals)


class NativeQueryView(DruidView):
    """POST /druid/v2: a native query -> its results, as Druid returns them."""

    strata_role = "viewer"  # a read, sent as POST

    def handle_exception(self, exc):
        if isinstance(exc, exceptions.ParseError):
            return _druid_error(_INVALID, f"the body is not JSON: {exc.detail}")
        if isinstance(exc, native.NativeQueryError):
            return _druid_error(_UNSUPPORTED if exc.unsupported else _INVALID, str(exc))
        if isinstance(exc, query.QueryError):
            return _query_error(exc)
        return super().handle_exception(exc)

    @extend_schema(request=NATIVE_REQUEST, responses=NATIVE_RESPONSES)
    def post(self, request):
        kind, datasource = native.query_datasource(request.data)
        commits = latest_commits()  # one read of the metastore for the whole request
        names = native.datasource_names(request.data.get("dataSource"))
        tables = {name: table_kinds(name, commits) for name in names}
        if names and all(s is None for s in tables.values()):
            # Druid answers a dataSource with no segments with no rows
            return HttpResponse("[]", content_type="application/json")
        segments = _segments(datasource) if kind == "segmentMetadata" else None
        plan = native.compile_query(
            request.data, None, segments=segments, tables=tables, times=FooterTimes(commits)
        )
        result = _run(plan.sql, plan.timeout_ms, commits, plan.cuts)
        # NaN and Infinity are written as Druid's Jackson writes them.
        return HttpResponse(to_json(shape(plan, result.rows)), content_type="application/json")


urlpatterns = [re_path(r"^druid/v2/?$", NativeQueryView.as_view(), name="druid-native")]
