"""Segment locks are taken all or nothing (issue 24): a segment-locked compaction
asks the lock box for every input segment in one decision, so it never holds some
of its locks while it waits for others (hold-and-wait), and two compactions whose
segment sets overlap, asked for in opposite orders, cannot wait on each other."""

from __future__ import annotations

import threading
import time

import pytest
from conftest import TEST_WORKER
from django.db import connection, transaction

from metastore import locking, selectors, services
from metastore.intervals import Interval
from metastore.models import Task, TaskLock, TaskStatus
from workers.runner import run_task

TWO_DAYS = "2024-01-01/2024-01-03"
DAYS = {"2024-01-01/2024-01-02": 1, "2024-01-02/2024-01-03": 1}


def _refs(datasource: str):
    """The visible segments of the two days, oldest first."""
    timeline = selectors.timeline_for(datasource=datasource)
    return [ref for _, ref in timeline.lookup(Interval.parse(TWO_DAYS))]


def _claimed(datasource: str, task_type: str = locking.COMPACT_TASK) -> Task:
    task = services.task_create(spec={}, task_type=task_type, datasource=datasource, enqueue=False)
    assert services.task_claim(task_id=task.id, worker=TEST_WORKER)
    return Task.objects.get(id=task.id)


def _in_thread(target, *args) -> threading.Thread:
    def run():
        try:
            target(*args)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _wait_for(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_a_segment_locked_compaction_holds_no_lock_while_it_waits(publish):
    """Another task holds the second input segment: the compaction waits holding
    nothing, not the first segment's lock (which another task could then wait on)."""
    publish("hw", TWO_DAYS, DAYS)
    first, second = _refs("hw")
    holder = _claimed("hw", locking.INDEX_TASK)  # priority 50: a compaction cannot revoke it
    assert services.lock_try_acquire(
        task=holder,
        interval=second.interval,
        granularity=locking.SEGMENT,
        partition=second.partition,
        version=second.version,
    )
    with transaction.atomic():  # claimed before any worker could see the message
        compaction = services.task_submit(
            spec={
                "type": locking.COMPACT_TASK,
                "dataSource": "hw",
                "interval": TWO_DAYS,
                "context": {"forceTimeChunkLock": False, "taskLockTimeout": 3000},
            }
        )
        assert services.task_claim(task_id=compaction.id, worker=TEST_WORKER)
    thread = _in_thread(run_task, compaction.id)
    _wait_for(
        lambda: Task.objects.get(id=compaction.id).status == TaskStatus.WAITING,
        "the compaction to wait for the held segment",
    )
    held_while_waiting = list(
        TaskLock.objects.filter(task_id=compaction.id).values_list("partition", "start")
    )
    thread.join(timeout=60)
    assert held_while_waiting == []
    compaction.refresh_from_db()
    assert compaction.status == TaskStatus.FAILED and "timed out" in compaction.error
    assert first.id in {ref.id for ref in _refs("hw")}  # nothing was rewritten


@pytest.mark.django_db(transaction=True)
def test_two_tasks_asking_for_overlapping_segments_in_opposite_orders_both_get_them(
    publish,
):
    """Each asks for both segments at once, in the opposite order of the other: one
    is granted both, the other waits holding none until the first lets them go."""
    publish("hw2", TWO_DAYS, DAYS)
    refs = _refs("hw2")
    tasks = [_claimed("hw2"), _claimed("hw2")]
    orders = [refs, list(reversed(refs))]
    start = threading.Barrier(2)
    granted: dict[str, list] = {}
    errors: list[BaseException] = []

    def take(task: Task, order) -> None:
        start.wait()
        try:
            locks = services.segment_locks_acquire(task=task, segments=order, timeout_ms=20_000)
            granted[task.id] = sorted((lock.start, lock.partition) for lock in locks)
            others = TaskLock.objects.exclude(task_id=task.id).filter(revoked=False).count()
            time.sleep(0.3)
            assert others == 0, "two holders of one segment"
            services.locks_release_all(task_id=task.id)
        except BaseException as exc:  # reported to the test thread
            errors.append(exc)

    threads = [_in_thread(take, task, order) for task, order in zip(tasks, orders, strict=True)]
    partial = []
    while any(t.is_alive() for t in threads):
        for task in tasks:
            held = TaskLock.objects.filter(task_id=task.id).count()
            if held not in (0, len(refs)):
                partial.append((task.id, held))
        time.sleep(0.02)
    assert errors == []
    assert partial == []
    expected = sorted((ref.interval.start, ref.partition) for ref in refs)
    assert granted == {task.id: expected for task in tasks}
    assert not TaskLock.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_segment_locks_at_once_are_segment_locks_naming_each_segment(publish):
    publish("hw3", TWO_DAYS, DAYS)
    refs = _refs("hw3")
    task = _claimed("hw3")
    locks = services.segment_locks_acquire(task=task, segments=refs)
    assert [(lock.granularity, lock.type) for lock in locks] == [
        (locking.SEGMENT, locking.EXCLUSIVE)
    ] * len(refs)
    assert [(lock.start, lock.end, lock.partition, lock.version) for lock in locks] == [
        (ref.interval.start, ref.interval.end, ref.partition, ref.version) for ref in refs
    ]
    assert services.segment_locks_acquire(task=task, segments=[]) == []
