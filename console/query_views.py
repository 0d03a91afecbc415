"""The console's query page: SQL over the visible rows, shown as a table and, for a
time series (a time column and numeric columns), as an inline SVG chart drawn
here on the server (no JavaScript)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.shortcuts import render
from django.urls import path

from console.security import VIEWER, parse_natural, role_required
from metastore import selectors
from metastore.query import QueryError, run_query

EXAMPLE = 'SELECT TIME_FLOOR(__time, \'P1D\') AS "day",\n  COUNT(*) AS "rows"\nFROM {table}\nGROUP BY 1\nORDER BY 1'
# What a form field may hold besides printable text: tab and line breaks (a browser
# sends CRLF). NUL and the other control characters are refused, as everywhere.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
SHOWN_ROWS = 1000
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
    numeric; each numeric column (up to four) is a line, on one shared scale."""
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
    values = [float(rows[k][i]) for i in numeric for k in order]
    low, high = min(values + [0.0]), max(values)
    if high == low:
        high = low + 1
    right, bottom = WIDTH - PAD // 2, HEIGHT - PAD

    def x(t: datetime) -> float:
        return PAD + (t.timestamp() - t0) / ((t1 - t0) or 1) * (right - PAD)

    def y(v: float) -> float:
        return bottom - (v - low) / (high - low) * (bottom - PAD // 2)

    series = []
    for n, (color, i) in enumerate(zip(COLORS, numeric, strict=False)):
        pts = " ".join(f"{x(times[k]):.1f},{y(float(rows[k][i])):.1f}" for k in order)
        col = [float(rows[k][i]) for k in order]
        series.append(Series(columns[i], color, pts, min(col), max(col), 16 + 15 * n))
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


def _result(sql: str, as_of_text: str) -> dict:
    """The query's result for the template, or raise QueryError naming the field."""
    if _CONTROL.search(sql):
        raise QueryError("contains a NUL or another control character", field="sql")
    as_of = parse_natural(as_of_text)
    if as_of_text and as_of is None:
        raise QueryError("as_of must be a commit sequence number", field="as_of")
    result = run_query(sql=sql, as_of=as_of)
    return {
        "columns": result.columns,
        "rows": result.rows[:SHOWN_ROWS],
        "count": len(result.rows),
        "truncated": len(result.rows) > SHOWN_ROWS,
        "chart": time_series_chart(result.columns, result.rows),
    }


@role_required(VIEWER)
def query_page(request):
    """The form posts the query (multi-line SQL does not fit a URL: browsers send
    its line breaks as CRLF, which the URL rules refuse, and a long query would
    outgrow the request line); a GET with `sql` still runs a one-line query from a
    bookmark. A read either way, so a viewer may post it."""
    params = request.POST if request.method == "POST" else request.GET
    sql = params.get("sql")
    as_of_text = (params.get("as_of") or "").strip()
    datasources = [d.name for d in selectors.datasources_list()]
    context = {
        "sql": sql if sql is not None else _example(datasources),
        "as_of": as_of_text,
        "datasources": datasources,
        "error": None,
        "result": None,
    }
    status = 200
    if sql:
        try:
            context["result"] = _result(sql, as_of_text)
        except QueryError as exc:
            context["error"] = f"{exc.field}: {exc.message}"
            status = 400
    return render(request, "console/query.html", context, status=status)


urlpatterns = [path("query", query_page, name="console-query")]
