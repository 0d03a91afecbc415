"""Spark SQL over the visible rows: the reference engine, and the one that scales
on a cluster. The tables are the same `TableSource`s the DuckDB engine reads
(`metastore.query`): each dataSource a temporary view of its visible files, a
partly visible file filtered to its visible intervals, tombstones empty.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import reduce

from metastore.query import QueryResult, TableSource, arrow_result

# Segment files never change, so a table's DataFrame (its files listed, their schema
# read) serves every query over the same files: kept per session, newest used last.
_frames_lock = threading.Lock()
_frames: OrderedDict[tuple[object, TableSource], object] = OrderedDict()
_FRAMES_KEPT = 64


def _within(intervals):
    from pyspark.sql import functions as F

    cond = F.lit(False)
    for iv in intervals:
        cond = cond | ((F.col("__time") >= F.lit(iv.start)) & (F.col("__time") < F.lit(iv.end)))
    return cond


def table_frame(spark, source: TableSource):
    """A DataFrame of exactly a table's visible rows (made once per session and files)."""
    key = (spark, source)
    with _frames_lock:
        frame = _frames.get(key)
        if frame is not None:
            _frames.move_to_end(key)
            return frame
    frame = _table_frame(spark, source)
    with _frames_lock:
        _frames[key] = frame
        while len(_frames) > _FRAMES_KEPT:
            _frames.popitem(last=False)
    return frame


def _table_frame(spark, source: TableSource):
    # Merging schemas reads every file's footer: only when they differ.
    read = spark.read.option("mergeSchema", "true" if source.mixed else "false")
    frames = []
    if source.whole:
        frames.append(read.parquet(*source.whole))
    by_intervals: dict[tuple, list[str]] = {}
    for location, intervals in source.partial:
        by_intervals.setdefault(intervals, []).append(location)
    for intervals, files in sorted(by_intervals.items()):
        frames.append(read.parquet(*files).filter(_within(intervals)))
    if not frames:
        if source.schema_file:
            return read.parquet(source.schema_file).limit(0)
        return spark.sql("SELECT CAST(NULL AS TIMESTAMP) AS __time WHERE false")
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def spark_query(spark, sql: str, sources: list[TableSource]) -> QueryResult:
    """Run a (checked) query on Spark SQL over the given tables."""
    for source in sources:
        table_frame(spark, source).createOrReplaceTempView(source.name)
    try:
        return arrow_result(spark.sql(sql).toArrow())
    finally:
        for source in sources:
            spark.catalog.dropTempView(source.name)
