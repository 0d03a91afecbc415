"""Typed DuckDB SQL fragments: the coercions the DuckDB emitter and its functions
use to give a value the form a function needs, with Druid's null semantics (a
value that does not convert is null, never an error). The counterpart of
`spark_types`. Pure: no Spark or Django import.
"""

from __future__ import annotations

from metastore.druid.expressions.types import ARRAYS, NUMERIC, Arg, ExpressionError, element_kind

DUCK_TYPE = {
    "long": "BIGINT",
    "double": "DOUBLE",
    "string": "VARCHAR",
    "json": "VARCHAR",
    "array<long>": "BIGINT[]",
    "array<double>": "DOUBLE[]",
    "array<string>": "VARCHAR[]",
    "array<json>": "VARCHAR[]",
}


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def text(arg: Arg) -> str:
    """The value as Druid shows it as a string (JSON text for arrays and nested values)."""
    if arg.kind in ("string", "json"):
        return arg.sql
    if arg.kind in ARRAYS:
        return f"CAST(to_json({arg.sql}) AS VARCHAR)"
    return f"CAST({arg.sql} AS VARCHAR)"


def num(arg: Arg) -> str:
    """A number (long or double as they are; text parsed as a double, else null)."""
    if arg.kind in NUMERIC:
        return arg.sql
    return f"TRY_CAST(trim({text(arg)}) AS DOUBLE)"


def long(arg: Arg) -> str:
    """A long: doubles truncate (Java's cast; DuckDB's would round); text as a long,
    else as a double truncated."""
    if arg.kind == "long":
        return arg.sql
    if arg.kind == "double":
        return f"TRY_CAST(trunc({arg.sql}) AS BIGINT)"
    t = f"trim({text(arg)})"
    return (
        f"(CASE WHEN regexp_matches({t}, '^[-+]?[0-9]+$') THEN TRY_CAST({t} AS BIGINT) "
        f"ELSE TRY_CAST(trunc(TRY_CAST({t} AS DOUBLE)) AS BIGINT) END)"
    )


def double(arg: Arg) -> str:
    if arg.kind in NUMERIC:
        return f"CAST({arg.sql} AS DOUBLE)"
    return num(arg)


def truth(arg: Arg) -> str:
    """Druid truthiness as a boolean, null when the value is null: a number is true
    when positive, text when it is 'true' (any case) or reads as a positive number."""
    if arg.kind in NUMERIC:
        return f"({arg.sql} > 0)"
    t = text(arg)
    return (
        f"(CASE WHEN {t} IS NULL THEN NULL ELSE "
        f"(lower(trim({t})) = 'true' OR coalesce(TRY_CAST(trim({t}) AS DOUBLE) > 0, false)) END)"
    )


def as_long_bool(cond: str) -> str:
    """A boolean as Druid's 1/0 long (null stays null)."""
    return f"CAST({cond} AS BIGINT)"


def array(arg: Arg) -> tuple[str, str]:
    """(DuckDB list, Druid array type). Text holding a JSON array is parsed; any
    other scalar is a one-element array, as Druid treats a scalar where it wants
    an array."""
    if arg.kind in ARRAYS:
        return arg.sql, arg.kind
    if arg.kind in NUMERIC:
        return f"(CASE WHEN {arg.sql} IS NULL THEN NULL ELSE [{arg.sql}] END)", f"array<{arg.kind}>"
    t = text(arg)
    return (
        f"(CASE WHEN {t} IS NULL THEN NULL WHEN starts_with(ltrim({t}), '[') "
        f"THEN try(from_json({t}, '[\"VARCHAR\"]')) ELSE [{t}] END)",
        "array<string>",
    )


def cast_to(arg: Arg, kind: str) -> str:
    """The argument converted to a Druid type (null when it does not convert)."""
    if arg.sql == "NULL":
        return f"CAST(NULL AS {DUCK_TYPE.get(kind, 'VARCHAR')})"
    if kind == "long":
        return long(arg)
    if kind == "double":
        return double(arg)
    if kind in ("string", "json"):
        return text(arg)
    if kind in ARRAYS:
        sql, have = array(arg)
        if have == kind:
            return sql
        inner = cast_to(Arg("_e", element_kind(have)), element_kind(kind))
        return f"list_transform({sql}, lambda _e: {inner})"
    raise ExpressionError(f"cannot convert to {kind}")
