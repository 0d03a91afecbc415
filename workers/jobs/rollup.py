"""Metric aggregation: how rows sharing (time, dimensions) merge into one (Spark).

The same aggregations serve a single-pass ingestion, the phase-2 merge of a
two-phase one, and re-ingestion of rolled-up data: a `count` over rows that
already carry a count sums it (Druid's advice when re-indexing), and a sketch
metric over a column that already holds sketches unions them. Sketches are
Spark's own DataSketches functions, stored as binary, so they merge exactly
across segments, rollup, compaction and re-ingestion: hyperUnique and
HLLSketchBuild are HLL sketches (`hll_sketch_agg` / `hll_union_agg`),
thetaSketch is a theta sketch (`theta_sketch_agg` / `theta_union_agg`), and
quantilesDoublesSketch is a KLL quantiles sketch (`kll_sketch_agg_double` /
`kll_merge_agg_double`; Druid's classic quantiles sketch has the same API and
error bounds of the same order). KllDoublesSketch / KllFloatsSketch are the
same KLL sketches Druid stores (`kll_sketch_agg_double` / `_float`); Druid's
deprecated approxHistogram is stored as a KLL floats sketch too (the quantiles
sketch Druid's docs name in its place; the validation report says so). First/last
metrics are stored as Druid stores them, a (time, value) pair (struct<time:
epoch millis, value>), so they merge too.

druid-stats' variance is stored as Druid's VarianceAggregatorCollector state,
struct<count: bigint, sum: double, nvariance: double> (nvariance: the sum of
squared deviations from the mean), built with Spark's numerically stable
`var_pop` and merged with Druid's own fold (Chan et al.), so a variance over
rows, segments and compactions is the variance of all input values.
fixedBucketsHistogram is stored as Druid's FixedBucketsHistogram fields (see
HISTOGRAM_FIELDS): counts per bucket add up exactly when histograms with the
same buckets merge; merging different buckets fails the task naming the metric
(Druid interpolates; Strata does not guess).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from metastore.druid.errors import SpecError
from metastore.druid.metrics import METRICS_PATH
from workers.jobs.parsing import MetricInput

HLL_LG_CONFIG_K = 12  # ~1.6% standard error, 4 KiB per sketch at most
THETA_LG_NOM_ENTRIES = 14  # Druid's default size 16384
KLL_K = 128  # Druid's quantilesDoublesSketch default k

# Metric inputs whose one-row value still needs an aggregate (a sketch of one value).
_SKETCH_BUILDS = ("distinct", "theta", "kll", "kll_float", "histogram")
_PASSED = ("sketch", "theta_union", "kll_merge", "kll_float_merge")
_PASSED += ("variance_merge", "histogram_merge", "pair")
# Sums and the type of their column (floatSum: Druid's 32-bit FLOAT column).
_SUM_TYPES = {"longSum": "long", "doubleSum": "double", "floatSum": "float"}
HISTOGRAM_FIELDS = (
    "lowerLimit",
    "upperLimit",
    "numBuckets",
    "outlierHandlingMode",
    "count",
    "lowerOutlierCount",
    "upperOutlierCount",
    "missingValueCount",
    "max",
    "min",
    "histogram",
)


def _fold(column: str, merge: str):
    """Stored states merged pairwise in Spark SQL: `merge` is a lambda body over
    `acc` and `x` (both non-null). Null for a group without states."""
    from pyspark.sql import functions as F

    states = f"collect_list({column})"
    return F.expr(
        f"CASE WHEN size({states}) > 0 THEN aggregate(slice({states}, 2, size({states})), "
        f"{states}[0], (acc, x) -> {merge}) END"
    )


# Druid's VarianceAggregatorCollector.fold (count 0 states hold nothing).
_VARIANCE_FOLD = (
    "CASE WHEN x.`count` = 0 THEN acc WHEN acc.`count` = 0 THEN x ELSE named_struct("
    "'count', acc.`count` + x.`count`, 'sum', acc.`sum` + x.`sum`, 'nvariance', "
    "acc.nvariance + x.nvariance + (acc.`count` / x.`count`) / (acc.`count` + x.`count`)"
    " * pow(acc.`sum` / (acc.`count` / x.`count`) - x.`sum`, 2)) END"
)


def _variance_input(value, m):
    """Druid reads a variance's input as its inputType (default float: float precision)."""
    return value.cast("float") if m.option("inputType", "float") == "float" else value


