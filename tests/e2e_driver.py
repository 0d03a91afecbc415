"""End-to-end scenario driver: real REST submission -> Celery on Redis -> a real
worker with two task slots (`workers/runner.py`) -> Spark -> publish on PostgreSQL.

Interleavings are made deterministic from the test's side only, with no hook in
the product: the test holds the dataSource's lock-box lock (the same
transaction-level advisory lock every lock decision, allocation and publish of
that dataSource takes, `metastore.lockbox_sql._locked`) on its own database
connection, as a session-level advisory lock. While the test holds this *gate*,
every task of the dataSource stops at its next lock-box step and queues on it;
the test sees how many wait (`pg_locks`). PostgreSQL grants waiters of a lock in
the order they queued, so submitting b only once a waits at the gate makes a's
step come before b's when the gate opens. Failures are real: a Spark job that
raises (a malformed row with maxParseExceptions 0), a cancel through the API.

What a scenario asserts is the exact multiset of row ids visible through the
dataSource's timeline, each segment's Parquet file read only where the timeline
shows it (partial overshadowing), so a lost or duplicated row fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import pyarrow.parquet as pq
import pytest
from conftest import (
    REPO,
    TASK_TIMEOUT_S,
    WORKER_START_TIMEOUT_S,
    Worker,
    _await_task,
    _database_url,
    _stop_process_group,
)

# The lock modes of SPEC §8's table, as task contexts.
MODES = {
    "TC": {},
    "SEG": {"forceTimeChunkLock": False},
    "CONC": {"useConcurrentLocks": True},
}
DAY = "2013-01-01/2013-01-02"
SLOTS = 2


# --- a worker with task slots ------------------------------------------------------------


@pytest.fixture(scope="module", name="slots_worker")
def _slots_worker(django_db_setup, redis_url, strata_dirs, tmp_path_factory) -> Iterator[Worker]:
    """A real `celery -A console worker` laid out as `make run` lays it out for
    STRATA_TASK_SLOTS=2, on its own queue (the session's one-slot worker, if it
    runs, never sees these tasks). Tasks this process submits go to that queue
    while the module runs."""
    yield from slots_worker_process(redis_url, strata_dirs, tmp_path_factory, slots=SLOTS)


def slots_worker_process(
    redis_url, strata_dirs, tmp_path_factory, *, slots: int, extra_env: dict | None = None
) -> Iterator[Worker]:
    """The body of the `slots_worker` fixture, for a worker of `slots` task slots
    (a module may override the fixture with another count, or add settings)."""
    from django.db import connection

    from console.celery import app

    if connection.vendor != "postgresql":
        pytest.skip("the scenario driver's gate is a PostgreSQL advisory lock")
    queue = f"strata-slots-{uuid.uuid4().hex[:12]}"
    nodename = f"{queue}@{socket.gethostname()}"
    log_path = tmp_path_factory.mktemp("slots-worker") / "worker.log"
    env = dict(os.environ)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(strata_dirs.env())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": _database_url(connection.settings_dict),
            "REDIS_URL": redis_url,
            "STRATA_QUEUE": queue,
            "STRATA_TASK_SLOTS": str(slots),
            "SPARK_SHUFFLE_PARTITIONS": "2",
            "STRATA_HEARTBEAT_SECONDS": "0.5",
            "PYTHONUNBUFFERED": "1",
            **(extra_env or {}),
        }
    )
    from console.management.commands.strata_run import worker_argv

    # The run command's own worker command line, on this module's queue and node name.
    argv = worker_argv(sys.executable, queue=queue, slots=slots)
    argv[argv.index("-n") + 1] = nodename
    argv += ["--without-gossip", "--without-mingle"]
    log = open(log_path, "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    worker = Worker(proc, log_path, nodename, queue)
    saved_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue  # read by Celery's router at each send
    deadline = time.monotonic() + WORKER_START_TIMEOUT_S
    try:
        while True:
            if not worker.alive:
                pytest.fail(f"the slots worker exited ({proc.returncode}):\n{worker.tail()}")
            if app.control.ping(destination=[nodename], timeout=1.0):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the slots worker did not answer a ping:\n{worker.tail()}")
        yield worker
    finally:
        app.conf.task_default_queue = saved_queue
        _stop_process_group(proc)
        log.close()


@pytest.fixture(name="slot_worker")
def _slot_worker(slots_worker, transactional_db) -> Iterator[Worker]:
    """The module's worker for one test; afterwards nothing of the test runs on it."""
    yield slots_worker
    from metastore import services
    from metastore.models import ACTIVE_STATUSES, Task

    leftover = list(Task.objects.filter(status__in=ACTIVE_STATUSES).values_list("id", flat=True))
    for task_id in leftover:
        with contextlib.suppress(services.ServiceError):
            services.task_cancel(task_id=task_id)
    for task_id in leftover:
        _await_task(task_id, slots_worker, timeout=TASK_TIMEOUT_S, raise_on_timeout=False)


# --- the gate: the dataSource's lock-box lock, held by the test ---------------------------


