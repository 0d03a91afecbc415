"""Tasks: the lists the API and the console show, and the ones the duties look for."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import BooleanField, Count, Max, Q, QuerySet
from django.db.models.expressions import RawSQL

from metastore.intervals import Interval
from metastore.models import ACTIVE_STATUSES, Task, TaskStatus


def tasks_list(
    *,
    status: str | None = None,
    statuses: Collection[str] | None = None,
    datasource: str | None = None,
    type: str | None = None,
    created: Interval | None = None,
) -> QuerySet[Task]:
    """Tasks, newest first: of one `status` or any of `statuses`, of a dataSource
    and type, created within `created`."""
    qs = Task.objects.defer("spec", "report")
    if status:
        qs = qs.filter(status=status.upper())
    if statuses is not None:
        qs = qs.filter(status__in=list(statuses))
    if datasource:
        qs = qs.filter(datasource=datasource)
    if type:
        qs = qs.filter(type=type)
    if created is not None:
        qs = qs.filter(created_at__gte=created.start, created_at__lt=created.end)
    return qs.order_by("-created_at")


def stale_active_tasks(*, older_than: datetime) -> QuerySet[Task]:
    """RUNNING or WAITING tasks whose heartbeat stopped before `older_than` (a task
    waiting for a lock heartbeats too; a PENDING one has no worker yet)."""
    return Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING)).filter(
        Q(heartbeat_at__lt=older_than) | Q(heartbeat_at__isnull=True, created_at__lt=older_than)
    )


def pending_task_ids(*, created_before: datetime) -> list[str]:
    """Ids of the tasks still PENDING (no worker claimed them) created before then."""
    return list(
        Task.objects.filter(status=TaskStatus.PENDING, created_at__lt=created_before)
        .order_by("created_at")
        .values_list("id", flat=True)
    )


def tasks_blocked_by(*, task_id: str, limit: int = 50) -> list[str]:
    """Ids of the WAITING tasks whose `waiting_on` names `task_id` (at most
    `limit`, oldest first). PostgreSQL filters by JSON containment; SQLite has no
    such lookup, so there the (few) waiting tasks are filtered here."""
    waiting = Task.objects.filter(status=TaskStatus.WAITING).order_by("created_at", "id")
    if connection.vendor == "postgresql":
        return list(
            waiting.filter(waiting_on__contains=[{"task": task_id}]).values_list("id", flat=True)[
                :limit
            ]
        )
    return [
        tid
        for tid, waiting_on in waiting.values_list("id", "waiting_on")
        if any(isinstance(b, dict) and b.get("task") == task_id for b in waiting_on or ())
    ][:limit]


# The tasks table's sortable columns: what the URL says -> the model's fields, ties
# by creation then id in the same direction (each an index: one walk per page; the
# type's also counts the grouping by type, so its ties go by status first).
TASK_SORTS = {
    "id": ("id",),
    "type": ("type", "status", "created_at", "id"),
    "datasource": ("datasource", "created_at", "id"),
    "status": ("status", "created_at", "id"),
    "priority": ("priority", "created_at", "id"),
    "created": ("created_at", "id"),
}


def tasks_table(
    *,
    status: str | None = None,
    type: str | None = None,
    datasource: str | None = None,
    sort: str | None = None,
):
    """Tasks for the console's table: `datasource` matches any part of the name,
    whatever its case ("=name": that name exactly); `sort` is a column of
    TASK_SORTS, '-' first for descending (newest first by default). Ties break on
    creation then id, so pages never overlap."""
    qs = Task.objects.defer("spec", "report")
    if status:
        qs = qs.filter(status=status)
    if type:
        qs = qs.filter(type=type)
    if datasource and datasource.startswith("="):  # Druid's console: "=name", that name only
        qs = qs.filter(datasource=datasource[1:])
    elif datasource:
        # The few names that match, then the index on them (a LIKE over every
        # task's name would read the whole table to count the matches).
        text = datasource.casefold()
        qs = qs.filter(datasource__in=[n for n in task_datasources() if text in n.casefold()])
    fields, descending = task_order(sort)
    return qs.order_by(*(f"-{f}" if descending else f for f in fields))


def task_order(sort: str | None) -> tuple[tuple[str, ...], bool]:
    """The fields a tasks table `sort` orders by, and whether descending (an
    unknown sort: newest first)."""
    if (sort or "").lstrip("-") not in TASK_SORTS:
        sort = "-created"
    return TASK_SORTS[sort.lstrip("-")], sort.startswith("-")


def tasks_count(
    *,
    status: str | None = None,
    type: str | None = None,
    datasource: str | None = None,
) -> int:
    """How many tasks `tasks_table` lists for these filters (the pages' total)."""
    return tasks_table(status=status, type=type, datasource=datasource).count()


def tasks_page(
    *,
    status: str | None = None,
    type: str | None = None,
    datasource: str | None = None,
    sort: str | None = None,
    after: list | None = None,
    limit: int = 50,
) -> tuple[list[Task], list | None]:
    """One page of `tasks_table` past the cursor `after` (the sort fields' values
    of the last task shown, as `task_order` names them), and the next page's
    cursor (None at the end). The cursor is a row-value bound of the sort's
    index, so a page deep in 100,000 tasks costs what the first one does."""
    qs = tasks_table(status=status, type=type, datasource=datasource, sort=sort)
    fields, descending = task_order(sort)
    if after is not None:
        if len(after) != len(fields):
            raise ValueError(f"a cursor of {len(fields)} values for this sort")
        names = ", ".join(connection.ops.quote_name(Task._meta.get_field(f).column) for f in fields)
        bound = f"({names}) {'<' if descending else '>'} ({', '.join(['%s'] * len(fields))})"
        qs = qs.filter(RawSQL(bound, after, output_field=BooleanField()))
    rows = list(qs[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, ([getattr(rows[-1], f) for f in fields] if more and rows else None)


def task_datasources() -> list[str]:
    """Every dataSource name a task was submitted for. On PostgreSQL one index
    probe per name (a loose scan of the (datasource, status) index), not a pass
    over the tasks."""
    if connection.vendor != "postgresql":
        return list(Task.objects.order_by().values_list("datasource", flat=True).distinct())
    table = connection.ops.quote_name(Task._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH RECURSIVE names(name) AS (
                  (SELECT datasource FROM {table} ORDER BY datasource LIMIT 1)
                  UNION ALL
                  SELECT (SELECT datasource FROM {table} WHERE datasource > names.name
                          ORDER BY datasource LIMIT 1)
                  FROM names WHERE names.name IS NOT NULL)
                SELECT name FROM names WHERE name IS NOT NULL"""
        )
        return [row[0] for row in cursor.fetchall()]


TASK_GROUPS = ("type", "datasource", "status")


@dataclass(frozen=True)
class TaskGroup:
    """One row of the tasks list grouped by a column, as Druid's console groups it."""

    value: str
    total: int
    by_status: dict[str, int]  # status -> tasks
    newest: datetime | None


def tasks_grouped(
    *,
    by: str,
    status: str | None = None,
    type: str | None = None,
    datasource: str | None = None,
) -> list[TaskGroup]:
    """The tasks that `tasks_table` would list, counted per value of `by` (one of
    TASK_GROUPS) and status, busiest group first. Unfiltered on PostgreSQL, the
    counts come from an index alone and each group's newest task from one probe
    of its (column, created_at) index, not from every task's row."""
    if by not in TASK_GROUPS:
        raise ValueError(f"group by one of {', '.join(TASK_GROUPS)}")
    qs = tasks_table(status=status, type=type, datasource=datasource).order_by()
    groups: dict[str, dict] = {}
    probe = connection.vendor == "postgresql" and not (status or type or datasource)
    if probe:
        rows = [(*r, None) for r in qs.values_list(by, "status").annotate(n=Count("*"))]
    else:
        rows = qs.values_list(by, "status").annotate(n=Count("*"), newest=Max("created_at"))
    for value, st, n, newest in rows:
        g = groups.setdefault(value, {"by_status": {}, "newest": None})
        g["by_status"][st] = n
        if g["newest"] is None or (newest is not None and newest > g["newest"]):
            g["newest"] = newest
    if probe:
        for value, newest in _newest_by(by, list(groups)).items():
            groups[value]["newest"] = newest
    out = [
        TaskGroup(v, sum(g["by_status"].values()), g["by_status"], g["newest"])
        for v, g in groups.items()
    ]
    return sorted(out, key=lambda g: (-g.total, g.value))


def _newest_by(column: str, values: list[str]) -> dict[str, datetime]:
    """value -> when the newest task with `column` = value was created: one query,
    one index probe per value (PostgreSQL)."""
    table = connection.ops.quote_name(Task._meta.db_table)
    name = connection.ops.quote_name(Task._meta.get_field(column).column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT v, (SELECT MAX(created_at) FROM {table} WHERE {name} = v) "
            "FROM unnest(%s::text[]) AS v",
            [values],
        )
        return dict(cursor.fetchall())


def task_get(*, task_id: str) -> Task | None:
    """One task with who submitted it, or None."""
    return Task.objects.select_related("submitted_by").filter(id=task_id).first()


def tasks_with_ids(*, ids: list[str]) -> QuerySet[Task]:
    """The tasks `ids` that exist (without their spec and report)."""
    return Task.objects.defer("spec", "report").filter(id__in=ids)


def tasks_waiting(*, limit: int = 200) -> list[Task]:
    """The tasks WAITING for a lock, longest waiting first."""
    return list(Task.objects.filter(status=TaskStatus.WAITING).order_by("waiting_since")[:limit])


def active_tasks_of(*, datasource: str, limit: int = 20) -> list[Task]:
    """A dataSource's PENDING, WAITING and RUNNING tasks, oldest first."""
    return list(
        Task.objects.filter(datasource=datasource, status__in=ACTIVE_STATUSES)
        .only("id", "type", "status", "created_at")
        .order_by("created_at")[:limit]
    )


def has_active_tasks(*, datasource: str) -> bool:
    return Task.objects.filter(datasource=datasource, status__in=ACTIVE_STATUSES).exists()
