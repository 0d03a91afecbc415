"""The query workbench (issue 25, item 5): multi-line SQL, a schema tree, EXPLAIN,
downloads of the whole result, the session's history, a timer and a cancel
button that stops the query in the engine, charts only on request."""

from __future__ import annotations

import csv
import io
import json
import re
import threading
import time

import pytest
import test_query
from django.db import connection
from django.test import Client
from playwright.sync_api import expect

from metastore import query
from tests.conftest import ARTIFACTS, TEST_PASSWORD

pytestmark = pytest.mark.django_db
history = test_query.history  # the shared metastore history fixture

ENDLESS = "SELECT count(*) FROM range(10000000000000)"  # ten trillion rows
BY_PAGE = "SELECT page,\n  SUM(added) AS added\nFROM wiki\nGROUP BY page\nORDER BY page"


@pytest.fixture
def logged_in(client, user):
    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


def test_explain_shows_the_sql_strata_runs_and_the_plan(logged_in, history):
    response = logged_in.post("/query", {"sql": BY_PAGE, "action": "Explain"})

    assert response.status_code == 200
    html = response.content.decode()
    plan = re.search(r'<div id="query-plan">(.*?)</div>', html, re.S)[1]
    assert "<h3>strata_sql</h3>" in plan and "<h3>physical_plan</h3>" in plan
    assert "Group By" in plan and "wiki" in plan
    assert 'id="query-table"' not in html


def test_downloads_hold_the_whole_result(logged_in, history, monkeypatch):
    from console import query_views

    monkeypatch.setattr(query_views, "SHOWN_ROWS", 1)  # the page shows one row; files all
    expected = query.run_query(sql=BY_PAGE)

    as_csv = logged_in.post("/query", {"sql": BY_PAGE, "action": "CSV"})
    as_json = logged_in.post("/query", {"sql": BY_PAGE, "action": "JSON"})

    assert as_csv["Content-Type"].startswith("text/csv")
    assert as_csv["Content-Disposition"] == 'attachment; filename="query.csv"'
    rows = list(csv.reader(io.StringIO(as_csv.content.decode())))
    assert rows[0] == ["page", "added"] and len(rows) == len(expected.rows) + 1
    assert [[r[0], int(r[1])] for r in rows[1:]] == expected.rows
    assert as_json["Content-Disposition"] == 'attachment; filename="query.json"'
    assert json.loads(as_json.content) == [{"page": p, "added": a} for p, a in expected.rows]


def test_a_refused_download_is_the_page_with_its_error(logged_in, history):
    response = logged_in.post("/query", {"sql": "DELETE FROM wiki", "action": "CSV"})
    assert response.status_code == 400
    assert 'id="query-error"' in response.content.decode()


def test_the_session_keeps_its_queries_newest_first(logged_in, history, user):
    logged_in.post("/query", {"sql": "SELECT 1 AS one"})
    logged_in.post("/query", {"sql": BY_PAGE, "as_of": str(history[0])})
    logged_in.post("/query", {"sql": "SELECT nope FROM wiki"})
    logged_in.post("/query", {"sql": "SELECT 1 AS one"})  # again: moves to the top

    html = logged_in.get("/query").content.decode()
    listed = re.findall(r'<li data-sql="([^"]*)" data-as-of="([^"]*)">', html)
    assert [(s.replace("&#x27;", "'"), a) for s, a in listed] == [
        ("SELECT 1 AS one", ""),
        ("SELECT nope FROM wiki", ""),
        (BY_PAGE, str(history[0])),
    ]
    assert "1 row in" in html and "field-error" in html
    other = Client()  # another session has its own history
    other.force_login(user)
    assert 'id="query-history"' not in other.get("/query").content.decode()


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_the_query_in_the_engine(logged_in, history, user):
    outcome = {}

    def run():
        runner = Client()
        runner.force_login(user)
        try:
            outcome["response"] = runner.post(
                "/query", {"sql": ENDLESS, "query_id": "0123456789abcdef"}
            )
        finally:
            connection.close()

    started = time.monotonic()
    thread = threading.Thread(target=run)
    thread.start()
    try:
        while query.queries_in_engine() == 0 and thread.is_alive():
            time.sleep(0.01)
        answer = logged_in.post("/query/cancel", {"query_id": "0123456789abcdef"})
    finally:
        thread.join(60)
    assert answer.json() == {"query_id": "0123456789abcdef", "canceled": True}
    response = outcome["response"]
    assert response.status_code == 400
    assert "canceled: the query was stopped at your request" in response.content.decode()
    assert time.monotonic() - started < 30  # long before its time bound (300 s)
    assert query.queries_in_engine() == 0


