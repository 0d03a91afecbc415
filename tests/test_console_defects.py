"""Defects an operator met in the console (issue 25, "every page right"), each
shown first by a test that failed: in Chromium where it is what the browser does,
with Django's client where the server alone decides."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from test_query import history  # noqa: F401 - the shared metastore history fixture

from tests.conftest import ARTIFACTS, TEST_PASSWORD

pytestmark = pytest.mark.django_db

MULTI_LINE = (
    "SELECT TIME_FLOOR(__time, 'PT6H') AS t,\n  COUNT(*) AS n\nFROM wiki\nGROUP BY 1\nORDER BY 1"
)


@pytest.fixture
def logged_in(client, user):
    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


# --- 1. the query page and multi-line SQL ---------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_multi_line_query_runs_from_the_query_page(console_page, history):  # noqa: F811
    page = console_page
    page.goto(page.console_url("/query"))
    # The prefilled example is itself several lines long: run it as it stands.
    assert "\n" in page.locator("textarea[name=sql]").input_value()
    page.click("#query-form button[type=submit]")
    expect(page.locator("#query-table")).to_have_count(1)
    assert page.locator("#query-error").count() == 0

    page.fill("textarea[name=sql]", MULTI_LINE)
    page.click("#query-form button[type=submit]")
    expect(page.locator("#query-running")).to_be_hidden()  # the result is swapped in
    expect(page.locator("#query-table")).to_have_count(1)
    cells = page.locator("#query-table tbody tr").first.locator("td").all_inner_texts()
    assert cells == ["2024-01-01T00:00:00.000Z", "2"]
    # The query stays in the box, line breaks and all, to be edited and run again.
    assert page.locator("textarea[name=sql]").input_value().splitlines() == MULTI_LINE.splitlines()
    assert not page.problems


def test_a_refused_query_keeps_the_layout_and_the_text(logged_in, history):  # noqa: F811
    sql = "SELECT page\nFROM wiki\nWHERE page = 'a\x00'"

    response = logged_in.post("/query", {"sql": sql})

    assert response.status_code == 400
    html = response.content.decode()
    assert "<header>" in html and 'href="/datasources"' in html  # the console around it
    assert 'id="query-error"' in html and "sql:" in html and "control character" in html
    assert "FROM wiki" in html  # the text is kept for the operator to fix


def test_a_query_error_keeps_the_layout_and_the_text(logged_in, history):  # noqa: F811
    response = logged_in.post("/query", {"sql": "SELECT nope\r\nFROM wiki"})

    html = response.content.decode()
    assert "<header>" in html and 'id="query-error"' in html
    assert "SELECT nope\r\nFROM wiki" in html or "SELECT nope\nFROM wiki" in html


def test_a_viewer_may_run_a_query_by_post(client, django_user_model, history):  # noqa: F811
    from django.contrib.auth.models import Group

    bob = django_user_model.objects.create_user("bob", password=TEST_PASSWORD)
    bob.groups.add(Group.objects.get(name="viewer"))
    client.force_login(bob)

    response = client.post("/query", {"sql": MULTI_LINE})

    assert response.status_code == 200
    assert '<table id="query-table">' in response.content.decode()


def test_the_query_form_refuses_a_post_without_csrf(user, history):  # noqa: F811
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post("/query", {"sql": MULTI_LINE}).status_code == 403


# --- 2. API tokens in the Django admin ---------------------------------------------------------


@pytest.fixture
def admin_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    return client


def test_the_admin_never_shows_a_token_key_in_full(admin_client, user):
    from metastore.services import api_token_issue

    token, key = api_token_issue(user=user)
    base = "/admin/metastore/apitoken/"
    pages = [base, f"{base}{token.pk}/change/", f"{base}{token.pk}/delete/"]
    pages += [f"{base}{token.pk}/history/", f"{base}?q=alice"]

    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert key not in html, url
        assert key[:8] in html and "alice" in html, url  # the prefix and the owner
    admin_client.post(f"{base}{token.pk}/change/", {"expires_at_0": "", "expires_at_1": ""})
    from django.contrib.admin.models import LogEntry

    assert all(key not in e.object_repr for e in LogEntry.objects.all())


def test_a_token_created_in_the_admin_is_shown_once(admin_client, django_user_model):
    from django.contrib.admin.models import LogEntry

    from metastore.models import ApiToken

    bob = django_user_model.objects.create_user("bob", password=TEST_PASSWORD)

    created = admin_client.post("/admin/metastore/apitoken/add/", {"user": bob.pk})

    assert created.status_code == 200
    key = re.search(r'id="token-key"[^>]*>([0-9a-f]{40})<', created.content.decode())[1]
    assert "will not be shown again" in created.content.decode()
    assert ApiToken.objects.get(user=bob).prefix == key[:8]
    listed = admin_client.get("/admin/metastore/apitoken/").content.decode()
    assert key not in listed and key[:8] in listed
    assert all(key not in e.object_repr for e in LogEntry.objects.all())


# --- 3. counts that agree with the timeline and with SQL -------------------------------------


def _cells(html: str, datasource: str) -> dict[str, int]:
    """The numeric cells of one dataSource's row on the DataSources page."""

    row = re.search(rf'<tr data-datasource="{re.escape(datasource)}">(.*?)</tr>', html, re.S)
    assert row, f"no row for {datasource}"
    return {k: int(v) for k, v in re.findall(r'data-count="([^"]+)" data-value="(-?\d+)"', row[1])}


