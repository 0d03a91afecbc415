"""Segment schema metadata (pure: no Django, no Spark).

Every published segment records what it holds, so that a compaction can merge
segments without being told their shape (SPEC §6):

    {"dimensions": [{"name": "page", "type": "string"}, ...],
     "metrics": [{"name": "count", "type": "count",
                  "combining": {"type": "longSum", "name": "count", "fieldName": "count"}}, ...],
     "rollup": true, "queryGranularity": "HOUR"}

A metric's `combining` aggregator merges already-aggregated values of that
metric (Druid's `getCombiningFactory`): a count becomes a longSum of the count
column, sums stay sums, min/max stay min/max, and a hyperUnique sketch is
unioned (a hyperUnique over a sketch column). Compacting rolled-up data with
the combining aggregators keeps every metric total.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# How each aggregator's values are merged; the combined metric reads the
# metric's own column.
_COMBINING_TYPE = {
    "count": "longSum",
    "longSum": "longSum",
    "doubleSum": "doubleSum",
    "floatSum": "floatSum",  # a FLOAT column stays FLOAT
    "longMin": "longMin",
    "longMax": "longMax",
    "doubleMin": "doubleMin",
    "doubleMax": "doubleMax",
    "floatMin": "floatMin",
    "floatMax": "floatMax",
    "hyperUnique": "hyperUnique",  # a hyperUnique over sketches unions them
    # DataSketches metrics over a column of sketches union them (workers/jobs/rollup.py).
    "thetaSketch": "thetaSketch",
    "HLLSketchBuild": "HLLSketchMerge",
    "HLLSketchMerge": "HLLSketchMerge",
    "quantilesDoublesSketch": "quantilesDoublesSketch",
    "quantilesDoublesSketchMerge": "quantilesDoublesSketch",
    "KllDoublesSketch": "KllDoublesSketch",
    "KllDoublesSketchMerge": "KllDoublesSketch",
    "KllFloatsSketch": "KllFloatsSketch",
    "KllFloatsSketchMerge": "KllFloatsSketch",
    # druid-stats / druid-histogram: stored states that the same aggregator merges.
    "variance": "varianceFold",
    "varianceFold": "varianceFold",
    "fixedBucketsHistogram": "fixedBucketsHistogram",
    "approxHistogram": "approxHistogramFold",
    "approxHistogramFold": "approxHistogramFold",
    # First/last are stored as (time, value) pairs, which the same aggregator merges.
    **{
        f"{kind}{end}": f"{kind}{end}"
        for kind in ("string", "long", "double", "float")
        for end in ("First", "Last")
    },
}
_DIMENSION_TYPES = {"string", "long", "double"}


def combining_aggregator(metric_type: str, name: str) -> dict:
    """The aggregator that merges values of metric `name` of type `metric_type`."""
    try:
        kind = _COMBINING_TYPE[metric_type]
    except KeyError:
        raise ValueError(f"no combining aggregator for metric type {metric_type!r}") from None
    return {"type": kind, "name": name, "fieldName": name}


def metric_entry(metric_type: str, name: str, field_name: str | None) -> dict:
    entry: dict[str, Any] = {"name": name, "type": metric_type}
    if field_name:
        entry["fieldName"] = field_name
    entry["combining"] = combining_aggregator(metric_type, name)
    return entry


def segment_schema(
    *,
    dimensions: Iterable[tuple[str, str]],
    metrics: Iterable[tuple[str, str, str | None]],
    rollup: bool,
    query_granularity: str,
) -> dict:
    """The schema of a segment: dimensions as (name, type), metrics as
    (type, name, fieldName)."""
    return {
        "dimensions": [{"name": n, "type": t} for n, t in dimensions],
        "metrics": [metric_entry(t, n, f) for t, n, f in metrics],
        "rollup": bool(rollup),
        "queryGranularity": query_granularity,
    }


def arrow_dimension_type(arrow_type: str) -> str:
    """A dimension type from a Parquet/Arrow type name (`pyarrow.DataType.__str__`)."""
    if arrow_type.startswith(("int", "uint")):
        return "long"
    if arrow_type in ("float", "halffloat"):
        return "float"  # Druid's 32-bit FLOAT column
    if arrow_type == "double" or arrow_type.startswith("decimal"):
        return "double"
    return "string"


def schema_from_columns(
    columns: Sequence[tuple[str, str]],
    *,
    metrics: Iterable[tuple[str, str, str | None]],
    rollup: bool,
    query_granularity: str,
) -> dict:
    """A segment's schema from its file's (column, arrow type) list: every column
    but `__time` and the metrics is a dimension, in file order."""
    metrics = list(metrics)
    metric_names = {name for _, name, _ in metrics}
    dims = [
        (name, arrow_dimension_type(kind))
        for name, kind in columns
        if name != "__time" and name not in metric_names and not name.startswith("__")
    ]
    return segment_schema(
        dimensions=dims, metrics=metrics, rollup=rollup, query_granularity=query_granularity
    )


def schema_from_ingestion_spec(
    raw: Mapping[str, Any], columns: Sequence[tuple[str, str]] = ()
) -> dict:
    """The schema an `index_parallel` spec (raw JSON, as stored on its task) gives
    its segments; `columns` (a file's (name, arrow type)) fill in schemaless
    dimensions. Lenient: it reads specs that were valid when submitted. {} when
    the spec says nothing usable."""
    schema = ((raw or {}).get("spec") or {}).get("dataSchema") or {}
    if not isinstance(schema, Mapping):
        return {}
    dims_spec = schema.get("dimensionsSpec") or {}
    excluded = set(dims_spec.get("dimensionExclusions") or [])
    dims: list[tuple[str, str]] = []
    for d in dims_spec.get("dimensions") or []:
        if isinstance(d, str):
            dims.append((d, "string"))
        elif isinstance(d, Mapping) and isinstance(d.get("name"), str):
            kind = d.get("type", "string")
            # Only the data migration reads specs here, for segments written when
            # float dimensions were stored as doubles.
            kind = "double" if kind == "float" else kind
            dims.append((d["name"], kind if kind in _DIMENSION_TYPES else "string"))
    dims = [d for d in dims if d[0] not in excluded]
    metrics = []
    for m in schema.get("metricsSpec") or []:
        if isinstance(m, Mapping) and m.get("type") in _COMBINING_TYPE and m.get("name"):
            kind = str(m["type"]).replace("float", "double")
            metrics.append((kind, m["name"], None if kind == "count" else m.get("fieldName")))
    gran = schema.get("granularitySpec") or {}
    query = gran.get("queryGranularity") or "NONE"
    if isinstance(query, Mapping):
        query = query.get("type") or "NONE"
    rollup = gran.get("rollup", True) is not False
    if not dims and columns:
        return schema_from_columns(
            columns, metrics=metrics, rollup=rollup, query_granularity=str(query).upper()
        )
    return segment_schema(
        dimensions=dims, metrics=metrics, rollup=rollup, query_granularity=str(query).upper()
    )
