"""Task slots (STRATA_TASK_SLOTS): who holds each slot, and which tasks are PENDING
because none is free (not WAITING for a lock), in the selector, the REST API and
the console; the run command starts that many slots. The end-to-end check on a
real two-slot worker is `test_third_task_stays_pending_while_two_hold_the_slots`
in test_scenarios_e2e.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from console.management.commands.strata_run import worker_argv
from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import TaskStatus

pytestmark = pytest.mark.django_db

DAY = Interval.parse("2024-01-01/2024-01-02")


@pytest.fixture
def off_queue(monkeypatch):
    monkeypatch.setattr(services.tasks, "_enqueue", lambda task_id: None)


@pytest.fixture
def busy(claimed_task, inline_spec, off_queue):
    """A RUNNING task holding a lock, a RUNNING one WAITING for that lock, and two
    PENDING tasks: (running, waiting, [pending...])."""
    running = claimed_task("wiki")
    services.lock_acquire(task=running, interval=DAY)
    waiting = claimed_task("wiki")
    assert services.lock_try_acquire(task=waiting, interval=DAY) is None
    waiting.refresh_from_db()
    assert waiting.status == TaskStatus.WAITING
    pending = [services.task_submit(spec=inline_spec("wiki")) for _ in range(2)]
    return running, waiting, pending


def test_running_and_waiting_tasks_hold_the_slots_and_pending_ones_wait_for_one(busy, settings):
    settings.STRATA_TASK_SLOTS = 2
    running, waiting, pending = busy

    slots = selectors.task_slots()

    assert slots.capacity == 2 and slots.busy == 2 and slots.free == 0
    assert [(s.number, s.task.id, s.task.status) for s in slots.slots] == [
        (1, running.id, TaskStatus.RUNNING),
        (2, waiting.id, TaskStatus.WAITING),
    ]
    assert [t.id for t in slots.pending] == [t.id for t in pending]
    assert slots.pending_count == 2 and slots.pending_for_slot


def test_a_free_slot_means_pending_tasks_are_about_to_start(busy, settings):
    settings.STRATA_TASK_SLOTS = 3
    slots = selectors.task_slots()
    assert slots.busy == 2 and slots.free == 1
    assert slots.slots[2].task is None
    assert slots.pending_count == 2 and not slots.pending_for_slot


def test_more_tasks_running_than_configured_slots_are_all_shown(busy, settings):
    settings.STRATA_TASK_SLOTS = 1  # e.g. a second worker runs elsewhere
    slots = selectors.task_slots()
    assert slots.capacity == 1
    assert len(slots.slots) == 2 and slots.free == 0


def test_no_task_leaves_every_slot_free(settings):
    settings.STRATA_TASK_SLOTS = 2
    slots = selectors.task_slots()
    assert [s.task for s in slots.slots] == [None, None]
    assert slots.pending == [] and slots.pending_count == 0 and not slots.pending_for_slot


def test_pending_list_is_capped_but_counted(busy, settings):
    settings.STRATA_TASK_SLOTS = 2
    slots = selectors.task_slots(pending_limit=1)
    assert len(slots.pending) == 1 and slots.pending_count == 2


def test_task_slots_reads_in_two_queries(busy, django_assert_max_num_queries):
    with django_assert_max_num_queries(2):
        slots = selectors.task_slots()
        _ = [(s.task.id, s.task.status, s.task.phase) for s in slots.slots if s.task]
        _ = [(t.id, t.priority) for t in slots.pending]


def test_api_lists_slots_holders_and_tasks_pending_for_a_slot(busy, api_client, settings):
    settings.STRATA_TASK_SLOTS = 2
    running, waiting, pending = busy

    body = api_client.get("/api/v1/slots").json()

    assert body["capacity"] == 2 and body["busy"] == 2 and body["free"] == 0
    assert [(s["slot"], s["task"], s["status"]) for s in body["slots"]] == [
        (1, running.id, "RUNNING"),
        (2, waiting.id, "WAITING"),
    ]
    assert body["slots"][1]["waiting_on"][0]["task"] == running.id
    assert [p["task"] for p in body["pending"]] == [t.id for t in pending]
    assert body["pending_count"] == 2
    assert body["pending_reason"] == "no free task slot"


def test_api_free_slot_and_no_pending(api_client, settings):
    settings.STRATA_TASK_SLOTS = 2
    body = api_client.get("/api/v1/slots").json()
    assert body["slots"] == [
        {"slot": n, "task": None, "status": None, "type": None, "datasource": None,
         "phase": None, "worker": None, "started_at": None, "waiting_on": None}
        for n in (1, 2)
    ]  # fmt: skip
    assert body["pending"] == [] and body["pending_reason"] is None


def test_api_slots_needs_authentication(client):
    assert client.get("/api/v1/slots").status_code in (401, 403)


def test_console_locks_page_includes_the_slots_fragment(client, user):
    client.force_login(user)
    page = client.get("/locks").content.decode()
    assert 'id="task-slots"' in page and 'hx-get="/slots"' in page


def test_console_slots_fragment_shows_holders_and_pending(busy, client, user, settings):
    settings.STRATA_TASK_SLOTS = 2
    running, waiting, pending = busy
    client.force_login(user)

    html = client.get("/slots", HTTP_HX_REQUEST="true").content.decode()

    assert "2 of 2 slots busy" in html
    assert running.id in html and waiting.id in html
    assert "for a lock" in html  # the WAITING holder waits for a lock, not a slot
    assert "Pending: no free task slot" in html
    assert all(t.id in html for t in pending)


def test_run_command_starts_one_worker_thread_per_slot():
    argv = worker_argv("python", queue="strata", slots=3)
    joined = " ".join(argv)
    assert "celery -A console worker -P threads -c 3 -Q strata" in joined


def _settings_value(env: dict) -> subprocess.CompletedProcess:
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'console.settings'; "
        "from django.conf import settings; print(settings.STRATA_TASK_SLOTS)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_task_slots_default_to_two_and_refuse_zero():
    env = {k: v for k, v in os.environ.items() if k != "STRATA_TASK_SLOTS"}
    assert _settings_value(env).stdout.strip() == "2"
    bad = _settings_value({**env, "STRATA_TASK_SLOTS": "0"})
    assert bad.returncode != 0 and "STRATA_TASK_SLOTS must be 1 or more" in bad.stderr
