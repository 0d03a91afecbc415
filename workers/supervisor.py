"""Supervising a task that runs in a slot process (`workers.slots`), from the
Celery thread that claimed it.

The task's own monitor (in the slot process) heartbeats it and stops its Spark
jobs on a cancel or a revoked lock; this side watches the same signals from
outside and, when the task has not ended STRATA_TASK_STOP_GRACE_SECONDS after
one, kills its process and ends it here (`end_stopped_task`). It also notices a
slot process that died under its task (a crashed driver) and fails the task
with the reason. What the stop did is kept in the task's report under "stop".
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from metastore import services
from metastore.models import CommitKind, CommitLogEntry, Task, TaskStatus
from metastore.task_logs import task_log_path
from workers.cleanup import remove_task_leftovers
from workers.slots import POOL, SlotProcess, copy_driver_log, driver_failure, log_size
from workers.steps import retrying_db

log = logging.getLogger("workers.runner")


@dataclass
class Stop:
    """A stop of a running task: what asked for it and when, and how it went."""

    status: str
    reason: str
    requested_at: datetime
    phase: str
    noticed: float = field(default_factory=time.monotonic)
    escalation: list[str] = field(default_factory=list)

    def report(self) -> dict:
        waited = (timezone.now() - self.requested_at).total_seconds()
        return {
            "reason": self.reason,
            "requestedAt": self.requested_at.isoformat().replace("+00:00", "Z"),
            "phase": self.phase,
            "seconds": round(waited, 3),
            "killed": bool(self.escalation),
            "escalation": self.escalation,
        }


@dataclass(eq=False)
class Supervision:
    task_id: str
    slot: SlotProcess
    stop: Stop | None = None
    handed: bool = False
    log_start: int = 0  # where the driver JVM's log stood when the task began
    log_copied: int = 0  # how far of it is in the task's log
    terminate_reason: str = ""

    def copy_driver_log(self, *, final: bool = False) -> None:
        """Bring the task's log up to date with its driver JVM's output."""
        self.log_copied = copy_driver_log(
            self.slot.jvm_log_path, self.log_copied, task_log_path(self.task_id), final=final
        )


_RUNNING: dict[str, Supervision] = {}
_RUNNING_LOCK = threading.Lock()


def supervised_task_ids() -> list[str]:
    with _RUNNING_LOCK:
        return list(_RUNNING)


def terminate_supervised(reason: str) -> None:
    """Fail every task this process supervises (the worker is shutting down):
    each is stopped as a cancel is, its process killed after the grace."""
    with _RUNNING_LOCK:
        for supervision in _RUNNING.values():
            supervision.terminate_reason = reason


def run_in_slot(task_id: str) -> None:
    """Run a claimed task in a slot process and see it to its end."""
    slot = POOL.acquire()
    slot.trim_logs(settings.STRATA_TASK_LOG_MAX_BYTES)
    start = log_size(slot.jvm_log_path)
    sup = Supervision(task_id=task_id, slot=slot, log_start=start, log_copied=start)
    with _RUNNING_LOCK:
        _RUNNING[task_id] = sup
    try:
        _supervise(sup)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.pop(task_id, None)


def _supervise(sup: Supervision) -> None:
    interval = settings.STRATA_HEARTBEAT_SECONDS
    grace = settings.STRATA_TASK_STOP_GRACE_SECONDS
    next_beat = 0.0
    if not sup.slot.ready:
        _beat(sup.task_id, phase="starting the slot's driver")
    while True:
        if sup.slot.ready and not sup.handed and sup.stop is None:
            sup.slot.send({"run": sup.task_id})
            sup.handed = True
        message = sup.slot.receive(timeout=0.2)
        if message is not None and message.get("done") == sup.task_id:
            sup.copy_driver_log(final=True)
            _ended_in_slot(sup, driver_exited=bool(message.get("driver_exited")))
            return
        if not sup.slot.alive and sup.slot.receive(timeout=0) is None:
            sup.copy_driver_log(final=True)
            _slot_died(sup)
            return
        now = time.monotonic()
        if now >= next_beat:
            next_beat = now + interval
            sup.copy_driver_log()
            signals = _beat(sup.task_id)
            if sup.stop is None:
                sup.stop = _stop_for(sup, signals)
                if sup.stop is not None:
                    _record_stopping(sup)
        if sup.stop is None and sup.terminate_reason:
            sup.stop = _stop_now(sup, TaskStatus.FAILED, sup.terminate_reason)
            _record_stopping(sup)
        if sup.stop is not None and not sup.handed:  # nothing ran yet: end it here
            POOL.release(sup.slot)
            end_stopped_task(sup.task_id, sup.stop)
            return
        if sup.stop is not None and now - sup.stop.noticed >= grace:
            _kill(sup)
            return


def _beat(task_id: str, phase: str | None = None) -> services.TaskSignals:
    try:
        return services.task_heartbeat(task_id=task_id, phase=phase)
    except Exception:  # the database is away: the next beat tries again
        log.exception("heartbeat of %s failed", task_id)
        close_old_connections()
        return services.TaskSignals()


def _stop_for(sup: Supervision, signals: services.TaskSignals) -> Stop | None:
    if signals.ended_reason:
        return _stop_now(sup, TaskStatus.FAILED, signals.ended_reason)
    if signals.revoked_reason:
        return _stop_now(sup, TaskStatus.FAILED, f"preempted: {signals.revoked_reason}")
    if signals.cancel_requested:
        return _stop_now(sup, TaskStatus.CANCELED, "canceled on request")
    return None


def _stop_now(sup: Supervision, status: str, reason: str) -> Stop:
    row = Task.objects.filter(id=sup.task_id).values("phase", "cancel_requested_at").first() or {}
    requested = row.get("cancel_requested_at") if status == TaskStatus.CANCELED else None
    return Stop(
        status=status,
        reason=reason,
        requested_at=requested or timezone.now(),
        phase=row.get("phase") or "",
    )


def _record_stopping(sup: Supervision) -> None:
    log.info("stopping task %s (%s) in phase %s", sup.task_id, sup.stop.reason, sup.stop.phase)


def _kill(sup: Supervision) -> None:
    """The task did not stop by itself within the grace: kill its process."""
    stop = sup.stop
    grace = settings.STRATA_TASK_STOP_GRACE_SECONDS
    stop.escalation.append(f"not stopped {grace:g} s after the stop was noticed")
    log.warning("task %s did not stop within %g s: killing its slot process", sup.task_id, grace)
    stop.escalation += sup.slot.kill()
    sup.copy_driver_log(final=True)
    end_stopped_task(sup.task_id, stop)
    POOL.discard(sup.slot)


def end_stopped_task(task_id: str, stop: Stop) -> None:
    """End a task whose process is gone (or never got it): FAILED or CANCELED
    as the stop says -- unless its publish had committed, then SUCCESS, since
    a publish is all or nothing -- with its locks released and its
    intermediary and unpublished files removed; the stop goes in its report."""
    close_old_connections()
    published = retrying_db(
        lambda: (
            CommitLogEntry.objects.filter(task_id=task_id, kind=CommitKind.PUBLISH)
            .values_list("seq", flat=True)
            .first()
        )
    )
    status = TaskStatus.SUCCESS if published is not None else stop.status
    error = "" if published is not None else stop.reason
    remove_task_leftovers(task_id)  # before the end is visible: nothing of it remains then
    report = dict(Task.objects.filter(id=task_id).values_list("report", flat=True).first() or {})
    report["stop"] = stop.report()
    if published is not None:
        report["stop"]["note"] = f"its publish (commit {published}) had committed; it stays"
        report["commit"] = published
    try:  # nothing changes if the task ended meanwhile (its process finished it)
        task = retrying_db(
            lambda: services.task_finish(task_id=task_id, status=status, error=error, report=report)
        )
    except services.ServiceError as exc:  # e.g. SUCCESS refused: fail it instead
        refused = str(exc)
        task = retrying_db(
            lambda: services.task_finish(
                task_id=task_id, status=TaskStatus.FAILED, error=refused, report=report
            )
        )
    if "stop" not in task.report:  # it had ended by itself: add how the stop went
        services.task_report_update(task_id=task_id, report={**task.report, "stop": report["stop"]})


def _ended_in_slot(sup: Supervision, *, driver_exited: bool) -> None:
    """The slot process ended the task itself; keep how a stop went."""
    if sup.stop is not None:
        close_old_connections()
        report = dict(
            Task.objects.filter(id=sup.task_id).values_list("report", flat=True).first() or {}
        )
        report["stop"] = sup.stop.report()
        services.task_report_update(task_id=sup.task_id, report=report)
    if driver_exited:
        POOL.discard(sup.slot)
    else:
        POOL.release(sup.slot)


def _slot_died(sup: Supervision) -> None:
    """The slot process exited under the task (its driver crashed, or it was
    killed from outside): fail the task with the reason, replace the process."""
    reason = sup.slot.start_error or driver_failure(
        sup.slot.process.poll(), sup.slot.jvm_log_path, sup.log_start
    )
    log.warning("the slot process of %s died: %s", sup.task_id, reason)
    stop = sup.stop
    if stop is not None:
        stop.escalation.append(f"the slot process ended: {reason}")
        if not stop.reason.startswith(("preempted", "canceled")):
            stop.reason = reason
    else:
        stop = _stop_now(sup, TaskStatus.FAILED, reason)
    ended = Task.objects.filter(id=sup.task_id).values_list("status", flat=True).first()
    if ended not in (TaskStatus.SUCCESS, TaskStatus.FAILED, TaskStatus.CANCELED):
        end_stopped_task(sup.task_id, stop)
    POOL.discard(sup.slot)