def _variance_state(value):
    """The state of a group's values (nulls skipped, as Druid's SQL-compatible mode)."""
    from pyspark.sql import functions as F

    n = F.count(value)
    return F.struct(
        n.alias("count"),
        F.coalesce(F.sum(value.cast("double")), F.lit(0.0)).alias("sum"),
        F.coalesce(F.var_pop(value.cast("double")) * n, F.lit(0.0)).alias("nvariance"),
    )


_SAFE = re.compile(r"[^\w .-]")  # what a metric name may show inside a SQL literal


def _histogram_fold(name: str) -> str:
    same = " AND ".join(f"acc.{k} = x.{k}" for k in ("lowerLimit", "upperLimit", "numBuckets"))
    summed = {k: f"acc.{k} + x.{k}" for k in HISTOGRAM_FIELDS[4:8]}
    summed |= {"max": "greatest(acc.max, x.max)", "min": "least(acc.min, x.min)"}
    summed["histogram"] = "zip_with(acc.histogram, x.histogram, (a, b) -> a + b)"
    fields = ", ".join(f"'{k}', {summed.get(k, f'acc.{k}')}" for k in HISTOGRAM_FIELDS)
    return (
        f"CASE WHEN {same} THEN named_struct({fields}) ELSE raise_error(concat("
        f"'fixedBucketsHistogram {_SAFE.sub('', name)}: cannot merge histograms with "
        "different buckets (', "
        "acc.lowerLimit, '/', acc.upperLimit, '/', acc.numBuckets, ' and ', x.lowerLimit, "
        "'/', x.upperLimit, '/', x.numBuckets, '); compact with the same buckets')) END"
    )


def _histogram(column: str, m):
    """Druid's FixedBucketsHistogram of a group's values (FixedBucketsHistogram.add):
    buckets [lower + i*size, lower + (i+1)*size), outliers ignored, counted
    (overflow) or put in the end buckets (clip); nulls counted as missing."""
    from pyspark.sql import functions as F

    if m.option("lowerLimit") is None:  # a combining metric (compaction) over raw values
        raise SpecError(
            METRICS_PATH,
            f"fixedBucketsHistogram {m.name!r} reads values, not stored histograms: "
            "give its lowerLimit and upperLimit in metricsSpec",
        )
    low, high = float(m.option("lowerLimit")), float(m.option("upperLimit"))
    n, mode = int(m.option("numBuckets", 10)), m.option("outlierHandlingMode", "ignore")
    lower, upper, size = (f"CAST('{x!r}' AS DOUBLE)" for x in (low, high, (high - low) / n))
    v = f"`{column}`"
    inside = f"{v} >= {lower} AND {v} < {upper}"
    bucket = f"least(CAST(({v} - {lower}) / {size} AS INT), {n - 1})"
    value = f"CASE WHEN {inside} THEN {v} END"
    if mode == "clip":
        bucket = (
            f"CASE WHEN {v} < {lower} THEN 0 WHEN {v} >= {upper} THEN {n - 1} "
            f"WHEN {v} IS NOT NULL THEN {bucket} END"  # least() skips a null
        )
        value = f"CASE WHEN {v} IS NOT NULL THEN least(greatest({v}, {lower}), {upper}) END"
    else:
        bucket = f"CASE WHEN {inside} THEN {bucket} END"
    outliers = [f"count_if({v} < {lower})", f"count_if({v} >= {upper})"]
    if mode != "overflow":
        outliers = ["0L", "0L"]
    counts = (
        f"aggregate(collect_list({bucket}), array_repeat(0L, {n}), "
        "(acc, b) -> transform(acc, (c, i) -> IF(i = b, c + 1, c)))"
    )
    sql = {
        "lowerLimit": f"{lower}",
        "upperLimit": f"{upper}",
        "numBuckets": str(n),
        "outlierHandlingMode": f"'{mode}'",
        "count": f"count({bucket})",
        "lowerOutlierCount": outliers[0],
        "upperOutlierCount": outliers[1],
        "missingValueCount": f"count_if({v} IS NULL)",
        "max": f"coalesce(max({value}), CAST('-Infinity' AS DOUBLE))",
        "min": f"coalesce(min({value}), CAST('Infinity' AS DOUBLE))",
        "histogram": counts,
    }
    return F.expr("named_struct(" + ", ".join(f"'{k}', {sql[k]}" for k in HISTOGRAM_FIELDS) + ")")


