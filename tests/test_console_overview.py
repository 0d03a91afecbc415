"""The overview (the console's home page) and the Services view (issue 25, item 4):
workers and slots with heartbeat, tasks by state and failed in the last day,
dataSources with visible size and rows, locks held and waits, the background
rounds' last runs; each process with its health."""

from __future__ import annotations

import re
import socket
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import expect

from console import overview_views
from metastore import services
from metastore.intervals import Interval
from metastore.last_runs import last_run_mark
from metastore.models import Task, TaskStatus, Worker
from tests.conftest import ARTIFACTS, TEST_PASSWORD, TEST_WORKER

pytestmark = pytest.mark.django_db
DAY = Interval.parse("2024-01-01/2024-01-02")


@pytest.fixture(autouse=True)
def own_last_runs(settings):
    """This test's own keys in the Redis every helper and process shares."""
    settings.STRATA_LAST_RUN_PREFIX = f"test:{uuid.uuid4().hex}:last-run:"


@pytest.fixture
def logged_in(client, user):
    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


@pytest.fixture
def busy(publish, claimed_task, inline_spec, no_enqueue):
    """wiki published twice (day 2 replaced); a RUNNING task holding a lock, one
    WAITING for it, two PENDING; one FAILED today and one FAILED two days ago;
    a live worker of 2 slots."""
    publish(
        "wiki", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 2, "2024-01-02/2024-01-03": 1}
    )
    publish("wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1}, rows=7, size=700)
    running = claimed_task("wiki")
    services.lock_acquire(task=running, interval=DAY)
    waiting = claimed_task("wiki")
    assert services.lock_try_acquire(task=waiting, interval=DAY) is None
    pending = [services.task_submit(spec=inline_spec("wiki")) for _ in range(2)]
    failed = claimed_task("clicks")
    services.task_finish(task_id=failed.id, status=TaskStatus.FAILED, error="input file is gone")
    old = claimed_task("clicks")
    services.task_finish(task_id=old.id, status=TaskStatus.FAILED, error="long ago")
    Task.objects.filter(id=old.id).update(ended_at=timezone.now() - timedelta(days=2))
    services.worker_heartbeat(name="host0:100", capacity=2, processes=[TEST_WORKER])
    return {"running": running, "waiting": waiting, "pending": pending, "failed": failed}


def _counts(html: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r'data-count="([^"]+)" data-value="(\d+)"', html)}


def test_the_home_page_is_the_overview(logged_in, busy):
    response = logged_in.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    counts = _counts(html)
    assert counts["running"] == 1 and counts["waiting"] == 1 and counts["pending"] == 2
    assert counts["failed"] == 1  # the one of two days ago is not in the last day
    assert busy["failed"].id in html and "input file is gone" in html
    assert counts["locks-held"] == 1 and counts["lock-waits"] == 1
    assert busy["waiting"].id in html
    # wiki: day 1 (2 partitions, 10 rows each) and day 2's replacement (7 rows) are read.
    row = re.search(r'<tr data-datasource="wiki">(.*?)</tr>', html, re.S)[1]
    assert _counts(row) == {
        "visible-segments": 3,
        "visible-rows": 27,
        "visible-bytes": 2700,
        "hidden-segments": 1,
    }
    assert "host0:100" in html and "2</strong> of 2 slots busy" in html
    assert "duties" in html  # said to be missing, not shown empty


def test_the_overview_agrees_with_the_datasources_page(logged_in, busy):
    overview = re.search(
        r'<tr data-datasource="wiki">(.*?)</tr>', logged_in.get("/").content.decode(), re.S
    )[1]
    listing = re.search(
        r'<tr data-datasource="wiki">(.*?)</tr>',
        logged_in.get("/datasources").content.decode(),
        re.S,
    )[1]
    assert _counts(overview)["visible-rows"] == _counts(listing)["visible-rows"]
    assert _counts(overview)["visible-bytes"] == _counts(listing)["visible-bytes"]


def test_an_old_link_to_the_tasks_list_still_lists_tasks(logged_in, busy):
    response = logged_in.get("/?status=RUNNING&datasource=wik")
    assert response.status_code == 302
    assert response["Location"] == "/tasks?status=RUNNING&datasource=wik"


def test_the_overview_reads_a_bounded_number_of_queries(
    logged_in, busy, django_assert_max_num_queries
):
    logged_in.get("/")  # the timeline states, cached per commit
    with django_assert_max_num_queries(20):
        assert logged_in.get("/").status_code == 200


