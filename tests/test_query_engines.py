"""The two query engines return the same rows: DuckDB (what the API runs) and
Spark SQL (the reference, `workers.query.spark_query`), over the same visible
tables (partial overshadowing, a tombstone, time travel), built as in
test_query.py through the services with real Parquet files."""

from __future__ import annotations

import math

import pytest
from django.conf import settings
from test_query import history  # noqa: F401 - the shared metastore history fixture

from metastore import query

pytestmark = [pytest.mark.django_db, pytest.mark.spark]

# Written in the SQL both dialects share.
QUERIES = [
    "SELECT __time, page, added, count FROM wiki",
    "SELECT COUNT(*) AS n, SUM(added) AS added FROM wiki",
    "SELECT page, SUM(added) AS added, COUNT(*) AS n FROM wiki GROUP BY page",
    "SELECT date_trunc('day', __time) AS day, SUM(added) AS added FROM wiki GROUP BY 1",
    "SELECT page, AVG(added) AS mean FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 06:00:00' "
    "GROUP BY page",
    "SELECT MIN(__time) AS first, MAX(__time) AS last FROM wiki",
]


def canonical(rows: list[list]) -> list[tuple]:
    def value(v):
        return round(v, 9) if isinstance(v, float) and not math.isnan(v) else v

    return sorted((tuple(value(v) for v in row) for row in rows), key=repr)


@pytest.fixture(scope="module")
def spark():
    from workers.spark import get_spark

    return get_spark(master="local[1]", shuffle_partitions=1, driver_memory="1g")


@pytest.mark.parametrize("as_of_commit", [None, 0, 1, 2])
def test_duckdb_and_spark_return_the_same_rows(history, spark, as_of_commit):  # noqa: F811
    from workers.query import spark_query

    as_of = None if as_of_commit is None else history[as_of_commit]
    root = str(settings.STRATA_DEEP_STORAGE)
    for sql in QUERIES:
        sources = query.sources_for(sql, as_of=as_of)
        assert [s.name for s in sources] == ["wiki"]
        fast = query.duckdb_query(sql, sources, root=root)
        reference = spark_query(spark, sql, sources)

        assert fast.columns == reference.columns, sql
        assert canonical(fast.rows) == canonical(reference.rows), sql
        assert fast.rows, sql  # every query sees rows at every commit here


def test_reingesting_a_file_shared_with_a_copy_reads_only_the_copys_interval(inline_spec, spark):
    """The Spark reader of druid inputs and compaction (`read_segments`, fed by the
    runner's `source_pieces`) sees exactly the rows DuckDB sees: of a DAY file
    visible only through an HOUR copy, that hour."""
    from dataclasses import dataclass

    from test_query import carried_copy_alone_visible

    from metastore.intervals import Interval
    from workers.jobs.parsing import read_segments
    from workers.query import spark_query
    from workers.runner import source_pieces

    @dataclass
    class DruidInput:  # what `source_pieces` reads of an ingestion spec
        datasource: str
        interval: Interval

        @property
        def druid_source(self):
            return self

        @property
        def input(self):
            return self

    carried_copy_alone_visible(inline_spec, "copies")
    day = Interval.parse("2024-01-01/2024-01-02")
    pieces = source_pieces(DruidInput("copies", day))
    df, _, _ = read_segments(spark, pieces, day)

    assert sorted(r["page"] for r in df.select("page").collect()) == ["j0", "late", "r0"]
    sql = "SELECT page FROM copies"
    reference = spark_query(spark, sql, query.sources_for(sql, as_of=None))
    assert canonical(reference.rows) == [("j0",), ("late",), ("r0",)]
