"""The console's Segments view: every segment of every dataSource, filtered,
sorted and paged by keyset (a cursor is the sort key of the last row shown, so a
page costs the same at row 50 and at row 500,000 and keeps its place while
segments are added).

A segment's state is what the timeline makes of it (`metastore.selectors.visibility`):
visible, partial, overshadowed, incomplete (used, in a chunk missing core
partitions); or unused. `tombstone` filters the used tombstones. The timeline
states come from the per-commit cache (`selectors.timeline_state`), so only the
page's rows are read from the database when no state is asked for; when one is,
the few ids in a rare state are looked up by key, and a common state is kept by
reading rows in order and skipping the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, Q

from metastore.intervals import Interval, format_ts, parse_ts
from metastore.models import DataSource, Segment
from metastore.selectors.segments import overlapping
from metastore.selectors.states import timeline_state

TIMELINE_STATES = ("visible", "partial", "overshadowed", "incomplete")
STATES = (*TIMELINE_STATES, "unused", "tombstone")
# What the URL says -> the column (keyset order: then the id).
SORTS = {
    "start": "start",
    "end": "end",
    "datasource": "datasource__name",
    "version": "version",
    "partition": "partition",
    "size": "size_bytes",
    "rows": "num_rows",
}
DEFAULT_SORT = "-start"  # as Druid's Segments view: newest first
# A rare state's ids up to this many are looked up by key; more, rows are skipped.
BY_KEY_MAX = 20_000
SCAN_BATCH = 500


@dataclass(frozen=True)
class SegmentFilters:
    datasource: str = ""  # any part of the name, any case; "=name" for that name only
    interval: Interval | None = None  # overlapping it
    version: str = ""  # a prefix of the version
    state: str = ""  # one of STATES
    shard_type: str = ""  # shard_spec.type: numbered, hashed, range, single, tombstone, ...


@dataclass(frozen=True)
class SegmentRow:
    id: str
    datasource: str
    interval: Interval
    version: str
    partition: int
    shard_type: str
    size: int
    rows: int
    state: str
    tombstone: bool


@dataclass(frozen=True)
class SegmentPage:
    rows: list[SegmentRow]
    next_after: list | None  # the cursor of the next page, or None at the end
    matching: int | None  # how many match, when a timeline state was asked for


_FIELDS = ("id", "datasource__name", "start", "end", "version", "partition")
_FIELDS += ("shard_spec", "size_bytes", "num_rows", "used", "tombstone")


def _base(filters: SegmentFilters):
    qs = Segment.objects.all()
    if filters.datasource:
        ids = _named(DataSource.objects.all(), filters.datasource).values("id")
        qs = qs.filter(datasource_id__in=ids)
    if filters.interval is not None:
        qs = overlapping(qs, filters.interval)
    if filters.version:
        qs = qs.filter(version__startswith=filters.version)
    if filters.shard_type:
        qs = qs.filter(shard_spec__type=filters.shard_type)
    if filters.state == "unused":
        qs = qs.filter(used=False)
    elif filters.state == "tombstone":
        qs = qs.filter(used=True, tombstone=True)
    elif filters.state:
        qs = qs.filter(used=True)
    return qs


def _named(qs, text: str):
    """dataSources whose name contains `text` (any case), or is it exactly ("=name"),
    as Druid's console filters."""
    if text.startswith("="):
        return qs.filter(name=text[1:])
    return qs.filter(name__icontains=text)


def _states(names) -> dict[str, dict[str, str]]:
    """dataSource -> (segment id -> timeline state), from the per-commit cache."""
    return {n: timeline_state(datasource=n).status for n in sorted(set(names))}


# dataSource -> (its TimelineState, {state: ids}): a rare state's ids, kept per state
# object (a new commit brings a new one), so a page reads them without a pass over
# every segment of the dataSource.
_IDS_IN: dict[str, tuple[object, dict[str, list[str]]]] = {}


def _ids_in(name: str, state, wanted: str) -> list[str]:
    cached = _IDS_IN.get(name)
    if cached is None or cached[0] is not state:
        cached = (state, {})
        _IDS_IN[name] = cached
    found = cached[1].get(wanted)
    if found is None:
        found = cached[1][wanted] = [i for i, st in state.status.items() if st == wanted]
    return found


