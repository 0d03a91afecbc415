"""Task isolation (issue 23): every task stops within 10 s of the request in every
phase, and a task whose driver dies fails alone.

A real two-slot worker (`make run`'s command line) runs each task in a slot
process of its own with its own Spark driver (`workers.slots`). The tests stop
tasks through Druid's `POST /druid/indexer/v1/task/{id}/shutdown` while they wait
for a lock, read their input, shuffle, plan a query that Catalyst takes minutes
to optimize, and publish, and assert the time to the final status measured from
the request, the freed slot, no lock and no file left behind. A task whose driver
runs out of memory fails with that reason while the other slot's task succeeds;
a SIGKILL of a task's process in the middle of its publish publishes nothing.
"""

from __future__ import annotations

import csv
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from conftest import _await_task
from e2e_driver import Gate, _slot_worker, slots_worker_process  # noqa: F401

from metastore import services
from metastore.intervals import Interval
from metastore.models import (
    CommitLogEntry,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
)
from metastore.task_logs import task_log_path

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

STOP_LIMIT_S = 10.0  # the requirement, measured from the request
DRIVER_MEMORY = "512m"  # each task's driver heap in this module's worker
START_S = 600
PLAN_DEPTH = 11  # levels of nested max(): see nested_max  # a fresh driver JVM on a loaded 2-core machine can take minutes


@pytest.fixture(scope="module", name="slots_worker")
def _isolated_worker(django_db_setup, redis_url, strata_dirs, tmp_path_factory):
    yield from slots_worker_process(
        redis_url,
        strata_dirs,
        tmp_path_factory,
        slots=2,
        extra_env={
            "STRATA_TASK_ISOLATION": "process",
            "STRATA_TASK_DRIVER_MEMORY": DRIVER_MEMORY,
        },
    )


# --- helpers ----------------------------------------------------------------------------


def slot_processes(worker) -> list[psutil.Process]:
    """The worker's live slot processes (`python -m workers.slot_main`)."""
    out = []
    for proc in psutil.Process(worker.proc.pid).children(recursive=True):
        try:
            if "workers.slot_main" in " ".join(proc.cmdline()) and proc.status() != "zombie":
                out.append(proc)
        except psutil.Error:
            continue
    return out


def wait_for_slots(worker, count: int = 2, timeout: float = START_S) -> None:
    deadline = time.monotonic() + timeout
    while len(slot_processes(worker)) < count:
        assert time.monotonic() < deadline, f"fewer than {count} slot processes"
        time.sleep(0.5)


def task_process(task_id: str, timeout: float = START_S) -> psutil.Process:
    """The slot process running `task_id`, as its log names it."""
    deadline = time.monotonic() + timeout
    marker = f"task {task_id} runs in slot process "
    while time.monotonic() < deadline:
        path = task_log_path(task_id)
        text = path.read_text(errors="replace") if path.exists() else ""
        if marker in text:
            return psutil.Process(int(text.split(marker, 1)[1].split()[0]))
        time.sleep(0.2)
    raise AssertionError(f"no slot process took {task_id}")


def wait_for_phase(task_id: str, phases: tuple[str, ...], timeout: float = START_S) -> Task:
    deadline = time.monotonic() + timeout
    while True:
        task = Task.objects.get(id=task_id)
        if task.phase in phases and task.status in (TaskStatus.RUNNING, TaskStatus.WAITING):
            return task
        assert task.status not in (TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.CANCELED), (
            f"{task_id} ended {task.status} ({task.error}) before reaching {phases}"
        )
        assert time.monotonic() < deadline, f"{task_id} never reached {phases}: {task.phase}"
        time.sleep(0.1)


def shutdown(api_client, task_id: str) -> float:
    """Druid's shutdown of a task; the monotonic time of the request."""
    asked = time.monotonic()
    response = api_client.post(f"/druid/indexer/v1/task/{task_id}/shutdown")
    assert response.status_code == 200, response.content
    return asked


def wait_ended(task_id: str, worker, timeout: float = 60.0) -> tuple[Task, float]:
    task = _await_task(task_id, worker, timeout=timeout)
    return task, time.monotonic()


def assert_stopped_in_time(task: Task, asked: float, ended: float) -> None:
    """The stop took under STOP_LIMIT_S from the recorded request (the task's
    cancel_requested_at) to its recorded end; the test's own view, from before
    it sent the request to seeing the end, is in the message (on this loaded
    machine the request itself can take seconds)."""
    stop_s = (task.ended_at - task.cancel_requested_at).total_seconds()
    seen = f"{ended - asked:.1f} s from sending the request; stop report {task.report.get('stop')}"
    phase = (task.report.get("stop") or {}).get("phase") or "?"
    print(f"stop latency: phase {phase}: {stop_s:.2f} s ({task.status}; {seen})")  # for `-s`
    assert stop_s < STOP_LIMIT_S, f"stopped {stop_s:.1f} s after the request ({seen})"


