"""The console's query workbench: SQL over the visible rows (multi-line, posted),
shown as a table; on request, a time series (a time column and numeric columns)
as an inline SVG chart drawn here on the server, one scale per series. EXPLAIN
shows the SQL Strata runs and DuckDB's plan; the whole result downloads as CSV
or JSON (within the query bounds); the session keeps a history of its queries; a
running query shows a timer and can be canceled (`query_cancel`, in the web
process that runs it; the query's time bound stops it in any case). The schema
tree (dataSources and their columns, as INFORMATION_SCHEMA.COLUMNS has them)
loads after the page."""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime

from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone
from django.views.decorators.http import require_POST

from console.security import VIEWER, parse_natural, role_required
from console.templatetags.console_format import iso_utc
from metastore import selectors
from metastore.query import QueryCanceled, QueryError, query_cancel, run_query

EXAMPLE = 'SELECT TIME_FLOOR(__time, \'P1D\') AS "day",\n  COUNT(*) AS "rows"\nFROM {table}\nGROUP BY 1\nORDER BY 1'
# What a form field may hold besides printable text: tab and line breaks (a browser
# sends CRLF). NUL and the other control characters are refused, as everywhere.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
SHOWN_ROWS = 1000
log = logging.getLogger(__name__)
WIDTH, HEIGHT, PAD = 900, 260, 48
COLORS = ("#3d74e0", "#e0793d", "#2f9e5b", "#a23de0")


@dataclass
class Series:
    name: str
    color: str
    points: str  # SVG polyline points
    low: float
    high: float
    legend_y: int


@dataclass
class Chart:
    width: int
    height: int
    pad: int
    series: list[Series]
    start: str
    end: str
    low: float
    high: float
    plot_top: int
    plot_right: int
    plot_bottom: int


def _time(value) -> datetime | None:
    if not isinstance(value, str) or not value.endswith("Z") or "T" not in value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def time_series_chart(columns: list[str], rows: list[list]) -> Chart | None:
    """A chart when the first column holds times and at least one other column is
    numeric; each numeric column (up to four) is a line on its own scale (the axis
    labels are the first series'; each legend gives its series' range)."""
    if len(rows) < 2 or len(columns) < 2:
        return None
    times = [_time(r[0]) for r in rows]
    if any(t is None for t in times):
        return None
    numeric = [
        i
        for i in range(1, len(columns))
        if all(isinstance(r[i], int | float) and not isinstance(r[i], bool) for r in rows)
    ][: len(COLORS)]
    if not numeric:
        return None
    order = sorted(range(len(rows)), key=lambda k: times[k])
    t0, t1 = times[order[0]].timestamp(), times[order[-1]].timestamp()
    right, bottom = WIDTH - PAD // 2, HEIGHT - PAD

    def x(t: datetime) -> float:
        return PAD + (t.timestamp() - t0) / ((t1 - t0) or 1) * (right - PAD)

    series = []
    low = high = 0.0
    for n, (color, i) in enumerate(zip(COLORS, numeric, strict=False)):
        col = [float(rows[k][i]) for k in order]
        # One scale per series (from 0, or from its lowest value if negative): a
        # count in millions does not flatten a ratio beside it. Its legend says it.
        s_low, s_high = min(col + [0.0]), max(col)
        span = (s_high - s_low) or 1.0
        pts = " ".join(
            f"{x(times[k]):.1f},{bottom - (v - s_low) / span * (bottom - PAD // 2):.1f}"
            for k, v in zip(order, col, strict=True)
        )
        series.append(Series(columns[i], color, pts, min(col), max(col), 16 + 15 * n))
        if n == 0:
            low, high = s_low, s_low + span
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        pad=PAD,
        series=series,
        start=rows[order[0]][0],
        end=rows[order[-1]][0],
        low=low,
        high=high,
        plot_top=PAD // 2,
        plot_right=right,
        plot_bottom=bottom,
    )


def _example(datasources: list[str]) -> str:
    """The prefilled query: daily rows of the first dataSource, runnable as it stands."""
    table = datasources[0] if datasources else "wiki"
    return EXAMPLE.format(table='"' + table.replace('"', '""') + '"')


ACTIONS = ("run", "explain", "csv", "json")
HISTORY_MAX = 20
_QUERY_ID = re.compile(r"[0-9a-f]{8,32}")


def _checked(sql: str, as_of_text: str) -> int | None:
    if _CONTROL.search(sql):
        raise QueryError("contains a NUL or another control character", field="sql")
    as_of = parse_natural(as_of_text)
    if as_of_text and as_of is None:
        raise QueryError("as_of must be a commit sequence number", field="as_of")
    return as_of


