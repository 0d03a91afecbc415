"""Reads for the console's overview (the home page): the cluster at a glance.

Tasks by state (and failed in the last day), the dataSources with what a query
reads from them (from the per-commit timeline states, so the numbers agree with
the DataSources page and SQL), the locks held and the tasks waiting for one.
The task slots come from `selectors.workers.task_slots`. Every read is bounded: a count
or a short list, never a whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count
from django.utils import timezone

from metastore.intervals import Interval
from metastore.models import DataSource, Task, TaskLock, TaskStatus, Worker
from metastore.selectors.states import timeline_state
from metastore.selectors.visibility import VisibilityCounts, visibility_counts

RECENT_FAILED = timedelta(days=1)
LIST_MAX = 8
COUNT_MAX = 10_000  # the tasks ended in the last day are counted up to this ("10,000+")


@dataclass(frozen=True)
class TaskCounts:
    running: int
    waiting: int
    pending: int
    failed_last_day: int  # at most COUNT_MAX
    succeeded_last_day: int  # at most COUNT_MAX
    recent_failures: list[Task]  # newest first, at most LIST_MAX

    @property
    def failed_more(self) -> bool:
        """More failed in the last day than counted."""
        return self.failed_last_day >= COUNT_MAX

    @property
    def succeeded_more(self) -> bool:
        return self.succeeded_last_day >= COUNT_MAX


def task_counts(*, now: datetime | None = None) -> TaskCounts:
    """Active tasks by status, and the tasks that ended in the last day (each
    status counted from the (status, ended_at) index, up to COUNT_MAX: a busy
    cluster's day is not read whole on every visit) and the newest failures."""
    now = now or timezone.now()
    active = dict(
        Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING, TaskStatus.PENDING))
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
    )
    since = now - RECENT_FAILED
    ended = Task.objects.filter(ended_at__gte=since).order_by()
    recent = {
        st: ended.filter(status=st).values("id")[:COUNT_MAX].count()
        for st in (TaskStatus.FAILED, TaskStatus.SUCCESS)
    }
    failures = list(
        ended.filter(status=TaskStatus.FAILED)
        .only("id", "type", "datasource", "status", "error", "ended_at", "created_at")
        .order_by("-ended_at", "-id")[:LIST_MAX]
    )
    return TaskCounts(
        running=active.get(TaskStatus.RUNNING, 0),
        waiting=active.get(TaskStatus.WAITING, 0),
        pending=active.get(TaskStatus.PENDING, 0),
        failed_last_day=recent[TaskStatus.FAILED],
        succeeded_last_day=recent[TaskStatus.SUCCESS],
        recent_failures=failures,
    )


@dataclass(frozen=True)
class DataSourceGlance:
    name: str
    extent: Interval | None
    counts: VisibilityCounts


def datasources_glance() -> list[DataSourceGlance]:
    """Every dataSource with its visible (and partially visible) segments, rows
    and bytes, from its timeline state: one query for the names, then only what
    later commits changed (the states and their row sums are cached per commit)."""
    out = []
    for name in DataSource.objects.order_by("name").values_list("name", flat=True):
        state = timeline_state(datasource=name)
        out.append(
            DataSourceGlance(
                name=name,
                extent=state.extent,
                counts=visibility_counts(datasource=name, state=state),
            )
        )
    return out


@dataclass(frozen=True)
class LockGlance:
    held: int
    revoked: int
    by_type: dict[str, int]
    waiting: list[Task]  # the WAITING tasks, longest waiting first, at most LIST_MAX
    waiting_count: int


def locks_glance() -> LockGlance:
    """The locks held (by type; revoked ones apart) and the tasks waiting for one."""
    by_type: dict[str, int] = {}
    revoked = 0
    rows = TaskLock.objects.order_by().values_list("type", "revoked").annotate(n=Count("id"))
    for lock_type, is_revoked, n in rows:
        if is_revoked:
            revoked += n
        else:
            by_type[lock_type] = by_type.get(lock_type, 0) + n
    waiting_qs = Task.objects.filter(status=TaskStatus.WAITING)
    waiting = list(
        waiting_qs.only(
            "id", "type", "datasource", "status", "waiting_on", "waiting_since"
        ).order_by("waiting_since", "id")[: LIST_MAX + 1]
    )
    count = len(waiting) if len(waiting) <= LIST_MAX else waiting_qs.count()
    return LockGlance(
        held=sum(by_type.values()),
        revoked=revoked,
        by_type=dict(sorted(by_type.items())),
        waiting=waiting[:LIST_MAX],
        waiting_count=count,
    )


def workers_registered(*, limit: int = 100) -> list[Worker]:
    """Every worker that registered (live or not heard from since), by name."""
    return list(Worker.objects.order_by("name")[:limit])
