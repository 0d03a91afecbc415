"""Druid's array functions written once over a dialect (bodies as in `strings`).
An argument that is not an array is read as one (`Dialect.array`); the type of
an array argument follows from its Druid type alone (`array_kind`). Pure."""

from __future__ import annotations

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.types import ARRAYS, NUMERIC, Arg, element_kind, scalar_kind


def array_kind(arg: Arg) -> str:
    """The Druid array type `Dialect.array` reads an argument as."""
    if arg.kind in ARRAYS:
        return arg.kind
    if arg.kind in NUMERIC:
        return f"array<{arg.kind}>"
    return "array<string>"


def first_kind(a: list[Arg]) -> str:
    return array_kind(a[0])


def second_kind(a: list[Arg]) -> str:
    return array_kind(a[1])


def element_of_first(a: list[Arg]) -> str:
    return element_kind(array_kind(a[0]))


def array_literal_kind(a: list[Arg]) -> str:
    return f"array<{scalar_kind(a[0].kind)}>"


def array(d: Dialect, a: list[Arg]) -> str:
    first = scalar_kind(a[0].kind)
    return d.sql("array", ", ".join(d.cast_to(x, first) for x in a))


def _element(d: Dialect, value: Arg, kind: str) -> str:
    return d.cast_to(value, element_kind(kind))


def length(d: Dialect, a: list[Arg]) -> str:
    return f"CAST({d.sql('size', d.array(a[0])[0])} AS BIGINT)"


def offset(d: Dialect, a: list[Arg]) -> str:
    return d.sql("offset", d.array(a[0])[0], d.long(a[1]))


def ordinal(d: Dialect, a: list[Arg]) -> str:
    return d.sql("offset", d.array(a[0])[0], f"{d.long(a[1])} - 1")


def contains(d: Dialect, a: list[Arg]) -> str:
    arr, kind = d.array(a[0])
    if a[1].kind in ARRAYS:
        return d.as_long_bool(d.sql("has_all", arr, d.cast_to(a[1], kind)))
    return d.as_long_bool(d.sql("has", arr, _element(d, a[1], kind)))


def overlap(d: Dialect, a: list[Arg]) -> str:
    arr, kind = d.array(a[0])
    return d.as_long_bool(d.sql("has_any", arr, d.cast_to(a[1], kind)))


def scalar_in_array(d: Dialect, a: list[Arg]) -> str:
    arr, kind = d.array(a[1])
    x = _element(d, a[0], kind)
    return f"(CASE WHEN {x} IS NULL THEN NULL ELSE {d.as_long_bool(d.sql('contains', arr, x))} END)"


def position(shift: int):
    def emit(d: Dialect, a: list[Arg]) -> str:
        arr, kind = d.array(a[0])
        pos = d.sql("position", arr, _element(d, a[1], kind))
        return f"(CASE WHEN {pos} > 0 THEN {pos} - {shift} END)"

    return emit


def _unless_null(arrays: list[str], sql: str) -> str:
    """Druid's array functions give null for a null array (DuckDB's list functions
    would take it as empty)."""
    test = " OR ".join(f"{a} IS NULL" for a in arrays)
    return f"(CASE WHEN {test} THEN NULL ELSE {sql} END)"


def prepend(d: Dialect, a: list[Arg]) -> str:
    arr, kind = d.array(a[1])
    return _unless_null([arr], d.sql("prepend", arr, _element(d, a[0], kind)))


def append(d: Dialect, a: list[Arg]) -> str:
    arr, kind = d.array(a[0])
    return _unless_null([arr], d.sql("append", arr, _element(d, a[1], kind)))


def concat(d: Dialect, a: list[Arg]) -> str:
    arr, kind = d.array(a[0])
    other = d.cast_to(a[1], kind)
    return _unless_null([arr, other], d.sql("concat_arrays", arr, other))


def set_add(d: Dialect, a: list[Arg]) -> str:
    return d.sql("as_set", append(d, a))  # Druid's sets are sorted, null first


def set_add_all(d: Dialect, a: list[Arg]) -> str:
    return d.sql("as_set", concat(d, a))


def slice_(d: Dialect, a: list[Arg]) -> str:
    arr, _ = d.array(a[0])
    start, size = d.long(a[1]), d.sql("size", arr)
    end = d.long(a[2]) if len(a) == 3 else size
    return (
        f"(CASE WHEN {start} < 0 OR {start} > {size} OR {end} < {start} THEN NULL "
        f"ELSE {d.sql('slice', arr, start, end)} END)"
    )


def to_string(d: Dialect, a: list[Arg]) -> str:
    """Druid joins with '' where the separator is null."""
    arr, kind = d.array(a[0])
    sep = a[1]
    if sep.is_literal:
        text = "''" if sep.literal is None else d.text(sep)
        return d.join_array(arr, kind, text)
    return d.join_array(arr, kind, f"coalesce({d.text(sep)}, '')", constant=False)


def string_to_array(d: Dialect, a: list[str]) -> str:
    # Java's String.split: a regular expression, trailing empty strings dropped; Druid
    # splits by '' (into characters) where the pattern is null
    return d.split(a[0], f"coalesce({a[1]}, '')")
