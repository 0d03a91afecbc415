"""Every write to the metastore goes through a function here.

Each service owns its transaction. Lock decisions, allocation and publish for
one dataSource are serialized on that dataSource's lock (on PostgreSQL a
transaction-level advisory lock on its id, see `lockbox_sql._locked`; on
SQLite, IMMEDIATE transactions serialize writers), so two workers can never
both be granted incompatible locks, and a lock cannot be revoked while its task
publishes. The pure rules live in `metastore.locking` and `metastore.timeline`.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from metastore import lockbox_sql, locking
from metastore.intervals import Interval, format_ts, parse_ts
from metastore.models import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    NON_ROOT_PARTITION_START,
    CommitKind,
    CommitLogEntry,
    DataSource,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
)
from metastore.selectors import last_commit_seq
from metastore.specs import SpecError, TaskSpec, validate_task_spec

log = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 0.2


class ServiceError(Exception):
    """A write was refused; the message is for people."""


class LockTimeout(ServiceError):
    pass


class LockRevoked(ServiceError):
    pass


class TaskCanceled(ServiceError):
    pass


class PublishError(ServiceError):
    pass


# --- helpers ------------------------------------------------------------------


def _datasource_for_update(name: str) -> DataSource:
    """The dataSource's row, its lock held until the surrounding transaction ends."""
    ds = lockbox_sql.datasource_for_update(name)
    if ds is not None:
        return ds
    # First use of this dataSource: create its row outside this transaction's
    # fate (a savepoint), tolerating a concurrent creator.
    with contextlib.suppress(IntegrityError), transaction.atomic():
        DataSource.objects.create(name=name)
    return lockbox_sql.datasource_for_update(name)


def _next_version(ds: DataSource) -> str:
    """A major version above every version ever handed out on this dataSource
    (the caller records it as the dataSource's `last_version`)."""
    candidate = format_ts(timezone.now())
    if candidate <= ds.last_version:
        candidate = format_ts(parse_ts(ds.last_version) + timedelta(milliseconds=1))
    ds.last_version = candidate
    return candidate


def _lock_spec(lock: TaskLock) -> locking.LockSpec:
    return locking.LockSpec(
        group_id=lock.group_id,
        datasource=lock.datasource,
        interval=Interval(lock.start, lock.end),
        type=lock.type,
        priority=lock.priority,
        granularity=lock.granularity,
        partition=lock.partition,
        version=lock.version if lock.granularity == locking.SEGMENT else None,
        revoked=lock.revoked,
    )


def _request_json(request: locking.LockSpec) -> dict:
    return {
        "interval": str(request.interval),
        "type": request.type,
        "granularity": request.granularity,
        "priority": request.priority,
        "partition": request.partition,
        "version": request.version,
    }


def _request_from_json(group_id: str, datasource: str, data: dict) -> locking.LockSpec:
    return locking.LockSpec(
        group_id=group_id,
        datasource=datasource,
        interval=Interval.parse(data["interval"]),
        type=data["type"],
        priority=data["priority"],
        granularity=data["granularity"],
        partition=data.get("partition"),
        version=data.get("version"),
    )


def _revoked_reason(task_id: str) -> str | None:
    lock = (
        TaskLock.objects.filter(task_id=task_id, revoked=True).select_related("revoked_by").first()
    )
    if lock is None:
        return None
    by = lock.revoked_by
    who = f"task {by.id} (priority {by.priority})" if by else "a higher-priority task"
    return f"{lock.type} lock on {lock.interval} was revoked by {who}"


def new_task_id(task_type: str, datasource: str) -> str:
    """Druid-like id: `<type>_<dataSource>_<timestamp>_<random>`."""
    stamp = timezone.now().strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f"{task_type}_{datasource}_{stamp}_{secrets.token_hex(4)}"


# --- tasks --------------------------------------------------------------------

SUPPORTED_TASK_TYPES = ("index_parallel", "kill")


def task_validate(*, spec: dict) -> TaskSpec:
    """Validate a spec against this installation (input roots, supported types)."""
    validated = validate_task_spec(spec, input_roots=settings.STRATA_INPUT_ROOTS)
    ingestion = validated.ingestion
    if (
        ingestion is not None
        and ingestion.input.type == "druid"
        and not DataSource.objects.filter(name=ingestion.input.datasource).exists()
    ):
        raise SpecError(
            "spec.ioConfig.inputSource.dataSource",
            f"there is no dataSource {ingestion.input.datasource!r} to read",
        )
    if validated.type not in SUPPORTED_TASK_TYPES:
        raise SpecError(
            "type",
            f"{validated.type} tasks are not available yet; accepted: "
            f"{', '.join(SUPPORTED_TASK_TYPES)} (alias index)",
        )
    return validated


