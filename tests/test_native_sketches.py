"""Druid's DataSketches aggregators and post-aggregators in native queries
(metastore/sketches.py on DuckDB, Spark's DataSketches functions on Spark).

The `sk` dataSource holds, per row, sketches as Strata's ingestion stores them
(Apache DataSketches HLL, theta and KLL doubles, in the library's binary forms,
which Spark's `hll_sketch_agg`, `theta_sketch_agg` and `kll_sketch_agg_double`
write and read) next to a raw `user` column:

    2024-01-01  users {a, b}   values 1..10
    2024-01-01  users {b, c}   values 11..20
    2024-01-02  users {c, d}   values 21..30

Distinct counts this small are exact in both sketch families.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import datasketches as ds
import pyarrow as pa
import pytest

from metastore import query
from metastore.druid import native
from tests.test_native_queries import native as post_native
from tests.test_native_queries import publish_tables

ROWS = [
    ("2024-01-01T01:00", ["a", "b"], range(1, 11), "a"),
    ("2024-01-01T02:00", ["b", "c"], range(11, 21), "b"),
    ("2024-01-02T03:00", ["c", "d"], range(21, 31), "c"),
]
INTERVALS = ["2024-01-01/2024-01-03"]


def _table(rows) -> pa.Table:
    hlls, thetas, klls = [], [], []
    for _, users, values, _ in rows:
        hll = ds.hll_sketch(12, ds.tgt_hll_type.HLL_4)
        theta = ds.update_theta_sketch(12)
        kll = ds.kll_doubles_sketch(200)
        for user in users:
            hll.update(user)
            theta.update(user)
        for value in values:
            kll.update(float(value))
        hlls.append(hll.serialize_compact())
        thetas.append(theta.compact().serialize())
        klls.append(kll.serialize())
    times = [datetime.fromisoformat(r[0]).replace(tzinfo=UTC) for r in rows]
    return pa.table(
        {
            "__time": pa.array(times, type=pa.timestamp("us", tz="UTC")),
            "user": pa.array([r[3] for r in rows], type=pa.string()),
            "users_hll": pa.array(hlls, type=pa.binary()),
            "users_theta": pa.array(thetas, type=pa.binary()),
            "value_kll": pa.array(klls, type=pa.binary()),
        }
    )


def publish_sk(inline_spec) -> None:
    publish_tables(
        inline_spec,
        "sk",
        {
            "2024-01-01/2024-01-02": [_table(ROWS[:2])],
            "2024-01-02/2024-01-03": [_table(ROWS[2:])],
        },
    )


@pytest.fixture
def sk(db, inline_spec):
    publish_sk(inline_spec)


def _day(day: str) -> dict:
    return {"type": "interval", "dimension": "__time", "intervals": [f"{day}/P1D"]}


AGGREGATIONS = [
    {"type": "HLLSketchMerge", "name": "hll", "fieldName": "users_hll"},
    {"type": "HLLSketchMerge", "name": "hll_round", "fieldName": "users_hll", "round": True},
    {"type": "thetaSketch", "name": "theta", "fieldName": "users_theta"},
    {"type": "quantilesDoublesSketch", "name": "kll", "fieldName": "value_kll"},
    {"type": "thetaSketch", "name": "raw_theta", "fieldName": "user"},
    {"type": "HLLSketchBuild", "name": "raw_hll", "fieldName": "user", "round": True},
    {"type": "hyperUnique", "name": "unique", "fieldName": "users_hll"},
    {"type": "KllDoublesSketch", "name": "kll2", "fieldName": "value_kll"},
    {
        "type": "filtered",
        "filter": _day("2024-01-01"),
        "aggregator": {"type": "thetaSketch", "name": "day1", "fieldName": "users_theta"},
    },
    {
        "type": "filtered",
        "filter": _day("2024-01-02"),
        "aggregator": {"type": "thetaSketch", "name": "day2", "fieldName": "users_theta"},
    },
]
POST_AGGREGATIONS = [
    {
        "type": "thetaSketchEstimate",
        "name": "both_days",
        "field": {
            "type": "thetaSketchSetOp",
            "name": "x",
            "func": "INTERSECT",
            "fields": [
                {"type": "fieldAccess", "fieldName": "day1"},
                {"type": "fieldAccess", "fieldName": "day2"},
            ],
        },
    },
    {
        "type": "thetaSketchEstimate",
        "name": "day1_only",
        "field": {
            "type": "thetaSketchSetOp",
            "name": "x",
            "func": "NOT",
            "fields": [
                {"type": "fieldAccess", "fieldName": "day1"},
                {"type": "fieldAccess", "fieldName": "day2"},
            ],
        },
    },
    {
        "type": "quantilesDoublesSketchToQuantile",
        "name": "median",
        "field": {"type": "fieldAccess", "fieldName": "kll"},
        "fraction": 0.5,
    },
    {
        "type": "quantilesDoublesSketchToQuantiles",
        "name": "ends",
        "field": {"type": "fieldAccess", "fieldName": "kll"},
        "fractions": [0, 1],
    },
    {
        "type": "quantilesDoublesSketchToRank",
        "name": "rank_of_15",
        "field": {"type": "fieldAccess", "fieldName": "kll"},
        "value": 15,
    },
    {
        "type": "quantilesDoublesSketchToHistogram",
        "name": "histogram",
        "field": {"type": "fieldAccess", "fieldName": "kll"},
        "splitPoints": [10.5, 20.5],
    },
    {
        "type": "KllDoublesSketchToQuantile",
        "name": "kll2_max",
        "field": {"type": "fieldAccess", "fieldName": "kll2"},
        "fraction": 1,
    },
    {
        "type": "HLLSketchEstimate",
        "name": "hll_estimate",
        "field": {"type": "fieldAccess", "fieldName": "hll"},
        "round": True,
    },
    {"type": "hyperUniqueCardinality", "name": "unique_count", "fieldName": "unique"},
    {
        "type": "arithmetic",
        "name": "per_day",
        "fn": "/",
        "fields": [
            {"type": "finalizingFieldAccess", "fieldName": "theta"},
            {"type": "constant", "value": 2},
        ],
    },
]


def _timeseries(**more) -> dict:
    return {
        "queryType": "timeseries",
        "dataSource": "sk",
        "granularity": "all",
        "intervals": INTERVALS,
        "aggregations": AGGREGATIONS,
        "postAggregations": POST_AGGREGATIONS,
        **more,
    }


def test_stored_sketches_merge_and_finalize_as_druid_does(sk, api_client):
    [row] = post_native(api_client, _timeseries())
    result = row["result"]

    assert result["theta"] == 4.0 and result["day1"] == 3.0 and result["day2"] == 2.0
    assert result["hll"] == pytest.approx(4.0, rel=1e-6) and result["hll_round"] == 4
    assert result["kll"] == 30  # a quantiles sketch finalizes to its count, a long
    assert result["kll2"] == 30 and result["kll2_max"] == 30.0  # Druid's KLL aggregator
    assert result["raw_theta"] == 3.0 and result["raw_hll"] == 3
    assert (
        result["unique"] == pytest.approx(4.0, rel=1e-6)
        and result["unique_count"] == result["unique"]
    )
    assert result["both_days"] == 1.0 and result["day1_only"] == 2.0  # {c}; {a, b}
    assert result["median"] in (15.0, 16.0)
    assert result["ends"] == [1.0, 30.0]
    assert result["rank_of_15"] == pytest.approx(0.5)
    assert result["histogram"] == pytest.approx([10.0, 10.0, 10.0])
    assert result["hll_estimate"] == 4 and result["per_day"] == 2.0
    assert isinstance(result["kll"], int) and isinstance(result["theta"], float)


def test_groupby_by_day_and_an_unfinalized_sketch_written_in_base64(sk, api_client):
    body = {
        "queryType": "groupBy",
        "dataSource": "sk",
        "granularity": "day",
        "intervals": INTERVALS,
        "dimensions": [],
        "aggregations": [
            {"type": "thetaSketch", "name": "users", "fieldName": "users_theta"},
            {
                "type": "thetaSketch",
                "name": "sketch",
                "fieldName": "users_theta",
                "shouldFinalize": False,
            },
        ],
    }
    rows = post_native(api_client, body)

    assert [(r["timestamp"], r["event"]["users"]) for r in rows] == [
        ("2024-01-01T00:00:00.000Z", 3.0),
        ("2024-01-02T00:00:00.000Z", 2.0),
    ]
    sketch = ds.compact_theta_sketch.deserialize(base64.b64decode(rows[0]["event"]["sketch"]))
    assert sketch.get_estimate() == 3.0


def test_an_empty_bucket_estimates_zero(sk, api_client):
    body = _timeseries(
        granularity="day",
        intervals=["2024-01-01/2024-01-04"],
        aggregations=AGGREGATIONS[:4],
        postAggregations=[],
    )
    body["filter"] = _day("2024-01-02")
    rows = post_native(api_client, body)
    assert [r["result"]["theta"] for r in rows] == [0.0, 2.0]
    assert rows[0]["result"] == {"hll": 0.0, "hll_round": 0, "theta": 0.0, "kll": 0}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (
            {"type": "thetaSketch", "name": "t", "fieldName": "users_theta", "size": 1000},
            "aggregations[0].size",
        ),
        (
            {"type": "HLLSketchBuild", "name": "t", "fieldName": "user", "lgK": 30},
            "aggregations[0].lgK",
        ),
        (
            {"type": "thetaSketch", "name": "t", "fieldName": "user", "nosuch": 1},
            "aggregations[0].nosuch",
        ),
        (
            {"type": "thetaSketch", "name": "t", "fieldName": "user", "errorBoundsStdDev": 2},
            "aggregations[0].errorBoundsStdDev",
        ),
        (
            {"type": "approxHistogramFold", "name": "t", "fieldName": "user"},
            "aggregations[0].fieldName",
        ),
    ],
)
def test_bad_sketch_aggregators_are_refused_naming_the_field(sk, api_client, change, named):
    body = _timeseries(aggregations=[change], postAggregations=[])
    result = post_native(api_client, body, status=400)
    assert result["errorMessage"].startswith(named), result


def test_a_post_aggregator_given_the_wrong_sketch_is_refused(sk, api_client):
    wrong = {
        "type": "thetaSketchEstimate",
        "name": "e",
        "field": {"type": "fieldAccess", "fieldName": "hll"},
    }
    body = _timeseries(postAggregations=[wrong])
    result = post_native(api_client, body, status=400)
    assert result["errorMessage"].startswith("postAggregations[0].field"), result


@pytest.mark.spark
def test_spark_merges_the_same_sketches_to_the_same_answers(sk):
    from metastore.druid.native_results import shape
    from workers.query import spark_query
    from workers.spark import get_spark

    spark_session = get_spark(master="local[1]", shuffle_partitions=1, driver_memory="1g")
    probe = query.run_query(sql="SELECT * FROM sk LIMIT 0")
    schema = native.column_kinds(probe.columns, probe.types)
    sources = [query.visible_source(datasource="sk")]
    posts = [p for p in POST_AGGREGATIONS if p["name"] in ("both_days", "day1_only", "median")]
    aggs = [a for a in AGGREGATIONS if a.get("name") not in ("hll", "unique")]
    body = _timeseries(aggregations=aggs, postAggregations=posts)
    duck = native.compile_query(body, schema)
    on_spark = native.compile_query(body, schema, dialect="spark")

    expected = shape(duck, query.run_query(sql=duck.sql).rows)
    assert shape(on_spark, spark_query(spark_session, on_spark.sql, sources).rows) == expected
