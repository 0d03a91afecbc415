"""Druid expressions as DuckDB SQL, for native queries (expression virtual
columns, expression filters, aggregator and post-aggregator expressions) run on
DuckDB. The same tree, walk (`emit`) and function table (`functions`) as Spark
SQL; this module says how DuckDB spells what differs (`DuckDBDialect`): JSON
through DuckDB's json functions, time zones through ICU, Java date patterns as
strftime formats. Pure: no Spark or Django import.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from metastore.druid.expressions import tree
from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.emit import Translated, emit
from metastore.druid.expressions.functions import FUNCTIONS, not_in_reference
from metastore.druid.expressions.parse import parse
from metastore.druid.expressions.strings import DIGITS
from metastore.druid.expressions.types import ARRAYS, NUMERIC, Arg, ExpressionError, literal

__all__ = ["DUCKDB", "to_duckdb"]

_EXTRACT_PART = {
    "SECOND": "second",
    "MINUTE": "minute",
    "HOUR": "hour",
    "DAY": "day",
    "DOW": "isodow",
    "ISODOW": "isodow",
    "DOY": "doy",
    "WEEK": "week",
    "MONTH": "month",
    "QUARTER": "quarter",
    "YEAR": "year",
    "ISOYEAR": "isoyear",
}

_ROUND = (
    "(CASE WHEN isnan({0}) THEN 0.0 WHEN {0} = 'Infinity'::DOUBLE "
    "THEN 1.7976931348623157E308 WHEN {0} = '-Infinity'::DOUBLE "
    "THEN -1.7976931348623157E308 ELSE round({0}, {1}) END)"
)
_IPV4 = (
    "(CASE WHEN regexp_matches({0}, {1}) THEN "
    "list_reduce(list_transform(string_split({0}, '.'), lambda _o: CAST(_o AS BIGINT)), "
    "lambda _a, _o: _a * 256 + _o) "
    "WHEN regexp_matches({0}, '^[0-9]+$') AND TRY_CAST({0} AS BIGINT) BETWEEN 0 AND 4294967295 "
    "THEN TRY_CAST({0} AS BIGINT) END)"
)
_TEXT_TO_LONG = (
    "(CASE WHEN regexp_matches({0}, '^[-+]?[0-9]+$') THEN TRY_CAST({0} AS BIGINT) "
    "ELSE TRY_CAST(trunc(TRY_CAST({0} AS DOUBLE)) AS BIGINT) END)"
)
_SET = (  # list_distinct drops nulls: kept apart
    "(CASE WHEN list_position({0}, NULL) > 0 THEN list_prepend(NULL, list_sort(list_distinct({0}))) "
    "ELSE list_sort(list_distinct({0})) END)"
)

_SPELLING = {
    # coercions and operators
    "array": "[{0}]",
    "double_to_long": "TRY_CAST(trunc({0}) AS BIGINT)",  # DuckDB's cast would round
    "text_to_long": _TEXT_TO_LONG,
    "json_text_of": "CAST(to_json({0}) AS VARCHAR)",
    "string_array": "try(from_json({0}, '[\"VARCHAR\"]'))",
    "starts_with": "starts_with({0}, {1})",
    "long_divide": "({0} // NULLIF({1}, 0))",
    # Java's double division, as Druid's: by zero, +-Infinity or NaN (DuckDB's too)
    "double_divide": "(CAST({0} AS DOUBLE) / {1})",
    "modulo": "({0} % NULLIF({1}, 0))",
    "safe_divide_double": "({0} / NULLIF({1}, 0))",
    "int_arg": "CAST({0} AS INTEGER)",
    "int": "CAST({0} AS INTEGER)",
    "idiv": "{0} // {1}",
    "bigint": "{0}",
    "double_lit": "{0}.0",
    "size": "len({0})",
    "transform": "list_transform({0}, lambda {1}: {2})",
    "filter": "list_filter({0}, lambda {1}: {2})",
    "fold": "list_reduce({0}, lambda {2}, {3}: {4}, {1})",
    # strings
    "strlen": "CAST(length({0}) AS BIGINT)",
    "printf": "printf",
    "substr": "substr",
    "repeat": "repeat({0}, CAST({1} AS BIGINT))",
    # an empty pad leaves the text as it is (DuckDB would fail), cut to length
    "pad": (
        "(CASE WHEN {2} = '' THEN left({0}, CAST({1} AS INTEGER)) "
        "ELSE {3}({0}, CAST({1} AS INTEGER), {2}) END)"
    ),
    "trim": "trim({0}, {1})",
    "ltrim": "ltrim({0}, {1})",
    "rtrim": "rtrim({0}, {1})",
    "regex_like": "regexp_matches({0}, {1})",
    # whether group {2} took part in the match (RE2 gives '' either way): metastore.sketches
    "regex_group_taken": "strata_regexp_group_taken({0}, {1}, {2})",
    "strpos": "(CAST(strpos({0}, {1}) AS BIGINT) - 1)",
    "strpos_from": (
        "(CASE WHEN strpos(substr({0}, {2} + 1), {1}) = 0 THEN -1 "
        "ELSE strpos(substr({0}, {2} + 1), {1}) + {2} - 1 END)"
    ),
    # Java's `$1` in the replacement is `\1` in DuckDB (RE2)
    "regexp_replace": "regexp_replace({0}, {1}, regexp_replace({2}, '[$]([0-9])', '\\\\\\1', 'g'), 'g')",
    "parse_json": "(CASE WHEN json_valid({0}) THEN CAST(json({0}) AS VARCHAR) END)",
    "radix_subject": "lower(trim({0}))",
    "radix_valid": "regexp_matches({0}, {1})",
    "radix_value": (
        f"list_reduce(list_transform(string_split(ltrim({{0}}, '+-'), ''), "
        f"lambda _c: strpos('{DIGITS}', _c) - 1), lambda _n, _d: _n * {{1}} + _d, CAST(0 AS BIGINT))"
    ),
    # math
    "rint": "round_even({0}, 0)",
    "expm1": "(exp({0}) - 1)",
    "log1p": "ln(1 + {0})",
    "hypot": "sqrt({0} * {0} + {1} * {1})",
    "signum": "CAST(sign({0}) AS DOUBLE)",
    "getexponent": (
        "(CASE WHEN isnan({0}) OR isinf({0}) THEN 1024 WHEN {0} = 0 THEN -1023 "
        "ELSE CAST(floor(log2(abs({0}))) AS BIGINT) END)"
    ),
    "round_double": _ROUND,
    "bitwisexor": "xor({0}, {1})",
    "bitwiseshiftleft": "({0} << {1})",
    "bitwiseshiftright": "({0} >> {1})",
    "shift_right": "({0} >> {1})",
    "ipv4_text": _IPV4,
    # arrays
    "offset": "(CASE WHEN {1} >= 0 THEN list_extract({0}, {1} + 1) END)",
    "has": "coalesce(list_has({0}, {1}), false)",
    "has_all": "list_has_all({0}, {1})",
    "has_any": "list_has_any({0}, {1})",
    "contains": "list_has({0}, {1})",
    "position": "list_position({0}, {1})",
    "prepend": "list_prepend({1}, {0})",
    "append": "list_append({0}, {1})",
    "concat_arrays": "list_concat({0}, {1})",
    "as_set": _SET,
    "slice": "list_slice({0}, {1} + 1, least({2}, len({0})))",
    # time
    "millis_to_ts": "make_timestamp(CAST({0} AS BIGINT) * 1000)",
    "epoch_millis": "epoch_ms({0})",
    "to_local": "timezone({1}, timezone('UTC', {0}))",
    "from_local": "timezone({1}, {0})",
    "pmod": "((({0}) % {1} + {1}) % {1})",
    "origin_floor": "CAST(floor(({0} - {1}) / {2}) * {2} + {1} AS BIGINT)",
    "parse_pattern": "try_strptime({0}, {1})",
    "format_pattern": "strftime({0}, {1})",
    "iso_local": "strftime({0}, '%Y-%m-%dT%H:%M:%S.%g')",
    "iso_utc": "(strftime({0}, '%Y-%m-%dT%H:%M:%S.%g') || 'Z')",
}

_ADD = {"Y": "to_years", "M": "to_months", "W": "to_weeks", "D": "to_days"}
_ADD.update(H="to_hours", MI="to_minutes", S="to_seconds")

# Java (Joda) date pattern letters and their strftime equivalents, longest first.
_JAVA = [
    ("yyyy", "%Y"),
    ("yy", "%y"),
    ("MMMM", "%B"),
    ("MMM", "%b"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("hh", "%I"),
    ("mm", "%M"),
    ("ss", "%S"),
    ("SSS", "%g"),
    ("EEEE", "%A"),
    ("EEE", "%a"),
    ("a", "%p"),
    ("Z", "%z"),
]
_TOKEN = re.compile("|".join(re.escape(j) for j, _ in _JAVA) + r"|'[^']*'|[A-Za-z]|.", re.S)
_OFFSET = "'(Z|[+-][0-9]{2}(:?[0-9]{2})?)$'"


class DuckDBDialect(Dialect):
    """DuckDB SQL: TRY_CAST for what may not convert; JSON is text read with
    DuckDB's json functions."""

    name = "duckdb"
    TYPES = {
        "long": "BIGINT",
        "double": "DOUBLE",
        "string": "VARCHAR",
        "json": "VARCHAR",
        "array<long>": "BIGINT[]",
        "array<double>": "DOUBLE[]",
        "array<string>": "VARCHAR[]",
        "array<json>": "VARCHAR[]",
    }
    TRY = "TRY_CAST"
    NESTED = ARRAYS
    SPELLING = _SPELLING
    EXTRACT = {unit: f"date_part('{part}', {{t}})" for unit, part in _EXTRACT_PART.items()}

    def unknown(self, name: str) -> str:
        why = not_in_reference(name)
        return (
            f"function {name}() is not supported in native queries here"
            + (f" ({why})" if why else "")
            + "; supported: "
            + ", ".join(sorted(FUNCTIONS))
        )

    def sql_string(self, value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    def long_literal(self, value: int) -> str:
        return f"CAST({value} AS BIGINT)"

    def double_literal(self, text: str) -> str:
        return f"CAST('{text}' AS DOUBLE)"

    def concat(self, items: list[str]) -> str:
        return "(" + " || ".join(items) + ")"

    def exists(self, arr: str, var: str, cond: str, every: bool) -> str:
        each = f"list_transform({arr}, lambda {var}: {cond})"
        if every:
            return f"(CASE WHEN {arr} IS NOT NULL THEN coalesce(list_bool_and({each}), true) END)"
        return f"(CASE WHEN {arr} IS NOT NULL THEN coalesce(list_bool_or({each}), false) END)"

    def row(self, names: list[str]) -> str:
        return "struct_pack(" + ", ".join(f"{n} := {n}" for n in names) + ")"

    def join_array(self, arr: str, kind: str, sep: str, *, constant: bool = True) -> str:
        strings = f"list_transform({arr}, lambda _e: coalesce(CAST(_e AS VARCHAR), 'null'))"
        if constant:
            return f"array_to_string({strings}, {sep})"
        # array_to_string takes a constant separator only
        joined = f"list_reduce({strings}, lambda _a, _b: _a || {sep} || _b)"
        return f"(CASE WHEN len({arr}) = 0 THEN '' ELSE {joined} END)"

    def split(self, t: str, pattern: str) -> str:
        parts = f"string_split_regex({t}, {pattern})"
        kept = (
            f"list_slice({parts}, 1, greatest(coalesce(list_last(list_filter("
            f"list_transform(range(1, len({parts}) + 1), lambda _i: "
            f"CASE WHEN {parts}[_i] <> '' THEN _i END), lambda _i: _i IS NOT NULL)), 0), 1))"
        )
        return f"(CASE WHEN {t} = '' THEN [''] ELSE {kept} END)"

    # --- JSON, as text read with DuckDB's json functions --------------------------------

    def _json(self, arg: Arg) -> str:
        """The value as JSON text: text that is not JSON is a JSON string, as a plain
        string column is in Druid."""
        if arg.kind == "json":
            return arg.sql
        if arg.kind in NUMERIC or arg.kind in ARRAYS:
            return f"CAST(to_json({arg.sql}) AS VARCHAR)"
        t = self.text(arg)
        return f"(CASE WHEN json_valid({t}) THEN {t} ELSE CAST(to_json({t}) AS VARCHAR) END)"

    def _path(self, path: str) -> str:
        """Druid's JSONPath subset as DuckDB's path (`['name']` as `."name"`)."""
        return self.sql_string(re.sub(r"\[['\"]([^'\"]*)['\"]\]", r'."\1"', path))

    def json_typed(self, arg: Arg, path: str, kind: str) -> str:
        j, p, duck = self._json(arg), self._path(path), self.TYPES[kind]
        if kind in ARRAYS:
            return f"TRY_CAST(json_extract({j}, {p}) AS {duck})"
        value = f"json_extract_string({j}, {p})"
        if kind == "long":  # booleans are longs (1/0) in Druid
            boolean = f"CAST(TRY_CAST({value} AS BOOLEAN) AS BIGINT)"
            return (
                f"(CASE WHEN json_type({j}, {p}) = 'BOOLEAN' THEN {boolean} "
                f"ELSE TRY_CAST({value} AS BIGINT) END)"
            )
        return f"TRY_CAST({value} AS {duck})"

    def json_scalar(self, arg: Arg, path: str) -> str:
        j, p = self._json(arg), self._path(path)
        kind = f"json_type({j}, {p})"
        return (
            f"(CASE WHEN {kind} IS NULL OR {kind} IN ('NULL', 'OBJECT') THEN NULL "
            f"WHEN {kind} = 'BOOLEAN' THEN CAST(CAST(TRY_CAST(json_extract_string({j}, {p}) "
            f"AS BOOLEAN) AS INTEGER) AS VARCHAR) WHEN {kind} = 'ARRAY' "
            f"THEN CAST(json_extract({j}, {p}) AS VARCHAR) ELSE json_extract_string({j}, {p}) END)"
        )

    def json_extract(self, arg: Arg, path: str) -> str:
        return f"CAST(json_extract({self._json(arg)}, {self._path(path)}) AS VARCHAR)"

    def json_array(self, arg: Arg, path: str) -> str:
        j, p = self._json(arg), self._path(path)
        at, kind = f"json_extract({j}, {p})", f"json_type({j}, {p})"
        return (
            f"(CASE WHEN {kind} = 'ARRAY' THEN list_transform(CAST({at} AS JSON[]), "
            f"lambda _e: nullif(CAST(_e AS VARCHAR), 'null')) "
            f"WHEN {kind} IS NULL OR {kind} = 'NULL' THEN NULL ELSE [CAST({at} AS VARCHAR)] END)"
        )

    def json_keys(self, arg: Arg, path: str) -> str:
        j, p = self._json(arg), self._path(path)
        # sorted, as Spark lists them (its VARIANT keeps object keys sorted)
        return f"(CASE WHEN json_type({j}, {p}) = 'OBJECT' THEN list_sort(json_keys({j}, {p})) END)"

    def json_object(self, keys: list[str], values: list[Arg]) -> str:
        fields = [
            f"{key}, " + (f"json({value.sql})" if value.kind == "json" else value.sql)
            for key, value in zip(keys, values, strict=True)
        ]
        return f"CAST(json_object({', '.join(fields)}) AS VARCHAR)"

    def json_text(self, arg: Arg) -> str:
        return f"CAST(json({self._json(arg)}) AS VARCHAR)"

    # --- time -------------------------------------------------------------------------

    def add_period(self, local: str, unit: str, count: str) -> str:
        return f"({local} + {_ADD[unit]}(CAST({count} AS INTEGER)))"

    def date_pattern(self, arg: Arg, name: str) -> str:
        """A Java date pattern as a strftime format; a letter with no equivalent is refused."""
        pattern = str(literal(arg, "the pattern", name))
        out = []
        for token in _TOKEN.findall(pattern):
            mapped = dict(_JAVA).get(token)
            if mapped:
                out.append(mapped)
            elif token.startswith("'"):
                out.append(token[1:-1].replace("%", "%%") or "'")
            elif token.isalpha():
                raise ExpressionError(
                    f"{name}(): pattern letter {token!r} of {pattern!r} is not supported"
                )
            else:
                out.append(token.replace("%", "%%"))
        return self.sql_string("".join(out))

    def parse_iso(self, t: str, zone: str | None) -> str:
        """ISO 8601 or SQL text as epoch millis; a zone applies only to text without an offset."""
        naive = f"TRY_CAST(regexp_replace({t}, {_OFFSET}, '') AS TIMESTAMP)"
        with_offset = f"epoch_ms(TRY_CAST({t} AS TIMESTAMPTZ))"
        local = f"epoch_ms(timezone({zone}, {naive}))" if zone else f"epoch_ms({naive})"
        return f"(CASE WHEN regexp_matches({t}, {_OFFSET}) THEN {with_offset} ELSE {local} END)"


DUCKDB = DuckDBDialect()


def to_duckdb(source: str | tree.Expr, resolve: Callable[[str], Arg]) -> Translated:
    """A Druid expression (text or tree) as a DuckDB SQL expression over the
    columns `resolve` gives (name -> typed SQL); raises ExpressionError
    (UnsupportedFunction for a function not translated for DuckDB)."""
    root = parse(source) if isinstance(source, str) else source
    result = emit(DUCKDB, root, resolve)
    if result.kind == "string" and result.sql == "NULL":
        return Translated("CAST(NULL AS VARCHAR)", result.columns, result.kind)
    return result
