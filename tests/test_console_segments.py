"""The Segments view (issue 25, item 3): every segment of every dataSource,
filtered by dataSource (any part, any case), interval, version, state and shard
type, sorted by a column, paged by cursor; and the tasks list grouped as
Druid's console groups it."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from metastore import services
from metastore.models import Segment
from metastore.selectors import segment_list
from tests.conftest import ARTIFACTS, TEST_PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user):
    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


def build_cluster(publish) -> dict:
    """wiki: two days, the second replaced (its first version overshadowed), one
    day-1 partition marked unused; Flights_US: three days of 2 partitions."""
    first = publish(
        "wiki",
        "2024-01-01/2024-01-03",
        {"2024-01-01/2024-01-02": 2, "2024-01-02/2024-01-03": 1},
        rows=10,
        size=1000,
    )
    second = publish(
        "wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1}, rows=7, size=700
    )
    flights = publish(
        "Flights_US",
        "2024-02-01/2024-02-04",
        {f"2024-02-0{d}/2024-02-0{d + 1}": 2 for d in (1, 2, 3)},
        rows=100,
        size=5000,
    )
    unused = sorted(first.segment_ids)[1]  # day 1, partition 1
    services.segments_mark_used(datasource="wiki", used=False, segment_ids=[unused])
    old_day2 = next(s for s in first.segment_ids if "2024-01-02T" in s.split("_")[1])
    return {
        "first": first,
        "second": second,
        "flights": flights,
        "unused": unused,
        "old_day2": old_day2,
    }


@pytest.fixture
def cluster(publish):
    return build_cluster(publish)


def _listed(response) -> list[tuple[str, str]]:
    assert response.status_code == 200, response.content[:500]
    html = response.content.decode()
    return re.findall(r'<tr data-segment="([^"]+)" data-state="([^"]+)"', html)


def test_lists_every_segment_of_every_datasource_with_its_state(logged_in, cluster):
    listed = dict(_listed(logged_in.get("/segments")))

    assert len(listed) == 3 + 1 + 6  # wiki's first commit, its replacement, Flights_US
    assert listed[cluster["old_day2"]] == "overshadowed"
    assert listed[cluster["unused"]] == "unused"
    assert listed[cluster["second"].segment_ids[0]] == "visible"
    assert all(listed[s] == "visible" for s in cluster["flights"].segment_ids)


def test_the_newest_segments_come_first_by_default(logged_in, cluster):
    ids = [sid for sid, _ in _listed(logged_in.get("/segments"))]
    starts = [Segment.objects.get(id=s).start for s in ids]
    assert starts == sorted(starts, reverse=True)


def test_datasource_filter_matches_any_part_of_the_name_in_any_case(logged_in, cluster):
    listed = _listed(logged_in.get("/segments?datasource=flights"))
    assert {s for s, _ in listed} == set(cluster["flights"].segment_ids)
    assert _listed(logged_in.get("/segments?datasource=IK")) and all(
        s.startswith("wiki_") for s, _ in _listed(logged_in.get("/segments?datasource=IK"))
    )
    assert _listed(logged_in.get("/segments?datasource=%3Dflights")) == []  # exact: no
    assert len(_listed(logged_in.get("/segments?datasource=%3DFlights_US"))) == 6


@pytest.mark.parametrize("state", ["visible", "overshadowed", "unused"])
def test_state_filter_agrees_with_the_timeline(logged_in, cluster, state, monkeypatch):
    everything = dict(_listed(logged_in.get("/segments")))
    wanted = {s for s, st in everything.items() if st == state}

    by_key = _listed(logged_in.get(f"/segments?state={state}"))
    # The same answer when the state's ids are too many to look up by key.
    monkeypatch.setattr(segment_list, "BY_KEY_MAX", 0)
    monkeypatch.setattr(segment_list, "SCAN_BATCH", 2)
    scanned = _listed(logged_in.get(f"/segments?state={state}&limit=3"))

    assert wanted and {s for s, _ in by_key} == wanted
    assert all(st == state for _, st in by_key)
    assert {s for s, _ in scanned} <= wanted and len(scanned) == min(3, len(wanted))


def test_tombstone_state_lists_the_used_tombstones(logged_in, cluster):
    assert _listed(logged_in.get("/segments?state=tombstone")) == []


def test_interval_version_and_shard_filters(logged_in, cluster):
    day2 = _listed(logged_in.get("/segments?interval=2024-01-02/2024-01-03"))
    assert {s for s, _ in day2} == {cluster["old_day2"], *cluster["second"].segment_ids}

    version = cluster["second"].version
    by_version = _listed(logged_in.get(f"/segments?version={version}"))
    assert len(_listed(logged_in.get(f"/segments?version={version[:4]}"))) == 10  # a prefix
    assert cluster["second"].segment_ids[0] in {s for s, _ in by_version}
    assert cluster["old_day2"] not in {s for s, _ in by_version}

    assert len(_listed(logged_in.get("/segments?shard=numbered"))) == 10
    assert _listed(logged_in.get("/segments?shard=hashed")) == []


def test_sorts_by_a_column_both_ways(logged_in, cluster):
    ascending = [s for s, _ in _listed(logged_in.get("/segments?sort=size"))]
    sizes = [Segment.objects.get(id=s).size_bytes for s in ascending]
    assert sizes == sorted(sizes)
    descending = [s for s, _ in _listed(logged_in.get("/segments?sort=-size"))]
    assert [Segment.objects.get(id=s).size_bytes for s in descending] == sorted(sizes, reverse=True)
    html = logged_in.get("/segments?sort=size").content.decode()
    assert 'aria-sort="ascending"' in html and "sort=-size" in html


@pytest.mark.parametrize("sort", ["-start", "size", "datasource", "-version", "rows"])
def test_cursor_pages_cover_every_segment_once(logged_in, cluster, sort):
    seen: list[str] = []
    url = f"/segments?sort={sort}&limit=3"
    pages = 0
    while url:
        response = logged_in.get(url)
        seen += [s for s, _ in _listed(response)]
        found = re.search(r'href="([^"]+)" id="segments-next"', response.content.decode())
        url = "/segments" + found[1].replace("&amp;", "&") if found else None
        pages += 1
        assert pages < 10
    assert len(seen) == len(set(seen)) == 10
    assert seen == [s for s, _ in _listed(logged_in.get(f"/segments?sort={sort}&limit=50"))]


@pytest.mark.parametrize(
    "query, field",
    [
        ("state=hidden", "state"),
        ("interval=yesterday", "interval"),
        ("interval=2024-02-01/2024-01-01", "interval"),
        ("sort=colour", "sort"),
        ("cursor=bm9wZQ", "cursor"),
        ("sort=size&cursor=WyJ4IiwgImEiXQ", "cursor"),  # ["x", "a"]: no size
        ("limit=0", "limit"),
        ("shard=bogus", "shard"),
    ],
)
def test_a_filter_that_makes_no_sense_is_a_400_naming_it(logged_in, cluster, query, field):
    response = logged_in.get(f"/segments?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert f'<span class="field-error">{field}</span>' in html
    assert "<header>" in html  # the console around it


def test_a_page_reads_a_bounded_number_of_queries(
    logged_in, cluster, django_assert_max_num_queries
):
    logged_in.get("/segments?state=visible")  # the timeline states, cached per commit
    with django_assert_max_num_queries(12):
        assert _listed(logged_in.get("/segments?state=visible&datasource=i"))


def test_the_whole_datasource_view_links_to_its_segments(logged_in, cluster, settings):
    from console import timeline_svg

    settings.DEBUG = False
    html = logged_in.get("/datasources/wiki").content.decode()
    link = re.search(r'class="segments-link" href="([^"]+)"', html)
    if link is None:  # few enough to draw: the window lists them already
        assert timeline_svg.MAX_CHUNK_MARKS >= 3
        return
    params = parse_qs(urlparse(link[1].replace("&amp;", "&")).query)
    assert params["datasource"] == ["=wiki"]


# --- the browser ------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1440, 800])
def test_segments_view_in_the_browser(console_page, cluster, width):
    page = console_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(page.console_url("/"))
    page.click("header >> text=Segments")
    expect(page.locator("tr[data-segment]")).to_have_count(10)

    page.fill("input[name=datasource]", "FLIGHTS")
    page.click("#segment-filters button[type=submit]")
    expect(page.locator("tr[data-segment]")).to_have_count(6)
    page.select_option("select[name=state]", "visible")
    page.fill("input[name=datasource]", "")
    page.click("#segment-filters button[type=submit]")
    expect(page.locator("tr[data-segment]")).to_have_count(
        7
    )  # day 1 of wiki lost a core partition: incomplete
    expect(page.locator("#segments-matching")).to_contain_text("7 segments are visible")

    page.click("th >> text=Size")
    expect(page.locator("th[aria-sort=ascending]")).to_contain_text("Size")
    assert page.locator("tr[data-segment]").first.get_attribute("data-state") == "visible"
    if width == 1440:  # the whole table fits
        table = page.locator("table.segment-table").bounding_box()
        assert table["x"] + table["width"] <= 1440
    # At any width the page does not scroll sideways: a wide table scrolls in its box.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=ARTIFACTS / f"segments_{width}.png", full_page=True)
    assert not page.problems


# --- the tasks list grouped by type, dataSource or status ---------------------------------


def _groups(response) -> dict[str, list[int]]:
    assert response.status_code == 200
    html = response.content.decode()
    out = {}
    for value, row in re.findall(r'<tr data-group="([^"]*)">(.*?)</tr>', html, re.S):
        out[value] = [int(v) for v in re.findall(r'data-value="(\d+)"', row)]
    return out


def test_tasks_grouped_by_datasource_count_each_status(logged_in, cluster, claimed_task):
    claimed_task("wiki")  # RUNNING
    claimed_task("wikipedia")

    groups = _groups(logged_in.get("/tasks?group=datasource"))

    # total, then PENDING, WAITING, RUNNING, SUCCESS, FAILED, CANCELED
    assert groups["wiki"] == [3, 0, 0, 1, 2, 0, 0]
    assert groups["wikipedia"] == [1, 0, 0, 1, 0, 0, 0]
    assert groups["Flights_US"] == [1, 0, 0, 0, 1, 0, 0]
    assert list(groups) == ["wiki", "Flights_US", "wikipedia"]  # busiest first
    # A group's link lists its tasks, that dataSource only (not wikipedia's).
    html = logged_in.get("/tasks?group=datasource").content.decode()
    href = re.search(r'<tr data-group="wiki">.*?href="([^"]+)"', html, re.S)[1]
    listed = logged_in.get("/tasks" + href.replace("&amp;", "&")).content.decode()
    assert len(re.findall(r"<tr data-task=", listed)) == 3


def test_tasks_grouped_by_status_and_type_keep_the_filters(logged_in, cluster, claimed_task):
    claimed_task("wikipedia")

    by_status = _groups(logged_in.get("/tasks?group=status&datasource=WIKI"))
    assert {k: v[0] for k, v in by_status.items()} == {"SUCCESS": 2, "RUNNING": 1}
    by_type = _groups(logged_in.get("/tasks?group=type"))
    assert {k: v[0] for k, v in by_type.items()} == {"index_parallel": 4}
    assert _groups(logged_in.get("/tasks?group=colour")) == {}  # unknown: the plain list


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_tasks_grouped_in_the_browser(console_page, cluster):
    page = console_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(page.console_url("/tasks"))
    page.select_option("select[name=group]", "datasource")
    page.click("form.filters button[type=submit]")
    expect(page.locator("tr[data-group]")).to_have_count(2)
    page.wait_for_timeout(2500)  # the list polls: the groups stay grouped
    expect(page.locator("tr[data-group]")).to_have_count(2)
    page.click("tr[data-group=wiki] a")
    expect(page.locator("tr[data-task]")).to_have_count(2)
    assert not page.problems


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path",
    ["/tasks", "/tasks?group=status", "/datasources/wiki", "/query", "/datasources", "/locks", "/"],
)
def test_pages_at_a_narrow_width_do_not_scroll_sideways(console_page, cluster, path, settings):
    from metastore.last_runs import duty_run_mark

    # The overview as a running cluster shows it: every duty has a last run and a next
    # one (long timestamps that pushed the page sideways at this width).
    for name in ("compaction", "retention", "history", "kill"):
        duty_run_mark(name, summary=f"{name}: did what it does", redis_url=settings.REDIS_URL)
    page = console_page
    page.set_viewport_size({"width": 760, "height": 900})
    page.goto(page.console_url(path))
    page.wait_for_load_state("networkidle")
    assert page.evaluate("document.documentElement.scrollWidth") <= 760
    assert not page.problems


@pytest.mark.parametrize("sort", ["", "-priority", "priority", "type", "-datasource", "status"])
def test_tasks_keyset_pages_cover_every_task_once_in_order(
    logged_in, claimed_task, sort, monkeypatch
):
    from console import views
    from metastore import services
    from metastore.models import Task

    monkeypatch.setattr(views, "TASKS_PER_PAGE", 2)
    for name in ("wiki", "Wikipedia", "clicks", "wiki"):
        claimed_task(name)
    for priority in (90, 10, 50):
        services.task_submit(
            spec={"type": "kill", "dataSource": "b", "interval": "2024/2025",
                  "context": {"priority": priority}}
        )  # fmt: skip
    url, seen = f"/tasks?sort={sort}" if sort else "/tasks", []
    while url:
        html = logged_in.get(url).content.decode()
        seen += re.findall(r'<tr data-task="([^"]+)"', html)
        found = re.search(r'href="\?([^"]*)" id="tasks-next"', html)
        url = "/tasks?" + found[1].replace("&amp;", "&") if found else None
    from metastore.selectors import tasks as task_reads

    fields, descending = task_reads.task_order(sort)
    expected = Task.objects.order_by(*(f"-{f}" if descending else f for f in fields))
    assert seen == list(expected.values_list("id", flat=True))  # each once, in order
    assert "(7 tasks)" in html
    assert logged_in.get("/tasks?after=bm9wZQ==").status_code == 200  # not a cursor: page 1
