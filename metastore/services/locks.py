"""The lock box: lock decisions (grant, revoke, wait) and release."""

from __future__ import annotations

import time

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
    TaskCanceled,
    _blocker,
    _datasource_for_update,
    _lock_request,
    _lock_spec,
    _log_revocation,
    _next_version,
    _request_from_json,
    _request_json,
    _revoked_reason,
)

# --- locks --------------------------------------------------------------------


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
    """Take a lock for `task`, preempting strictly lower priorities, or wait.

    While it waits the task is WAITING with `waiting_on` naming the blocking
    locks and their tasks; after `timeout_ms` (default: the spec's
    `context.taskLockTimeout`, 300000) it raises `LockTimeout`. Raises
    `LockRevoked` if the task was preempted and `TaskCanceled` if canceled.
    """
    if timeout_ms is None:
        timeout_ms = int(
            (task.spec.get("context") or {}).get("taskLockTimeout", 300_000)
            if isinstance(task.spec, dict)
            else 300_000
        )
    request = _lock_request(task, interval, lock_type, granularity, partition, version)
    deadline = time.monotonic() + timeout_ms / 1000.0
    blocking_text = ""
    while True:
        lock = _lock_attempt(task.id, request)
        if isinstance(lock, TaskLock):
            return lock
        blocking_text = lock
        if time.monotonic() >= deadline:
            _clear_waiting(task.id)
            raise LockTimeout(
                f"timed out after {timeout_ms} ms waiting for a {lock_type} lock on "
                f"{interval}; blocked by {blocking_text}"
            )
        time.sleep(LOCK_POLL_SECONDS)


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
    request = _lock_request(task, interval, lock_type, granularity, partition, version)
    result = _lock_attempt(task.id, request)
    return result if isinstance(result, TaskLock) else None


def _lock_attempt(task_id: str, request: locking.LockSpec) -> TaskLock | str:
    """One decision inside the dataSource's critical section.

    Returns the granted lock, or a description of what blocks the request.
    This is the lock box's hot path: one round trip reads (`decision_reads`),
    one writes (`grant_writes`), then the commit.
    """
    with transaction.atomic():
        reads = lockbox_sql.decision_reads(
            datasource=request.datasource, task_id=task_id, interval=request.interval
        )
        if reads is None:  # the dataSource's first lock: create its row, then read again
            _datasource_for_update(request.datasource)
            reads = lockbox_sql.decision_reads(
                datasource=request.datasource, task_id=task_id, interval=request.interval
            )
        task = reads.task
        if task is None:
            raise ServiceError(f"there is no task {task_id}")
        if task.cancel_requested:
            raise TaskCanceled(f"task {task_id} was canceled")
        if any(lock.task_id == task_id and lock.revoked for lock in reads.locks):
            raise LockRevoked(_revoked_reason(task_id))
        held = [
            lock
            for lock in reads.locks
            if lock.datasource == request.datasource
            and lock.start < request.interval.end
            and lock.end > request.interval.start
        ]
        pairs = [(_lock_spec(lock), lock) for lock in held]
        queued = _queued_before(reads.queued, request)
        decision = locking.decide(request, [spec for spec, _ in pairs], [q for q, _ in queued])
        if decision.kind == locking.WAIT:
            blockers = [
                _blocker(
                    blocking,
                    next((lock for spec, lock in pairs if spec is blocking), None),
                    next((tid for spec, tid in queued if spec is blocking), None),
                )
                for blocking in decision.blocking
            ]
            Task.objects.filter(id=task_id).update(
                status=TaskStatus.WAITING,
                waiting_on=blockers,
                waiting_request=_request_json(request),
                waiting_since=task.waiting_since or timezone.now(),
            )
            return ", ".join(
                f"{b['type']} {b['interval']} of {b['task']} (priority {b['priority']})"
                for b in blockers
            )
        victims = [lock for spec, lock in pairs if any(spec is r for r in decision.revoke)]
        if victims:
            _log_revocation(victims, by=task)
        reusable = locking.find_reusable(request, [spec for spec, _ in pairs])
        new_lock = new_version = None
        if reusable is not None:
            lock = next(lock for spec, lock in pairs if spec is reusable)
        else:
            if request.granularity == locking.SEGMENT:
                lock_version = request.version or ""
            else:
                lock_version = _next_version(reads.datasource)
                new_version = (reads.datasource.id, lock_version)
            new_lock = {
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
        granted = lockbox_sql.grant_writes(
            revoke=[v.id for v in victims],
            revoked_by=task_id,
            datasource_version=new_version,
            new_lock=new_lock,
            resume_task=(
                task_id if task.status == TaskStatus.WAITING or task.has_waiting_request else None
            ),
        )
        return granted or lock


def _queued_before(
    queued: list[tuple[str, str, dict]], request: locking.LockSpec
) -> list[tuple[locking.LockSpec, str]]:
    """The earlier queued requests of other groups that overlap `request`, with their tasks."""
    out = []
    for other_id, group_id, data in queued:
        spec = _request_from_json(group_id, request.datasource, data)
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
