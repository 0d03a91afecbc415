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
error bounds of the same order). First/last metrics are stored as Druid stores
them, a (time, value) pair (struct<time: epoch millis, value>), so they merge
too.
"""

from __future__ import annotations

from collections.abc import Sequence

from workers.jobs.parsing import MetricInput

HLL_LG_CONFIG_K = 12  # ~1.6% standard error, 4 KiB per sketch at most
THETA_LG_NOM_ENTRIES = 14  # Druid's default size 16384
KLL_K = 128  # Druid's quantilesDoublesSketch default k

# Metric inputs whose one-row value still needs an aggregate (a sketch of one value).
_SKETCH_BUILDS = ("distinct", "theta", "kll")


def metric_aggregations(inputs: Sequence[MetricInput]) -> list:
    """One aggregate Column per metric, named after the metric."""
    from pyspark.sql import functions as F

    out = []
    for inp in inputs:
        m = inp.metric
        src = F.col(inp.column) if inp.column else None
        if inp.kind == "rows":
            agg = F.count(F.lit(1))
        elif inp.kind == "count":
            agg = F.coalesce(F.sum(src), F.lit(0).cast("long"))
        elif inp.kind == "distinct":
            agg = F.hll_sketch_agg(src, m.size or HLL_LG_CONFIG_K)
        elif inp.kind == "sketch":
            agg = F.hll_union_agg(src, True)
        elif inp.kind == "theta":
            agg = F.theta_sketch_agg(src, m.size or THETA_LG_NOM_ENTRIES)
        elif inp.kind == "theta_union":
            agg = F.theta_union_agg(src, m.size or THETA_LG_NOM_ENTRIES)
        elif inp.kind == "kll":
            agg = F.kll_sketch_agg_double(src, m.size or KLL_K)
        elif inp.kind == "kll_merge":
            agg = F.kll_merge_agg_double(src)
        elif inp.kind == "pair":
            # (time, value) structs order by time first: the earliest / latest row.
            agg = F.min(src) if m.type.endswith("First") else F.max(src)
        elif m.type in ("longSum", "doubleSum"):
            zero = F.lit(0).cast("long" if m.type == "longSum" else "double")
            agg = F.coalesce(F.sum(src), zero)
        elif m.type.endswith("Min"):
            agg = F.min(src)
        else:  # *Max
            agg = F.max(src)
        out.append(agg.alias(m.name))
    return out


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
        elif inp.kind in ("sketch", "theta_union", "kll_merge", "pair"):
            value = F.col(inp.column)
        elif m.type in ("longSum", "doubleSum"):
            zero = F.lit(0).cast("long" if m.type == "longSum" else "double")
            value = F.coalesce(F.col(inp.column), zero)
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
