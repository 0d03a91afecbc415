"""Druid's extraction functions (`extractionFn` of a dimension spec or a filter,
docs/querying/dimensionspecs.md) and its filtered and lookup dimension specs.

Each extraction function is translated into a Druid expression over one input,
`__in`, so that the one expression grammar (`metastore.druid.expressions`) emits
it for DuckDB and for Spark SQL alike. An extraction function's value is always
a string (or null); the dimension spec's `outputType` converts it afterwards.

Druid's inputs: a string dimension as is, a number as its text, and `__time` as
epoch millis for `timeFormat` and `bucket` but as ISO-8601 text for the string
functions. Refused, naming the field: `javascript` (disabled by default in Druid
too) and `registeredLookup` (Strata has no registered lookups). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from metastore.druid.granularity import NAMED_PERIODS

INPUT = "__in"
ISO_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
_TEXT_LOCALE_LETTERS = re.compile(r"E|MMM|a")


class ExtractionError(ValueError):
    """An extraction function Strata refuses: `unsupported` (valid Druid, not
    implemented here) or invalid; `field` is the JSON path of the culprit."""

    def __init__(self, field: str, message: str, *, unsupported: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.unsupported = unsupported


def lit(value: str | None) -> str:
    """A Druid expression string literal (backslash escapes, as Expr.g4 reads them)."""
    if value is None:
        return "null"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def ident(name: str) -> str:
    """A Druid expression identifier (double-quoted, backslash escapes)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _obj(value, field: str) -> dict:
    if not isinstance(value, dict):
        raise ExtractionError(field, "must be a JSON object")
    return value


