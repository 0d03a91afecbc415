"""The kill task: permanently delete unused segments of an interval (rows and files)."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings

from metastore import selectors, services
from metastore.intervals import is_open_ended
from metastore.models import Task


def run_kill(task: Task) -> dict:
    """Lock the interval, delete its unused segments' rows (one commit-log entry;
    only the versions, limit and cutoff the spec gives), then their files once no
    segment references them. Returns the report."""
    validated = services.task_validate(spec=task.spec)
    interval = validated.interval
    if is_open_ended(interval):
        # Druid's ETERNITY (or half of it): the segments there now, not all of time.
        interval = selectors.segments_extent(
            datasource=task.datasource,
            interval=interval,
            used=None if validated.mark_as_unused else False,
        )
        if interval is None:
            return _nothing_to_kill(validated)
    # EXCLUSIVE, or REPLACE under useConcurrentLocks or taskLockType (Druid 30's
    # KillUnusedSegmentsTask, apache/druid#16362): the one lock-mode rule decides.
    mode = services.task_lock_mode(validated)
    services.lock_acquire(
        task=task,
        interval=interval,
        lock_type=mode.type,
        granularity=mode.granularity,
        timeout_ms=validated.context.task_lock_timeout_ms,
    )
    marked = None
    if validated.mark_as_unused:  # Druid's markAsUnused: the used segments go first
        marked = services.segments_mark_used(
            datasource=task.datasource, used=False, interval=interval
        )
    selection = validated.kill
    entry, locations = services.segments_kill(
        task=task,
        interval=interval,
        versions=selection.versions if selection else None,
        limit=selection.limit if selection else None,
        max_used_status_last_updated=selection.max_used_status_last_updated if selection else None,
    )
    deep = Path(settings.STRATA_DEEP_STORAGE).resolve()
    removed_bytes = 0
    for location in locations:
        path = Path(location).resolve()
        if deep not in path.parents:
            continue  # never delete outside deep storage
        target = path.parent if path.is_file() else path
        if target.exists():
            removed_bytes += sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
            shutil.rmtree(target, ignore_errors=True)
    return {
        "segmentsKilled": len(entry.removed) if entry else 0,
        "filesRemoved": len(locations),
        "bytesRemoved": removed_bytes,
        "commit": entry.seq if entry else None,
        "segmentsMarkedUnused": len(marked.removed) if marked else 0,
        "ignored": list(validated.ignored),
    }


def _nothing_to_kill(validated) -> dict:
    """The report of a kill whose open-ended interval holds no segment: no lock taken."""
    return {
        "segmentsKilled": 0,
        "filesRemoved": 0,
        "bytesRemoved": 0,
        "commit": None,
        "segmentsMarkedUnused": 0,
        "ignored": list(validated.ignored),
    }
