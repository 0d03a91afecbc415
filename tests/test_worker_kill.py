"""A whole worker SIGKILLed while a task is inside its publish transaction
(issue 23): the worker process dies, its slot processes and their driver JVMs
follow it, the publish commits nothing; after a restart the reaper fails the
task with the reason, its locks are released, its staged and unpublished files
removed, and the same ingestion then publishes its rows exactly once.

Real processes: the worker is `make run`'s command line (`slots_worker_process`),
its task runs in a slot process; the test holds the dataSource's lock-box gate
(`e2e_driver.Gate`) so the publish waits inside its transaction when the kill
comes.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from django.utils import timezone
from e2e_driver import Gate, slots_worker_process
from test_task_isolation import (
    START_S,
    big_csv,
    deep_files,
    local_spec,
    slot_processes,
    submit,
    wait_for_phase,
    wait_for_slots,
)

from metastore.models import CommitLogEntry, Segment, Task, TaskLock, TaskStatus
from workers.reaper import reap_dead_tasks

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

ROWS = 2000
FOLLOW_S = 30  # a slot process notices its worker is gone within about a second


def wait_for(condition, what: str, timeout: float = START_S):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return value


def hold_inside_publish(task_id: str, datasource: str) -> Gate:
    """Let the task allocate its segments, then hold the gate its publish's
    transaction waits on (its segment files are in deep storage by then)."""
    wait_for_phase(task_id, ("phase 1",))
    gate = Gate(datasource)  # the dataSource exists: the task holds its lock
    gate.hold()
    wait_for(
        lambda: Task.objects.get(id=task_id).phase == "publishing" and gate.waiters(),
        "the task's allocation",
    )
    gate.open()
    gate.hold()
    wait_for(gate.waiters, "the task's publish")
    return gate


def test_sigkill_of_the_whole_worker_mid_publish_publishes_nothing_and_a_restart_cleans_up(
    django_db_setup, redis_url, strata_dirs, tmp_path_factory
):
    first = slots_worker_process(redis_url, strata_dirs, tmp_path_factory, slots=1)
    worker = next(first)
    base = big_csv(strata_dirs, "kill.csv", ROWS)
    before = deep_files(strata_dirs)
    try:
        wait_for_slots(worker, count=1)
        task_id = submit(local_spec("kill_publish", base, "kill.csv"))
        gate = hold_inside_publish(task_id, "kill_publish")
        staged = deep_files(strata_dirs) - before
        assert staged, "its segment files should be in deep storage by now"
        victims = [psutil.Process(worker.proc.pid), *slot_processes(worker)]
        victims += [c for p in victims[1:] for c in p.children(recursive=True)]  # the JVMs
        os.kill(worker.proc.pid, signal.SIGKILL)
        _, alive = psutil.wait_procs(victims, timeout=FOLLOW_S)
        assert not alive, f"still running after the worker's SIGKILL: {alive}"
        silent_since = timezone.now()  # nothing of the worker is left to heartbeat
        gate.close()  # the dead publish's backend gets the gate and finds its client gone
    finally:
        first.close()

    assert not CommitLogEntry.objects.filter(task_id=task_id).exists()
    assert not Segment.objects.filter(datasource__name="kill_publish").exists()
    assert Task.objects.get(id=task_id).status == TaskStatus.RUNNING  # nobody ended it yet

    restarted = slots_worker_process(redis_url, strata_dirs, tmp_path_factory, slots=1)
    worker = next(restarted)
    try:
        # What beat's reaper does once the task's heartbeat is silent long enough.
        reaped, _ = reap_dead_tasks(older_than=silent_since)
        assert reaped == [task_id]
        task = Task.objects.get(id=task_id)
        assert task.status == TaskStatus.FAILED
        assert "stopped heartbeating" in task.error and "locks released" in task.error
        assert not TaskLock.objects.filter(task_id=task_id).exists()
        assert not (strata_dirs.intermediary / task_id).exists()
        assert deep_files(strata_dirs) == before  # the staged files of the publish are gone

        again = submit(local_spec("kill_publish", base, "kill.csv"))
        done = wait_for(
            lambda: Task.objects.filter(id=again, status__in=("SUCCESS", "FAILED")).first(),
            "the ingestion on the restarted worker",
        )
        assert done.status == TaskStatus.SUCCESS, done.error
        segments = Segment.objects.filter(datasource__name="kill_publish", used=True)
        assert sum(s.num_rows for s in segments) == ROWS  # once: nothing of the first
        assert {s.created_by_id for s in segments} == {again}
    finally:
        restarted.close()
