"""Druid expressions as Spark SQL: ingestion transforms (`translate`), transform
filters (`translate_predicate`) and native queries run on Spark.

The functions are those of Druid's "Expressions" reference
(docs/querying/math-expr.md), one table for every engine (`functions`); this
module says how Spark SQL spells what differs (`SparkDialect`). A function Druid
has but Strata does not translate is refused by name (`ExpressionError`), so a
spec never runs with a transform silently changed. Identifiers are read as they
come from the input (text from JSON/CSV), so arithmetic parses its operands as
numbers. Spark runs in ANSI mode, where a failed cast would fail the whole task:
every conversion here gives null instead. Pure: no Spark or Django import; the
workers evaluate the result with `F.expr`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.emit import Translated, emit
from metastore.druid.expressions.functions import REFUSED, not_in_reference
from metastore.druid.expressions.parse import parse
from metastore.druid.expressions.periods import UNIT
from metastore.druid.expressions.types import ARRAYS, NUMERIC, Arg, ExpressionError, literal

__all__ = ["SPARK", "ExpressionError", "Translated", "ident", "translate", "translate_predicate"]

_EXTRACT = {
    "SECOND": "second({t})",
    "MINUTE": "minute({t})",
    "HOUR": "hour({t})",
    "DAY": "dayofmonth({t})",
    "DOW": "extract(DAYOFWEEK_ISO FROM {t})",
    "ISODOW": "extract(DAYOFWEEK_ISO FROM {t})",
    "DOY": "dayofyear({t})",
    "WEEK": "weekofyear({t})",
    "MONTH": "month({t})",
    "QUARTER": "quarter({t})",
    "YEAR": "year({t})",
    "ISOYEAR": "extract(YEAROFWEEK FROM {t})",
}

_ROUND = (
    "(CASE WHEN isnan({0}) THEN 0D WHEN {0} = double('infinity') THEN 1.7976931348623157E308D "
    "WHEN {0} = double('-infinity') THEN -1.7976931348623157E308D ELSE round({0}, {1}) END)"
)
_IPV4 = (
    "(CASE WHEN regexp_like({0}, {1}) THEN "
    "aggregate(split({0}, '[.]'), 0L, (_a, _o) -> _a * 256 + CAST(_o AS BIGINT)) "
    "WHEN try_cast({0} AS BIGINT) BETWEEN 0 AND 4294967295 THEN try_cast({0} AS BIGINT) END)"
)

_SPELLING = {
    # coercions and operators
    "array": "array({0})",
    "double_to_long": "try_cast({0} AS BIGINT)",
    "text_to_long": "coalesce(try_cast({0} AS BIGINT), try_cast(try_cast({0} AS DOUBLE) AS BIGINT))",
    "json_text_of": "to_json({0})",
    "string_array": "from_json({0}, 'array<string>')",
    "starts_with": "startswith({0}, {1})",
    "long_divide": "(CASE WHEN {1} = 0 THEN NULL ELSE {0} DIV {1} END)",
    # Java's double division, as Druid's: by zero, +-Infinity or NaN (Spark's is null)
    "double_divide": (
        "(CASE WHEN {1} = 0 THEN (CASE WHEN isnan({0}) OR {0} = 0 THEN CAST('NaN' AS DOUBLE) "
        "WHEN {0} > 0 THEN CAST('Infinity' AS DOUBLE) WHEN {0} < 0 THEN CAST('-Infinity' AS DOUBLE) "
        "END) ELSE try_divide({0}, {1}) END)"
    ),
    "modulo": "try_mod({0}, {1})",
    "safe_divide_double": "(CASE WHEN {1} = 0 THEN NULL ELSE {0} / {1} END)",
    "int_arg": "{0}",
    "int": "CAST({0} AS INT)",
    "idiv": "{0} DIV {1}",
    "bigint": "{0}L",
    "double_lit": "{0}D",
    "size": "size({0})",
    "transform": "transform({0}, {1} -> {2})",
    "filter": "filter({0}, {1} -> {2})",
    "fold": "aggregate({0}, {1}, ({2}, {3}) -> {4})",
    # strings
    "strlen": "(octet_length(encode({0}, 'UTF-16BE')) DIV 2)",
    "printf": "format_string",
    "substr": "substring",
    "repeat": "repeat({0}, {1})",
    "pad": "{3}({0}, {1}, {2})",
    "trim": "trim(BOTH {1} FROM {0})",
    "ltrim": "trim(LEADING {1} FROM {0})",
    "rtrim": "trim(TRAILING {1} FROM {0})",
    "regex_like": "regexp_like({0}, {1})",
    # asked where group {2} gave '': a Java back-reference to a group that took no
    # part fails, to an empty one matches (regexp_extract gives '' for both)
    "regex_group_taken": "regexp_like({0}, concat('(?:', {1}, ')(?=\\\\', {2}, ')'))",
    "strpos": "(locate({1}, {0}) - 1)",
    "strpos_from": "(locate({1}, {0}, {2} + 1) - 1)",
    "regexp_replace": "regexp_replace({0}, {1}, {2})",
    "parse_json": "to_json(try_parse_json({0}))",
    # conv() reads a valid prefix, so the text is checked first (as Java's Long.parseLong)
    "radix_subject": "{0}",
    "radix_valid": "regexp_like(lower({0}), {1})",
    "radix_value": "try_cast(conv(ltrim('+', ltrim('-', {0})), {1}, 10) AS BIGINT)",
    # math
    "rint": "rint({0})",
    "expm1": "expm1({0})",
    "log1p": "log1p({0})",
    "hypot": "hypot({0}, {1})",
    "signum": "signum({0})",
    "getexponent": (
        "(CASE WHEN isnan({0}) OR abs({0}) = double('infinity') THEN 1024L "
        "WHEN {0} = 0 THEN -1023L ELSE CAST(floor(log2(abs({0}))) AS BIGINT) END)"
    ),
    "round_double": _ROUND,
    "bitwisexor": "({0} ^ {1})",
    "bitwiseshiftleft": "shiftleft({0}, CAST({1} AS INT))",
    "bitwiseshiftright": "shiftright({0}, CAST({1} AS INT))",
    "shift_right": "shiftright({0}, {1})",
    "ipv4_text": _IPV4,
    # arrays
    "offset": "get({0}, CAST({1} AS INT))",
    "has": "exists({0}, _e -> _e <=> {1})",
    "has_all": "forall({1}, _w -> exists({0}, _e -> _e <=> _w))",
    "has_any": "exists({0}, _e -> exists({1}, _o -> _o <=> _e))",
    "contains": "array_contains({0}, {1})",
    "position": "array_position({0}, {1})",
    "prepend": "array_prepend({0}, {1})",
    "append": "array_append({0}, {1})",
    "concat_arrays": "concat({0}, {1})",
    "as_set": "sort_array(array_distinct({0}), true)",
    "slice": "slice({0}, CAST({1} + 1 AS INT), CAST(least({2}, size({0})) - {1} AS INT))",
    # time
    "millis_to_ts": "timestamp_millis({0})",
    "epoch_millis": "unix_millis({0})",
    "to_local": "from_utc_timestamp({0}, {1})",
    "from_local": "to_utc_timestamp({0}, {1})",
    "pmod": "pmod({0}, {1})",
    "origin_floor": "(floor(({0} - {1}) / {2}) * {2} + {1})",
    "parse_pattern": "try_to_timestamp({0}, {1})",
    "format_pattern": "date_format({0}, {1})",
    "iso_local": "date_format({0}, 'yyyy-MM-dd''T''HH:mm:ss.SSS')",
    "iso_utc": "date_format({0}, 'yyyy-MM-dd''T''HH:mm:ss.SSS''Z''')",
}

_names = itertools.count()


def ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class SparkDialect(Dialect):
    """Spark SQL (ANSI mode): what a value that does not convert becomes is null,
    never an error that would fail the task. Nested values read from the input
    (`complex`) are Spark structs, maps and arrays; JSON goes through VARIANT."""

    name = "spark"
    TYPES = {
        "long": "BIGINT",
        "double": "DOUBLE",
        "string": "STRING",
        "json": "STRING",
        "array<long>": "ARRAY<BIGINT>",
        "array<double>": "ARRAY<DOUBLE>",
        "array<string>": "ARRAY<STRING>",
        "array<json>": "ARRAY<STRING>",
    }
    TRY = "try_cast"
    NESTED = (*ARRAYS, "complex")
    SPELLING = _SPELLING
    PRINTF_SHOWS_NULL = True  # format_string is Java's Formatter
    EXTRACT = _EXTRACT

    def unknown(self, name: str) -> str:
        why = REFUSED.get(name) or not_in_reference(name)
        if why is None:
            why = (
                "it is not one of the functions of Druid's expression reference "
                "(docs/druid-expression-status.md lists them and their status here)"
            )
        return f"function {name}() is not supported: {why}"

    def sql_string(self, value: str) -> str:
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"

    def long_literal(self, value: int) -> str:
        return f"{value}L"

    def double_literal(self, text: str) -> str:
        bare = text.lstrip("-")
        sql = f"double('{bare}')" if bare in ("NaN", "Infinity") else f"{bare}D"
        return f"(- {sql})" if text.startswith("-") else sql

    def let(self, value: str, body: Callable[[str], str]) -> str:
        """`body` over `value` evaluated once: a lambda binds it, so an expression
        that uses a value several times does not copy its tree (nested JSON calls
        would grow the plan exponentially)."""
        name = f"_v{next(_names)}"
        return f"element_at(transform(array({value}), {name} -> {body(name)}), 1)"

    def concat(self, items: list[str]) -> str:
        return "concat(" + ", ".join(items) + ")"

    def exists(self, arr: str, var: str, cond: str, every: bool) -> str:
        return f"{'forall' if every else 'exists'}({arr}, {var} -> {cond})"

    def row(self, names: list[str]) -> str:
        return "named_struct(" + ", ".join(f"'{n}', {n}" for n in names) + ")"

    def join_array(self, arr: str, kind: str, sep: str, *, constant: bool = True) -> str:
        strings = (
            arr if kind in ("array<string>", "array<json>") else f"CAST({arr} AS ARRAY<STRING>)"
        )
        return f"array_join({strings}, {sep}, 'null')"

    def split(self, t: str, pattern: str) -> str:
        parts = f"split({t}, {pattern}, -1)"
        last = (
            f"aggregate(sequence(1, size({parts})), 0, (_n, _i) -> "
            f"CASE WHEN element_at({parts}, _i) <> '' THEN _i ELSE _n END)"
        )
        return (
            f"(CASE WHEN {t} = '' THEN array('') ELSE slice({parts}, 1, greatest({last}, 1)) END)"
        )

    # --- JSON, through Spark's VARIANT ------------------------------------------------

    def variant(self, arg: Arg) -> str:
        """The value as a VARIANT. Text that is not JSON is a JSON string, as a
        plain string column is in Druid."""
        if arg.kind == "json":
            return f"try_parse_json({arg.sql})"
        if arg.kind in NUMERIC:
            return f"try_parse_json(CAST({arg.sql} AS STRING))"
        if arg.kind in self.NESTED:
            return f"try_parse_json(to_json({arg.sql}))"
        t = self.text(arg)
        return (
            f"coalesce(try_parse_json({t}), "
            f"try_variant_get(try_parse_json(to_json(array({t}))), '$[0]'))"
        )

    def _at(self, arg: Arg, path: str) -> str:
        """The VARIANT at the path (null when absent)."""
        return f"try_variant_get({self.variant(arg)}, {self.sql_string(path)})"

    def json_typed(self, arg: Arg, path: str, kind: str) -> str:
        return f"try_variant_get({self._at(arg, path)}, '$', '{self.TYPES[kind].lower()}')"

    def json_scalar(self, arg: Arg, path: str) -> str:
        def scalar(v: str) -> str:
            schema = f"schema_of_variant({v})"
            return (
                f"CASE WHEN startswith({schema}, 'OBJECT') THEN NULL "
                f"WHEN {schema} = 'BOOLEAN' "
                f"THEN CAST(CAST(try_variant_get({v}, '$', 'boolean') AS INT) AS STRING) "
                f"WHEN startswith({schema}, 'ARRAY') THEN nullif(to_json({v}), 'null') "
                f"ELSE try_variant_get({v}, '$', 'string') END"
            )

        return self.let(self._at(arg, path), scalar)

    def json_extract(self, arg: Arg, path: str) -> str:
        return f"to_json({self._at(arg, path)})"

    def json_array(self, arg: Arg, path: str) -> str:
        def elements(v: str) -> str:
            return (
                f"CASE WHEN startswith(schema_of_variant({v}), 'ARRAY') "
                f"THEN transform(try_variant_get({v}, '$', 'array<variant>'), "
                f"_e -> nullif(to_json(_e), 'null')) "
                f"WHEN {v} IS NULL OR is_variant_null({v}) THEN NULL ELSE array(to_json({v})) END"
            )

        return self.let(self._at(arg, path), elements)

    def json_keys(self, arg: Arg, path: str) -> str:
        return f"json_object_keys(to_json({self._at(arg, path)}))"

    def json_object(self, keys: list[str], values: list[Arg]) -> str:
        if not keys:
            return "'{}'"
        fields = []
        for key, value in zip(keys, values, strict=True):
            if value.kind == "json" or value.kind == "complex":
                sql = self.variant(value)
            elif value.sql == "NULL":
                sql = "CAST(NULL AS STRING)"
            else:
                sql = value.sql
            fields.append(f"{key}, {sql}")
        return f"to_json(named_struct({', '.join(fields)}), map('ignoreNullFields', 'false'))"

    def json_text(self, arg: Arg) -> str:
        return f"to_json({self.variant(arg)})"

    # --- time -------------------------------------------------------------------------

    def add_period(self, local: str, unit: str, count: str) -> str:
        return f"timestampadd({UNIT[unit]}, CAST({count} AS INT), {local})"

    def date_pattern(self, arg: Arg, name: str) -> str:
        return self.sql_string(str(literal(arg, "the pattern", name)))

    def parse_iso(self, t: str, zone: str | None) -> str:
        """ISO 8601 or SQL text as epoch millis; a zone applies only to text without an offset."""
        if zone is None:
            return f"unix_millis(try_cast({t} AS TIMESTAMP))"
        has_offset = f"regexp_like({t}, '(Z|[+-][0-9]{{2}}(:?[0-9]{{2}})?)$')"
        return (
            f"(CASE WHEN {has_offset} THEN unix_millis(try_cast({t} AS TIMESTAMP)) "
            f"ELSE unix_millis(to_utc_timestamp(try_cast({t} AS TIMESTAMP_NTZ), {zone})) END)"
        )


SPARK = SparkDialect()


def translate(
    source: str, types: dict[str, str] | None = None, *, time_column: str | None = None
) -> Translated:
    """A Druid expression as a Spark SQL expression; raises ExpressionError.

    `types` maps input columns to long/double/string where known (the worker
    passes the input's column types; validation passes none). `time_column`
    names the column holding the row's timestamp in epoch millis, which the
    expression reads as `__time` (as Druid's transforms do)."""
    types = types or {}

    def resolve(name: str) -> Arg:
        if name == "__time" and time_column:  # the row's timestamp, epoch millis
            return Arg(ident(time_column), "long")
        return Arg(ident(name), types.get(name, "string"))

    result = emit(SPARK, parse(source), resolve)
    if result.kind == "string" and result.sql == "NULL":
        return Translated("CAST(NULL AS STRING)", result.columns, result.kind)
    return result


def translate_predicate(
    source: str, types: dict[str, str] | None = None, *, time_column: str | None = None
) -> Translated:
    """A Druid expression used as a filter (Druid's `expression` filter): a Spark
    boolean, true where the value is true in Druid's sense (a positive number,
    the text 'true'), false where it is false or null."""
    result = translate(source, types, time_column=time_column)
    truthy = SPARK.truth(Arg(result.sql, result.kind))
    return Translated(sql=f"coalesce({truthy}, false)", columns=result.columns, kind="boolean")
