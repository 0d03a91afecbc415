"""The intermediary janitor: what ended tasks left behind, swept once a minute.

Beat schedules it (`workers.tasks.intermediary_janitor`, CELERY_BEAT_SCHEDULE in
console/settings.py). It removes the intermediary directories of tasks that no
longer run and sat idle past STRATA_INTERMEDIARY_EXPIRY, and the deep-storage
folders of segments ended tasks never published; fails tasks whose worker
stopped heartbeating (as the reaper does, in case beat ran without it); and
removes task logs past STRATA_TASK_LOG_RETENTION.
"""

from __future__ import annotations

import logging
import shutil
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from metastore import selectors
from metastore.last_runs import last_run_mark
from metastore.models import Task, TaskStatus
from workers.cleanup import remove_old_task_logs, remove_unpublished_folder
from workers.reaper import dead_before, reap_dead_tasks

log = logging.getLogger("workers.tasks")

# Tasks that ended longer ago than this were looked at by earlier janitor runs.
UNPUBLISHED_LOOKBACK = timedelta(days=7)


def run_janitor() -> list[str]:
    """One janitor round. Returns the task ids whose intermediary directory it
    removed (a failed dead task's, then the idle ones)."""
    expiry = settings.STRATA_INTERMEDIARY_EXPIRY
    # The reaper does this within seconds; here too, in case beat ran without it.
    _, removed = reap_dead_tasks(older_than=dead_before())
    remove_unpublished_files(ended_before=timezone.now() - timedelta(seconds=expiry))
    remove_old_task_logs()
    last_run_mark("janitor", redis_url=settings.REDIS_URL)
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


def remove_unpublished_files(*, ended_before) -> list[str]:
    """Remove the deep-storage folders of segment ids that tasks which ended (past
    the expiry) never published: a worker killed between moving a segment into
    deep storage and publishing it leaves the file behind. Partition numbers are
    never reused, so such a folder belongs to nobody else; a folder a segment's
    location still points into is kept all the same."""
    removed = []
    for pending in selectors.unpublished_allocations(
        ended_after=ended_before - UNPUBLISHED_LOOKBACK, ended_before=ended_before
    ):
        folder = remove_unpublished_folder(pending)
        if folder is not None:
            removed.append(folder)
    if removed:
        log.info("janitor removed %d unpublished segment folders: %s", len(removed), removed)
    return removed