def task_create(
    *, spec: dict, task_type: str, datasource: str, user=None, enqueue: bool = True
) -> Task:
    """Record a task as PENDING (and queue it once committed). `spec` is already valid."""
    try:
        priority = locking.default_priority(task_type, spec.get("context") or {})
    except ValueError as exc:
        raise SpecError("context.priority", str(exc)) from None
    task_id = spec.get("id") or new_task_id(task_type, datasource)
    if not isinstance(task_id, str) or Task.objects.filter(id=task_id).exists():
        raise SpecError("id", f"task id {task_id!r} is taken or invalid")
    with transaction.atomic():
        task = Task.objects.create(
            id=task_id,
            type=task_type,
            datasource=datasource,
            spec=spec,
            priority=priority,
            group_id=spec.get("groupId") or task_id,
            submitted_by=user if (user is not None and user.is_authenticated) else None,
        )
        if enqueue:
            transaction.on_commit(lambda: _enqueue(task.id))
    return task


def task_submit(*, spec: dict, user=None) -> Task:
    """Validate a spec, record the task as PENDING and queue it once committed.

    Raises `SpecError` (nothing is created) for an invalid spec.
    """
    validated = task_validate(spec=spec)
    return task_create(
        spec=spec, task_type=validated.type, datasource=validated.datasource, user=user
    )


def _enqueue(task_id: str) -> None:
    from workers.tasks import run_task

    run_task.delay(task_id)


def task_claim(*, task_id: str, worker: str) -> bool:
    """Move a PENDING task to RUNNING. False if another delivery got it first."""
    now = timezone.now()
    claimed = Task.objects.filter(id=task_id, status=TaskStatus.PENDING).update(
        status=TaskStatus.RUNNING, started_at=now, heartbeat_at=now, worker=worker, phase="starting"
    )
    return claimed == 1


@dataclass(frozen=True)
class TaskSignals:
    """What a running task must react to."""

    cancel_requested: bool = False
    revoked_reason: str | None = None


def task_heartbeat(
    *, task_id: str, phase: str | None = None, progress: float | None = None
) -> TaskSignals:
    """Record that the task is alive (and its phase/progress); say if it must stop."""
    updates: dict = {"heartbeat_at": timezone.now()}
    if phase is not None:
        updates["phase"] = phase
    if progress is not None:
        updates["progress"] = max(0.0, min(1.0, float(progress)))
    Task.objects.filter(id=task_id, status__in=ACTIVE_STATUSES).update(**updates)
    row = Task.objects.filter(id=task_id).values("cancel_requested").first()
    return TaskSignals(
        cancel_requested=bool(row and row["cancel_requested"]),
        revoked_reason=_revoked_reason(task_id),
    )


def task_report_update(*, task_id: str, report: dict) -> None:
    Task.objects.filter(id=task_id).update(report=report)


def task_finish(*, task_id: str, status: str, error: str = "", report: dict | None = None) -> Task:
    """End a task: record its status and reason, and release every lock it holds."""
    if status not in FINAL_STATUSES:
        raise ValueError(f"{status} is not a final status")
    with transaction.atomic():
        task = Task.objects.select_for_update().get(id=task_id)
        TaskLock.objects.filter(task=task).delete()
        if task.status not in FINAL_STATUSES:
            task.status = status
            task.error = error
            task.ended_at = timezone.now()
            task.waiting_on = []
            task.waiting_request = None
            task.waiting_since = None
            if status == TaskStatus.SUCCESS:
                task.progress = 1.0
            if report is not None:
                task.report = report
            task.save()
    return task


def task_cancel(*, task_id: str, user=None) -> Task:
    """Cancel a task: a PENDING one ends now; a running one is told to stop."""
    with transaction.atomic():
        task = Task.objects.select_for_update().get(id=task_id)
        if task.status in FINAL_STATUSES:
            raise ServiceError(f"task {task_id} already ended ({task.status})")
        who = user.get_username() if user is not None and user.is_authenticated else "system"
        if task.status == TaskStatus.PENDING:
            task.status = TaskStatus.CANCELED
            task.error = f"canceled by {who} before it started"
            task.ended_at = timezone.now()
            task.cancel_requested = True
            task.save()
            TaskLock.objects.filter(task=task).delete()
        else:
            task.cancel_requested = True
            task.save(update_fields=["cancel_requested"])
    return task


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


