"""The SQL of Druid's sketch aggregators and post-aggregators, per engine.

The sketch kinds, as Strata stores them (Apache DataSketches, written by
Spark at ingestion): `hll` (HLLSketchBuild/Merge, hyperUnique), `theta`
(thetaSketch), `kll` (quantilesDoublesSketch, KllDoublesSketch), `kll_float`
(KllFloatsSketch) and `approx` (druid-histogram's approxHistogram, which
ingestion stores as a KLL floats sketch; its value here is the sketch with the
aggregator's `numBuckets`, which Druid's finalized Histogram uses). On DuckDB they are the
functions of `metastore.sketches` (an aggregate is a function of `list(x)`);
on Spark SQL, Spark's own DataSketches functions. A value of a sketch column is
the sketch; Druid's finalization (the estimate, or a quantiles sketch's count)
is applied where a result is written. Pure: SQL text only.
"""

from __future__ import annotations

KINDS = ("hll", "theta", "kll", "kll_float", "approx")

# (dialect, kind) -> template of an aggregate over `{x}` with parameter `{p}`;
# `{f}` is the FILTER clause. Building sketches values, merging unions sketches.
_BUILD = {
    ("duckdb", "hll"): "strata_hll_build(list(CAST({x} AS VARCHAR)){f}, {p})",
    ("duckdb", "theta"): "strata_theta_build(list(CAST({x} AS VARCHAR)){f}, {p})",
    ("duckdb", "kll"): "strata_kll_build(list(CAST({x} AS DOUBLE)){f}, {p})",
    ("spark", "hll"): "hll_sketch_agg(CAST({x} AS STRING), {p}){f}",
    ("spark", "theta"): "theta_sketch_agg(CAST({x} AS STRING), {p}){f}",
    ("spark", "kll"): "kll_sketch_agg_double(CAST({x} AS DOUBLE), {p}){f}",
    ("duckdb", "kll_float"): "strata_kll_float_build(list(CAST({x} AS DOUBLE)){f}, {p})",
    ("spark", "kll_float"): "kll_sketch_agg_float(CAST({x} AS FLOAT), {p}){f}",
}
_MERGE = {
    ("duckdb", "hll"): "strata_hll_union(list({x}){f}, {p})",
    ("duckdb", "theta"): "strata_theta_union(list({x}){f}, {p})",
    ("duckdb", "kll"): "strata_kll_merge(list({x}){f}, {p})",
    ("spark", "hll"): "hll_union_agg({x}, true){f}",
    ("spark", "theta"): "theta_union_agg({x}, {p}){f}",
    ("spark", "kll"): "kll_merge_agg_double({x}){f}",
    ("duckdb", "kll_float"): "strata_kll_merge(list({x}){f}, {p})",
    ("spark", "kll_float"): "kll_merge_agg_float({x}){f}",
}
_FINAL = {
    ("duckdb", "hll"): "strata_hll_estimate({s})",
    ("duckdb", "theta"): "strata_theta_estimate({s})",
    ("duckdb", "kll"): "strata_kll_n({s})",
    ("spark", "hll"): "CAST(coalesce(hll_sketch_estimate({s}), 0) AS DOUBLE)",
    ("spark", "theta"): "CAST(coalesce(theta_sketch_estimate({s}), 0) AS DOUBLE)",
    ("spark", "kll"): "coalesce(kll_sketch_get_n_double({s}), 0)",
    ("duckdb", "kll_float"): "strata_kll_n({s})",
    ("spark", "kll_float"): "coalesce(kll_sketch_get_n_float({s}), 0)",
    # Druid's Histogram of `numBuckets` equal buckets (ApproximateHistogram.toHistogram)
    (
        "duckdb",
        "approx",
    ): "strata_approx_equal_buckets(struct_extract({s}, 'sketch'), struct_extract({s}, 'buckets'))",
}
FINAL_KIND = {"hll": "double", "theta": "double", "kll": "long", "kll_float": "long"}
FINAL_KIND["approx"] = "other"


def aggregate(dialect: str, kind: str, x: str, param: int, cond: str | None, *, merge: bool) -> str:
    """The aggregate that sketches `x` (or unions the sketches in `x`)."""
    where = "" if cond is None else f" FILTER (WHERE {cond})"
    table = _MERGE if merge else _BUILD
    return table[(dialect, kind)].format(x=x, p=param, f=where)


