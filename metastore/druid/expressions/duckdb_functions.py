"""Druid's expression functions as DuckDB SQL, those the shared templates of
`functions` do not cover (the counterpart of `spark_functions`, with the same
Druid semantics). A function missing here is refused by name in native queries.
Pure: no Spark or Django import.
"""

from __future__ import annotations

from metastore.druid.expressions import duckdb_types
from metastore.druid.expressions.duckdb_json import FUNCTIONS as JSON_FUNCTIONS
from metastore.druid.expressions.duckdb_time import TIME_FUNCTIONS
from metastore.druid.expressions.duckdb_types import (
    DUCK_TYPE,
    array,
    as_long_bool,
    cast_to,
    double,
    long,
    num,
    text,
)
from metastore.druid.expressions.functions import from_templates, general
from metastore.druid.expressions.types import (
    ARRAYS,
    NUMERIC,
    Arg,
    ExpressionError,
    Function,
    element_kind,
    literal,
)

FUNCTIONS: dict[str, Function] = {}


def _fn(name: str, lo: int, hi: int | None = -1):
    def register(emit):
        FUNCTIONS[name] = Function((lo, lo if hi == -1 else hi), emit)
        return emit

    return register


# --- general --------------------------------------------------------------------------

# --- strings --------------------------------------------------------------------------


@_fn("concat", 0, None)
def _concat(a):
    if not a:
        return "CAST(NULL AS VARCHAR)", "string"
    return "(" + " || ".join(text(x) for x in a) + ")", "string"  # null if any is null


@_fn("strlen", 1)
def _strlen(a):
    return f"CAST(length({text(a[0])}) AS BIGINT)", "long"


@_fn("format", 1, None)
def _format(a):
    values = [x.sql if x.kind in NUMERIC else text(x) for x in a[1:]]
    return "printf(" + ", ".join([text(a[0]), *values]) + ")", "string"


_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


@_fn("parse_long", 1, 2)
def _parse_long(a):
    radix = int(literal(a[1], "the radix", "parse_long")) if len(a) == 2 else 10
    if not 2 <= radix <= 36:
        raise ExpressionError("parse_long(): the radix must be from 2 to 36")
    t = f"lower(trim({text(a[0])}))"
    valid = f"regexp_matches({t}, '^[-+]?[{_DIGITS[:radix]}]+$')"
    digits = f"list_transform(string_split(ltrim({t}, '+-'), ''), lambda _c: strpos('{_DIGITS}', _c) - 1)"
    value = f"list_reduce({digits}, lambda _n, _d: _n * {radix} + _d, CAST(0 AS BIGINT))"
    return (
        f"(CASE WHEN NOT {valid} THEN NULL WHEN starts_with({t}, '-') THEN - {value} ELSE {value} END)",
        ("long"),
    )


@_fn("regexp_extract", 2, 3)
def _regexp_extract(a):
    index = f"CAST({long(a[2])} AS INTEGER)" if len(a) == 3 else "0"
    t, p = text(a[0]), text(a[1])
    # Druid: null when there is no match (DuckDB gives '')
    return (
        f"(CASE WHEN regexp_matches({t}, {p}) THEN regexp_extract({t}, {p}, {index}) END)",
        "string",
    )


@_fn("regexp_like", 2)
def _regexp_like(a):
    return as_long_bool(f"regexp_matches({text(a[0])}, {text(a[1])})"), "long"


@_fn("contains_string", 2)
def _contains(a):
    return as_long_bool(f"contains({text(a[0])}, {text(a[1])})"), "long"


@_fn("icontains_string", 2)
def _icontains(a):
    return as_long_bool(f"contains(lower({text(a[0])}), lower({text(a[1])}))"), "long"


@_fn("substring", 3)
def _substring(a):
    # 0-based index; a negative length means "to the end"
    t, i, n = text(a[0]), long(a[1]), long(a[2])
    return (
        f"(CASE WHEN {n} < 0 THEN substr({t}, {i} + 1) ELSE substr({t}, {i} + 1, {n}) END)",
        "string",
    )


@_fn("left", 2)
def _left(a):
    return f"left({text(a[0])}, CAST({long(a[1])} AS INTEGER))", "string"


@_fn("right", 2)
def _right(a):
    return f"right({text(a[0])}, CAST({long(a[1])} AS INTEGER))", "string"


@_fn("strpos", 2, 3)
def _strpos(a):
    t, s = text(a[0]), text(a[1])
    if len(a) == 2:
        return f"(CAST(strpos({t}, {s}) AS BIGINT) - 1)", "long"
    start = long(a[2])
    found = f"strpos(substr({t}, {start} + 1), {s})"
    return f"(CASE WHEN {found} = 0 THEN -1 ELSE {found} + {start} - 1 END)", "long"


def _trim(side: str):
    def emit(a):
        chars = text(a[1]) if len(a) == 2 else "' '"
        return f"{side}({text(a[0])}, {chars})", "string"

    return Function((1, 2), emit)


