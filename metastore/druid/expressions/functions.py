"""Druid's expression functions: one table for every engine.

A row per function of Druid's "Expressions" reference (docs/querying/math-expr.md)
that Strata translates: its name, arity, how its arguments are read (`args`),
the Druid type of its result (`result`), its null semantics (`nulls`) and its
SQL, written once over a `Dialect` (a template the same on every engine, a
spelling the dialect gives by the function's name, or a body in `strings`,
`numbers`, `arrays`, `json_functions`, `times`, `conditionals`). Functions Druid
documents but Strata does not translate are in `REFUSED` with the reason, and
names that are Druid SQL's rather than the native language's are refused saying
what to use (`not_in_reference`). docs/druid-expression-status.md lists every
function and its status. Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from metastore.druid.expressions import arrays, conditionals, json_functions, numbers, strings
from metastore.druid.expressions import times as t
from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.types import Arg, common_kind

# Null semantics, as the `nulls` column says them. Rows marked STRICT are checked
# on both engines (tests/test_expression_functions.py); the others say what differs.
STRICT = "null if any argument is null"
NULL_SKIPPED = "null arguments are skipped"
NULL_VALUE = "null is a value it tests for"
FIRST_VALUE = "the first argument that is not null"
NULL_FALSE = "a null condition is false"
NOT_CONVERTED = "null if any argument is null or a value does not convert"
NOT_FOUND = "null if any argument is null or the JSON has nothing at the path"
NULL_JSON = "a null value is JSON null"
NEVER_NULL = "never null: 0 when the value is no address"
TIME = "null if the time is null; a null origin, zone or pattern is none (UTC, ISO 8601)"
OUTSIDE = "null if any argument is null or the index is outside the array"
NULL_END = "a null end is the array's end; otherwise " + OUTSIDE
NULL_MATCHES = "a null element matches a null value"
NULL_ELEMENT = "a null argument is a null element"
NULL_ESCAPE = "null if the text or pattern is null; a null escape is none"
NULL_SIGN = "null if the magnitude is null; a null sign is +"
NULL_ARRAY = "a null array: null, as in Druid"
KEPT_ELEMENT = "a null element is kept; " + NULL_ARRAY
# Checked against Druid's Java on both engines (tests/test_expression_nulls.py):
NULL_FORMATTED = "a null value prints 'null'; a null format is null"
NULL_GROUP = "null if nothing matches or the group took no part; the group is a literal"
NULL_START = "-1 if not found; a null (or negative) start is 0"
NULL_SEPARATOR = "a null separator is ''"
NULL_PATTERN = "a null pattern is '' (a split into characters)"


@dataclass(frozen=True)
class Row:
    """One function. `args` says how each argument is read, the last repeating:
    `text`, `num` (a number, text parsed), `long`, `double`, or `any` (the typed
    `Arg`, for a body that looks at the types). `result` is a Druid type or the
    rule giving it from the arguments. `sql` is a template over the arguments read
    (`{0}`, `{1}`...), or a body (dialect, arguments) -> SQL."""

    name: str
    arity: tuple[int, int | None]
    args: tuple[str, ...]
    result: str | Callable[[list[Arg]], str]
    nulls: str
    sql: str | Callable[[Dialect, list], str]

    def emit(self, d: Dialect, args: list[Arg]) -> tuple[str, str]:
        """(SQL, Druid type) of a call with these (arity-checked) arguments."""
        reads = [self.args[min(i, len(self.args) - 1)] for i in range(len(args))]
        values = [d.coerce(how, arg) for how, arg in zip(reads, args, strict=True)]
        sql = self.sql(d, values) if callable(self.sql) else self.sql.format(*values)
        return sql, self.result(args) if callable(self.result) else self.result


def by_dialect(name: str) -> Callable[[Dialect, list], str]:
    """The SQL the dialect spells for this function, over the arguments read."""
    return lambda d, a: d.sql(name, *a)


def _row(name, arity, args, result, nulls, sql) -> Row:
    lo, hi = (arity, arity) if isinstance(arity, int) else arity
    return Row(name, (lo, hi), tuple(args.split()), result, nulls, sql)


def _math(name: str, sql: str | None = None, arity: int = 1) -> Row:
    """A function of doubles giving a double (java.lang.Math's, mostly)."""
    template = sql or f"{name}(" + ", ".join(f"{{{i}}}" for i in range(arity)) + ")"
    return _row(name, arity, "double", "double", STRICT, template)


_ANY = "any"
_BOOL = "CAST({} AS BIGINT)"  # a SQL boolean as Druid's long 1/0


def _a(name, arity, result, nulls, sql) -> Row:
    """A function whose body reads the typed arguments."""
    return _row(name, arity, _ANY, result, nulls, sql)


_N = None  # any number of arguments

TABLE: tuple[Row, ...] = (
    # --- general ------------------------------------------------------------------------
    _a("cast", 2, conditionals.cast_kind, NOT_CONVERTED, conditionals.cast),
    _a("coalesce", (1, _N), common_kind, FIRST_VALUE, conditionals.coalesce),
    _a("nvl", 2, common_kind, FIRST_VALUE, conditionals.coalesce),
    _a("if", 3, conditionals.if_kind, NULL_FALSE, conditionals.if_),
    _a(
        "case_searched",
        (2, _N),
        conditionals.case_searched_kind,
        NULL_FALSE,
        conditionals.case_searched,
    ),
    _a("case_simple", (3, _N), conditionals.case_simple_kind, NULL_FALSE, conditionals.case_simple),
    _a("isnull", 1, "long", NULL_VALUE, conditionals.isnull),
    _a("notnull", 1, "long", NULL_VALUE, conditionals.notnull),
    _a("like", (2, 3), "long", NULL_ESCAPE, conditionals.like),
    # --- strings ------------------------------------------------------------------------
    _row("concat", (0, _N), "text", "string", STRICT, strings.concat),
    _a("format", (1, _N), "string", NULL_FORMATTED, strings.format_),
    _row("upper", 1, "text", "string", STRICT, "upper({0})"),
    _row("lower", 1, "text", "string", STRICT, "lower({0})"),
    _row("reverse", 1, "text", "string", STRICT, "reverse({0})"),
    _row("replace", 3, "text", "string", STRICT, "replace({0}, {1}, {2})"),
    _row("strlen", 1, "text", "long", STRICT, by_dialect("strlen")),  # UTF-16 code units
    _a("parse_long", (1, 2), "long", NOT_CONVERTED, strings.parse_long),
    _a("regexp_extract", (2, 3), "string", NULL_GROUP, strings.regexp_extract),
    _row("regexp_like", 2, "text", "long", STRICT, strings.regexp_like),
    _row("regexp_replace", 3, "text", "string", STRICT, by_dialect("regexp_replace")),
    _row("contains_string", 2, "text", "long", STRICT, _BOOL.format("contains({0}, {1})")),
    _row(
        "icontains_string",
        2,
        "text",
        "long",
        STRICT,
        _BOOL.format("contains(lower({0}), lower({1}))"),
    ),
    _row("substring", 3, "text long", "string", STRICT, strings.substring),
    _row("left", 2, "text long", "string", STRICT, strings.left),
    _row("right", 2, "text long", "string", STRICT, strings.right),
    _row("strpos", (2, 3), "text text long", "long", NULL_START, strings.strpos),
    _row("trim", (1, 2), "text", "string", STRICT, strings.trim("trim")),
    _row("ltrim", (1, 2), "text", "string", STRICT, strings.trim("ltrim")),
    _row("rtrim", (1, 2), "text", "string", STRICT, strings.trim("rtrim")),
    _row("repeat", 2, "text long", "string", STRICT, by_dialect("repeat")),
    _row("lpad", 3, "text long text", "string", STRICT, strings.pad("lpad")),
    _row("rpad", 3, "text long text", "string", STRICT, strings.pad("rpad")),
    # --- math ---------------------------------------------------------------------------
    *(_math(name) for name in ("acos", "asin", "atan", "cbrt", "cos", "cosh", "cot", "exp")),
    *(_math(name) for name in ("log10", "sin", "sinh", "sqrt", "tan", "tanh")),
    _math("log", "ln({0})"),
    _math("todegrees", "degrees({0})"),
    _math("toradians", "radians({0})"),
    _math("atan2", arity=2),
    _math("pow", "power({0}, {1})", 2),
    *(_math(name, by_dialect(name)) for name in ("expm1", "log1p", "rint", "signum")),
    _math("hypot", by_dialect("hypot"), 2),
    _row("pi", 0, "double", "double", STRICT, "pi()"),
    _row("abs", 1, "num", numbers.num_kind, STRICT, "abs({0})"),
    _row("ceil", 1, "num", "double", STRICT, "CAST(ceil({0}) AS DOUBLE)"),
    _row("floor", 1, "num", "double", STRICT, "CAST(floor({0}) AS DOUBLE)"),
    _row(
        "copysign",
        2,
        "double",
        "double",
        NULL_SIGN,
        "(CASE WHEN {1} < 0 THEN -abs({0}) ELSE abs({0}) END)",
    ),
    _row("getexponent", 1, "double", "long", STRICT, by_dialect("getexponent")),
    _row("scalb", 2, "double long", "double", STRICT, "({0} * power(2, {1}))"),
    _row("remainder", 2, "double", "double", STRICT, numbers.remainder),
    _a("max", 2, numbers.pair_kind, STRICT, numbers.minmax("greatest")),
    _a("min", 2, numbers.pair_kind, STRICT, numbers.minmax("least")),
    _a("round", (1, 2), numbers.round_kind, STRICT, numbers.round_),
    _row("div", 2, "long", "long", STRICT, numbers.div),  # null when dividing by zero
    _a("safe_divide", 2, numbers.both_long, STRICT, numbers.safe_divide),
    _a("greatest", (0, _N), numbers.reduce_kind, NULL_SKIPPED, numbers.reduce("greatest")),
    _a("least", (0, _N), numbers.reduce_kind, NULL_SKIPPED, numbers.reduce("least")),
    _row("bitwiseand", 2, "long", "long", STRICT, "({0} & {1})"),
    _row("bitwiseor", 2, "long", "long", STRICT, "({0} | {1})"),
    _row("bitwisexor", 2, "long", "long", STRICT, by_dialect("bitwisexor")),
    _row("bitwisecomplement", 1, "long", "long", STRICT, "(~ {0})"),
    _row("bitwiseshiftleft", 2, "long", "long", STRICT, by_dialect("bitwiseshiftleft")),
    _row("bitwiseshiftright", 2, "long", "long", STRICT, by_dialect("bitwiseshiftright")),
    # --- arrays -------------------------------------------------------------------------
    _a("array", (1, _N), arrays.array_literal_kind, NULL_ELEMENT, arrays.array),
    _a("array_length", 1, "long", STRICT, arrays.length),
    _a("array_offset", 2, arrays.element_of_first, OUTSIDE, arrays.offset),
    _a("array_ordinal", 2, arrays.element_of_first, OUTSIDE, arrays.ordinal),
    _a("array_contains", 2, "long", NULL_MATCHES, arrays.contains),
    _a("array_overlap", 2, "long", NULL_MATCHES, arrays.overlap),
    _a("scalar_in_array", 2, "long", STRICT, arrays.scalar_in_array),
    _a("array_offset_of", 2, "long", STRICT, arrays.position(1)),
    _a("array_ordinal_of", 2, "long", STRICT, arrays.position(0)),
    _a("array_prepend", 2, arrays.second_kind, KEPT_ELEMENT, arrays.prepend),
    _a("array_append", 2, arrays.first_kind, KEPT_ELEMENT, arrays.append),
    _a("array_concat", 2, arrays.first_kind, NULL_ARRAY, arrays.concat),
    _a("array_set_add", 2, arrays.first_kind, KEPT_ELEMENT, arrays.set_add),
    _a("array_set_add_all", 2, arrays.first_kind, NULL_ARRAY, arrays.set_add_all),
    _a("array_slice", (2, 3), arrays.first_kind, NULL_END, arrays.slice_),
    _a("array_to_string", 2, "string", NULL_SEPARATOR, arrays.to_string),
    _row("string_to_array", 2, "text", "array<string>", NULL_PATTERN, arrays.string_to_array),
    # --- JSON ---------------------------------------------------------------------------
    _a("json_value", (2, 3), json_functions.value_kind, NOT_FOUND, json_functions.json_value),
    _a("json_query", 2, "json", NOT_FOUND, json_functions.json_query),
    _a("json_query_array", 2, "array<json>", NOT_FOUND, json_functions.json_query_array),
    _a("json_keys", 2, "array<string>", NOT_FOUND, json_functions.json_keys),
    _a("json_object", (0, _N), "json", NULL_JSON, json_functions.json_object),
    _row("parse_json", 1, "text", "json", NOT_CONVERTED, json_functions.parse_json),
    _row("try_parse_json", 1, "text", "json", NOT_CONVERTED, json_functions.parse_json),
    _a("to_json_string", 1, "string", NULL_JSON, json_functions.to_json_string),
    # --- IPv4 and human-readable sizes --------------------------------------------------
    _a("ipv4_parse", 1, "long", NOT_CONVERTED, numbers.ipv4_parse),
    _a("ipv4_stringify", 1, "string", NOT_CONVERTED, numbers.ipv4_stringify),
    _a("ipv4_match", 2, "long", NEVER_NULL, numbers.ipv4_match),
    _a("human_readable_binary_byte_format", (1, 2), "string", STRICT, numbers.BINARY_BYTES),
    _a("human_readable_decimal_byte_format", (1, 2), "string", STRICT, numbers.DECIMAL_BYTES),
    _a("human_readable_decimal_format", (1, 2), "string", STRICT, numbers.DECIMAL),
    # --- time ---------------------------------------------------------------------------
    _a("timestamp", (1, 2), "long", TIME, t.timestamp),
    _a("unix_timestamp", (1, 2), "long", TIME, t.unix_timestamp),
    _a("timestamp_floor", (2, 4), "long", TIME, t.timestamp_floor),
    _a("timestamp_ceil", (2, 4), "long", TIME, t.timestamp_ceil),
    _a("timestamp_shift", (3, 4), "long", TIME, t.timestamp_shift),
    _a("timestamp_extract", (2, 3), "long", TIME, t.timestamp_extract),
    _a("timestamp_parse", (1, 3), "long", TIME, t.timestamp_parse),
    _a("timestamp_format", (1, 3), "string", TIME, t.timestamp_format),
)

FUNCTIONS: dict[str, Row] = {row.name: row for row in TABLE}


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

_SQL_NAMES = {
    "time_floor": "timestamp_floor",
    "time_ceil": "timestamp_ceil",
    "time_shift": "timestamp_shift",
    "time_extract": "timestamp_extract",
    "time_parse": "timestamp_parse",
    "time_format": "timestamp_format",
    "millis_to_timestamp": "a long of epoch millis as is",
    "timestamp_to_millis": "a long of epoch millis as is",
    "textcat": "concat",
    "char_length": "strlen",
    "length": "strlen",
    "position": "strpos",
    "nullif": "case_searched",
    "array_agg": "an aggregator",
}


def not_in_reference(name: str) -> str | None:
    """Why a name is no function of Druid's expression reference (a Druid SQL
    function, with what the native language uses instead), or None."""
    if name in _SQL_NAMES:
        return f"it is a Druid SQL function; the native expression uses {_SQL_NAMES[name]}"
    if name.startswith("mv_"):
        return "it is a Druid SQL function; native expressions use the array_* functions"
    return None
