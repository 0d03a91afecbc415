"""The lock box's hand-written SQL (metastore/lockbox_sql.py) against the pure
rules: for random lock tables written straight through the ORM, the decision
`lock_try_acquire` takes must be the one `locking.decide` takes when handed every
lock and every queued request of the dataSource, read independently."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from conftest import TEST_WORKER
from django.utils import timezone

from metastore import locking, services
from metastore.intervals import Interval
from metastore.models import Task, TaskLock, TaskStatus

pytestmark = pytest.mark.django_db

BASE = Interval.parse("2024-01-01/2024-01-02")
CASES = 150


def span(rng: random.Random) -> Interval:
    start = BASE.start + timedelta(hours=rng.randrange(72))
    return Interval(start, start + timedelta(hours=rng.choice([1, 6, 24, 48])))


def new_task(ds: str, priority: int, group: str | None = None) -> Task:
    """A task a worker claimed (RUNNING): only such a task may lock (SPEC §5)."""
    task = services.task_create(
        spec={"context": {"priority": priority}},
        task_type="index_parallel",
        datasource=ds,
        enqueue=False,
    )
    assert services.task_claim(task_id=task.id, worker=TEST_WORKER)
    task.refresh_from_db()
    if group:
        Task.objects.filter(id=task.id).update(group_id=group)
        task.group_id = group
    return task


def random_lock_table(rng: random.Random, ds: str) -> None:
    """Locks (some revoked, some segment locks, some on another dataSource) and
    waiting tasks, inserted directly: the lock box never sees them being made."""
    for i in range(rng.randint(0, 8)):
        holder = new_task(rng.choice([ds, ds, "elsewhere"]), rng.choice([0, 25, 50, 75]))
        segment = rng.random() < 0.25
        interval = span(rng)
        TaskLock.objects.create(
            task=holder,
            group_id=holder.group_id,
            datasource=holder.datasource,
            start=interval.start,
            end=interval.end,
            granularity=locking.SEGMENT if segment else locking.TIME_CHUNK,
            type=rng.choice(locking.SEGMENT_LOCK_TYPES if segment else locking.LOCK_TYPES),
            version=f"v{i}",
            priority=holder.priority,
            partition=rng.randrange(3) if segment else None,
            revoked=rng.random() < 0.2,
        )
    for i in range(rng.randint(0, 3)):
        waiter = new_task(ds, rng.choice([0, 25, 50, 75]))
        interval = span(rng)
        Task.objects.filter(id=waiter.id).update(
            status=TaskStatus.WAITING,
            waiting_since=timezone.now() - timedelta(seconds=10 - i),
            waiting_request={
                "interval": str(interval),
                "type": rng.choice(locking.LOCK_TYPES),
                "granularity": locking.TIME_CHUNK,
                "priority": waiter.priority,
                "partition": None,
                "version": None,
            },
        )


def reference_decision(
    ds: str, request: locking.LockSpec, queued_since
) -> tuple[locking.Decision, list]:
    held = list(TaskLock.objects.filter(datasource=ds))
    specs = [services.lock_spec_of(lock) for lock in held]
    queued = [
        locking.LockSpec(
            group_id=t.group_id,
            datasource=ds,
            interval=Interval.parse(t.waiting_request["interval"]),
            type=t.waiting_request["type"],
            priority=t.waiting_request["priority"],
        )
        for t in Task.objects.filter(datasource=ds, status=TaskStatus.WAITING)
        if t.group_id != request.group_id
        and (queued_since is None or t.waiting_since < queued_since)  # first come, first served
    ]
    queued = [q for q in queued if q.interval.overlaps(request.interval)]
    return locking.decide(request, specs, queued), list(zip(specs, held, strict=True))


def test_sql_lock_decisions_match_the_pure_rules_on_random_lock_tables():
    rng = random.Random(20261121)
    kinds = set()
    for case in range(CASES):
        ds = f"ref{case}"
        random_lock_table(rng, ds)
        group = None
        if rng.random() < 0.2:  # the requester shares a group with a holder
            holder = TaskLock.objects.filter(datasource=ds).first()
            group = holder.group_id if holder else None
        requester = new_task(ds, rng.choice([0, 25, 50, 75, 100]), group)
        segment = rng.random() < 0.2
        interval = span(rng)
        request = services.lock_request_of(
            requester,
            interval,
            rng.choice(locking.SEGMENT_LOCK_TYPES if segment else locking.LOCK_TYPES),
            locking.SEGMENT if segment else locking.TIME_CHUNK,
            rng.randrange(3) if segment else None,
            "v0" if segment else None,
        )
        queued_since = None
        if rng.random() < 0.3:  # the requester is itself queued, behind some of the waiters
            queued_since = timezone.now() - timedelta(seconds=8.5)
            Task.objects.filter(id=requester.id).update(
                status=TaskStatus.WAITING,
                waiting_since=queued_since,
                waiting_request=services.lock_request_json(request),
            )
        expected, pairs = reference_decision(ds, request, queued_since)
        kinds.add(expected.kind)
        revoked_before = set(TaskLock.objects.filter(revoked=True).values_list("id", flat=True))

        got = services.lock_try_acquire(
            task=requester,
            interval=interval,
            lock_type=request.type,
            granularity=request.granularity,
            partition=request.partition,
            version=request.version,
        )

        revoked_now = set(TaskLock.objects.filter(revoked=True).values_list("id", flat=True))
        requester.refresh_from_db()
        where = f"case {case}: {request} against {[s for s, _ in pairs]}"
        if expected.kind == locking.WAIT:
            assert got is None, where
            assert requester.status == TaskStatus.WAITING, where
            waits_on = {b["lock"] for b in requester.waiting_on if not b["queued"]}
            assert waits_on == {
                lock.id for spec, lock in pairs if any(spec is b for b in expected.blocking)
            }, where
            assert revoked_now == revoked_before, where
        else:
            assert got is not None, where
            expected_revoked = {
                lock.id for spec, lock in pairs if any(spec is r for r in expected.revoke)
            }
            assert revoked_now - revoked_before == expected_revoked, where
            reusable = locking.find_reusable(request, [s for s, _ in pairs])
            if reusable is not None:
                assert got.id == next(lock.id for s, lock in pairs if s is reusable), where
            else:
                assert got.task_id == requester.id and got.type == request.type, where
    assert kinds == {locking.GRANT, locking.WAIT, locking.REVOKE}  # every branch was taken
