"""Druid's JSON, IPv4 and human-readable-size functions as DuckDB SQL (the
counterparts of those in `spark_functions`; COMPLEX<json> values are JSON text,
as Strata stores json columns). Pure: no Spark or Django import."""

from __future__ import annotations

import ipaddress
import re

from metastore.druid.expressions.duckdb_types import long, sql_string, text
from metastore.druid.expressions.types import (
    ARRAYS,
    NUMERIC,
    Arg,
    ExpressionError,
    Function,
    literal,
)

FUNCTIONS: dict[str, Function] = {}


def _fn(name: str, lo: int, hi: int | None = -1):
    def register(emit):
        FUNCTIONS[name] = Function((lo, lo if hi == -1 else hi), emit)
        return emit

    return register


_JSON_PATH = re.compile(r"^\$(?:\.[A-Za-z_$][\w$-]*|\[\d+\]|\['[^']*'\]|\[\"[^\"]*\"\])*$")


def _path(arg: Arg, name: str) -> str:
    """Druid's JSONPath subset as DuckDB's path (`['name']` as `."name"`)."""
    path = literal(arg, "the JSONPath", name)
    if not isinstance(path, str) or not _JSON_PATH.match(path):
        raise ExpressionError(
            f"{name}(): JSONPath {path!r} is not supported; Druid's subset is $, .name, "
            "['name'] and [index]"
        )
    return sql_string(re.sub(r"\[['\"]([^'\"]*)['\"]\]", r'."\1"', path))


def _json(arg: Arg) -> str:
    """The value as JSON text: text that is not JSON is a JSON string, as a plain
    string column is in Druid."""
    if arg.kind == "json":
        return arg.sql
    if arg.kind in NUMERIC or arg.kind in ARRAYS:
        return f"CAST(to_json({arg.sql}) AS VARCHAR)"
    t = text(arg)
    return f"(CASE WHEN json_valid({t}) THEN {t} ELSE CAST(to_json({t}) AS VARCHAR) END)"


_JSON_VALUE_TYPES = {
    "LONG": ("BIGINT", "long"),
    "DOUBLE": ("DOUBLE", "double"),
    "FLOAT": ("DOUBLE", "double"),
    "STRING": ("VARCHAR", "string"),
    "ARRAY<LONG>": ("BIGINT[]", "array<long>"),
    "ARRAY<DOUBLE>": ("DOUBLE[]", "array<double>"),
    "ARRAY<STRING>": ("VARCHAR[]", "array<string>"),
}


def _typed_value(j: str, p: str, type_arg: Arg) -> tuple[str, str]:
    name = str(literal(type_arg, "the type", "json_value")).upper().replace(" ", "")
    if name not in _JSON_VALUE_TYPES:
        raise ExpressionError(
            f"json_value(): type {name!r} is not supported; accepted: "
            + ", ".join(_JSON_VALUE_TYPES)
        )
    duck, kind = _JSON_VALUE_TYPES[name]
    if kind in ARRAYS:
        return f"TRY_CAST(json_extract({j}, {p}) AS {duck})", kind
    value = f"json_extract_string({j}, {p})"
    if kind == "long":  # booleans are longs (1/0) in Druid
        boolean = f"CAST(TRY_CAST({value} AS BOOLEAN) AS BIGINT)"
        return (
            f"(CASE WHEN json_type({j}, {p}) = 'BOOLEAN' THEN {boolean} ELSE TRY_CAST({value} AS BIGINT) END)",
            kind,
        )
    return f"TRY_CAST({value} AS {duck})", kind


@_fn("json_value", 2, 3)
def _json_value(a):
    j, p = _json(a[0]), _path(a[1], "json_value")
    if len(a) == 3:
        return _typed_value(j, p, a[2])
    kind = f"json_type({j}, {p})"
    # A scalar as text (JSON null or absent: NULL; an object: NULL); booleans are
    # Druid longs 1/0; an array is its JSON text.
    return (
        f"(CASE WHEN {kind} IS NULL OR {kind} IN ('NULL', 'OBJECT') THEN NULL "
        f"WHEN {kind} = 'BOOLEAN' THEN CAST(CAST(TRY_CAST(json_extract_string({j}, {p}) AS BOOLEAN) "
        f"AS INTEGER) AS VARCHAR) WHEN {kind} = 'ARRAY' THEN CAST(json_extract({j}, {p}) AS VARCHAR) "
        f"ELSE json_extract_string({j}, {p}) END)",
        "string",
    )


@_fn("json_query", 2)
def _json_query(a):
    j, p = _json(a[0]), _path(a[1], "json_query")
    return f"nullif(CAST(json_extract({j}, {p}) AS VARCHAR), 'null')", "json"


@_fn("json_query_array", 2)
def _json_query_array(a):
    j, p = _json(a[0]), _path(a[1], "json_query_array")
    at, kind = f"json_extract({j}, {p})", f"json_type({j}, {p})"
    return (
        f"(CASE WHEN {kind} = 'ARRAY' THEN list_transform(CAST({at} AS JSON[]), "
        f"lambda _e: nullif(CAST(_e AS VARCHAR), 'null')) "
        f"WHEN {kind} IS NULL OR {kind} = 'NULL' THEN NULL ELSE [CAST({at} AS VARCHAR)] END)",
        "array<json>",
    )


