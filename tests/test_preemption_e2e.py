"""A priority-75 ingestion preempts a running priority-25 task on real Spark: the
victim's worker notices, cancels its Spark job and ends FAILED naming the preemptor,
publishing nothing and leaving no intermediary data or lock behind."""

from __future__ import annotations

import time

import pytest

from metastore import services
from metastore.demo import extract_flights, flights_spec
from metastore.models import Segment, TaskLock, TaskStatus
from workers.paths import intermediary_dir
from workers.runner import run_task as run_in_process

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


def _spec(base_dir, priority: int, datasource: str = "flights_preempt") -> dict:
    spec = flights_spec(str(base_dir))
    spec["spec"]["dataSchema"]["dataSource"] = datasource
    spec["context"] = {"priority": priority}
    return spec


def test_high_priority_ingestion_preempts_a_running_low_priority_task(
    worker, wait_for_task, strata_dirs
):
    base = strata_dirs.input_root / "preempt"
    extract_flights(base)
    victim = services.task_submit(spec=_spec(base, 25))  # runs on the Celery worker
    deadline = time.monotonic() + 300
    while True:
        victim.refresh_from_db()
        if victim.status == TaskStatus.RUNNING and TaskLock.objects.filter(task=victim).exists():
            break
        assert victim.status not in (TaskStatus.SUCCESS, TaskStatus.FAILED), victim.error
        assert time.monotonic() < deadline, f"victim never held its lock: {victim.status}"
        time.sleep(0.1)

    # The preemptor runs in this process (its own SparkSession), through the same services.
    with services.task_enqueuer(None):  # not queued: this process runs it
        preemptor = services.task_submit(spec=_spec(base, 75))
    assert services.task_claim(task_id=preemptor.id, worker="test-preemptor")
    run_in_process(preemptor.id)

    preemptor.refresh_from_db()
    assert preemptor.status == TaskStatus.SUCCESS, preemptor.error
    victim = wait_for_task(victim.id)
    assert victim.status == TaskStatus.FAILED
    assert preemptor.id in victim.error and "revoked" in victim.error
    assert not Segment.objects.filter(created_by=victim).exists()
    assert Segment.objects.filter(created_by=preemptor).count() > 300
    assert not intermediary_dir(victim.id).exists()
    assert not TaskLock.objects.exists()
    lag = (victim.ended_at - preemptor.started_at).total_seconds()
    print(f"victim ended {lag:.1f} s after the preemptor started (information, not a target)")
