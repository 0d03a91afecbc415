"""Task lifecycle: validate, create, submit, claim, heartbeat, finish, cancel."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from metastore import lockbox_sql, locking
from metastore.druid.errors import SpecError
from metastore.druid.ingestion import drop_existing_chunks
from metastore.druid.names import validate_task_id
from metastore.druid.tasks import TaskSpec, validate_task_spec
from metastore.models import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    CommitKind,
    CommitLogEntry,
    DataSource,
    Task,
    TaskLock,
    TaskStatus,
)
from metastore.services._common import (
    ServiceError,
    _chunks_text,
    _revoked_reason,
    new_task_id,
)
from metastore.services.allocation import pending_segments_prune

log = logging.getLogger(__name__)

# --- tasks --------------------------------------------------------------------

SUPPORTED_TASK_TYPES = locking.TASK_TYPES


class TaskIdTaken(SpecError):
    """A spec's `id` names a task that exists (the REST API answers 409)."""


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
            f"{', '.join(SUPPORTED_TASK_TYPES)} (alias {locking.INDEX_ALIAS})",
        )
    task_lock_mode(validated)  # a context whose locks mean nothing is refused now
    return validated


def task_lock_mode(validated: TaskSpec) -> locking.LockMode:
    """The lock type and granularity of a validated task (`locking.lock_mode`)."""
    context = validated.context
    append = validated.ingestion is not None and validated.ingestion.append_to_existing
    try:
        return locking.lock_mode(
            task_type=validated.type,
            append=append,
            force_time_chunk_lock=context.force_time_chunk_lock,
            use_concurrent_locks=context.use_concurrent_locks,
            task_lock_type=context.task_lock_type,
        )
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise SpecError(f"context.{field}", message) from None


def task_create(
    *, spec: dict, task_type: str, datasource: str, user=None, enqueue: bool = True
) -> Task:
    """Record a task as PENDING (and queue it once committed). `spec` is already valid."""
    try:
        priority = locking.default_priority(task_type, spec.get("context") or {})
    except ValueError as exc:
        raise SpecError("context.priority", str(exc)) from None
    if spec.get("id") is not None:
        task_id = validate_task_id(spec["id"], "id")
    else:
        task_id = new_task_id(task_type, datasource)
    if spec.get("groupId") is not None:
        validate_task_id(spec["groupId"], "groupId")
    if Task.objects.filter(id=task_id).exists():
        raise TaskIdTaken("id", f"task id {task_id!r} is taken")
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
            transaction.on_commit(lambda: task_enqueue(task_id=task.id))
    return task


def task_submit(*, spec: dict, user=None) -> Task:
    """Validate a spec, record the task as PENDING and queue it once committed.

    Raises `SpecError` (nothing is created) for an invalid spec.
    """
    validated = task_validate(spec=spec)
    return task_create(
        spec=spec, task_type=validated.type, datasource=validated.datasource, user=user
    )


# The worker's Celery task, by name: the metastore does not import the workers.
RUN_TASK = "workers.tasks.run_task"


def _broker_send(task_id: str) -> None:
    current_app.send_task(RUN_TASK, args=[task_id])


def _no_send(task_id: str) -> None:
    pass


# How `task_enqueue` sends a task's message; `task_enqueuer` swaps it.
_sender: list[Callable[[str], None]] = [_broker_send]


@contextmanager
def task_enqueuer(send: Callable[[str], None] | None) -> Iterator[None]:
    """Within the block, `task_enqueue` hands each task id to `send` instead of the broker.

    `send=None` keeps tasks off the queue: they are recorded PENDING and nothing
    runs them unless the caller does (`workers.runner.run_task`), which is how
    tests, benchmarks and one-process scripts run a task without a worker. The
    swap is process-wide (a live test server's threads see it too) and is undone
    when the block ends. A `send` that raises is a broker outage to `task_enqueue`.
    """
    previous = _sender[0]
    _sender[0] = send if send is not None else _no_send
    try:
        yield
    finally:
        _sender[0] = previous


def task_enqueue(*, task_id: str) -> bool:
    """Send a recorded task's message to the broker; False if the broker is down.

    The task row is already committed: a broker outage must not turn a recorded
    task into a server error. It stays PENDING and the reaper queues it again
    once the broker answers (`workers.reaper.requeue_lost_tasks`). A duplicate
    message is harmless: the worker claims a task once."""
    try:
        _sender[0](task_id)
    except Exception as exc:  # kombu's OperationalError, a socket error, a timeout
        log.warning(
            "could not queue task %s (%s: %s); it stays PENDING and is queued again "
            "when the broker answers",
            task_id,
            type(exc).__name__,
            exc,
        )
        return False
    return True


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
    # Set when the task already ended (e.g. failed by the reaper while its worker
    # was unreachable): the worker must stop it and publish nothing.
    ended_reason: str | None = None


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
    row = Task.objects.filter(id=task_id).values("cancel_requested", "status", "error").first()
    ended = None
    if row is None:
        ended = "the task no longer exists"
    elif row["status"] in FINAL_STATUSES:
        ended = f"the task already ended {row['status']}: {row['error']}".rstrip(": ")
    return TaskSignals(
        cancel_requested=bool(row and row["cancel_requested"]),
        revoked_reason=_revoked_reason(task_id),
        ended_reason=ended,
    )


def task_report_update(*, task_id: str, report: dict) -> None:
    Task.objects.filter(id=task_id).update(report=report)


def task_finish(*, task_id: str, status: str, error: str = "", report: dict | None = None) -> Task:
    """End a task: record its status and reason, and release every lock it holds.

    SUCCESS is refused (`ServiceError`, nothing changes) for a replace with
    dropExisting that never published: its old rows would stay visible."""
    if status not in FINAL_STATUSES:
        raise ValueError(f"{status} is not a final status")
    with transaction.atomic():
        task = Task.objects.select_for_update().get(id=task_id)
        if status == TaskStatus.SUCCESS and task.status not in FINAL_STATUSES:
            _refuse_success_without_publish(task)
        released = TaskLock.objects.filter(task=task).delete()[0]
        if released or task.status == TaskStatus.WAITING:  # its locks, or its place in a queue
            lockbox_sql.notify_release(task.datasource)
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
            pending_segments_prune(task_id=task.id)
    return task


def _refuse_success_without_publish(task: Task) -> None:
    """A replace with dropExisting that ends SUCCESS has published rows or a
    tombstone into every chunk of its intervals (each publish is checked for it):
    one that never published would leave visible every row it was asked to drop
    (Druid #18099), so it cannot end SUCCESS."""
    chunks = drop_existing_chunks(task.spec)
    if chunks and not CommitLogEntry.objects.filter(task=task, kind=CommitKind.PUBLISH).exists():
        raise ServiceError(
            f"task {task.id} cannot end SUCCESS: it replaces {_chunks_text(chunks)} with "
            "dropExisting but published nothing there (neither rows nor tombstones), which "
            "would leave the rows it was asked to drop visible"
        )


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
            task.cancel_requested_at = task.ended_at
            task.save()
            TaskLock.objects.filter(task=task).delete()
        elif not task.cancel_requested:  # a repeated request keeps the first one's time
            task.cancel_requested = True
            task.cancel_requested_at = timezone.now()
            task.save(update_fields=["cancel_requested", "cancel_requested_at"])
    return task