@_fn("json_object", 0, None)
def _json_object(a):
    if len(a) % 2:
        raise ExpressionError("json_object() takes key and value arguments in pairs")
    fields = []
    for key, value in zip(a[0::2], a[1::2], strict=True):
        name = sql_string(str(literal(key, "each key", "json_object")))
        sql = f"json({value.sql})" if value.kind == "json" else value.sql
        fields.append(f"{name}, {sql}")
    return f"CAST(json_object({', '.join(fields)}) AS VARCHAR)", "json"


def _parse(a):
    # Druid fails the row on invalid JSON; here it is null (see the status doc)
    t = text(a[0])
    return f"(CASE WHEN json_valid({t}) THEN CAST(json({t}) AS VARCHAR) END)", "json"


FUNCTIONS.update(parse_json=Function((1, 1), _parse), try_parse_json=Function((1, 1), _parse))


@_fn("to_json_string", 1)
def _to_json_string(a):
    if a[0].kind in NUMERIC:
        return f"CAST({a[0].sql} AS VARCHAR)", "string"
    return f"CAST(json({_json(a[0])}) AS VARCHAR)", "string"


@_fn("json_keys", 2)
def _json_keys(a):
    j, p = _json(a[0]), _path(a[1], "json_keys")
    # sorted, as Spark lists them (its VARIANT keeps object keys sorted)
    return f"(CASE WHEN json_type({j}, {p}) = 'OBJECT' THEN list_sort(json_keys({j}, {p})) END)", (
        "array<string>"
    )


# --- IPv4 (addresses as dotted text or as longs) ----------------------------------------

_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED = sql_string(rf"^{_OCTET}(\.{_OCTET}){{3}}$")


def _ipv4_long(arg: Arg) -> str:
    """The address as a long, or null when it is no IPv4 address."""
    if arg.kind in NUMERIC:
        x = long(arg)
        return f"(CASE WHEN {x} BETWEEN 0 AND 4294967295 THEN {x} END)"
    t = text(arg)
    as_long = f"TRY_CAST({t} AS BIGINT)"
    octets = (
        f"list_reduce(list_transform(string_split({t}, '.'), lambda _o: CAST(_o AS BIGINT)), "
        "lambda _a, _o: _a * 256 + _o)"
    )
    return (
        f"(CASE WHEN regexp_matches({t}, {_DOTTED}) THEN {octets} "
        f"WHEN regexp_matches({t}, '^[0-9]+$') AND {as_long} BETWEEN 0 AND 4294967295 "
        f"THEN {as_long} END)"
    )


@_fn("ipv4_parse", 1)
def _ipv4_parse(a):
    return _ipv4_long(a[0]), "long"


@_fn("ipv4_stringify", 1)
def _ipv4_stringify(a):
    x = _ipv4_long(a[0])
    parts = ", ".join(f"CAST(({x} >> {b}) & 255 AS VARCHAR)" for b in (24, 16, 8, 0))
    return f"(CASE WHEN {x} IS NOT NULL THEN concat_ws('.', {parts}) END)", "string"


@_fn("ipv4_match", 2)
def _ipv4_match(a):
    subnet = literal(a[1], "the subnet", "ipv4_match")
    try:
        network = ipaddress.IPv4Network(str(subnet), strict=False)
    except ValueError:
        raise ExpressionError(f"ipv4_match(): {subnet!r} is not an IPv4 subnet") from None
    mask, base = int(network.netmask), int(network.network_address)
    x = _ipv4_long(a[0])
    return f"CAST(coalesce(({x} & {mask}) = {base}, false) AS BIGINT)", "long"


# --- human-readable sizes -----------------------------------------------------------------


def _human(base: int, units: tuple[str, ...], small: str):
    """`value` scaled to the largest unit it reaches, with `precision` (0-3, default 2)
    decimals: human_readable_binary_byte_format(1048576) is '1.00 MiB'."""

    def emit(a):
        precision = int(literal(a[1], "the precision", "human_readable")) if len(a) == 2 else 2
        if not 0 <= precision <= 3:
            raise ExpressionError("human_readable_*(): the precision must be from 0 to 3")
        x = long(a[0])
        scale = " ".join(
            f"WHEN abs({x}) >= {base**e} THEN printf('%.{precision}f {unit}', {x} / {base**e}.0)"
            for e, unit in reversed(list(enumerate(units, start=1)))
        )
        return f"(CASE WHEN {x} IS NULL THEN NULL {scale} ELSE {x} || '{small}' END)", "string"

    return Function((1, 2), emit)


FUNCTIONS["human_readable_binary_byte_format"] = _human(
    1024, ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"), " B"
)
FUNCTIONS["human_readable_decimal_byte_format"] = _human(
    1000, ("KB", "MB", "GB", "TB", "PB", "EB"), " B"
)
FUNCTIONS["human_readable_decimal_format"] = _human(1000, ("K", "M", "G", "T", "P", "E"), "")