class Gate:
    """The lock-box advisory lock of one dataSource, held from the test's own
    PostgreSQL connection (session-level, so no transaction stays open)."""

    def __init__(self, datasource: str) -> None:
        import psycopg
        from django.db import connection

        from metastore import lockbox_sql
        from metastore.models import DataSource

        if connection.vendor != "postgresql":
            pytest.skip("the scenario driver's gate is a PostgreSQL advisory lock")
        self.key = (lockbox_sql.ADVISORY_CLASS, DataSource.objects.get(name=datasource).id)
        self.key = (self.key[0], self.key[1] % 2147483647)
        self.conn = psycopg.connect(_database_url(connection.settings_dict), autocommit=True)
        self.held = False

    def close(self) -> None:
        self.open()
        self.conn.close()

    def hold(self) -> None:
        """Take the gate (waits for a task's step in progress to commit)."""
        if not self.held:
            self.conn.execute("SELECT pg_advisory_lock(%s::int, %s::int)", self.key)
            self.held = True

    def open(self) -> None:
        if self.held:
            self.conn.execute("SELECT pg_advisory_unlock(%s::int, %s::int)", self.key)
            self.held = False

    def waiters(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = %s::oid AND objid = %s::oid AND objsubid = 2 "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            self.key,
        ).fetchone()
        return int(row[0])


# --- specs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """Input rows of one task: ids and timestamps (every row has an id)."""

    ids: tuple[str, ...]
    times: tuple[str, ...]

    @classmethod
    def at_hours(cls, prefix: str, hours: Iterable[int], day: str = "2013-01-01") -> Rows:
        hours = list(hours)
        return cls(
            tuple(f"{prefix}-{h:02d}" for h in hours),
            tuple(f"{day}T{h:02d}:30:00Z" for h in hours),
        )

    @classmethod
    def at(cls, prefix: str, points: Iterable[tuple[str, int]]) -> Rows:
        """Rows at (day, hour) points, over several days: ids `<prefix>-<day>T<hh>`."""
        points = sorted(set(points))
        return cls(
            tuple(f"{prefix}-{d}T{h:02d}" for d, h in points),
            tuple(f"{d}T{h:02d}:30:00Z" for d, h in points),
        )

    def jsonl(self, *, malformed: bool = False) -> str:
        lines = [json.dumps({"ts": t, "id": i}) for i, t in zip(self.ids, self.times, strict=True)]
        if malformed:  # one row Spark cannot parse: with maxParseExceptions 0 the job raises
            lines.insert(len(lines) // 2, '{"ts": "2013-01-01T06:00:00Z", "id": ')
        return "\n".join(lines) + "\n"


def task_spec(
    datasource: str,
    rows: Rows,
    *,
    mode: str,
    append: bool,
    intervals: list[str] | None = None,
    segment_granularity: str = "DAY",
    drop_existing: bool = False,
    malformed: bool = False,
    priority: int | None = None,
    max_rows_per_segment: int | None = None,
) -> dict:
    """An index_parallel spec over inline JSON rows {ts, id}: an append
    (`appendToExisting: true`) or a replace, in lock mode `mode`."""
    context = dict(MODES[mode])
    if priority is not None:
        context["priority"] = priority
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["id"]},
                "metricsSpec": [],
                "granularitySpec": {
                    "segmentGranularity": segment_granularity,
                    "queryGranularity": "NONE",
                    "rollup": False,
                    "intervals": intervals or [DAY],
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": rows.jsonl(malformed=malformed)},
                "inputFormat": {"type": "json"},
                "appendToExisting": append,
                "dropExisting": drop_existing,
            },
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": {"type": "dynamic"}
                | ({"maxRowsPerSegment": max_rows_per_segment} if max_rows_per_segment else {}),
                "maxParseExceptions": 0,
            },
        },
        "context": context,
    }


def compaction_spec(
    datasource: str,
    *,
    mode: str,
    interval: str = DAY,
    segments: list[str] | None = None,
    priority: int | None = None,
) -> dict:
    """A `compact` task spec (SPEC §6) of `interval`, or of exactly `segments`,
    in lock mode `mode`: what rows 3, 4, 5, 10 and 12 of SPEC §8 submit with
    `Scenario.submit_spec` once the compact task runs."""
    context = dict(MODES[mode])
    if priority is not None:
        context["priority"] = priority
    input_spec = (
        {"type": "segments", "segments": segments}
        if segments is not None
        else {"type": "interval", "interval": interval}
    )
    return {
        "type": "compact",
        "dataSource": datasource,
        "ioConfig": {"type": "compact", "inputSpec": input_spec},
        "context": context,
    }


# --- the driver ----------------------------------------------------------------------------


