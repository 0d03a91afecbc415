"""Ingestion-time aggregators of Druid's bundled extensions: DataSketches KLL,
druid-stats `variance`, druid-histogram `fixedBucketsHistogram` and the
deprecated `approxHistogram` (stored as a KLL floats sketch, and said so).

One spec rolls VALUES up on real Spark (`run_ingest`, what the worker runs) into
hourly rows of daily segments; a second re-ingests those segments through a
`druid` input source into one row, so every stored state is merged across rows
and segments. Each merged value is checked against the same statistic computed
here from the raw values (population/sample variance with `statistics`, bucket
counts by hand, as Druid's FixedBucketsHistogram.add places them).
"""

from __future__ import annotations

import json
import statistics

import pyarrow.parquet as pq
import pytest

from metastore.druid.errors import SpecError
from metastore.druid.metrics import Metric, input_kind, metrics_spec
from metastore.druid.tasks import validate_task_spec

# (day, hour, value); None is a missing value.
VALUES = [
    (1, 0, 1.5),
    (1, 0, 2.5),
    (1, 0, None),
    (1, 1, 10.0),
    (1, 1, -3.0),
    (2, 0, 4.25),
    (2, 0, 7.0),
    (2, 5, 99.0),
    (2, 5, 0.0),
    (2, 5, 5.5),
]
HISTOGRAM = {"lowerLimit": 0, "upperLimit": 10, "numBuckets": 4}
METRICS = [
    {"type": "count", "name": "rows"},
    {"type": "KllDoublesSketch", "name": "kll_d", "fieldName": "v", "k": 64},
    {"type": "KllFloatsSketch", "name": "kll_f", "fieldName": "v"},
    {"type": "variance", "name": "var_d", "fieldName": "v", "inputType": "double"},
    {"type": "variance", "name": "var_f", "fieldName": "v", "estimator": "population"},
    {"type": "fixedBucketsHistogram", "name": "h_over", "fieldName": "v", **HISTOGRAM}
    | {"outlierHandlingMode": "overflow"},
    {"type": "fixedBucketsHistogram", "name": "h_clip", "fieldName": "v", **HISTOGRAM}
    | {"outlierHandlingMode": "clip"},
    {"type": "approxHistogram", "name": "approx", "fieldName": "v", "resolution": 100},
]
# Each merge type re-ingests the stored column of its name (Druid's combining types).
REMERGE = [
    {"type": "count", "name": "rows"},
    {"type": "KllDoublesSketchMerge", "name": "kll_d", "fieldName": "kll_d"},
    {"type": "KllFloatsSketch", "name": "kll_f", "fieldName": "kll_f"},
    {"type": "varianceFold", "name": "var_d", "fieldName": "var_d"},
    {"type": "variance", "name": "var_f", "fieldName": "var_f", "inputType": "variance"},
    {"type": "fixedBucketsHistogram", "name": "h_over", "fieldName": "h_over", **HISTOGRAM},
    {"type": "fixedBucketsHistogram", "name": "h_clip", "fieldName": "h_clip", **HISTOGRAM},
    {"type": "approxHistogramFold", "name": "approx", "fieldName": "approx"},
]


def _spec(datasource, metrics, source, input_format=None, *, granularity, query):
    io = {"type": "index_parallel", "inputSource": source}
    if input_format:
        io["inputFormat"] = input_format
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["k"]},
                "metricsSpec": metrics,
                "granularitySpec": {
                    "segmentGranularity": granularity,
                    "queryGranularity": query,
                    "intervals": ["2022-01-01/2022-02-01"],
                },
            },
            "ioConfig": io,
        },
    }


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """(rows of the daily segments, the one merged row of their re-ingestion)."""
    from workers.jobs.ingest import SourcePiece, run_ingest
    from workers.spark import get_spark

    spark, work = get_spark(), tmp_path_factory.mktemp("stats-aggregators")
    lines = [
        json.dumps({"ts": f"2022-01-0{d}T0{h}:30:00Z", "k": "a", "v": v}) for d, h, v in VALUES
    ]
    source = {"type": "inline", "data": "\n".join(lines)}
    first = validate_task_spec(
        _spec("stats", METRICS, source, {"type": "json"}, granularity="DAY", query="HOUR"),
        input_roots=[],
    )
    built = run_ingest(spark, first.ingestion, work_dir=work / "built", job_group="stats-1")
    pieces = [SourcePiece(s.path, s.chunk, s.chunk) for s in built.segments]
    druid = {"type": "druid", "dataSource": "stats", "interval": "2022-01-01/2022-02-01"}
    second = validate_task_spec(
        _spec("stats2", REMERGE, druid, granularity="MONTH", query="MONTH"), input_roots=[]
    )
    merged = run_ingest(
        spark,
        second.ingestion,
        work_dir=work / "merged",
        job_group="stats-2",
        source_pieces=pieces,
    )
    rows = [r for s in built.segments for r in pq.read_table(s.path).to_pylist()]
    (row,) = [r for s in merged.segments for r in pq.read_table(s.path).to_pylist()]
    return first, rows, row


