"""Druid SQL's DataSketches functions over what Strata stores
(docs/querying/sql-aggregations.md, sql-scalar.md), as rules of
`metastore.sql_druid_rules`.

An aggregate takes a column of values or of stored sketches (Spark's
DataSketches HLL, theta and KLL, read by `metastore.sketches`): the engine's
`typeof` tells which, so `list(CAST(x AS VARCHAR))` goes to one function that
builds or unions (`strata_hll_of`, `strata_theta_of`, `strata_kll_of`). Over a
column of values, APPROX_COUNT_DISTINCT and APPROX_QUANTILE keep the engine's
own aggregates; the list is only gathered (FILTER) where the column holds
sketches. A sketch in a result is base64, as Druid writes it. No Django.
"""

from __future__ import annotations

from metastore.sql_druid import Call, DruidFunctionRefused

_SKETCHES = "typeof($a0) = 'BLOB'"
_TYPE = "any_value(typeof($a0))"
_DEFAULTS = {"hll": 12, "theta": 16384, "kll": 128}


def _size(call: Call, kind: str, index: int = 1) -> int:
    """The sketch's size argument as the engine takes it (theta: log2 of `size`)."""
    value = call.literal(index, "the sketch size") if call.given(index) else _DEFAULTS[kind]
    if isinstance(value, bool) or not isinstance(value, int):
        raise DruidFunctionRefused(f"{call.name}: the sketch size must be an integer literal")
    if kind == "theta":
        if value & (value - 1) or not 16 <= value <= 2**26:
            raise DruidFunctionRefused(
                f"{call.name}: size must be a power of 2 from 16 to 67108864"
            )
        return value.bit_length() - 1
    low, high = (4, 21) if kind == "hll" else (2, 32768)
    if not low <= value <= high:
        raise DruidFunctionRefused(f"{call.name}: the sketch size must be from {low} to {high}")
    return value


def _sketch_of(call: Call, kind: str, *, only_sketches: bool = False, index: int = 1) -> str:
    gathered = "list(CAST($a0 AS VARCHAR))"
    if only_sketches:
        gathered += f" FILTER (WHERE {_SKETCHES})"
    return f"strata_{kind}_of({gathered}, {_TYPE}, {_size(call, kind, index)})"


def build(kind: str):
    """DS_HLL, DS_THETA, DS_QUANTILES_SKETCH: the sketch of the values (or union)."""
    return lambda call: _sketch_of(call, kind)


def count_distinct(kind: str):
    """APPROX_COUNT_DISTINCT*: the estimate, rounded to a BIGINT as Druid's."""

    def sql(call: Call) -> str:
        if kind == "theta":  # over values, a theta sketch (exact below its size)
            return f"CAST(round(strata_theta_estimate({_sketch_of(call, kind)})) AS BIGINT)"
        estimate = f"strata_{kind}_estimate({_sketch_of(call, kind, only_sketches=True)})"
        return (
            f"CASE WHEN {_TYPE} = 'BLOB' THEN CAST(round({estimate}) AS BIGINT) "
            "ELSE approx_count_distinct($a0) END"
        )

    return sql


def approx_quantile(call: Call) -> str:
    """APPROX_QUANTILE(_DS)(x, p[, k]): over values, exact (an item of the data);
    over stored quantiles sketches, their merge's quantile."""
    sketch = _sketch_of(call, "kll", only_sketches=True, index=2)
    return (
        f"CASE WHEN {_TYPE} = 'BLOB' THEN strata_kll_quantile({sketch}, $a1) "
        "ELSE CAST(quantile_disc($a0, $a1) FILTER (WHERE typeof($a0) <> 'BLOB') AS DOUBLE) END"
    )


def variance(*, population: bool, root: bool = False):
    """VARIANCE, VAR_SAMP, VAR_POP and STDDEV*: druid-stats' variance of a numeric
    column or of its stored variance states (`strata_variance` of metastore.sketches,
    which folds them as Druid does); the call's FILTER becomes the macro's condition."""

    def sql(call: Call) -> str | None:
        if call.window:  # a window keeps the engine's function
            return None
        if call.node.get("distinct"):
            raise DruidFunctionRefused(f"{call.name}: DISTINCT is not supported here")
        cond = "true"
        if call.node.get("filter") is not None:
            call.args.append(call.node["filter"])
            cond = f"$a{len(call.args) - 1}"
        text = f"strata_variance($a0, {str(population).lower()}, {cond})"
        return f"sqrt({text})" if root else text

    return sql


def _list(call: Call, start: int) -> str:
    return "[" + ", ".join(f"$a{i}" for i in range(start, len(call.args))) + "]"


def _doubles(call: Call, start: int) -> str:
    return "[" + ", ".join(f"CAST($a{i} AS DOUBLE)" for i in range(start, len(call.args))) + "]"


def _set_op(op: str):
    """THETA_SKETCH_UNION/INTERSECT/NOT([size,] sketch, ...)."""

    def sql(call: Call) -> str:
        first = call.args[0]
        sized = first.get("class") == "CONSTANT" and first["literal"].get("kind") != "BLOB"
        return f"strata_theta_set_op('{op}', {_list(call, 1 if sized else 0)})"

    return sql


def _hll_union(call: Call) -> str:
    """HLL_SKETCH_UNION([lgK, tgtHllType,] sketch, ...)."""
    start = 0
    while start < len(call.args) and call.args[start].get("class") == "CONSTANT":
        start += 1
    lg_k = _size(call, "hll", 0) if start else 12
    return f"strata_hll_union({_list(call, start)}, {lg_k})"


def _hll_estimate(call: Call) -> str:
    rounded = call.literal(1, "round") if call.given(1) else False
    if rounded:
        return "CAST(round(strata_hll_estimate($a0)) AS BIGINT)"
    return "strata_hll_estimate($a0)"


SCALARS = {
    "HLL_SKETCH_ESTIMATE": ((1, 2), _hll_estimate),
    "HLL_SKETCH_ESTIMATE_WITH_ERROR_BOUNDS": (
        (1, 2),
        lambda c: f"strata_hll_bounds($a0, {'$a1' if c.given(1) else 1})",
    ),
    "HLL_SKETCH_UNION": ((1, None), _hll_union),
    "THETA_SKETCH_ESTIMATE": ((1, 1), "strata_theta_estimate($a0)"),
    "THETA_SKETCH_UNION": ((1, None), _set_op("UNION")),
    "THETA_SKETCH_INTERSECT": ((1, None), _set_op("INTERSECT")),
    "THETA_SKETCH_NOT": ((1, None), _set_op("NOT")),
    "DS_GET_QUANTILE": ((2, 2), "strata_kll_quantile($a0, CAST($a1 AS DOUBLE))"),
    "DS_GET_QUANTILES": ((2, None), lambda c: f"strata_kll_quantiles($a0, {_doubles(c, 1)})"),
    "DS_HISTOGRAM": ((2, None), lambda c: f"strata_kll_histogram($a0, {_doubles(c, 1)})"),
    "DS_CDF": ((2, None), lambda c: f"strata_kll_cdf($a0, {_doubles(c, 1)})"),
    "DS_RANK": ((2, 2), "strata_kll_rank($a0, CAST($a1 AS DOUBLE))"),
    "DS_QUANTILE_SUMMARY": ((1, 1), "strata_kll_summary($a0)"),
}
