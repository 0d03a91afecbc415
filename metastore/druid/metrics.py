"""metricsSpec: the aggregators applied at ingestion (rollup), Druid's core ones
and the DataSketches ones; the others Druid documents are refused by name."""

from __future__ import annotations

from dataclasses import dataclass

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, first_duplicate, int_at, none_as, object_at, string_at

FIRST_LAST_TYPES = tuple(
    f"{kind}{end}" for kind in ("string", "long", "double", "float") for end in ("First", "Last")
)
SKETCH_TYPES = ("thetaSketch", "HLLSketchBuild", "HLLSketchMerge", "quantilesDoublesSketch")
METRIC_TYPES = (
    "count",
    "longSum",
    "doubleSum",
    "floatSum",
    "longMin",
    "longMax",
    "doubleMin",
    "doubleMax",
    "floatMin",
    "floatMax",
    "hyperUnique",
    *FIRST_LAST_TYPES,
    *SKETCH_TYPES,
)
# Aggregator types Druid documents that Strata does not implement, with where
# they come from; a spec naming one is refused with the reason (issue 27).
_CONTRIB = "an aggregator of the Druid contrib extension {}, which is outside Strata's scope"
_CORE_EXT = "an aggregator of Druid's core extension {}, not implemented here"
UNSUPPORTED_AGGREGATORS = {
    **dict.fromkeys(
        (
            "compressedBigDecimal",
            "compressedBigDecimalSum",
            "compressedBigDecimalMax",
            "compressedBigDecimalMin",
        ),
        _CONTRIB.format("druid-compressed-bigdecimal"),
    ),
    **dict.fromkeys(
        ("Bitmap64ExactCountBuild", "Bitmap64ExactCountMerge"),
        _CONTRIB.format("druid-exact-count-bitmap"),
    ),
    **dict.fromkeys(
        ("spectatorHistogram", "spectatorHistogramTimer", "spectatorHistogramDistribution"),
        _CONTRIB.format("druid-spectator-histogram"),
    ),
    **dict.fromkeys(("momentSketch", "momentSketchMerge"), _CONTRIB.format("druid-momentsketch")),
    "tDigestSketch": _CONTRIB.format("druid-tdigestsketch"),
    "ddSketch": _CONTRIB.format("druid-ddsketch"),
    "distinctCount": _CONTRIB.format("druid-distinctcount"),
    **dict.fromkeys(("timeMin", "timeMax"), _CONTRIB.format("druid-time-min-max")),
    "unsigned_int": _CONTRIB.format("unsigned-int-extensions"),
    **dict.fromkeys(
        (
            "KllDoublesSketch",
            "KllFloatsSketch",
            "KllDoublesSketchMerge",
            "KllFloatsSketchMerge",
            "quantilesDoublesSketchMerge",
        ),
        _CORE_EXT.format("druid-datasketches (KLL / merge of quantiles sketches)")
        + "; use quantilesDoublesSketch",
    ),
    "arrayOfDoublesSketch": _CORE_EXT.format("druid-datasketches (tuple sketches)"),
    **dict.fromkeys(("variance", "varianceFold"), _CORE_EXT.format("druid-stats")),
    **dict.fromkeys(
        ("approxHistogram", "approxHistogramFold", "fixedBucketsHistogram"),
        _CORE_EXT.format("druid-histogram") + "; use quantilesDoublesSketch",
    ),
    "bloom": "a query-time aggregator of Druid's core extension druid-bloom-filter",
    **dict.fromkeys(
        ("longAny", "doubleAny", "floatAny", "stringAny"),
        "not implemented here; use the matching *First or *Last aggregator",
    ),
    "doubleMean": "a query-time aggregator in Druid; store a doubleSum and a count",
    "cardinality": "a query-time aggregator in Druid; use hyperUnique or HLLSketchBuild",
    "filtered": "not implemented here; filter or compute the value in transformSpec",
    "expression": "not implemented here; compute the value in transformSpec.transforms",
    "javascript": "a JavaScript aggregator (disabled in Druid by default), not implemented here",
    "grouping": "a query-time aggregator in Druid",
}
# Sketch defaults, as in Druid's DataSketches extension.
THETA_DEFAULT_SIZE = 16384  # nominal entries (Spark: lgNomEntries = log2(size))
HLL_DEFAULT_LG_K = 12
QUANTILES_DEFAULT_K = 128
METRICS_PATH = "spec.dataSchema.metricsSpec"
_QUERY_TIME = "a query-time option; the stored sketch is the same"


@dataclass(frozen=True)
class Metric:
    """type is canonical: float* metrics are double*; sketches keep Druid's names.
    `size` is the sketch's accuracy parameter: thetaSketch lgNomEntries,
    HLLSketchBuild lgK, quantilesDoublesSketch k (Spark's KLL sketch)."""

    type: str
    name: str
    field_name: str | None = None
    size: int | None = None


def _metric_type(m: dict, mpath: str) -> str:
    mtype = m.get("type")
    if isinstance(mtype, str) and mtype in UNSUPPORTED_AGGREGATORS:
        raise SpecError(
            f"{mpath}.type",
            f"{mtype} is {UNSUPPORTED_AGGREGATORS[mtype]}. "
            f"Supported aggregators: {', '.join(METRIC_TYPES)}",
        )
    if mtype not in METRIC_TYPES:
        raise SpecError(
            f"{mpath}.type",
            f"unknown metric type {mtype!r}; accepted: {', '.join(METRIC_TYPES)}",
        )
    return mtype


