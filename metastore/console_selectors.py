"""Reads for the console's lists and summaries: counts taken from the timeline, so
that a page's numbers agree with what the timeline draws and what SQL returns.

A segment is counted by what the timeline makes of it: `visible` (all its
interval is served), `partial` (part of it is: SQL reads some of its rows),
`overshadowed` (none is), `incomplete` (its chunk lacks core partitions, so
none is served either). Rows and bytes are the segments' own; for a partial
segment only SQL knows how many of its rows show, so partial ones are kept apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Max, Min, Q

from metastore import selectors
from metastore.intervals import Interval
from metastore.models import ACTIVE_STATUSES, DataSource, Segment, Task
from metastore.selectors import TimelineState

STATES = ("visible", "partial", "overshadowed", "incomplete")
SHOWN = ("visible", "partial")  # what a query reads from


@dataclass
class Tally:
    segments: int = 0
    rows: int = 0
    bytes: int = 0

    def add(self, segments: int, rows: int, size: int) -> None:
        self.segments += segments
        self.rows += rows
        self.bytes += size


@dataclass
class VisibilityCounts:
    """Segments, rows and bytes by visibility (see the module's docstring)."""

    visible: Tally = field(default_factory=Tally)
    partial: Tally = field(default_factory=Tally)
    overshadowed: Tally = field(default_factory=Tally)
    incomplete: Tally = field(default_factory=Tally)

    def of(self, state: str) -> Tally:
        return getattr(self, state)

    def total(self, states: tuple[str, ...]) -> Tally:
        out = Tally()
        for s in states:
            t = self.of(s)
            out.add(t.segments, t.rows, t.bytes)
        return out

    @property
    def shown(self) -> Tally:
        """Visible and partial together: the segments a query reads from."""
        return self.total(SHOWN)

    @property
    def hidden(self) -> Tally:
        """Overshadowed and incomplete together: used, but no query reads them."""
        return self.total(("overshadowed", "incomplete"))


def visibility_counts(
    *, datasource: str, state: TimelineState, interval: Interval | None = None
) -> VisibilityCounts:
    """Counts of the used segments of `state` (of the chunks overlapping `interval`,
    if given). Rows and bytes per chunk come from the state's per-chunk sums; only
    chunks whose segments differ in visibility are read segment by segment."""
    if interval is None:
        # The whole dataSource's counts are kept with the state (one per commit): a
        # dataSource whose chunks mix visible and overshadowed segments would
        # otherwise read every segment's rows again on every page.
        cached = getattr(state, "_strata_visibility_counts", None)
        if cached is None:
            cached = _visibility_counts(datasource=datasource, state=state, interval=None)
            state._strata_visibility_counts = cached
        return cached
    return _visibility_counts(datasource=datasource, state=state, interval=interval)


def _visibility_counts(
    *, datasource: str, state: TimelineState, interval: Interval | None
) -> VisibilityCounts:
    counts = VisibilityCounts()
    chunks = state.chunks if interval is None else state.chunks_overlapping(interval)
    per_chunk = selectors.state_rows(datasource=datasource, state=state, interval=interval)
    mixed: dict[str, str] = {}
    for c in chunks:
        states = {state.status.get(r.id, "overshadowed") for r in c.segments}
        if len(states) == 1:
            rows, size = per_chunk.get((c.interval.start, c.interval.end, c.version), (0, 0))
            counts.of(states.pop()).add(len(c.segments), rows, size)
        else:
            mixed.update({r.id: state.status.get(r.id, "overshadowed") for r in c.segments})
    if len(mixed) <= MIXED_BY_ID_MAX:
        facts = {
            sid: (rows, size) for sid, (rows, size, _) in selectors.segment_facts(ids=mixed).items()
        }
    else:  # most chunks mixed (compacted with appends): one pass over the used rows
        facts = _used_facts(datasource, interval)
        missing = [sid for sid in mixed if sid not in facts]  # unused since (a past state)
        for sid, (rows, size, _) in selectors.segment_facts(ids=missing).items():
            facts[sid] = (rows, size)
    for sid, state_of in mixed.items():
        if sid in facts:
            counts.of(state_of).add(1, *facts[sid])
    return counts


# Above this many segments in mixed chunks, their rows and bytes are read in one
# sequential pass over the dataSource's used segments rather than by id.
MIXED_BY_ID_MAX = 5_000


def _used_facts(datasource: str, interval: Interval | None) -> dict[str, tuple[int, int]]:
    qs = Segment.objects.filter(datasource__name=datasource, used=True)
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return {sid: (rows, size) for sid, rows, size in qs.values_list("id", "num_rows", "size_bytes")}


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
    has no dataSource row yet), its counts by visibility, unused segments and
    active tasks. One timeline state per dataSource (cached per commit)."""
    known = {
        r["name"]: r
        for r in DataSource.objects.annotate(
            unused=Count("segments", filter=Q(segments__used=False)),
            first=Min("segments__start", filter=Q(segments__used=True)),
            last=Max("segments__end", filter=Q(segments__used=True)),
        ).values("name", "unused", "first", "last")
    }
    active = dict(
        Task.objects.filter(status__in=ACTIVE_STATUSES)
        .values_list("datasource")
        .annotate(n=Count("id"))
        .values_list("datasource", "n")
    )
    out = []
    for name in sorted(set(known) | {n for n in active if n}):
        r = known.get(name) or {}
        counts = VisibilityCounts()
        if r.get("first") is not None:
            state = selectors.timeline_state(datasource=name)
            counts = visibility_counts(datasource=name, state=state)
        out.append(
            DataSourceRow(
                name=name,
                start=r.get("first"),
                end=r.get("last"),
                counts=counts,
                unused=r.get("unused") or 0,
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


@dataclass(frozen=True)
class CommitChange:
    """What one commit did to the visible data: segments it overshadowed (wholly
    or in part), and the change in rows and bytes a query reads from."""

    overshadowed: list[dict]  # {id, interval, rows, bytes, now}: "overshadowed" | "partial"
    n_overshadowed: int
    shown_before: Tally
    shown_after: Tally

    @property
    def rows_delta(self) -> int:
        return self.shown_after.rows - self.shown_before.rows

    @property
    def bytes_delta(self) -> int:
        return self.shown_after.bytes - self.shown_before.bytes

    @property
    def segments_delta(self) -> int:
        return self.shown_after.segments - self.shown_before.segments


def commit_change(
    *,
    datasource: str,
    before: TimelineState | None,
    after: TimelineState,
    window: Interval,
    limit: int = 200,
) -> CommitChange:
    """Compare the timeline before and after a commit over `window` (the span of
    the segments it added and removed): a commit changes nothing outside it."""
    after_counts = visibility_counts(datasource=datasource, state=after, interval=window)
    shown_after = after_counts.shown
    if before is None:
        return CommitChange([], 0, Tally(), shown_after)
    shown_before = visibility_counts(datasource=datasource, state=before, interval=window).shown
    hidden_now: dict[str, str] = {}
    for c in before.chunks_overlapping(window):
        for r in c.segments:
            was = before.status.get(r.id)
            now = after.status.get(r.id)
            if was in SHOWN and now is not None and now not in SHOWN:
                hidden_now[r.id] = "overshadowed"
            elif was == "visible" and now == "partial":
                hidden_now[r.id] = "partial"
    ids = sorted(hidden_now)[:limit]
    facts = {
        s.id: s
        for s in Segment.objects.filter(id__in=ids).only(
            "id", "start", "end", "num_rows", "size_bytes"
        )
    }
    listed = [
        {
            "id": sid,
            "interval": facts[sid].interval if sid in facts else "",
            "rows": facts[sid].num_rows if sid in facts else 0,
            "bytes": facts[sid].size_bytes if sid in facts else 0,
            "now": hidden_now[sid],
        }
        for sid in ids
    ]
    return CommitChange(listed, len(hidden_now), shown_before, shown_after)


# The tasks table's sortable columns: what the URL says -> the model's fields.
TASK_SORTS = {
    "id": ("id",),
    "type": ("type", "-created_at"),
    "datasource": ("datasource", "-created_at"),
    "status": ("status", "-created_at"),
    "priority": ("priority", "-created_at"),
    "created": ("created_at",),
}


def tasks_table(
    *,
    status: str | None = None,
    type: str | None = None,
    datasource: str | None = None,
    sort: str | None = None,
):
    """Tasks for the console's table: `datasource` matches any part of the name,
    whatever its case ("=name": that name exactly); `sort` is a column of TASK_SORTS, '-' first for descending
    (newest first by default). Ties break on id, so pages never overlap."""
    qs = Task.objects.defer("spec", "report")
    if status:
        qs = qs.filter(status=status)
    if type:
        qs = qs.filter(type=type)
    if datasource and datasource.startswith("="):  # Druid's console: "=name", that name only
        qs = qs.filter(datasource=datasource[1:])
    elif datasource:
        qs = qs.filter(datasource__icontains=datasource)
    descending = bool(sort) and sort.startswith("-")
    fields = TASK_SORTS.get((sort or "").lstrip("-"))
    if fields is None:
        return qs.order_by("-created_at", "-id")
    first, *rest = fields
    return qs.order_by(f"-{first}" if descending else first, *rest, "id")


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
    TASK_GROUPS) and status, busiest group first. One query."""
    if by not in TASK_GROUPS:
        raise ValueError(f"group by one of {', '.join(TASK_GROUPS)}")
    qs = tasks_table(status=status, type=type, datasource=datasource).order_by()
    groups: dict[str, dict] = {}
    for value, st, n, newest in qs.values_list(by, "status").annotate(
        n=Count("id"), newest=Max("created_at")
    ):
        g = groups.setdefault(value, {"by_status": {}, "newest": None})
        g["by_status"][st] = n
        if g["newest"] is None or (newest is not None and newest > g["newest"]):
            g["newest"] = newest
    out = [
        TaskGroup(v, sum(g["by_status"].values()), g["by_status"], g["newest"])
        for v, g in groups.items()
    ]
    return sorted(out, key=lambda g: (-g.total, g.value))