def _variance(state: dict, population: bool) -> float | None:
    """Druid's VarianceAggregatorCollector.getVariance."""
    n = state["count"]
    if n == 0:
        return None
    return 0.0 if n == 1 else state["nvariance"] / (n if population else n - 1)


def _buckets(values, mode: str) -> dict:
    """FixedBucketsHistogram.add over 0..10 in 4 buckets, by hand."""
    counts, lower, upper, inside = [0, 0, 0, 0], 0, 0, []
    for v in values:
        if v < 0 or v >= 10:
            if mode == "overflow":
                lower, upper = lower + (v < 0), upper + (v >= 10)
                continue
            v = 0.0 if v < 0 else 10.0  # clip
        counts[min(int(v / 2.5), 3)] += 1
        inside.append(v)
    return {"histogram": counts, "lowerOutlierCount": lower, "upperOutlierCount": upper} | {
        "count": len(inside),
        "min": min(inside),
        "max": max(inside),
    }


@pytest.mark.spark
def test_stats_and_histogram_states_merge_to_the_statistics_of_all_values(stored):
    _, rows, row = stored
    present = [v for _, _, v in VALUES if v is not None]
    assert row["rows"] == len(VALUES) and len(rows) == 4  # 4 (day, hour) groups
    # Variance: Druid's (count, sum, nvariance) state, merged with its fold.
    for name, population in (("var_d", False), ("var_f", True)):
        state = row[name]
        assert state["count"] == len(present) and state["sum"] == pytest.approx(sum(present))
        expected = (statistics.pvariance if population else statistics.variance)(present)
        assert _variance(state, population) == pytest.approx(expected)
    hour_one = next(r for r in rows if r["__time"].day == 1 and r["__time"].hour == 0)
    assert hour_one["var_d"] == {"count": 2, "sum": 4.0, "nvariance": 0.5}  # 1.5, 2.5; null skipped
    # fixedBucketsHistogram: exact counts, outliers by mode, nulls as missing.
    for name, mode in (("h_over", "overflow"), ("h_clip", "clip")):
        h = row[name]
        assert {k: h[k] for k in _buckets(present, mode)} == _buckets(present, mode), name
        assert (h["missingValueCount"], h["numBuckets"], h["outlierHandlingMode"]) == (1, 4, mode)
        assert (h["lowerLimit"], h["upperLimit"]) == (0.0, 10.0)