NEW_DAY2 = [
    ("2024-01-02T01:00", "x", 1),
    ("2024-01-02T02:00", "y", 1),
    ("2024-01-02T03:00", "z", 1),
]


def commit_sized(inline_spec, datasource: str, lock: str, chunks: dict[str, list[list]]) -> int:
    """As test_query.commit (one task publishes one real Parquet file per partition),
    each segment's size being its file's: returns the commit seq."""
    import os

    from django.db import transaction
    from test_query import write_segment_file

    from metastore import services
    from metastore.intervals import Interval
    from metastore.models import Task, TaskStatus

    with transaction.atomic():
        task = services.task_submit(spec=inline_spec(datasource))
        assert services.task_claim(task_id=task.id, worker="pytest")
    task = Task.objects.get(id=task.id)
    services.lock_acquire(task=task, interval=Interval.parse(lock))
    new = []
    for chunk_text, partitions in chunks.items():
        chunk = Interval.parse(chunk_text)
        alloc = services.segments_allocate(
            task=task, interval=chunk, count=len(partitions), append=False
        )
        for partition, rows in zip(alloc.partitions, partitions, strict=True):
            location = write_segment_file(datasource, rows)
            new.append(
                services.NewSegment(
                    interval=chunk,
                    version=alloc.version,
                    partition=partition,
                    core_partitions=alloc.core_partitions,
                    location=location,
                    num_rows=len(rows),
                    size_bytes=os.path.getsize(location) + 1000 * len(rows),
                    shard_spec={"type": "numbered", "partitionNum": partition},
                )
            )
    entry = services.segments_publish(task=task, segments=new)
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    return entry.seq


@pytest.fixture
def replaced(inline_spec):
    """Day 1 in two partitions and day 2 (5 rows), then day 2 replaced by 3 rows."""
    from test_query import DAY1_P0, DAY1_P1, DAY2

    first = commit_sized(
        inline_spec,
        "wiki",
        "2024-01-01/2024-01-03",
        {"2024-01-01/2024-01-02": [DAY1_P0, DAY1_P1], "2024-01-02/2024-01-03": [DAY2]},
    )
    second = commit_sized(
        inline_spec, "wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": [NEW_DAY2]}
    )
    return first, second


def test_datasources_page_counts_visible_apart_from_overshadowed(logged_in, replaced):
    from metastore import selectors
    from metastore.models import Segment
    from metastore.query import run_query

    html = logged_in.get("/datasources").content.decode()

    cells = _cells(html, "wiki")
    state = selectors.timeline_state(datasource="wiki")
    [[sql_rows]] = run_query(sql="SELECT COUNT(*) FROM wiki").rows
    old_day2 = Segment.objects.get(start__day=2, used=True, num_rows=2)
    assert cells["visible-segments"] == state.counts["visible"] == 3
    assert cells["visible-rows"] == sql_rows == 8
    assert cells["overshadowed-segments"] == state.counts["overshadowed"] == 1
    assert cells["overshadowed-rows"] == old_day2.num_rows == 2
    all_bytes = sum(Segment.objects.filter(used=True).values_list("size_bytes", flat=True))
    assert cells["visible-bytes"] + cells["overshadowed-bytes"] == all_bytes
    assert cells["overshadowed-bytes"] == old_day2.size_bytes


