"""Druid's expression functions (docs/querying/math-expr.md) as Spark SQL, those
the shared templates of `functions` do not cover.

Each entry takes the typed, emitted arguments (`Arg`) and returns (Spark SQL,
Druid result type). Druid's null semantics: a null argument gives null unless
the function says otherwise; a value that does not convert gives null (never a
Spark error, which would fail the whole task). Functions Druid documents but
Strata does not translate are in `REFUSED` with the reason, and are refused by
name when a spec uses them. docs/druid-expression-status.md lists them all.
"""

from __future__ import annotations

import ipaddress
import re

from metastore.druid.expressions import spark_types
from metastore.druid.expressions.functions import from_templates, general
from metastore.druid.expressions.spark_time import TIME_FUNCTIONS
from metastore.druid.expressions.spark_types import (
    ARRAYS,
    NUMERIC,
    Arg,
    ExpressionError,
    Function,
    array,
    as_long_bool,
    cast_to,
    double,
    element_kind,
    let,
    long,
    num,
    num_kind,
    sql_string,
    text,
    variant,
)
from metastore.druid.expressions.types import literal

FUNCTIONS: dict[str, Function] = {}


def _fn(name: str, lo: int, hi: int | None = -1):
    def register(emit):
        FUNCTIONS[name] = Function((lo, lo if hi == -1 else hi), emit)
        return emit

    return register


# --- general --------------------------------------------------------------------------


# --- strings --------------------------------------------------------------------------


def _string_fn(name: str, lo: int, hi: int | None, template: str, kind: str = "string"):
    """A function of text arguments: `{0}`, `{1}`... in the template."""

    def emit(a):
        return template.format(*[text(x) for x in a]), kind

    FUNCTIONS[name] = Function((lo, hi), emit)


# UTF-16 code units, as Java's String.length()
_string_fn("strlen", 1, 1, "(octet_length(encode({0}, 'UTF-16BE')) DIV 2)", "long")


@_fn("concat", 0, None)
def _concat(a):
    if not a:
        return "CAST(NULL AS STRING)", "string"
    # null if any argument is null (SQL semantics)
    return "concat(" + ", ".join(text(x) for x in a) + ")", "string"


@_fn("format", 1, None)
def _format(a):
    values = [x.sql if x.kind in NUMERIC else text(x) for x in a[1:]]
    return "format_string(" + ", ".join([text(a[0]), *values]) + ")", "string"


@_fn("parse_long", 1, 2)
def _parse_long(a):
    radix = int(literal(a[1], "the radix", "parse_long")) if len(a) == 2 else 10
    if not 2 <= radix <= 36:
        raise ExpressionError("parse_long(): the radix must be from 2 to 36")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"[:radix]
    t = text(a[0])
    # conv() reads a valid prefix; Java's Long.parseLong refuses the whole string
    valid = f"regexp_like({t}, '^[-+]?[{digits}]+$')"
    body = f"try_cast(conv(ltrim('+', ltrim('-', {t})), {radix}, 10) AS BIGINT)"
    sql = (
        f"(CASE WHEN NOT {valid.replace(t, f'lower({t})')} THEN NULL "
        f"WHEN startswith({t}, '-') THEN - {body} ELSE {body} END)"
    )
    return sql, "long"


@_fn("regexp_extract", 2, 3)
def _regexp_extract(a):
    index = long(a[2]) if len(a) == 3 else "0"
    t, p = text(a[0]), text(a[1])
    # Druid: null when there is no match (Spark gives '')
    return f"(CASE WHEN regexp_like({t}, {p}) THEN regexp_extract({t}, {p}, {index}) END)", (
        "string"
    )


@_fn("regexp_like", 2)
def _regexp_like(a):
    return as_long_bool(f"regexp_like({text(a[0])}, {text(a[1])})"), "long"


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
        f"(CASE WHEN {n} < 0 THEN substring({t}, {i} + 1) ELSE substring({t}, {i} + 1, {n}) END)",
        "string",
    )


@_fn("left", 2)
def _left(a):
    return f"left({text(a[0])}, {long(a[1])})", "string"


@_fn("right", 2)
def _right(a):
    return f"right({text(a[0])}, {long(a[1])})", "string"


@_fn("strpos", 2, 3)
def _strpos(a):
    start = f", {long(a[2])} + 1" if len(a) == 3 else ""
    return f"(locate({text(a[1])}, {text(a[0])}{start}) - 1)", "long"


def _trim(side: str):
    def emit(a):
        chars = text(a[1]) if len(a) == 2 else "' '"
        return f"trim({side} {chars} FROM {text(a[0])})", "string"

    return emit


