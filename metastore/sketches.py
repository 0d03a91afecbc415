"""Reading the sketches Strata stores, on the embedded query engine.

Ingestion writes Druid's sketch metrics as Spark's Apache DataSketches sketches
(`workers/jobs/rollup.py`): HLL (`hll_sketch_agg`), theta (`theta_sketch_agg`)
and KLL doubles (`kll_sketch_agg_double`), in the library's standard binary
forms. The `datasketches` package reads and merges those same forms, so DuckDB
gets them as scalar functions (`register`): an aggregate is the function of
`list(column)`, e.g. `strata_theta_union(list(users), 12)`, and the estimates
and quantiles are functions of one sketch. Spark SQL has the same operations
built in (`hll_union_agg`, `theta_union_agg`, `kll_merge_agg_double`, ...).

Raw values are sketched from their text, so a sketch built at query time over a
column estimates the same distinct count as Druid's (sketches are never mixed
with stored ones: a column holds either values or sketches).
"""

from __future__ import annotations

import contextlib
import itertools
import re

import datasketches as ds
import numpy as np

HLL_LG_K = 12
THETA_LG_K = 12
KLL_K = 200


def _present(values) -> list:
    return [v for v in values or () if v is not None]


# --- HLL ------------------------------------------------------------------------------------


def hll_union(sketches: list[bytes] | None, lg_k: int = HLL_LG_K) -> bytes | None:
    union = ds.hll_union(lg_k)
    for blob in _present(sketches):
        union.update(ds.hll_sketch.deserialize(bytes(blob)))
    return union.get_result(ds.tgt_hll_type.HLL_4).serialize_compact()


def hll_build(values: list | None, lg_k: int = HLL_LG_K) -> bytes:
    sketch = ds.hll_sketch(lg_k, ds.tgt_hll_type.HLL_4)
    for value in _present(values):
        sketch.update(str(value))
    return sketch.serialize_compact()


def hll_estimate(blob: bytes | None) -> float:
    return 0.0 if blob is None else ds.hll_sketch.deserialize(bytes(blob)).get_estimate()


def hll_bounds(blob: bytes | None, std_devs: int = 1) -> list[float]:
    """[estimate, lower bound, upper bound], as Druid's HLLSketchEstimateWithBounds."""
    if blob is None:
        return [0.0, 0.0, 0.0]
    s = ds.hll_sketch.deserialize(bytes(blob))
    return [s.get_estimate(), s.get_lower_bound(std_devs), s.get_upper_bound(std_devs)]


# --- theta ----------------------------------------------------------------------------------


def theta_union(sketches: list[bytes] | None, lg_k: int = THETA_LG_K) -> bytes:
    union = ds.theta_union(lg_k)
    for blob in _present(sketches):
        union.update(ds.compact_theta_sketch.deserialize(bytes(blob)))
    return union.get_result().serialize()


def theta_build(values: list | None, lg_k: int = THETA_LG_K) -> bytes:
    sketch = ds.update_theta_sketch(lg_k)
    for value in _present(values):
        sketch.update(str(value))
    return sketch.compact().serialize()


def theta_estimate(blob: bytes | None) -> float:
    return 0.0 if blob is None else ds.compact_theta_sketch.deserialize(bytes(blob)).get_estimate()


def theta_set_op(op: str, sketches: list[bytes | None]) -> bytes:
    """Druid's thetaSketchSetOp: UNION, INTERSECT or NOT (the first minus the rest);
    a null sketch is an empty one."""
    parts = [
        ds.compact_theta_sketch.deserialize(bytes(b))
        if b is not None
        else ds.update_theta_sketch().compact()
        for b in sketches or ()
    ]
    if not parts:
        return ds.update_theta_sketch().compact().serialize()
    if op == "UNION":
        union = ds.theta_union()
        for part in parts:
            union.update(part)
        return union.get_result().serialize()
    if op == "INTERSECT":
        both = ds.theta_intersection()
        for part in parts:
            both.update(part)
        return both.get_result().serialize()
    result = parts[0]
    for part in parts[1:]:
        result = ds.theta_a_not_b().compute(result, part)
    return result.serialize()


# --- KLL (Druid's quantilesDoublesSketch, KllDoublesSketch, KllFloatsSketch) -------------
# A stored KLL sketch is of doubles (quantilesDoublesSketch, KllDoublesSketch) or of
# floats (KllFloatsSketch, and approxHistogram, which ingestion stores as one). The
# serialized forms differ only in the width of their items, so a blob is read as
# doubles and, when its length does not fit that, as floats.


def _kll(blob: bytes | None):
    if blob is None:
        return None
    data = bytes(blob)
    try:
        return ds.kll_doubles_sketch.deserialize(data)
    except (IndexError, ValueError, RuntimeError):
        return ds.kll_floats_sketch.deserialize(data)


