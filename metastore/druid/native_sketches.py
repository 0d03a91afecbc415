"""The SQL of Druid's sketch aggregators and post-aggregators, per engine.

Three sketch kinds, as Strata stores them (Apache DataSketches, written by
Spark at ingestion): `hll` (HLLSketchBuild/Merge, hyperUnique), `theta`
(thetaSketch) and `kll` (quantilesDoublesSketch). On DuckDB they are the
functions of `metastore.sketches` (an aggregate is a function of `list(x)`);
on Spark SQL, Spark's own DataSketches functions. A value of a sketch column is
the sketch; Druid's finalization (the estimate, or a quantiles sketch's count)
is applied where a result is written. Pure: SQL text only.
"""

from __future__ import annotations

KINDS = ("hll", "theta", "kll")

# (dialect, kind) -> template of an aggregate over `{x}` with parameter `{p}`;
# `{f}` is the FILTER clause. Building sketches values, merging unions sketches.
_BUILD = {
    ("duckdb", "hll"): "strata_hll_build(list(CAST({x} AS VARCHAR)){f}, {p})",
    ("duckdb", "theta"): "strata_theta_build(list(CAST({x} AS VARCHAR)){f}, {p})",
    ("duckdb", "kll"): "strata_kll_build(list(CAST({x} AS DOUBLE)){f}, {p})",
    ("spark", "hll"): "hll_sketch_agg(CAST({x} AS STRING), {p}){f}",
    ("spark", "theta"): "theta_sketch_agg(CAST({x} AS STRING), {p}){f}",
    ("spark", "kll"): "kll_sketch_agg_double(CAST({x} AS DOUBLE), {p}){f}",
}
_MERGE = {
    ("duckdb", "hll"): "strata_hll_union(list({x}){f}, {p})",
    ("duckdb", "theta"): "strata_theta_union(list({x}){f}, {p})",
    ("duckdb", "kll"): "strata_kll_merge(list({x}){f}, {p})",
    ("spark", "hll"): "hll_union_agg({x}, true){f}",
    ("spark", "theta"): "theta_union_agg({x}, {p}){f}",
    ("spark", "kll"): "kll_merge_agg_double({x}){f}",
}
_FINAL = {
    ("duckdb", "hll"): "strata_hll_estimate({s})",
    ("duckdb", "theta"): "strata_theta_estimate({s})",
    ("duckdb", "kll"): "strata_kll_n({s})",
    ("spark", "hll"): "CAST(coalesce(hll_sketch_estimate({s}), 0) AS DOUBLE)",
    ("spark", "theta"): "CAST(coalesce(theta_sketch_estimate({s}), 0) AS DOUBLE)",
    ("spark", "kll"): "coalesce(kll_sketch_get_n_double({s}), 0)",
}
FINAL_KIND = {"hll": "double", "theta": "double", "kll": "long"}


def aggregate(dialect: str, kind: str, x: str, param: int, cond: str | None, *, merge: bool) -> str:
    """The aggregate that sketches `x` (or unions the sketches in `x`)."""
    where = "" if cond is None else f" FILTER (WHERE {cond})"
    table = _MERGE if merge else _BUILD
    return table[(dialect, kind)].format(x=x, p=param, f=where)


def finalize(dialect: str, kind: str, sketch: str) -> str:
    """Druid's finalized value: a distinct-count estimate, or a KLL sketch's count."""
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


def kll_quantile(dialect: str, sketch: str, fraction: float) -> str:
    if dialect == "duckdb":
        return f"strata_kll_quantile({sketch}, {fraction!r})"
    return f"kll_sketch_get_quantile_double({sketch}, CAST({fraction!r} AS DOUBLE))"


def kll_rank(dialect: str, sketch: str, value: float) -> str:
    if dialect == "duckdb":
        return f"strata_kll_rank({sketch}, {value!r})"
    return f"kll_sketch_get_rank_double({sketch}, CAST({value!r} AS DOUBLE))"


def kll_list(dialect: str, what: str, sketch: str, values: list[float]) -> str | None:
    """`quantiles`, `cdf` or `histogram` of a KLL sketch at `values` (DuckDB only)."""
    if dialect != "duckdb":
        return None
    return f"strata_kll_{what}({sketch}, {_doubles(values)})"


def kll_summary(dialect: str, sketch: str) -> str:
    if dialect == "duckdb":
        return f"strata_kll_summary({sketch})"
    return f"kll_sketch_to_string_double({sketch})"
