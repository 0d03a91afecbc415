"""Segment edits outside tasks' publishes: mark used/unused, kill, admin edits."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from metastore.intervals import Interval
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    Segment,
    Task,
    TaskLock,
)
from metastore.services._common import (
    LockRevoked,
    ServiceError,
    _covering_lock,
    _refuse_inactive,
    _revoked_reason,
    datasource_for_update,
)
from metastore.services.checkpoints import checkpoint_after_commit

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
    note: str = "",
) -> CommitLogEntry | None:
    """Mark segments (in an interval, or by id) used or unused; one commit entry
    (with `note` saying why, when a duty rather than a person did it)."""
    if interval is None and segment_ids is None:
        raise ServiceError("give an interval or segment_ids")
    with transaction.atomic():
        ds = datasource_for_update(datasource)
        ids = list(
            _segments_matching(ds.name, interval, segment_ids)
            .filter(used=not used)
            .values_list("id", flat=True)
        )
        if not ids:
            return None
        Segment.objects.filter(id__in=ids).update(used=used, used_status_updated_at=timezone.now())
        checkpoint_after_commit(ds.name)
        return CommitLogEntry.objects.create(
            datasource=ds.name,
            user=user if user is not None and getattr(user, "is_authenticated", False) else None,
            kind=CommitKind.MARK_USED if used else CommitKind.MARK_UNUSED,
            added=ids if used else [],
            removed=[] if used else ids,
            note=note,
        )


def segments_kill(
    *,
    task: Task,
    interval: Interval,
    versions: Iterable[str] | None = None,
    limit: int | None = None,
    max_used_status_last_updated: datetime | None = None,
) -> tuple[CommitLogEntry | None, list[str]]:
    """Delete the unused segments lying inside `interval` (rows now, files by the
    caller): returns the commit entry and the file locations no segment uses any
    more. The task must hold a time-chunk lock covering the interval.

    As Druid's kill task: only segments of `versions` (None: any), marked unused
    no later than `max_used_status_last_updated` (None: whenever), and at most
    `limit` of them (None: all), the oldest intervals first."""
    with transaction.atomic():
        ds = datasource_for_update(task.datasource)
        row = Task.objects.select_for_update().get(id=task.id)
        _refuse_inactive(task.id, row.status, row.cancel_requested)
        reason = _revoked_reason(task.id)
        if reason:
            raise LockRevoked(reason)
        _covering_lock(task, interval)
        selected = Segment.objects.filter(
            datasource=ds, used=False, start__gte=interval.start, end__lte=interval.end
        )
        if versions is not None:
            selected = selected.filter(version__in=list(versions))
        if max_used_status_last_updated is not None:
            selected = selected.filter(used_status_updated_at__lte=max_used_status_last_updated)
        selected = selected.order_by("start", "end", "version", "partition")
        doomed = list(selected.values_list("id", "location")[:limit])
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
        checkpoint_after_commit(ds.name)
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
        ds = datasource_for_update(segment.datasource.name)
        before = Segment.objects.get(id=segment.id)
        for name, value in fields.items():
            setattr(before, name, value)
        if "used" in fields:
            before.used_status_updated_at = timezone.now()
        before.save()
        added, removed = [], []
        if "used" in fields:
            (added if fields["used"] else removed).append(segment.id)
        checkpoint_after_commit(ds.name)
        return CommitLogEntry.objects.create(
            datasource=ds.name,
            user=user if user is not None and getattr(user, "is_authenticated", False) else None,
            kind=CommitKind.ADMIN_EDIT,
            added=added,
            removed=removed,
            note=f"admin edit of {segment.id}: {', '.join(sorted(fields))}",
        )