def test_cancel_of_no_query_says_so(logged_in):
    assert (
        logged_in.post("/query/cancel", {"query_id": "feedfacefeedface"}).json()["canceled"]
        is False
    )
    refused = logged_in.post("/query/cancel", {"query_id": "x; drop"})
    assert refused.status_code == 400 and refused.json()["field"] == "query_id"
    assert logged_in.get("/query/cancel").status_code == 405


def test_the_schema_tree_lists_datasources_and_their_columns(logged_in, history):
    html = logged_in.get("/query/schema").content.decode()

    assert '<details class="schema-table" data-table="wiki"' in html
    columns = re.findall(r'data-insert="([^"]+)" title="insert the column', html)
    assert columns[0] == "__time" and {"page", "added"} <= set(columns)
    assert "TIMESTAMP" in html and "VARCHAR" in html


def test_no_chart_unless_asked(logged_in, history):
    sql = "SELECT TIME_FLOOR(__time, 'PT6H') AS t, COUNT(*) AS n FROM wiki GROUP BY 1 ORDER BY 1"
    assert 'id="query-chart"' not in logged_in.post("/query", {"sql": sql}).content.decode()
    assert (
        'id="query-chart"' in logged_in.post("/query", {"sql": sql, "chart": "1"}).content.decode()
    )


# --- the browser ------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_workbench_in_the_browser(console_page, history):
    page = console_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(page.console_url("/query"))
    expect(page.locator("#query-schema details[data-table=wiki]")).to_have_count(1)

    # The schema tree writes names into the query where the cursor is.
    page.fill("textarea[name=sql]", "SELECT  FROM wiki")
    page.evaluate("document.querySelector('textarea[name=sql]').setSelectionRange(7, 7)")
    page.click("#query-schema button.column[data-insert=page]")
    assert page.locator("textarea[name=sql]").input_value() == "SELECT page FROM wiki"
    page.focus("textarea[name=sql]")
    page.keyboard.press("Control+Enter")
    expect(page.locator("#query-table tbody tr")).not_to_have_count(0)

    page.click("#query-explain")
    expect(page.locator("#query-plan")).to_contain_text("physical_plan")
    page.screenshot(path=ARTIFACTS / "query_explain.png", full_page=True)

    # A long query: the timer runs, Cancel stops it in the engine, the page says so.
    page.fill("textarea[name=sql]", ENDLESS)
    page.click("#query-form button[type=submit]")
    expect(page.locator("#query-running")).to_be_visible()
    page.wait_for_timeout(1200)
    assert float(page.locator("#query-timer").inner_text().split()[0]) >= 1.0
    page.click("#query-cancel")
    expect(page.locator("#query-error")).to_contain_text("canceled")
    assert query.queries_in_engine() == 0

    # The history loads an earlier query back into the box.
    page.locator("#query-history li", has_text="SELECT page FROM wiki").locator(
        "button.load"
    ).first.click()
    assert page.locator("textarea[name=sql]").input_value() == "SELECT page FROM wiki"
    page.screenshot(path=ARTIFACTS / "query_workbench.png", full_page=True)
    assert not [p for p in page.problems if "/query" not in p or "HTTP 5" in p]


def test_the_schema_tree_says_when_a_file_cannot_be_read(logged_in, publish):
    publish("lost", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})  # no file behind it

    response = logged_in.get("/query/schema")

    assert response.status_code == 200
    assert 'id="schema-problem"' in response.content.decode()
