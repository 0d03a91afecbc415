"""Redis (the Celery broker) restarted while a task runs (issue 15, item 2).

The test starts a redis-server of its own (on a free port, in a tmp dir, no
persistence: a restart loses everything Redis held, the worst case) and points
a Celery worker, beat and this process's Celery app at it; it SIGKILLs that
server while a real ingestion runs on the worker (real Spark) and starts it
again on the same port. The shared Redis is never touched.

What must hold: the running task publishes exactly once or fails cleanly (and
then a resubmission publishes once); no lock is left; the worker reconnects and
the next tasks run; a task submitted while Redis is down is recorded (201) and
queued once Redis is back (the reaper queues again PENDING tasks whose message
the broker does not hold), instead of a 500 that leaves a PENDING row forever.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO, SESSION_QUEUE, _database_url, _redis_answers, _stop_process_group
from django.utils import timezone

from metastore import services
from metastore.models import CommitLogEntry, Segment, Task, TaskLock, TaskStatus
from workers.broker_queue import queued_task_ids
from workers.reaper import requeue_lost_tasks

START_TIMEOUT_S = 120
PHASE_TIMEOUT_S = 300
TASK_TIMEOUT_S = 400
# How long Redis stays down in the end-to-end test (STRATA_REDIS_OUTAGE_S to try others).
OUTAGE_S = float(os.environ.get("STRATA_REDIS_OUTAGE_S", "8"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A redis-server of the test's own, killed and restarted on the same port."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not on PATH")
        self.starts += 1
        log = open(self.root / f"redis-{self.starts}.log", "wb")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.root)]
            + ["--save", "", "--appendonly", "no", "--protected-mode", "no"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 30
        while not _redis_answers(self.url):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not start:\n{self.logs()}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no save; everything it held is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def logs(self) -> str:
        return "\n".join(
            p.read_text(errors="replace")[-2000:] for p in sorted(self.root.glob("redis-*.log"))
        )


@pytest.fixture
def private_redis():
    root = Path(tempfile.mkdtemp(prefix="strata-redis-restart-", dir="/tmp"))
    server = PrivateRedis(root)
    server.start()
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(root, ignore_errors=True)


def _drop_broker_connections(app) -> None:
    """Forget this process's broker connections. The app's pool also sits in
    kombu's global registry, keyed by broker URL, which hands the same pool out
    again: closing it without clearing that registry leaves every later test on
    that broker with "Acquire on closed pool"."""
    from kombu import pools

    pools.reset()  # closes every registered pool and forgets them
    app._pool = None
    with contextlib.suppress(AttributeError, KeyError):
        app.__dict__["amqp"]._producer_pool = None


@pytest.fixture
def app_on_private_redis(private_redis, redis_url):
    """This process's Celery app (what `POST /api/v1/tasks` sends with) on the
    private Redis for the test; back on the session's broker afterwards."""
    from console.celery import app

    saved = app.conf.broker_url
    _drop_broker_connections(app)
    app.conf.broker_url = private_redis.url
    try:
        yield app
    finally:
        _drop_broker_connections(app)
        app.conf.broker_url = saved


def queue_length(server: PrivateRedis) -> int:
    import redis

    client = redis.Redis.from_url(server.url)
    try:
        return client.llen(SESSION_QUEUE)
    finally:
        client.close()


# --- submitting while the broker is down ---------------------------------------------------


def test_a_task_submitted_while_redis_is_down_is_recorded_and_queued_when_it_is_back(
    transactional_db, app_on_private_redis, private_redis, api_client, inline_spec
):
    private_redis.kill()
    started = time.monotonic()
    response = api_client.post("/api/v1/tasks", inline_spec("redis_down"), format="json")
    answered_in = time.monotonic() - started
    # Before the fix: a 500 and a PENDING row that nothing would ever run.
    assert response.status_code == 201, (response.status_code, response.content[:500])
    task_id = response.json()["task"]
    assert Task.objects.get(id=task_id).status == TaskStatus.PENDING
    print(f"\nPOST /api/v1/tasks with Redis down answered 201 in {answered_in:.1f} s")

    # While Redis is down the reaper cannot look, so it sends nothing.
    assert requeue_lost_tasks(older_than=timezone.now()) == []

    private_redis.start()  # the same port, empty
    assert queue_length(private_redis) == 0
    assert requeue_lost_tasks(older_than=timezone.now()) == [task_id]
    assert queue_length(private_redis) == 1
    assert queued_task_ids() == {task_id}
    # Its message is in the queue now: the next sweep sends nothing twice.
    assert requeue_lost_tasks(older_than=timezone.now()) == []
    assert queue_length(private_redis) == 1