def _lock_request(
    task: Task,
    interval: Interval,
    lock_type: str,
    granularity: str,
    partition: int | None,
    version: str | None,
) -> locking.LockSpec:
    return locking.LockSpec(
        group_id=task.group_id,
        datasource=task.datasource,
        interval=interval,
        type=lock_type,
        priority=task.priority,
        granularity=granularity,
        partition=partition,
        version=version,
    )


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


def _blocker(spec: locking.LockSpec, lock: TaskLock | None, queued_task: str | None = None) -> dict:
    """What a waiting task shows it waits on: a held lock, or an earlier queued request."""
    return {
        "lock": lock.id if lock else None,
        "task": lock.task_id if lock else queued_task,
        "type": spec.type,
        "granularity": spec.granularity,
        "interval": str(spec.interval),
        "priority": spec.priority,
        "queued": lock is None,
    }


def _revoke(victims: list[TaskLock], *, by: Task) -> None:
    lockbox_sql.grant_writes(revoke=[v.id for v in victims], revoked_by=by.id)
    _log_revocation(victims, by=by)


def _log_revocation(victims: list[TaskLock], *, by: Task | lockbox_sql.TaskState) -> None:
    log.info(
        "task %s (priority %s) revoked locks of %s",
        by.id,
        by.priority,
        sorted({v.task_id for v in victims}),
    )


def _resume(task: Task) -> None:
    """A granted task is no longer WAITING: clear what it waited on."""
    if task.status == TaskStatus.WAITING or task.waiting_request is not None:
        lockbox_sql.grant_writes(resume_task=task.id)


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


# --- allocation ---------------------------------------------------------------


@dataclass(frozen=True)
class Allocation:
    interval: Interval
    version: str
    partitions: tuple[int, ...]
    core_partitions: int
    append: bool
    minor_version: int = 0
    root_partitions: tuple[int, ...] | None = None  # overwrite by segment lock: union of inputs


@dataclass(frozen=True)
class AllocationRequest:
    """`count` segment identities wanted in `interval` under `sequence_name`."""

    interval: Interval
    count: int
    sequence_name: str = ""


def segments_allocate(
    *,
    task: Task,
    interval: Interval,
    count: int,
    append: bool,
    sequence_name: str = "",
    lock_granularity: str = locking.TIME_CHUNK,
) -> Allocation | None:
    """Hand out `count` segment identities in `interval` for `task`.

    Overwrite (append=False): the version of the task's time-chunk lock and
    partitions 0..count-1, which form the chunk's core set. Append: the chunk's
    used version, else the version appends still running there were given,
    else EPOCH (a fresh version if an EPOCH chunk was killed or abandoned), and
    partition numbers after the highest ever allocated there; the core set is
    unchanged. Idempotent per (task, sequence_name, interval).

    With `lock_granularity=SEGMENT` (appends under `forceTimeChunkLock: false`)
    the task needs no time-chunk lock: each allocated segment is locked with an
    EXCLUSIVE segment lock in the same transaction; if that must wait for
    another task's time-chunk lock, nothing is allocated and None is returned
    (the task is WAITING).
    """
    request = AllocationRequest(interval, count, sequence_name)
    if lock_granularity != locking.SEGMENT:
        return segments_allocate_many(task=task, requests=[request], append=append)[0]
    if not append:
        raise ServiceError("segment-locked overwrites use segments_allocate_overwrite")
    with transaction.atomic():
        ds, (chunk,) = _allocation_reads(task, [request], append=True)
        if chunk.existing:
            return _existing_allocation(ds, request, chunk.existing, append=True)
        version, core, next_partition = _append_target(interval, chunk.append)
        partitions = tuple(range(next_partition, next_partition + count))
        if not _segment_locks_for_new(Task.objects.get(id=task.id), interval, version, partitions):
            return None
        lockbox_sql.pending_insert(
            task_id=task.id,
            datasource=task.datasource,
            allocations=[(interval, version, partitions, sequence_name)],
            append=True,
        )
        return Allocation(interval, version, partitions, core, True)


