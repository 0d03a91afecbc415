"""Druid's JSON functions written once over a dialect: what they accept (Druid's
JSONPath subset, json_value's types, json_object's pairs) is checked here, how
an engine reaches into JSON is its dialect's (`json_*` methods). COMPLEX<json>
values are JSON text, as Strata stores json columns. Pure."""

from __future__ import annotations

import re

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.types import NUMERIC, Arg, ExpressionError, literal, named_type

_JSON_PATH = re.compile(r"^\$(?:\.[A-Za-z_$][\w$-]*|\[\d+\]|\['[^']*'\]|\[\"[^\"]*\"\])*$")


def path(arg: Arg, name: str) -> str:
    """A JSONPath argument, checked against Druid's subset."""
    value = literal(arg, "the JSONPath", name)
    if isinstance(value, str) and value.endswith(".") and len(value) > 1:
        value = value[:-1]  # Druid's parseJsonPath reads a trailing '.' as nothing: '$.' is '$'
    if not isinstance(value, str) or not _JSON_PATH.match(value):
        raise ExpressionError(
            f"{name}(): JSONPath {value!r} is not supported; Druid's subset is $, .name, "
            "['name'] and [index]"
        )
    return value


def value_kind(a: list[Arg]) -> str:
    """json_value's result: the type asked for, else text."""
    if len(a) < 3:
        return "string"
    return named_type(a[2], "json_value", "json_value(): type {} is not supported")


def json_value(d: Dialect, a: list[Arg]) -> str:
    at = path(a[1], "json_value")
    if len(a) == 3:  # booleans are longs (1/0) in Druid
        return d.json_typed(a[0], at, value_kind(a))
    # A scalar as text (JSON null or absent: NULL; an object: NULL); booleans are
    # Druid longs 1/0; an array is its JSON text.
    return d.json_scalar(a[0], at)


def json_query(d: Dialect, a: list[Arg]) -> str:
    return f"nullif({d.json_extract(a[0], path(a[1], 'json_query'))}, 'null')"


def json_query_array(d: Dialect, a: list[Arg]) -> str:
    return d.json_array(a[0], path(a[1], "json_query_array"))


def json_keys(d: Dialect, a: list[Arg]) -> str:
    return d.json_keys(a[0], path(a[1], "json_keys"))


def json_object(d: Dialect, a: list[Arg]) -> str:
    if len(a) % 2:
        raise ExpressionError("json_object() takes key and value arguments in pairs")
    keys = [literal(k, "each key", "json_object") for k in a[0::2]]
    if None in keys:
        raise ExpressionError("json_object(): a key must not be null")
    keys = [d.sql_string(str(k)) for k in keys]
    return d.json_object(keys, a[1::2])


def parse_json(d: Dialect, a: list[str]) -> str:
    # Druid fails the row on invalid JSON; here it is null (see the status doc)
    return d.sql("parse_json", a[0])


def to_json_string(d: Dialect, a: list[Arg]) -> str:
    if a[0].kind in NUMERIC:
        return d.cast(a[0].sql, "string")
    return d.json_text(a[0])