def test_a_queued_message_lost_with_redis_is_queued_again(
    transactional_db, app_on_private_redis, private_redis, inline_spec
):
    task = services.task_submit(spec=inline_spec("redis_lost"))
    assert queued_task_ids() == {task.id}
    young = services.task_submit(spec=inline_spec("redis_young"))
    assert queue_length(private_redis) == 2

    private_redis.kill()
    private_redis.start()  # without persistence: both messages are gone
    assert queue_length(private_redis) == 0

    # Only tasks older than the threshold are looked at (one just submitted may
    # not have reached the broker yet).
    assert requeue_lost_tasks(older_than=young.created_at) == [task.id]
    assert requeue_lost_tasks(older_than=timezone.now()) == [young.id]
    assert queued_task_ids() == {task.id, young.id}
    assert requeue_lost_tasks(older_than=timezone.now()) == []
    # A claimed task is never queued again.
    assert services.task_claim(task_id=task.id, worker="pytest")
    private_redis.kill()
    private_redis.start()
    assert requeue_lost_tasks(older_than=timezone.now()) == [young.id]


# --- Redis restarted while a real task runs on a real worker -----------------------------------


@pytest.fixture
def worker_and_beat_on_private_redis(
    transactional_db, app_on_private_redis, private_redis, strata_dirs, tmp_path
):
    """A worker (`-P threads -c 2`, as `make run` starts it) and beat on the
    private Redis, on the session's queue name (no other worker reads that Redis)."""
    from django.db import connection

    app = app_on_private_redis
    nodename = f"redis-restart-{os.getpid()}@{socket.gethostname()}"
    env = dict(os.environ)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(strata_dirs.env())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": _database_url(connection.settings_dict),
            "REDIS_URL": private_redis.url,
            "STRATA_QUEUE": SESSION_QUEUE,
            "SPARK_SHUFFLE_PARTITIONS": "2",
            # production defaults for the heartbeat and the reaper, stated
            "STRATA_HEARTBEAT_SECONDS": "1",
            "STRATA_HEARTBEAT_TIMEOUT": "20",
            "STRATA_REAPER_SECONDS": "5",
            # shorter than the default 30 s, to keep the test short
            "STRATA_REQUEUE_AFTER_SECONDS": "5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    procs, logs = {}, {}
    worker_argv = [sys.executable, "-m", "celery", "-A", "console", "worker", "-P", "threads"]
    worker_argv += ["-c", "2", "-Q", SESSION_QUEUE, "-n", nodename, "--loglevel", "INFO"]
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

    def tail(name: str) -> str:
        return (tmp_path / f"{name}.log").read_text(errors="replace")[-4000:]

    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not app.control.ping(destination=[nodename], timeout=1.0):
            if procs["worker"].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker did not start:\n{tail('worker')}")
        yield {"app": app, "nodename": nodename, "procs": procs, "tail": tail}
    finally:
        for task in Task.objects.filter(status__in=("PENDING", "RUNNING", "WAITING")):
            with contextlib.suppress(services.ServiceError):
                services.task_cancel(task_id=task.id)
        for proc in procs.values():
            _stop_process_group(proc, grace_s=30)
        for log in logs.values():
            log.close()


def wait_until(predicate, timeout: float, what: str, on_fail=lambda: "", poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}\n{on_fail()}")
        time.sleep(poll)


def ended(task_id: str):
    task = Task.objects.get(id=task_id)
    return task if task.status in ("SUCCESS", "FAILED", "CANCELED") else None


def deep_files(root: Path, datasource: str) -> list[str]:
    folder = root / datasource
    return sorted(str(p) for p in folder.rglob("*.parquet")) if folder.exists() else []


def assert_exactly_once_or_clean(task: Task, datasource: str, deep: Path) -> None:
    commits = list(CommitLogEntry.objects.filter(task_id=task.id, kind="publish"))
    segments = list(Segment.objects.filter(created_by_id=task.id))
    assert not TaskLock.objects.filter(task_id=task.id).exists()
    if task.status == TaskStatus.SUCCESS:
        assert len(commits) == 1, commits
        assert sorted(commits[0].added) == sorted(s.id for s in segments)
        assert sorted(s.location for s in segments) == deep_files(deep, datasource)
    else:
        assert task.status == TaskStatus.FAILED, (task.status, task.error)
        assert commits == [] and segments == []
        assert deep_files(deep, datasource) == []