def _allowed_fields(mtype: str) -> set[str]:
    allowed = {"type", "name", "fieldName"}
    if mtype == "hyperUnique":
        allowed |= {"isInputHyperUnique", "round"}
    elif mtype == "thetaSketch":
        allowed |= {"size", "isInputThetaSketch", "shouldFinalize"}
    elif mtype in ("HLLSketchBuild", "HLLSketchMerge"):
        allowed |= {"lgK", "tgtHllType", "round", "shouldFinalize"}
    elif mtype == "quantilesDoublesSketch":
        allowed |= {"k", "maxStreamLength", "shouldFinalize"}
    elif mtype in FIRST_LAST_TYPES:
        allowed |= {"timeColumn"}
        if mtype.startswith("string"):
            allowed |= {"maxStringBytes"}
    elif mtype != "count":
        allowed |= {"expression"}
    return allowed


def _hyper_unique(m: dict, mpath: str, ignored: list[str]) -> None:
    # The input is detected: a column of sketches (re-ingestion) is unioned.
    if m.get("isInputHyperUnique") is not None:
        ignored.append(
            f"{mpath}.isInputHyperUnique: whether the input holds sketches is read from "
            "its column type (binary sketches are unioned, other values are sketched)"
        )
    if m.get("round") is not None:
        ignored.append(f"{mpath}.round: {_QUERY_TIME}")


def _theta_size(m: dict, mpath: str, ignored: list[str]) -> int:
    size = int_at(m, "size", mpath, THETA_DEFAULT_SIZE, minimum=16)
    if size & (size - 1):
        raise SpecError(f"{mpath}.size", f"must be a power of 2, got {size}")
    size = size.bit_length() - 1  # Spark's lgNomEntries
    if size > 26:
        raise SpecError(f"{mpath}.size", "must be at most 2^26 (67108864)")
    if m.get("isInputThetaSketch") is not None:
        ignored.append(
            f"{mpath}.isInputThetaSketch: whether the input holds sketches is read from its column type"
        )
    return size


def _hll_lg_k(m: dict, mpath: str, ignored: list[str]) -> int:
    size = int_at(m, "lgK", mpath, HLL_DEFAULT_LG_K, minimum=4)
    if size > 21:
        raise SpecError(f"{mpath}.lgK", "must be between 4 and 21")
    if m.get("tgtHllType") not in (None, "HLL_4", "HLL_6", "HLL_8"):
        raise SpecError(f"{mpath}.tgtHllType", "must be HLL_4, HLL_6 or HLL_8")
    if m.get("tgtHllType") not in (None, "HLL_4"):
        ignored.append(
            f"{mpath}.tgtHllType: sketches are stored as Spark's HLL_4 (same estimates, smallest)"
        )
    if m.get("round") is not None:
        ignored.append(f"{mpath}.round: {_QUERY_TIME}")
    return size


def _quantiles_k(m: dict, mpath: str, ignored: list[str]) -> int:
    size = int_at(m, "k", mpath, QUANTILES_DEFAULT_K, minimum=8)
    if size > 65535:
        raise SpecError(f"{mpath}.k", "must be between 8 and 65535")
    if m.get("maxStreamLength") is not None:
        ignored.append(f"{mpath}.maxStreamLength: a KLL sketch needs no stream-length bound")
    return size


def _first_last_size(m: dict, mpath: str) -> int | None:
    if m.get("timeColumn") not in (None, "__time"):
        raise SpecError(f"{mpath}.timeColumn", "first/last follow the row timestamp (__time) only")
    if m.get("maxStringBytes") is not None:
        return int_at(m, "maxStringBytes", mpath, None, minimum=1)
    return None


def _size(m: dict, mtype: str, mpath: str, ignored: list[str]) -> int | None:
    """The metric's `size` (see Metric), with the options it ignores reported."""
    if mtype == "hyperUnique":
        _hyper_unique(m, mpath, ignored)
        return None
    if mtype == "thetaSketch":
        return _theta_size(m, mpath, ignored)
    if mtype in ("HLLSketchBuild", "HLLSketchMerge"):
        return _hll_lg_k(m, mpath, ignored)
    if mtype == "quantilesDoublesSketch":
        return _quantiles_k(m, mpath, ignored)
    if mtype in FIRST_LAST_TYPES:
        return _first_last_size(m, mpath)
    return None


def _metric(m, mpath: str, ignored: list[str]) -> Metric:
    m = object_at(m, mpath)
    mtype = _metric_type(m, mpath)
    allow(m, mpath, _allowed_fields(mtype))
    if m.get("expression") is not None:
        raise SpecError(
            f"{mpath}.expression",
            "aggregator expressions are not supported; compute the value with a "
            "transformSpec.transforms expression and name it in fieldName",
        )
    name = string_at(m, "name", mpath)
    field_name = None if mtype == "count" else string_at(m, "fieldName", mpath)
    size = _size(m, mtype, mpath, ignored)
    if m.get("shouldFinalize") is not None:
        ignored.append(f"{mpath}.shouldFinalize: {_QUERY_TIME}")
    canonical = mtype if mtype in SKETCH_TYPES else mtype.replace("float", "double")
    if mtype == "HLLSketchMerge":
        canonical = "HLLSketchBuild"  # a build over sketches unions them
    return Metric(canonical, name, field_name, size)


def metrics_spec(schema: dict, ignored: list[str]) -> tuple[Metric, ...]:
    """dataSchema.metricsSpec (absent: no metrics)."""
    path = METRICS_PATH
    raw = none_as(schema.get("metricsSpec"), [])
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of aggregators")
    out = tuple(_metric(m, f"{path}[{i}]", ignored) for i, m in enumerate(raw))
    dup = first_duplicate(m.name for m in out)
    if dup is not None:
        raise SpecError(path, f"metric name {dup!r} is used twice")
    return out
