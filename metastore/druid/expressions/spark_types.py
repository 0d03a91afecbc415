"""Typed Spark SQL fragments for the Druid expression translator (Spark SQL).

An `Arg` is an emitted argument: its Spark SQL text, its Druid type (`long`,
`double`, `string`, `json` — JSON text —, `array<long>`, `array<double>`,
`array<string>`, `array<json>`, `complex` — a Spark struct/map/array read
from the input — or `any`), and the literal value when the argument is a
literal. The coercions below turn an Arg into the form a function needs, with
Druid's null semantics: a value that does not convert is null, never an error
(Spark runs in ANSI mode, where a failed cast would fail the whole task).
Pure: no Spark or Django import.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from metastore.druid.expressions.types import (
    ARRAYS,
    NUMERIC,
    Arg,
    ExpressionError,
    Function,
    element_kind,
)

__all__ = ["ARRAYS", "NUMERIC", "SPARK_TYPE", "Arg", "ExpressionError", "Function"]

SPARK_TYPE = {
    "long": "BIGINT",
    "double": "DOUBLE",
    "string": "STRING",
    "json": "STRING",
    "array<long>": "ARRAY<BIGINT>",
    "array<double>": "ARRAY<DOUBLE>",
    "array<string>": "ARRAY<STRING>",
    "array<json>": "ARRAY<STRING>",
}


_names = itertools.count()


def let(value: str, body: Callable[[str], str]) -> str:
    """`body` over `value` evaluated once: a lambda binds it, so an expression
    that uses a value several times does not copy its tree (nested JSON calls
    would grow the plan exponentially)."""
    name = f"_v{next(_names)}"
    return f"element_at(transform(array({value}), {name} -> {body(name)}), 1)"


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def text(arg: Arg) -> str:
    """The value as Druid shows it as a string (JSON text for json, complex and arrays)."""
    if arg.kind in ("string", "json"):
        return arg.sql
    if arg.kind == "complex" or arg.kind in ARRAYS:
        return f"to_json({arg.sql})"
    return f"CAST({arg.sql} AS STRING)"


def num(arg: Arg) -> str:
    """A number (long or double as they are; text parsed as a double, else null)."""
    if arg.kind in NUMERIC:
        return arg.sql
    return f"try_cast(trim({text(arg)}) AS DOUBLE)"


def num_kind(arg: Arg) -> str:
    return arg.kind if arg.kind in NUMERIC else "double"


def long(arg: Arg) -> str:
    """A long: doubles truncate (Java's cast); text as a long, else as a double truncated."""
    if arg.kind == "long":
        return arg.sql
    if arg.kind == "double":
        return f"try_cast({arg.sql} AS BIGINT)"
    t = f"trim({text(arg)})"
    return f"coalesce(try_cast({t} AS BIGINT), try_cast(try_cast({t} AS DOUBLE) AS BIGINT))"


def double(arg: Arg) -> str:
    if arg.kind in NUMERIC:
        return f"CAST({arg.sql} AS DOUBLE)"
    return num(arg)


def truth(arg: Arg) -> str:
    """Druid truthiness as a Spark boolean, null when the value is null: a number
    is true when positive, text when it is 'true' (any case) — or, since JSON and
    CSV numbers arrive here as text, when it reads as a positive number."""
    if arg.kind in NUMERIC:
        return f"({arg.sql} > 0)"
    t = text(arg)
    return (
        f"(CASE WHEN {t} IS NULL THEN NULL ELSE "
        f"(lower(trim({t})) = 'true' OR coalesce(try_cast(trim({t}) AS DOUBLE) > 0, false)) END)"
    )


def as_long_bool(cond: str) -> str:
    """A Spark boolean as Druid's 1/0 long (null stays null)."""
    return f"CAST({cond} AS BIGINT)"


def array(arg: Arg) -> tuple[str, str]:
    """(Spark array, Druid array type). Text holding a JSON array (how a JSON
    input's array field is read) is parsed; any other scalar is a one-element
    array, as Druid treats a scalar where it wants an array."""
    if arg.kind in ARRAYS:
        return arg.sql, arg.kind
    if arg.kind in NUMERIC:
        return f"(CASE WHEN {arg.sql} IS NULL THEN NULL ELSE array({arg.sql}) END)", (
            f"array<{arg.kind}>"
        )
    if arg.kind == "complex":
        return f"from_json(to_json({arg.sql}), 'array<string>')", "array<string>"
    t = text(arg)
    return (
        f"(CASE WHEN {t} IS NULL THEN NULL WHEN startswith(ltrim({t}), '[') "
        f"THEN from_json({t}, 'array<string>') ELSE array({t}) END)",
        "array<string>",
    )


def variant(arg: Arg) -> str:
    """The value as a Spark VARIANT (for the JSON functions). Text that is not
    JSON is a JSON string, as a plain string column is in Druid."""
    if arg.kind == "json":
        return f"try_parse_json({arg.sql})"
    if arg.kind in NUMERIC:
        return f"try_parse_json(CAST({arg.sql} AS STRING))"
    if arg.kind == "complex" or arg.kind in ARRAYS:
        return f"try_parse_json(to_json({arg.sql}))"
    t = text(arg)
    return (
        f"coalesce(try_parse_json({t}), "
        f"try_variant_get(try_parse_json(to_json(array({t}))), '$[0]'))"
    )


def cast_to(arg: Arg, kind: str) -> str:
    """The argument converted to a Druid type (null when it does not convert)."""
    if arg.sql == "NULL":
        return f"CAST(NULL AS {SPARK_TYPE.get(kind, 'STRING')})"
    if kind == "long":
        return long(arg)
    if kind == "double":
        return double(arg)
    if kind in ("string", "json"):
        return text(arg)
    if kind in ARRAYS:
        sql, have = array(arg)
        elem = element_kind(kind)
        if have == kind:
            return sql
        inner = cast_to(Arg("_e", element_kind(have)), elem)
        return f"transform({sql}, _e -> {inner})"
    raise ExpressionError(f"cannot convert to {kind}")
