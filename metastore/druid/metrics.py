"""metricsSpec: the aggregators applied at ingestion (rollup), Druid's core ones
and the DataSketches ones; the others Druid documents are refused by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, first_duplicate, int_at, none_as, object_at, string_at

FIRST_LAST_TYPES = tuple(
    f"{kind}{end}" for kind in ("string", "long", "double", "float") for end in ("First", "Last")
)
# Stored as Druid's FLOAT column: FloatSumAggregator keeps a `float` sum, its
# factory's intermediate and result types are FLOAT (likewise floatMin/floatMax);
# floatFirst/floatLast keep a (time, float) pair.
FLOAT_VALUE_TYPES = ("floatSum", "floatMin", "floatMax", "floatFirst", "floatLast")
KLL_TYPES = (
    "KllDoublesSketch",
    "KllFloatsSketch",
    "KllDoublesSketchMerge",
    "KllFloatsSketchMerge",
)
SKETCH_TYPES = (
    "thetaSketch",
    "HLLSketchBuild",
    "HLLSketchMerge",
    "quantilesDoublesSketch",
    "quantilesDoublesSketchMerge",
    *KLL_TYPES,
)
# druid-stats and druid-histogram: stored as structs (variance, fixed buckets) or
# as a KLL sketch (approxHistogram), see workers/jobs/rollup.py.
STATS_TYPES = ("variance", "varianceFold", "fixedBucketsHistogram")
APPROX_HISTOGRAM_TYPES = ("approxHistogram", "approxHistogramFold")
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
    *STATS_TYPES,
    *APPROX_HISTOGRAM_TYPES,
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
    "arrayOfDoublesSketch": _CORE_EXT.format("druid-datasketches (tuple sketches)"),
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
KLL_DEFAULT_K = 200  # Druid's KllDoublesSketch / KllFloatsSketch default k
VARIANCE_INPUT_TYPES = ("float", "long", "double", "variance")
OUTLIER_MODES = ("ignore", "overflow", "clip")
METRICS_PATH = "spec.dataSchema.metricsSpec"
_QUERY_TIME = "a query-time option; the stored sketch is the same"


@dataclass(frozen=True)
class Metric:
    """type is canonical: Druid's name (float* stay float*, 32-bit FLOAT values).
    `size` is the sketch's accuracy parameter: thetaSketch lgNomEntries,
    HLLSketchBuild lgK, quantilesDoublesSketch / Kll*Sketch / approxHistogram k
    (Spark's KLL sketch)."""

    type: str
    name: str
    field_name: str | None = None
    size: int | None = None
    # Further parameters, as (key, value) pairs: a variance's inputType, a
    # fixedBucketsHistogram's lowerLimit, upperLimit, numBuckets, outlierHandlingMode.
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)


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
    elif mtype.startswith("quantilesDoublesSketch") or mtype in KLL_TYPES:
        allowed |= {"k", "maxStreamLength", "shouldFinalize"}
    elif mtype in ("variance", "varianceFold"):
        allowed |= {"estimator", "inputType"} if mtype == "variance" else {"estimator"}
    elif mtype == "fixedBucketsHistogram":
        allowed |= {"lowerLimit", "upperLimit", "numBuckets", "outlierHandlingMode"}
        allowed |= {"finalizeAsBase64Binary"}
    elif mtype in APPROX_HISTOGRAM_TYPES:
        allowed |= {
            "resolution",
            "numBuckets",
            "lowerLimit",
            "upperLimit",
            "finalizeAsBase64Binary",
        }
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


def _quantiles_k(m: dict, mpath: str, ignored: list[str], default: int) -> int:
    size = int_at(m, "k", mpath, default, minimum=8)
    if size > 65535:
        raise SpecError(f"{mpath}.k", "must be between 8 and 65535")
    if m.get("maxStreamLength") is not None:
        ignored.append(f"{mpath}.maxStreamLength: a KLL sketch needs no stream-length bound")
    return size