@pytest.mark.spark
def test_kll_sketches_and_approx_histogram_merge_as_quantile_sketches(stored):
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    first, _, row = stored
    present = sorted(v for _, _, v in VALUES if v is not None)
    df = get_spark().createDataFrame(
        [(row["kll_d"], row["kll_f"], row["approx"])], "d binary, f binary, a binary"
    )
    out = df.select(
        F.kll_sketch_get_n_double("d").alias("n_d"),
        F.kll_sketch_get_quantile_double("d", F.lit(0.5)).alias("median_d"),
        F.kll_sketch_get_n_float("f").alias("n_f"),
        F.kll_sketch_get_quantile_float("a", F.lit(1.0)).alias("max_a"),
    ).collect()[0]
    # Nine values: exact at this size, nulls skipped.
    assert (out["n_d"], out["n_f"]) == (len(present), len(present))
    assert out["median_d"] == present[len(present) // 2] and out["max_a"] == 99.0
    # The stand-in for approxHistogram is reported, not silent.
    assert any("approxHistogram is stored as a KLL floats sketch" in i for i in first.ignored)


@pytest.mark.spark
def test_without_rollup_each_row_keeps_its_own_state():
    """rollup false: a variance of one value is (1, value, 0) or (0, 0, 0) for a
    null; a histogram of one value counts it in its bucket."""
    from workers.jobs.parsing import MetricInput
    from workers.jobs.rollup import roll_up
    from workers.spark import get_spark

    df = get_spark().createDataFrame([("a", 7.5), ("b", None)], "k string, v double")
    (var, hist) = metrics_spec({"metricsSpec": [METRICS[3], METRICS[5]]}, [])
    inputs = [MetricInput(var, "v", "variance"), MetricInput(hist, "v", "histogram")]
    rows = {r["k"]: r for r in roll_up(df, ["k"], inputs, rollup=False).collect()}
    assert rows["a"]["var_d"].asDict() == {"count": 1, "sum": 7.5, "nvariance": 0.0}
    assert rows["b"]["var_d"].asDict() == {"count": 0, "sum": 0.0, "nvariance": 0.0}
    assert rows["a"]["h_over"]["histogram"] == [0, 0, 0, 1]
    assert (rows["b"]["h_over"]["count"], rows["b"]["h_over"]["missingValueCount"]) == (0, 1)
    # Histograms with different buckets do not merge: the task fails naming the metric.
    states = roll_up(df, ["k"], inputs[1:], rollup=False).selectExpr("'x' AS k", "h_over")
    other = states.selectExpr(
        "k",
        "named_struct('lowerLimit', 1.0D, 'upperLimit', h_over.upperLimit, "
        "'numBuckets', h_over.numBuckets, 'outlierHandlingMode', h_over.outlierHandlingMode, "
        "'count', h_over.count, 'lowerOutlierCount', h_over.lowerOutlierCount, "
        "'upperOutlierCount', h_over.upperOutlierCount, 'missingValueCount', "
        "h_over.missingValueCount, 'max', h_over.max, 'min', h_over.min, "
        "'histogram', h_over.histogram) AS h_over",
    )
    merge = [MetricInput(hist, "h_over", "histogram_merge")]
    with pytest.raises(Exception, match="fixedBucketsHistogram h_over: cannot merge"):
        roll_up(states.unionByName(other), ["k"], merge, rollup=True).collect()


def test_aggregator_parameters_are_checked_as_druid_checks_them():
    def refused(metric: dict) -> SpecError:
        with pytest.raises(SpecError) as info:
            metrics_spec({"metricsSpec": [{"name": "m", "fieldName": "v"} | metric]}, [])
        return info.value

    err = refused({"type": "fixedBucketsHistogram", "lowerLimit": 5, "upperLimit": 5})
    assert err.field.endswith("[0].upperLimit")
    assert refused({"type": "fixedBucketsHistogram", "upperLimit": 5}).field.endswith("lowerLimit")
    bad_limit = {"type": "fixedBucketsHistogram", "lowerLimit": "low", "upperLimit": 5}
    assert refused(bad_limit).field.endswith("lowerLimit")
    (h,) = metrics_spec(
        {"metricsSpec": [bad_limit | {"name": "h", "fieldName": "v", "lowerLimit": "-2.5"}]}, []
    )
    assert h.option("lowerLimit") == -2.5  # a number written as a string, as Jackson reads it
    bad_mode = {"type": "fixedBucketsHistogram", "lowerLimit": 0, "upperLimit": 1}
    err = refused(bad_mode | {"outlierHandlingMode": "wrap"})
    assert err.field.endswith("outlierHandlingMode")
    assert refused({"type": "variance", "inputType": "string"}).field.endswith("inputType")
    assert refused({"type": "KllDoublesSketch", "k": 4}).field.endswith(".k")
    (kll,) = metrics_spec(
        {"metricsSpec": [{"type": "KllFloatsSketch", "name": "m", "fieldName": "v"}]}, []
    )
    assert kll.size == 200  # Druid's KLL default k
    # inputType variance over raw numbers: Druid fails the task; so does Strata, by name.
    fold = Metric("variance", "m", "v", options=(("inputType", "variance"),))
    with pytest.raises(SpecError, match="not stored variance states"):
        input_kind(fold, "double")
    assert input_kind(fold, "struct<count:bigint,sum:double,nvariance:double>") == "variance_merge"


def test_native_variance_reads_values_and_stored_states_and_stddev_is_its_root():
    """Native queries (DuckDB, the embedded engine): `variance` over a numeric
    column and `varianceFold` over stored states give the variance of all the
    values; states split unevenly give the same answer."""
    import duckdb

    from metastore.druid import native
    from metastore.druid.native_results import shape

    values = [1.5, 2.5, 10.0, -3.0, 4.25, 7.0]
    # The same values as three stored states: (count, sum, nvariance) of each part.
    parts = [values[:1], values[1:4], values[4:]]
    db = duckdb.connect()
    db.execute(
        "CREATE TABLE t (__time TIMESTAMP, v DOUBLE, "
        "st STRUCT(count BIGINT, sum DOUBLE, nvariance DOUBLE))"
    )
    for i, v in enumerate(values):
        part = parts[i] if i < len(parts) else None
        state = None
        if part:
            mean = sum(part) / len(part)
            state = {
                "count": len(part),
                "sum": sum(part),
                "nvariance": sum((x - mean) ** 2 for x in part),
            }
        db.execute("INSERT INTO t VALUES (TIMESTAMP '2024-01-01 01:00:00', ?, ?)", [v, state])
    body = {
        "queryType": "timeseries",
        "dataSource": "t",
        "granularity": "all",
        "intervals": ["2024-01-01/2024-01-02"],
        "aggregations": [
            {"type": "variance", "name": "sample", "fieldName": "v"},
            {"type": "variance", "name": "pop", "fieldName": "v", "estimator": "population"},
            {"type": "varianceFold", "name": "folded", "fieldName": "st"},
        ],
        "postAggregations": [{"type": "stddev", "name": "sd", "fieldName": "sample"}],
    }
    plan = native.compile_query(body, {"__time": "time", "v": "double", "st": "variance"})
    [row] = shape(plan, db.execute(plan.sql).fetchall())
    result = row["result"]
    assert result["sample"] == pytest.approx(statistics.variance(values))
    assert result["pop"] == pytest.approx(statistics.pvariance(values))
    assert result["folded"] == pytest.approx(statistics.variance(values))
    assert result["sd"] == pytest.approx(statistics.stdev(values))
