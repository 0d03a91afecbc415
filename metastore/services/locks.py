"""The lock box: lock decisions (grant, revoke, wait) and release."""

from __future__ import annotations

import time
from collections.abc import Sequence

from django.db import transaction
from django.utils import timezone

from metastore import lockbox_sql, locking
from metastore.intervals import Interval
from metastore.models import (
    Task,
    TaskLock,
    TaskStatus,
)
from metastore.services._common import (
    LOCK_POLL_SECONDS,
    LockRevoked,
    LockTimeout,
    ServiceError,
    _blocker,
    _log_revocation,
    _next_version,
    _refuse_inactive,
    _request_from_json,
    _revoked_reason,
    datasource_for_update,
    lock_request_json,
    lock_request_of,
    lock_spec_of,
)

# --- locks --------------------------------------------------------------------


def locks_acquire(
    *,
    task: Task,
    intervals: Sequence[Interval],
    lock_type: str,
    granularity: str = locking.TIME_CHUNK,
    timeout_ms: int | None = None,
) -> list[TaskLock]:
    """Take `task`'s locks on all of `intervals` in one decision: all or nothing.

    Either every interval is granted (preempting strictly lower priorities on
    any of them) in one transaction, or none is and nothing is revoked: the
    task is WAITING with `waiting_on` naming every blocking lock, until all
    can be granted together or `timeout_ms` (default: the spec's
    `context.taskLockTimeout`, 300000) passes and `LockTimeout` is raised.
    Since a task never holds some of its locks while waiting for others, two
    multi-interval tasks can no longer wait on each other for ever.

    Each returned lock's `granted_seq` is the commit as of which its interval
    must be read (SPEC §5); all of one call's locks share it. Raises
    `LockRevoked` if the task was preempted, `TaskCanceled` if canceled,
    `TaskNotClaimed` if no worker claimed it yet (PENDING) and `TaskEnded` if
    it already ended.
    """
    if not intervals:
        return []
    requests = [lock_request_of(task, iv, lock_type, granularity, None, None) for iv in intervals]
    return _acquire(task, requests, timeout_ms)


def lock_acquire(
    *,
    task: Task,
    interval: Interval,
    lock_type: str = locking.EXCLUSIVE,
    granularity: str = locking.TIME_CHUNK,
    partition: int | None = None,
    version: str | None = None,
    timeout_ms: int | None = None,
) -> TaskLock:
    """One lock for `task` (a one-interval `locks_acquire`; segment locks name
    their `partition` and `version`)."""
    request = lock_request_of(task, interval, lock_type, granularity, partition, version)
    return _acquire(task, [request], timeout_ms)[0]


def _acquire(
    task: Task, requests: list[locking.LockSpec], timeout_ms: int | None
) -> list[TaskLock]:
    if timeout_ms is None:
        timeout_ms = int(
            (task.spec.get("context") or {}).get("taskLockTimeout", 300_000)
            if isinstance(task.spec, dict)
            else 300_000
        )
    deadline = time.monotonic() + timeout_ms / 1000.0
    while True:
        result = _lock_attempt(task.id, requests)
        if not isinstance(result, str):
            return result
        if time.monotonic() >= deadline:
            _clear_waiting(task.id)
            what = ", ".join(str(r.interval) for r in requests)
            raise LockTimeout(
                f"timed out after {timeout_ms} ms waiting for a {requests[0].type} lock on "
                f"{what}; blocked by {result}"
            )
        time.sleep(LOCK_POLL_SECONDS)


def locks_try_acquire(
    *,
    task: Task,
    intervals: Sequence[Interval],
    lock_type: str,
    granularity: str = locking.TIME_CHUNK,
) -> list[TaskLock] | None:
    """One all-or-nothing decision on all of `intervals` without waiting: the
    locks, or None (the task is WAITING, queued on each interval)."""
    requests = [lock_request_of(task, iv, lock_type, granularity, None, None) for iv in intervals]
    result = _lock_attempt(task.id, requests) if requests else []
    return None if isinstance(result, str) else result


def lock_try_acquire(
    *,
    task: Task,
    interval: Interval,
    lock_type: str = locking.EXCLUSIVE,
    granularity: str = locking.TIME_CHUNK,
    partition: int | None = None,
    version: str | None = None,
) -> TaskLock | None:
    """One lock decision without waiting: the lock, or None (the task is WAITING)."""
    request = lock_request_of(task, interval, lock_type, granularity, partition, version)
    result = _lock_attempt(task.id, [request])
    return None if isinstance(result, str) else result[0]


