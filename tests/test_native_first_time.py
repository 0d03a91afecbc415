"""The timestamp of a granularity-`all` topN or timeseries, the first row of its
intervals (matched by the filter or not), read from the Parquet footers'
statistics of `__time` (metastore.time_stats) instead of from the rows, and the
same as the rows give (the plan compiled without it reads them), with filters and
with intervals that start inside a file's rows (where the statistics cannot tell).

The `wiki` dataSource of test_native_queries:

    2024-01-01T01:00, 05:00  (day 1, partition 0)
    2024-01-01T12:00         (day 1, partition 1)
    2024-01-03T02:00, 10:00  (day 3)
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from console.druid_native import _FooterTimes, _schema
from metastore import query, time_stats
from metastore.druid import native as compiler
from metastore.druid.native_results import shape
from metastore.intervals import Interval
from metastore.sql_sources import TableSource, latest_commits
from tests.test_native_queries import native, publish_wiki


@pytest.fixture
def wiki(db, inline_spec):
    publish_wiki(inline_spec)


def _ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def _file(tmp_path, name: str, times: list[str], unit: str = "us", **options) -> str:
    stamps = [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in times]
    path = tmp_path / f"{name}.parquet"
    table = pa.table({"__time": pa.array(stamps, type=pa.timestamp(unit, tz="UTC"))})
    pq.write_table(table, path, **options)
    return str(path)


def _ivs(*texts: str) -> list[Interval]:
    return [Interval.parse(t) for t in texts]


def test_footer_statistics_prove_the_first_row_or_say_they_cannot(tmp_path):
    a = _file(tmp_path, "a", ["2024-01-01T01:00", "2024-01-01T05:00"])
    b = _file(tmp_path, "b", ["2024-01-01T12:00"], unit="ms")
    source = TableSource("t", whole=(a, b))

    assert time_stats.first_time_ms([source], _ivs("2024-01-01/2024-01-02")) == (
        _ms("2024-01-01T01:00"),
    )
    # a's rows after 03:00 may start before b's 12:00: only the rows can tell
    assert time_stats.first_time_ms([source], _ivs("2024-01-01T03:00/2024-01-02")) is None
    # a has no row after 06:00 (its greatest is 05:00)
    assert time_stats.first_time_ms([source], _ivs("2024-01-01T06:00/2024-01-02")) == (
        _ms("2024-01-01T12:00"),
    )
    # a's rows from 04:00 on cannot come before c's 04:00
    late = TableSource("t", whole=(a, _file(tmp_path, "c", ["2024-01-01T04:00"])))
    assert time_stats.first_time_ms([late], _ivs("2024-01-01T04:00/2024-01-02")) == (
        _ms("2024-01-01T04:00"),
    )
    assert time_stats.first_time_ms([source], _ivs("2024-01-02/2024-01-03")) == (None,)


def test_a_partial_file_counts_within_its_visible_intervals_and_no_statistics_is_unknown(
    tmp_path,
):
    a = _file(tmp_path, "a", ["2024-01-01T01:00", "2024-01-01T05:00"])
    b = _file(tmp_path, "b", ["2024-01-01T12:00"])
    shown = (Interval.parse("2024-01-01T06:00/2024-01-02"),)
    source = TableSource("t", whole=(b,), partial=((a, shown),))
    assert time_stats.first_time_ms([source], _ivs("2024-01-01/2024-01-02")) == (
        _ms("2024-01-01T12:00"),
    )

    bare = _file(tmp_path, "bare", ["2024-01-01T01:00"], write_statistics=False)
    assert time_stats.first_time_ms([TableSource("t", whole=(bare,))], _ivs("2024/2025")) is None


def _scanned(body: dict) -> list:
    """The result as the plan that reads `__time` from the rows gives it."""
    tables = {"wiki": _schema("wiki", latest_commits())}
    plan = compiler.compile_query(body, None, tables=tables)
    return shape(plan, query.run_query(sql=plan.sql).rows)


def _first_row(intervals: list[str]) -> str | None:
    where = " OR ".join(
        f"(__time >= TIMESTAMP '{iv.start:%Y-%m-%d %H:%M:%S}' "
        f"AND __time < TIMESTAMP '{iv.end:%Y-%m-%d %H:%M:%S}')"
        for iv in _ivs(*intervals)
    )
    [[first]] = query.run_query(
        sql=f"SELECT strftime(min(__time), '%Y-%m-%dT%H:%M:%S.000Z') FROM wiki WHERE {where}"
    ).rows
    return first


@pytest.mark.parametrize(
    ("intervals", "from_footers", "unfiltered"),
    [
        (["2024-01-01/2024-01-04"], True, True),
        (["2024-01-01T03:00/2024-01-04"], False, False),  # starts inside partition 0's rows
        (["2024-01-01T06:00/2024-01-04"], True, False),
        (["2024-01-01T00:00/2024-01-01T02:00", "2024-01-03/2024-01-04"], True, False),
        (["2024-01-02/2024-01-03"], True, True),  # no rows: no files either
        (["2024-01-03/2024-01-04"], True, True),  # day 3's file alone
    ],
)
def test_all_granularity_timestamp_is_the_first_row_as_the_rows_give_it(
    wiki, api_client, intervals, from_footers, unfiltered
):
    """The answer is the same whether the time and the time filter come from the
    footers or from the rows, with a filter or without, matching rows or none."""
    ivs = [Interval.parse(i) for i in intervals]
    times = _FooterTimes(latest_commits())
    assert (times.first_time(("wiki",), ivs) is not None) == from_footers
    assert times.within(("wiki",), ivs) == unfiltered
    first = _first_row(intervals)
    aggregations = [{"type": "count", "name": "rows"}]
    topn = {
        "queryType": "topN",
        "dataSource": "wiki",
        "dimension": "page",
        "metric": "rows",
        "threshold": 2,
        "granularity": "all",
        "intervals": intervals,
        "aggregations": aggregations,
    }
    series = {k: v for k, v in topn.items() if k not in ("dimension", "metric", "threshold")}
    series["queryType"] = "timeseries"
    grouped = {**series, "queryType": "groupBy", "dimensions": ["user"], "granularity": "hour"}
    for body in (topn, series, grouped):
        for matched in (None, "Main", "nothing"):
            if matched is not None:
                body = {
                    **body,
                    "filter": {"type": "selector", "dimension": "page", "value": matched},
                }
            result = native(api_client, body)
            assert result == _scanned(body), (body, result)
            if body["queryType"] != "groupBy":
                assert [r["timestamp"] for r in result] in ([first], [])


def test_a_join_reads_its_table_filtered_by_time(wiki):
    """A join's sides may read the same table over other times: no cut by files."""
    body = {
        "queryType": "groupBy",
        "dataSource": {
            "type": "join",
            "left": "wiki",
            "right": {
                "type": "query",
                "query": {
                    "queryType": "scan",
                    "dataSource": "wiki",
                    "intervals": ["2000/2100"],
                    "columns": ["page"],
                },
            },
            "rightPrefix": "r.",
            "condition": 'page == "r.page"',
            "joinType": "INNER",
        },
        "intervals": ["2024-01-03/2024-01-04"],
        "granularity": "all",
        "dimensions": ["page"],
        "aggregations": [{"type": "count", "name": "rows"}],
    }
    tables = {"wiki": _schema("wiki", latest_commits())}
    plan = compiler.compile_query(body, None, tables=tables, times=_FooterTimes(latest_commits()))
    assert plan.cuts == {}
    series = {
        "queryType": "timeseries",
        "dataSource": "wiki",
        "intervals": ["2024-01-03/2024-01-04"],
        "granularity": "all",
        "aggregations": [{"type": "count", "name": "rows"}],
    }
    plan = compiler.compile_query(series, None, tables=tables, times=_FooterTimes(latest_commits()))
    assert plan.cuts == {"wiki": [Interval.parse("2024-01-03/2024-01-04")]}
    assert "2024-01-03" not in plan.sql