for _name, _side in (("trim", "BOTH"), ("ltrim", "LEADING"), ("rtrim", "TRAILING")):
    FUNCTIONS[_name] = Function((1, 2), _trim(_side))


@_fn("repeat", 2)
def _repeat(a):
    return f"repeat({text(a[0])}, {long(a[1])})", "string"


@_fn("lpad", 3)
def _lpad(a):
    return f"lpad({text(a[0])}, {long(a[1])}, {text(a[2])})", "string"


@_fn("rpad", 3)
def _rpad(a):
    return f"rpad({text(a[0])}, {long(a[1])}, {text(a[2])})", "string"


# --- math -----------------------------------------------------------------------------


@_fn("abs", 1)
def _abs(a):
    return f"abs({num(a[0])})", num_kind(a[0])


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
        f"(CASE WHEN isnan({x}) OR abs({x}) = double('infinity') THEN 1024L "
        f"WHEN {x} = 0 THEN -1023L ELSE CAST(floor(log2(abs({x}))) AS BIGINT) END)",
        "long",
    )


@_fn("scalb", 2)
def _scalb(a):
    return f"({double(a[0])} * power(2, {long(a[1])}))", "double"


@_fn("remainder", 2)
def _remainder(a):
    x, y = double(a[0]), double(a[1])
    return f"({x} - {y} * rint({x} / {y}))", "double"


def _minmax(spark: str):
    def emit(a):
        kind = "long" if all(x.kind == "long" for x in a) else "double"
        x, y = (cast_to(v, kind) for v in a)
        return f"(CASE WHEN {x} IS NULL OR {y} IS NULL THEN NULL ELSE {spark}({x}, {y}) END)", kind

    return emit


FUNCTIONS["max"] = Function((2, 2), _minmax("greatest"))
FUNCTIONS["min"] = Function((2, 2), _minmax("least"))


@_fn("round", 1, 2)
def _round(a):
    places = long(a[1]) if len(a) == 2 else "0"
    if a[0].kind == "long":
        return f"round({a[0].sql}, {places})", "long"
    x = num(a[0])
    # Druid: NaN rounds to 0, infinities to the nearest finite double
    return (
        f"(CASE WHEN isnan({x}) THEN 0D WHEN {x} = double('infinity') THEN 1.7976931348623157E308D "
        f"WHEN {x} = double('-infinity') THEN -1.7976931348623157E308D "
        f"ELSE round({x}, {places}) END)",
        "double",
    )


@_fn("div", 2)
def _div(a):
    x, y = long(a[0]), long(a[1])
    return f"(CASE WHEN {y} = 0 THEN NULL ELSE {x} DIV {y} END)", "long"


@_fn("safe_divide", 2)
def _safe_divide(a):
    if a[0].kind == "long" and a[1].kind == "long":
        return f"(CASE WHEN {a[1].sql} = 0 THEN NULL ELSE {a[0].sql} DIV {a[1].sql} END)", "long"
    x, y = double(a[0]), double(a[1])
    return f"(CASE WHEN {y} = 0 THEN NULL ELSE {x} / {y} END)", "double"


def _reduce(spark: str):
    """greatest/least: nulls ignored; all longs compare as longs, numbers as
    doubles, and any text makes them all compare as text."""

    def emit(a):
        if not a:
            return "CAST(NULL AS STRING)", "string"
        kinds = {x.kind for x in a if x.sql != "NULL"}
        if kinds <= {"long"}:
            kind = "long"
        elif kinds <= set(NUMERIC):
            kind = "double"
        elif any(x.is_literal and x.kind == "string" for x in a):
            kind = "string"
        else:  # input columns are text here; Druid would read their numbers as numbers
            kind = "double"
        if len(a) == 1:
            return cast_to(a[0], kind), kind
        return f"{spark}(" + ", ".join(cast_to(x, kind) for x in a) + ")", kind

    return Function((0, None), emit)


FUNCTIONS["greatest"] = _reduce("greatest")
FUNCTIONS["least"] = _reduce("least")


# --- arrays ---------------------------------------------------------------------------


@_fn("array", 1, None)
def _array(a):
    first = a[0].kind if a[0].kind in ("long", "double", "string") else "string"
    return "array(" + ", ".join(cast_to(x, first) for x in a) + ")", f"array<{first}>"


@_fn("array_length", 1)
def _array_length(a):
    arr, _ = array(a[0])
    return f"CAST(size({arr}) AS BIGINT)", "long"


