"""A SQL query's filter on `__time` that the Parquet footers prove is left out of
the SQL the engine runs (metastore.query.drop_proven_time_filter): only the bounds
at the top of a single table's WHERE, only when every row of the files read is
within them; the results are those of the query with its filter.

The `wiki` dataSource of test_native_queries (the `native_wiki` fixture, DAY segments):

    2024-01-01T01:00, 05:00  (day 1, partition 0)
    2024-01-01T12:00         (day 1, partition 1)
    2024-01-03T02:00, 10:00  (day 3)
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metastore import query
from tests.test_native_first_time import _file


def _compiled(sql: str, **options) -> str:
    """The SQL Strata runs for `sql` (its `EXPLAIN`'s first row)."""
    rows = query.run_query(sql=sql, explain=True, **options).rows
    assert rows[0][0] == "strata_sql"
    return rows[0][1]


def _filtered(sql: str) -> bool:
    return "__time" in _compiled(sql, druid_sql=True).split("WHERE", 1)[-1]


def _rows(sql: str, **options) -> list:
    return sorted(map(repr, query.run_query(sql=sql, druid_sql=True, **options).rows))


def _unoptimised(sql: str) -> str:
    """The same query in a subquery, whose filter is never dropped."""
    return f"SELECT * FROM ({sql}) AS q"


PROVEN = [
    "SELECT COUNT(*) AS n FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 00:00:00' "
    "AND __time < TIMESTAMP '2024-01-04 00:00:00'",
    "SELECT page, COUNT(*) AS n FROM wiki WHERE __time >= '2024-01-01' AND page <> 'x' "
    "AND __time < '2024-01-02' GROUP BY page ORDER BY n DESC LIMIT 5",
    "SELECT COUNT(*) AS n FROM wiki WHERE __time BETWEEN TIMESTAMP '2024-01-03 00:00:00' "
    "AND TIMESTAMP '2024-01-03 10:00:00'",
    "SELECT COUNT(*) AS n FROM wiki w WHERE TIMESTAMP '2024-01-01 01:00:00' <= w.__time "
    "AND w.__time <= TIMESTAMP '2024-01-03 10:00:00'",
    "SELECT COUNT(*) AS n FROM wiki WHERE __time > TIMESTAMP '2024-01-01 00:59:59' "
    "AND TIME_IN_INTERVAL(__time, '2024-01-01/2024-01-05')",
    "SELECT COUNT(*) AS n FROM wiki WHERE __time >= DATE '2023-12-31'",
]

KEPT = [
    # bounds inside a file's rows: partition 0 holds 01:00 and 05:00
    "SELECT COUNT(*) AS n FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 02:00:00' "
    "AND __time < TIMESTAMP '2024-01-04 00:00:00'",
    # exclusive ends at a row: 01:00 and 10:00 are rows
    "SELECT COUNT(*) AS n FROM wiki WHERE __time > TIMESTAMP '2024-01-01 01:00:00'",
    "SELECT COUNT(*) AS n FROM wiki WHERE __time < TIMESTAMP '2024-01-03 10:00:00'",
    "SELECT COUNT(*) AS n FROM wiki WHERE __time BETWEEN TIMESTAMP '2024-01-03 00:00:00' "
    "AND TIMESTAMP '2024-01-03 09:59:59'",
    # an OR, a function of __time, a join, subqueries, a CTE: as they are
    "SELECT COUNT(*) AS n FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 00:00:00' "
    "OR page = 'Main'",
    "SELECT COUNT(*) AS n FROM wiki WHERE TIME_FLOOR(__time, 'P1D') >= TIMESTAMP '2024-01-01 00:00:00'",
    "SELECT COUNT(*) AS n FROM wiki a JOIN wiki b ON a.page = b.page "
    "WHERE a.__time >= TIMESTAMP '2024-01-01 00:00:00' AND a.__time < TIMESTAMP '2024-01-04 00:00:00'",
    "SELECT COUNT(*) AS n FROM (SELECT * FROM wiki WHERE __time >= TIMESTAMP '2024-01-03 00:00:00') "
    "WHERE __time >= TIMESTAMP '2024-01-01 00:00:00'",
    "SELECT COUNT(*) AS n FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 00:00:00' "
    "AND page IN (SELECT page FROM wiki WHERE __time < TIMESTAMP '2024-01-01 03:00:00')",
    "WITH w AS (SELECT * FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 04:00:00') "
    "SELECT COUNT(*) AS n FROM w WHERE __time >= TIMESTAMP '2024-01-01 00:00:00'",
]


@pytest.mark.parametrize("sql", PROVEN)
def test_a_time_filter_the_files_prove_is_not_run(native_wiki, sql):
    assert not _filtered(sql)
    assert _rows(sql) == _rows(_unoptimised(sql))
    assert "__time" in _compiled(_unoptimised(sql), druid_sql=True).split("WHERE", 1)[-1]


@pytest.mark.parametrize("sql", KEPT)
def test_a_time_filter_the_files_do_not_prove_is_kept(native_wiki, sql):
    assert _filtered(sql)
    assert _rows(sql) == _rows(_unoptimised(sql))


def test_the_other_conditions_stay(native_wiki):
    sql = (
        "SELECT COUNT(*) AS n FROM wiki WHERE __time >= TIMESTAMP '2024-01-01 00:00:00' "
        "AND page = 'Main' AND __time < TIMESTAMP '2024-01-04 00:00:00'"
    )
    compiled = _compiled(sql, druid_sql=True)
    assert "page = 'Main'" in compiled and "__time" not in compiled.split("WHERE", 1)[-1]
    assert _rows(sql) == _rows(_unoptimised(sql))


def _posted(api_client, sql: str, zone: str) -> list:
    body = {"query": sql, "context": {"sqlTimeZone": zone}}
    response = api_client.post("/druid/v2/sql", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("zone", ["America/Los_Angeles", "Asia/Kolkata", "UTC"])
def test_under_a_time_zone_the_rows_are_those_of_the_filter(native_wiki, api_client, zone):
    """Timestamp literals are wall-clock times of `sqlTimeZone`: the same rows with
    the filter run (the query in a subquery) as without."""
    for sql in [*PROVEN, *KEPT]:
        assert _posted(api_client, sql, zone) == _posted(api_client, _unoptimised(sql), zone), sql
    # 2024-01-01 01:00 UTC is 2023-12-31 17:00 in Los Angeles: the day before, all rows
    late = "SELECT COUNT(*) AS n FROM wiki WHERE __time >= TIMESTAMP '2023-12-31 16:00:00'"
    assert _posted(api_client, late, "America/Los_Angeles") == [{"n": 5}]
    assert _posted(api_client, late.replace("16:00", "18:00"), "America/Los_Angeles") == [{"n": 4}]


def test_a_file_without_statistics_keeps_the_filter(tmp_path):
    """Its rows are read for its span (time_stats), and a null `__time` keeps it."""
    from metastore import time_stats
    from metastore.intervals import Interval
    from metastore.sql_sources import TableSource

    day = (Interval.parse("2024-01-01/2024-01-02"),)
    bare = _file(tmp_path, "bare", ["2024-01-01T01:00"], write_statistics=False)
    inside = [Interval.parse("2024-01-01T01:00/2024-01-01T02:00")]
    assert time_stats.rows_within([TableSource("t", whole=(bare,), whole_intervals=day)], inside)
    after = [Interval.parse("2024-01-01T01:00:00.000001/2024-01-01T02:00")]
    assert not time_stats.rows_within([TableSource("t", whole=(bare,), whole_intervals=day)], after)
    path = tmp_path / "nulls.parquet"
    times = pa.array([None, 1704070800000000], type=pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"__time": times}), path, write_statistics=False)
    nulls = TableSource("t", whole=(str(path),), whole_intervals=day)
    assert not time_stats.rows_within([nulls], [Interval.parse("2024/2025")])