def segments_allocate_many(
    *, task: Task, requests: Sequence[AllocationRequest], append: bool
) -> list[Allocation]:
    """`segments_allocate` for many chunks of a task that holds time-chunk locks,
    in one transaction: the allocations, in order, that calling it for each
    request in turn would give, for one critical section and two round trips.
    A task publishing hundreds of chunks allocates them all at once."""
    requests = list(requests)
    if not requests:
        return []
    with transaction.atomic():
        ds, chunks = _allocation_reads(task, requests, append=append)
        out: list[Allocation] = []
        done: dict[tuple[Interval, str], Allocation] = {}
        planned: dict[Interval, tuple[str, int, int]] = {}  # chunk -> (version, next, core)
        new_rows = []
        for request, chunk in zip(requests, chunks, strict=True):
            key = (request.interval, request.sequence_name)
            if key in done:
                out.append(done[key])
                continue
            if chunk.existing:
                done[key] = _existing_allocation(ds, request, chunk.existing, append=append)
                out.append(done[key])
                continue
            if chunk.lock_version is None:
                raise PublishError(f"task {task.id} holds no lock covering {request.interval}")
            if not append:
                if request.interval in planned:
                    raise ServiceError(
                        f"an overwrite allocates the core set of {request.interval} once; "
                        f"it was already asked for under another sequence name"
                    )
                version, partitions = chunk.lock_version, tuple(range(request.count))
                core = request.count
                planned[request.interval] = (version, request.count, core)
            else:
                if request.interval not in planned:
                    version, core, first = _append_target(request.interval, chunk.append)
                    planned[request.interval] = (version, first, core)
                version, first, core = planned[request.interval]
                partitions = tuple(range(first, first + request.count))
                planned[request.interval] = (version, first + request.count, core)
            new_rows.append((request.interval, version, partitions, request.sequence_name))
            done[key] = Allocation(request.interval, version, partitions, core, append)
            out.append(done[key])
        try:
            lockbox_sql.pending_insert(
                task_id=task.id,
                datasource=task.datasource,
                allocations=new_rows,
                append=append,
            )
        except IntegrityError as exc:
            # Only an overwrite can collide: its core set starts at partition 0.
            raise ServiceError(
                f"task {task.id} already allocated the core set of one of these chunks "
                f"under another sequence name; an overwrite allocates it once"
            ) from exc
        return out


def _allocation_reads(
    task: Task, requests: list[AllocationRequest], *, append: bool
) -> tuple[DataSource, list[lockbox_sql.ChunkReads]]:
    """Lock the dataSource (creating its row on first use) and read every request's chunk."""
    args = {
        "datasource": task.datasource,
        "task_id": task.id,
        "requests": [(r.interval, r.sequence_name) for r in requests],
        "append": append,
    }
    reads = lockbox_sql.allocation_reads(**args)
    if reads is None:  # the dataSource's first allocation: create its row, read again
        _datasource_for_update(task.datasource)
        reads = lockbox_sql.allocation_reads(**args)
    if not reads.task_exists:
        raise ServiceError(f"there is no task {task.id}")
    if reads.task_revoked:
        raise LockRevoked(_revoked_reason(task.id))
    return reads.datasource, reads.chunks


def _existing_allocation(
    ds: DataSource, request: AllocationRequest, existing: list[tuple[str, int]], *, append: bool
) -> Allocation:
    """What an earlier call with the same (task, sequence name, interval) was given."""
    version = existing[0][0]
    partitions = tuple(p for _, p in existing)
    if append:
        core = lockbox_sql.chunk_partitions(ds, request.interval, version)[0]
    else:
        core = len(partitions)
    return Allocation(request.interval, version, partitions, core, append)


def _segment_locks_for_new(task: Task, interval: Interval, version: str, partitions) -> bool:
    """Lock freshly allocated segments (inside the caller's critical section)."""
    held = list(
        TaskLock.objects.filter(
            datasource=task.datasource, start__lt=interval.end, end__gt=interval.start
        )
    )
    pairs = [(_lock_spec(lock), lock) for lock in held]
    to_revoke: list[TaskLock] = []
    requests = []
    for p in partitions:
        request = _lock_request(task, interval, locking.EXCLUSIVE, locking.SEGMENT, p, version)
        decision = locking.decide(request, [spec for spec, _ in pairs])
        if decision.kind == locking.WAIT:
            task.status = TaskStatus.WAITING
            task.waiting_on = [
                _blocker(blocking, next(lock for spec, lock in pairs if spec is blocking))
                for blocking in decision.blocking
            ]
            task.waiting_since = task.waiting_since or timezone.now()
            task.save(update_fields=["status", "waiting_on", "waiting_since"])
            return False
        to_revoke += [lock for spec, lock in pairs if any(spec is r for r in decision.revoke)]
        requests.append(request)
    if to_revoke:
        _revoke(to_revoke, by=task)
    seq = last_commit_seq(datasource=task.datasource)
    TaskLock.objects.bulk_create(
        [
            TaskLock(
                task=task,
                group_id=r.group_id,
                datasource=r.datasource,
                start=interval.start,
                end=interval.end,
                granularity=locking.SEGMENT,
                type=locking.EXCLUSIVE,
                version=version,
                priority=r.priority,
                partition=r.partition,
                granted_seq=seq,
            )
            for r in requests
        ]
    )
    _resume(task)
    return True