def test_partially_overshadowed_segments_are_counted_apart(logged_in, history):  # noqa: F811
    from metastore import selectors
    from metastore.query import run_query

    cells = _cells(logged_in.get("/datasources").content.decode(), "wiki")

    counts = selectors.timeline_state(datasource="wiki").counts
    [[sql_rows]] = run_query(sql="SELECT COUNT(*) FROM wiki").rows
    assert cells["partial-segments"] == counts["partial"] == 2
    assert cells["visible-segments"] == counts["visible"]  # v2's hours and the tombstone
    # SQL sees all rows of the fully visible segments and some of the partial ones'.
    assert cells["visible-rows"] <= sql_rows <= cells["visible-rows"] + cells["partial-rows"]
    assert cells["overshadowed-segments"] == 1 and cells["overshadowed-rows"] == 2


def test_commit_page_lists_what_a_replace_overshadowed(logged_in, replaced):

    from metastore.models import Segment

    _, second = replaced
    old_day2 = Segment.objects.get(start__day=2, num_rows=2)
    new_day2 = Segment.objects.get(start__day=2, num_rows=3)

    html = logged_in.get(f"/datasources/wiki/commits/{second}").content.decode()

    table = re.search(r'<table class="overshadowed-table">(.*?)</table>', html, re.S)[1]
    assert re.findall(r'<tr data-segment="([^"]+)"', table) == [old_day2.id]
    assert new_day2.id not in table
    assert "Overshadowed (1)" in html
    delta = re.search(r'class="commit-delta" data-rows="(-?\d+)" data-bytes="(-?\d+)"', html)
    assert int(delta[1]) == 3 - 2
    assert int(delta[2]) == new_day2.size_bytes - old_day2.size_bytes


def test_commit_page_lists_what_a_compaction_overshadowed(logged_in, replaced, inline_spec):

    from test_query import DAY1_P0, DAY1_P1

    from metastore.models import Segment

    day1 = list(Segment.objects.filter(start__day=1).values_list("id", "size_bytes"))
    compacted = commit_sized(
        inline_spec,
        "wiki",
        "2024-01-01/2024-01-02",
        {"2024-01-01/2024-01-02": [DAY1_P0 + DAY1_P1]},
    )
    new = Segment.objects.get(start__day=1, num_rows=5)

    html = logged_in.get(f"/datasources/wiki/commits/{compacted}").content.decode()

    assert "Overshadowed (2)" in html and "Marked unused (0)" in html
    table = re.search(r'<table class="overshadowed-table">(.*?)</table>', html, re.S)[1]
    assert sorted(re.findall(r'<tr data-segment="([^"]+)"', table)) == sorted(i for i, _ in day1)
    delta = re.search(r'class="commit-delta" data-rows="(-?\d+)" data-bytes="(-?\d+)"', html)
    assert int(delta[1]) == 0  # the same five rows, in one segment instead of two
    assert int(delta[2]) == new.size_bytes - sum(size for _, size in day1)


