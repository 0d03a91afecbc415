"""Timeline windows snap to the dataSource's segment granularity, and the count
badges follow the window (issue 25, item 1): a drag across the chart used to put
`…14:28:25.090Z/…21:32:33.818Z` into the URL and the action forms, and the
badges counted the whole dataSource whatever the zoom."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from console import timeline_svg
from metastore import selectors
from metastore.intervals import Granularity, Interval
from tests.conftest import ARTIFACTS, TEST_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user):
    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


@pytest.fixture
def days(publish):
    """wiki: three days (day 1 in two partitions), day 2 then replaced."""
    publish(
        "wiki",
        "2024-01-01/2024-01-04",
        {"2024-01-01/2024-01-02": 2, "2024-01-02/2024-01-03": 1, "2024-01-03/2024-01-04": 1},
    )
    publish("wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1})


def _badges(html: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r'data-badge="(\w+)" data-value="(\d+)"', html)}


def test_a_dragged_window_snaps_to_whole_days(logged_in, days):
    response = logged_in.get(
        "/datasources/wiki?interval=2024-01-01T14:28:25.090Z/2024-01-02T21:32:33.818Z&unused=1"
    )

    assert response.status_code == 302
    params = parse_qs(urlparse(response["Location"]).query)
    assert params["interval"] == ["2024-01-01T00:00:00.000Z/2024-01-03T00:00:00.000Z"]
    assert params["unused"] == ["1"]  # the other parameters stay
    html = logged_in.get(response["Location"]).content.decode()
    assert 'class="window-text">2024-01-01T00:00:00.000Z/2024-01-03T00:00:00.000Z<' in html
    # what the action forms carry is the snapped window
    assert 'name="interval" value="2024-01-01T00:00:00.000Z/2024-01-03T00:00:00.000Z"' in html
    assert 'data-granularity="DAY"' in html


def test_an_aligned_window_is_not_redirected(logged_in, days):
    assert logged_in.get("/datasources/wiki?interval=2024-01-02/2024-01-03").status_code == 200


def test_the_badges_count_the_window(logged_in, days):
    whole = _badges(logged_in.get("/datasources/wiki").content.decode())
    day1 = _badges(
        logged_in.get("/datasources/wiki?interval=2024-01-01/2024-01-02").content.decode()
    )
    day2 = _badges(
        logged_in.get("/datasources/wiki?interval=2024-01-02/2024-01-03").content.decode()
    )

    assert whole == {"visible": 4, "partial": 0, "overshadowed": 1, "incomplete": 0}
    assert day1 == {"visible": 2, "partial": 0, "overshadowed": 0, "incomplete": 0}
    assert day2 == {"visible": 1, "partial": 0, "overshadowed": 1, "incomplete": 0}


def test_the_granularity_is_what_most_chunks_are(publish):
    publish(
        "hourly",
        "2024-01-01/2024-01-02",
        {f"2024-01-01T{h:02d}/2024-01-01T{h + 1:02d}": 1 for h in range(5)},
    )
    publish("hourly", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1})  # one day chunk
    state = selectors.timeline_state(datasource="hourly")

    assert timeline_svg.segment_granularity(state) is Granularity.HOUR
    window = Interval.parse("2024-01-01T01:10/2024-01-01T02:00:00.001Z")
    assert str(timeline_svg.snap_window(window, Granularity.HOUR)) == (
        "2024-01-01T01:00:00.000Z/2024-01-01T03:00:00.000Z"
    )


@pytest.mark.parametrize("name", ["MONTH", "WEEK", "QUARTER", "DAY", "FIFTEEN_MINUTE"])
def test_a_snapped_window_holds_the_window_in_whole_buckets(name):
    g = Granularity.from_name(name)
    for start, end in [
        ("2024-02-10T13:14:15.161Z", "2024-05-03T00:00:00.001Z"),
        ("2023-12-31T23:59:59.999Z", "2024-01-01T00:00:00.001Z"),
        ("2024-03-04T00:00:00.000Z", "2024-03-04T00:00:00.001Z"),
    ]:
        window = Interval.parse(f"{start}/{end}")
        snapped = timeline_svg.snap_window(window, g)
        assert snapped.start <= window.start and window.end <= snapped.end
        assert g.is_aligned(snapped)
        assert g.truncate(snapped.end - (snapped.end - snapped.start) / 10**6) < snapped.end


def test_no_chunks_no_snapping():
    window = Interval(datetime(2024, 1, 1, 1, tzinfo=UTC), datetime(2024, 1, 1, 2, tzinfo=UTC))
    assert timeline_svg.snap_window(window, None) == window


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_drag_lands_on_whole_days_and_the_badges_follow(console_page, days):
    page = console_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(page.console_url("/datasources/wiki"))
    expect(page.locator("[data-badge=visible]")).to_have_attribute("data-value", "4")
    svg = page.locator("svg.timeline-overview")
    box = svg.bounding_box()
    left, width, total = 170, 1100, 170 + 1100 + 10
    start = datetime(2024, 1, 1, tzinfo=UTC)
    end = datetime(2024, 1, 4, tzinfo=UTC)

    def x_of(ts):
        return box["x"] + (left + (ts - start) / (end - start) * width) * box["width"] / total

    # from 14:28 on day 1 to 21:32 on day 2
    page.mouse.move(x_of(datetime(2024, 1, 1, 14, 28, tzinfo=UTC)), box["y"] + 40)
    page.mouse.down()
    page.mouse.move(x_of(datetime(2024, 1, 2, 21, 32, tzinfo=UTC)), box["y"] + 40, steps=5)
    page.mouse.up()
    page.wait_for_url("**interval=**")
    (window,) = parse_qs(urlparse(page.url).query)["interval"]
    assert window == "2024-01-01T00:00:00.000Z/2024-01-03T00:00:00.000Z"
    expect(page.locator("[data-badge=visible]")).to_have_attribute("data-value", "3")
    expect(page.locator("[data-badge=overshadowed]")).to_have_attribute("data-value", "1")
    page.screenshot(path=ARTIFACTS / "timeline_snapped.png", full_page=True)
    assert not page.problems