def approx_histogram(dialect: str, x: str, cond: str | None, buckets: int) -> str | None:
    """approxHistogramFold over a column of stored approxHistogram (KLL floats)
    sketches: their union, with the `numBuckets` its finalized Histogram has."""
    if dialect != "duckdb":
        return None
    merged = aggregate(dialect, "kll_float", x, 200, cond, merge=True)
    return f"struct_pack(sketch := {merged}, buckets := {buckets})"


def finalize(dialect: str, kind: str, sketch: str) -> str:
    """Druid's finalized value: a distinct-count estimate, a KLL sketch's count, or an
    approximate histogram's Histogram."""
    return _FINAL[(dialect, kind)].format(s=sketch)


def as_base64(sketch: str) -> str:
    """A sketch as Druid writes an unfinalized one in JSON."""
    return f"base64({sketch})"


def _fold(fn: str, parts: list[str], *extra: str) -> str:
    sql = parts[0]
    for part in parts[1:]:
        sql = f"{fn}({', '.join([sql, part, *extra])})"
    return sql


def theta_set_op(dialect: str, op: str, parts: list[str]) -> str:
    if dialect == "duckdb":
        return f"strata_theta_set_op('{op}', [{', '.join(parts)}])"
    fn = {"UNION": "theta_union", "INTERSECT": "theta_intersection", "NOT": "theta_difference"}
    return _fold(fn[op], parts)


def hll_union(dialect: str, parts: list[str], lg_k: int) -> str:
    if dialect == "duckdb":
        return f"strata_hll_union([{', '.join(parts)}], {lg_k})"
    return _fold("hll_union", parts, "true")


def hll_bounds(dialect: str, sketch: str, std_devs: int) -> str | None:
    return f"strata_hll_bounds({sketch}, {std_devs})" if dialect == "duckdb" else None


def _doubles(values: list[float]) -> str:
    return "[" + ", ".join(f"CAST({v!r} AS DOUBLE)" for v in values) + "]"


def _spark_kll(kind: str) -> tuple[str, str]:
    return ("float", "FLOAT") if kind == "kll_float" else ("double", "DOUBLE")


def kll_quantile(dialect: str, sketch: str, fraction: float, kind: str = "kll") -> str:
    if dialect == "duckdb":
        return f"strata_kll_quantile({sketch}, {fraction!r})"
    family, _ = _spark_kll(kind)
    return f"kll_sketch_get_quantile_{family}({sketch}, CAST({fraction!r} AS DOUBLE))"


def kll_rank(dialect: str, sketch: str, value: float, kind: str = "kll") -> str:
    if dialect == "duckdb":
        return f"strata_kll_rank({sketch}, {value!r})"
    family, sql_type = _spark_kll(kind)
    return f"kll_sketch_get_rank_{family}({sketch}, CAST({value!r} AS {sql_type}))"


def kll_list(dialect: str, what: str, sketch: str, values: list[float]) -> str | None:
    """`quantiles`, `cdf` or `histogram` of a KLL sketch at `values` (DuckDB only)."""
    if dialect != "duckdb":
        return None
    return f"strata_kll_{what}({sketch}, {_doubles(values)})"


def kll_summary(dialect: str, sketch: str, kind: str = "kll") -> str:
    if dialect == "duckdb":
        return f"strata_kll_summary({sketch})"
    return f"kll_sketch_to_string_{_spark_kll(kind)[0]}({sketch})"


# druid-histogram's post-aggregators over an approximate histogram (DuckDB only):
# post-aggregator type -> (function, its parameter: probability, probabilities,
# breaks or numBuckets, or none).
APPROX_POSTS = {
    "min": ("strata_approx_min", None),
    "max": ("strata_approx_max", None),
    "quantile": ("strata_approx_quantile", "probability"),
    "quantiles": ("strata_approx_quantiles", "probabilities"),
    "customBuckets": ("strata_approx_custom_buckets", "breaks"),
    "equalBuckets": ("strata_approx_equal_buckets", "numBuckets"),
}


def approx_post(dialect: str, post: str, histogram: str, param: str | None) -> str | None:
    """The SQL of druid-histogram post-aggregator `post` over `histogram` (an
    `approx` value), `param` its parameter as SQL."""
    if dialect != "duckdb":
        return None
    fn, _ = APPROX_POSTS[post]
    args = [f"struct_extract({histogram}, 'sketch')", *([] if param is None else [param])]
    return f"{fn}({', '.join(args)})"


def doubles(values: list[float]) -> str:
    return _doubles(values)
