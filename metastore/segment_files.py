"""What a segment's Parquet file holds, read for the metastore's own figures
(a carried copy's rows and bytes, `metastore.upgrade_rules.copy_figures`)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from metastore.intervals import Interval
from metastore.upgrade_rules import FileFacts


def file_facts(location: str, intervals: Iterable[Interval]) -> FileFacts | None:
    """The file's rows and bytes, and its rows inside each of `intervals` (by its
    `__time` column); None when `location` is not a readable Parquet file."""
    if not location or not os.path.isfile(location):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        column = pq.read_table(location, columns=["__time"]).column("__time")
    except (OSError, KeyError, pa.ArrowException):
        return None
    rows_in = {}
    for interval in set(intervals):
        if pa.types.is_timestamp(column.type):
            low = pa.scalar(interval.start, type=column.type)
            high = pa.scalar(interval.end, type=column.type)
        else:  # epoch milliseconds
            low = int(interval.start.timestamp() * 1000)
            high = int(interval.end.timestamp() * 1000)
        mask = pc.and_(pc.greater_equal(column, low), pc.less(column, high))
        rows_in[interval] = int(pc.sum(mask.cast(pa.int64())).as_py() or 0)
    return FileFacts(rows=len(column), size_bytes=os.path.getsize(location), rows_in=rows_in)