# --- 4. a cancel that shows itself ---------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_requested_cancel_replaces_the_button_and_shows_since_when(console_page, claimed_task):
    from metastore.models import Task

    task = claimed_task("wiki")  # RUNNING, claimed by the test: nobody will stop it
    page = console_page
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(page.console_url(f"/tasks/{task.id}"))
    expect(page.locator("#task-detail button.cancel")).to_have_count(1)

    page.click("#task-detail button.cancel")

    note = page.locator("#task-detail .cancel-requested")
    # It explains itself: how long the task has been stopping, in which phase.
    expect(note).to_contain_text(re.compile(r"stopping since \d+ s \(phase \S+\)"))
    expect(page.locator("#task-detail button.cancel")).to_have_count(0)
    requested = Task.objects.get(id=task.id).cancel_requested_at
    assert requested is not None
    stamp = requested.astimezone(__import__("datetime").UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert stamp in note.inner_text()  # when, in UTC
    # The task page polls while the task runs: the note stays, the button stays away.
    page.wait_for_timeout(2500)
    expect(page.locator("#task-detail button.cancel")).to_have_count(0)
    expect(note).to_contain_text("cancel requested")
    assert not page.problems


# --- 5. rough edges ------------------------------------------------------------------------------

ISO_UTC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z"


def _field(html: str, name: str) -> str:
    row = re.search(rf'<tr data-field="{name}"><th>[^<]*</th><td>(.*?)</td></tr>', html, re.S)
    assert row, f"no field {name}"
    return row[1]


def test_segment_page_shows_names_json_and_utc_times(logged_in, publish):
    published = publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 2})
    segment_id = published.segment_ids[1]

    html = logged_in.get(f"/datasources/wiki/segments/{segment_id}").content.decode()

    assert '<a href="/datasources/wiki">wiki</a>' in _field(html, "datasource")
    assert f'href="/tasks/{published.task_id}"' in _field(html, "created_by")
    assert _field(html, "tombstone") == "no" and _field(html, "used").startswith("yes")
    shard = _field(html, "shard_spec")
    assert "&quot;type&quot;: &quot;numbered&quot;" in shard and "&#x27;" not in shard
    assert _field(html, "root_partitions") == "<code>[1]</code>"
    for name in ("created_at", "used_status_updated_at"):
        assert re.search(ISO_UTC, _field(html, name)), name
    fields = re.search(r'<table class="segment-fields">(.*?)</table>', html, re.S)[1]
    assert "True" not in fields and "False" not in fields and "{'" not in fields
    assert html.count("<h2>Schema</h2>") == 1 and 'data-field="schema"' not in html


def test_times_on_the_console_pages_are_iso_utc_and_labelled(logged_in, replaced):
    from metastore.models import Task

    task = Task.objects.first()
    pages = ["/", f"/tasks/{task.id}", "/datasources", "/datasources/wiki"]
    for path in pages:
        html = logged_in.get(path).content.decode()
        times = re.findall(r"<time datetime=\"([^\"]+)\"[^>]*>([^<]+)</time>", html)
        assert times, path
        assert all(re.fullmatch(ISO_UTC, a) and a == b for a, b in times), (path, times)
        assert "UTC" in html, path
        # No date printed any other way (Y-m-d H:i:s, as the pages used to).
        assert not re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", html), path


@pytest.mark.parametrize(
    "path",
    ["/datasources/nope/segments/x", "/tasks/nope", "/datasources/wiki/commits/999", "/no/such"],
)
def test_not_found_pages_keep_the_layout_and_navigation(logged_in, path):
    response = logged_in.get(path)

    assert response.status_code == 404
    html = response.content.decode()
    assert "<header>" in html
    for link in ('href="/"', 'href="/datasources"', 'href="/locks"', 'href="/query"'):
        assert link in html, link
    assert "Not found" in html and path in html


def test_a_datasource_with_only_a_running_task_is_listed_and_has_a_page(logged_in, claimed_task):
    task = claimed_task("fresh")  # RUNNING, nothing published yet

    listed = logged_in.get("/datasources").content.decode()
    page = logged_in.get("/datasources/fresh")

    assert _cells(listed, "fresh")["active-tasks"] == 1
    assert _cells(listed, "fresh")["visible-segments"] == 0
    assert page.status_code == 200
    html = page.content.decode()
    assert "No segments yet" in html and f'href="/tasks/{task.id}"' in html
    assert logged_in.get("/datasources/never-heard-of").status_code == 404


# --- 6. the tasks list -------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_tasks_table_fits_a_1440_pixel_screen(console_page, claimed_task):
    from metastore import services

    for name in ("wikipedia_edits_by_country_and_hour_v2", "clicks"):
        claimed_task(name)
        services.task_submit(spec={"type": "kill", "dataSource": name, "interval": "2024/2025"})
    page = console_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(page.console_url("/tasks"))

    expect(page.locator("table.task-table tbody tr")).to_have_count(4)
    page.screenshot(path=str(ARTIFACTS / "tasks_1440.png"), full_page=True)
    assert page.evaluate("document.documentElement.scrollWidth") <= 1440
    for header in ("Priority", "Created (UTC)", "Duration"):
        box = page.locator("table.task-table th", has_text=header).bounding_box()
        assert box["x"] + box["width"] <= 1440, header
    assert not page.problems


def _task_ids(html: str) -> list[str]:
    return re.findall(r'<tr data-task="([^"]+)"', html)


