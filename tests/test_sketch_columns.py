"""Stored KLL floats sketches and approximate histograms, and stored variance
states, read at query time as Druid reads them.

Ingestion stores `KllFloatsSketch` and druid-histogram's `approxHistogram`
(`approxHistogramFold`) as Apache DataSketches KLL floats sketches, and
druid-stats' `variance` as (count, sum, nvariance) states (workers/jobs/rollup.py,
tests/test_aggregators_stats.py). The `hist` dataSource holds those forms, per row,
of the values

    2024-01-01  0.1, 1, 2, 3
    2024-01-01  4, 5
    2024-01-02  6, 7, 8, 9.5

Ten values, fewer than a KLL sketch's k: its quantiles and ranks are exact.
"""

from __future__ import annotations

import itertools
import statistics
from datetime import UTC, datetime

import datasketches as ds
import numpy as np
import pyarrow as pa
import pytest

from metastore import query
from tests.test_native_queries import native as post_native
from tests.test_native_queries import publish_tables

ROWS = [
    ("2024-01-01T01:00", [0.1, 1, 2, 3]),
    ("2024-01-01T02:00", [4, 5]),
    ("2024-01-02T03:00", [6, 7, 8, 9.5]),
]
VALUES = [v for _, part in ROWS for v in part]
INTERVALS = ["2024-01-01/2024-01-03"]
STATE = pa.struct([("count", pa.int64()), ("sum", pa.float64()), ("nvariance", pa.float64())])


def _floats(values) -> bytes:
    sketch = ds.kll_floats_sketch(200)
    for v in values:
        sketch.update(v)
    return sketch.serialize()


def _state(values) -> dict:
    mean = sum(values) / len(values)
    return {
        "count": len(values),
        "sum": sum(values),
        "nvariance": sum((v - mean) ** 2 for v in values),
    }


def _table(rows) -> pa.Table:
    times = [datetime.fromisoformat(t).replace(tzinfo=UTC) for t, _ in rows]
    return pa.table(
        {
            "__time": pa.array(times, type=pa.timestamp("us", tz="UTC")),
            "kll_f": pa.array([_floats(p) for _, p in rows], type=pa.binary()),
            "approx": pa.array([_floats(p) for _, p in rows], type=pa.binary()),
            "var": pa.array([_state(p) for _, p in rows], type=STATE),
        }
    )


@pytest.fixture
def hist(db, inline_spec):
    publish_tables(
        inline_spec,
        "hist",
        {
            "2024-01-01/2024-01-02": [_table(ROWS[:2])],
            "2024-01-02/2024-01-03": [_table(ROWS[2:])],
        },
    )


def _f(value: float) -> float:
    """A float as Java's JSON writer shows it."""
    return float(str(np.float32(value)))


def _timeseries(aggregations, post_aggregations=()) -> dict:
    return {
        "queryType": "timeseries",
        "dataSource": "hist",
        "granularity": "all",
        "intervals": INTERVALS,
        "aggregations": aggregations,
        "postAggregations": list(post_aggregations),
    }


def _field(name: str) -> dict:
    return {"type": "fieldAccess", "fieldName": name}


def test_kll_floats_sketches_merge_and_answer_in_floats(hist, api_client):
    body = _timeseries(
        [{"type": "KllFloatsSketch", "name": "kll", "fieldName": "kll_f"}],
        [
            {
                "type": "KllFloatsSketchToQuantile",
                "name": "low",
                "field": _field("kll"),
                "fraction": 0,
            },
            {
                "type": "KllFloatsSketchToQuantile",
                "name": "median",
                "field": _field("kll"),
                "fraction": 0.5,
            },
            {
                "type": "KllFloatsSketchToQuantiles",
                "name": "ends",
                "field": _field("kll"),
                "fractions": [0, 1],
            },
            {"type": "KllFloatsSketchToRank", "name": "rank", "field": _field("kll"), "value": 5},
        ],
    )
    [row] = post_native(api_client, body)
    result = row["result"]
    assert result["kll"] == 10  # finalized to its count, a long
    assert result["low"] == 0.1 and result["ends"] == [
        0.1,
        9.5,
    ]  # Java's float text, not 0.10000000149
    assert result["median"] == 4.0 and result["rank"] == 0.6


