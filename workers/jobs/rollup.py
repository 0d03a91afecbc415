"""Metric aggregation: how rows sharing (time, dimensions) merge into one (Spark).

The same aggregations serve a single-pass ingestion, the phase-2 merge of a
two-phase one, and re-ingestion of rolled-up data: a `count` over rows that
already carry a count sums it (Druid's advice when re-indexing), and a
`hyperUnique` over a column that already holds sketches unions them. Distinct
counts are DataSketches HLL sketches (`hll_sketch_agg`), stored as binary, so
they merge exactly across segments and re-ingestions.
"""

from __future__ import annotations

from collections.abc import Sequence

from workers.jobs.parsing import MetricInput

HLL_LG_CONFIG_K = 12  # ~1.6% standard error, 4 KiB per sketch at most


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
            agg = F.hll_sketch_agg(src, HLL_LG_CONFIG_K)
        elif inp.kind == "sketch":
            agg = F.hll_union_agg(src, True)
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
    return any(inp.kind == "distinct" for inp in inputs)


def metric_projections(inputs: Sequence[MetricInput]) -> list:
    """Per-row metric values for ingestion without rollup (no sketch metrics)."""
    from pyspark.sql import functions as F

    out = []
    for inp in inputs:
        m = inp.metric
        if inp.kind == "rows":
            value = F.lit(1).cast("long")
        elif inp.kind == "count":
            value = F.coalesce(F.col(inp.column), F.lit(0).cast("long"))
        elif inp.kind == "sketch":
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
        return rows.groupBy(*key_cols).agg(*metric_aggregations(inputs))
    if not needs_grouping_without_rollup(inputs):
        return rows.select(*key_cols, *metric_projections(inputs))
    with_id = rows.withColumn("__row", F.monotonically_increasing_id())
    return (
        with_id.groupBy(*key_cols, F.col("__row")).agg(*metric_aggregations(inputs)).drop("__row")
    )