def deep_files(dirs) -> set[Path]:
    return {p for p in dirs.deep.rglob("*") if p.is_file()} if dirs.deep.exists() else set()


def assert_stopped_clean(task: Task, dirs, deep_before: set[Path]) -> None:
    """Nothing of a stopped task is left: no lock, no staged or unpublished file,
    no segment, no slot."""
    assert not TaskLock.objects.filter(task_id=task.id).exists()
    assert not (dirs.intermediary / task.id).exists()
    assert not Segment.objects.filter(created_by_id=task.id).exists()
    assert deep_files(dirs) == deep_before
    assert task.status not in (TaskStatus.RUNNING, TaskStatus.WAITING)


def local_spec(datasource: str, base: Path, name: str, **extra) -> dict:
    """An index_parallel spec of a local CSV (columns ts, key, n)."""
    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["key"]},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "n", "fieldName": "n"},
                ],
                "granularitySpec": {
                    "segmentGranularity": "DAY",
                    "queryGranularity": "NONE",
                    "rollup": True,
                    "intervals": ["2024-01-01/2024-01-08"],
                },
                **extra.pop("data_schema", {}),
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(base), "filter": name},
                "inputFormat": {"type": "csv", "findColumnsFromHeader": True},
            },
            "tuningConfig": extra.pop(
                "tuning", {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}}
            ),
        },
    }
    return spec