@pytest.mark.e2e
@pytest.mark.spark
def test_redis_restarted_while_a_task_runs(
    worker_and_beat_on_private_redis,
    private_redis,
    api_client,
    inline_spec,
    strata_dirs,
):
    from test_infra_faults import many_days_spec

    env = worker_and_beat_on_private_redis
    app, nodename, tail = env["app"], env["nodename"], env["tail"]
    spec = many_days_spec("redis_restart", days=60)
    running = services.task_submit(spec=spec)
    # Killed as soon as the worker claimed it: Spark's start, the read, the
    # locking and the segments' writing all happen during and after the outage.
    wait_until(
        lambda: Task.objects.get(id=running.id).status == TaskStatus.RUNNING,
        PHASE_TIMEOUT_S,
        "the task to run",
        lambda: tail("worker"),
    )

    private_redis.kill()
    killed_at = time.monotonic()
    phase_at_kill = Task.objects.get(id=running.id).phase
    # Submitted while Redis is down: recorded, not a 500.
    response = api_client.post("/api/v1/tasks", inline_spec("redis_during"), format="json")
    assert response.status_code == 201, (response.status_code, response.content[:500])
    during = response.json()["task"]
    beat_before = Task.objects.get(id=running.id).heartbeat_at
    time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - killed_at)))
    # The running task kept heartbeating to the database all along.
    heartbeat = Task.objects.get(id=running.id)
    if heartbeat.status == TaskStatus.RUNNING:
        assert heartbeat.heartbeat_at > beat_before
    status_at_restart = Task.objects.get(id=running.id).status
    private_redis.start()
    outage = time.monotonic() - killed_at
    restarted_at = time.monotonic()
    restarted_wall = timezone.now()

    wait_until(
        lambda: app.control.ping(destination=[nodename], timeout=1.0),
        120,
        "the worker to reconnect",
        lambda: tail("worker"),
    )
    reconnected = time.monotonic() - restarted_at
    assert env["procs"]["worker"].poll() is None and env["procs"]["beat"].poll() is None
    # Redis came back while the task still ran (else this test tested less).
    assert status_at_restart == TaskStatus.RUNNING, status_at_restart

    first = wait_until(
        lambda: ended(running.id), TASK_TIMEOUT_S, "the running task to end", lambda: tail("worker")
    )
    assert_exactly_once_or_clean(first, "redis_restart", strata_dirs.deep)
    if first.status == TaskStatus.FAILED:  # it can be resubmitted, and then publishes once
        again = services.task_submit(spec=spec)
        again = wait_until(
            lambda: ended(again.id), TASK_TIMEOUT_S, "the resubmission", lambda: tail("worker")
        )
        assert again.status == TaskStatus.SUCCESS, again.error
        assert_exactly_once_or_clean(again, "redis_restart", strata_dirs.deep)
    (commit,) = CommitLogEntry.objects.filter(task__datasource="redis_restart", kind="publish")
    published = Segment.objects.filter(datasource__name="redis_restart", used=True)
    assert sorted(published.values_list("id", flat=True)) == sorted(commit.added)

    # The task submitted during the outage is queued by the reaper and runs.
    late = wait_until(
        lambda: ended(during),
        TASK_TIMEOUT_S,
        "the task submitted during the outage",
        lambda: tail("beat") + tail("worker"),
    )
    assert late.status == TaskStatus.SUCCESS, late.error
    late_started = (late.started_at - restarted_wall).total_seconds()
    # And the next task runs.
    response = api_client.post("/api/v1/tasks", inline_spec("redis_after"), format="json")
    assert response.status_code == 201
    after = wait_until(lambda: ended(response.json()["task"]), TASK_TIMEOUT_S, "the next task")
    assert after.status == TaskStatus.SUCCESS, after.error
    for ds in ("redis_during", "redis_after"):
        assert CommitLogEntry.objects.filter(task__datasource=ds, kind="publish").count() == 1
    assert not TaskLock.objects.exists()
    # The worker survived the late acknowledgement of the task that ran through
    # the outage (kombu's detached channel; see console/broker.py).
    assert env["procs"]["worker"].poll() is None
    print(
        f"\nRedis down {outage:.1f} s (SIGKILL in phase {phase_at_kill!r}); worker answered a "
        f"ping {reconnected:.1f} s after the restart; the running task ended {first.status} "
        f"({first.error or 'no error'}); the task submitted during the outage started "
        f"{late_started:.1f} s after the restart"
    )
