"""The task reaper: fails the tasks whose worker died, and queues again the
PENDING tasks whose message the broker lost.

The beat process runs it every STRATA_REAPER_SECONDS in a thread of its own
(`Reaper`, started by `workers/tasks.py` on beat_init); the
`workers.tasks.task_reaper` Celery task runs one round on a worker if asked.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from metastore import selectors, services
from metastore.last_runs import last_run_mark
from metastore.models import TaskStatus
from workers.broker_queue import queued_task_ids

log = logging.getLogger("workers.tasks")


class Reaper:
    """Runs `reap` every STRATA_REAPER_SECONDS in a thread of the beat
    process. Not as a queued Celery task: the reaper exists for dead workers, and
    a message queued for it would wait for a live worker -- with the only worker
    dead (SIGKILL of a thread-pool worker, as `make run` and docker-compose run
    it) nobody would ever fail its tasks or free their locks."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="strata-reaper", daemon=True)

    def _run(self) -> None:
        from django.db import connection

        while not self.stop.wait(settings.STRATA_REAPER_SECONDS):
            try:
                reap()
                last_run_mark("reaper", redis_url=settings.REDIS_URL)  # beat is alive
            except Exception:  # the database or broker is away: the next round retries
                log.exception("task reaper round failed")
                connection.close()


def start_reaper() -> Reaper:
    """Start the reaper's thread (in the beat process)."""
    reaper = Reaper()
    reaper.thread.start()
    return reaper


def dead_before() -> datetime:
    """A RUNNING or WAITING task silent since before this lost its worker:
    STRATA_HEARTBEAT_TIMEOUT ago, and never less than five heartbeats ago."""
    timeout = max(settings.STRATA_HEARTBEAT_TIMEOUT, 5 * settings.STRATA_HEARTBEAT_SECONDS)
    return timezone.now() - timedelta(seconds=timeout)


def reap() -> list[str]:
    """Fail every RUNNING/WAITING task whose heartbeat is older than
    STRATA_HEARTBEAT_TIMEOUT (its worker died: SIGKILL, OOM, a lost machine),
    releasing its locks and removing its intermediary data and the deep-storage
    files it never published, at once; then queue again the PENDING tasks the
    broker lost. Returns the ids of the tasks failed."""
    reaped, _ = reap_dead_tasks(older_than=dead_before())
    requeue_lost_tasks(
        older_than=timezone.now() - timedelta(seconds=settings.STRATA_REQUEUE_AFTER_SECONDS)
    )
    return reaped


def requeue_lost_tasks(*, older_than) -> list[str]:
    """Queue again the PENDING tasks created before `older_than` whose message the
    broker does not hold: submitted while Redis was down (`task_enqueue` could
    not send it), or lost with a Redis that restarted without its data. A task
    waiting in the queue, or delivered to a worker and not yet acknowledged, is
    left alone; a duplicate would be harmless anyway (the worker claims a task
    once). Returns the ids queued again."""
    pending = selectors.pending_task_ids(created_before=older_than)
    if not pending:
        return []
    held = queued_task_ids()
    if held is None:  # the broker could not be read: send nothing twice
        return []
    lost = [task_id for task_id in pending if task_id not in held]
    requeued = [task_id for task_id in lost if services.task_enqueue(task_id=task_id)]
    if requeued:
        log.warning("queued again PENDING tasks the broker had lost: %s", requeued)
    return requeued


def reap_dead_tasks(*, older_than) -> tuple[list[str], list[str]]:
    """Fail the tasks silent since before `older_than`; return their ids and the
    ids whose intermediary directory was removed."""
    from workers.cleanup import remove_task_leftovers

    reaped, removed_dirs = [], []
    for task in selectors.stale_active_tasks(older_than=older_than):
        silent = (timezone.now() - (task.heartbeat_at or task.created_at)).total_seconds()
        services.task_finish(
            task_id=task.id,
            status=TaskStatus.FAILED,
            error=(
                f"worker {task.worker or '?'} stopped heartbeating {silent:.0f} s ago "
                "(lost or killed); the task was failed and its locks released"
            ),
        )
        reaped.append(task.id)
        if remove_task_leftovers(task.id):
            removed_dirs.append(task.id)
    if reaped:
        log.warning("reaper failed tasks whose worker stopped heartbeating: %s", reaped)
    return reaped, removed_dirs