def big_csv(dirs, name: str, rows: int) -> Path:
    path = dirs.input_root / name
    if not path.exists():
        with path.open("w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["ts", "key", "n"])
            for i in range(rows):
                out.writerow([f"2024-01-0{1 + i % 7}T{i % 24:02d}:{i % 60:02d}:00Z", f"k{i}", i])
    return dirs.input_root


def submit(spec: dict) -> str:
    return services.task_submit(spec=spec).id


# --- stop in every phase ------------------------------------------------------------------


def nested_max(depth: int) -> str:
    """`max(max(...max(n, 1)..., 1), 1)`: Spark SQL has no two-argument max, so
    each level's translation names its argument twice (a null-aware greatest):
    the plan doubles with each level while the spec grows by a few bytes."""
    expression = "n"
    for _ in range(depth):
        expression = f"max({expression}, 1)"
    return expression


def planner_spec(datasource: str, base: Path) -> dict:
    return local_spec(
        datasource,
        base,
        "small.csv",
        data_schema={
            "transformSpec": {
                "transforms": [
                    {"type": "expression", "name": "big", "expression": nested_max(PLAN_DEPTH)}
                ]
            },
            "dimensionsSpec": {"dimensions": ["key", {"type": "long", "name": "big"}]},
        },
    )


def test_shutdown_while_catalyst_plans_for_minutes_kills_the_task_within_10_s(
    slot_worker, api_client, strata_dirs
):
    """A transform whose plan takes Catalyst minutes to analyze and optimize.
    No Spark job runs meanwhile, so no job-group cancel can stop it: the task's
    process is killed."""
    wait_for_slots(slot_worker)
    base = big_csv(strata_dirs, "small.csv", 50)
    before = deep_files(strata_dirs)
    spec = planner_spec("iso_plan", base)
    task_id = submit(spec)
    wait_for_phase(task_id, ("phase 1",))
    time.sleep(15)  # well into the planner
    assert Task.objects.get(id=task_id).status == TaskStatus.RUNNING

    asked = shutdown(api_client, task_id)
    task, ended = wait_ended(task_id, slot_worker)

    assert task.status == TaskStatus.CANCELED, task.error
    assert_stopped_in_time(task, asked, ended)
    stop = task.report["stop"]
    assert stop["killed"] and any("SIGTERM" in step for step in stop["escalation"]), stop
    assert_stopped_clean(task, strata_dirs, before)
    wait_for_slots(slot_worker)


def test_shutdown_while_waiting_for_a_lock_stops_within_10_s(
    slot_worker, api_client, claimed_task, strata_dirs
):
    wait_for_slots(slot_worker)
    holder = claimed_task("iso_lock")
    services.lock_acquire(task=holder, interval=Interval.parse("2024-01-01/2024-01-08"))
    base = big_csv(strata_dirs, "small.csv", 50)
    before = deep_files(strata_dirs)
    task_id = submit(local_spec("iso_lock", base, "small.csv"))
    _await_task(task_id, slot_worker, timeout=START_S, statuses=[TaskStatus.WAITING])

    asked = shutdown(api_client, task_id)
    task, ended = wait_ended(task_id, slot_worker)

    services.task_finish(task_id=holder.id, status=TaskStatus.CANCELED, error="test done")
    assert task.status == TaskStatus.CANCELED, task.error
    assert_stopped_in_time(task, asked, ended)
    assert_stopped_clean(task, strata_dirs, before)


@pytest.mark.parametrize("phase", ["phase 1", "phase 2"])
def test_shutdown_while_reading_or_shuffling_stops_within_10_s(
    slot_worker, api_client, strata_dirs, phase
):
    wait_for_slots(slot_worker)
    base = big_csv(strata_dirs, "big.csv", 600_000)
    before = deep_files(strata_dirs)
    hashed = {
        "type": "index_parallel",
        "forceGuaranteedRollup": True,
        # Sized from the data: a phase 2 of merges (with numShards, one shuffle, no phase 2).
        "partitionsSpec": {"type": "hashed", "targetRowsPerSegment": 50_000},
    }
    task_id = submit(local_spec(f"iso_{phase[-1]}", base, "big.csv", tuning=hashed))
    wait_for_phase(task_id, (phase,))

    asked = shutdown(api_client, task_id)
    task, ended = wait_ended(task_id, slot_worker)

    assert task.status == TaskStatus.CANCELED, task.error
    assert_stopped_in_time(task, asked, ended)
    assert_stopped_clean(task, strata_dirs, before)
    wait_for_slots(slot_worker)  # a killed slot process is replaced


def test_shutdown_during_a_long_regex_parse_stops_within_10_s(slot_worker, api_client, strata_dirs):
    """The regex input format parses with Spark's own regexp functions (RLIKE,
    regexp_extract, and a regexp_replace probe per optional group), no Python UDF:
    its jobs stop on a cancel like any other, between two rows of a task."""
    wait_for_slots(slot_worker)
    base = big_csv(strata_dirs, "big.csv", 600_000)
    before = deep_files(strata_dirs)
    spec = local_spec("iso_regex", base, "big.csv")
    spec["spec"]["ioConfig"]["inputFormat"] = {
        "type": "regex",
        # an optional group each row is probed for, the costliest shape the format has
        "pattern": r"([^,]+),(k\d+),(\d*)(?:,(\w+))?",
        "columns": ["ts", "key", "n", "extra"],
    }
    task_id = submit(spec)
    wait_for_phase(task_id, ("phase 1",))
    time.sleep(2)  # well into parsing

    asked = shutdown(api_client, task_id)
    task, ended = wait_ended(task_id, slot_worker)

    assert task.status == TaskStatus.CANCELED, task.error
    assert_stopped_in_time(task, asked, ended)
    assert_stopped_clean(task, strata_dirs, before)
    wait_for_slots(slot_worker)


def test_preemption_while_catalyst_plans_fails_the_task_within_10_s(
    slot_worker, claimed_task, strata_dirs
):
    """A higher-priority task takes the lock of a task stuck in the planner: the
    victim ends FAILED naming its preemptor within 10 s of the revocation."""
    wait_for_slots(slot_worker)
    base = big_csv(strata_dirs, "small.csv", 50)
    spec = planner_spec("iso_preempt", base)
    spec["context"] = {"priority": 10}
    task_id = submit(spec)
    wait_for_phase(task_id, ("phase 1",))
    time.sleep(5)  # in the planner (the plan takes minutes)

    preemptor = claimed_task("iso_preempt", context={"priority": 90})
    revoked = time.monotonic()
    services.lock_acquire(task=preemptor, interval=Interval.parse("2024-01-01/2024-01-08"))
    task, ended = wait_ended(task_id, slot_worker)
    services.task_finish(task_id=preemptor.id, status=TaskStatus.CANCELED, error="test done")

    assert task.status == TaskStatus.FAILED
    assert task.error.startswith("preempted:") and preemptor.id in task.error, task.error
    assert ended - revoked < STOP_LIMIT_S, task.report.get("stop")
    assert task.report["stop"]["killed"]
    assert not TaskLock.objects.filter(task_id=task_id).exists()


def _blocked_in_publish(slot_worker, strata_dirs, datasource: str) -> tuple[str, Gate, set]:
    """A task stopped inside its publish's transaction, its segment files already
    moved into deep storage: the test holds the dataSource's lock-box gate once
    the task holds its lock, lets its allocation through and takes the gate
    again, so the publish (the next lock-box step) waits on it."""
    wait_for_slots(slot_worker)
    base = big_csv(strata_dirs, "medium.csv", 100_000)
    before = deep_files(strata_dirs)
    task_id = submit(local_spec(datasource, base, "medium.csv"))
    wait_for_phase(task_id, ("phase 1",))
    gate = Gate(datasource)  # the dataSource exists: the task holds its lock
    gate.hold()
    deadline = time.monotonic() + START_S
    while not (Task.objects.get(id=task_id).phase == "publishing" and gate.waiters()):
        assert time.monotonic() < deadline, "the task never reached its allocation"
        time.sleep(0.1)
    gate.open()  # the allocation goes through; the gate is taken before the publish
    gate.hold()
    while not gate.waiters():
        assert time.monotonic() < deadline, "the task never reached its publish"
        time.sleep(0.1)
    assert deep_files(strata_dirs) != before, "its files should be in deep storage by now"
    return task_id, gate, before


def test_shutdown_while_publishing_publishes_nothing_and_stops_within_10_s(
    slot_worker, api_client, strata_dirs
):
    task_id, gate, before = _blocked_in_publish(slot_worker, strata_dirs, "iso_publish")
    process = task_process(task_id)
    try:
        asked = shutdown(api_client, task_id)
        process.wait(timeout=STOP_LIMIT_S)  # killed while its publish waited
    finally:
        gate.close()
    task, ended = wait_ended(task_id, slot_worker)

    assert task.status == TaskStatus.CANCELED, task.error
    assert_stopped_in_time(task, asked, ended)
    assert task.report["stop"]["killed"]
    assert not CommitLogEntry.objects.filter(task_id=task_id).exists()
    assert PendingSegment.objects.filter(task_id=task_id).exists()  # allocated, never published
    assert_stopped_clean(task, strata_dirs, before)


def test_sigkill_of_the_task_process_mid_publish_publishes_nothing_and_releases_its_locks(
    slot_worker, strata_dirs
):
    task_id, gate, before = _blocked_in_publish(slot_worker, strata_dirs, "iso_sigkill")
    process = task_process(task_id)
    try:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        gate.close()
    task, _ = wait_ended(task_id, slot_worker)

    assert task.status == TaskStatus.FAILED
    assert "Spark driver exited with signal SIGKILL" in task.error
    assert not CommitLogEntry.objects.filter(task_id=task_id).exists()
    assert_stopped_clean(task, strata_dirs, before)
    wait_for_slots(slot_worker)


# --- a task fails alone ---------------------------------------------------------------------


def test_driver_out_of_memory_fails_its_task_alone_while_the_other_slot_succeeds(
    slot_worker, strata_dirs
):
    wait_for_slots(slot_worker)
    # One JSON row holding a 300 MB string: more than the driver's 512 MB heap
    # can hold while Spark reads the line.
    huge = strata_dirs.input_root / "huge.json"
    if not huge.exists():
        with huge.open("w") as f:
            f.write('{"ts": "2024-01-01T00:00:00Z", "key": "')
            for _ in range(300):
                f.write("x" * (1 << 20))
            f.write('", "n": 1}\n')
    base = big_csv(strata_dirs, "small.csv", 50)
    oom_spec = local_spec("iso_oom", strata_dirs.input_root, "huge.json")
    oom_spec["spec"]["ioConfig"]["inputFormat"] = {"type": "json"}
    healthy = local_spec("iso_healthy", base, "small.csv")

    oom_id = submit(oom_spec)
    healthy_id = submit(healthy)
    oom = _await_task(oom_id, slot_worker, timeout=START_S)
    ok = _await_task(healthy_id, slot_worker, timeout=START_S)

    assert oom.status == TaskStatus.FAILED
    assert oom.error.startswith("driver ran out of memory: Java heap space"), oom.error
    assert DRIVER_MEMORY in oom.error
    assert ok.status == TaskStatus.SUCCESS, ok.error
    assert sum(s.num_rows for s in Segment.objects.filter(created_by_id=healthy_id)) == 50
    assert not TaskLock.objects.exists()
    assert not (strata_dirs.intermediary / oom_id).exists()
    wait_for_slots(slot_worker, timeout=60)  # the slot is usable again
    again = _await_task(
        submit(local_spec("iso_again", base, "small.csv")), slot_worker, timeout=START_S
    )
    assert again.status == TaskStatus.SUCCESS, again.error


# --- what the API says while a task stops ---------------------------------------------------


def test_a_task_being_stopped_says_stopping_with_its_phase_and_seconds_since_the_request(
    api_client, claimed_task
):
    task = claimed_task("iso_status")
    services.task_heartbeat(task_id=task.id, phase="phase 1")
    assert api_client.get(f"/api/v1/tasks/{task.id}").json()["stopping"] == ""

    services.task_cancel(task_id=task.id)
    Task.objects.filter(id=task.id).update(
        cancel_requested_at=Task.objects.get(id=task.id).cancel_requested_at - timedelta(seconds=4)
    )

    body = api_client.get(f"/api/v1/tasks/{task.id}").json()
    assert body["stopping"] == "stopping (phase 1, 4 s since request)"
    services.task_finish(task_id=task.id, status=TaskStatus.CANCELED, error="stopped")
    assert api_client.get(f"/api/v1/tasks/{task.id}").json()["stopping"] == ""