def segments_allocate_overwrite(
    *, task: Task, input_segment_ids: Sequence[str], count: int, sequence_name: str = ""
) -> Allocation:
    """Identities for segments that overwrite `input_segment_ids` inside their chunk
    (segment locks, `forceTimeChunkLock: false`): same major version, the next
    minor version, partition numbers from 32768, roots = union of the inputs' roots.
    The task must hold segment locks on every input."""
    with transaction.atomic():
        _datasource_for_update(task.datasource)
        reason = _revoked_reason(task.id)
        if reason:
            raise LockRevoked(reason)
        inputs = list(Segment.objects.filter(id__in=list(input_segment_ids), used=True))
        if len(inputs) != len(set(input_segment_ids)):
            raise ServiceError("some input segments are not used segments of this dataSource")
        chunks = {(s.start, s.end, s.version) for s in inputs}
        if len(chunks) != 1:
            raise ServiceError(
                "a segment-locked overwrite works inside one chunk (interval and version); "
                "changing granularity or versions needs time-chunk locks"
            )
        start, end, version = chunks.pop()
        locked = set(
            TaskLock.objects.filter(
                task=task, granularity=locking.SEGMENT, revoked=False, start=start, end=end
            ).values_list("partition", flat=True)
        )
        missing = [s.id for s in inputs if s.partition not in locked]
        if missing:
            raise ServiceError(f"task {task.id} holds no segment lock on {missing[0]}")
        interval = Interval(start, end)
        existing = list(
            PendingSegment.objects.filter(
                task=task,
                sequence_name=sequence_name,
                datasource=task.datasource,
                start=start,
                end=end,
                version=version,
            ).order_by("partition")
        )
        roots = tuple(sorted({r for s in inputs for r in (s.root_partitions or [s.partition])}))
        chunk = Segment.objects.filter(
            datasource__name=task.datasource, start=start, end=end, version=version
        )
        minor = (chunk.aggregate(m=Max("minor_version"))["m"] or 0) + 1
        core = chunk.aggregate(m=Max("core_partitions"))["m"] or 0
        if existing:
            partitions = tuple(p.partition for p in existing)
        else:
            highest = [
                chunk.filter(partition__gte=NON_ROOT_PARTITION_START).aggregate(m=Max("partition"))[
                    "m"
                ],
                PendingSegment.objects.filter(
                    datasource=task.datasource,
                    start=start,
                    end=end,
                    version=version,
                    partition__gte=NON_ROOT_PARTITION_START,
                ).aggregate(m=Max("partition"))["m"],
            ]
            first = max([h + 1 for h in highest if h is not None] + [NON_ROOT_PARTITION_START])
            partitions = tuple(range(first, first + count))
            lockbox_sql.pending_insert(
                task_id=task.id,
                datasource=task.datasource,
                allocations=[(interval, version, partitions, sequence_name)],
                append=False,
            )
        return Allocation(interval, version, partitions, core, False, minor, roots)


def _covering_lock(task: Task, interval: Interval) -> TaskLock:
    lock = (
        TaskLock.objects.filter(
            task=task,
            granularity=locking.TIME_CHUNK,
            revoked=False,
            start__lte=interval.start,
            end__gte=interval.end,
        )
        .order_by("created_at")
        .first()
    )
    if lock is None:
        raise PublishError(f"task {task.id} holds no lock covering {interval}")
    return lock


def _append_target(interval: Interval, target: lockbox_sql.AppendTarget) -> tuple[str, int, int]:
    """(version, core partitions, next partition number) for an append into interval."""
    if target.foreign_segment is not None:
        foreign = Segment.objects.get(id=target.foreign_segment)
        raise ServiceError(
            f"cannot append {interval}: the dataSource holds segment {foreign.id} over "
            f"{foreign.interval} at another segment granularity; append with that granularity"
        )
    return target.version, target.core, target.next_partition


# --- publish ------------------------------------------------------------------