def _lock_attempt(task_id: str, requests: list[locking.LockSpec]) -> list[TaskLock] | str:
    """One decision on all of `requests` inside the dataSource's critical section.

    Returns the granted locks (in the order of `requests`), or a description
    of what blocks them. This is the lock box's hot path: one round trip reads
    (`decision_reads`), one writes (`grant_writes`) and, in a transaction of
    its own on PostgreSQL, commits.
    """
    datasource = requests[0].datasource
    intervals = [r.interval for r in requests]
    commit = lockbox_sql.commits_with_last_write()
    with transaction.atomic():
        reads = lockbox_sql.decision_reads(
            datasource=datasource, task_id=task_id, intervals=intervals
        )
        if reads is None:  # the dataSource's first lock: create its row, then read again
            datasource_for_update(datasource)
            reads = lockbox_sql.decision_reads(
                datasource=datasource, task_id=task_id, intervals=intervals
            )
        task = reads.task
        if task is None:
            raise ServiceError(f"there is no task {task_id}")
        _refuse_inactive(task_id, task.status, task.cancel_requested)
        if any(lock.task_id == task_id and lock.revoked for lock in reads.locks):
            raise LockRevoked(_revoked_reason(task_id))
        decided = []  # (request, [(spec, lock)], decision, queued)
        for request in requests:
            held = [
                lock
                for lock in reads.locks
                if lock.datasource == datasource
                and lock.start < request.interval.end
                and lock.end > request.interval.start
            ]
            pairs = [(lock_spec_of(lock), lock) for lock in held]
            queued = _queued_before(reads.queued, request)
            decision = locking.decide(request, [sp for sp, _ in pairs], [q for q, _ in queued])
            decided.append((request, pairs, decision, queued))
        blockers = [
            _blocker(
                blocking,
                next((lock for spec, lock in pairs if spec is blocking), None),
                next((tid for spec, tid in queued if spec is blocking), None),
            )
            for _, pairs, decision, queued in decided
            if decision.kind == locking.WAIT
            for blocking in decision.blocking
        ]
        if blockers:  # all or nothing: grant none, revoke none
            waiting = lock_request_json(requests[0])
            if len(requests) > 1:  # one request on several intervals, queued on each
                waiting["intervals"] = [str(r.interval) for r in requests]
            Task.objects.filter(id=task_id).update(
                status=TaskStatus.WAITING,
                waiting_on=blockers,
                waiting_request=waiting,
                waiting_since=task.waiting_since or timezone.now(),
            )
            return ", ".join(
                f"{b['type']} {b['interval']} of {b['task']} (priority {b['priority']})"
                for b in blockers
            )
        victims: dict[int, TaskLock] = {}
        reused: dict[int, TaskLock] = {}
        new_locks = []
        for i, (request, pairs, decision, _) in enumerate(decided):
            for spec, lock in pairs:
                if any(spec is r for r in decision.revoke):
                    victims[lock.id] = lock
            reusable = locking.find_reusable(request, [spec for spec, _ in pairs])
            if reusable is not None:
                reused[i] = next(lock for spec, lock in pairs if spec is reusable)
                continue
            if request.granularity == locking.SEGMENT:
                lock_version = request.version or ""
            else:
                lock_version = _next_version(reads.datasource)
            new_locks.append(
                {
                    "task_id": task_id,
                    "group_id": request.group_id,
                    "datasource": request.datasource,
                    "start": request.interval.start,
                    "end": request.interval.end,
                    "granularity": request.granularity,
                    "type": request.type,
                    "version": lock_version,
                    "priority": request.priority,
                    "partition": request.partition,
                    "revoked": False,
                    "revoked_by_id": None,
                    "granted_seq": reads.last_commit_seq,
                    "created_at": timezone.now(),
                }
            )
        if victims:
            _log_revocation(list(victims.values()), by=task)
        new_version = None
        if any(lk["granularity"] != locking.SEGMENT for lk in new_locks):
            new_version = (reads.datasource.id, reads.datasource.last_version)
        granted = iter(
            lockbox_sql.grant_writes(
                revoke=list(victims),
                revoked_by=task_id,
                datasource_version=new_version,
                new_locks=new_locks,
                resume_task=(
                    task_id
                    if task.status == TaskStatus.WAITING or task.has_waiting_request
                    else None
                ),
                commit=commit,
            )
        )
        return [reused[i] if i in reused else next(granted) for i in range(len(requests))]


def _queued_before(
    queued: list[tuple[str, str, dict]], request: locking.LockSpec
) -> list[tuple[locking.LockSpec, str]]:
    """The earlier queued requests of other groups that overlap `request`, with their tasks."""
    out = []
    for other_id, group_id, data in queued:
        # A multi-interval waiter is queued on every one of its intervals.
        for interval in data.get("intervals") or [data["interval"]]:
            spec = _request_from_json(group_id, request.datasource, {**data, "interval": interval})
            if spec.interval.overlaps(request.interval):
                out.append((spec, other_id))
    return out


def _clear_waiting(task_id: str) -> None:
    Task.objects.filter(id=task_id, status=TaskStatus.WAITING).update(
        status=TaskStatus.RUNNING, waiting_on=[], waiting_request=None, waiting_since=None
    )


def lock_release(*, lock_id: int) -> None:
    lockbox_sql.lock_delete(lock_id)


def locks_release_all(*, task_id: str) -> int:
    deleted, _ = TaskLock.objects.filter(task_id=task_id).delete()
    return deleted