@_fn("array_offset", 2)
def _array_offset(a):
    arr, kind = array(a[0])
    return f"get({arr}, CAST({long(a[1])} AS INT))", element_kind(kind)


@_fn("array_ordinal", 2)
def _array_ordinal(a):
    arr, kind = array(a[0])
    return f"get({arr}, CAST({long(a[1])} - 1 AS INT))", element_kind(kind)


def _element(value: Arg, array_kind: str) -> str:
    return cast_to(value, element_kind(array_kind))


@_fn("array_contains", 2)
def _array_contains(a):
    arr, kind = array(a[0])
    if a[1].kind in ARRAYS:
        wanted = cast_to(a[1], kind)
        cond = f"forall({wanted}, _w -> exists({arr}, _e -> _e <=> _w))"
    else:
        cond = f"exists({arr}, _e -> _e <=> {_element(a[1], kind)})"
    return as_long_bool(cond), "long"


@_fn("array_overlap", 2)
def _array_overlap(a):
    arr, kind = array(a[0])
    other = cast_to(a[1], kind)
    return as_long_bool(f"exists({arr}, _e -> exists({other}, _o -> _o <=> _e))"), "long"


@_fn("scalar_in_array", 2)
def _scalar_in_array(a):
    arr, kind = array(a[1])
    x = _element(a[0], kind)
    return (
        f"(CASE WHEN {x} IS NULL THEN NULL ELSE {as_long_bool(f'array_contains({arr}, {x})')} END)",
        "long",
    )


def _position(shift: int):
    def emit(a):
        arr, kind = array(a[0])
        pos = f"array_position({arr}, {_element(a[1], kind)})"
        return f"(CASE WHEN {pos} > 0 THEN {pos} - {shift} END)", "long"

    return Function((2, 2), emit)


FUNCTIONS["array_offset_of"] = _position(1)
FUNCTIONS["array_ordinal_of"] = _position(0)


@_fn("array_prepend", 2)
def _array_prepend(a):
    arr, kind = array(a[1])
    return f"array_prepend({arr}, {_element(a[0], kind)})", kind


@_fn("array_append", 2)
def _array_append(a):
    arr, kind = array(a[0])
    return f"array_append({arr}, {_element(a[1], kind)})", kind


@_fn("array_concat", 2)
def _array_concat(a):
    arr, kind = array(a[0])
    return f"concat({arr}, {cast_to(a[1], kind)})", kind


@_fn("array_set_add", 2)
def _array_set_add(a):
    arr, kind = array(a[0])
    # Druid's sets are sorted, null first
    return f"sort_array(array_distinct(array_append({arr}, {_element(a[1], kind)})), true)", kind


@_fn("array_set_add_all", 2)
def _array_set_add_all(a):
    arr, kind = array(a[0])
    return f"sort_array(array_distinct(concat({arr}, {cast_to(a[1], kind)})), true)", kind


@_fn("array_slice", 2, 3)
def _array_slice(a):
    arr, kind = array(a[0])
    start = long(a[1])
    end = long(a[2]) if len(a) == 3 else f"size({arr})"
    return (
        f"(CASE WHEN {start} < 0 OR {start} > size({arr}) OR {end} < {start} THEN NULL "
        f"ELSE slice({arr}, CAST({start} + 1 AS INT), CAST(least({end}, size({arr})) - {start} AS INT)) END)",
        kind,
    )


@_fn("array_to_string", 2)
def _array_to_string(a):
    arr, kind = array(a[0])
    strings = arr if kind in ("array<string>", "array<json>") else f"CAST({arr} AS ARRAY<STRING>)"
    return f"array_join({strings}, {text(a[1])}, 'null')", "string"


@_fn("string_to_array", 2)
def _string_to_array(a):
    # Java's String.split: a regular expression, trailing empty strings dropped
    parts = f"split({text(a[0])}, {text(a[1])}, -1)"
    last = (
        f"aggregate(sequence(1, size({parts})), 0, (_n, _i) -> "
        f"CASE WHEN element_at({parts}, _i) <> '' THEN _i ELSE _n END)"
    )
    return (
        f"(CASE WHEN {text(a[0])} = '' THEN array('') ELSE slice({parts}, 1, greatest({last}, 1)) END)",
        "array<string>",
    )


# --- JSON (COMPLEX<json> values are JSON text here, as json columns are stored) ----------


_JSON_PATH = re.compile(r"^\$(?:\.[A-Za-z_$][\w$-]*|\[\d+\]|\['[^']*'\]|\[\"[^\"]*\"\])*$")


