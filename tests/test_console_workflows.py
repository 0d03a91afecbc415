"""The console's workflows in Debian's Chromium against the live server, on one
dataSource holding every state (tests/console_states.py): the timeline's marks
per segment, zoom by dragging, segment and commit pages, time travel, the submit
form's inline errors, cancel with confirmation, the waits-for graph, and an
operator action recorded with its user. Screenshots go to tests/artifacts/.
Tasks are kept off the queue (the `no_enqueue` fixture), so no worker runs them."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect

from metastore import services
from metastore.models import CommitKind, CommitLogEntry, Segment, Task, TaskStatus
from tests import console_states
from tests.console_states import DS, commit_adding

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture
def states(inline_spec, user, no_enqueue):
    return console_states.build(inline_spec, user=user)


def seg(page, segment_id):
    return page.locator(f'svg.timeline-interval g.seg[data-segment-id="{segment_id}"]')


def test_timeline_marks_zoom_and_segment_page(console_page, states):
    page = console_page
    page.goto(page.console_url(f"/datasources/{DS}"))
    ids = states.ids
    expect(seg(page, ids["visible"][0])).to_have_attribute("data-status", "visible")
    expect(seg(page, ids["partial"][0])).to_have_attribute("data-status", "partial")
    expect(seg(page, ids["overshadowed"][0])).to_have_attribute("data-status", "overshadowed")
    expect(seg(page, ids["tombstone"][0])).to_have_attribute("data-flags", "tombstone")
    expect(seg(page, ids["incomplete"][0])).to_have_attribute("data-status", "incomplete")
    expect(seg(page, ids["partial_aug"][0])).to_have_attribute("data-flags", "partial-aug")
    upgraded = Segment.objects.exclude(upgraded_from="").get()
    expect(seg(page, upgraded.id)).to_have_attribute("data-flags", "upgraded")
    expect(page.locator(f'g.lock[data-holder="{states.running}"]')).to_have_count(1)
    expect(page.locator(f'g.pending[data-task="{states.running}"]')).to_have_count(1)
    # the hover text names who overshadows
    title = seg(page, ids["partial"][0]).locator("title")
    expect(title).to_contain_text(f"overshadowed by {ids['hour'][0]}")
    page.screenshot(path=ARTIFACTS / "console_timeline.png", full_page=True)

    # drag across the overview from day 2 to day 4: the window goes into the URL
    svg = page.locator("svg.timeline-overview")
    box = svg.bounding_box()
    left, width = 170, 1100
    start = console_states.day(1).start
    end = console_states.day(10).start  # the extent ends with the day-9 lock

    def x_of(ts):
        return box["x"] + (left + (ts - start) / (end - start) * width) * box["width"] / (
            left + width + 10
        )

    page.mouse.move(x_of(console_states.day(2).start) + 1, box["y"] + 60)
    page.mouse.down()
    page.mouse.move(x_of(console_states.day(4).start) - 1, box["y"] + 60, steps=5)
    page.mouse.up()
    page.wait_for_url("**interval=**")
    (window,) = parse_qs(urlparse(page.url).query)["interval"]
    # snapped to whole days, the dataSource's segment granularity (issue 25)
    assert window == "2024-03-02T00:00:00.000Z/2024-03-04T00:00:00.000Z"
    expect(seg(page, ids["visible"][0])).to_have_count(0)
    expect(seg(page, ids["hour"][0])).to_have_count(1)
    page.screenshot(path=ARTIFACTS / "console_zoomed.png", full_page=True)

    # click a segment: its page says what overshadows it and which commit added it
    seg(page, ids["partial"][0]).locator("a").click()
    expect(page.locator("h1")).to_have_text(f"Segment of {DS}")
    expect(page.locator("ul.overshadowed-by")).to_contain_text(ids["hour"][0])
    expect(page.locator("td.added-by")).to_contain_text("publish")
    page.screenshot(path=ARTIFACTS / "console_segment.png", full_page=True)
    assert page.problems == []


def test_time_travel_and_commit_page(console_page, states):
    page = console_page
    first = CommitLogEntry.objects.filter(datasource=DS).order_by("seq").first()
    page.goto(page.console_url(f"/datasources/{DS}"))
    page.locator("form.travel input[type=range]").evaluate(
        "(el, v) => { el.value = v; el.dispatchEvent(new Event('input')); }", str(first.seq)
    )
    page.locator("form.travel button").click()
    expect(page.locator(".travel-note")).to_have_text(f"As of commit #{first.seq}")
    expect(seg(page, states.ids["partial"][0])).to_have_attribute("data-status", "visible")
    expect(seg(page, states.ids["hour"][0])).to_have_count(0)
    page.screenshot(path=ARTIFACTS / "console_time_travel.png", full_page=True)

    hour_commit = commit_adding(DS, states.ids["hour"])
    page.goto(page.console_url(f"/datasources/{DS}"))
    page.locator(f'table.commits tr[data-seq="{hour_commit.seq}"] a').first.click()
    expect(page.locator("h1")).to_contain_text(f"Commit #{hour_commit.seq}")
    after = page.locator(".commit-after")
    expect(after.locator(f'g.seg[data-segment-id="{states.ids["hour"][0]}"]')).to_have_attribute(
        "data-commit", "added"
    )
    page.screenshot(path=ARTIFACTS / "console_commit.png", full_page=True)
    assert page.problems == []


def test_submit_with_inline_error_then_cancel_with_confirmation(console_page, states):
    page = console_page
    page.goto(
        page.console_url(f"/tasks/new?template=kill&datasource={DS}&interval=2024-03-08/2024-03-09")
    )
    spec = json.loads(page.locator("textarea[name=spec]").input_value())
    assert spec == {"type": "kill", "dataSource": DS, "interval": "2024-03-08/2024-03-09"}
    page.fill("textarea[name=spec]", json.dumps({**spec, "interval": "last tuesday"}, indent=2))
    with page.expect_response(lambda r: r.url.endswith("/tasks/submit")) as refused:
        page.click("form.submit-form button[type=submit]")
    assert refused.value.status == 400  # the form again, not a redirect and a flash
    expect(page.locator(".spec-error")).to_have_attribute("data-field", "interval")
    expect(page.locator("#error-line")).to_contain_text('"interval"')
    page.screenshot(path=ARTIFACTS / "console_submit_error.png", full_page=True)
    assert not Task.objects.filter(type="kill").exists()

    page.fill("textarea[name=spec]", json.dumps(spec, indent=2))
    page.click("form.submit-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Task kill_")
    task = Task.objects.get(type="kill")
    expect(page.locator("#task-detail")).to_have_attribute("data-active", "1")
    dialogs = []
    page.once("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.click("button.cancel")
    expect(page.locator("[data-status]").first).to_have_attribute("data-status", "PENDING")
    page.once("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    page.click("button.cancel")
    expect(page.locator("#task-detail [data-status]").first).to_have_attribute(
        "data-status", "CANCELED"
    )
    assert len(dialogs) == 2 and task.id in dialogs[0]
    expect(page.locator("#task-detail")).to_have_attribute("data-active", "0")
    expect(page.locator("#task-detail[hx-trigger]")).to_have_count(0)  # no more polling
    page.screenshot(path=ARTIFACTS / "console_task_canceled.png", full_page=True)
    assert Task.objects.get(id=task.id).status == TaskStatus.CANCELED
    assert page.problems == []


def test_waits_for_graph_and_task_blockers(console_page, states):
    page = console_page
    page.goto(page.console_url("/locks"))
    edge = page.locator(f'svg.waits-for g.wait-edge[data-waiter="{states.waiter}"]')
    expect(edge).to_have_attribute("data-blocker", states.running)
    page.screenshot(path=ARTIFACTS / "console_waits_for.png", full_page=True)
    page.goto(page.console_url(f"/tasks/{states.waiter}"))
    expect(page.locator("ul.waiting-on li")).to_have_attribute("data-blocker", states.running)
    page.screenshot(path=ARTIFACTS / "console_task_waiting.png", full_page=True)
    assert page.problems == []


def test_mark_unused_selection_is_confirmed_and_logged(console_page, states, user):
    page = console_page
    (visible,) = states.ids["visible"]
    page.goto(page.console_url(f"/datasources/{DS}"))
    page.check(f'input[name=segment][value="{visible}"]')
    page.click("form.actions button[value=mark_unused]")
    expect(page.locator("h1")).to_contain_text("Confirm")
    expect(page.locator(".confirm-summary")).to_contain_text("1")
    page.screenshot(path=ARTIFACTS / "console_confirm.png", full_page=True)
    page.click("button.confirm")
    expect(page.locator(".messages")).to_contain_text("marked unused")
    entry = CommitLogEntry.objects.order_by("-seq").first()
    assert entry.kind == CommitKind.MARK_UNUSED and entry.removed == [visible]
    assert entry.user == user
    expect(page.locator(f'table.commits tr[data-seq="{entry.seq}"]')).to_contain_text(user.username)
    expect(seg(page, visible)).to_have_count(0)
    assert page.problems == []


def test_a_refused_action_shows_its_error_at_the_field(console_page, states):
    page = console_page
    page.goto(page.console_url(f"/datasources/{DS}"))
    page.fill("form.actions input[name=interval]", "last tuesday")
    with page.expect_response(lambda r: r.url.endswith(f"/datasources/{DS}/actions")) as refused:
        page.click("form.actions button[value=kill]")
    assert refused.value.status == 400  # the page again, not a redirect and a flash
    expect(page.locator(".action-error")).to_have_attribute("data-field", "interval")
    field = page.locator("form.actions input[name=interval]")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_value("last tuesday")  # what was typed is kept
    expect(page.locator("#action-error-interval")).to_contain_text("not an ISO interval")
    # Corrected, the same form goes on to the confirmation (its CSRF token still works).
    page.fill("form.actions input[name=interval]", "2024-03-08/2024-03-09")
    page.click("form.actions button[value=kill]")
    expect(page.locator("h1")).to_contain_text("Confirm")
    assert not Task.objects.filter(type="kill").exists()
    assert page.problems == []


def test_live_refresh_keeps_the_zoomed_window(console_page, states, publish):
    page = console_page
    window = "2024-03-01T00:00:00.000Z/2024-03-03T00:00:00.000Z"
    page.goto(page.console_url(f"/datasources/{DS}?interval={window}"))
    page.evaluate("window.__strataMarker = 'same document'")
    expect(page.locator("#datasource-timeline[hx-trigger]")).to_have_count(1)  # tasks are active
    added = publish(DS, "2024-03-01/2024-03-02", {"2024-03-01/2024-03-02": 1})
    # the poll brings the new segment in, for the same window, without a reload
    expect(seg(page, added.segment_ids[0])).to_have_attribute(
        "data-status", "visible", timeout=30_000
    )
    expect(seg(page, states.ids["visible"][0])).to_have_attribute("data-status", "overshadowed")
    expect(page.locator("svg.timeline-interval")).to_have_attribute(
        "data-window-end", "2024-03-03T00:00:00.000Z"
    )
    assert page.evaluate("window.__strataMarker") == "same document"
    # once nothing is active on the dataSource, the page no longer polls
    for task_id in (states.running, states.waiter):
        services.task_finish(task_id=task_id, status=TaskStatus.CANCELED, error="test over")
    page.reload()
    expect(page.locator("#datasource-timeline[hx-trigger]")).to_have_count(0)
    assert page.problems == []