FUNCTIONS.update(trim=_trim("trim"), ltrim=_trim("ltrim"), rtrim=_trim("rtrim"))


@_fn("repeat", 2)
def _repeat(a):
    return f"repeat({text(a[0])}, CAST({long(a[1])} AS BIGINT))", "string"


def _pad(side: str):
    def emit(a):
        t, n, chars = text(a[0]), long(a[1]), text(a[2])
        # an empty pad leaves the text as it is (DuckDB would fail), cut to length
        return (
            f"(CASE WHEN {chars} = '' THEN left({t}, CAST({n} AS INTEGER)) "
            f"ELSE {side}({t}, CAST({n} AS INTEGER), {chars}) END)",
            "string",
        )

    return Function((3, 3), emit)


FUNCTIONS.update(lpad=_pad("lpad"), rpad=_pad("rpad"))


# --- math -----------------------------------------------------------------------------


@_fn("abs", 1)
def _abs(a):
    return f"abs({num(a[0])})", a[0].kind if a[0].kind in NUMERIC else "double"


@_fn("ceil", 1)
def _ceil(a):
    return f"CAST(ceil({num(a[0])}) AS DOUBLE)", "double"


@_fn("floor", 1)
def _floor(a):
    return f"CAST(floor({num(a[0])}) AS DOUBLE)", "double"


@_fn("copysign", 2)
def _copysign(a):
    x, y = double(a[0]), double(a[1])
    return f"(CASE WHEN {y} < 0 THEN -abs({x}) ELSE abs({x}) END)", "double"


@_fn("getexponent", 1)
def _get_exponent(a):
    x = double(a[0])
    return (
        f"(CASE WHEN isnan({x}) OR isinf({x}) THEN 1024 WHEN {x} = 0 THEN -1023 "
        f"ELSE CAST(floor(log2(abs({x}))) AS BIGINT) END)",
        "long",
    )


@_fn("scalb", 2)
def _scalb(a):
    return f"({double(a[0])} * power(2, {long(a[1])}))", "double"


@_fn("remainder", 2)
def _remainder(a):
    x, y = double(a[0]), double(a[1])
    return f"({x} - {y} * round_even({x} / {y}, 0))", "double"


def _minmax(sql: str):
    def emit(a):
        kind = "long" if all(x.kind == "long" for x in a) else "double"
        x, y = (cast_to(v, kind) for v in a)
        return f"(CASE WHEN {x} IS NULL OR {y} IS NULL THEN NULL ELSE {sql}({x}, {y}) END)", kind

    return Function((2, 2), emit)


FUNCTIONS.update(max=_minmax("greatest"), min=_minmax("least"))


@_fn("round", 1, 2)
def _round(a):
    places = long(a[1]) if len(a) == 2 else "0"
    if a[0].kind == "long":
        return f"round({a[0].sql}, CAST({places} AS INTEGER))", "long"
    x = num(a[0])
    # Druid: NaN rounds to 0, infinities to the nearest finite double
    return (
        f"(CASE WHEN isnan({x}) THEN 0.0 WHEN {x} = 'Infinity'::DOUBLE "
        f"THEN 1.7976931348623157E308 WHEN {x} = '-Infinity'::DOUBLE "
        f"THEN -1.7976931348623157E308 ELSE round({x}, CAST({places} AS INTEGER)) END)",
        "double",
    )


@_fn("div", 2)
def _div(a):
    return f"({long(a[0])} // NULLIF({long(a[1])}, 0))", "long"


@_fn("safe_divide", 2)
def _safe_divide(a):
    if a[0].kind == "long" and a[1].kind == "long":
        return f"({a[0].sql} // NULLIF({a[1].sql}, 0))", "long"
    return f"({double(a[0])} / NULLIF({double(a[1])}, 0))", "double"


def _reduce(sql: str):
    """greatest/least: nulls ignored; all longs compare as longs, numbers as
    doubles, and any text makes them all compare as text."""

    def emit(a):
        if not a:
            return "CAST(NULL AS VARCHAR)", "string"
        kinds = {x.kind for x in a if x.sql != "NULL"}
        if kinds <= {"long"}:
            kind = "long"
        elif kinds <= set(NUMERIC):
            kind = "double"
        elif any(x.is_literal and x.kind == "string" for x in a):
            kind = "string"
        else:
            kind = "double"
        return f"{sql}(" + ", ".join(cast_to(x, kind) for x in a) + ")", kind

    return Function((0, None), emit)


FUNCTIONS.update(greatest=_reduce("greatest"), least=_reduce("least"))


# --- arrays ---------------------------------------------------------------------------


@_fn("array", 1, None)
def _array(a):
    first = a[0].kind if a[0].kind in ("long", "double", "string") else "string"
    return "[" + ", ".join(cast_to(x, first) for x in a) + "]", f"array<{first}>"


@_fn("array_length", 1)
def _array_length(a):
    return f"CAST(len({array(a[0])[0]}) AS BIGINT)", "long"


