"""The timestamp of a granularity-`all` topN or timeseries, as Druid gives it, from
the Parquet footers' statistics of `__time` (metastore.time_stats).

Druid (CursorGranularizer.create, AllGranularity.getIterable): each segment's
cursor covers the query interval cut to the segment's visible part, clipped to
[the segment's least __time over all its rows, bucketEnd(greatest) = +∞ for ALL);
null -> no result from that segment. Its one bucket is stamped with that clipped
interval's start, whether the filter matches rows or not (a zero row for a
timeseries unless skipEmptyBuckets, TimeseriesQueryEngine; a topN result of no
values). The broker merges in time order and keeps the first timestamp
(TimeseriesBinaryFn / TopNBinaryFn: arg1's for ALL). A timeseries that nothing
answers gets a null row stamped with the first interval's start
(TimeseriesQueryQueryToolChest.getNullTimeseriesResultValue).

The `wiki` dataSource of test_native_queries (the `native_wiki` fixture, DAY segments):

    2024-01-01T01:00, 05:00  (day 1, partition 0)
    2024-01-01T12:00         (day 1, partition 1)
    2024-01-03T02:00, 10:00  (day 3)
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from console.druid_native import FooterTimes, table_kinds
from metastore import query, time_stats
from metastore.druid import native as compiler
from metastore.druid.native_results import shape
from metastore.intervals import Interval
from metastore.sql_sources import TableSource, latest_commits
from tests.test_native_queries import native


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


def test_a_segment_is_stamped_with_the_interval_start_clipped_to_its_first_row(tmp_path):
    a = _file(tmp_path, "a", ["2024-01-01T01:00", "2024-01-01T05:00"])
    b = _file(tmp_path, "b", ["2024-01-01T12:00"], unit="ms")
    day = Interval.parse("2024-01-01/2024-01-02")
    source = TableSource("t", whole=(a, b), whole_intervals=(day, day))

    def stamp(*intervals):
        return time_stats.stamp_ms([source], _ivs(*intervals))

    # the least row of a: after the interval's start
    assert stamp("2024-01-01/2024-01-02") == (_ms("2024-01-01T01:00"),)
    # an interval starting inside a's rows, or after them: its start, rows or not
    assert stamp("2024-01-01T03:00/2024-01-02") == (_ms("2024-01-01T03:00"),)
    assert stamp("2024-01-01T06:00/2024-01-02") == (_ms("2024-01-01T06:00"),)
    # an interval outside the segments (DAY) holds none of them
    assert stamp("2024-01-02T00:00/2024-01-03") == (None,)
    assert time_stats.stamp_ms([TableSource("t", whole=(a,))], _ivs("2024/2025")) is None
    # an interval ending before a's and b's first rows: [start, end) ∩ [least, +∞) is empty
    assert stamp("2024-01-01T00:00/2024-01-01T00:30") == (None,)
    # two intervals: the first holds no segment's first row, the second is b's alone
    assert stamp("2024-01-01T00:00/2024-01-01T00:30", "2024-01-01T10:00/2024-01-01T11:00") == (
        _ms("2024-01-01T10:00"),
    )
    assert stamp("2024-01-01T00:00/2024-01-01T01:30", "2024-01-01T10:00/2024-01-01T11:00") == (
        _ms("2024-01-01T01:00"),
    )


def test_a_partial_file_counts_within_its_visible_intervals_and_no_statistics_reads_rows(
    tmp_path,
):
    a = _file(tmp_path, "a", ["2024-01-01T01:00", "2024-01-01T05:00"])
    b = _file(tmp_path, "b", ["2024-01-01T12:00"])
    shown = (Interval.parse("2024-01-01T06:00/2024-01-02"),)
    day = (Interval.parse("2024-01-01/2024-01-02"),)
    source = TableSource("t", whole=(b,), partial=((a, shown),), whole_intervals=day)
    # a's visible part starts at 06:00: its cursor is [06:00, next day), stamped 06:00
    assert time_stats.stamp_ms([source], _ivs("2024-01-01/2024-01-02")) == (
        _ms("2024-01-01T06:00"),
    )
    hidden = TableSource(
        "t",
        whole=(b,),
        partial=((a, (Interval.parse("2024-01-02/2024-01-03"),)),),
        whole_intervals=day,
    )
    assert time_stats.stamp_ms([hidden], _ivs("2024-01-01/2024-01-02")) == (
        _ms("2024-01-01T12:00"),
    )

    bare = _file(tmp_path, "bare", ["2024-01-01T01:00"], write_statistics=False)
    bare_source = TableSource("t", whole=(bare,), whole_intervals=day)
    assert time_stats.stamp_ms([bare_source], _ivs("2024/2025")) == (_ms("2024-01-01T01:00"),)


def _scanned(body: dict) -> list:
    """The result as the plan that reads `__time` from the rows gives it."""
    tables = {"wiki": table_kinds("wiki", latest_commits())}
    plan = compiler.compile_query(body, None, tables=tables)
    return shape(plan, query.run_query(sql=plan.sql).rows)


def _values(result: list) -> list:
    return [r["result"] for r in result]


@pytest.mark.parametrize(
    ("intervals", "stamp", "unfiltered"),
    [
        (["2024-01-01/2024-01-04"], "2024-01-01T01:00", True),
        # starts inside partition 0's rows: the interval's start, not the next row (05:00)
        (["2024-01-01T03:00/2024-01-04"], "2024-01-01T03:00", False),
        # after partition 0's last row but inside its segment: still its start
        (["2024-01-01T06:00/2024-01-04"], "2024-01-01T06:00", False),
        # in the gap before day 3: day 3's segment starts later, its first row later still
        (["2024-01-02T12:00/2024-01-04"], "2024-01-03T02:00", True),
        (["2024-01-01T00:00/2024-01-01T02:00", "2024-01-03/2024-01-04"], "2024-01-01T01:00", False),
        # the first interval ends before any row of day 1: day 3's first row
        (["2024-01-01T00:00/2024-01-01T00:30", "2024-01-03/2024-01-04"], "2024-01-03T02:00", False),
        # no segment: a timeseries' null row takes the first interval's start, a topN none
        (["2024-01-02/2024-01-03"], None, True),
        (["2024-01-03T00:00/2024-01-03T01:00"], None, False),
        (["2024-01-03/2024-01-04"], "2024-01-03T02:00", True),
    ],
)
def test_all_granularity_timestamp_is_druids(native_wiki, api_client, intervals, stamp, unfiltered):
    """Druid's stamp whether the filter matches rows or none; the values are the
    same as the plan that reads the rows gives (groupBy: the whole result)."""
    ivs = [Interval.parse(i) for i in intervals]
    times = FooterTimes(latest_commits())
    assert times.stamp(("wiki",), ivs) == ((None,) if stamp is None else (_ms(stamp),))
    assert times.within(("wiki",), ivs) == unfiltered
    expected = f"{stamp}:00.000Z" if stamp else None
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
            if body["queryType"] == "groupBy":
                assert result == _scanned(body), (body, result)
                continue
            scanned = _values(_scanned(body))  # the plan without the footers: no stamp
            if body["queryType"] == "topN" and not scanned and stamp:
                scanned = [[]]  # it knows no bucket to answer with no values
            assert _values(result) == scanned, (body, result)
            if body["queryType"] == "timeseries":
                first = expected or f"{ivs[0].start:%Y-%m-%dT%H:%M:%S}.000Z"
                assert [r["timestamp"] for r in result] == [first], (body, result)
            else:  # nothing matched: Druid answers the bucket with no values
                assert [r["timestamp"] for r in result] == ([expected] if stamp else [])


def test_a_join_reads_its_table_filtered_by_time(native_wiki):
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
    tables = {"wiki": table_kinds("wiki", latest_commits())}
    plan = compiler.compile_query(body, None, tables=tables, times=FooterTimes(latest_commits()))
    assert plan.cuts == {}
    series = {
        "queryType": "timeseries",
        "dataSource": "wiki",
        "intervals": ["2024-01-03/2024-01-04"],
        "granularity": "all",
        "aggregations": [{"type": "count", "name": "rows"}],
    }
    plan = compiler.compile_query(series, None, tables=tables, times=FooterTimes(latest_commits()))
    assert plan.cuts == {"wiki": [Interval.parse("2024-01-03/2024-01-04")]}
    assert "2024-01-03" not in plan.sql