def _path(arg: Arg, name: str) -> str:
    path = literal(arg, "the JSONPath", name)
    if not isinstance(path, str) or not _JSON_PATH.match(path):
        raise ExpressionError(
            f"{name}(): JSONPath {path!r} is not supported; Druid's subset is $, .name, "
            "['name'] and [index]"
        )
    return sql_string(path)


def _at(a: list[Arg], name: str) -> str:
    """The VARIANT at the path (null when absent)."""
    return f"try_variant_get({variant(a[0])}, {_path(a[1], name)})"


_JSON_VALUE_TYPES = {
    "LONG": ("bigint", "long"),
    "DOUBLE": ("double", "double"),
    "FLOAT": ("double", "double"),
    "STRING": ("string", "string"),
    "ARRAY<LONG>": ("array<bigint>", "array<long>"),
    "ARRAY<DOUBLE>": ("array<double>", "array<double>"),
    "ARRAY<STRING>": ("array<string>", "array<string>"),
}


@_fn("json_value", 2, 3)
def _json_value(a):
    at = _at(a, "json_value")
    if len(a) == 3:
        name = str(literal(a[2], "the type", "json_value")).upper().replace(" ", "")
        if name not in _JSON_VALUE_TYPES:
            raise ExpressionError(
                f"json_value(): type {name!r} is not supported; accepted: "
                + ", ".join(_JSON_VALUE_TYPES)
            )
        spark, kind = _JSON_VALUE_TYPES[name]
        if kind == "long":  # booleans are longs (1/0) in Druid
            return f"try_variant_get({at}, '$', 'bigint')", kind
        return f"try_variant_get({at}, '$', '{spark}')", kind

    # A scalar (JSON null or absent: SQL NULL; an object: NULL), as text;
    # booleans are Druid longs 1/0; an array of scalars is its JSON text.
    def scalar(v: str) -> str:
        schema = f"schema_of_variant({v})"
        return (
            f"CASE WHEN startswith({schema}, 'OBJECT') THEN NULL "
            f"WHEN {schema} = 'BOOLEAN' "
            f"THEN CAST(CAST(try_variant_get({v}, '$', 'boolean') AS INT) AS STRING) "
            f"WHEN startswith({schema}, 'ARRAY') THEN nullif(to_json({v}), 'null') "
            f"ELSE try_variant_get({v}, '$', 'string') END"
        )

    return let(at, scalar), "string"


@_fn("json_query", 2)
def _json_query(a):
    return f"nullif(to_json({_at(a, 'json_query')}), 'null')", "json"


@_fn("json_query_array", 2)
def _json_query_array(a):
    def elements(v: str) -> str:
        return (
            f"CASE WHEN startswith(schema_of_variant({v}), 'ARRAY') "
            f"THEN transform(try_variant_get({v}, '$', 'array<variant>'), "
            f"_e -> nullif(to_json(_e), 'null')) "
            f"WHEN {v} IS NULL OR is_variant_null({v}) THEN NULL ELSE array(to_json({v})) END"
        )

    return let(_at(a, "json_query_array"), elements), "array<json>"


@_fn("json_object", 0, None)
def _json_object(a):
    if len(a) % 2:
        raise ExpressionError("json_object() takes key and value arguments in pairs")
    fields = []
    for key, value in zip(a[0::2], a[1::2], strict=True):
        name = literal(key, "each key", "json_object")
        if value.kind == "json" or value.kind == "complex":
            sql = variant(value)
        elif value.sql == "NULL":
            sql = "CAST(NULL AS STRING)"
        else:
            sql = value.sql
        fields.append(f"{sql_string(str(name))}, {sql}")
    if not fields:
        return "'{}'", "json"
    return (
        f"to_json(named_struct({', '.join(fields)}), map('ignoreNullFields', 'false'))",
        "json",
    )


@_fn("parse_json", 1)
def _parse_json(a):
    # Druid fails the row on invalid JSON; here it is null (see the status doc)
    return f"to_json(try_parse_json({text(a[0])}))", "json"


@_fn("try_parse_json", 1)
def _try_parse_json(a):
    return f"to_json(try_parse_json({text(a[0])}))", "json"


@_fn("to_json_string", 1)
def _to_json_string(a):
    if a[0].kind in NUMERIC:
        return f"CAST({a[0].sql} AS STRING)", "string"
    return f"to_json({variant(a[0])})", "string"


@_fn("json_keys", 2)
def _json_keys(a):
    at = _at(a, "json_keys")
    return f"json_object_keys(to_json({at}))", "array<string>"