def _at(arr: str, index: str) -> str:
    """The element at a 0-based index, null outside the array."""
    return f"(CASE WHEN {index} >= 0 THEN list_extract({arr}, {index} + 1) END)"


@_fn("array_offset", 2)
def _array_offset(a):
    arr, kind = array(a[0])
    return _at(arr, long(a[1])), element_kind(kind)


@_fn("array_ordinal", 2)
def _array_ordinal(a):
    arr, kind = array(a[0])
    return _at(arr, f"{long(a[1])} - 1"), element_kind(kind)


def _element(value: Arg, array_kind: str) -> str:
    return cast_to(value, element_kind(array_kind))


@_fn("array_contains", 2)
def _array_contains(a):
    arr, kind = array(a[0])
    if a[1].kind in ARRAYS:
        return as_long_bool(f"list_has_all({arr}, {cast_to(a[1], kind)})"), "long"
    return as_long_bool(f"coalesce(list_has({arr}, {_element(a[1], kind)}), false)"), "long"


@_fn("array_overlap", 2)
def _array_overlap(a):
    arr, kind = array(a[0])
    return as_long_bool(f"list_has_any({arr}, {cast_to(a[1], kind)})"), "long"


@_fn("scalar_in_array", 2)
def _scalar_in_array(a):
    arr, kind = array(a[1])
    x = _element(a[0], kind)
    return f"(CASE WHEN {x} IS NULL THEN NULL ELSE {as_long_bool(f'list_has({arr}, {x})')} END)", (
        "long"
    )


def _position(shift: int):
    def emit(a):
        arr, kind = array(a[0])
        pos = f"list_position({arr}, {_element(a[1], kind)})"
        return f"(CASE WHEN {pos} > 0 THEN {pos} - {shift} END)", "long"

    return Function((2, 2), emit)


FUNCTIONS.update(array_offset_of=_position(1), array_ordinal_of=_position(0))


@_fn("array_prepend", 2)
def _array_prepend(a):
    arr, kind = array(a[1])
    return f"list_prepend({_element(a[0], kind)}, {arr})", kind


@_fn("array_append", 2)
def _array_append(a):
    arr, kind = array(a[0])
    return f"list_append({arr}, {_element(a[1], kind)})", kind


@_fn("array_concat", 2)
def _array_concat(a):
    arr, kind = array(a[0])
    return f"list_concat({arr}, {cast_to(a[1], kind)})", kind


def _set(arr: str) -> str:
    """Druid's sets are sorted, null first (list_distinct drops nulls: kept apart)."""
    has_null = f"list_position({arr}, NULL) > 0"
    sorted_ = f"list_sort(list_distinct({arr}))"
    return f"(CASE WHEN {has_null} THEN list_prepend(NULL, {sorted_}) ELSE {sorted_} END)"


@_fn("array_set_add", 2)
def _array_set_add(a):
    arr, kind = array(a[0])
    return _set(f"list_append({arr}, {_element(a[1], kind)})"), kind


@_fn("array_set_add_all", 2)
def _array_set_add_all(a):
    arr, kind = array(a[0])
    return _set(f"list_concat({arr}, {cast_to(a[1], kind)})"), kind


@_fn("array_slice", 2, 3)
def _array_slice(a):
    arr, kind = array(a[0])
    start = long(a[1])
    end = long(a[2]) if len(a) == 3 else f"len({arr})"
    return (
        f"(CASE WHEN {start} < 0 OR {start} > len({arr}) OR {end} < {start} THEN NULL "
        f"ELSE list_slice({arr}, {start} + 1, least({end}, len({arr}))) END)",
        kind,
    )


@_fn("array_to_string", 2)
def _array_to_string(a):
    arr, _ = array(a[0])
    strings = f"list_transform({arr}, lambda _e: coalesce(CAST(_e AS VARCHAR), 'null'))"
    return f"array_to_string({strings}, {text(a[1])})", "string"


@_fn("string_to_array", 2)
def _string_to_array(a):
    # Java's String.split: a regular expression, trailing empty strings dropped
    t = text(a[0])
    parts = f"string_split_regex({t}, {text(a[1])})"
    kept = (
        f"list_slice({parts}, 1, greatest(coalesce(list_last(list_filter("
        f"list_transform(range(1, len({parts}) + 1), lambda _i: "
        f"CASE WHEN {parts}[_i] <> '' THEN _i END), lambda _i: _i IS NOT NULL)), 0), 1))"
    )
    return f"(CASE WHEN {t} = '' THEN [''] ELSE {kept} END)", "array<string>"


FUNCTIONS.update(general(duckdb_types))
FUNCTIONS.update(TIME_FUNCTIONS)
FUNCTIONS.update(JSON_FUNCTIONS)
FUNCTIONS.update(
    from_templates("duckdb", {"text": text, "num": num, "long": long, "double": double})
)

__all__ = ["DUCK_TYPE", "FUNCTIONS"]
