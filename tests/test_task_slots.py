"""Task slots: the live workers' capacity (each registers its slots with its
heartbeat, `services.worker_heartbeat`), who holds each slot, and which tasks are
PENDING because none is free (not WAITING for a lock), in the selector, the REST
API and the console; the run command starts STRATA_TASK_SLOTS slots. The
end-to-end check on a real two-slot worker, which registers itself, is
`test_third_task_stays_pending_while_two_hold_the_slots` in test_scenarios_e2e.py."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from conftest import TEST_WORKER

from console.management.commands.strata_run import worker_argv
from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import TaskStatus, Worker

pytestmark = pytest.mark.django_db

DAY = Interval.parse("2024-01-01/2024-01-02")


@pytest.fixture
def workers():
    """`workers(*capacities)`: live workers registered through their heartbeat; the
    first one runs the tasks the tests claim themselves (`worker` "pytest")."""

    def register(*capacities: int) -> list[Worker]:
        return [
            services.worker_heartbeat(
                name=f"host{n}:10{n}",
                capacity=capacity,
                nodename=f"strata@host{n}",
                queues=["strata"],
                processes=[TEST_WORKER] if n == 0 else [],
            )
            for n, capacity in enumerate(capacities)
        ]

    return register


@pytest.fixture
def busy(claimed_task, inline_spec, no_enqueue):
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


def test_running_and_waiting_tasks_hold_the_slots_and_pending_ones_wait_for_one(busy, workers):
    workers(2)
    running, waiting, pending = busy

    slots = selectors.task_slots()

    assert slots.capacity == 2 and slots.busy == 2 and slots.free == 0
    assert [(s.number, s.task.id, s.task.status) for s in slots.slots] == [
        (1, running.id, TaskStatus.RUNNING),
        (2, waiting.id, TaskStatus.WAITING),
    ]
    assert [t.id for t in slots.pending] == [t.id for t in pending]
    assert slots.pending_count == 2 and slots.pending_for_slot


def test_a_free_slot_means_pending_tasks_are_about_to_start(busy, workers):
    workers(3)
    slots = selectors.task_slots()
    assert slots.busy == 2 and slots.free == 1
    assert slots.slots[2].task is None
    assert slots.pending_count == 2 and not slots.pending_for_slot


def test_more_tasks_running_than_live_slots_are_all_shown(busy, workers):
    workers(1)  # e.g. a lost worker's task, not reaped yet
    slots = selectors.task_slots()
    assert slots.capacity == 1
    assert len(slots.slots) == 2 and slots.free == 0


def test_no_task_leaves_every_slot_free(workers):
    workers(2)
    slots = selectors.task_slots()
    assert [s.task for s in slots.slots] == [None, None]
    assert slots.pending == [] and slots.pending_count == 0 and not slots.pending_for_slot


def test_pending_list_is_capped_but_counted(busy, workers):
    workers(2)
    slots = selectors.task_slots(pending_limit=1)
    assert len(slots.pending) == 1 and slots.pending_count == 2


def test_task_slots_reads_in_three_queries(busy, workers, django_assert_max_num_queries):
    workers(2, 1)
    with django_assert_max_num_queries(3):
        slots = selectors.task_slots()
        _ = [(s.task.id, s.task.status, s.task.phase) for s in slots.slots if s.task]
        _ = [(t.id, t.priority) for t in slots.pending]


def test_api_lists_slots_holders_and_tasks_pending_for_a_slot(busy, api_client, workers):
    workers(2)
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


def test_api_free_slot_and_no_pending(api_client, workers):
    workers(2)
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


def test_console_slots_fragment_shows_holders_and_pending(busy, client, user, workers):
    workers(2)
    running, waiting, pending = busy
    client.force_login(user)

    html = client.get("/slots", HTTP_HX_REQUEST="true").content.decode()

    assert "2 of 2 slots busy, on 1 live worker" in html
    assert "strata@host0" in html
    assert running.id in html and waiting.id in html
    assert "for a lock" in html  # the WAITING holder waits for a lock, not a slot
    assert "Pending: no free task slot" in html
    assert all(t.id in html for t in pending)


def test_capacity_is_the_live_workers_slots_not_the_setting(busy, workers, settings):
    settings.STRATA_TASK_SLOTS = 7  # what the run command starts; the view ignores it
    running, waiting, _ = busy
    first, second = workers(2, 3)

    slots = selectors.task_slots()

    assert slots.capacity == 5 and len(slots.slots) == 5 and slots.free == 3
    assert [(w.name, w.capacity, w.tasks) for w in slots.workers] == [
        (first.name, 2, [running.id, waiting.id]),
        (second.name, 3, []),
    ]
    assert [(w.busy, w.free) for w in slots.workers] == [(2, 0), (0, 3)]
    assert slots.pending_count == 2 and not slots.pending_for_slot


def test_a_worker_silent_past_the_heartbeat_timeout_has_no_slots(busy, workers, settings):
    settings.STRATA_HEARTBEAT_TIMEOUT = 20
    first, second = workers(2, 3)
    Worker.objects.filter(name=second.name).update(
        heartbeat_at=second.heartbeat_at - timedelta(seconds=21)
    )
    slots = selectors.task_slots()
    assert [w.name for w in slots.workers] == [first.name]
    assert slots.capacity == 2 and slots.pending_for_slot


def test_a_stopped_worker_takes_its_slots_away_at_once(workers):
    first, second = workers(2, 3)
    services.worker_stopped(name=second.name)
    assert selectors.task_slots().capacity == 2
    # A heartbeat updates the registration (capacity may change on restart).
    services.worker_heartbeat(name=first.name, capacity=4)
    assert selectors.task_slots().capacity == 4
    with pytest.raises(ValueError, match="1 or more task slots"):
        services.worker_heartbeat(name=first.name, capacity=0)


def test_no_live_worker_means_no_slot_and_says_so(busy, api_client, client, user):
    running, waiting, pending = busy
    body = api_client.get("/api/v1/slots").json()
    assert body["capacity"] == 0 and body["workers"] == []
    assert [s["task"] for s in body["slots"]] == [running.id, waiting.id]  # still shown
    assert body["pending_reason"] == "no live worker"
    client.force_login(user)
    html = client.get("/slots", HTTP_HX_REQUEST="true").content.decode()
    assert "No live worker: no task can start." in html and "Pending: no live worker" in html


def test_api_lists_the_live_workers(busy, api_client, workers):
    running, waiting, _ = busy
    first, _second = workers(2, 1)
    body = api_client.get("/api/v1/slots").json()
    assert [(w["name"], w["nodename"], w["queues"], w["capacity"], w["busy"], w["free"])
            for w in body["workers"]] == [
        (first.name, "strata@host0", ["strata"], 2, 2, 0),
        ("host1:101", "strata@host1", ["strata"], 1, 0, 1),
    ]  # fmt: skip
    assert body["workers"][0]["tasks"] == [running.id, waiting.id]
    assert body["capacity"] == 3 and body["free"] == 1


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


@pytest.mark.e2e
def test_a_real_worker_registers_its_slots_and_removes_them_when_it_stops(
    transactional_db, redis_url, strata_dirs, tmp_path, api_client
):
    """The run command's worker command line with 3 slots: its own heartbeat
    registers 3 slots, its queue and itself; a warm shutdown removes them at once."""
    import socket
    import time
    import uuid

    from conftest import WORKER_START_TIMEOUT_S, _database_url, _stop_process_group
    from django.db import connection

    queue = f"strata-slots-reg-{uuid.uuid4().hex[:12]}"
    nodename = f"{queue}@{socket.gethostname()}"
    argv = worker_argv(sys.executable, queue=queue, slots=3)
    argv[argv.index("-n") + 1] = nodename
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(strata_dirs.env())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": _database_url(connection.settings_dict),
            "REDIS_URL": redis_url,
            "STRATA_TASK_SLOTS": "1",  # what the worker runs with is -c 3: that is what counts
            "STRATA_HEARTBEAT_SECONDS": "0.5",
        }
    )
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*argv, "--without-gossip", "--without-mingle"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + WORKER_START_TIMEOUT_S
            while not Worker.objects.filter(nodename=nodename).exists():
                assert proc.poll() is None, log_path.read_text(errors="replace")
                assert time.monotonic() < deadline, log_path.read_text(errors="replace")
                time.sleep(0.2)
            registered = Worker.objects.get(nodename=nodename)
            assert (registered.name, registered.capacity, registered.queues) == (
                f"{socket.gethostname()}:{proc.pid}",
                3,
                [queue],
            )
            body = api_client.get("/api/v1/slots").json()
            [shown] = [w for w in body["workers"] if w["nodename"] == nodename]
            assert (shown["capacity"], shown["busy"], shown["free"]) == (3, 0, 3)
        finally:
            _stop_process_group(proc)
    assert not Worker.objects.filter(nodename=nodename).exists()
