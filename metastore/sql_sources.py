"""What a dataSource's table is made of: its visible files and the intervals of each
that are visible (from the timeline), and the files' column schemas. Shared by the
SQL layer (`metastore.query`) and its catalog (`metastore.sql_catalog`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from metastore import selectors
from metastore.intervals import Interval
from metastore.models import Segment

_EVERYTHING = Interval.parse("0001-01-01/9999-12-31")


@dataclass(frozen=True)
class TableSource:
    """The files behind one dataSource's table: `whole` files are visible over all
    of their rows; each of `partial` is visible only inside its intervals."""

    name: str
    whole: tuple[str, ...] = ()
    partial: tuple[tuple[str, tuple[Interval, ...]], ...] = ()
    schema_file: str | None = None  # any file of the dataSource, for an empty table's columns

    @property
    def files(self) -> list[str]:
        return [*self.whole, *(f for f, _ in self.partial)]


# --- what a query reads ------------------------------------------------------------------


def visible_source(*, datasource: str, as_of: int | None = None) -> TableSource:
    """The visible rows of `datasource` as files and intervals, from its timeline."""
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
            whole.append(location)
        else:
            partial.append((location, tuple(sorted(intervals))))
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
        whole=tuple(sorted(whole)),
        partial=tuple(sorted(partial)),
        schema_file=schema_file,
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
