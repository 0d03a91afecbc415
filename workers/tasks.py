"""Celery tasks: interfaces that take ids, claim work once, and call the runner."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
from datetime import timedelta
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import Task, TaskStatus

log = logging.getLogger(__name__)


@shared_task(name="workers.tasks.run_task", acks_late=True, reject_on_worker_lost=True)
def run_task(task_id: str) -> None:
    """Run one Strata task. A redelivered message finds it claimed and does nothing."""
    if not services.task_claim(task_id=task_id, worker=f"{socket.gethostname()}:{os.getpid()}"):
        log.info("task %s is not PENDING (already claimed, canceled or unknown): skipping", task_id)
        return
    from workers.runner import run_task as run

    run(task_id)


@shared_task(name="workers.tasks.intermediary_janitor")
def intermediary_janitor() -> list[str]:
    """Remove intermediary directories of tasks that no longer run and sat idle
    past STRATA_INTERMEDIARY_EXPIRY, and deep-storage folders of segments ended
    tasks never published; fail tasks whose worker stopped heartbeating."""
    expiry = settings.STRATA_INTERMEDIARY_EXPIRY
    removed = []
    stale_before = timezone.now() - timedelta(seconds=max(expiry, 30))
    # A task waiting for a lock heartbeats too; a dead one must not stay queued.
    for task in selectors.stale_active_tasks(older_than=stale_before):
        services.task_finish(
            task_id=task.id,
            status=TaskStatus.FAILED,
            error=f"worker {task.worker or '?'} stopped heartbeating (lost or killed)",
        )
    _remove_unpublished_files(ended_before=timezone.now() - timedelta(seconds=expiry))
    root = settings.STRATA_INTERMEDIARY_DIR
    if not root.exists():
        return removed
    now = time.time()
    running = set(
        Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING)).values_list(
            "id", flat=True
        )
    )
    for entry in root.iterdir():
        if not entry.is_dir() or entry.name in running:
            continue
        newest = max((p.stat().st_mtime for p in entry.rglob("*")), default=entry.stat().st_mtime)
        if now - newest >= expiry:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    if removed:
        log.info("janitor removed intermediary data of %s", removed)
    return removed


# Tasks that ended longer ago than this were looked at by earlier janitor runs.
UNPUBLISHED_LOOKBACK = timedelta(days=7)


def _remove_unpublished_files(*, ended_before) -> list[str]:
    """Remove the deep-storage folders of segment ids that tasks which ended (past
    the expiry) never published: a worker killed between moving a segment into
    deep storage and publishing it leaves the file behind. Partition numbers are
    never reused, so such a folder belongs to nobody else; a folder a segment's
    location still points into is kept all the same."""
    from workers.runner import deep_storage_dir

    deep = Path(settings.STRATA_DEEP_STORAGE).resolve()
    removed = []
    for pending in selectors.unpublished_allocations(
        ended_after=ended_before - UNPUBLISHED_LOOKBACK, ended_before=ended_before
    ):
        folder = deep_storage_dir(
            pending.datasource,
            Interval(pending.start, pending.end),
            pending.version,
            pending.partition,
        ).resolve()
        if deep not in folder.parents or not folder.exists():
            continue
        if selectors.locations_under(directory=str(folder)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    if removed:
        log.info("janitor removed %d unpublished segment folders: %s", len(removed), removed)
    return removed