def test_the_tasks_filter_matches_a_datasource_by_any_part_of_its_name(logged_in, claimed_task):
    wiki, pedia, clicks = (claimed_task(n) for n in ("wiki", "Wikipedia", "clicks"))

    html = logged_in.get("/tasks", {"datasource": "WIK"}).content.decode()

    assert sorted(_task_ids(html)) == sorted([wiki.id, pedia.id])
    assert clicks.id not in html
    assert _task_ids(logged_in.get("/tasks", {"datasource": "pedi"}).content.decode()) == [pedia.id]


def test_the_tasks_table_sorts_by_a_column(logged_in, claimed_task):
    from metastore import services

    low = claimed_task("wiki")
    high = services.task_submit(
        spec={
            "type": "kill",
            "dataSource": "b",
            "interval": "2024/2025",
            "context": {"priority": 90},
        }
    )

    by_priority = _task_ids(logged_in.get("/tasks", {"sort": "-priority"}).content.decode())
    by_name = _task_ids(logged_in.get("/tasks", {"sort": "datasource"}).content.decode())
    unknown = logged_in.get("/tasks", {"sort": "password"})

    assert by_priority == [high.id, low.id]
    assert by_name == [high.id, low.id]  # "b" before "wiki"
    assert unknown.status_code == 200 and len(_task_ids(unknown.content.decode())) == 2
    html = logged_in.get("/tasks", {"sort": "priority", "datasource": "wiki"}).content.decode()
    # Headers link to their sort, the filter kept; the sorted column says which way.
    assert 'href="?datasource=wiki&amp;sort=-priority"' in html
    assert 'aria-sort="ascending"' in html


# --- task logs -----------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_task_log_is_kept_shown_and_served_as_druid_does(api_client, wait_for_task, client, user):
    from metastore import services

    task = services.task_submit(
        spec={"type": "kill", "dataSource": "logs", "interval": "2024/2025"}, user=user
    )
    assert wait_for_task(task.id).status == "SUCCESS"

    url = f"/druid/indexer/v1/task/{task.id}/log"
    whole = api_client.get(url)
    assert whole.status_code == 200 and whole["Content-Type"].startswith("text/plain")
    text = whole.content.decode()
    lines = text.splitlines()
    assert f"task {task.id} runs on" in lines[0]
    assert any(line.endswith("phase killing") for line in lines), text
    assert lines[-1].endswith(f"task {task.id} ended SUCCESS"), text
    assert all(re.match(ISO_UTC + " (INFO|WARNING|ERROR|CRITICAL) ", line) for line in lines)
    # Druid's offset: from a byte on when positive, the last bytes when negative.
    assert api_client.get(url, {"offset": 10}).content == whole.content[10:]
    assert api_client.get(url, {"offset": -25}).content == whole.content[-25:]
    assert api_client.get(url, {"offset": "x"}).status_code == 400
    assert api_client.get("/druid/indexer/v1/task/nope/log").status_code == 404
    pending = services.task_submit(
        spec={"type": "kill", "dataSource": "x", "interval": "2024/2025"}
    )
    services.task_cancel(task_id=pending.id)  # ends before a worker takes it: no log
    empty = api_client.get(f"/druid/indexer/v1/task/{pending.id}/log")
    assert empty.status_code == 200 and empty.content == b""

    client.force_login(user)
    page = client.get(f"/tasks/{task.id}").content.decode()
    log = re.search(r'<pre class="task-log"[^>]*>(.*?)</pre>', page, re.S)[1]
    assert f"task {task.id} ended SUCCESS" in log


@pytest.mark.django_db
def test_a_failed_task_shows_its_error_and_then_its_log(logged_in, claimed_task, settings):
    from metastore import services
    from metastore.task_logs import task_log_capture

    task = claimed_task("wiki")
    with task_log_capture(task.id):
        __import__("logging").getLogger("workers.runner").error("the input went away")
    services.task_finish(task_id=task.id, status="FAILED", error="input file missing")

    html = logged_in.get(f"/tasks/{task.id}").content.decode()

    why, log = html.index("Why it ended"), html.index('<pre class="task-log"')
    spec = html.index("<h2>Spec</h2>")
    assert why < log < spec
    assert "ERROR workers.runner: the input went away" in html
