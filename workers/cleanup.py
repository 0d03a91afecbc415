"""Removing what an ended task left behind: its intermediary directory and the
deep-storage folders of segment ids it was given and never published.

Used by whoever ends a task whose process could not clean up itself: the reaper
(its worker died) and the slot supervisor (it killed the task's process).
"""

from __future__ import annotations

import logging
import shutil
import time
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from metastore import selectors
from metastore.duties.periods import Period
from metastore.intervals import Interval
from metastore.models import ACTIVE_STATUSES, Task
from metastore.task_logs import task_logs_prune
from workers.paths import deep_storage_dir, intermediary_dir

log = logging.getLogger(__name__)


def remove_task_leftovers(task_id: str) -> bool:
    """Remove a task's intermediary directory and unpublished segment folders
    (never one a segment's location points into). Its process must be gone.
    True if there was an intermediary directory."""
    removed = False
    try:
        work_dir = intermediary_dir(task_id)
    except ValueError:  # an id that is no directory name has no directory
        work_dir = None
    deadline = time.monotonic() + 5
    while work_dir is not None and work_dir.exists() and time.monotonic() < deadline:
        shutil.rmtree(work_dir, ignore_errors=True)  # again if a dying writer raced it
        removed = True
    for pending in selectors.unpublished_allocations_of(task_id=task_id):
        remove_unpublished_folder(pending)
    return removed


def remove_unpublished_folder(pending) -> str | None:
    """Remove the deep-storage folder of a pending segment (an allocation never
    published), unless it is outside deep storage, gone already, or a segment's
    location points into it; the folder removed, or None."""
    deep = Path(settings.STRATA_DEEP_STORAGE).resolve()
    folder = deep_storage_dir(
        pending.datasource,
        Interval(pending.start, pending.end),
        pending.version,
        pending.partition,
    ).resolve()
    if deep not in folder.parents or not folder.exists():
        return None
    if selectors.locations_under(directory=str(folder)):
        return None
    shutil.rmtree(folder, ignore_errors=True)
    return str(folder)


def remove_old_task_logs(*, now: datetime | None = None) -> list[Path]:
    """Remove task logs (and slot process logs) whose last line is older than
    STRATA_TASK_LOG_RETENTION; an active task's log stays whatever its age."""
    before = Period.parse(settings.STRATA_TASK_LOG_RETENTION).before(now or timezone.now())
    active = Task.objects.filter(status__in=ACTIVE_STATUSES).values_list("id", flat=True)
    removed = task_logs_prune(before=before, active_task_ids=list(active))
    if removed:
        log.info(
            "removed %d task logs older than %s", len(removed), settings.STRATA_TASK_LOG_RETENTION
        )
    return removed
