"""The console's query page: the result table and, for a time series, an inline
SVG chart; errors in words. Server-rendered (Django's client) and in Chromium."""

from __future__ import annotations

import pytest
from test_query import history  # noqa: F401 - the shared metastore history fixture

from console.query_views import time_series_chart

pytestmark = pytest.mark.django_db

DAILY = "SELECT TIME_FLOOR(__time, 'PT6H') AS t, SUM(added) AS added, COUNT(*) AS n FROM wiki GROUP BY 1 ORDER BY 1"


def test_the_page_shows_a_table_and_a_chart_of_a_time_series(client, user, history):  # noqa: F811
    client.force_login(user)

    page = client.get("/query", {"sql": DAILY, "chart": "1"}).content.decode()

    assert '<table id="query-table">' in page
    for cell in ("2024-01-01T00:00:00.000Z", "<td>384</td>", "2024-01-01T18:00:00.000Z"):
        assert cell in page
    assert '<svg id="query-chart"' in page
    assert page.count('class="series"') == 2  # added and n
    assert "3 rows" in page


def test_no_chart_without_a_time_column_and_errors_in_words(client, user, history):  # noqa: F811
    client.force_login(user)

    page = client.get("/query", {"sql": "SELECT page, SUM(added) FROM wiki GROUP BY page"})
    assert page.status_code == 200
    assert "query-chart" not in page.content.decode()
    assert "<td>260</td>" in page.content.decode()

    refused = client.get("/query", {"sql": "DELETE FROM wiki"}).content.decode()
    assert 'id="query-error"' in refused and "DELETE" in refused
    bad_as_of = client.get("/query", {"sql": "SELECT 1", "as_of": "x"}).content.decode()
    assert "as_of: as_of must be a commit sequence number" in bad_as_of
    old = client.get("/query", {"sql": "SELECT COUNT(*) FROM wiki", "as_of": history[0]})
    assert "<td>7</td>" in old.content.decode()


def test_the_page_needs_a_login(client):
    response = client.get("/query")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_chart_points_follow_time_and_value():
    chart = time_series_chart(
        ["t", "v"],
        [
            ["2024-01-02T00:00:00.000Z", 10],
            ["2024-01-01T00:00:00.000Z", 0],
            ["2024-01-03T00:00:00.000Z", 5],
        ],
    )
    [series] = chart.series
    points = [tuple(map(float, p.split(","))) for p in series.points.split()]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    assert xs == sorted(xs) and xs[0] == chart.pad and xs[-1] == chart.plot_right
    assert ys[0] == chart.plot_bottom  # the lowest value (0) on the axis
    assert ys[1] == chart.plot_top  # the highest (10) at the top


def test_each_series_has_its_own_scale():
    chart = time_series_chart(
        ["t", "big", "small"],
        [["2024-01-01T00:00:00.000Z", 0, 0.0], ["2024-01-02T00:00:00.000Z", 1_000_000, 0.5]],
    )
    big, small = chart.series
    top = [float(p.split(",")[1]) for p in (big.points.split()[1], small.points.split()[1])]
    assert top == [chart.plot_top, chart.plot_top]  # each series' highest at the top
    assert time_series_chart(["t"], [["x"], ["y"]]) is None
    assert time_series_chart(["a", "b"], [["x", 1], ["y", 2]]) is None


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_query_page_in_a_browser(console_page, history):  # noqa: F811
    page = console_page
    page.goto(page.console_url("/query"))
    page.fill("textarea[name=sql]", DAILY)
    page.check("input[name=chart]")  # charts only on request
    page.click("#query-form button[type=submit]")
    page.wait_for_selector("#query-table, #query-error")
    assert page.locator("#query-error").count() == 0, page.locator("#query-error").inner_text()

    cells = page.locator("#query-table tbody tr").first.locator("td").all_inner_texts()
    assert cells == ["2024-01-01T00:00:00.000Z", "384", "2"]
    assert page.locator("#query-chart polyline.series").count() == 2
    box = page.locator("#query-chart").bounding_box()
    assert box["width"] > 500 and box["height"] > 200
    page.screenshot(path=str(__import__("conftest").ARTIFACTS / "query_page.png"), full_page=True)
    assert not page.problems