@dataclass(frozen=True)
class NewSegment:
    """A segment a task wrote (or re-registers) and wants published."""

    interval: Interval
    version: str
    partition: int
    core_partitions: int
    location: str = ""
    num_rows: int = 0
    size_bytes: int = 0
    shard_spec: dict = field(default_factory=dict)
    minor_version: int = 0
    root_partitions: tuple[int, ...] | None = None
    atomic_update_group: tuple[int, ...] | None = None
    tombstone: bool = False
    upgraded_from: str = ""


def segments_publish(
    *, task: Task, segments: Sequence[NewSegment], note: str = ""
) -> CommitLogEntry:
    """Publish a task's segments atomically and release its locks.

    One transaction: every lock of the task must be held and unrevoked and
    every segment must be covered by the task's locks at a version it was
    given; the segments are inserted, one commit-log entry records them, and
    the task's locks are released. Any failure publishes nothing.

    Concurrent append and replace (SPEC §5): a REPLACE publish also copies
    every segment appended into its intervals after its lock was granted onto
    its version; an APPEND publish also copies its segments onto any newer
    version a replace committed meanwhile. Copies share the file, take
    partition numbers after the target chunk's core set and name
    `upgraded_from`.
    """
    with transaction.atomic():
        ds = _datasource_for_update(task.datasource)
        reason = _revoked_reason(task.id)
        if reason:
            raise LockRevoked(f"cannot publish: {reason}")
        task = Task.objects.select_for_update().get(id=task.id)
        if task.cancel_requested:
            raise TaskCanceled(f"task {task.id} was canceled")
        locks = list(TaskLock.objects.filter(task=task, revoked=False))
        allocated = set(
            PendingSegment.objects.filter(task=task).values_list(
                "start", "end", "version", "partition"
            )
        )
        # Overwrites inside a chunk (minor > 0) form one atomic update group per chunk.
        groups: dict[tuple, list[int]] = {}
        for seg in segments:
            if seg.minor_version > 0 and seg.atomic_update_group is None:
                key = (seg.interval, seg.version, seg.minor_version)
                groups.setdefault(key, []).append(seg.partition)
        rows = []
        for seg in segments:
            _check_covered(task, locks, allocated, seg)
            roots = list(seg.root_partitions or (seg.partition,))
            aug = seg.atomic_update_group
            if aug is None:
                aug = groups.get((seg.interval, seg.version, seg.minor_version), [seg.partition])
            rows.append(_segment_row(ds, task, seg, roots, list(aug)))
        rows += _replace_upgrades(ds, task, locks, rows)
        rows += _append_carry_overs(ds, task, locks, rows)
        try:
            Segment.objects.bulk_create(rows)
        except IntegrityError as exc:
            raise PublishError(f"cannot publish: a segment id already exists ({exc})") from None
        entry = CommitLogEntry.objects.create(
            datasource=ds.name,
            task=task,
            kind=CommitKind.PUBLISH,
            added=[r.id for r in rows],
            removed=[],
            note=note,
        )
        TaskLock.objects.filter(task=task).delete()
        return entry


def _check_covered(task: Task, locks: list[TaskLock], allocated: set, seg: NewSegment) -> None:
    where = f"{seg.interval} v{seg.version} p{seg.partition}"
    time_chunk = [
        lock
        for lock in locks
        if lock.granularity == locking.TIME_CHUNK
        and lock.start <= seg.interval.start
        and lock.end >= seg.interval.end
    ]
    segment_locks = [
        lock
        for lock in locks
        if lock.granularity == locking.SEGMENT
        and lock.start == seg.interval.start
        and lock.end == seg.interval.end
        and lock.version == seg.version
    ]
    key = (seg.interval.start, seg.interval.end, seg.version, seg.partition)
    if time_chunk:
        if key in allocated or any(lock.version == seg.version for lock in time_chunk):
            return
        raise PublishError(
            f"cannot publish {where}: that version and partition were not allocated to this task"
        )
    if segment_locks:
        if key not in allocated:
            raise PublishError(f"cannot publish {where}: it was not allocated to this task")
        if seg.minor_version == 0 and not any(
            lk.partition == seg.partition for lk in segment_locks
        ):
            raise PublishError(f"cannot publish {where}: task {task.id} holds no lock on it")
        return
    raise PublishError(f"cannot publish {where}: task {task.id} holds no lock covering it")


