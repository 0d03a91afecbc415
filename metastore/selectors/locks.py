"""The task locks held."""

from __future__ import annotations

from collections.abc import Collection

from django.db.models import QuerySet

from metastore.intervals import Interval
from metastore.models import TaskLock


def locks_list(
    *, datasource: str | None = None, datasources: Collection[str] | None = None
) -> QuerySet[TaskLock]:
    """The locks held, of one dataSource, of several (`datasources`), or of all."""
    qs = TaskLock.objects.select_related("task", "revoked_by")
    if datasource:
        qs = qs.filter(datasource=datasource)
    if datasources is not None:
        qs = qs.filter(datasource__in=datasources)
    return qs.order_by("datasource", "start", "created_at")


def active_locks(*, datasource: str, interval: Interval | None = None) -> list[TaskLock]:
    qs = TaskLock.objects.filter(datasource=datasource).select_related("task")
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return list(qs.order_by("start", "created_at")[:200])


def locks_of_task(*, task_id: str) -> list[TaskLock]:
    """The locks a task holds (with what revoked them)."""
    return list(TaskLock.objects.filter(task_id=task_id).select_related("revoked_by"))