def test_a_floats_sketch_post_aggregator_refuses_a_doubles_sketch(hist, api_client):
    body = _timeseries(
        [{"type": "KllFloatsSketch", "name": "kll", "fieldName": "kll_f"}],
        [
            {
                "type": "KllDoublesSketchToQuantile",
                "name": "q",
                "field": _field("kll"),
                "fraction": 0.5,
            }
        ],
    )
    error = post_native(api_client, body, status=400)
    assert "postAggregations[0].field" in str(error)


def test_approx_histogram_fold_gives_druids_histogram_and_post_aggregators(hist, api_client):
    body = _timeseries(
        [{"type": "approxHistogramFold", "name": "h", "fieldName": "approx", "numBuckets": 3}],
        [
            {"type": "min", "name": "min", "fieldName": "h"},
            {"type": "max", "name": "max", "fieldName": "h"},
            {"type": "quantile", "name": "median", "fieldName": "h", "probability": 0.5},
            {"type": "quantiles", "name": "qs", "fieldName": "h", "probabilities": [0.1, 1]},
            {"type": "customBuckets", "name": "custom", "fieldName": "h", "breaks": [0, 5, 10]},
            {"type": "equalBuckets", "name": "equal", "fieldName": "h", "numBuckets": 2},
        ],
    )
    [row] = post_native(api_client, body)
    result = row["result"]
    assert result["min"] == 0.1 and result["max"] == 9.5 and result["median"] == 4.0
    assert result["qs"] == {
        "probabilities": [0.1, 1.0],
        "quantiles": [0.1, 9.5],
        "min": 0.1,
        "max": 9.5,
    }
    # (break, next break]: Druid's Histogram counts the values up to each break
    assert result["custom"] == {"breaks": [0.0, 5.0, 10.0], "counts": [6.0, 4.0]}
    # toHistogram(size): from one delta below the minimum to the maximum, in floats
    breaks = _druid_breaks(3)
    assert result["h"]["breaks"] == [float(b) for b in breaks]
    assert result["h"]["counts"] == [
        sum(1 for v in VALUES if lo < np.float32(v) <= hi) for lo, hi in itertools.pairwise(breaks)
    ]
    assert result["equal"]["breaks"] == [float(b) for b in _druid_breaks(2)]
    assert result["equal"]["counts"] == [1.0, 9.0]


def _druid_breaks(size: int) -> list:
    """ApproximateHistogram.toHistogram(size)'s breaks, in Java's float arithmetic."""
    low, high = np.float32(0.1), np.float32(9.5)
    delta = np.float32((high - low) / np.float32(size - 1))
    breaks = [np.float32(low - delta)]
    for _ in range(size - 1):
        breaks.append(np.float32(breaks[-1] + delta))
    return [*breaks, high]


@pytest.mark.parametrize(
    ("aggregator", "post", "field"),
    [
        ({"lowerLimit": 0}, None, "aggregations[0].lowerLimit"),
        ({"finalizeAsBase64Binary": True}, None, "aggregations[0].finalizeAsBase64Binary"),
        (
            {},
            {"type": "buckets", "name": "b", "fieldName": "h", "bucketSize": 1, "offset": 0},
            "postAggregations[0].type",
        ),
        ({}, {"type": "fieldAccess", "name": "raw", "fieldName": "h"}, "postAggregations[0]"),
    ],
)
def test_what_a_kll_sketch_cannot_answer_of_a_ben_haim_histogram_is_refused_by_name(
    hist, api_client, aggregator, post, field
):
    body = _timeseries(
        [{"type": "approxHistogramFold", "name": "h", "fieldName": "approx", **aggregator}],
        [post] if post else [],
    )
    error = post_native(api_client, body, status=400)
    assert field in str(error)


def one(sql: str):
    [[value]] = query.run_query(sql=sql, druid_sql=True).rows
    return value