def _number_at(m: dict, key: str, mpath: str, default: float | None) -> float | None:
    value = m.get(key)
    if value is None:
        return default
    try:  # Druid (Jackson) also takes a number written as a string
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        number = float(value)
    except ValueError:
        raise SpecError(f"{mpath}.{key}", f"must be a number, got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise SpecError(f"{mpath}.{key}", f"must be a finite number, got {value!r}")
    return number


def _approx_histogram(m: dict, mpath: str, ignored: list[str]) -> None:
    """approxHistogram(Fold): checked as Druid checks it; stored as a KLL sketch."""
    int_at(m, "resolution", mpath, 50, minimum=1)
    int_at(m, "numBuckets", mpath, 7, minimum=2)
    lower = _number_at(m, "lowerLimit", mpath, None)
    upper = _number_at(m, "upperLimit", mpath, None)
    if lower is not None and upper is not None and lower >= upper:
        raise SpecError(f"{mpath}.upperLimit", "must be greater than lowerLimit")
    ignored.append(
        f"{mpath}: approxHistogram is stored as a KLL floats sketch (k {KLL_DEFAULT_K}), the "
        "quantiles sketch Druid recommends in its place; resolution, numBuckets, lowerLimit "
        "and upperLimit shape Druid's deprecated Ben-Haim histogram, which is not built here"
    )


def _variance_options(m: dict, mtype: str, mpath: str, ignored: list[str]) -> tuple:
    """(("inputType", float | long | double | variance),): Druid's default is float."""
    input_type = "variance" if mtype == "varianceFold" else m.get("inputType") or "float"
    if not isinstance(input_type, str) or input_type.lower() not in VARIANCE_INPUT_TYPES:
        raise SpecError(
            f"{mpath}.inputType",
            f"must be one of {', '.join(VARIANCE_INPUT_TYPES)}, got {input_type!r}",
        )
    if m.get("estimator") is not None:
        if not isinstance(m["estimator"], str):
            raise SpecError(f"{mpath}.estimator", "must be a string (population or sample)")
        ignored.append(
            f"{mpath}.estimator: a query-time option (population or sample variance of "
            "the same stored state)"
        )
    return (("inputType", input_type.lower()),)


def _fixed_buckets_options(m: dict, mpath: str, ignored: list[str]) -> tuple:
    """lowerLimit, upperLimit, numBuckets, outlierHandlingMode, as Druid checks them."""
    lower = _number_at(m, "lowerLimit", mpath, None)
    upper = _number_at(m, "upperLimit", mpath, None)
    for key, value in (("lowerLimit", lower), ("upperLimit", upper)):
        if value is None:
            raise SpecError(f"{mpath}.{key}", "is required (a number)")
    if upper <= lower:
        raise SpecError(f"{mpath}.upperLimit", f"must be greater than lowerLimit ({lower:g})")
    buckets = int_at(m, "numBuckets", mpath, 10, minimum=1, maximum=100_000)
    mode = m.get("outlierHandlingMode") or "ignore"  # Druid's factory defaults to ignore
    if not isinstance(mode, str) or mode.lower() not in OUTLIER_MODES:
        raise SpecError(
            f"{mpath}.outlierHandlingMode", f"must be one of {', '.join(OUTLIER_MODES)}"
        )
    if m.get("finalizeAsBase64Binary") is not None:
        ignored.append(f"{mpath}.finalizeAsBase64Binary: {_QUERY_TIME}")
    return (
        ("lowerLimit", lower),
        ("upperLimit", upper),
        ("numBuckets", buckets),
        ("outlierHandlingMode", mode.lower()),
    )


def _options(m: dict, mtype: str, mpath: str, ignored: list[str]) -> tuple:
    if mtype in ("variance", "varianceFold"):
        return _variance_options(m, mtype, mpath, ignored)
    if mtype == "fixedBucketsHistogram":
        return _fixed_buckets_options(m, mpath, ignored)
    return ()


# Merge (combining) aggregators at ingestion: the build aggregator, which unions
# a column of sketches (or states) and builds from raw values.
_CANONICAL = {
    "HLLSketchMerge": "HLLSketchBuild",
    "quantilesDoublesSketchMerge": "quantilesDoublesSketch",
    "KllDoublesSketchMerge": "KllDoublesSketch",
    "KllFloatsSketchMerge": "KllFloatsSketch",
    "varianceFold": "variance",
    "approxHistogramFold": "approxHistogram",
}


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
    if mtype.startswith("quantilesDoublesSketch"):
        return _quantiles_k(m, mpath, ignored, QUANTILES_DEFAULT_K)
    if mtype in KLL_TYPES:
        return _quantiles_k(m, mpath, ignored, KLL_DEFAULT_K)
    if mtype in APPROX_HISTOGRAM_TYPES:
        _approx_histogram(m, mpath, ignored)
        return KLL_DEFAULT_K
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
    options = _options(m, mtype, mpath, ignored)
    if m.get("shouldFinalize") is not None:
        ignored.append(f"{mpath}.shouldFinalize: {_QUERY_TIME}")
    # float* metrics keep their type: Druid's FLOAT values (FLOAT_VALUE_TYPES)
    return Metric(_CANONICAL.get(mtype, mtype), name, field_name, size, options)


# How a metric's input column feeds it (workers/jobs/parsing.py, rollup.py): the
# kind when the column holds raw values, and when it holds stored sketches/states.
_INPUT_KINDS = {
    "hyperUnique": ("distinct", "sketch"),
    "HLLSketchBuild": ("distinct", "sketch"),
    "HLLSketchMerge": ("distinct", "sketch"),
    "thetaSketch": ("theta", "theta_union"),
    "quantilesDoublesSketch": ("kll", "kll_merge"),
    "KllDoublesSketch": ("kll", "kll_merge"),
    "KllFloatsSketch": ("kll_float", "kll_float_merge"),
    "approxHistogram": ("kll_float", "kll_float_merge"),
    "variance": ("variance", "variance_merge"),
    "fixedBucketsHistogram": ("histogram", "histogram_merge"),
}
# Kinds whose column is passed through as read (sketches, stored states).
STORED_INPUT_KINDS = frozenset(stored for _, stored in _INPUT_KINDS.values())
# Kinds whose column is read as a number, and as which type.
NUMBER_INPUT_KINDS = {"kll": "double", "kll_float": "float", "histogram": "double"}


def input_kind(m: Metric, field_type: str) -> str:
    """How metric `m` reads its field, given the field's Spark type: a stored
    sketch/state (binary, or a struct for variance and fixedBucketsHistogram) is
    merged, anything else is a value to aggregate. Compaction names the
    combining types (`*Merge`, `*Fold`), which read as their build types."""
    mtype = _CANONICAL.get(m.type, m.type)
    if mtype in _INPUT_KINDS:
        build, stored = _INPUT_KINDS[mtype]
        struct = mtype in ("variance", "fixedBucketsHistogram")
        is_stored = field_type.startswith("struct") if struct else field_type == "binary"
        if mtype == "variance" and m.option("inputType") == "variance" and not is_stored:
            raise SpecError(
                METRICS_PATH,
                f"metric {m.name!r} has inputType variance, but its field {m.field_name!r} "
                f"holds {field_type}, not stored variance states (re-ingest them through a "
                "druid input source)",
            )
        return stored if is_stored else build
    if m.type in FIRST_LAST_TYPES:
        return "pair"
    return "value"


def input_number_type(m: Metric, kind: str) -> str:
    """long, float or double: how a value-reading metric parses its field."""
    if kind == "variance":
        input_type = m.option("inputType", "float")
        return input_type if input_type in ("long", "double") else "float"
    if kind in NUMBER_INPUT_KINDS:
        return NUMBER_INPUT_KINDS[kind]
    if m.type in FLOAT_VALUE_TYPES:
        return "float"
    return "long" if m.type.startswith("long") else "double"


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