def _text(value, field: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ExtractionError(field, "must be a string")
    return value


def _integer(value, field: str, default: int | None = None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ExtractionError(field, "must be an integer")
    return value


def _number(value, field: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExtractionError(field, "must be a number")
    return value


def _flag(value, field: str, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ExtractionError(field, "must be true or false")
    return value


def _only(spec: dict, field: str, allowed: set[str]) -> None:
    extra = sorted(set(spec) - allowed - {"type"})
    if extra:
        raise ExtractionError(f"{field}.{extra[0]}", f"unknown field of a {spec['type']} function")


# --- input conversions ---------------------------------------------------------------------


def _as_text(x: str, kind: str) -> str:
    """The input as the string an extraction function sees."""
    if kind == "time":
        return f"timestamp_format({x})"
    if kind in ("long", "double", "float"):
        return f"cast({x}, 'STRING')"
    return x


def _as_millis(x: str, kind: str, as_millis: bool) -> str:
    if kind in ("time", "long"):
        return x
    if as_millis:
        return f"cast({x}, 'LONG')"
    return f"timestamp_parse({x})"


# --- the functions ---------------------------------------------------------------------------
# Each takes (spec, field, input expression, input kind) and gives an expression.


def _regex(spec, field, x, kind):
    _only(spec, field, {"expr", "index", "replaceMissingValue", "replaceMissingValueWith"})
    pattern = lit(_text(spec.get("expr"), f"{field}.expr"))
    index = _integer(spec.get("index"), f"{field}.index", 1)
    text = _as_text(x, kind)
    missing = text
    if _flag(spec.get("replaceMissingValue"), f"{field}.replaceMissingValue"):
        with_ = spec.get("replaceMissingValueWith") or None
        missing = lit(_text(with_, f"{field}.replaceMissingValueWith", optional=True))
    matched = f"regexp_extract({text}, {pattern}, {index})"
    return f"if(regexp_like({text}, {pattern}), {matched}, {missing})"


def _partial(spec, field, x, kind):
    _only(spec, field, {"expr"})
    text = _as_text(x, kind)
    return f"if(regexp_like({text}, {lit(_text(spec.get('expr'), f'{field}.expr'))}), {text}, null)"


def _search_condition(query: dict, field: str, text: str) -> str:
    kind = query.get("type")
    sensitive = _flag(query.get("caseSensitive"), f"{field}.caseSensitive")
    if kind in ("contains", "insensitive_contains"):
        value = lit(_text(query.get("value"), f"{field}.value"))
        exact = sensitive and kind == "contains"
        return f"{'contains_string' if exact else 'icontains_string'}({text}, {value})"
    if kind == "fragment":
        values = query.get("values")
        if not isinstance(values, list) or not values:
            raise ExtractionError(f"{field}.values", "must be a non-empty list of strings")
        fn = "contains_string" if sensitive else "icontains_string"
        parts = [f"{fn}({text}, {lit(_text(v, f'{field}.values'))})" for v in values]
        return "(" + " && ".join(parts) + ")"
    if kind == "regex":
        return f"regexp_like({text}, {lit(_text(query.get('pattern'), f'{field}.pattern'))})"
    raise ExtractionError(
        f"{field}.type", "must be contains, insensitive_contains, fragment or regex"
    )


def _search_query(spec, field, x, kind):
    _only(spec, field, {"query"})
    text = _as_text(x, kind)
    condition = _search_condition(_obj(spec.get("query"), f"{field}.query"), f"{field}.query", text)
    return f"if(isnull({text}), null, if({condition}, {text}, null))"


def _substring(spec, field, x, kind):
    _only(spec, field, {"index", "length"})
    index = _integer(spec.get("index"), f"{field}.index")
    if index is None or index < 0:
        raise ExtractionError(f"{field}.index", "must be an integer of 0 or more")
    length = _integer(spec.get("length"), f"{field}.length", -1)
    if length is not None and length < -1:
        raise ExtractionError(f"{field}.length", "must be 0 or more")
    text = _as_text(x, kind)
    # Java's substring: null past the end, an empty input is null
    return f"if(nvl(strlen({text}), 0) > {index}, substring({text}, {index}, {length}), null)"


def _strlen(spec, field, x, kind):
    _only(spec, field, set())
    return f"cast(nvl(strlen({_as_text(x, kind)}), 0), 'STRING')"


def _case(spec, field, x, kind):
    _only(spec, field, {"locale"})
    _locale(spec.get("locale"), f"{field}.locale", "upper and lower case")
    return f"{spec['type']}({_as_text(x, kind)})"


def _locale(value, field: str, what: str) -> None:
    if value is None:
        return
    name = _text(value, field).lower()
    if not (name.startswith("en") or name in ("", "root", "und")):
        raise ExtractionError(field, f"{what} in locale {value!r} (only English)", unsupported=True)


def _granularity_floor(value, field: str, t: str, zone: str) -> str:
    if value is None:
        return t
    if isinstance(value, str):
        name = value.lower()
        if name in ("none", "all"):
            return t
        if name not in NAMED_PERIODS:
            raise ExtractionError(field, f"unknown granularity {value!r}")
        return f"timestamp_floor({t}, {lit(NAMED_PERIODS[name])}, null, {zone})"
    spec = _obj(value, field)
    if spec.get("type") != "period":
        raise ExtractionError(f"{field}.type", "only period granularities", unsupported=True)
    period = _text(spec.get("period"), f"{field}.period")
    own = lit(_text(spec.get("timeZone"), f"{field}.timeZone", optional=True) or "UTC")
    origin = spec.get("origin")
    origin_sql = "null" if origin is None else f"timestamp_parse({lit(str(origin))})"
    return f"timestamp_floor({t}, {lit(period)}, {origin_sql}, {own})"


def _time_format(spec, field, x, kind):
    _only(spec, field, {"format", "timeZone", "locale", "granularity", "asMillis"})
    fmt = _text(spec.get("format"), f"{field}.format", optional=True)
    tz = _text(spec.get("timeZone"), f"{field}.timeZone", optional=True) or "UTC"
    if fmt and _TEXT_LOCALE_LETTERS.search(fmt):
        _locale(spec.get("locale"), f"{field}.locale", "names of days, months and AM/PM")
    as_millis = _flag(spec.get("asMillis"), f"{field}.asMillis")
    millis = _as_millis(x, kind, as_millis)
    t = _granularity_floor(spec.get("granularity"), f"{field}.granularity", millis, lit(tz))
    if fmt is None and as_millis:
        return f"cast({t}, 'STRING')"
    if fmt is None:
        if tz.upper() not in ("UTC", "Z", "ETC/UTC", "GMT"):
            raise ExtractionError(
                f"{field}.format", "give a format when the time zone is not UTC", unsupported=True
            )
        fmt = ISO_FORMAT
    return f"timestamp_format({t}, {lit(fmt)}, {lit(tz)})"


def _time_parse(spec, field, x, kind):
    _only(spec, field, {"timeFormat", "resultFormat", "joda"})
    given = _text(spec.get("timeFormat"), f"{field}.timeFormat")
    result = _text(spec.get("resultFormat"), f"{field}.resultFormat")
    _flag(spec.get("joda"), f"{field}.joda")
    text = _as_text(x, kind)
    formatted = f"timestamp_format(timestamp_parse({text}, {lit(given)}), {lit(result)})"
    return f"nvl({formatted}, {text})"  # a value that does not parse is kept as is


def _string_format(spec, field, x, kind):
    _only(spec, field, {"format", "nullHandling"})
    fmt = _text(spec.get("format"), f"{field}.format")
    handling = spec.get("nullHandling") or "nullString"
    if handling not in ("nullString", "emptyString", "returnNull"):
        raise ExtractionError(
            f"{field}.nullHandling", "must be nullString, emptyString or returnNull"
        )
    pieces = re.split(r"(%%|%s)", fmt)
    if any(re.search(r"%", p) for p in pieces if p not in ("%%", "%s")):
        raise ExtractionError(f"{field}.format", "only %s and %% conversions", unsupported=True)
    text = _as_text(x, kind)
    value = {"nullString": f"nvl({text}, 'null')", "emptyString": f"nvl({text}, '')"}.get(
        handling, text
    )
    parts = [value if p == "%s" else lit("%" if p == "%%" else p) for p in pieces if p]
    joined = f"concat({', '.join(parts)})" if parts else "''"
    return f"if(isnull({text}), null, {joined})" if handling == "returnNull" else joined


def _bucket(spec, field, x, kind):
    _only(spec, field, {"size", "offset"})
    size = _number(spec.get("size"), f"{field}.size", 1)
    if size <= 0:
        raise ExtractionError(f"{field}.size", "must be greater than 0")
    offset = _number(spec.get("offset"), f"{field}.offset", 0)
    number = f"cast({_as_text(x, kind) if kind == 'string' else x}, 'DOUBLE')"
    r = f"(floor(({number} - {offset!r}) / {size!r}) * {size!r} + {offset!r})"
    whole = f"cast(cast({r}, 'LONG'), 'STRING')"
    # Java prints a whole double as a long, any other as a double
    return f"if(isnull({number}), null, if({r} == cast({r}, 'LONG'), {whole}, cast({r}, 'STRING')))"


def lookup_expression(spec: dict, field: str, x: str, kind: str) -> str:
    """An inline `map` lookup (extraction function or dimension spec)."""
    lookup = _obj(spec.get("lookup"), f"{field}.lookup")
    if lookup.get("type") != "map":
        raise ExtractionError(f"{field}.lookup.type", "only inline map lookups", unsupported=True)
    mapping = _obj(lookup.get("map"), f"{field}.lookup.map")
    retain = _flag(spec.get("retainMissingValue"), f"{field}.retainMissingValue")
    replace = spec.get("replaceMissingValueWith") or None
    if retain and replace is not None:
        raise ExtractionError(
            f"{field}.retainMissingValue", "cannot be true with a replaceMissingValueWith"
        )
    text = _as_text(x, kind)
    missing = (
        text if retain else lit(_text(replace, f"{field}.replaceMissingValueWith", optional=True))
    )
    arms = []
    for key, value in mapping.items():
        match = f"isnull({text})" if key == "" else f"{text} == {lit(key)}"
        arms += [match, lit(_text(value, f"{field}.lookup.map.{key}", optional=True))]
    return f"case_searched({', '.join(arms)}, {missing})" if arms else missing


def _lookup(spec, field, x, kind):
    _only(
        spec,
        field,
        {"lookup", "retainMissingValue", "replaceMissingValueWith", "injective", "optimize"},
    )
    return lookup_expression(spec, field, x, kind)


def _cascade(spec, field, x, kind):
    _only(spec, field, {"extractionFns"})
    fns = spec.get("extractionFns")
    if not isinstance(fns, list) or not fns:
        raise ExtractionError(f"{field}.extractionFns", "must be a non-empty list")
    for i, fn in enumerate(fns):
        x = extraction_expression(fn, f"{field}.extractionFns[{i}]", x, kind)
        kind = "string"
    return x


def _refused(why: str) -> Callable[..., str]:
    def refuse(spec, field, x, kind):
        raise ExtractionError(f"{field}.type", why, unsupported=True)

    return refuse


_FUNCTIONS: dict[str, Callable[[dict, str, str, str], str]] = {
    "regex": _regex,
    "partial": _partial,
    "searchQuery": _search_query,
    "substring": _substring,
    "strlen": _strlen,
    "timeFormat": _time_format,
    "time": _time_parse,
    "stringFormat": _string_format,
    "upper": _case,
    "lower": _case,
    "bucket": _bucket,
    "lookup": _lookup,
    "cascade": _cascade,
    "javascript": _refused("JavaScript is not supported (Druid disables it by default)"),
    "registeredLookup": _refused("Strata has no registered lookups; use an inline map lookup"),
}
TYPES = tuple(_FUNCTIONS)


def extraction_expression(spec: Any, field: str, x: str = INPUT, kind: str = "string") -> str:
    """The Druid expression (over `x`, a value of `kind`: string, long, double,
    float or time) that gives what the extraction function `spec` gives."""
    spec = _obj(spec, field)
    name = spec.get("type")
    if not isinstance(name, str) or name not in _FUNCTIONS:
        raise ExtractionError(
            f"{field}.type", f"unknown extraction function {name!r}; one of {', '.join(TYPES)}"
        )
    return _FUNCTIONS[name](spec, field, x, kind)


# --- dimension specs -------------------------------------------------------------------------

Transform = Callable[[str, str], str]  # (input expression, input kind) -> expression
_OUTPUT_TYPES = {"STRING": "string", "LONG": "long", "DOUBLE": "double", "FLOAT": "float"}


@dataclass(frozen=True)
class DimensionSpec:
    """A DimensionSpec: the column read, the output's name and type, and the
    transform of its values (an expression over the input), None for as is."""

    dimension: str
    output_name: str
    output_type: str  # string | long | double | float
    transform: Transform | None = None


def _output_type(spec: dict, field: str) -> str:
    name = str(spec.get("outputType") or "STRING").upper()
    if name not in _OUTPUT_TYPES:
        raise ExtractionError(
            f"{field}.outputType", f"{name} (STRING, LONG, DOUBLE, FLOAT)", unsupported=True
        )
    return _OUTPUT_TYPES[name]


def _named(spec: dict, field: str, transform: Transform | None) -> DimensionSpec:
    name = _text(spec.get("dimension"), f"{field}.dimension")
    if not name:
        raise ExtractionError(f"{field}.dimension", "must not be empty")
    out = _text(spec.get("outputName") or name, f"{field}.outputName")
    return DimensionSpec(name, out, _output_type(spec, field), transform)


def _value_filter(spec: dict, field: str) -> Callable[[str], str]:
    """A filtered dimension spec's test of a value, as an expression over it."""
    kind = spec["type"]
    if kind == "listFiltered":
        _only(spec, field, {"delegate", "values", "isWhitelist"})
        values = spec.get("values")
        if not isinstance(values, list):
            raise ExtractionError(f"{field}.values", "must be a list of strings")
        listed = ", ".join(lit(_text(v, f"{field}.values")) for v in values)
        keep = _flag(spec.get("isWhitelist"), f"{field}.isWhitelist", True)
        inside = (lambda v: f"array_contains(array({listed}), {v})") if values else (lambda v: "0")
        return inside if keep else (lambda v: f"!({inside(v)})")
    if kind == "regexFiltered":
        _only(spec, field, {"delegate", "pattern"})
        pattern = lit("^(?:" + _text(spec.get("pattern"), f"{field}.pattern") + ")$")
        return lambda v: f"regexp_like({v}, {pattern})"
    _only(spec, field, {"delegate", "prefix"})
    prefix = _text(spec.get("prefix"), f"{field}.prefix")
    return lambda v: f"(substring({v}, 0, {len(prefix)}) == {lit(prefix)})"


def _filtered(spec: dict, field: str) -> DimensionSpec:
    delegate = dimension_spec(spec.get("delegate"), f"{field}.delegate")
    test = _value_filter(spec, field)
    inner = delegate.transform

    def transform(x: str, kind: str) -> str:
        value = inner(x, kind) if inner else _as_text(x, kind)
        return f"if(isnull({value}), null, if({test(value)}, {value}, null))"

    return DimensionSpec(delegate.dimension, delegate.output_name, delegate.output_type, transform)


def dimension_spec(spec: Any, field: str) -> DimensionSpec:
    """Druid's DimensionSpec: a column name, or a default, extraction, filtered
    (list, regex, prefix) or inline lookup dimension spec."""
    if isinstance(spec, str) and spec:
        return DimensionSpec(spec, spec, "string")
    spec = _obj(spec, field)
    kind = spec.get("type", "default")
    if not isinstance(kind, str):
        raise ExtractionError(f"{field}.type", "must be a string")
    if kind == "default":
        _only({"type": kind, **spec}, field, {"dimension", "outputName", "outputType"})
        return _named(spec, field, None)
    if kind == "extraction":
        _only(
            spec,
            field,
            {"dimension", "outputName", "outputType", "extractionFn", "dimExtractionFn"},
        )
        fn = spec.get("extractionFn", spec.get("dimExtractionFn"))
        path = f"{field}.extractionFn"
        extraction_expression(fn, path)  # refused now, not at the first row
        return _named(spec, field, lambda x, k: extraction_expression(fn, path, x, k))
    if kind in ("listFiltered", "regexFiltered", "prefixFiltered"):
        return _filtered(spec, field)
    if kind == "lookup":
        if spec.get("name") is not None:
            raise ExtractionError(
                f"{field}.name",
                "Strata has no registered lookups; give an inline map `lookup`",
                unsupported=True,
            )
        allowed = {
            "dimension",
            "outputName",
            "lookup",
            "retainMissingValue",
            "replaceMissingValueWith",
            "optimize",
            "outputType",
        }
        _only(spec, field, allowed)
        lookup_expression(spec, field, INPUT, "string")
        return _named(spec, field, lambda x, k: lookup_expression(spec, field, x, k))
    raise ExtractionError(
        f"{field}.type",
        f"dimension spec {kind!r}; one of default, extraction, listFiltered, regexFiltered, "
        "prefixFiltered, lookup",
    )