def kll_merge(sketches: list[bytes] | None, k: int = KLL_K) -> bytes:
    """The union of KLL sketches, of the family (floats or doubles) they hold; an empty
    sketch (the same bytes in both) joins either."""
    parts = [s for s in map(_kll, _present(sketches)) if not s.is_empty()]
    family = type(parts[0]) if parts else ds.kll_doubles_sketch
    merged = family(k)
    for part in parts:
        if not isinstance(part, family):
            raise ValueError("a KLL floats sketch and a KLL doubles sketch cannot be merged")
        merged.merge(part)
    return merged.serialize()


def kll_build(values: list | None, k: int = KLL_K) -> bytes:
    sketch = ds.kll_doubles_sketch(k)
    for value in _present(values):
        sketch.update(float(value))
    return sketch.serialize()


def kll_float_build(values: list | None, k: int = KLL_K) -> bytes:
    """KllFloatsSketch / approxHistogram over raw values: a KLL sketch of floats."""
    sketch = ds.kll_floats_sketch(k)
    for value in _present(values):
        sketch.update(float(value))
    return sketch.serialize()


def kll_n(blob: bytes | None) -> int:
    sketch = _kll(blob)
    return 0 if sketch is None else sketch.n


# Ranks count a value itself (INCLUSIVE), as DataSketches' Java library (Druid, Spark)
# does by default.


def kll_quantile(blob: bytes | None, fraction: float) -> float | None:
    sketch = _kll(blob)
    if sketch is None or sketch.is_empty():
        return None  # Druid: NaN for an empty sketch
    value = sketch.get_quantile(fraction, True)
    return java_float(value) if isinstance(sketch, ds.kll_floats_sketch) else value


def kll_quantiles(blob: bytes | None, fractions: list[float]) -> list[float] | None:
    sketch = _kll(blob)
    if sketch is None or sketch.is_empty():
        return None
    values = [sketch.get_quantile(f, True) for f in fractions]
    if isinstance(sketch, ds.kll_floats_sketch):  # Druid's float[], as Java writes it
        values = [java_float(v) for v in values]
    return values


def kll_rank(blob: bytes | None, value: float) -> float | None:
    sketch = _kll(blob)
    if sketch is None or sketch.is_empty():
        return None
    return sketch.get_rank(value, True)


def kll_cdf(blob: bytes | None, split_points: list[float]) -> list[float] | None:
    sketch = _kll(blob)
    if sketch is None or sketch.is_empty():
        return None
    return list(sketch.get_cdf(split_points, True))


def kll_histogram(blob: bytes | None, split_points: list[float]) -> list[float] | None:
    """Druid's ToHistogram: the (approximate) number of values in each bin."""
    sketch = _kll(blob)
    if sketch is None or sketch.is_empty():
        return None
    return [p * sketch.n for p in sketch.get_pmf(split_points, True)]


def kll_summary(blob: bytes | None) -> str | None:
    sketch = _kll(blob)
    return None if sketch is None else sketch.to_string()


# --- approxHistogram (druid-histogram), stored as a KLL floats sketch ---------------------
# Druid's post-aggregators over an approximate histogram, answered from the KLL
# sketch: min and max are exact (a KLL sketch keeps them), quantiles and bucket
# counts are the sketch's estimates. Druid writes floats as Java's shortest text
# (`java_float`); a Histogram's breaks are those floats widened to doubles.


def java_float(value: float) -> float:
    """The double Java's JSON writer shows for a float: the shortest text that reads back."""
    return float(str(np.float32(value)))


def _filled(blob: bytes | None):
    sketch = _kll(blob)
    return None if sketch is None or sketch.is_empty() else sketch


def approx_min(blob: bytes | None) -> float | None:
    sketch = _filled(blob)
    return None if sketch is None else java_float(sketch.get_min_value())


def approx_max(blob: bytes | None) -> float | None:
    sketch = _filled(blob)
    return None if sketch is None else java_float(sketch.get_max_value())


def approx_quantile(blob: bytes | None, probability: float) -> float | None:
    sketch = _filled(blob)
    return None if sketch is None else java_float(sketch.get_quantile(probability, True))


def approx_quantiles(blob: bytes | None, probabilities: list[float]) -> dict | None:
    """Druid's Quantiles: {probabilities, quantiles, min, max}."""
    sketch = _filled(blob)
    if sketch is None:
        return None
    return {
        "probabilities": [java_float(p) for p in probabilities],
        "quantiles": [java_float(sketch.get_quantile(p, True)) for p in probabilities],
        "min": java_float(sketch.get_min_value()),
        "max": java_float(sketch.get_max_value()),
    }