def _aggregation(inp: MetricInput):
    """The aggregate of one metric's input column."""
    from pyspark.sql import functions as F

    m, src = inp.metric, F.col(inp.column) if inp.column else None
    kind = inp.kind
    if kind == "rows":
        return F.count(F.lit(1))
    if kind == "count":
        return F.coalesce(F.sum(src), F.lit(0).cast("long"))
    sketches = {
        "distinct": lambda: F.hll_sketch_agg(src, m.size or HLL_LG_CONFIG_K),
        "sketch": lambda: F.hll_union_agg(src, True),
        "theta": lambda: F.theta_sketch_agg(src, m.size or THETA_LG_NOM_ENTRIES),
        "theta_union": lambda: F.theta_union_agg(src, m.size or THETA_LG_NOM_ENTRIES),
        "kll": lambda: F.kll_sketch_agg_double(src, m.size or KLL_K),
        "kll_merge": lambda: F.kll_merge_agg_double(src),
        "kll_float": lambda: F.kll_sketch_agg_float(src.cast("float"), m.size or KLL_K),
        "kll_float_merge": lambda: F.kll_merge_agg_float(src),
        "variance": lambda: _variance_state(_variance_input(src, m)),
        "variance_merge": lambda: _fold(f"`{inp.column}`", _VARIANCE_FOLD),
        "histogram": lambda: _histogram(inp.column, m),
        "histogram_merge": lambda: _fold(f"`{inp.column}`", _histogram_fold(m.name)),
    }
    if kind in sketches:
        return sketches[kind]()
    if kind == "pair":
        # (time, value) structs order by time first: the earliest / latest row.
        return F.min(src) if m.type.endswith("First") else F.max(src)
    if m.type in _SUM_TYPES:
        kind = _SUM_TYPES[m.type]  # Spark sums a float column as a double: rounded to float
        return F.coalesce(F.sum(src).cast(kind), F.lit(0).cast(kind))
    return F.min(src) if m.type.endswith("Min") else F.max(src)  # *Min / *Max


def metric_aggregations(inputs: Sequence[MetricInput]) -> list:
    """One aggregate Column per metric, named after the metric."""
    return [_aggregation(inp).alias(inp.metric.name) for inp in inputs]


def needs_grouping_without_rollup(inputs: Sequence[MetricInput]) -> bool:
    """True when a row's metrics cannot be computed by a projection alone
    (a sketch of one value needs the sketch aggregate)."""
    return any(inp.kind in _SKETCH_BUILDS for inp in inputs)


def metric_projections(inputs: Sequence[MetricInput]) -> list:
    """Per-row metric values for ingestion without rollup (no sketch builds)."""
    from pyspark.sql import functions as F

    out = []
    for inp in inputs:
        m = inp.metric
        if inp.kind == "rows":
            value = F.lit(1).cast("long")
        elif inp.kind == "count":
            value = F.coalesce(F.col(inp.column), F.lit(0).cast("long"))
        elif inp.kind in _PASSED:
            value = F.col(inp.column)
        elif inp.kind == "variance":  # one value: count 1 (0 for null), no deviation
            value = F.struct(
                F.col(inp.column).isNotNull().cast("long").alias("count"),
                F.coalesce(_variance_input(F.col(inp.column), m).cast("double"), F.lit(0.0)).alias(
                    "sum"
                ),
                F.lit(0.0).alias("nvariance"),
            )
        elif m.type in _SUM_TYPES:
            value = F.coalesce(F.col(inp.column), F.lit(0).cast(_SUM_TYPES[m.type]))
        else:
            value = F.col(inp.column)
        out.append(value.alias(m.name))
    return out


def roll_up(rows, keys: Sequence[str], inputs: Sequence[MetricInput], *, rollup: bool):
    """Rows grouped by `keys` with their metrics aggregated; without rollup every
    input row stays a row (its metrics computed alone)."""
    from pyspark.sql import functions as F

    key_cols = [F.col(f"`{k}`") for k in keys]
    if rollup:
        if not inputs:  # no metrics: rollup keeps one row per distinct key
            return rows.select(*key_cols).distinct()
        return rows.groupBy(*key_cols).agg(*metric_aggregations(inputs))
    if not needs_grouping_without_rollup(inputs):
        return rows.select(*key_cols, *metric_projections(inputs))
    with_id = rows.withColumn("__row", F.monotonically_increasing_id())
    return (
        with_id.groupBy(*key_cols, F.col("__row")).agg(*metric_aggregations(inputs)).drop("__row")
    )
