"""The console's query page: SQL over the visible rows, shown as a table and, for a
time series (a time column and numeric columns), as an inline SVG chart drawn
here on the server (no JavaScript)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.shortcuts import render
from django.urls import path

from console.security import parse_natural, role_required
from metastore import selectors
from metastore.query import QueryError, run_query

EXAMPLE = (
    "SELECT TIME_FLOOR(__time, 'P1D') AS day, SUM(\"count\") AS flights\n"
    "FROM flights\nGROUP BY 1\nORDER BY 1"
)
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


@role_required()
def query_page(request):
    """GET: the form; with `sql` (and `as_of`) the query's result. A read: a GET
    that can be bookmarked and shared."""
    sql = request.GET.get("sql")
    as_of_text = (request.GET.get("as_of") or "").strip()
    context = {
        "sql": sql if sql is not None else EXAMPLE,
        "as_of": as_of_text,
        "datasources": [d.name for d in selectors.datasources_list()],
        "error": None,
        "result": None,
    }
    if sql:
        try:
            as_of = parse_natural(as_of_text)
            if as_of_text and as_of is None:
                raise QueryError("as_of must be a commit sequence number", field="as_of")
            result = run_query(sql=sql, as_of=as_of)
        except QueryError as exc:
            context["error"] = f"{exc.field}: {exc.message}"
        else:
            context["result"] = {
                "columns": result.columns,
                "rows": result.rows[:SHOWN_ROWS],
                "count": len(result.rows),
                "truncated": len(result.rows) > SHOWN_ROWS,
                "chart": time_series_chart(result.columns, result.rows),
            }
    return render(request, "console/query.html", context)


urlpatterns = [path("query", query_page, name="console-query")]