def approx_custom_buckets(blob: bytes | None, breaks: list[float]) -> dict | None:
    """Druid's Histogram over `breaks`: the count in each (break, next break]."""
    sketch = _filled(blob)
    if sketch is None:
        return None
    edges = [float(np.float32(b)) for b in breaks]
    below = [sketch.n * sketch.get_rank(b, True) for b in edges]  # values <= b
    counts = [high - low for low, high in itertools.pairwise(below)]
    return {"breaks": edges, "counts": counts}


def approx_equal_buckets(blob: bytes | None, buckets: int) -> dict | None:
    """Druid's ApproximateHistogram.toHistogram(size): `size` buckets from one delta
    below the minimum to the maximum, delta = (max - min) / (size - 1), in floats."""
    sketch = _filled(blob)
    if sketch is None:
        return None
    low, high = np.float32(sketch.get_min_value()), np.float32(sketch.get_max_value())
    delta = np.float32((high - low) / np.float32(buckets - 1))
    edges = [np.float32(low - delta)]
    for _ in range(buckets - 1):
        edges.append(np.float32(edges[-1] + delta))
    edges.append(high)
    return approx_custom_buckets(blob, [float(e) for e in edges])


# --- the DuckDB functions -------------------------------------------------------------------


# --- any column, for SQL ----------------------------------------------------------------------
# Druid SQL's sketch functions take a column of values or of sketches. The SQL
# passes `list(CAST(x AS VARCHAR))` and `typeof(x)`: DuckDB writes a BLOB as text
# with every byte outside printable ASCII, and the quotes and backslash, as \xHH.

_ESCAPE = re.compile(r"\\x([0-9A-Fa-f]{2})")


def blob_from_text(text: str) -> bytes:
    """The bytes of a BLOB from DuckDB's text of it."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text).encode("latin-1")


def _blobs(texts, column_type) -> list[bytes] | None:
    if column_type != "BLOB":
        return None
    return [blob_from_text(t) for t in _present(texts)]


def hll_of(texts: list[str] | None, column_type: str | None, lg_k: int) -> bytes:
    blobs = _blobs(texts, column_type)
    return hll_build(texts, lg_k) if blobs is None else hll_union(blobs, lg_k)


def theta_of(texts: list[str] | None, column_type: str | None, lg_k: int) -> bytes:
    blobs = _blobs(texts, column_type)
    return theta_build(texts, lg_k) if blobs is None else theta_union(blobs, lg_k)


def kll_of(texts: list[str] | None, column_type: str | None, k: int) -> bytes:
    blobs = _blobs(texts, column_type)
    if blobs is not None:
        return kll_merge(blobs, k)
    numbers = []
    for text in _present(texts):
        with contextlib.suppress(ValueError):  # Druid skips what is not a number
            numbers.append(float(text))
    return kll_build(numbers, k)


# --- regular expressions, for metastore.druid.expressions -------------------------------


def regexp_group_taken(text: str, pattern: str, group: int) -> bool | None:
    """Whether group `group` took part in the first match of `pattern` in `text`, as
    Java's Matcher.start(group) >= 0 (DuckDB's RE2 gives '' for such a group either
    way; Druid's regexp_extract is null for one that did not)."""
    try:
        match = re.search(pattern, text)
    except (re.error, IndexError):
        return None
    if match is None or group > (match.re.groups or 0):
        return None
    return match.start(group) >= 0