def test_the_background_rounds_show_when_they_last_ran(logged_in, busy):
    html = logged_in.get("/").content.decode()
    assert re.search(r'data-round="beat">.*?unknown|data-round="beat">.*?late', html, re.S)

    last_run_mark("reaper", redis_url=settings.REDIS_URL)
    last_run_mark("janitor", redis_url=settings.REDIS_URL, now=timezone.now() - timedelta(hours=1))
    html = logged_in.get("/").content.decode()
    beat = re.search(r'<tr data-round="beat">(.*?)</tr>', html, re.S)[1]
    janitor = re.search(r'<tr data-round="janitor">(.*?)</tr>', html, re.S)[1]
    assert 'class="health ok"' in beat and "last round" in beat
    assert 'class="health bad"' in janitor and "3600 s ago" in janitor


# --- the Services view ----------------------------------------------------------------------


def _services(html: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for kind, healthy in re.findall(r'data-service="([^"]+)" data-healthy="([^"]+)"', html):
        out.setdefault(kind, []).append(healthy)
    return out


def test_services_lists_each_process_with_its_health(logged_in, busy):
    last_run_mark("reaper", redis_url=settings.REDIS_URL)
    Worker.objects.create(
        name="gone:1", capacity=1, heartbeat_at=timezone.now() - timedelta(hours=1)
    )

    html = logged_in.get("/services").content.decode()

    found = _services(html)
    assert found["web"] == ["yes"] and found["database"] == ["yes"] and found["redis"] == ["yes"]
    assert sorted(found["worker"]) == ["no", "yes"]  # the live one and the lost one
    assert "lost: 1 slots, heartbeat 3600 s ago" in html
    assert found["beat"] == ["yes"]
    assert "spark" not in found  # SPARK_MASTER is local[...]: no master to ask


def test_a_spark_master_is_listed_with_its_health(logged_in, busy, settings):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead_port = closed.getsockname()[1]
    closed.close()
    settings.SPARK_MASTER = f"spark://127.0.0.1:{port},127.0.0.1:{dead_port}"
    try:
        html = logged_in.get("/services").content.decode()
    finally:
        listener.close()
    assert _services(html)["spark"] == ["yes", "no"]
    assert f"spark://127.0.0.1:{dead_port}" in html


def test_services_says_redis_is_down_instead_of_failing(logged_in, busy, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = logged_in.get("/services")
    assert response.status_code == 200
    found = _services(response.content.decode())
    assert found["redis"] == ["no"] and found["beat"] == ["unknown"]
    assert logged_in.get("/").status_code == 200


def test_spark_masters_are_read_from_the_setting(settings):
    settings.SPARK_MASTER = "local[2]"
    assert overview_views.spark_masters() == []
    settings.SPARK_MASTER = "spark://a:7077,b:7078"
    assert overview_views.spark_masters() == [("a", 7077), ("b", 7078)]


# --- the browser ----------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1440, 760])
def test_overview_and_services_in_the_browser(console_page, busy, width):
    page = console_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(page.console_url("/"))  # where the login lands
    expect(page.locator("h1")).to_have_text("Overview")
    expect(page.locator("#overview-tasks [data-count=running]")).to_contain_text("1 running")
    expect(page.locator("#overview-datasources tr[data-datasource=wiki]")).to_have_count(1)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=ARTIFACTS / f"overview_{width}.png", full_page=True)

    page.click("header >> text=Services")
    expect(page.locator("h1")).to_have_text("Services")
    expect(page.locator("tr[data-service=web]")).to_contain_text("up")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.screenshot(path=ARTIFACTS / f"services_{width}.png", full_page=True)
    assert not page.problems


def test_the_one_pass_read_gives_each_used_segment_its_rows_and_bytes(busy):
    """What visibility counts read when most chunks mix visible and overshadowed
    segments: the same rows and bytes as reading them by id."""
    from metastore import selectors
    from metastore.models import Segment
    from metastore.selectors import visibility

    ids = list(
        Segment.objects.filter(datasource__name="wiki", used=True).values_list("id", flat=True)
    )
    by_id = {k: v[:2] for k, v in selectors.segment_facts(ids=ids).items()}

    assert visibility.used_segment_facts("wiki", None) == by_id and len(by_id) == 4
    day2 = visibility.used_segment_facts("wiki", Interval.parse("2024-01-02/2024-01-03"))
    assert len(day2) == 2 and all(by_id[k] == v for k, v in day2.items())