# --- IPv4 (addresses as dotted text or as longs) ----------------------------------------


_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED = sql_string(rf"^{_OCTET}(\.{_OCTET}){{3}}$")


def _ipv4_long(arg: Arg) -> str:
    """The address as a long, or null when it is no IPv4 address. Digits-only
    text is a long (a JSON number arrives here as text)."""
    if arg.kind in NUMERIC:
        x = long(arg)
        return f"(CASE WHEN {x} BETWEEN 0 AND 4294967295 THEN {x} END)"
    t = text(arg)
    as_long = f"try_cast({t} AS BIGINT)"
    octets = f"aggregate(split({t}, '[.]'), 0L, (_a, _o) -> _a * 256 + CAST(_o AS BIGINT))"
    return (
        f"(CASE WHEN regexp_like({t}, {_DOTTED}) THEN {octets} "
        f"WHEN {as_long} BETWEEN 0 AND 4294967295 THEN {as_long} END)"
    )


@_fn("ipv4_parse", 1)
def _ipv4_parse(a):
    return _ipv4_long(a[0]), "long"


@_fn("ipv4_stringify", 1)
def _ipv4_stringify(a):
    def dotted(x: str) -> str:
        parts = ", ".join(f"CAST(shiftright({x}, {b}) & 255 AS STRING)" for b in (24, 16, 8, 0))
        return f"CASE WHEN {x} IS NOT NULL THEN concat_ws('.', {parts}) END"

    return let(_ipv4_long(a[0]), dotted), "string"


@_fn("ipv4_match", 2)
def _ipv4_match(a):
    subnet = literal(a[1], "the subnet", "ipv4_match")
    try:
        network = ipaddress.IPv4Network(str(subnet), strict=False)
    except ValueError:
        raise ExpressionError(f"ipv4_match(): {subnet!r} is not an IPv4 subnet") from None
    mask, base = int(network.netmask), int(network.network_address)
    x = _ipv4_long(a[0])
    return f"CAST(coalesce(({x} & {mask}L) = {base}L, false) AS BIGINT)", "long"


# --- human-readable sizes -----------------------------------------------------------------


def _human(base: int, units: tuple[str, ...], small: str):
    """`value` scaled to the largest unit it reaches, with `precision` (0-3, default
    2) decimals: human_readable_binary_byte_format(1048576) is '1.00 MiB'."""

    def emit(a):
        precision = int(literal(a[1], "the precision", "human_readable")) if len(a) == 2 else 2
        if not 0 <= precision <= 3:
            raise ExpressionError("human_readable_*(): the precision must be from 0 to 3")
        x = long(a[0])
        scale = " ".join(
            f"WHEN abs({x}) >= {base**e}L THEN format_string('%.{precision}f {unit}', {x} / {base**e}D)"
            for e, unit in reversed(list(enumerate(units, start=1)))
        )
        return f"(CASE WHEN {x} IS NULL THEN NULL {scale} ELSE concat({x}, '{small}') END)", (
            "string"
        )

    return Function((1, 2), emit)


FUNCTIONS["human_readable_binary_byte_format"] = _human(
    1024, ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"), " B"
)
FUNCTIONS["human_readable_decimal_byte_format"] = _human(
    1000, ("KB", "MB", "GB", "TB", "PB", "EB"), " B"
)
FUNCTIONS["human_readable_decimal_format"] = _human(1000, ("K", "M", "G", "T", "P", "E"), "")


FUNCTIONS.update(general(spark_types))
FUNCTIONS.update(TIME_FUNCTIONS)
FUNCTIONS.update(
    from_templates("spark", {"text": text, "num": num, "long": long, "double": double})
)


# --- refused, with the reason ---------------------------------------------------------


REFUSED: dict[str, str] = {
    "bloom_filter_test": "needs the druid-bloom-filter extension's serialized filters",
    "lookup": "query-time lookups are not loaded at ingestion here",
    "json_paths": "has no Spark SQL equivalent (a recursive walk of the JSON)",
    "json_merge": "has no Spark SQL equivalent (a deep merge of JSON objects)",
    "bitwiseconvertdoubletolongbits": "Spark SQL cannot read a double's IEEE 754 bits",
    "bitwiseconvertlongbitstodouble": "Spark SQL cannot build a double from IEEE 754 bits",
    "nextafter": "Spark SQL has no nextAfter",
    "nextup": "Spark SQL has no nextUp",
    "ulp": "Spark SQL has no ulp",
    "ipv6_match": "Spark SQL has no 128-bit integers to mask an IPv6 address with",
}