def _in_state(filters: SegmentFilters) -> tuple[int, list[str] | None]:
    """How many used segments of the dataSources the filter names are in the
    timeline state asked for (from each state's counts), and their ids when at
    most BY_KEY_MAX (else None: the rows are read in order and the others skipped)."""
    used = Segment.objects.filter(datasource=OuterRef("pk"), used=True)
    names = DataSource.objects.filter(Exists(used))  # one index probe per dataSource
    if filters.datasource:
        names = _named(names, filters.datasource)
    states = {n: timeline_state(datasource=n) for n in names.values_list("name", flat=True)}
    matching = sum(st.counts[filters.state] for st in states.values())
    if matching > BY_KEY_MAX:
        return matching, None
    return matching, [i for n, st in states.items() for i in _ids_in(n, st, filters.state)]


def _ordered(qs, sort: str, after: list | None):
    column = SORTS[sort.lstrip("-")]
    descending = sort.startswith("-")
    if after is not None:
        value, last_id = after
        beyond = "lt" if descending else "gt"
        qs = qs.filter(
            Q(**{f"{column}__{beyond}": value}) | Q(**{column: value, f"id__{beyond}": last_id})
        )
    order = (f"-{column}", "-id") if descending else (column, "id")
    return qs.order_by(*order)


def _cursor_of(row: dict, sort: str) -> list:
    value = row[SORTS[sort.lstrip("-")]]
    return [format_ts(value) if isinstance(value, datetime) else value, row["id"]]


def cursor_value(sort: str, value):
    """A cursor's sort value back in its column's type (a ValueError if it is not)."""
    column = SORTS[sort.lstrip("-")]
    if column in ("start", "end"):
        return parse_ts(str(value))
    if column in ("partition", "size_bytes", "num_rows"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("not an integer")
        if not -(2**63) <= value < 2**63:
            raise ValueError("out of the column's range")
        return value
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def segments_page(
    *,
    filters: SegmentFilters,
    sort: str = DEFAULT_SORT,
    after: list | None = None,
    limit: int = 50,
) -> SegmentPage:
    """One page of segments matching `filters` in `sort` order (a key of SORTS,
    '-' first for descending), after the cursor `after` ([sort value, id])."""
    qs = _base(filters)
    matching, ids = None, None
    if filters.state in TIMELINE_STATES:
        matching, ids = _in_state(filters)
        if ids is not None:
            qs = qs.filter(id__in=ids)
    if matching is None or ids is not None:
        found = list(_ordered(qs, sort, after).values(*_FIELDS)[: limit + 1])
    else:
        found = _scan(qs, sort, after, limit + 1, filters.state)
    more = len(found) > limit
    found = found[:limit]
    status = _states(r["datasource__name"] for r in found if r["used"])
    rows = [_row(r, status) for r in found]
    next_after = _cursor_of(found[-1], sort) if more and found else None
    return SegmentPage(rows, next_after, matching)


def _scan(qs, sort: str, after: list | None, wanted: int, state: str) -> list[dict]:
    """Used rows in order from `after` in the timeline `state`, until `wanted` are
    found or the rows run out, read SCAN_BATCH at a time."""
    found: list[dict] = []
    column = SORTS[sort.lstrip("-")]
    status: dict[str, dict[str, str]] = {}
    while len(found) < wanted:
        batch = list(_ordered(qs, sort, after).values(*_FIELDS)[:SCAN_BATCH])
        for name in {r["datasource__name"] for r in batch} - status.keys():
            status[name] = timeline_state(datasource=name).status
        found += [
            r for r in batch if status[r["datasource__name"]].get(r["id"], "overshadowed") == state
        ]
        if len(batch) < SCAN_BATCH:
            break
        after = [batch[-1][column], batch[-1]["id"]]
    return found


def _row(r: dict, status: dict[str, dict[str, str]]) -> SegmentRow:
    state = "unused"
    if r["used"]:
        state = status.get(r["datasource__name"], {}).get(r["id"], "overshadowed")
    shard = r["shard_spec"] if isinstance(r["shard_spec"], dict) else {}
    return SegmentRow(
        id=r["id"],
        datasource=r["datasource__name"],
        interval=Interval(r["start"], r["end"]),
        version=r["version"],
        partition=r["partition"],
        shard_type=str(shard.get("type") or ("tombstone" if r["tombstone"] else "")),
        size=r["size_bytes"],
        rows=r["num_rows"],
        state=state,
        tombstone=r["tombstone"],
    )


# Druid's shard spec types Strata writes (and a dataSource imported from Druid may have).
SHARD_TYPES = ("numbered", "linear", "hashed", "range", "single", "tombstone")
