"""The console in a real headless Chromium against the live server, with the real
worker: a task submitted through the API is followed on the tasks page, updated
by HTMX polling without a reload, until it succeeds; its dataSource then shows
its DAY segments visible. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from metastore import services
from metastore.intervals import Interval
from metastore.models import Segment, TaskStatus

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"  # git-ignored
UPDATE_TIMEOUT_MS = 300_000  # only against hangs

SUBMIT_JS = """async (spec) => {
  const headers = JSON.parse(document.body.getAttribute('hx-headers'));
  const response = await fetch('/api/v1/tasks', {
    method: 'POST',
    credentials: 'same-origin',
    headers: {'Content-Type': 'application/json', ...headers},
    body: JSON.stringify(spec),
  });
  return {status: response.status, body: await response.json()};
}"""

# Records every status the task's row shows, each time HTMX swaps the table.
WATCH_JS = """(taskId) => {
  window.__statusesSeen = [];
  const table = document.getElementById('task-table');
  const record = () => {
    const cell = table.querySelector(`tr[data-task="${taskId}"] [data-status]`);
    const status = cell && cell.dataset.status;
    const seen = window.__statusesSeen;
    if (status && seen[seen.length - 1] !== status) seen.push(status);
  };
  new MutationObserver(record).observe(table, {childList: true, subtree: true});
  record();
}"""


def test_tasks_page_follows_a_task_to_success_without_reloading(
    console_page, claimed_task, inline_spec, wait_for_task
):
    page = console_page
    # Another task holds the first day, so the task under test stays WAITING
    # (visibly) until the test releases it: no race with the worker's speed.
    holder = claimed_task("clicks")
    services.lock_acquire(task=holder, interval=Interval.parse("2024-06-01/2024-06-02"))

    page.goto(page.console_url("/tasks"))
    expect(page.locator("h1")).to_have_text("Tasks")
    page.evaluate("window.__strataMarker = 'still the same document'")
    navigations = []
    page.on(
        "framenavigated",
        lambda frame: navigations.append(frame.url) if frame == page.main_frame else None,
    )

    spec = inline_spec(
        "clicks",
        data="\n".join(
            json.dumps(row)
            for row in [
                {"ts": "2024-06-01T10:00:00Z", "page": "Home", "added": 3},
                {"ts": "2024-06-01T11:30:00Z", "page": "Home", "added": 4},
                {"ts": "2024-06-02T09:15:00Z", "page": "About", "added": 5},
            ]
        ),
        intervals=["2024-06-01/2024-06-03"],
    )
    submitted = page.evaluate(SUBMIT_JS, spec)
    assert submitted["status"] == 201, submitted
    task_id = submitted["body"]["task"]

    row = page.locator(f'tr[data-task="{task_id}"]')
    expect(row).to_have_count(1, timeout=UPDATE_TIMEOUT_MS)  # appears by polling
    page.evaluate(WATCH_JS, task_id)
    status = row.locator("[data-status]")
    expect(status).to_have_attribute("data-status", "WAITING", timeout=UPDATE_TIMEOUT_MS)
    page.screenshot(path=ARTIFACTS / "tasks_waiting.png", full_page=True)

    locks = page.context.new_page()
    locks.goto(page.console_url("/locks"))
    lock_row = locks.locator("table.lock-table tbody tr", has_text=holder.id)
    expect(lock_row).to_contain_text("EXCLUSIVE")
    expect(lock_row).to_contain_text("2024-06-01T00:00:00.000Z/2024-06-02T00:00:00.000Z")
    expect(locks.locator("main table").nth(1)).to_contain_text(task_id)  # the Waiting table
    locks.screenshot(path=ARTIFACTS / "locks.png", full_page=True)
    locks.close()

    services.task_finish(
        task_id=holder.id, status=TaskStatus.CANCELED, error="released by the test"
    )
    expect(status).to_have_attribute("data-status", "SUCCESS", timeout=UPDATE_TIMEOUT_MS)
    page.screenshot(path=ARTIFACTS / "tasks_success.png", full_page=True)

    assert page.evaluate("window.__strataMarker") == "still the same document"
    assert navigations == []
    # What the row showed, swap after swap: ... WAITING, then RUNNING, then SUCCESS.
    seen = page.evaluate("window.__statusesSeen")
    assert "WAITING" in seen and seen[-1] == "SUCCESS", seen
    waited = seen.index("WAITING")
    assert set(seen[:waited]) <= {"PENDING", "RUNNING"}, seen
    assert set(seen[waited + 1 : -1]) <= {"RUNNING"}, seen
    assert wait_for_task(task_id).status == TaskStatus.SUCCESS

    page.goto(page.console_url("/datasources/clicks"))
    segments = list(Segment.objects.filter(datasource__name="clicks").order_by("start"))
    assert [str(s.interval) for s in segments] == [
        "2024-06-01T00:00:00.000Z/2024-06-02T00:00:00.000Z",
        "2024-06-02T00:00:00.000Z/2024-06-03T00:00:00.000Z",
    ]
    rows = page.locator("table.segments tbody tr")
    expect(rows).to_have_count(2)
    for i, segment in enumerate(segments):
        expect(rows.nth(i)).to_have_attribute("data-segment", segment.id)
        expect(rows.nth(i)).to_have_attribute("data-visibility", "visible")
        expect(rows.nth(i)).to_contain_text(str(segment.interval))
        expect(rows.nth(i)).to_contain_text(segment.version)
    expect(page.locator(".badge.seg-visible")).to_have_text("2 visible")
    expect(page.locator(".badge.seg-overshadowed")).to_have_text("0 overshadowed")
    page.screenshot(path=ARTIFACTS / "datasource.png", full_page=True)

    page.goto(page.console_url("/locks"))
    expect(page.locator("table.lock-table tbody")).to_contain_text("No locks are held.")
    assert page.problems == []