def test_druid_sql_quantiles_over_stored_floats_sketches_and_approx_histograms(hist):
    # a floats sketch's quantile is a float, shown as Java shows it (0.1, not 0.100000001)
    assert one("SELECT APPROX_QUANTILE(approx, 0) FROM hist") == 0.1
    assert one("SELECT APPROX_QUANTILE(approx, 0.5) FROM hist") == 4.0
    assert one("SELECT APPROX_QUANTILE_DS(kll_f, 1) FROM hist") == 9.5
    assert one("SELECT DS_GET_QUANTILE(DS_QUANTILES_SKETCH(approx), 0) FROM hist") == 0.1
    assert one("SELECT DS_RANK(DS_QUANTILES_SKETCH(kll_f), 5) FROM hist") == 0.6
    day_two = "SELECT APPROX_QUANTILE_DS(kll_f, 0) FROM hist WHERE __time >= '2024-01-02'"
    assert one(day_two) == 6.0


def test_druid_sql_variance_merges_stored_states(hist):
    assert one("SELECT VARIANCE(var) FROM hist") == pytest.approx(statistics.variance(VALUES))
    assert one("SELECT VAR_SAMP(var) FROM hist") == pytest.approx(statistics.variance(VALUES))
    assert one("SELECT VAR_POP(var) FROM hist") == pytest.approx(statistics.pvariance(VALUES))
    assert one("SELECT STDDEV(var) FROM hist") == pytest.approx(statistics.stdev(VALUES))
    assert one("SELECT STDDEV_SAMP(var) FROM hist") == pytest.approx(statistics.stdev(VALUES))
    assert one("SELECT STDDEV_POP(var) FROM hist") == pytest.approx(statistics.pstdev(VALUES))
    day_two = [6, 7, 8, 9.5]
    assert one("SELECT VARIANCE(var) FROM hist WHERE __time >= '2024-01-02'") == pytest.approx(
        statistics.variance(day_two)
    )


@pytest.mark.spark
def test_kll_floats_sketches_spark_stores_merge_on_spark_sql_and_on_duckdb_alike():
    """Sketches as ingestion writes them (Spark's kll_sketch_agg_float), read by a
    native query compiled for Spark SQL and for DuckDB: the same answers."""
    import duckdb
    from pyspark.sql import Row

    from metastore import sketches
    from metastore.druid import native
    from metastore.druid.native_results import shape
    from workers.spark import get_spark

    spark = get_spark()
    values = [Row(day=t[:10], v=float(v)) for t, part in ROWS for v in part]
    spark.createDataFrame(values).createOrReplaceTempView("hist_values")
    stored = spark.sql(
        "SELECT CAST(day AS TIMESTAMP) AS __time, kll_sketch_agg_float(CAST(v AS FLOAT), 200) "
        "AS kll_f FROM hist_values GROUP BY day"
    )
    stored.createOrReplaceTempView("hist")
    body = _timeseries(
        [{"type": "KllFloatsSketch", "name": "kll", "fieldName": "kll_f"}],
        [
            {
                "type": "KllFloatsSketchToQuantile",
                "name": "median",
                "field": _field("kll"),
                "fraction": 0.5,
            },
            {"type": "KllFloatsSketchToRank", "name": "rank", "field": _field("kll"), "value": 5},
        ],
    )
    schema = {"__time": "time", "kll_f": "sketch"}
    plan = native.compile_query(body, schema, dialect="spark")
    on_spark = shape(plan, [list(r) for r in spark.sql(plan.sql).collect()])

    db = duckdb.connect()
    sketches.register(db)
    db.execute("CREATE TABLE hist (__time TIMESTAMP, kll_f BLOB)")
    for row in stored.collect():
        db.execute("INSERT INTO hist VALUES (?, ?)", [row["__time"], bytes(row["kll_f"])])
    plan = native.compile_query(body, schema)
    on_duckdb = shape(plan, db.execute(plan.sql).fetchall())

    assert on_spark == on_duckdb
    assert on_spark[0]["result"] == {"kll": 10, "median": 4.0, "rank": 0.6}
