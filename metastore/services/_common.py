"""What the service modules share: their errors and the lock box helpers."""

from __future__ import annotations

import contextlib
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from metastore import lockbox_sql, locking
from metastore.intervals import Interval, format_ts, parse_ts
from metastore.models import (
    WORKING_STATUSES,
    DataSource,
    Task,
    TaskLock,
    TaskStatus,
)

log = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 0.2  # how often a waiter decides again without LISTEN/NOTIFY (SQLite)
# With LISTEN/NOTIFY a waiter is woken by releases; it still decides again this
# often in case a wake-up was missed.
LOCK_WAKE_FALLBACK_SECONDS = 1.0


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


class TaskEnded(ServiceError):
    """The task already ended (e.g. the janitor failed it): it may no longer act."""


class TaskNotClaimed(ServiceError):
    """The task is PENDING: no worker claimed it (`task_claim`), so it may not act yet."""


def _chunks_text(chunks: list[Interval]) -> str:
    """A few chunks named, for an error message."""
    shown = ", ".join(str(c) for c in chunks[:3])
    return shown + (f" and {len(chunks) - 3} more" if len(chunks) > 3 else "")


def _refuse_inactive(task_id: str, status: str, cancel_requested: bool) -> None:
    """SPEC §5: only an active task (RUNNING or WAITING) may take a lock, allocate,
    publish or kill. A PENDING task has no worker yet: a lock it took would be held
    by nobody (and the janitor, which watches heartbeats of claimed tasks, would not
    free it). A task the janitor failed while its worker still ran must not leave a
    lock behind (the janitor never looks at it again) nor publish rows under a
    FAILED task; a task asked to cancel is stopping, and must not start anything
    new either."""
    if cancel_requested:
        raise TaskCanceled(f"task {task_id} was canceled")
    if status in WORKING_STATUSES:
        return
    if status == TaskStatus.PENDING:
        raise TaskNotClaimed(
            f"task {task_id} is PENDING: no worker has claimed it yet, so it cannot "
            "lock, allocate or publish"
        )
    raise TaskEnded(
        f"task {task_id} has ended ({status}): it can no longer lock, allocate or publish"
    )


# --- helpers ------------------------------------------------------------------


def datasource_for_update(name: str) -> DataSource:
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


def lock_spec(
    *,
    group_id: str,
    datasource: str,
    interval: Interval | str,
    lock_type: str,
    priority: int,
    granularity: str = locking.TIME_CHUNK,
    partition: int | None = None,
    version: str | None = None,
    revoked: bool = False,
) -> locking.LockSpec:
    """The one way the lock box builds a `LockSpec`, whatever it describes: a
    held lock (`lock_spec_of`), a task's request (`lock_request_of`) or a queued
    waiter's recorded request. Only a SEGMENT lock keeps a version (it names
    its segment); a time-chunk lock's version plays no part in decisions."""
    return locking.LockSpec(
        group_id=group_id,
        datasource=datasource,
        interval=Interval.parse(interval) if isinstance(interval, str) else interval,
        type=lock_type,
        priority=priority,
        granularity=granularity,
        partition=partition,
        version=version if granularity == locking.SEGMENT else None,
        revoked=revoked,
    )


def lock_spec_of(lock: TaskLock) -> locking.LockSpec:
    """A held (or revoked) lock, as the lock box decides over it."""
    return lock_spec(
        group_id=lock.group_id,
        datasource=lock.datasource,
        interval=Interval(lock.start, lock.end),
        lock_type=lock.type,
        priority=lock.priority,
        granularity=lock.granularity,
        partition=lock.partition,
        version=lock.version,
        revoked=lock.revoked,
    )


def lock_request_json(request: locking.LockSpec) -> dict:
    return {
        "interval": str(request.interval),
        "type": request.type,
        "granularity": request.granularity,
        "priority": request.priority,
        "partition": request.partition,
        "version": request.version,
    }


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


def lock_request_of(
    task: Task,
    interval: Interval,
    lock_type: str,
    granularity: str,
    partition: int | None,
    version: str | None,
) -> locking.LockSpec:
    """What `task` asks the lock box for."""
    return lock_spec(
        group_id=task.group_id,
        datasource=task.datasource,
        interval=interval,
        lock_type=lock_type,
        priority=task.priority,
        granularity=granularity,
        partition=partition,
        version=version,
    )


@dataclass(frozen=True)
class Blocker:
    """What a waiting task waits on: a held lock, or an earlier queued request."""

    task: str | None
    type: str
    granularity: str
    interval: str
    priority: int
    lock: int | None = None  # the held lock's id; None for a queued request

    @classmethod
    def of(
        cls, spec: locking.LockSpec, lock: TaskLock | None, queued_task: str | None = None
    ) -> Blocker:
        return cls(
            task=lock.task_id if lock else queued_task,
            type=spec.type,
            granularity=spec.granularity,
            interval=str(spec.interval),
            priority=spec.priority,
            lock=lock.id if lock else None,
        )

    @property
    def queued(self) -> bool:
        return self.lock is None

    def as_json(self) -> dict:
        """The task's `waiting_on` entry (shown by the console and the API)."""
        return {
            "lock": self.lock,
            "task": self.task,
            "type": self.type,
            "granularity": self.granularity,
            "interval": self.interval,
            "priority": self.priority,
            "queued": self.queued,
        }

    def describe(self) -> str:
        return f"{self.type} {self.interval} of {self.task} (priority {self.priority})"


def _log_revocation(victims: list[TaskLock], *, by: Task | lockbox_sql.TaskState) -> None:
    log.info(
        "task %s (priority %s) revoked locks of %s",
        by.id,
        by.priority,
        sorted({v.task_id for v in victims}),
    )


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