def _segment_row(ds: DataSource, task: Task, seg: NewSegment, roots, aug) -> Segment:
    return Segment(
        id=Segment.make_id(ds.name, seg.interval, seg.version, seg.partition),
        datasource=ds,
        start=seg.interval.start,
        end=seg.interval.end,
        version=seg.version,
        partition=seg.partition,
        minor_version=seg.minor_version,
        root_partitions=sorted(roots),
        atomic_update_group=sorted(aug),
        core_partitions=seg.core_partitions,
        tombstone=seg.tombstone,
        shard_spec=seg.shard_spec,
        size_bytes=seg.size_bytes,
        num_rows=seg.num_rows,
        location=seg.location,
        used=True,
        created_by=task,
        upgraded_from=seg.upgraded_from,
    )


def _copy_onto(
    ds: DataSource, task: Task, source: Segment, version: str, partition: int, core: int
) -> Segment:
    return Segment(
        id=Segment.make_id(ds.name, source.interval, version, partition),
        datasource=ds,
        start=source.start,
        end=source.end,
        version=version,
        partition=partition,
        minor_version=0,
        root_partitions=[partition],
        atomic_update_group=[partition],
        core_partitions=core,
        tombstone=False,
        shard_spec={**(source.shard_spec or {}), "partitionNum": partition},
        size_bytes=source.size_bytes,
        num_rows=source.num_rows,
        location=source.location,
        used=True,
        created_by=task,
        upgraded_from=source.upgraded_from or source.id,
    )


def _next_free(ds: DataSource, interval: Interval, version: str, taken: dict, core: int) -> int:
    key = (interval.start, interval.end, version)
    if key not in taken:
        taken[key] = max(lockbox_sql.chunk_partitions(ds, interval, version)[1], core)
    value = taken[key]
    taken[key] = value + 1
    return value


def _replace_upgrades(ds: DataSource, task: Task, locks: list[TaskLock], new_rows) -> list[Segment]:
    replace_locks = [lk for lk in locks if lk.type == locking.REPLACE]
    if not replace_locks:
        return []
    since = min(lk.granted_seq for lk in replace_locks)
    committed_at: dict[str, int] = {}
    for seq, added in (
        CommitLogEntry.objects.filter(datasource=ds.name, seq__gt=since, kind=CommitKind.PUBLISH)
        .exclude(task=task)
        .values_list("seq", "added")
    ):
        for seg_id in added or []:
            committed_at[seg_id] = seq
    if not committed_at:
        return []
    cores: dict[tuple, int] = {}
    taken: dict = {}
    for row in new_rows:
        key = (row.start, row.end, row.version)
        cores[key] = max(cores.get(key, 0), row.core_partitions)
    for row in new_rows:
        key = (row.start, row.end, row.version)
        if row.partition < NON_ROOT_PARTITION_START:
            taken[key] = max(taken.get(key, 0), row.partition + 1, cores[key])
    out = []
    candidates = Segment.objects.filter(id__in=list(committed_at), used=True, tombstone=False)
    # An append and the copy it carried onto a newer version are one set of rows:
    # upgrade each original once (its newest copy).
    newest: dict[str, Segment] = {}
    for source in candidates.order_by("version"):
        newest[source.upgraded_from or source.id] = source
    for source in sorted(newest.values(), key=lambda s: (s.start, s.partition)):
        lock = next(
            (
                lk
                for lk in replace_locks
                if lk.start <= source.start
                and lk.end >= source.end
                and lk.granted_seq < committed_at[source.id]
            ),
            None,
        )
        if lock is None or source.version >= lock.version:
            continue
        if (source.start, source.end, lock.version) not in cores:
            overlapping = [
                row
                for row in new_rows
                if row.version == lock.version and row.start < source.end and row.end > source.start
            ]
            if overlapping:
                # The replace's chunks cut across the append's: no copy can carry it
                # onto the new version, and publishing would hide its rows.
                raise PublishError(
                    f"cannot publish: {source.id} was appended during this replace at "
                    "another segment granularity; its rows would be hidden. Run the "
                    "replace again (it will read them) or append at the replace's granularity"
                )
            # The replace wrote nothing over this chunk: the append stays visible as is.
            continue
        core = cores[(source.start, source.end, lock.version)]
        partition = _next_free(ds, source.interval, lock.version, taken, core)
        out.append(_copy_onto(ds, task, source, lock.version, partition, core))
    return out