# name -> (function, argument types, result type); `[T]` is a list of T.
SIGNATURES = {
    "strata_hll_union": (hll_union, ["[BLOB]", "INTEGER"], "BLOB"),
    "strata_hll_build": (hll_build, ["[VARCHAR]", "INTEGER"], "BLOB"),
    "strata_hll_estimate": (hll_estimate, ["BLOB"], "DOUBLE"),
    "strata_hll_bounds": (hll_bounds, ["BLOB", "INTEGER"], "[DOUBLE]"),
    "strata_theta_union": (theta_union, ["[BLOB]", "INTEGER"], "BLOB"),
    "strata_theta_build": (theta_build, ["[VARCHAR]", "INTEGER"], "BLOB"),
    "strata_theta_estimate": (theta_estimate, ["BLOB"], "DOUBLE"),
    "strata_theta_set_op": (theta_set_op, ["VARCHAR", "[BLOB]"], "BLOB"),
    "strata_kll_merge": (kll_merge, ["[BLOB]", "INTEGER"], "BLOB"),
    "strata_kll_build": (kll_build, ["[DOUBLE]", "INTEGER"], "BLOB"),
    "strata_kll_float_build": (kll_float_build, ["[DOUBLE]", "INTEGER"], "BLOB"),
    "strata_kll_n": (kll_n, ["BLOB"], "BIGINT"),
    "strata_kll_quantile": (kll_quantile, ["BLOB", "DOUBLE"], "DOUBLE"),
    "strata_kll_quantiles": (kll_quantiles, ["BLOB", "[DOUBLE]"], "[DOUBLE]"),
    "strata_kll_rank": (kll_rank, ["BLOB", "DOUBLE"], "DOUBLE"),
    "strata_kll_cdf": (kll_cdf, ["BLOB", "[DOUBLE]"], "[DOUBLE]"),
    "strata_kll_histogram": (kll_histogram, ["BLOB", "[DOUBLE]"], "[DOUBLE]"),
    "strata_kll_summary": (kll_summary, ["BLOB"], "VARCHAR"),
    "strata_approx_min": (approx_min, ["BLOB"], "DOUBLE"),
    "strata_approx_max": (approx_max, ["BLOB"], "DOUBLE"),
    "strata_approx_quantile": (approx_quantile, ["BLOB", "DOUBLE"], "DOUBLE"),
    "strata_approx_quantiles": (approx_quantiles, ["BLOB", "[DOUBLE]"], "QUANTILES"),
    "strata_approx_custom_buckets": (approx_custom_buckets, ["BLOB", "[DOUBLE]"], "HISTOGRAM"),
    "strata_approx_equal_buckets": (approx_equal_buckets, ["BLOB", "INTEGER"], "HISTOGRAM"),
    "strata_regexp_group_taken": (
        regexp_group_taken,
        ["VARCHAR", "VARCHAR", "INTEGER"],
        "BOOLEAN",
    ),
    "strata_hll_of": (hll_of, ["[VARCHAR]", "VARCHAR", "INTEGER"], "BLOB"),
    "strata_theta_of": (theta_of, ["[VARCHAR]", "VARCHAR", "INTEGER"], "BLOB"),
    "strata_kll_of": (kll_of, ["[VARCHAR]", "VARCHAR", "INTEGER"], "BLOB"),
}
# Druid's JSON objects of druid-histogram: Quantiles and Histogram.
_STRUCTS = {
    "QUANTILES": {
        "probabilities": "[DOUBLE]",
        "quantiles": "[DOUBLE]",
        "min": "DOUBLE",
        "max": "DOUBLE",
    },
    "HISTOGRAM": {"breaks": "[DOUBLE]", "counts": "[DOUBLE]"},
}
# druid-stats' variance over values or over stored (count, sum, nvariance) states, as
# Druid's VarianceAggregatorCollector folds and reads them: null over no values, 0
# over one, else nvariance over count (population) or count - 1 (sample). A macro
# overloaded by the argument's type, so that one call binds for either column;
# `cond` is the call's FILTER.
_STATE = "STRUCT(count BIGINT, sum DOUBLE, nvariance DOUBLE)"
_PART = "sum(struct_extract(x, '{}')) FILTER (WHERE cond)"
MACROS = [
    "CREATE MACRO strata_variance_of(n, nvariance, population) AS CASE WHEN n = 1 THEN 0.0 "
    "WHEN n > 1 THEN nvariance / CASE WHEN population THEN n ELSE n - 1 END END",
    "CREATE MACRO strata_variance(x DOUBLE, population BOOLEAN, cond BOOLEAN) AS "
    "strata_variance_of(count(x) FILTER (WHERE cond), "
    "var_pop(x) FILTER (WHERE cond) * count(x) FILTER (WHERE cond), population), "
    f"(x {_STATE}, population BOOLEAN, cond BOOLEAN) AS strata_variance_of("
    f"{_PART.format('count')}, {_PART.format('nvariance')} "
    "+ sum(CASE WHEN struct_extract(x, 'count') > 0 THEN struct_extract(x, 'sum') "
    "* struct_extract(x, 'sum') / struct_extract(x, 'count') END) FILTER (WHERE cond) "
    f"- {_PART.format('sum')} * {_PART.format('sum')} / {_PART.format('count')}, population)",
]
FUNCTION_NAMES = frozenset(SIGNATURES) | {"strata_variance", "strata_variance_of"}
# Functions whose value for a null argument is not null (an estimate of nothing is 0).
_NULL_AWARE = {
    "strata_hll_estimate",
    "strata_theta_estimate",
    "strata_kll_n",
    "strata_hll_bounds",
    "strata_hll_of",
    "strata_theta_of",
    "strata_kll_of",
}


def register(connection) -> None:
    """Make the sketch functions callable on a DuckDB connection."""
    import duckdb
    from duckdb import sqltypes

    def resolve(name: str):
        if name in _STRUCTS:
            return duckdb.struct_type({k: resolve(v) for k, v in _STRUCTS[name].items()})
        if name.startswith("["):
            return duckdb.list_type(resolve(name[1:-1]))
        return getattr(sqltypes, name)

    for name, (fn, params, result) in SIGNATURES.items():
        connection.create_function(
            name,
            fn,
            [resolve(p) for p in params],
            resolve(result),
            null_handling="special" if name in _NULL_AWARE else "default",
        )
    for macro in MACROS:
        connection.execute(macro)
