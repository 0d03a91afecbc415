"""DataSources: their names, their used segments' totals, and the DataSources
page's rows (counts by visibility, from the per-commit timeline states)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min, Q, Sum

from metastore.models import ACTIVE_STATUSES, DataSource, Segment, Task
from metastore.selectors.states import timeline_state
from metastore.selectors.visibility import VisibilityCounts, visibility_counts


@dataclass(frozen=True)
class DataSourceSummary:
    name: str
    segments: int
    rows: int
    size_bytes: int
    start: object
    end: object
    active_tasks: int
    created_at: object = None


def datasources_list(*, name: str | None = None) -> list[DataSourceSummary]:
    """Every dataSource (or the one named) with its used segments' count, rows,
    bytes and time span, and its active tasks."""
    found = DataSource.objects.filter(name=name) if name is not None else DataSource.objects
    rows = (
        found.annotate(
            n=Count("segments", filter=Q(segments__used=True)),
            rows=Sum("segments__num_rows", filter=Q(segments__used=True)),
            size=Sum("segments__size_bytes", filter=Q(segments__used=True)),
            first=Min("segments__start", filter=Q(segments__used=True)),
            last=Max("segments__end", filter=Q(segments__used=True)),
        )
        .order_by("name")
        .values("name", "n", "rows", "size", "first", "last", "created_at")
    )
    active = dict(
        Task.objects.filter(status__in=("PENDING", "WAITING", "RUNNING"))
        .values_list("datasource")
        .annotate(c=Count("id"))
        .values_list("datasource", "c")
    )
    return [
        DataSourceSummary(
            name=r["name"],
            segments=r["n"] or 0,
            rows=r["rows"] or 0,
            size_bytes=r["size"] or 0,
            start=r["first"],
            end=r["last"],
            active_tasks=active.get(r["name"], 0),
            created_at=r["created_at"],
        )
        for r in rows
    ]


def datasource_names() -> list[str]:
    """Every dataSource's name, whether it has used segments or not."""
    return list(DataSource.objects.order_by("name").values_list("name", flat=True))


def metric_types() -> dict[str, dict[str, str]]:
    """{dataSource: {metric column: aggregator type}} from the schemas of the used
    segments (a column's type in its newest segment wins), with each dimension
    recorded as `json` (stored as JSON text) typed "json". One query, of each
    dataSource's distinct schemas (a few, whatever its segments' count), each at
    its newest segment: folding them in that order gives what folding every
    segment in creation order gives, as a column's type is decided by the last
    segment naming it (its schema is then the newest of those naming it) and, for
    a json dimension's, by whether a later one names it otherwise."""
    rows = (
        Segment.objects.filter(used=True)
        .exclude(schema={})
        .values_list("datasource__name", "schema")
        .annotate(newest=Max("created_at"))
        .order_by("datasource__name", "newest")
    )
    return fold_metric_types((name, schema) for name, schema, _ in rows)


def fold_metric_types(schemas: Iterable[tuple[str, dict]]) -> dict[str, dict[str, str]]:
    """`metric_types` of (dataSource, segment schema) pairs, oldest first: a later
    schema's type of a column replaces an earlier one's."""
    out: dict[str, dict[str, str]] = {}
    for name, schema in schemas:
        for metric in (schema or {}).get("metrics") or ():
            if isinstance(metric, dict) and metric.get("name"):
                out.setdefault(name, {})[metric["name"]] = metric.get("type")
        for dim in (schema or {}).get("dimensions") or ():
            if isinstance(dim, dict) and dim.get("name") and dim.get("type") == "json":
                out.setdefault(name, {})[dim["name"]] = "json"
            elif isinstance(dim, dict) and out.get(name, {}).get(dim.get("name")) == "json":
                del out[name][dim["name"]]  # a newer segment stores it otherwise
    return out


@dataclass(frozen=True)
class DataSourceRow:
    """One line of the DataSources page."""

    name: str
    start: datetime | None
    end: datetime | None
    counts: VisibilityCounts
    unused: int
    active_tasks: int


def datasources_overview() -> list[DataSourceRow]:
    """Every dataSource with segments or with an active task (a first ingestion
    has no dataSource row yet), its counts by visibility and time span (from its
    timeline state, cached per commit), unused segments and active tasks. No pass
    over the used segments: the unused ones are counted through the `used` index."""
    known = dict(DataSource.objects.values_list("name", "id"))
    unused = dict(
        Segment.objects.filter(used=False)
        .order_by()
        .values_list("datasource_id")
        .annotate(n=Count("id"))
    )
    active = dict(
        Task.objects.filter(status__in=ACTIVE_STATUSES)
        .values_list("datasource")
        .annotate(n=Count("id"))
        .values_list("datasource", "n")
    )
    out = []
    for name in sorted(set(known) | {n for n in active if n}):
        counts, extent = VisibilityCounts(), None
        if name in known:
            state = timeline_state(datasource=name)
            extent = state.extent
            if extent is not None:
                counts = visibility_counts(datasource=name, state=state)
        out.append(
            DataSourceRow(
                name=name,
                start=extent.start if extent else None,
                end=extent.end if extent else None,
                counts=counts,
                unused=unused.get(known.get(name), 0),
                active_tasks=active.get(name, 0),
            )
        )
    return out


def datasource_known(*, name: str) -> bool:
    """Whether the console has anything to show for `name`: a dataSource row (it
    has or had segments) or a task for it, which may not have published yet."""
    return (
        DataSource.objects.filter(name=name).exists()
        or Task.objects.filter(datasource=name).exists()
    )


def datasource_get(*, name: str) -> DataSource | None:
    return DataSource.objects.filter(name=name).first()


def datasource_exists(*, name: str) -> bool:
    """Whether a dataSource row exists (it has or had segments)."""
    return DataSource.objects.filter(name=name).exists()


def datasources_created(*, names: list[str]) -> dict[str, datetime]:
    """name -> when its dataSource row was created, for those of `names` that exist."""
    return dict(DataSource.objects.filter(name__in=names).values_list("name", "created_at"))