def _result(sql: str, as_of_text: str, *, action="run", query_id=None, chart=True) -> dict:
    """The query's result for the template, or raise QueryError naming the field."""
    as_of = _checked(sql, as_of_text)
    started = time.perf_counter()
    result = run_query(sql=sql, as_of=as_of, explain=action == "explain", query_id=query_id)
    return {
        "columns": result.columns,
        "rows": result.rows[:SHOWN_ROWS],
        "all_rows": result.rows,
        "count": len(result.rows),
        "truncated": len(result.rows) > SHOWN_ROWS,
        "chart": time_series_chart(result.columns, result.rows) if chart else None,
        "explain": action == "explain",
        "ms": (time.perf_counter() - started) * 1000,
    }


def _remember(request, sql: str, as_of: str, action: str, result, error) -> list[dict]:
    """The session's query history, newest first, with this query added."""
    history = [h for h in request.session.get(HISTORY_KEY, []) if isinstance(h, dict)]
    entry = {
        "sql": sql,
        "as_of": as_of,
        "action": action,
        "at": iso_utc(timezone.now()),
        "rows": result["count"] if result else None,
        "ms": round(result["ms"], 1) if result else None,
        "error": error,
    }
    history = [entry, *[h for h in history if (h.get("sql"), h.get("as_of")) != (sql, as_of)]]
    request.session[HISTORY_KEY] = history[:HISTORY_MAX]
    return request.session[HISTORY_KEY]


HISTORY_KEY = "strata_query_history"


def _download(result: dict, fmt: str) -> HttpResponse:
    """The whole result (within the query bounds) as a CSV or JSON attachment."""
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(result["columns"])
        writer.writerows(result["all_rows"])
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    else:
        rows = [dict(zip(result["columns"], r, strict=True)) for r in result["all_rows"]]
        response = HttpResponse(json.dumps(rows), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="query.{fmt}"'
    return response


@role_required(VIEWER)
def query_page(request):
    """The form posts the query (multi-line SQL does not fit a URL: browsers send
    its line breaks as CRLF, which the URL rules refuse, and a long query would
    outgrow the request line); a GET with `sql` still runs a one-line query from a
    bookmark. A read either way, so a viewer may post it. `action`: run, explain,
    csv or json (a download of the whole result); `chart=1` draws a time series."""
    params = request.POST if request.method == "POST" else request.GET
    sql = params.get("sql")
    as_of_text = (params.get("as_of") or "").strip()
    action = (params.get("action") or "run").lower()
    if action not in ACTIONS:
        action = "run"
    query_id = params.get("query_id") or None
    if query_id is not None and not _QUERY_ID.fullmatch(query_id):
        query_id = None
    datasources = [d.name for d in selectors.datasources_list()]
    context = {
        "sql": sql if sql is not None else _example(datasources),
        "as_of": as_of_text,
        "datasources": datasources,
        "chart_wanted": params.get("chart") == "1",
        "error": None,
        "result": None,
    }
    status = 200
    if sql:
        try:
            context["result"] = _result(
                sql, as_of_text, action=action, query_id=query_id, chart=context["chart_wanted"]
            )
        except QueryCanceled:
            context["error"] = "canceled: the query was stopped at your request"
            status = 400
        except QueryError as exc:
            context["error"] = f"{exc.field}: {exc.message}"
            status = 400
        _remember(request, sql, as_of_text, action, context["result"], context["error"])
        if context["result"] and action in ("csv", "json"):
            return _download(context["result"], action)
    context["history"] = request.session.get(HISTORY_KEY, [])
    return render(request, "console/query.html", context, status=status)


@role_required(VIEWER)
@require_POST
def query_cancel_view(request):
    """Stop the query the workbench runs as `query_id` (this web process's)."""
    query_id = request.POST.get("query_id") or ""
    if not _QUERY_ID.fullmatch(query_id):
        return JsonResponse(
            {"error": "query_id: 8 to 32 hex digits", "field": "query_id"}, status=400
        )
    return JsonResponse({"query_id": query_id, "canceled": query_cancel(query_id)})


@role_required(VIEWER)
def query_schema(request):
    """The schema tree: every queryable dataSource and its columns with their
    Druid SQL types (INFORMATION_SCHEMA.COLUMNS' source), loaded after the page."""
    from metastore.sql_catalog import datasource_columns

    try:
        tables, problem = datasource_columns(), None
    except Exception as exc:  # a segment file gone or unreadable: said, not a 500
        log.warning("schema tree: %s", exc)
        tables, problem = {}, f"the columns could not be read: {exc.__class__.__name__}: {exc}"
    return render(request, "partials/query_schema.html", {"tables": tables, "problem": problem})


urlpatterns = [
    path("query", query_page, name="console-query"),
    path("query/cancel", query_cancel_view, name="console-query-cancel"),
    path("query/schema", query_schema, name="console-query-schema"),
]