@dataclass
class Scenario:
    """One dataSource's scenario, driven through the REST API and the gate."""

    api: object
    worker: Worker
    datasource: str
    mode: str
    gate: Gate | None = None
    submitted: list[str] = field(default_factory=list)
    seed_ids: list[str] = field(default_factory=list)  # visible before the scenario's tasks

    # -- tasks through the API
    def submit(self, rows: Rows, *, append: bool = True, **kw) -> str:
        """Submit an append (or, with append=False, a replace) of `rows`."""
        return self.submit_spec(
            task_spec(self.datasource, rows, mode=self.mode, append=append, **kw)
        )

    def submit_spec(self, spec: dict) -> str:
        """Submit any task spec (e.g. `compaction_spec(...)`) through the API."""
        response = self.api.post("/api/v1/tasks", spec, format="json")
        assert response.status_code == 201, response.content
        task_id = response.json()["task"]
        self.submitted.append(task_id)
        return task_id

    def cancel(self, task_id: str) -> None:
        response = self.api.post(f"/api/v1/tasks/{task_id}/cancel")
        assert response.status_code == 202, response.content

    def task(self, task_id: str) -> dict:
        response = self.api.get(f"/api/v1/tasks/{task_id}")
        assert response.status_code == 200, response.content
        return response.json()

    def wait(self, task_id: str, *statuses: str) -> dict:
        _await_task(task_id, self.worker, timeout=TASK_TIMEOUT_S, statuses=statuses or None)
        return self.task(task_id)

    def succeed(self, rows: Rows, **kw) -> str:
        """Run a task alone to SUCCESS (the seed s1, or a serial step)."""
        task_id = self.submit(rows, **kw)
        detail = self.wait(task_id)
        assert detail["status"] == "SUCCESS", detail["error"]
        return task_id

    # -- the gate
    def hold_gate(self) -> None:
        if self.gate is None:
            self.gate = Gate(self.datasource)
        self.gate.hold()

    def open_gate(self) -> None:
        assert self.gate is not None
        self.gate.open()

    def until(self, what: str, condition, timeout: float = TASK_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if not self.worker.alive:
                pytest.fail(f"the worker died while waiting until {what}:\n{self.worker.tail()}")
            if time.monotonic() > deadline:
                states = {t: self.task(t)["status"] for t in self.submitted}
                pytest.fail(f"timed out waiting until {what}; tasks {states}")
            time.sleep(0.05)

    def at_gate(self, *task_ids: str) -> None:
        """Wait until each of `task_ids` that still runs waits at the gate. A task
        has one thread, so it is one waiter at most: as many waiters as running
        tasks means each one waits (list every running task of the dataSource)."""

        def ready() -> bool:
            from metastore.models import FINAL_STATUSES, Task

            ended = Task.objects.filter(id__in=task_ids, status__in=FINAL_STATUSES).count()
            return self.gate.waiters() == len(task_ids) - ended

        self.until(f"{task_ids} wait at the gate", ready)

    def status_reached(self, task_id: str, status: str) -> None:
        self.until(f"{task_id} is {status}", lambda: self.task(task_id)["status"] == status)

    def close(self) -> None:
        if self.gate is not None:
            self.gate.close()

    # -- what is visible
    def visible_ids(self) -> Counter:
        """Row ids visible through the timeline, counted (a duplicate counts twice)."""
        return Counter(row_id for row_id, _ in self.visible_rows())

    def visible_segments(self) -> dict[str, list]:
        """{row id: [the visible Segment it is read from, ...]}."""
        from metastore.models import Segment

        rows = self.visible_rows()
        segments = Segment.objects.in_bulk({seg_id for _, seg_id in rows})
        out: dict[str, list] = {}
        for row_id, seg_id in rows:
            out.setdefault(row_id, []).append(segments[seg_id])
        return out

    def visible_rows(self) -> list[tuple[str, str]]:
        """(row id, segment id) of every row visible through the timeline: each
        segment's Parquet file read only where the timeline shows that segment."""
        from metastore import selectors
        from metastore.intervals import Interval
        from metastore.models import Segment

        selectors.timeline_caches_clear()
        timeline = selectors.timeline_for(datasource=self.datasource)
        pieces = [(p, ref) for p, ref in timeline.lookup(Interval.parse("1000-01-01/3000-01-01"))]
        locations = dict(
            Segment.objects.filter(id__in={ref.id for _, ref in pieces}).values_list(
                "id", "location"
            )
        )
        seen: list[tuple[str, str]] = []
        for piece, ref in pieces:
            if ref.tombstone:
                continue
            for row in pq.read_table(locations[ref.id], columns=["__time", "id"]).to_pylist():
                t = row["__time"]
                if t.tzinfo is None:
                    from datetime import UTC

                    t = t.replace(tzinfo=UTC)
                if piece.start <= t < piece.end:
                    seen.append((row["id"], ref.id))
        return seen

    def assert_visible(self, *groups: Rows | Iterable[str]) -> None:
        expected = Counter()
        for group in groups:
            expected.update(group.ids if isinstance(group, Rows) else group)
        assert self.visible_ids() == expected

    def assert_clean_failure(self, task_id: str, status: str) -> dict:
        """A failed task: the status and a reason, no segment, no lock, no intermediary."""
        from django.conf import settings

        from metastore.models import Segment, TaskLock

        detail = self.wait(task_id)
        assert detail["status"] == status, detail
        assert detail["error"], "a failed task says why"
        assert not Segment.objects.filter(created_by_id=task_id).exists()
        assert not TaskLock.objects.filter(task_id=task_id).exists()
        assert not (settings.STRATA_INTERMEDIARY_DIR / task_id).exists()
        return detail
