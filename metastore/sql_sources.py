"""What a dataSource's table is made of: its visible files and the intervals of each
that are visible (from the timeline), and the files' column schemas. Shared by the
SQL layer (`metastore.query`) and its catalog (`metastore.sql_catalog`).

The latest file list of a dataSource is kept per process with the commit seq it
reflects: a query reads the newest seq (one index probe) and reuses the list
when no commit came since, so it is never older than the latest commit."""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from functools import cached_property

from metastore import selectors
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, DataSource, Segment

_EVERYTHING = Interval.parse("0001-01-01/9999-12-31")


@dataclass(frozen=True)
class TableSource:
    """The files behind one dataSource's table: `whole` files are visible over all
    of their rows; each of `partial` is visible only inside its intervals."""

    name: str
    whole: tuple[str, ...] = ()
    partial: tuple[tuple[str, tuple[Interval, ...]], ...] = ()
    schema_file: str | None = None  # any file of the dataSource, for an empty table's columns
    # The segment interval of each of `whole` (same order), when known: what pruning reads.
    whole_intervals: tuple[Interval, ...] = ()

    @property
    def files(self) -> list[str]:
        return [*self.whole, *(f for f, _ in self.partial)]

    @cached_property
    def mixed(self) -> bool:
        """Whether its files were written with different columns (read by name)."""
        return len({file_schema(f) for f in self.files}) > 1


def within(
    source: TableSource,
    start: dt.datetime | None,
    end: dt.datetime | None,
    *,
    end_included: bool = True,
) -> TableSource:
    """`source` without the files that hold no row at or after `start` and before
    `end` (or at it, `end_included`) (naive UTC; None: unbounded): a query that reads
    only those times gets the same rows from it. Files with different columns keep
    every file (the table's columns are those of all its files)."""
    if (start is None and end is None) or source.mixed:
        return source
    if len(source.whole_intervals) != len(source.whole):
        return source

    utc = dt.UTC
    first = start.replace(tzinfo=utc) if start is not None else None
    last = end.replace(tzinfo=utc) if end is not None else None

    def shows(iv: Interval) -> bool:
        before_end = last is None or iv.start < last or (end_included and iv.start == last)
        return before_end and (first is None or iv.end > first)

    kept = [
        (f, iv) for f, iv in zip(source.whole, source.whole_intervals, strict=True) if shows(iv)
    ]
    partial = [(f, ivs) for f, ivs in source.partial if any(shows(iv) for iv in ivs)]
    if len(kept) == len(source.whole) and len(partial) == len(source.partial):
        return source
    return TableSource(
        name=source.name,
        whole=tuple(f for f, _ in kept),
        partial=tuple(partial),
        schema_file=source.schema_file or next(iter(source.files), None),
        whole_intervals=tuple(iv for _, iv in kept),
    )


# --- what a query reads ------------------------------------------------------------------


_sources_lock = threading.Lock()
_sources: dict[str, tuple[int, TableSource]] = {}  # dataSource -> (commit seq, its latest files)


def latest_commits() -> dict[str, int]:
    """Every dataSource's name -> its newest commit seq (0: none yet), in one query
    (an index probe per dataSource)."""
    from django.db.models import OuterRef, Subquery

    newest = CommitLogEntry.objects.filter(datasource=OuterRef("name")).order_by("-seq")
    rows = (
        DataSource.objects.annotate(seq=Subquery(newest.values("seq")[:1]))
        .order_by("name")
        .values_list("name", "seq")
    )
    return {name: seq or 0 for name, seq in rows}


def visible_source(
    *, datasource: str, as_of: int | None = None, seq: int | None = None
) -> TableSource:
    """The visible rows of `datasource` as files and intervals, from its timeline
    (the latest, kept per commit seq; or as of commit `as_of`). `seq`: its newest
    commit seq, if just read (`latest_commits`)."""
    if as_of is not None:
        return _source_of(datasource, as_of)
    if seq is None:
        seq = selectors.last_commit_seq(datasource=datasource)
    with _sources_lock:
        cached = _sources.get(datasource)
    if cached is not None and cached[0] == seq:
        return cached[1]
    # Built from a timeline at `seq` or newer: never older than the commit just read.
    source = _source_of(datasource, None)
    with _sources_lock:
        if len(_sources) > 10_000:
            _sources.clear()
        current = _sources.get(datasource)
        if current is None or current[0] <= seq:
            _sources[datasource] = (seq, source)
    return source


def _source_of(datasource: str, as_of: int | None) -> TableSource:
    timeline = selectors.timeline_for(datasource=datasource, as_of=as_of)
    pieces = [(iv, ref) for iv, ref in timeline.lookup(_EVERYTHING) if not ref.tombstone]
    files = {
        seg_id: (location, upgraded_from)
        for seg_id, location, upgraded_from in Segment.objects.filter(
            id__in={ref.id for _, ref in pieces}
        ).values_list("id", "location", "upgraded_from")
    }
    shown: dict[str, list[Interval]] = {}
    whole_of: dict[str, Interval | None] = {}
    for piece, ref in pieces:
        location, upgraded_from = files.get(ref.id, ("", ""))
        if not location:
            continue
        shown.setdefault(location, []).append(piece)
        # An upgraded copy shares its source's file, which may hold rows outside
        # the copy's own interval: such a file is always read by its pieces.
        whole_of[location] = None if upgraded_from else ref.interval
    whole, partial = [], []
    for location, intervals in shown.items():
        if intervals == [whole_of[location]]:
            whole.append((location, whole_of[location]))
        else:
            partial.append((location, tuple(sorted(intervals))))
    whole.sort()
    schema_file = None
    if not shown:
        schema_file = (
            Segment.objects.filter(datasource__name=datasource, tombstone=False)
            .exclude(location="")
            .order_by("-created_at")
            .values_list("location", flat=True)
            .first()
        )
    return TableSource(
        name=datasource,
        whole=tuple(f for f, _ in whole),
        partial=tuple(sorted(partial)),
        schema_file=schema_file,
        whole_intervals=tuple(iv for _, iv in whole),
    )


_schema_lock = threading.Lock()
_schemas: dict[str, tuple] = {}  # segment files never change: their schemas are cached


def file_schema(path: str) -> tuple:
    """((column, pyarrow type text), ...) of a segment file, cached."""
    with _schema_lock:
        found = _schemas.get(path)
    if found is None:
        import pyarrow.parquet as pq

        found = tuple((f.name, str(f.type)) for f in pq.read_schema(path))
        with _schema_lock:
            if len(_schemas) > 200_000:
                _schemas.clear()
            _schemas[path] = found
    return found