def _append_carry_overs(
    ds: DataSource, task: Task, locks: list[TaskLock], new_rows
) -> list[Segment]:
    if not any(lk.type == locking.APPEND for lk in locks):
        return []
    out = []
    taken: dict = {}
    cores: dict = {}
    for row in new_rows:
        if row.tombstone or row.minor_version > 0:
            continue
        newer = (
            Segment.objects.filter(
                datasource=ds, used=True, start=row.start, end=row.end, version__gt=row.version
            )
            .order_by("-version")
            .values_list("version", flat=True)
            .first()
        )
        if newer is None:
            continue
        key = (row.start, row.end, newer)
        if key not in cores:  # one read per chunk: its core set and next free number
            cores[key], taken[key] = lockbox_sql.chunk_partitions(ds, row.interval, newer)
        partition = _next_free(ds, row.interval, newer, taken, cores[key])
        out.append(_copy_onto(ds, task, row, newer, partition, cores[key]))
    return out


# --- mark used / unused ---------------------------------------------------------


def _segments_matching(
    datasource: str, interval: Interval | None, segment_ids: Iterable[str] | None
):
    qs = Segment.objects.filter(datasource__name=datasource)
    if segment_ids is not None:
        qs = qs.filter(id__in=list(segment_ids))
    if interval is not None:
        qs = qs.filter(start__gte=interval.start, end__lte=interval.end)
    return qs


def segments_mark_used(
    *,
    datasource: str,
    used: bool,
    interval: Interval | None = None,
    segment_ids: Iterable[str] | None = None,
    user=None,
) -> CommitLogEntry | None:
    """Mark segments (in an interval, or by id) used or unused; one commit entry."""
    if interval is None and segment_ids is None:
        raise ServiceError("give an interval or segment_ids")
    with transaction.atomic():
        ds = _datasource_for_update(datasource)
        ids = list(
            _segments_matching(ds.name, interval, segment_ids)
            .filter(used=not used)
            .values_list("id", flat=True)
        )
        if not ids:
            return None
        Segment.objects.filter(id__in=ids).update(used=used, used_status_updated_at=timezone.now())
        return CommitLogEntry.objects.create(
            datasource=ds.name,
            user=user if user is not None and getattr(user, "is_authenticated", False) else None,
            kind=CommitKind.MARK_USED if used else CommitKind.MARK_UNUSED,
            added=ids if used else [],
            removed=[] if used else ids,
        )


def segments_kill(*, task: Task, interval: Interval) -> tuple[CommitLogEntry | None, list[str]]:
    """Delete the unused segments lying inside `interval` (rows now, files by the
    caller): returns the commit entry and the file locations no segment uses any
    more. The task must hold a time-chunk lock covering the interval."""
    with transaction.atomic():
        ds = _datasource_for_update(task.datasource)
        reason = _revoked_reason(task.id)
        if reason:
            raise LockRevoked(reason)
        _covering_lock(task, interval)
        doomed = list(
            Segment.objects.filter(
                datasource=ds, used=False, start__gte=interval.start, end__lte=interval.end
            ).values_list("id", "location")
        )
        if not doomed:
            TaskLock.objects.filter(task=task).delete()
            return None, []
        ids = [seg_id for seg_id, _ in doomed]
        locations = {loc for _, loc in doomed if loc}
        # Upgraded copies and re-registered segments share files: keep those still referenced.
        shared = set(
            Segment.objects.filter(location__in=locations)
            .exclude(id__in=ids)
            .values_list("location", flat=True)
        )
        Segment.objects.filter(id__in=ids).delete()
        entry = CommitLogEntry.objects.create(
            datasource=ds.name,
            task=task,
            kind=CommitKind.KILL,
            added=[],
            removed=ids,
            note=f"killed {len(ids)} unused segments in {interval}",
        )
        TaskLock.objects.filter(task=task).delete()
        return entry, sorted(locations - shared)


def segment_admin_update(*, segment: Segment, fields: dict, user=None) -> CommitLogEntry:
    """An admin edit of a segment's metadata, recorded in the commit log."""
    editable = {"used", "shard_spec", "location"}
    unknown = set(fields) - editable
    if unknown:
        raise ServiceError(
            f"fields {sorted(unknown)} cannot be edited; editable: {sorted(editable)}"
        )
    with transaction.atomic():
        ds = _datasource_for_update(segment.datasource.name)
        before = Segment.objects.get(id=segment.id)
        for name, value in fields.items():
            setattr(before, name, value)
        if "used" in fields:
            before.used_status_updated_at = timezone.now()
        before.save()
        added, removed = [], []
        if "used" in fields:
            (added if fields["used"] else removed).append(segment.id)
        return CommitLogEntry.objects.create(
            datasource=ds.name,
            user=user if user is not None and getattr(user, "is_authenticated", False) else None,
            kind=CommitKind.ADMIN_EDIT,
            added=added,
            removed=removed,
            note=f"admin edit of {segment.id}: {', '.join(sorted(fields))}",
        )
