"""The lock box: lock decisions (grant, revoke, wait) and release."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

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
    LOCK_WAKE_FALLBACK_SECONDS,
    Blocker,
    LockRevoked,
    LockTimeout,
    ServiceError,
    _log_revocation,
    _next_version,
    _refuse_inactive,
    _revoked_reason,
    datasource_for_update,
    lock_request_json,
    lock_request_of,
    lock_spec,
    lock_spec_of,
)
from metastore.timeline import SegmentRef

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


def segment_locks_acquire(
    *,
    task: Task,
    segments: Sequence[SegmentRef],
    lock_type: str = locking.EXCLUSIVE,
    timeout_ms: int | None = None,
) -> list[TaskLock]:
    """Segment locks for `task` on every one of `segments` (each names its
    interval, partition and version) in one decision: all or nothing, as
    `locks_acquire`. The task never holds some of them while it waits for the
    others, so two tasks asking for overlapping sets, in whatever order, never
    wait on each other. The locks come back in the order of `segments`."""
    if not segments:
        return []
    requests = [
        lock_request_of(task, s.interval, lock_type, locking.SEGMENT, s.partition, s.version)
        for s in segments
    ]
    return _acquire(task, requests, timeout_ms)


@dataclass(frozen=True)
class LockResult:
    """What one lock box decision did with a task's requests.

    GRANTED: `held` are the task's locks granting them, in the order of the
    requests. WAITING: nothing was granted or revoked; the task is WAITING on
    `blockers` (held locks and earlier queued requests)."""

    outcome: locking.Outcome
    held: tuple[TaskLock, ...] = ()
    blockers: tuple[Blocker, ...] = ()

    @property
    def granted(self) -> bool:
        return self.outcome == locking.Outcome.GRANTED

    def blocked_by(self) -> str:
        return ", ".join(b.describe() for b in self.blockers)


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
    listening = False
    try:
        while True:
            result = lock_decide(task_id=task.id, requests=requests)
            if result.granted:
                return list(result.held)
            now = time.monotonic()
            if now >= deadline:
                _clear_waiting(task.id)
                what = ", ".join(str(r.interval) for r in requests)
                raise LockTimeout(
                    f"timed out after {timeout_ms} ms waiting for a {requests[0].type} lock "
                    f"on {what}; blocked by {result.blocked_by()}"
                )
            # Woken by a release or a move of the queue (PostgreSQL LISTEN/NOTIFY),
            # deciding again at least every LOCK_WAKE_FALLBACK_SECONDS in case a
            # wake-up was missed; elsewhere (SQLite) polling every LOCK_POLL_SECONDS.
            if not listening:
                listening = lockbox_sql.listen()
                if listening:
                    continue  # decide again: any release from now on is notified
            fallback = LOCK_WAKE_FALLBACK_SECONDS if listening else LOCK_POLL_SECONDS
            lockbox_sql.wait_for_release(requests[0].datasource, min(fallback, deadline - now))
    finally:
        if listening:
            lockbox_sql.unlisten()


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
    if not requests:
        return []
    result = lock_decide(task_id=task.id, requests=requests)
    return list(result.held) if result.granted else None


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
    result = lock_decide(task_id=task.id, requests=[request])
    return result.held[0] if result.granted else None


def lock_decide(*, task_id: str, requests: Sequence[locking.LockSpec]) -> LockResult:
    """The lock box's one decision path: every lock any task takes, time-chunk or
    segment (segment allocation locks what it allocates through here too), is
    decided by `locking.decide_all` on all of `requests` at once, against the
    locks held on the dataSource and the requests of other groups queued before
    the task (first come, first served), inside the dataSource's critical
    section. Granted: the victims are revoked and the locks written. Waiting:
    the task is WAITING, queued with its request, nothing else changes.

    One round trip reads (`decision_reads`), one writes (`grant_writes`) and,
    in a transaction of its own on PostgreSQL, commits, letting the
    dataSource's lock go before its WAL flush and returning after it
    (`lockbox_sql._locked`'s `async_commit`). Inside a caller's transaction
    (allocation) it joins it.
    """
    requests = list(requests)
    datasource = requests[0].datasource
    intervals = [r.interval for r in requests]
    commit = lockbox_sql.commits_with_last_write()
    with transaction.atomic():
        reads = lockbox_sql.decision_reads(
            datasource=datasource, task_id=task_id, intervals=intervals, async_commit=commit
        )
        if reads is None:  # the dataSource's first lock: create its row, then read again
            datasource_for_update(datasource)
            reads = lockbox_sql.decision_reads(
                datasource=datasource, task_id=task_id, intervals=intervals, async_commit=commit
            )
        task = reads.task
        if task is None:
            raise ServiceError(f"there is no task {task_id}")
        _refuse_inactive(task_id, task.status, task.cancel_requested)
        if any(lock.task_id == task_id and lock.revoked for lock in reads.locks):
            raise LockRevoked(_revoked_reason(task_id))
        held = [(lock_spec_of(lock), lock) for lock in reads.locks if lock.datasource == datasource]
        queued = _queued_before(reads.queued, datasource)
        decision = locking.decide_all(requests, [sp for sp, _ in held], [q for q, _ in queued])
        if decision.outcome == locking.Outcome.WAITING:
            blockers = tuple(_blocker_of(spec, held, queued) for spec in decision.blockers)
            _wait(task_id, task, requests, blockers)
            return LockResult(locking.Outcome.WAITING, blockers=blockers)
        return _grant(task, requests, decision, held, reads, commit)


def _blocker_of(spec: locking.LockSpec, held: list, queued: list) -> Blocker:
    lock = next((lock for s, lock in held if s is spec), None)
    return Blocker.of(spec, lock, next((tid for s, tid in queued if s is spec), None))


def _wait(task_id: str, task, requests: list[locking.LockSpec], blockers) -> None:
    """Record the task WAITING on `blockers`, queued with its request; a task
    already waiting on the same is not written again (a waiter decides again on
    every wake-up, and most find nothing changed)."""
    waiting = lock_request_json(requests[0])
    if len(requests) > 1:  # one request on several intervals, queued on each
        waiting["intervals"] = [str(r.interval) for r in requests]
    waiting_on = [b.as_json() for b in blockers]
    if (
        task.status == TaskStatus.WAITING
        and task.waiting_on == waiting_on
        and task.waiting_request == waiting
    ):
        return
    Task.objects.filter(id=task_id).update(
        status=TaskStatus.WAITING,
        waiting_on=waiting_on,
        waiting_request=waiting,
        waiting_since=task.waiting_since or timezone.now(),
    )


def _grant(task, requests, decision: locking.BoxDecision, held, reads, commit) -> LockResult:
    victims = [lock for spec, lock in held if any(spec is r for r in decision.revoke)]
    new_locks = []
    for request, reusable in zip(requests, decision.reuse, strict=True):
        if reusable is not None:
            continue
        if request.granularity == locking.SEGMENT:
            lock_version = request.version or ""
        else:
            lock_version = _next_version(reads.datasource)
        new_locks.append(_new_lock(task.id, request, lock_version, reads.last_commit_seq))
    if victims:
        _log_revocation(victims, by=task)
    new_version = None
    if any(lk["granularity"] != locking.SEGMENT for lk in new_locks):
        new_version = (reads.datasource.id, reads.datasource.last_version)
    resume = task.status == TaskStatus.WAITING or task.has_waiting_request
    granted = iter(
        lockbox_sql.grant_writes(
            task_id=task.id,
            revoke=[v.id for v in victims],
            datasource_version=new_version,
            new_locks=new_locks,
            resume_task=task.id if resume else None,
            commit=commit,
            # A waiter granted leaves the queue; a revoked lock blocks nobody now.
            notify=reads.datasource.name if resume or victims else None,
        )
    )
    locks = tuple(
        next(granted) if reusable is None else next(lk for sp, lk in held if sp is reusable)
        for reusable in decision.reuse
    )
    return LockResult(locking.Outcome.GRANTED, held=locks)


def _new_lock(task_id: str, request: locking.LockSpec, version: str, seq: int) -> dict:
    return {
        "task_id": task_id,
        "group_id": request.group_id,
        "datasource": request.datasource,
        "start": request.interval.start,
        "end": request.interval.end,
        "granularity": request.granularity,
        "type": request.type,
        "version": version,
        "priority": request.priority,
        "partition": request.partition,
        "revoked": False,
        "revoked_by_id": None,
        "granted_seq": seq,
        "created_at": timezone.now(),
    }


def _queued_before(
    queued: list[tuple[str, str, dict]], datasource: str
) -> list[tuple[locking.LockSpec, str]]:
    """The earlier queued requests of other groups, with their tasks."""
    out = []
    for other_id, group_id, data in queued:
        # A multi-interval waiter is queued on every one of its intervals.
        for interval in data.get("intervals") or [data["interval"]]:
            spec = lock_spec(
                group_id=group_id,
                datasource=datasource,
                interval=interval,
                lock_type=data["type"],
                priority=data["priority"],
                granularity=data["granularity"],
                partition=data.get("partition"),
                version=data.get("version"),
            )
            out.append((spec, other_id))
    return out


def _clear_waiting(task_id: str) -> None:
    """A waiter gives up (timed out): it leaves the queue others may wait behind."""
    with transaction.atomic():
        task = Task.objects.filter(id=task_id, status=TaskStatus.WAITING)
        datasource = task.values_list("datasource", flat=True).first()
        task.update(
            status=TaskStatus.RUNNING, waiting_on=[], waiting_request=None, waiting_since=None
        )
        if datasource is not None:
            lockbox_sql.notify_release(datasource)


def lock_release(*, lock_id: int) -> None:
    lockbox_sql.lock_delete(lock_id)


def locks_release_all(*, task_id: str) -> int:
    with transaction.atomic():
        locks = TaskLock.objects.filter(task_id=task_id)
        datasources = set(locks.values_list("datasource", flat=True))
        deleted, _ = locks.delete()
        for datasource in datasources:
            lockbox_sql.notify_release(datasource)
    return deleted
