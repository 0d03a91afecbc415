"""Druid's native queries (`POST /druid/v2`) compiled to SQL over the visible rows.

`compile_query(body, schema)` validates a native query (timeseries, topN,
groupBy, scan, timeBoundary) and returns a `Plan`: one SQL query over the
dataSource's table of the relational layer (`metastore.query`, where each
dataSource is a table of exactly its visible rows) and what
`metastore.druid.native_results` needs to put the rows into Druid's JSON
result shapes. Pure: the caller passes the table's column types (`schema`) and
runs the SQL.

Semantics follow Druid's documentation in SQL-compatible null mode (Druid's
default): an aggregate over no rows is null except `count` (0); `__time` is a
long of epoch milliseconds to filters and expressions; dimensions come out as
strings unless an `outputType` says otherwise. Anything not implemented is
refused with a `NativeQueryError` naming the field, never run differently.
"""

from __future__ import annotations

import math
import re
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from metastore.druid import native_sketches as sketch_sql
from metastore.druid.expressions import Arg, ExpressionError, UnsupportedFunction
from metastore.druid.expressions import parse as parse_expression
from metastore.druid.expressions.duckdb_sql import to_duckdb
from metastore.druid.expressions.emit import emit
from metastore.druid.expressions.spark_sql import SPARK
from metastore.druid.expressions.tree import Binary, Identifier, LongLiteral
from metastore.druid.extraction import (
    INPUT,
    DimensionSpec,
    ExtractionError,
    extraction_expression,
    ident,
)
from metastore.druid.extraction import dimension_spec as parse_dimension_spec
from metastore.druid.extraction import lit as expression_literal
from metastore.druid.granularity import NAMED_PERIODS
from metastore.intervals import MAX_TS, MIN_TS, Interval, add_period, parse_ts

__all__ = [
    "ETERNITY_START_MS",
    "NativeQueryError",
    "Plan",
    "compile_query",
    "column_kinds",
    "QUERY_TYPES",
]

QUERY_TYPES = (
    "timeseries",
    "topN",
    "groupBy",
    "scan",
    "timeBoundary",
    "search",
    "dataSourceMetadata",
    "segmentMetadata",
)
_REFUSED_TYPES = ("select", "windowOperator")


class NativeQueryError(ValueError):
    """A native query Strata refuses: `unsupported` (valid Druid, not implemented
    here) or invalid; `field` is the JSON path of the culprit."""

    def __init__(self, field: str, message: str, *, unsupported: bool = False) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.unsupported = unsupported


def _unsupported(field: str, message: str) -> NativeQueryError:
    return NativeQueryError(field, message, unsupported=True)


# The SQL dialect being emitted: DuckDB (the API's engine) or Spark SQL (the engine
# that scales out, `workers.query.spark_query`); set by `compile_query`.
_DIALECT: ContextVar[str] = ContextVar("native_sql_dialect", default="duckdb")
DIALECTS = ("duckdb", "spark")


def _spark() -> bool:
    return _DIALECT.get() == "spark"


def _q(name: str) -> str:
    if _spark():
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    if _spark():  # Spark reads backslash escapes in string literals
        return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return "'" + str(text).replace("'", "''") + "'"


def _epoch_ms(ts: str) -> str:
    return f"unix_millis({ts})" if _spark() else f"epoch_ms({ts})"


def _text() -> str:
    return "STRING" if _spark() else "VARCHAR"


def _value_of(pair: str) -> str:
    """The value of a stored (time, value) first/last pair."""
    return f"({pair}).value" if _spark() else f"struct_extract({pair}, 'value')"


def _divide(a: str, b: str) -> str:
    """Double division as Java does it: by zero, +-Infinity or NaN (DuckDB already
    does; Spark's ANSI mode would fail)."""
    if not _spark():
        return f"({a} / {b})"
    by_zero = (
        f"CASE WHEN {a} > 0 THEN CAST('Infinity' AS DOUBLE) WHEN {a} < 0 "
        f"THEN CAST('-Infinity' AS DOUBLE) WHEN {a} = 0 THEN CAST('NaN' AS DOUBLE) END"
    )
    return f"(CASE WHEN {b} = 0 THEN {by_zero} ELSE try_divide({a}, {b}) END)"


def _matches(text: str, pattern: str) -> str:
    return f"regexp({text}, {pattern})" if _spark() else f"regexp_matches({text}, {pattern})"


def _truncated_long(x: str) -> str:
    return f"TRY_CAST({x} AS BIGINT)" if _spark() else f"TRY_CAST(trunc({x}) AS BIGINT)"


def _ts_lit(ts: datetime) -> str:
    d = ts.astimezone(UTC)
    return f"TIMESTAMP '{d.year:04d}-{d.month:02d}-{d.day:02d} {d.strftime('%H:%M:%S.%f')}'"


def _ms(ts: datetime) -> int:
    return (ts - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)


def _obj(value, field: str) -> dict:
    if not isinstance(value, dict):
        raise NativeQueryError(field, "must be a JSON object")
    return value


def _list(value, field: str) -> list:
    if not isinstance(value, list):
        raise NativeQueryError(field, "must be a JSON array")
    return value


def _str(value, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise NativeQueryError(field, "must be a non-empty string")
    return value


def _bool(value, field: str, default: bool = False) -> bool:
    """Druid reads booleans leniently: true/false or the strings "true"/"false"."""
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise NativeQueryError(field, "must be true or false")


def _int(value, field: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise NativeQueryError(field, f"must be an integer >= {minimum}")
    return value


def _type_of(spec: dict, field: str) -> str | None:
    """A spec's `type`, which must be a string when given."""
    kind = spec.get("type")
    if kind is not None and not isinstance(kind, str):
        raise NativeQueryError(f"{field}.type", "must be a string")
    return kind


def _only(spec: dict, field: str, allowed: set[str]) -> None:
    """Refuse fields this implementation would otherwise silently ignore."""
    for key in spec:
        if key not in allowed:
            raise _unsupported(f"{field}.{key}", "is not supported here")


# --- the table's columns -----------------------------------------------------------------


def column_kinds(names: list[str], arrow_types: list[str]) -> dict[str, str]:
    """Column name -> kind (`long`, `double`, `float`, `string`, `time`, `pair`,
    `sketch`, `variance`, `other`) from the Arrow types of the table's columns."""
    kinds = {}
    for name, t in zip(names, arrow_types, strict=True):
        if t.startswith("timestamp"):
            kind = "time"
        elif t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
            kind = "long"
        elif t in ("double", "halffloat"):
            kind = "double"
        elif t == "float":
            kind = "float"
        elif t in ("string", "large_string", "string_view"):
            kind = "string"
        elif t.startswith("struct<time:") and "value:" in t:
            kind = "pair"  # a first/last metric stored as Druid stores it, (time, value)
        elif t.startswith("struct<count:") and "nvariance:" in t:
            kind = "variance"  # a druid-stats variance state (count, sum, nvariance)
        elif t in ("binary", "large_binary", "binary_view"):
            kind = "sketch"
        else:
            kind = "other"
        kinds[name] = kind
    return kinds


@dataclass(frozen=True)
class Col:
    sql: str
    kind: str  # long | double | float | string | pair | sketch | variance | other


_NULL = Col("NULL", "string")


class _Columns:
    """Resolves column names the way Druid does: `__time` is a long of epoch
    millis, virtual columns are expressions, a column the table lacks is null."""

    def __init__(self, schema: dict[str, str], virtual: dict[str, tuple] | None = None) -> None:
        self.schema = schema
        self.virtual = virtual or {}
        self._resolving: set[str] = set()

    def get(self, name: str) -> Col:
        if name in self.virtual:
            if name in self._resolving:
                raise NativeQueryError("virtualColumns", f"{name!r} refers to itself")
            self._resolving.add(name)
            try:
                expr, out_type, path = self.virtual[name]
                return _typed(_expression(expr, self, path), out_type)
            finally:
                self._resolving.discard(name)
        if name == "__time":
            return Col(_epoch_ms("__time"), "long")
        kind = self.schema.get(name)
        if kind is None:
            return _NULL
        return Col(_q(name), kind)


def _typed(col: Col, out_type: str | None) -> Col:
    if out_type is None:
        return col
    kind = {"LONG": "long", "DOUBLE": "double", "FLOAT": "float", "STRING": "string"}[out_type]
    return Col(_cast(col, kind), kind)


def _cast(col: Col, kind: str) -> str:
    """`col` as a value of `kind`; text that is not a number becomes null; a sketch
    is read as its finalized value."""
    col = _finalized(col)
    if col.kind == kind or col.sql == "NULL":
        return col.sql
    if kind == "string":
        return f"CAST({col.sql} AS {_text()})"
    target = "BIGINT" if kind == "long" else "DOUBLE"
    if col.kind == "string":
        return f"TRY_CAST(trim({col.sql}) AS {target})"
    if col.kind == "pair":
        return f"TRY_CAST({_value_of(col.sql)} AS {target})"
    if kind == "long" and col.kind in ("double", "float"):
        return _truncated_long(col.sql)  # Java's (long) truncates
    if col.kind in ("sketch", "variance", "other"):
        raise _unsupported("", f"a {col.kind} column cannot be read as a number")
    return f"TRY_CAST({col.sql} AS {target})"


def _num(col: Col) -> Col:
    if col.kind in ("long", "double", "float"):
        return col
    return Col(_cast(col, "double"), "double")


# --- Druid expressions (metastore.druid.expressions), emitted for the query's engine ----

# The table's column kinds as the expression emitters' Druid types.
_EXPRESSION_KINDS = {"long": "long", "double": "double", "float": "double", "string": "string"}


def _expression_arg(col: Col) -> Arg:
    if col.kind == "pair":  # a first/last metric reads as its value
        return Arg(f"CAST({_value_of(col.sql)} AS {_text()})", "string")
    return Arg(col.sql, _EXPRESSION_KINDS.get(col.kind, "complex"))


def _parsed(text, field: str):
    """The parse tree of a Druid expression given as `field`."""
    if not isinstance(text, str) or not text.strip():
        raise NativeQueryError(field, "must be a Druid expression string")
    try:
        return parse_expression(text)
    except UnsupportedFunction as exc:
        raise _unsupported(field, str(exc)) from None
    except ExpressionError as exc:
        raise NativeQueryError(field, str(exc)) from None


def _emitted(root, cols: _Columns, field: str):
    """A parsed Druid expression emitted for the query's engine over `cols`:
    its SQL and its Druid kind (`long`, `string`, `array<long>`, ...)."""
    try:
        if _spark():
            return emit(SPARK, root, lambda name: _expression_arg(cols.get(name)))
        return to_duckdb(root, lambda name: _expression_arg(cols.get(name)))
    except UnsupportedFunction as exc:
        raise _unsupported(field, str(exc)) from None
    except ExpressionError as exc:
        raise NativeQueryError(field, str(exc)) from None


def _expression(text, cols: _Columns, field: str) -> Col:
    """A Druid expression (math-expr) as a typed SQL expression over `cols`: the one
    parse tree of `metastore.druid.expressions`, emitted for DuckDB or Spark SQL."""
    result = _emitted(_parsed(text, field), cols, field)
    kind = result.kind if result.kind in ("long", "double", "string") else "other"
    return Col(result.sql, "string" if result.kind == "json" else kind)


def _truth(col: Col) -> str:
    """Druid's truthiness: a non-zero number, or the string 'true'. A null value is
    unknown (NULL), as Druid's expression matcher has it, so that a NOT above does
    not match it either."""
    if col.kind in ("long", "double", "float"):
        return f"(({col.sql}) <> 0)"
    text = f"CAST({col.sql} AS {_text()})"
    return (
        f"(CASE WHEN {col.sql} IS NOT NULL THEN coalesce(lower({text}) = 'true' "
        f"OR TRY_CAST({text} AS DOUBLE) <> 0, false) END)"
    )


# --- granularities -----------------------------------------------------------------------

_PERIOD = re.compile(
    r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$"
)
_FIELDS = ("year", "month", "week", "day", "hour", "minute", "second")
# The unit one level up, inside which Druid counts a multiple of a unit from zero.
_PARENT = {"month": "year", "day": "month", "hour": "day", "minute": "hour", "second": "minute"}


@dataclass(frozen=True)
class Granularity:
    kind: str  # all | none | period | duration
    units: tuple[tuple[str, int], ...] = ()  # period fields, e.g. (("hour", 6),)
    tz: str | None = None  # None is UTC
    origin: datetime | None = None  # UTC
    duration_ms: int = 0

    # SQL over `ts`, a naive UTC TIMESTAMP expression.
    def to_local(self, ts: str) -> str:
        if self.tz is None:
            return ts
        if _spark():
            return f"from_utc_timestamp({ts}, {_lit(self.tz)})"
        return f"timezone({_lit(self.tz)}, timezone('UTC', {ts}))"

    def from_local_ms(self, local: str) -> str:
        if self.tz is None:
            return _epoch_ms(local)
        if _spark():
            return f"unix_millis(to_utc_timestamp({local}, {_lit(self.tz)}))"
        return f"epoch_ms(timezone({_lit(self.tz)}, {local}))"

    def _origin_local(self) -> str:
        o = self.origin
        if self.tz is not None:
            o = o.astimezone(ZoneInfo(self.tz))
        return _ts_lit(o.replace(tzinfo=UTC))

    def _interval(self) -> str:
        return " + ".join(f"INTERVAL {n} {u.upper()}" for u, n in self.units)

    def trunc_local(self, local: str) -> str:
        if self.origin is not None:
            if _spark():
                raise _unsupported("granularity.origin", "a period origin on Spark SQL")
            return f"time_bucket({self._interval()}, {local}, {self._origin_local()})"
        [(unit, n)] = self.units
        if n == 1:
            return f"date_trunc('{unit}', {local})"
        if unit == "year":
            return f"make_timestamp(CAST(year({local}) - year({local}) % {n} AS INTEGER), 1, 1, 0, 0, 0)"
        if unit == "month":
            m0 = f"(month({local}) - 1)"
            return f"make_timestamp(year({local}), {m0} - {m0} % {n} + 1, 1, 0, 0, 0)"
        if unit == "day":
            count = f"((day({local}) - 1) - (day({local}) - 1) % {n})"
        else:
            count = f"(date_part('{unit}', {local}) - date_part('{unit}', {local}) % {n})"
        if _spark():
            args = ["0", "0", "0", "0"]
            args[("day", "hour", "minute", "second").index(unit)] = f"CAST({count} AS INTEGER)"
            return f"(date_trunc('{_PARENT[unit]}', {local}) + make_dt_interval({', '.join(args)}))"
        return f"(date_trunc('{_PARENT[unit]}', {local}) + to_{unit}s(CAST({count} AS INTEGER)))"

    def bucket_ms(self, ts: str) -> str:
        """SQL: the epoch millis of the start of the bucket holding `ts`."""
        if self.kind == "none":
            return _epoch_ms(ts)
        if self.kind == "duration":
            o, d = _ms(self.origin) if self.origin else 0, self.duration_ms
            ms = _epoch_ms(ts)
            return f"({ms} - ((({ms} - {o}) % {d}) + {d}) % {d})"
        return self.from_local_ms(self.trunc_local(self.to_local(ts)))

    def series(self) -> str:
        """SQL: one row per bucket (column `__bucket`, epoch millis) from the bucket of
        `__span.lo` to the bucket of `__span.hi` (a CTE `__span` of naive UTC TIMESTAMPs)."""
        if self.kind == "duration":
            lo, hi = self.bucket_ms("__span.lo"), self.bucket_ms("__span.hi")
            if _spark():
                return (
                    f"SELECT explode(sequence({lo}, {hi}, CAST({self.duration_ms} AS BIGINT))) "
                    "AS __bucket FROM __span"
                )
            return (
                f"SELECT unnest(range({lo}, {hi} + 1, {self.duration_ms})) AS __bucket FROM __span"
            )
        first, last = (self.trunc_local(self.to_local(t)) for t in ("__span.lo", "__span.hi"))
        single = len(self.units) == 1 and self.units[0][1] == 1
        step = (
            self._interval() if single or self.origin else f"INTERVAL 1 {self.units[0][0].upper()}"
        )
        bucket = self.from_local_ms(self.trunc_local("g.x"))
        if _spark():
            return (
                f"SELECT DISTINCT {bucket} AS __bucket FROM __span "
                f"LATERAL VIEW explode(sequence({first}, {last}, {step})) g AS x"
            )
        return (
            f"SELECT DISTINCT {bucket} AS __bucket "
            f"FROM __span, generate_series({first}, {last}, {step}) AS g(x)"
        )

    def render_zone(self) -> ZoneInfo | None:
        return None if self.tz is None else ZoneInfo(self.tz)


def _zone(value, field: str) -> str | None:
    if value is None:
        return None
    name = _str(value, field)
    if name.upper() in ("UTC", "Z", "ETC/UTC", "GMT"):
        return None
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise NativeQueryError(field, f"unknown time zone {name!r}") from None
    return name


def _period_granularity(period, tz, origin, field: str) -> Granularity:
    m = _PERIOD.match(period) if isinstance(period, str) else None
    if not m or not any(m.groups()):
        raise NativeQueryError(field, f"{period!r} is not an ISO-8601 period such as PT1H or P1D")
    units = tuple((u, int(v)) for u, v in zip(_FIELDS, m.groups(), strict=True) if v and int(v))
    if not units:
        raise NativeQueryError(field, "a period of zero length")
    months = [u for u, _ in units if u in ("year", "month")]
    if origin is None and len(units) > 1:
        raise _unsupported(field, f"period {period} mixes units; give an `origin` or one unit")
    if origin is not None and months and len(months) != len(units):
        raise _unsupported(field, f"period {period} mixes months or years with days or times")
    if origin is None and units[0][0] == "week" and units[0][1] > 1:
        raise _unsupported(field, "week periods longer than P1W without an `origin`")
    if origin is not None:
        origin = _timestamp(origin, f"{field}.origin")
    return Granularity("period", units, _zone(tz, f"{field}.timeZone"), origin)


def _timestamp(value, field: str) -> datetime:
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value)
        except OverflowError:
            raise NativeQueryError(field, "is outside the years 1 to 9999") from None
    match = _YEAR_MONTH.match(value.strip()) if isinstance(value, str) else None
    if match is not None:  # Joda reads a year or a year-month alone (`0000/3000`)
        year, month = match.groups()
        if int(year) == 0:
            return MIN_TS  # the year 0 is before the first instant Strata holds
        value = f"{year}-{month or '01'}-01"
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise NativeQueryError(field, str(exc)) from None


_YEAR_MONTH = re.compile(r"^(\d{4})(?:-(\d{2}))?$")


def parse_granularity(spec, field: str = "granularity") -> Granularity:
    """Druid's query granularity: a simple name, or a period / duration object."""
    if spec is None:
        return Granularity("all")
    if isinstance(spec, str):
        name = spec.lower()
        if name in ("all", "none"):
            return Granularity(name)
        if name not in NAMED_PERIODS:
            raise NativeQueryError(
                field,
                f"unknown granularity {spec!r}; one of all, none, " + ", ".join(NAMED_PERIODS),
            )
        return _period_granularity(NAMED_PERIODS[name], None, None, field)
    spec = _obj(spec, field)
    kind = _type_of(spec, field)
    if kind in ("all", "none"):
        return Granularity(kind)
    if kind == "period":
        _only(spec, field, {"type", "period", "timeZone", "origin"})
        return _period_granularity(
            spec.get("period"), spec.get("timeZone"), spec.get("origin"), field
        )
    if kind == "duration":
        _only(spec, field, {"type", "duration", "origin"})
        d = spec.get("duration")
        if isinstance(d, str) and d.isdigit():
            d = int(d)
        d = _int(d, f"{field}.duration", minimum=1)
        origin = _timestamp(spec["origin"], f"{field}.origin") if spec.get("origin") else None
        return Granularity("duration", origin=origin, duration_ms=d)
    raise NativeQueryError(f"{field}.type", "must be all, none, period or duration")


# --- intervals ---------------------------------------------------------------------------

_FAR = re.compile(r"^[-+]|^\d{5,}")
# Druid's eternity starts at Long.MIN_VALUE / 2 millis, -146136543-09-08T08:23:32.096Z.
ETERNITY_START_MS = -(2**62)


def _instant(text: str, end: bool, field: str) -> datetime:
    """An interval end point; Druid's eternity ends (years beyond 0001-9999) clamp."""
    if _FAR.match(text.strip()):
        return MAX_TS if end else MIN_TS
    return _timestamp(text, field)


def parse_intervals(spec, field: str = "intervals", required: bool = True) -> list[Interval]:
    if spec is None and not required:
        return [Interval(MIN_TS, MAX_TS)]
    if isinstance(spec, dict) and spec.get("type") == "intervals":
        spec = spec.get("intervals")
    if isinstance(spec, str):
        spec = [spec]
    if not isinstance(spec, list) or not spec:
        raise NativeQueryError(field, 'give ISO-8601 intervals, e.g. ["2013-01-01/2013-01-02"]')
    out = []
    for i, text in enumerate(spec):
        path = f"{field}[{i}]"
        parts = text.split("/") if isinstance(text, str) else []
        if len(parts) != 2:
            raise NativeQueryError(path, "must be an ISO-8601 interval 'start/end'")
        start = _period_end(parts, 0, path)
        end = _period_end(parts, 1, path)
        if end < start:
            raise NativeQueryError(path, "ends before it starts")
        out.append(Interval(start, end))
    return out


def _period_end(parts: list[str], i: int, path: str) -> datetime:
    """One end of `start/end`, `start/period` or `period/end`."""
    text = parts[i]
    if text.startswith("p"):  # Joda reads a period in any case (pydruid's docs: "pt1h")
        text = text.upper()
    if not text.startswith("P"):
        return _instant(text, i == 1, path)
    other = _instant(parts[1 - i], i == 0, path)
    try:  # calendar months and years as Joda adds them, as everywhere an interval is read
        return add_period(other, text, 1 if i == 1 else -1)
    except (ValueError, OverflowError) as exc:
        raise NativeQueryError(path, str(exc)) from None


def _intervals_sql(intervals: list[Interval], ts: str = "__time") -> str:
    parts = []
    for iv in intervals:
        conds = []
        if iv.start > MIN_TS:
            conds.append(f"{ts} >= {_ts_lit(iv.start)}")
        if iv.end < MAX_TS:
            conds.append(f"{ts} < {_ts_lit(iv.end)}")
        parts.append("(" + (" AND ".join(conds) or "true") + ")")
    return " OR ".join(parts)


# --- filters -----------------------------------------------------------------------------


def _number(value) -> float | int | None:
    """Druid's best-effort coercion of a filter's match value to a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return value if math.isfinite(value) else None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in str(value) else number


def _numeric_kind(col: Col) -> bool:
    return col.kind in ("long", "double", "float")


def _filter_column(spec: dict, field: str, cols: _Columns) -> Col:
    key = "column" if "column" in spec else "dimension"
    name = _str(spec.get(key), f"{field}.{key}")
    col = cols.get(name)
    if col.kind in ("sketch", "pair", "variance", "other"):
        raise _unsupported(f"{field}.{key}", f"filtering a {col.kind} column")
    fn = spec.get("extractionFn")
    if fn is None:
        return col
    path = f"{field}.extractionFn"
    kind = "time" if name == "__time" and name not in cols.virtual else col.kind
    return _extracted(col, lambda x, k: extraction_expression(fn, path, x, k), kind, path)


class _Input(_Columns):
    """What an extraction function's expression sees: its input, `__in`."""

    def __init__(self, col: Col) -> None:
        super().__init__({})
        self.col = col

    def get(self, name: str) -> Col:
        return self.col if name == INPUT else _NULL


def _extracted(col: Col, transform, kind: str, field: str) -> Col:
    """`col` through an extraction function or filtered dimension spec (a string)."""
    try:
        text = transform(INPUT, kind)
    except ExtractionError as exc:
        raise NativeQueryError(exc.field, exc.message, unsupported=exc.unsupported) from None
    return Col(_expression(text, _Input(col), field).sql, "string")


def _equals_value(col: Col, value) -> str:
    """`col = value`, the value coerced to the column's type (no match if it cannot be)."""
    if _numeric_kind(col):
        number = _number(value)
        return "false" if number is None else f"({col.sql} = {number!r})"
    if isinstance(value, float) and value.is_integer():
        value = str(value)
    return f"({col.sql} = {_lit(value if isinstance(value, str) else str(value))})"


def _selector(spec, field, cols):
    col = _filter_column(spec, field, cols)
    value = spec.get("value")
    return f"({col.sql} IS NULL)" if value is None else _equals_value(col, value)


def _equals(spec, field, cols):
    col = _filter_column(spec, field, cols)
    vtype = _str(spec.get("matchValueType"), f"{field}.matchValueType").upper()
    if vtype not in ("STRING", "LONG", "DOUBLE", "FLOAT"):
        raise _unsupported(f"{field}.matchValueType", f"{vtype} (only STRING, LONG, DOUBLE, FLOAT)")
    value = spec.get("matchValue")
    if value is None or isinstance(value, list | dict):
        raise NativeQueryError(f"{field}.matchValue", "must be a non-null scalar")
    if vtype != "STRING" and not _numeric_kind(col):
        number = _number(value)
        return "false" if number is None else f"(TRY_CAST({col.sql} AS DOUBLE) = {number!r})"
    return _equals_value(col, value)


def _null(spec, field, cols):
    return f"({_filter_column(spec, field, cols).sql} IS NULL)"


def _in(spec, field, cols):
    col = _filter_column(spec, field, cols)
    key = "values" if "values" in spec else "sortedValues"
    values = _list(spec.get(key), f"{field}.{key}")
    conds = [f"({col.sql} IS NULL)"] if any(v is None for v in values) else []
    present = [v for v in values if v is not None]
    if _numeric_kind(col):
        numbers = sorted({n for n in map(_number, present) if n is not None})
        if numbers:
            conds.append(f"({col.sql} IN ({', '.join(map(repr, numbers))}))")
    elif present:
        conds.append(f"({col.sql} IN ({', '.join(_lit(str(v)) for v in present)}))")
    return "(" + (" OR ".join(conds) or "false") + ")"


def _ordering(spec: dict, field: str) -> str:
    ordering = spec.get("ordering", "lexicographic")
    if isinstance(ordering, dict):
        ordering = ordering.get("type")
    ordering = ordering or "lexicographic"
    if not isinstance(ordering, str):
        raise NativeQueryError(f"{field}.ordering", "must be an ordering name")
    ordering = ordering.lower()
    if ordering not in ("lexicographic", "numeric", "strlen"):
        raise _unsupported(f"{field}.ordering", f"{ordering!r} (lexicographic, numeric, strlen)")
    return ordering


def _compare(col: Col, op: str, bound, ordering: str) -> str:
    if ordering == "numeric":
        number = _number(bound)
        return "false" if number is None else f"(TRY_CAST({col.sql} AS DOUBLE) {op} {number!r})"
    text = _cast(col, "string")
    if ordering == "strlen":
        strict = op.rstrip("=")
        return (
            f"(length({text}) {strict} {len(str(bound))} OR (length({text}) = {len(str(bound))} "
            f"AND {text} {op} {_lit(str(bound))}))"
        )
    return f"({text} {op} {_lit(str(bound))})"


def _bound(spec, field, cols):
    col = _filter_column(spec, field, cols)
    if _bool(spec.get("alphaNumeric"), f"{field}.alphaNumeric"):
        # Druid's older spelling of the alphanumeric ordering (pydruid's Bound sends it)
        raise _unsupported(f"{field}.alphaNumeric", "the alphanumeric ordering")
    ordering = _ordering(spec, field)
    lower, upper = spec.get("lower"), spec.get("upper")
    conds = []
    if lower is not None:
        op = ">" if _bool(spec.get("lowerStrict"), f"{field}.lowerStrict") else ">="
        conds.append(_compare(col, op, lower, ordering))
    if upper is not None:
        op = "<" if _bool(spec.get("upperStrict"), f"{field}.upperStrict") else "<="
        conds.append(_compare(col, op, upper, ordering))
    sql = "(" + (" AND ".join(conds) or f"{col.sql} IS NOT NULL") + ")"
    # A bound with no lower end matches null, which sorts first (Druid's documentation).
    return f"({col.sql} IS NULL OR {sql})" if lower is None else sql


def _range(spec, field, cols):
    col = _filter_column(spec, field, cols)
    vtype = _str(spec.get("matchValueType"), f"{field}.matchValueType").upper()
    if vtype not in ("STRING", "LONG", "DOUBLE", "FLOAT"):
        raise _unsupported(f"{field}.matchValueType", f"{vtype} (only STRING, LONG, DOUBLE, FLOAT)")
    ordering = "lexicographic" if vtype == "STRING" else "numeric"
    lower, upper = spec.get("lower"), spec.get("upper")
    if lower is None and upper is None:
        raise NativeQueryError(field, "give `lower`, `upper` or both")
    conds = [f"({col.sql} IS NOT NULL)"]
    if lower is not None:
        op = ">" if _bool(spec.get("lowerOpen"), f"{field}.lowerOpen") else ">="
        conds.append(_compare(col, op, lower, ordering))
    if upper is not None:
        op = "<" if _bool(spec.get("upperOpen"), f"{field}.upperOpen") else "<="
        conds.append(_compare(col, op, upper, ordering))
    return "(" + " AND ".join(conds) + ")"


def _like(spec, field, cols):
    col = _filter_column(spec, field, cols)
    pattern = spec.get("pattern")
    if not isinstance(pattern, str):
        raise NativeQueryError(f"{field}.pattern", "must be a LIKE pattern string")
    escape = spec.get("escape")
    if escape is not None and (not isinstance(escape, str) or len(escape) != 1):
        raise NativeQueryError(f"{field}.escape", "must be one character")
    tail = f" ESCAPE {_lit(escape)}" if escape else ""
    return f"({_cast(col, 'string')} LIKE {_lit(pattern)}{tail})"


def _regex(spec, field, cols):
    col = _filter_column(spec, field, cols)
    pattern = _str(spec.get("pattern"), f"{field}.pattern")
    return _matches(_cast(col, "string"), _lit(pattern))


def _search(spec, field, cols):
    col = _filter_column(spec, field, cols)
    query = _obj(spec.get("query"), f"{field}.query")
    return _search_match(_cast(col, "string"), query, f"{field}.query")


def _search_match(text: str, query: dict, field: str) -> str:
    kind = _type_of(query, field)
    sensitive = kind != "insensitive_contains" and _bool(
        query.get("caseSensitive"), f"{field}.caseSensitive"
    )
    if kind in ("contains", "insensitive_contains"):
        values = [query.get("value")]
    elif kind == "fragment":
        values = _list(query.get("values"), f"{field}.values")
    elif kind == "regex":  # found anywhere in the value, as Java's Matcher.find
        return _matches(text, _lit(_str(query.get("pattern"), f"{field}.pattern")))
    else:
        raise _unsupported(
            f"{field}.type", f"{kind!r} (contains, insensitive_contains, fragment, regex)"
        )
    if not all(isinstance(v, str) for v in values):
        raise NativeQueryError(field, "search values must be strings")
    subject = text if sensitive else f"lower({text})"
    conds = [f"contains({subject}, {_lit(v if sensitive else v.lower())})" for v in values]
    return "(" + " AND ".join(conds) + ")"


def _column_comparison(spec, field, cols):
    dims = _list(spec.get("dimensions"), f"{field}.dimensions")
    if len(dims) < 2:
        raise NativeQueryError(f"{field}.dimensions", "compare at least two dimensions")
    texts = []
    for i, d in enumerate(dims):
        name, _, _ = dimension_spec(d, f"{field}.dimensions[{i}]")
        texts.append(_cast(cols.get(name), "string"))
    same = "<=>" if _spark() else "IS NOT DISTINCT FROM"
    return "(" + " AND ".join(f"({texts[0]} {same} {t})" for t in texts[1:]) + ")"


def _interval_filter(spec, field, cols):
    key = "column" if "column" in spec else "dimension"
    name = _str(spec.get(key), f"{field}.{key}")
    if spec.get("extractionFn") is not None:
        raise _unsupported(f"{field}.extractionFn", "extraction functions are not supported")
    intervals = parse_intervals(spec.get("intervals"), f"{field}.intervals")
    if name == "__time" and "__time" not in cols.virtual:
        return "(" + _intervals_sql(intervals) + ")"
    value = _cast(cols.get(name), "long")
    parts = [f"({value} >= {_ms(iv.start)} AND {value} < {_ms(iv.end)})" for iv in intervals]
    return "(" + " OR ".join(parts) + ")"


def _logical(spec, field, cols):
    kind = spec["type"]
    if kind == "not":
        return f"(NOT {compile_filter(spec.get('field'), cols, f'{field}.field')})"
    fields = _list(spec.get("fields"), f"{field}.fields")
    if not fields:
        raise NativeQueryError(f"{field}.fields", "must not be empty")
    word = " AND " if kind == "and" else " OR "
    return (
        "("
        + word.join(compile_filter(f, cols, f"{field}.fields[{i}]") for i, f in enumerate(fields))
        + ")"
    )


def _array_contains_element(spec, field, cols):
    """arrayContainsElement: an array (or multi-value string) column holding the
    element, through the expression `array_contains` (a single value is an array of
    one; a null row is unknown: matched neither by the filter nor by its NOT)."""
    _only(
        spec,
        field,
        {"type", "column", "elementMatchValueType", "elementMatchValue", "filterTuning"},
    )
    column = _str(spec.get("column"), f"{field}.column")
    vtype = str(spec.get("elementMatchValueType") or "").upper()
    if vtype not in ("STRING", "LONG", "DOUBLE", "FLOAT"):
        raise _unsupported(
            f"{field}.elementMatchValueType", f"{vtype or 'none'} (STRING, LONG, DOUBLE, FLOAT)"
        )
    value = spec.get("elementMatchValue")
    if value is None or isinstance(value, bool | list | dict):
        raise _unsupported(f"{field}.elementMatchValue", "only a non-null scalar")
    if vtype == "STRING":
        element = expression_literal(str(value))
    else:
        number = _number(value)
        if number is None:
            raise NativeQueryError(f"{field}.elementMatchValue", f"is not a {vtype.lower()}")
        element = repr(number)
    found = _truth(_expression(f"array_contains({ident(column)}, {element})", cols, field))
    # a null row is unknown (Druid's predicate), so a NOT above does not match it either
    return f"(CASE WHEN {cols.get(column).sql} IS NOT NULL THEN {found} END)"


_FILTERS = {
    "selector": _selector,
    "equals": _equals,
    "equality": _equals,
    "null": _null,
    "in": _in,
    "bound": _bound,
    "range": _range,
    "like": _like,
    "regex": _regex,
    "search": _search,
    "columnComparison": _column_comparison,
    "arrayContainsElement": _array_contains_element,
    "interval": _interval_filter,
    "expression": lambda s, f, c: _truth(_expression(s.get("expression"), c, f"{f}.expression")),
    "true": lambda s, f, c: "true",
    "false": lambda s, f, c: "false",
    "and": _logical,
    "or": _logical,
    "not": _logical,
}


def compile_filter(spec, cols: _Columns, field: str = "filter") -> str:
    """A Druid filter as a SQL condition (SQL's three-valued logic, as Druid's default)."""
    spec = _obj(spec, field)
    kind = _type_of(spec, field)
    if kind not in _FILTERS:
        raise _unsupported(
            f"{field}.type", f"filter type {kind!r}; supported: {', '.join(_FILTERS)}"
        )
    return _FILTERS[kind](spec, field, cols)


def full_dimension_spec(spec, field: str) -> DimensionSpec:
    """A DimensionSpec (`metastore.druid.extraction`), its refusals in Druid's shape."""
    try:
        return parse_dimension_spec(spec, field)
    except ExtractionError as exc:
        raise NativeQueryError(exc.field, exc.message, unsupported=exc.unsupported) from None


def dimension_spec(spec, field: str) -> tuple[str, str, str]:
    """(input column, output name, output kind) of a DimensionSpec that reads a
    column as is, where a transformed one is not supported."""
    dim = full_dimension_spec(spec, field)
    if dim.transform is not None:
        raise _unsupported(f"{field}.type", "only default dimension specs here")
    return dim.dimension, dim.output_name, dim.output_type


# --- aggregators -------------------------------------------------------------------------


@dataclass(frozen=True)
class Agg:
    name: str
    sql: str  # an aggregate over the filtered rows
    kind: str  # how Druid returns it: long | double | float | string
    empty: str = "NULL"  # its value over no rows
    sketch: str | None = None  # hll | theta | kll: `sql` is a sketch, finalized on output

    def col(self) -> Col:
        """The aggregate as post-aggregators read it (a sketch stays a sketch)."""
        return Col(_q(self.name), self.sketch or self.kind)

    def out(self) -> str:
        """The aggregate as Druid writes it in a result (finalized)."""
        if self.sketch is None:
            return _q(self.name)
        final = sketch_sql.finalize(_DIALECT.get(), self.sketch, _q(self.name))
        if self.kind == "long" and self.sketch == "hll":  # `round`
            return f"CAST(round({final}) AS BIGINT)"
        return final


_SKETCHES = (
    "hyperUnique",
    "thetaSketch",
    "HLLSketchBuild",
    "HLLSketchMerge",
    "HLLSketch",
    "quantilesDoublesSketch",
    "quantilesDoublesSketchMerge",
    "KllDoublesSketch",
    "KllFloatsSketch",
    "KllDoublesSketchMerge",
    "KllFloatsSketchMerge",
    "approxHistogram",
    "approxHistogramFold",
    "fixedBucketsHistogram",
)
_NUMERIC_AGGS = {
    f"{t}{op}": (t, op) for t in ("long", "double", "float") for op in ("Sum", "Min", "Max")
}
_PICK_AGGS = {
    f"{t}{op}": (t, op)
    for t in ("long", "double", "float", "string")
    for op in ("First", "Last", "Any")
}


def _with_filter(sql: str, cond: str | None) -> str:
    return sql if cond is None else f"{sql} FILTER (WHERE {cond})"


def _agg_input(spec: dict, field: str, cols: _Columns) -> Col:
    if spec.get("expression") is not None:
        if spec.get("fieldName") is not None:
            raise NativeQueryError(field, "give `fieldName` or `expression`, not both")
        return _expression(spec["expression"], cols, f"{field}.expression")
    return cols.get(_str(spec.get("fieldName"), f"{field}.fieldName"))


def _as_kind(col: Col, kind: str, field: str) -> str:
    if col.kind in ("sketch", "variance", "other"):
        raise _unsupported(field, f"a {kind} aggregation over a {col.kind} column")
    if kind == "long" and col.kind in ("double", "float"):
        return _truncated_long(col.sql)  # Druid reads a double as a long by truncation
    if kind == "long" and col.kind == "pair":
        return _cast(Col(_value_of(col.sql), "double"), "long")
    return _cast(col, "double" if kind == "float" else kind)


def _numeric_agg(spec, field, cols, cond) -> Agg:
    kind, op = _NUMERIC_AGGS[spec["type"]]
    value = _as_kind(_agg_input(spec, field, cols), kind, field)
    sql = _with_filter(f"{op.upper()}({value})", cond)
    return Agg(spec["name"], f"CAST({sql} AS BIGINT)" if kind == "long" else sql, kind)


def _pick_agg(spec, field, cols, cond) -> Agg:
    kind, op = _PICK_AGGS[spec["type"]]
    col = cols.get(_str(spec.get("fieldName"), f"{field}.fieldName"))
    if col.kind == "pair":  # stored (time, value) pairs order by time first
        fn = "min" if op == "First" else "max"
        value = _value_of(_with_filter(f"{fn}({col.sql})", cond))
        return Agg(spec["name"], _cast(Col(value, "double"), kind), kind)
    value = _as_kind(col, kind, field)
    if kind == "string" and spec.get("maxStringBytes") is not None:
        value = f"left({value}, {_int(spec['maxStringBytes'], f'{field}.maxStringBytes')})"
    present = f"{value} IS NOT NULL" + (f" AND ({cond})" if cond else "")
    if op == "Any":
        return Agg(spec["name"], f"any_value({value}) FILTER (WHERE {present})", kind)
    time_name = spec.get("timeColumn") or "__time"
    ts = "__time" if time_name == "__time" else cols.get(time_name).sql
    by_time = ("min_by", "max_by") if _spark() else ("arg_min", "arg_max")
    fn = by_time[0] if op == "First" else by_time[1]
    return Agg(spec["name"], f"{fn}({value}, {ts}) FILTER (WHERE {present})", kind)


def _cardinality(spec, field, cols, cond) -> Agg:
    if "fieldNames" in spec:  # Druid's older spelling, still read (pydruid writes it)
        if spec.get("fields") is not None:
            raise NativeQueryError(f"{field}.fieldNames", "give fieldNames or fields, not both")
        fields = _list(spec.get("fieldNames"), f"{field}.fieldNames")
        if not all(isinstance(f, str) for f in fields):
            raise NativeQueryError(f"{field}.fieldNames", "must be column names")
    else:
        fields = _list(spec.get("fields"), f"{field}.fields")
    if not fields:
        raise NativeQueryError(f"{field}.fields", "name at least one dimension")
    texts = []
    for i, f in enumerate(fields):
        name, _, _ = dimension_spec(f, f"{field}.fields[{i}]")
        texts.append(_cast(cols.get(name), "string"))
    if len(texts) == 1:
        sql = _with_filter(f"COUNT(DISTINCT {texts[0]})", cond)
    elif _spark():
        raise _unsupported(f"{field}.fields", "a cardinality over several fields on Spark SQL")
    elif _bool(spec.get("byRow"), f"{field}.byRow"):
        sql = _with_filter(f"COUNT(DISTINCT row({', '.join(texts)}))", cond)
    else:
        inner = _with_filter(f"list([{', '.join(texts)}])", cond)
        sql = f"coalesce(len(list_distinct(flatten({inner}))), 0)"
    rounded = _bool(spec.get("round"), f"{field}.round")
    kind = "long" if rounded else "double"
    return Agg(spec["name"], f"CAST({sql} AS {'BIGINT' if rounded else 'DOUBLE'})", kind, "0")


# Druid's sketch aggregator -> (sketch kind, its size field, default, size as given -> param)
_SKETCH_AGGS = {
    "thetaSketch": ("theta", "size", 16384),
    "HLLSketchBuild": ("hll", "lgK", 12),
    "HLLSketchMerge": ("hll", "lgK", 12),
    "hyperUnique": ("hll", None, 12),
    "quantilesDoublesSketch": ("kll", "k", 128),
    "quantilesDoublesSketchMerge": ("kll", "k", 128),
    "KllDoublesSketch": ("kll", "k", 200),
    "KllDoublesSketchMerge": ("kll", "k", 200),
    "KllFloatsSketch": ("kll_float", "k", 200),
    "KllFloatsSketchMerge": ("kll_float", "k", 200),
}
_SKETCH_FIELDS = {
    "thetaSketch": {"isInputThetaSketch", "errorBoundsStdDev"},
    "HLLSketchBuild": {"tgtHllType", "round"},
    "HLLSketchMerge": {"tgtHllType", "round"},
    "hyperUnique": {"isInputHyperUnique", "round"},
    **{t: {"maxStreamLength"} for t in _SKETCH_AGGS if _SKETCH_AGGS[t][0].startswith("kll")},
}


def _sketch_param(spec: dict, field: str, key: str | None, default: int) -> int:
    value = default if key is None or spec.get(key) is None else spec[key]
    value = _int(value, f"{field}.{key}", minimum=1)
    if key == "size":  # theta's nominal entries, a power of 2; the engines take its log
        if value & (value - 1) or not 16 <= value <= 2**26:
            raise NativeQueryError(f"{field}.size", "must be a power of 2 from 16 to 67108864")
        return value.bit_length() - 1
    if key == "lgK" and not 4 <= value <= 21:
        raise NativeQueryError(f"{field}.lgK", "must be from 4 to 21")
    if key == "k" and not 2 <= value <= 32768:
        raise NativeQueryError(f"{field}.k", "must be from 2 to 32768")
    return value


def _sketch_agg(spec, field, cols, cond) -> Agg:
    """A DataSketches aggregator: sketches a column's values, or unions the sketches
    a sketch column holds; finalized (estimate, or count) unless `shouldFinalize`
    is false, when the sketch is written in base64 as Druid writes it."""
    kind, size_key, default = _SKETCH_AGGS[spec["type"]]
    _only(
        spec,
        field,
        {"type", "name", "fieldName", size_key, "shouldFinalize"} | _SKETCH_FIELDS[spec["type"]],
    )
    if spec.get("errorBoundsStdDev") is not None:
        raise _unsupported(f"{field}.errorBoundsStdDev", "estimates with error bounds")
    param = _sketch_param(spec, field, size_key, default)
    col = cols.get(_str(spec.get("fieldName"), f"{field}.fieldName"))
    if col.kind in ("pair", "other"):
        raise _unsupported(f"{field}.fieldName", f"a sketch of a {col.kind} column")
    merge = col.kind == "sketch"
    sql = sketch_sql.aggregate(_DIALECT.get(), kind, col.sql, param, cond, merge=merge)
    if not _bool(spec.get("shouldFinalize", True), f"{field}.shouldFinalize"):
        return Agg(spec["name"], sketch_sql.as_base64(sql), "string")
    if kind == "hll" and _bool(spec.get("round"), f"{field}.round"):
        return Agg(spec["name"], sql, "long", "NULL", kind)
    return Agg(spec["name"], sql, sketch_sql.FINAL_KIND[kind], "NULL", kind)


def _approx_histogram(spec, field, cols, cond) -> Agg:
    """approxHistogram(Fold) over stored approxHistogram columns (KLL floats sketches,
    see metastore.druid.metrics): their union, finalized as Druid's Histogram."""
    _only(spec, field, {"type", "name", "fieldName", "resolution", "numBuckets", *_AH_REFUSED})
    for key, why in _AH_REFUSED.items():
        if spec.get(key) is not None and spec[key] is not False:
            raise _unsupported(f"{field}.{key}", why)
    _int(spec.get("resolution", 50), f"{field}.resolution", minimum=1)  # the KLL's accuracy
    buckets = _int(spec.get("numBuckets", 7), f"{field}.numBuckets", minimum=2)
    col = cols.get(_str(spec.get("fieldName"), f"{field}.fieldName"))
    if col.kind != "sketch":
        raise _unsupported(
            f"{field}.fieldName",
            f"an {spec['type']} of raw values at query time (it reads stored approxHistogram "
            "columns; use KllFloatsSketch or quantilesDoublesSketch over values)",
        )
    sql = sketch_sql.approx_histogram(_DIALECT.get(), col.sql, cond, buckets)
    return Agg(
        spec["name"], _on_engine(sql, f"{field}.type", spec["type"]), "other", "NULL", "approx"
    )


# What a KLL sketch cannot give of Druid's Ben-Haim approximate histogram.
_AH_REFUSED = {
    "lowerLimit": "limits that fold outliers into two centroids of Druid's Ben-Haim histogram "
    "(Strata stores approxHistogram as a KLL sketch, which keeps no centroids)",
    "upperLimit": "limits that fold outliers into two centroids of Druid's Ben-Haim histogram "
    "(Strata stores approxHistogram as a KLL sketch, which keeps no centroids)",
    "finalizeAsBase64Binary": "the binary form of Druid's Ben-Haim histogram (Strata stores "
    "approxHistogram as a KLL sketch)",
}


def _state_part(state: str, name: str) -> str:
    return f"({state}).`{name}`" if _spark() else f"struct_extract({state}, '{name}')"


def _variance(spec, field, cols, cond) -> Agg:
    """druid-stats variance / varianceFold: of a numeric input, or merged from stored
    (count, sum, nvariance) states; Druid's getVariance: null over no values, 0 over
    one, else nvariance over count (population) or count - 1 (sample, the default)."""
    _only(spec, field, {"type", "name", "fieldName", "expression", "estimator", "inputType"})
    estimator = spec.get("estimator")
    population = isinstance(estimator, str) and estimator.lower() == "population"
    col = _agg_input(spec, field, cols)
    if col.kind == "variance":  # the states' nvariance plus the spread of their means
        count, total, nvar = (_state_part(col.sql, k) for k in ("count", "sum", "nvariance"))
        n = _with_filter(f"SUM({count})", cond)
        s = _with_filter(f"SUM({total})", cond)
        spread = _with_filter(
            f"SUM(CASE WHEN {count} > 0 THEN {total} * {total} / {count} END)", cond
        )
        nvariance = f"({_with_filter(f'SUM({nvar})', cond)} + {spread} - {s} * {s} / {n})"
    else:
        value = _as_kind(col, "double", field)
        n = _with_filter(f"COUNT({value})", cond)
        nvariance = f"({_with_filter(f'VAR_POP({value})', cond)} * {n})"
    divisor = n if population else f"({n} - 1)"
    sql = f"CASE WHEN {n} = 1 THEN 0.0 WHEN {n} > 1 THEN {nvariance} / {divisor} END"
    return Agg(spec["name"], sql, "double")


def compile_aggregator(spec, field: str, cols: _Columns, cond: str | None = None) -> Agg:
    spec = _obj(spec, field)
    kind = _type_of(spec, field)
    if kind == "filtered":
        inner = _obj(spec.get("aggregator"), f"{field}.aggregator")
        where = compile_filter(spec.get("filter"), cols, f"{field}.filter")
        both = where if cond is None else f"({cond}) AND {where}"
        agg = compile_aggregator(inner, f"{field}.aggregator", cols, both)
        name = spec.get("name") or agg.name
        return Agg(_str(name, f"{field}.name"), agg.sql, agg.kind, agg.empty, agg.sketch)
    _str(spec.get("name"), f"{field}.name")
    if kind == "count":
        return Agg(spec["name"], _with_filter("COUNT(*)", cond), "long", "0")
    if kind in _NUMERIC_AGGS:
        return _numeric_agg(spec, field, cols, cond)
    if kind in _PICK_AGGS:
        return _pick_agg(spec, field, cols, cond)
    if kind == "doubleMean":
        value = _as_kind(_agg_input(spec, field, cols), "double", field)
        return Agg(spec["name"], _with_filter(f"AVG({value})", cond), "double")
    if kind == "cardinality":
        return _cardinality(spec, field, cols, cond)
    if kind in _SKETCH_AGGS:
        return _sketch_agg(spec, field, cols, cond)
    if kind in ("variance", "varianceFold"):
        return _variance(spec, field, cols, cond)
    if kind in ("approxHistogram", "approxHistogramFold"):
        return _approx_histogram(spec, field, cols, cond)
    if kind in _SKETCHES:
        raise _unsupported(
            f"{field}.type",
            f"{kind}: Strata has no {kind} columns; its sketches are HLL, theta and "
            "quantiles (KLL) sketches",
        )
    raise _unsupported(f"{field}.type", f"aggregator type {kind!r}")


# --- post-aggregators --------------------------------------------------------------------


class _Outputs(_Columns):
    """Names a post-aggregator may read: the row's aggregators, dimensions and the
    post-aggregators before it (inlined)."""

    def __init__(self, known: dict[str, Col]) -> None:
        super().__init__({})
        self.known = dict(known)

    def get(self, name: str) -> Col:
        return self.known.get(name, _NULL)


_ARITH = {"+", "-", "*", "/", "quotient", "pow"}


def _post_value(spec, field: str, out: _Outputs) -> Col:
    spec = _obj(spec, field)
    kind = _type_of(spec, field)
    if kind == "fieldAccess":
        return out.get(_str(spec.get("fieldName"), f"{field}.fieldName"))
    if kind == "finalizingFieldAccess":
        return _finalized(out.get(_str(spec.get("fieldName"), f"{field}.fieldName")))
    if kind in _SKETCH_POSTS:
        return _SKETCH_POSTS[kind](spec, field, out)
    if kind == "constant":
        value = spec.get("value")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise NativeQueryError(f"{field}.value", "must be a number")
        if isinstance(value, int):
            return Col(f"CAST({value} AS BIGINT)", "long")
        return Col(f"CAST({value!r} AS DOUBLE)", "double")
    if kind == "arithmetic":
        return _arithmetic(spec, field, out)
    if kind == "expression":
        col = _expression(spec.get("expression"), out, f"{field}.expression")
        otype = spec.get("outputType")
        if otype is not None and str(otype).upper() not in ("LONG", "DOUBLE", "FLOAT", "STRING"):
            raise _unsupported(f"{field}.outputType", str(otype))
        return _typed(col, str(otype).upper() if otype else None)
    if kind in ("doubleGreatest", "doubleLeast", "longGreatest", "longLeast"):
        fields = _list(spec.get("fields"), f"{field}.fields")
        target = "long" if kind.startswith("long") else "double"
        values = [
            _cast(_post_value(f, f"{field}.fields[{i}]", out), target) for i, f in enumerate(fields)
        ]
        fn = "greatest" if kind.endswith("Greatest") else "least"
        return Col(f"{fn}({', '.join(values)})", target)
    if kind == "stddev":  # druid-stats: the square root of a variance aggregator's value
        _only(spec, field, {"type", "name", "fieldName", "estimator"})
        if spec.get("estimator") is not None:
            raise _unsupported(
                f"{field}.estimator",
                "an estimator on stddev (set it on the variance aggregator it reads)",
            )
        col = out.get(_str(spec.get("fieldName"), f"{field}.fieldName"))
        return Col(f"sqrt({_cast(col, 'double')})", "double")
    if kind == "hyperUniqueCardinality":
        col = out.get(_str(spec.get("fieldName"), f"{field}.fieldName"))
        return Col(_cast(col, "double"), "double")
    raise _unsupported(f"{field}.type", f"post-aggregator type {kind!r}")


def _finalized(col: Col) -> Col:
    """A sketch's finalized value (estimate, or count); any other value as is."""
    if col.kind not in sketch_sql.KINDS:
        return col
    return Col(
        sketch_sql.finalize(_DIALECT.get(), col.kind, col.sql), sketch_sql.FINAL_KIND[col.kind]
    )


def _sketch_field(spec: dict, field: str, out: _Outputs, kind: str, key: str = "field") -> Col:
    col = _post_value(spec.get(key), f"{field}.{key}", out)
    if col.kind != kind:
        raise NativeQueryError(f"{field}.{key}", f"must give a {kind} sketch")
    return col


def _sketch_fields(spec: dict, field: str, out: _Outputs, kind: str) -> list[Col]:
    fields = _list(spec.get("fields"), f"{field}.fields")
    if not fields:
        raise NativeQueryError(f"{field}.fields", "name at least one sketch")
    return [
        _sketch_field({"f": f}, f"{field}.fields[{i}]", out, kind, "f")
        for i, f in enumerate(fields)
    ]


def _estimate_post(spec, field, out) -> Col:
    kind = "theta" if spec["type"] == "thetaSketchEstimate" else "hll"
    if spec.get("errorBoundsStdDev") is not None:
        raise _unsupported(f"{field}.errorBoundsStdDev", "estimates with error bounds")
    col = _finalized(_sketch_field(spec, field, out, kind))
    if _bool(spec.get("round"), f"{field}.round"):
        return Col(f"CAST(round({col.sql}) AS BIGINT)", "long")
    return col


def _on_engine(sql: str | None, field: str, what: str) -> str:
    if sql is None:
        raise _unsupported(field, f"{what} on Spark SQL")
    return sql


def _theta_set_op(spec, field, out) -> Col:
    op = spec.get("func")
    if op not in ("UNION", "INTERSECT", "NOT"):
        raise NativeQueryError(f"{field}.func", "must be UNION, INTERSECT or NOT")
    parts = [c.sql for c in _sketch_fields(spec, field, out, "theta")]
    return Col(sketch_sql.theta_set_op(_DIALECT.get(), op, parts), "theta")


def _hll_union(spec, field, out) -> Col:
    lg_k = _sketch_param(spec, field, "lgK", 12)
    parts = [c.sql for c in _sketch_fields(spec, field, out, "hll")]
    return Col(sketch_sql.hll_union(_DIALECT.get(), parts, lg_k), "hll")


def _hll_bounds(spec, field, out) -> Col:
    col = _sketch_field(spec, field, out, "hll")
    devs = _int(spec.get("numStdDev", 1), f"{field}.numStdDev", minimum=1)
    if devs > 3:
        raise NativeQueryError(f"{field}.numStdDev", "must be 1, 2 or 3")
    sql = sketch_sql.hll_bounds(_DIALECT.get(), col.sql, devs)
    return Col(_on_engine(sql, f"{field}.type", "HLL error bounds"), "other")


def _doubles(value, field: str) -> list[float]:
    values = _list(value, field)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise NativeQueryError(f"{field}[{i}]", "must be a number")
    return [float(v) for v in values]


def _quantiles_post(spec, field, out) -> Col:
    family = "kll_float" if spec["type"].startswith("KllFloats") else "kll"
    col = _sketch_field(spec, field, out, family)
    kind, dialect = spec["type"].split("SketchTo", 1)[1], _DIALECT.get()
    if kind == "Quantile":  # a float of a floats sketch, as Druid returns it
        fraction = _doubles([spec.get("fraction")], f"{field}.fraction")[0]
        if not 0 <= fraction <= 1:
            raise NativeQueryError(f"{field}.fraction", "must be from 0 to 1")
        sql = sketch_sql.kll_quantile(dialect, col.sql, fraction, family)
        return Col(sql, "float" if family == "kll_float" else "double")
    if kind == "Rank":
        value = _doubles([spec.get("value")], f"{field}.value")[0]
        return Col(sketch_sql.kll_rank(dialect, col.sql, value, family), "double")
    if kind == "String":
        return Col(sketch_sql.kll_summary(dialect, col.sql, family), "string")
    if kind == "Quantiles":
        values = _doubles(spec.get("fractions"), f"{field}.fractions")
        if any(not 0 <= f <= 1 for f in values):
            raise NativeQueryError(f"{field}.fractions", "must be from 0 to 1")
    elif spec.get("numBins") is not None:
        raise _unsupported(f"{field}.numBins", "give `splitPoints`")
    else:
        values = _doubles(spec.get("splitPoints"), f"{field}.splitPoints")
    what = {"Quantiles": "quantiles", "CDF": "cdf", "Histogram": "histogram"}[kind]
    sql = sketch_sql.kll_list(dialect, what, col.sql, values)
    return Col(_on_engine(sql, f"{field}.type", f"quantilesDoublesSketchTo{kind}"), "other")


def _approx_post(spec, field, out) -> Col:
    """druid-histogram's post-aggregators over an approxHistogramFold aggregator."""
    post = spec["type"]
    if post == "buckets":
        raise _unsupported(
            f"{field}.type",
            "buckets: its breaks drop buckets by the interpolated sums of Druid's Ben-Haim "
            "histogram, which a KLL sketch does not have; use customBuckets or equalBuckets",
        )
    _, key = sketch_sql.APPROX_POSTS[post]
    _only(spec, field, {"type", "name", "fieldName"} | ({key} if key else set()))
    col = out.get(_str(spec.get("fieldName"), f"{field}.fieldName"))
    if col.kind != "approx":
        raise NativeQueryError(f"{field}.fieldName", "must name an approxHistogramFold aggregator")
    param = None
    if key == "numBuckets":
        param = str(_int(spec.get(key), f"{field}.{key}", minimum=2))
    elif key is not None:
        values = _doubles(
            spec.get(key) if key != "probability" else [spec.get(key)], f"{field}.{key}"
        )
        if key != "breaks" and any(not 0 <= v <= 1 for v in values):
            raise NativeQueryError(f"{field}.{key}", "must be from 0 to 1")
        param = sketch_sql.doubles(values) if key != "probability" else repr(values[0])
    sql = sketch_sql.approx_post(_DIALECT.get(), post, col.sql, param)
    return Col(
        _on_engine(sql, f"{field}.type", post), "float" if key in (None, "probability") else "other"
    )


_SKETCH_POSTS = {
    "thetaSketchEstimate": _estimate_post,
    "HLLSketchEstimate": _estimate_post,
    "thetaSketchSetOp": _theta_set_op,
    "HLLSketchUnion": _hll_union,
    "HLLSketchEstimateWithBounds": _hll_bounds,
    **{
        f"{family}SketchTo{k}": _quantiles_post
        for family in ("quantilesDoubles", "KllDoubles", "KllFloats")
        for k in ("Quantile", "Quantiles", "Rank", "CDF", "Histogram", "String")
    },
    **dict.fromkeys([*sketch_sql.APPROX_POSTS, "buckets"], _approx_post),
}


def _arithmetic(spec: dict, field: str, out: _Outputs) -> Col:
    fn = spec.get("fn")
    if not isinstance(fn, str) or fn not in _ARITH:
        raise NativeQueryError(f"{field}.fn", f"must be one of {', '.join(sorted(_ARITH))}")
    ordering = spec.get("ordering")
    if ordering not in (None, "numericFirst"):
        raise NativeQueryError(f"{field}.ordering", "must be numericFirst or absent")
    fields = _list(spec.get("fields"), f"{field}.fields")
    if len(fields) < 2:
        raise NativeQueryError(f"{field}.fields", "an arithmetic post-aggregator needs two fields")
    values = [
        _cast(_post_value(f, f"{field}.fields[{i}]", out), "double") for i, f in enumerate(fields)
    ]
    sql = values[0]
    for value in values[1:]:
        if fn == "/":  # Druid: division by zero is 0
            sql = f"(CASE WHEN {value} = 0 THEN 0.0 ELSE {_divide(sql, value)} END)"
        elif fn == "quotient":
            sql = _divide(sql, value)
        elif fn == "pow":
            sql = f"pow({sql}, {value})"
        else:
            sql = f"({sql} {fn} {value})"
    return Col(sql, "double")


def compile_post_aggregators(specs, known: dict[str, Col], field="postAggregations"):
    """[(name, Col)] computed over a row whose columns are `known` (name -> Col)."""
    out = _Outputs(known)
    result = []
    for i, spec in enumerate(_list(specs or [], field)):
        path = f"{field}[{i}]"
        col = _post_value(spec, path, out)
        name = _str(_obj(spec, path).get("name"), f"{path}.name")
        out.known[name] = Col(f"({col.sql})", col.kind)
        if col.kind == "approx":
            raise _unsupported(
                path,
                "an approximate histogram written as is (read it with finalizingFieldAccess "
                "or a histogram post-aggregator)",
            )
        if col.kind in sketch_sql.KINDS:  # a sketch is written as Druid writes one
            col = Col(sketch_sql.as_base64(col.sql), "string")
        result.append((name, col))
    return result


# --- queries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What to run and how to shape its rows. The SQL's first columns are the hidden
    ones the query type needs (`__bucket` epoch millis, `__total`), then `columns`."""

    query_type: str
    datasource: str
    sql: str
    columns: tuple[tuple[str, str], ...]  # (output name, kind)
    granularity: Granularity | None = None
    options: dict = field(default_factory=dict)
    timeout_ms: int | None = None
    # table -> the intervals the SQL reads it only within, though it does not filter
    # it by time (TableTimes.within): the tables must be cut to them (query.bind_query)
    cuts: dict[str, list[Interval]] = field(default_factory=dict)


_COMMON = {"queryType", "dataSource", "intervals", "filter", "virtualColumns", "context"}
_ALLOWED = {
    "timeseries": _COMMON
    | {"descending", "granularity", "aggregations", "postAggregations", "limit"},
    "topN": _COMMON
    | {"granularity", "aggregations", "postAggregations", "dimension", "threshold", "metric"},
    "groupBy": _COMMON
    | {
        "granularity",
        "aggregations",
        "postAggregations",
        "dimensions",
        "limitSpec",
        "having",
        "subtotalsSpec",
    },
    "scan": _COMMON
    | {"resultFormat", "columns", "batchSize", "limit", "offset", "order", "orderBy", "legacy"},
    "timeBoundary": _COMMON | {"bound"},
    "search": _COMMON | {"granularity", "searchDimensions", "query", "sort", "limit"},
    "dataSourceMetadata": {"queryType", "dataSource", "context"},
    "segmentMetadata": {
        "queryType",
        "dataSource",
        "intervals",
        "toInclude",
        "merge",
        "analysisTypes",
        "lenientAggregatorMerge",
        "aggregatorMergeStrategy",
        "context",
    },
}


@dataclass
class _Query:
    body: dict
    datasource: str  # the (leftmost) table read, "" for none
    intervals: list[Interval]
    cols: _Columns
    where: str
    context: dict
    relation: _Relation | None = None
    times: TableTimes | None = None


class TableTimes(Protocol):
    """What the caller knows of its tables' `__time` without reading their rows (the
    files' statistics), each of `tables` as the query sees it (its visible rows).
    `stamp`: Druid's timestamp of a granularity-`all` timeseries or topN of them
    within `intervals` (the earliest of their segments' buckets: the interval cut to
    a segment's visible part and to [its first row, +∞), filter or not), `(epoch
    ms,)`; `(None,)` if none; None if unknown (then the SQL reads the first row of
    the intervals instead, an approximation). `within`: whether
    every row of theirs is within `intervals` (False if unknown); the SQL then does
    not filter them by time."""

    def stamp(self, tables: tuple[str, ...], intervals: list[Interval]) -> tuple | None: ...

    def within(self, tables: tuple[str, ...], intervals: list[Interval]) -> bool: ...


# --- dataSources: what a query reads ---------------------------------------------------
# Each dataSource compiles to a relation: a SELECT of `__time` (a TIMESTAMP) and its
# columns, with their kinds. Tables, unions and inline rows are read as they are; a
# `query` dataSource is the subquery's results, each row stamped with its timestamp
# (0 where it has none, as Druid stamps inlined rows); a `join` is the left side with
# the right side's columns prefixed; an `unnest` is its base with one row per value.
# The query's intervals bound the rows that own `__time` (a table, the left of a
# join, the base of an unnest), so that a time filter still reaches the table's files.


@dataclass(frozen=True)
class _Relation:
    sql: str  # a SELECT of __time (TIMESTAMP) and the columns of `kinds`
    kinds: dict[str, str]  # column -> kind (as column_kinds gives them; __time: time)
    tables: tuple[str, ...] = ()  # the tables it is, each cut to the query's intervals
    unfiltered: bool = False  # whether that cut is left to the tables' files (Plan.cuts)


_EMPTY_TABLE = _Relation("SELECT CAST(NULL AS TIMESTAMP) AS __time WHERE false", {"__time": "time"})
_DATASOURCE_TYPES = ("table", "union", "inline", "query", "join", "unnest", "lookup")


def _datasource_type(spec, field: str) -> str:
    if isinstance(spec, str):
        return "table"
    kind = _type_of(_obj(spec, field), field)
    if kind not in _DATASOURCE_TYPES:
        raise NativeQueryError(
            f"{field}.type",
            f"{kind!r} is not a dataSource type; one of {', '.join(_DATASOURCE_TYPES)}",
        )
    if kind == "lookup":
        raise _unsupported(
            f"{field}.type",
            "'lookup': Strata has no query-time lookups (the lookup schema is empty)",
        )
    return kind


def datasource_names(spec, field: str = "dataSource") -> list[str]:
    """Every table a query's dataSource reads, leftmost first: a table (by name or
    object), the tables of a union, and those under a query, join or unnest."""
    kind = _datasource_type(spec, field)
    if kind == "table":
        return [_table_name(spec, field)]
    if kind == "union":
        names = _list(spec.get("dataSources"), f"{field}.dataSources")
        if not names:
            raise NativeQueryError(f"{field}.dataSources", "name at least one table")
        return [_table_name(n, f"{field}.dataSources[{i}]") for i, n in enumerate(names)]
    if kind == "query":
        return datasource_names(
            _obj(spec.get("query"), f"{field}.query").get("dataSource"), f"{field}.query.dataSource"
        )
    if kind == "join":
        return datasource_names(spec.get("left"), f"{field}.left") + datasource_names(
            spec.get("right"), f"{field}.right"
        )
    if kind == "unnest":
        return datasource_names(spec.get("base"), f"{field}.base")
    return []  # inline


def _datasource(spec) -> str:
    """The query's (leftmost) table, or "" if it reads none (inline rows)."""
    return next(iter(datasource_names(spec)), "")


def _table_name(spec, field: str) -> str:
    if isinstance(spec, dict):
        if spec.get("type") != "table":
            raise _unsupported(f"{field}.type", f"{spec.get('type')!r} (a union lists tables)")
        _only(spec, field, {"type", "name"})
        return _str(spec.get("name"), f"{field}.name")
    return _str(spec, field)


@dataclass(frozen=True)
class _Reading:
    """What compiling a dataSource needs: each table's columns (None: no such
    table), and the intervals of the query whose rows are being read."""

    tables: dict[str, dict[str, str] | None]
    intervals: list[Interval]
    times: TableTimes | None = None


def _relation(spec, field: str, reading: _Reading, bounded: bool = True) -> _Relation:
    """The relation of a dataSource; `bounded`: its time-owning rows are cut to the
    query's intervals (the right side of a join is read whole, as Druid reads it)."""
    kind = _datasource_type(spec, field)
    if kind != "table" and _spark():
        raise _unsupported(f"{field}.type", f"a {kind} dataSource on Spark SQL")
    where = _intervals_sql(reading.intervals) if bounded else None
    if kind in ("table", "union"):
        return _tables_relation(spec, field, reading, where)
    if kind == "join":
        return _join_relation(spec, field, reading, where)
    if kind == "unnest":
        return _unnest_relation(spec, field, reading, bounded)
    inner = (
        _inline_relation(spec, field) if kind == "inline" else _query_relation(spec, field, reading)
    )
    if where is None:
        return inner
    return _Relation(f"SELECT * FROM ({inner.sql}) WHERE {where}", inner.kinds)


def _tables_relation(spec, field: str, reading: _Reading, where: str | None) -> _Relation:
    """A table, or a union of tables matched by column name (each typed by the first
    table that has it), each cut to `where` so that it reads only the files it needs."""
    union = isinstance(spec, dict) and spec.get("type") == "union"
    if union:
        _only(spec, field, {"type", "dataSources"})
    names = datasource_names(spec, field)
    found = [reading.tables.get(n) for n in names]
    if union and None in found and any(k is not None for k in found):
        missing = found.index(None)
        raise NativeQueryError(
            f"{field}.dataSources[{missing}]", f"no dataSource {names[missing]!r}"
        )
    if all(k is None for k in found):
        return _EMPTY_TABLE
    kinds: dict[str, str] = {}
    for columns in found:
        for name, column_kind in columns.items():
            kinds.setdefault(name, column_kind)
    cut = f" WHERE {where}" if where else ""
    # The query's own dataSource (not a join's side nor a subquery's: the table may be
    # read whole there), whose rows in the files of the intervals all are within them.
    unfiltered = bool(
        cut
        and field == "dataSource"
        and reading.times is not None
        and reading.times.within(tuple(names), reading.intervals)
    )
    if unfiltered:
        cut = ""  # a filter by time would keep every row: the files are cut instead
    sql = " UNION ALL BY NAME ".join(f"SELECT * FROM {_q(n)}{cut}" for n in names)
    return _Relation(sql, kinds, tuple(names) if where else (), unfiltered)


_INLINE_TYPES = {
    "STRING": ("string", "VARCHAR"),
    "LONG": ("long", "BIGINT"),
    "DOUBLE": ("double", "DOUBLE"),
    "FLOAT": ("float", "FLOAT"),
}
MAX_INLINE_CHARS = 50_000  # of SQL: the relational layer parses at most 100,000


def _inline_kind(values: list, declared, field: str) -> str:
    """A column's Druid type: as declared (`columnTypes`), or from its values."""
    if declared is not None:
        name = str(declared).upper()
        if name not in _INLINE_TYPES:
            raise _unsupported(field, f"{declared!r} (STRING, LONG, DOUBLE, FLOAT)")
        return name
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "LONG"
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "DOUBLE"
    return "STRING"


def _inline_value(value, field: str) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return _lit(str(value).lower())
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"CAST({_lit(repr(value))} AS DOUBLE)"
    if isinstance(value, str):
        return _lit(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        import json  # a multi-value string, as Strata stores one: its JSON array text

        return _lit(json.dumps(value))
    raise _unsupported(field, "inline values are strings, numbers, null or lists of strings")


def _inline_columns(spec: dict, field: str) -> tuple[list[str], list, list[str]]:
    """(columnNames, rows, each column's Druid type) of an inline dataSource, checked."""
    names = [
        _str(n, f"{field}.columnNames[{i}]")
        for i, n in enumerate(_list(spec.get("columnNames"), f"{field}.columnNames"))
    ]
    if len(set(names)) != len(names):
        raise NativeQueryError(f"{field}.columnNames", "two columns share a name")
    rows = _list(spec.get("rows"), f"{field}.rows")
    for i, row in enumerate(rows):
        if len(_list(row, f"{field}.rows[{i}]")) != len(names):
            raise NativeQueryError(
                f"{field}.rows[{i}]", f"has {len(row)} values for {len(names)} columnNames"
            )
        if "__time" in names:
            stamp = row[names.index("__time")]
            if isinstance(stamp, bool) or not isinstance(stamp, int):
                path = f"{field}.rows[{i}][{names.index('__time')}]"
                raise NativeQueryError(path, "__time is epoch millis")
    declared = spec.get("columnTypes")
    declared = [None] * len(names) if declared is None else _list(declared, f"{field}.columnTypes")
    if len(declared) != len(names):
        raise NativeQueryError(f"{field}.columnTypes", "give one type per column name")
    types = [
        _inline_kind([r[j] for r in rows], t, f"{field}.columnTypes[{j}]")
        for j, t in enumerate(declared)
    ]
    return names, rows, types


def _inline_relation(spec: dict, field: str) -> _Relation:
    """Rows given in the query (`columnNames`, `rows`, optional `columnTypes`);
    `__time`, if a column, is epoch millis; otherwise every row is at 0, as in Druid."""
    _only(spec, field, {"type", "columnNames", "columnTypes", "rows"})
    names, rows, types = _inline_columns(spec, field)
    items, kinds = [], {"__time": "time"}
    if "__time" not in names:
        items.append(f"{_epoch_to_ts('0')} AS __time")
    for j, (name, type_name) in enumerate(zip(names, types, strict=True)):
        kind, sql_type = _INLINE_TYPES[type_name]
        if name == "__time":
            items.append(f"{_epoch_to_ts(f'CAST(c{j} AS BIGINT)')} AS __time")
            continue
        kinds[name] = kind
        items.append(f"TRY_CAST(c{j} AS {sql_type}) AS {_q(name)}")
    values = ", ".join(
        "("
        + ", ".join(_inline_value(v, f"{field}.rows[{i}][{j}]") for j, v in enumerate(row))
        + ")"
        for i, row in enumerate(rows)
    )
    columns = ", ".join(f"c{j}" for j in range(len(names)))
    if rows and names:
        source = f"(VALUES {values}) AS __inline({columns})"
    elif rows:  # rows with no column
        source = f"(VALUES {', '.join('(1)' for _ in rows)}) AS __inline(c)"
    else:  # the columns, with no row
        nulls = ", ".join(f"NULL AS c{j}" for j in range(len(names))) or "1 AS c"
        source = f"(SELECT {nulls}) AS __inline WHERE false"
    sql = f"SELECT {', '.join(items)} FROM {source}"
    if len(sql) > MAX_INLINE_CHARS:
        raise _unsupported(
            f"{field}.rows",
            f"an inline dataSource over {MAX_INLINE_CHARS} characters of SQL; load it as a dataSource",
        )
    return _Relation(sql, kinds)


def _epoch_to_ts(ms: str) -> str:
    """Epoch millis as a (naive UTC) TIMESTAMP."""
    return f"timestamp_millis({ms})" if _spark() else f"epoch_ms({ms})"


_SUBQUERY_TYPES = ("timeseries", "topN", "groupBy", "scan")


def _query_relation(spec: dict, field: str, reading: _Reading) -> _Relation:
    """A subquery's results as rows: `__time` is each row's timestamp (scan: its
    `__time` column, or 0), then its output columns."""
    _only(spec, field, {"type", "query"})
    body = _obj(spec.get("query"), f"{field}.query")
    kind = body.get("queryType")
    if kind not in _SUBQUERY_TYPES:
        raise _unsupported(
            f"{field}.query.queryType",
            f"{kind!r} as a subquery (one of {', '.join(_SUBQUERY_TYPES)})",
        )
    try:
        inner = _compile(body, reading.tables, None)
    except NativeQueryError as exc:
        raise NativeQueryError(
            f"{field}.query.{exc.field}".rstrip("."),
            str(exc).removeprefix(f"{exc.field}: "),
            unsupported=exc.unsupported,
        ) from None
    names = [n for n, _ in inner.columns]
    kinds = {"__time": "time"} | {n: k for n, k in inner.columns if n != "__time"}
    cols = ", ".join(_q(n) for n in names if n != "__time")
    cols = f", {cols}" if cols else ""
    if kind == "scan":
        stamp = _epoch_to_ts("CAST(__time AS BIGINT)") if "__time" in names else _epoch_to_ts("0")
        return _Relation(f"SELECT {stamp} AS __time{cols} FROM ({inner.sql})", kinds)
    # Druid's eternity starts before the engine's first timestamp: clamp it to that.
    stamp = _epoch_to_ts(f"greatest(__bucket, {_ms(MIN_TS)})")
    sql = f"SELECT {stamp} AS __time{cols} FROM ({inner.sql})"
    if kind == "timeseries":  # without the grand total, and within its limit
        limit = inner.options.get("limit")
        sql += " WHERE __total = 0" + (f" LIMIT {limit}" if limit is not None else "")
    return _Relation(sql, kinds)


class _Side(_Columns):
    """A side of a join: its columns, qualified by the side's alias."""

    def __init__(self, kinds: dict[str, str], alias: str) -> None:
        super().__init__(kinds)
        self.alias = alias

    def get(self, name: str) -> Col:
        if name == "__time" and self.schema.get(name) == "time":
            return Col(_epoch_ms(f"{self.alias}.__time"), "long")
        kind = self.schema.get(name)
        return _NULL if kind is None else Col(f"{self.alias}.{_q(name)}", kind)


def _join_relation(spec: dict, field: str, reading: _Reading, where: str | None) -> _Relation:
    """`left` joined with `right` (INNER or LEFT) on equalities of a left expression
    and a right column (`condition`, a Druid expression); the right side's columns
    are named with `rightPrefix`, and shadow the left's of the same names."""
    _only(spec, field, {"type", "left", "right", "rightPrefix", "condition", "joinType"})
    prefix = _str(spec.get("rightPrefix"), f"{field}.rightPrefix")
    if "__time".startswith(prefix):
        raise NativeQueryError(f"{field}.rightPrefix", "must not be a prefix of __time")
    join_type = str(spec.get("joinType") or "").upper()
    if join_type in ("RIGHT", "FULL"):
        raise _unsupported(
            f"{field}.joinType",
            f"{join_type} joins (Druid's are not always correct): INNER or LEFT",
        )
    if join_type not in ("INNER", "LEFT"):
        raise NativeQueryError(f"{field}.joinType", "must be INNER or LEFT")
    right_spec = spec.get("right")
    if _datasource_type(right_spec, f"{field}.right") in ("table", "union"):
        raise _unsupported(
            f"{field}.right.type",
            "a table on the right of a join (Druid joins only broadcast tables there); "
            'read it through a "query" dataSource (a scan of it)',
        )
    left = _relation(spec.get("left"), f"{field}.left", reading, where is not None)
    right = _relation(right_spec, f"{field}.right", reading, bounded=False)
    kept = {n: k for n, k in left.kinds.items() if not n.startswith(prefix)}
    renamed = {prefix + n: ("long" if k == "time" else k) for n, k in right.kinds.items()}
    on = _join_condition(
        spec.get("condition"), f"{field}.condition", _Side(kept, "__l"), _Side(renamed, "__r")
    )
    right_items = ", ".join(
        f"{_epoch_ms('__time') if k == 'time' else _q(n)} AS {_q(prefix + n)}"
        for n, k in right.kinds.items()
    )
    left_items = ", ".join(f"__l.{_q(n)}" for n in kept)
    sql = (
        f"SELECT {left_items}, __r.* FROM ({left.sql}) AS __l {join_type} JOIN "
        f"(SELECT {right_items} FROM ({right.sql})) AS __r ON {on}"
    )
    return _Relation(sql, kept | renamed)


def _join_condition(text, field: str, left: _Side, right: _Side) -> str:
    """A join condition: `1` (every pair), or equalities `left-expression ==
    right-column` joined with `&&`; a right column is compared as the left value
    cast to its type, and null matches nothing."""
    root = _parsed(text, field)
    if isinstance(root, LongLiteral) and root.value == 1:
        return "true"
    terms, stack = [], [root]
    while stack:
        node = stack.pop()
        if isinstance(node, Binary) and node.op == "&&":
            stack += [node.right, node.left]
        elif isinstance(node, Binary) and node.op == "==":
            terms.append(_join_equality(node, field, left, right))
        else:
            raise _unsupported(
                field,
                "a join condition is equalities (==) of a left expression and a right column, joined with &&",
            )
    return " AND ".join(terms)


def _join_equality(node, field: str, left: _Side, right: _Side) -> str:
    sides = [node.left, node.right]
    named = [isinstance(s, Identifier) and s.name in right.schema for s in sides]
    if named.count(True) != 1:
        raise _unsupported(
            field,
            "each equality names exactly one column of the right side (rightPrefix + its name)",
        )
    column = right.get(sides[named.index(True)].name)
    result = _emitted(sides[named.index(False)], left, field)
    kind = result.kind if result.kind in ("long", "double", "string") else "other"
    value = Col(result.sql, kind)
    target = "double" if column.kind == "float" else column.kind
    if target not in ("long", "double", "string"):
        raise _unsupported(field, f"a join on a {column.kind} column")
    return f"{_cast(value, target)} = {_cast(column, target)}"


def _unnest_relation(spec: dict, field: str, reading: _Reading, bounded: bool) -> _Relation:
    """`base` with one row per value of `virtualColumn` (an expression: each element
    of an array, each value of a multi-value string, a scalar once; a multi-value
    string's row without values gives one null row, as Druid's unnest cursor over a
    dimension does (apache/druid#13764); a null array or scalar gives none), kept
    where `unnestFilter` holds."""
    _only(spec, field, {"type", "base", "virtualColumn", "unnestFilter"})
    base = _relation(spec.get("base"), f"{field}.base", reading, bounded)
    path = f"{field}.virtualColumn"
    column = _obj(spec.get("virtualColumn"), path)
    if column.get("type") != "expression":
        raise _unsupported(f"{path}.type", f"{column.get('type')!r} (only expression)")
    _only(column, path, {"type", "name", "expression", "outputType"})
    name = _str(column.get("name"), f"{path}.name")
    result = _emitted(
        _parsed(column.get("expression"), f"{path}.expression"),
        _Columns(base.kinds),
        f"{path}.expression",
    )
    if result.kind.startswith("array<"):
        values, kind = result.sql, result.kind[len("array<") : -1]
    elif result.kind == "string":
        values, kind = f"coalesce(druid_mv({result.sql}), [NULL::VARCHAR])", "string"
    elif result.kind in ("long", "double"):
        values, kind = (
            f"CASE WHEN ({result.sql}) IS NULL THEN [] ELSE [{result.sql}] END",
            result.kind,
        )
    else:
        raise _unsupported(f"{path}.expression", f"unnesting a {result.kind} value")
    kind = kind if kind in ("long", "double", "string") else "other"
    kinds = {n: k for n, k in base.kinds.items() if n != name} | {name: kind}
    kept = ", ".join(_q(n) for n in base.kinds if n != name)
    sql = f"SELECT {kept}, unnest({values}) AS {_q(name)} FROM ({base.sql})"
    if spec.get("unnestFilter") is not None:
        cond = compile_filter(spec["unnestFilter"], _Columns(kinds), f"{field}.unnestFilter")
        sql = f"SELECT * FROM ({sql}) WHERE {cond}"
    return _Relation(sql, kinds)


def _json_path(spec: dict, field: str) -> str:
    """A nested-field column's JSONPath, from `path` (JSONPath, or jq with
    `useJqSyntax`) or `pathParts`."""
    if spec.get("pathParts") is not None:
        path = "$"
        for i, part in enumerate(_list(spec["pathParts"], f"{field}.pathParts")):
            part = _obj(part, f"{field}.pathParts[{i}]")
            if part.get("type") == "field":
                path += "." + _str(part.get("field"), f"{field}.pathParts[{i}].field")
            elif part.get("type") == "arrayElement":
                path += f"[{_int(part.get('index'), f'{field}.pathParts[{i}].index')}]"
            else:
                raise NativeQueryError(
                    f"{field}.pathParts[{i}].type", "must be field or arrayElement"
                )
        return path
    path = _str(spec.get("path"), f"{field}.path")
    if _bool(spec.get("useJqSyntax"), f"{field}.useJqSyntax"):
        return "$" + (path if path.startswith(("[", ".")) else "." + path)
    return path


def _nested_field(spec: dict, field: str) -> tuple[str, str, str | None]:
    """(name, Druid expression, output type) of a `nested-field` virtual column."""
    allowed = {"type", "columnName", "outputName", "expectedType", "path", "pathParts"}
    _only(spec, field, allowed | {"processFromRaw", "useJqSyntax", "useStringValueOfNullLiteral"})
    column = _str(spec.get("columnName"), f"{field}.columnName")
    name = _str(spec.get("outputName"), f"{field}.outputName")
    path, ref = expression_literal(_json_path(spec, field)), ident(column)
    expected = str(spec.get("expectedType") or "STRING").upper().replace(" ", "")
    if expected.startswith("COMPLEX"):
        return name, f"json_query({ref}, {path})", None
    if expected in ("LONG", "DOUBLE", "FLOAT", "STRING"):
        return name, f"json_value({ref}, {path}, '{expected}')", expected
    if expected in ("ARRAY<LONG>", "ARRAY<DOUBLE>", "ARRAY<STRING>"):
        return name, f"json_value({ref}, {path}, '{expected}')", None
    raise _unsupported(
        f"{field}.expectedType", f"{expected} (STRING, LONG, DOUBLE, ARRAY, COMPLEX<json>)"
    )


def _virtual_columns(specs) -> dict[str, tuple]:
    out = {}
    for i, spec in enumerate(_list(specs or [], "virtualColumns")):
        path = f"virtualColumns[{i}]"
        spec = _obj(spec, path)
        if spec.get("type") == "nested-field":
            name, expression, otype = _nested_field(spec, path)
            out[name] = (expression, otype, path)
            continue
        if spec.get("type") != "expression":
            raise _unsupported(
                f"{path}.type", f"{spec.get('type')!r} (only expression and nested-field)"
            )
        _only(spec, path, {"type", "name", "expression", "outputType"})
        otype = spec.get("outputType")
        otype = str(otype).upper() if otype else None
        if otype not in (None, "LONG", "DOUBLE", "FLOAT", "STRING"):
            raise _unsupported(f"{path}.outputType", f"{otype} (LONG, DOUBLE, FLOAT, STRING)")
        name = _str(spec.get("name"), f"{path}.name")
        out[name] = (spec.get("expression"), otype, f"{path}.expression")
    return out


def _parse_common(body: dict, tables: dict[str, dict[str, str] | None], times=None) -> _Query:
    kind = body["queryType"]
    for key in body:
        if key not in _ALLOWED[kind]:
            raise _unsupported(key, f"is not a {kind} query field here")
    context = _obj(body.get("context") or {}, "context")
    _check_context(context)
    optional = kind in ("timeBoundary", "dataSourceMetadata", "segmentMetadata")
    intervals = parse_intervals(body.get("intervals"), required=not optional)
    spec = body.get("dataSource")
    if optional and _datasource_type(spec, "dataSource") != "table":
        raise _unsupported("dataSource.type", f"a {spec.get('type')} dataSource in a {kind} query")
    # Only these read their dataSource through the relation alone, cut to the intervals.
    cut_by_files = times if kind in ("timeseries", "topN", "groupBy") else None
    relation = _relation(spec, "dataSource", _Reading(tables, intervals, cut_by_files))
    cols = _Columns(relation.kinds, _virtual_columns(body.get("virtualColumns")))
    for name in cols.virtual:
        cols.get(name)  # validate every virtual column, used or not
    where = "true"
    if body.get("filter") is not None:
        where = compile_filter(body["filter"], cols)
    return _Query(body, _datasource(spec), intervals, cols, where, context, relation, times)


def _base(q: _Query) -> str:
    """The rows of the query's dataSource within its intervals (`_relation`)."""
    return f"__base AS ({q.relation.sql})"


def _aggregators(q: _Query) -> list[Agg]:
    aggs = [
        compile_aggregator(spec, f"aggregations[{i}]", q.cols)
        for i, spec in enumerate(_list(q.body.get("aggregations") or [], "aggregations"))
    ]
    names = [a.name for a in aggs]
    if len(set(names)) != len(names):
        raise NativeQueryError("aggregations", "two aggregators share a name")
    return aggs


# Druid's query context (docs/querying/query-context.md). Keys that tune how Druid
# runs a query (caching, priority and lanes, ids, vectorization, merge buffers) are
# accepted and change nothing here, their values checked as Druid checks them; the
# keys Strata reads (timeout, skipEmptyBuckets, grandTotal, sortByDimsFirst,
# resultAsArray) do what Druid's do; values asking for results Strata does not
# produce (per-segment results, unfinalized aggregators, timestamps as longs) are
# refused naming the key. Druid ignores keys it does not know, and so does Strata.
_CONTEXT_BOOLEANS = frozenset(
    [
        "useCache",
        "populateCache",
        "useResultLevelCache",
        "populateResultLevelCache",
        "debug",
        "skipEmptyBuckets",
        "grandTotal",
        "sortByDimsFirst",
        "resultAsArray",
        "enableUnnest",
        "useNativeQueryExplain",
        "setProcessingThreadNames",
        "applyLimitPushDown",
        "forceLimitPushDown",
        "applyLimitPushDownToSegment",
        "groupByIsSingleThreaded",
        "enableParallelMerge",
        "useFilterCNF",
        "secondaryPartitionPruning",
        "enableJoinFilterPushDown",
        "enableJoinFilterRewrite",
        "enableJoinFilterRewriteValueColumnFilters",
        "enableRewriteJoinToFilter",
        "enableJoinLeftTableScanDirect",
        "forceHashAggregation",
        "forcePushDownNestedQuery",
        "sqlStringifyArrays",
        "useApproximateCountDistinct",
        "useApproximateTopN",
        "groupByEnableMultiValueUnnesting",
        "enableTimeBoundaryPlanning",
    ]
)
_CONTEXT_NUMBERS = frozenset(
    [
        "timeout",
        "priority",
        "minTopNThreshold",
        "maxScatterGatherBytes",
        "maxQueuedBytes",
        "vectorSize",
        "sqlOuterLimit",
        "maxSubqueryRows",
        "maxSubqueryBytes",
        "uncoveredIntervalsLimit",
        "parallelMergeParallelism",
        "parallelMergeInitialYieldRows",
        "parallelMergeSmallBatchRows",
        "maxOnDiskStorage",
        "bufferGrouperInitialBuckets",
        "maxMergingDictionarySize",
        "maxNumericInFilters",
        "inSubQueryThreshold",
        "numParallelCombineThreads",
    ]
)
_CONTEXT_TEXTS = frozenset(
    [
        "queryId",
        "sqlQueryId",
        "subQueryId",
        "lane",
        "brokerService",
        "queryResourceId",
        "sqlTimeZone",
        "vectorize",
        "vectorizeVirtualColumns",
    ]
)
# key -> (the value Strata cannot honour, what it would ask for)
_CONTEXT_REFUSED = {
    "bySegment": (True, "results per segment"),
    "finalize": (False, "unfinalized aggregator values"),
    "serializeDateTimeAsLong": (True, "timestamps as epoch millis"),
    "serializeDateTimeAsLongInner": (True, "timestamps as epoch millis"),
}


def _check_context(context: dict) -> None:
    for key, value in context.items():
        field = f"context.{key}"
        if key in _CONTEXT_REFUSED:
            refused, what = _CONTEXT_REFUSED[key]
            if _bool(value, field, default=not refused) == refused:
                raise _unsupported(field, f"{what} are not produced here")
        elif key in _CONTEXT_BOOLEANS:
            _bool(value, field)
        elif key in _CONTEXT_NUMBERS and value is not None:
            if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]+\s*", value):
                value = int(value)  # Druid reads numbers given as strings too
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise NativeQueryError(field, "must be a number")
        elif key in _CONTEXT_TEXTS and isinstance(value, dict | list):
            raise NativeQueryError(field, "must be a string")


def _timeout(context: dict) -> int | None:
    value = context.get("timeout")
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return _int(value, "context.timeout")


def _select_list(items: list[tuple[str, str]]) -> str:
    return ", ".join(f"{sql} AS {_q(name)}" for name, sql in items)


def _first_start_ms(q: _Query) -> int:
    """The start of the query's first interval (Druid sorts them), as epoch millis."""
    start = min(iv.start for iv in q.intervals)
    return ETERNITY_START_MS if start == MIN_TS else _ms(start)


def _timeseries_buckets(q: _Query, gran: Granularity, aggs: list[Agg], skip: bool) -> list[str]:
    """The CTEs `__grouped` (a row per bucket with data) and `__filled` (with the
    empty buckets Druid fills, unless `skip`) of a timeseries. Without a filter the
    time span of the rows is read in the grouping's own pass over them."""
    agg_sql = [(a.name, a.sql) for a in aggs]
    one_pass = q.where == "true"
    known = _known_stamp_sql(q) if gran.kind == "all" else None
    ctes = (
        []
        if one_pass or known
        else ["__span AS (SELECT min(__time) AS lo, max(__time) AS hi FROM __base)"]
    )
    if gran.kind == "all":
        having = " HAVING COUNT(*) > 0" if skip else ""
        # One row even if the filter matches nothing; with no data in the intervals,
        # Druid's broker adds one stamped with the first one's start, the intervals
        # sorted (getNullTimeseriesResultValue)
        empty = "" if skip or not q.intervals else f", {_first_start_ms(q)}"
        stamp = f"coalesce({known or _epoch_ms('__span.lo')}{empty})"
        grouped = (
            f"SELECT coalesce({_epoch_ms('min(__time)')}{empty}) AS __bucket{_comma(agg_sql)} "
            f"FROM __base{having}"
            if one_pass and not known
            else f"SELECT {stamp} AS __bucket, g.* FROM {'' if known else '__span, '}"
            f"(SELECT {_select_list(agg_sql) or '1 AS __one'} FROM __base "
            f"WHERE {q.where}{having}) AS g"
        )
        return ctes + [f"__grouped AS ({grouped})", "__filled AS (SELECT * FROM __grouped)"]
    grouped = (
        f"SELECT {gran.bucket_ms('__time')} AS __bucket{_comma(agg_sql)} "
        f"FROM __base WHERE {q.where} GROUP BY 1"
    )
    ctes.append(f"__grouped AS ({grouped})")
    if skip or gran.kind == "none":
        return ctes + ["__filled AS (SELECT * FROM __grouped)"]
    if one_pass:  # the first and last buckets' starts span the same buckets
        first, last = _epoch_to_ts("min(__bucket)"), _epoch_to_ts("max(__bucket)")
        ctes[-1] = f"__grouped AS{_materialized()} ({grouped})"  # read twice
        ctes.append(f"__span AS (SELECT {first} AS lo, {last} AS hi FROM __grouped)")
    keep = " OR ".join(
        f"(__bucket >= {gran.bucket_ms(_ts_lit(iv.start))} AND __bucket < {_ms(iv.end)})"
        for iv in q.intervals
    )
    fill = [(a.name, f"coalesce(__grouped.{_q(a.name)}, {a.empty})") for a in aggs]
    filled = (
        f"SELECT __buckets.__bucket{_comma(fill)} FROM __buckets LEFT JOIN __grouped "
        f"USING (__bucket) WHERE {keep}"
    )
    return ctes + [f"__buckets AS ({gran.series()})", f"__filled AS ({filled})"]


def _timeseries(q: _Query) -> Plan:
    gran = parse_granularity(q.body.get("granularity"))
    aggs = _aggregators(q)
    posts = compile_post_aggregators(
        q.body.get("postAggregations"), {a.name: a.col() for a in aggs}
    )
    skip = _bool(q.context.get("skipEmptyBuckets"), "context.skipEmptyBuckets")
    total = _bool(q.context.get("grandTotal"), "context.grandTotal")
    agg_sql = [(a.name, a.sql) for a in aggs]
    ctes = [_base(q), *_timeseries_buckets(q, gran, aggs, skip)]
    rows = (
        f"SELECT __bucket, 0 AS __total{_comma([(a.name, _q(a.name)) for a in aggs])} FROM __filled"
    )
    if total:
        rows += f" UNION ALL SELECT NULL, 1{_comma(agg_sql)} FROM __base WHERE {q.where}"
    order = "DESC" if _bool(q.body.get("descending"), "descending") else "ASC"
    outputs = [(a.name, a.out()) for a in aggs] + [(n, c.sql) for n, c in posts]
    sql = (
        f"WITH {', '.join(ctes)} SELECT __bucket, __total{_comma(outputs)} FROM ({rows}) "
        f"ORDER BY __total, __bucket {order}"
    )
    limit = q.body.get("limit")
    return Plan(
        "timeseries",
        q.datasource,
        sql,
        tuple([(a.name, a.kind) for a in aggs] + [(n, c.kind) for n, c in posts]),
        gran,
        {"limit": None if limit is None else _int(limit, "limit")},
    )


def _comma(items: list[tuple[str, str]]) -> str:
    return (", " + _select_list(items)) if items else ""


def _dimension_sql(q: _Query, spec, field: str) -> tuple[str, str, str]:
    """(output name, SQL, kind) of a dimension: strings unless an outputType says otherwise."""
    dim = full_dimension_spec(spec, field)
    col = q.cols.get(dim.dimension)
    if col.kind in ("sketch", "pair", "variance", "other"):
        raise _unsupported(field, f"grouping on a {col.kind} column")
    if dim.transform is not None:
        is_time = dim.dimension == "__time" and dim.dimension not in q.cols.virtual
        col = _extracted(col, dim.transform, "time" if is_time else col.kind, field)
    kind = dim.output_type
    return dim.output_name, _cast(col, "double" if kind == "float" else kind), kind


def _materialized() -> str:
    """What makes DuckDB compute a CTE read twice once (Spark SQL has no such word)."""
    return "" if _spark() else " MATERIALIZED"


def _known_stamp(q: _Query) -> tuple | None:
    """`TableTimes.stamp` of the query's own tables, or None if unknown."""
    if q.times is None or not q.relation.tables:
        return None
    return q.times.stamp(q.relation.tables, q.intervals)


def _known_stamp_sql(q: _Query) -> str | None:
    """Druid's timestamp of a granularity-`all` result (`TableTimes.stamp`) as an
    epoch millis literal, if the caller knows it without the rows (`compile_query`)."""
    known = _known_stamp(q)
    if known is None:
        return None
    return "CAST(NULL AS BIGINT)" if known[0] is None else f"CAST({int(known[0])} AS BIGINT)"


def _first_time(q: _Query) -> tuple[str, str, str]:
    """(the SQL of a granularity `all` result's timestamp, as epoch millis; a CTE to
    add after __base; a column to add to __grouped). Known (Druid's, from the files):
    a literal. Else the first row of the intervals, matched or not: without a filter
    the grouping reads it in the same pass (`__lo`); with one, a CTE of its own."""
    known = _known_stamp_sql(q)
    if known is not None:
        return known, "", ""
    if q.where == "true":
        return f"(SELECT {_epoch_ms('min(__lo)')} FROM __grouped)", "", ", min(__time) AS __lo"
    span = ", __span AS (SELECT min(__time) AS lo FROM __base)"
    return f"(SELECT {_epoch_ms('lo')} FROM __span)", span, ""


def _grouped_bucket(q: _Query, gran: Granularity) -> tuple[str, str]:
    """(bucket SQL, extra FROM) for a grouping query's time buckets."""
    if gran.kind == "all":
        return _epoch_ms("__span.lo"), ", __span"
    return gran.bucket_ms("__time"), ""


def _metric_order(spec, names: dict[str, str], dim: str, field: str = "metric"):
    """(ORDER BY for the ranking, extra WHERE) from a TopNMetricSpec."""
    if isinstance(spec, str):
        spec = {"type": "numeric", "metric": spec}
    spec = _obj(spec, field)
    kind = _type_of(spec, field)
    if kind == "inverted":
        order, where = _metric_order(spec.get("metric"), names, dim, f"{field}.metric")
        flipped = {"ASC NULLS FIRST": "DESC NULLS LAST", "DESC NULLS LAST": "ASC NULLS FIRST"}
        parts = [p.rsplit(" ", 3) for p in order]
        order = [f"{e} {flipped[' '.join(rest)]}" for e, *rest in parts]
        inner = spec.get("metric")
        if isinstance(inner, str) or (isinstance(inner, dict) and inner.get("type") == "numeric"):
            # Druid inverts the metric's comparator only: ties stay by the dimension
            # ascending, null first (TopNNumericResultBuilder)
            order[-1] = f"{_q(dim)} ASC NULLS FIRST"
        return order, where and f"NOT {where}"
    if kind == "numeric":
        metric = _str(spec.get("metric"), f"{field}.metric")
        if metric not in names:
            raise NativeQueryError(
                f"{field}.metric", f"{metric!r} is not an aggregator or post-aggregator"
            )
        return [f"{_q(metric)} DESC NULLS LAST", f"{_q(dim)} ASC NULLS FIRST"], None
    if kind in ("dimension", "lexicographic"):
        ordering = _ordering(spec, field) if kind == "dimension" else "lexicographic"
        col = Col(_q(dim), "string")
        keys = {
            "lexicographic": [col.sql],
            "numeric": [f"TRY_CAST({col.sql} AS DOUBLE)", col.sql],
            "strlen": [f"length({col.sql})", col.sql],
        }[ordering]
        stop = spec.get("previousStop")
        where = _compare(col, ">", stop, ordering) if stop is not None else None
        return [f"{k} ASC NULLS FIRST" for k in keys], where
    raise _unsupported(f"{field}.type", f"topN metric spec {kind!r}")


def _topn(q: _Query) -> Plan:
    gran = parse_granularity(q.body.get("granularity"))
    dim, dim_sql, dim_kind = _dimension_sql(q, q.body.get("dimension"), "dimension")
    threshold = _int(q.body.get("threshold"), "threshold", minimum=1)
    aggs = _aggregators(q)
    known = {dim: Col(_q(dim), dim_kind), **{a.name: a.col() for a in aggs}}
    posts = compile_post_aggregators(q.body.get("postAggregations"), known)
    names = {a.name: a.kind for a in aggs} | {n: c.kind for n, c in posts}
    order, where = _metric_order(q.body.get("metric"), names, dim)
    items = [(dim, dim_sql)] + [(a.name, a.sql) for a in aggs]
    outputs = [(dim, _q(dim))] + [(a.name, a.out()) for a in aggs] + [(n, c.sql) for n, c in posts]
    chosen = _comma([(n, _q(n)) for n, _ in outputs])
    if gran.kind == "all":  # one bucket: the first `threshold` rows in order, as SQL's LIMIT
        bucket, span, lo = _first_time(q)
        shared = _materialized() if lo else ""  # read twice: for the stamp and the rows
        sql = (
            f"WITH {_base(q)}{span}, __grouped AS{shared} (SELECT {_select_list(items)}{lo} "
            f"FROM __base WHERE {q.where} GROUP BY 1), "
            f"__post AS (SELECT {_select_list(outputs)} FROM __grouped) "
            f"SELECT {bucket} AS __bucket{chosen} FROM __post WHERE {where or 'true'} "
            f"ORDER BY {', '.join(order)} LIMIT {threshold}"
        )
    else:  # the first `threshold` rows of each bucket
        sql = (
            f"WITH {_base(q)}, __grouped AS (SELECT {gran.bucket_ms('__time')} AS __bucket"
            f"{_comma(items)} FROM __base WHERE {q.where} GROUP BY 1, 2), "
            f"__post AS (SELECT __bucket{_comma(outputs)} FROM __grouped), "
            f"__ranked AS (SELECT *, row_number() OVER (PARTITION BY __bucket ORDER BY "
            f"{', '.join(order)}) AS __rank FROM __post WHERE {where or 'true'}) "
            f"SELECT __bucket{chosen} FROM __ranked WHERE __rank <= {threshold} "
            f"ORDER BY __bucket, __rank"
        )
    columns = [(dim, dim_kind)] + [(a.name, a.kind) for a in aggs] + [(n, c.kind) for n, c in posts]
    # Where the stamp is known, a filter matching nothing still answers its bucket
    # (TopNQueryEngine maps each segment's cursor to a result, of no values then).
    known = _known_stamp(q) if gran.kind == "all" else None
    stamp = {"stamp": known[0]} if known else {}
    return Plan("topN", q.datasource, sql, tuple(columns), gran, stamp)


def _having(spec, field: str, row: _Outputs) -> str:
    spec = _obj(spec, field)
    kind = _type_of(spec, field)
    if kind in ("and", "or"):
        specs = _list(spec.get("havingSpecs"), f"{field}.havingSpecs")
        word = " AND " if kind == "and" else " OR "
        return (
            "("
            + (
                word.join(_having(s, f"{field}.havingSpecs[{i}]", row) for i, s in enumerate(specs))
                or "true"
            )
            + ")"
        )
    if kind == "not":
        return f"(NOT {_having(spec.get('havingSpec'), f'{field}.havingSpec', row)})"
    if kind in ("greaterThan", "lessThan", "equalTo"):
        name = _str(spec.get("aggregation"), f"{field}.aggregation")
        value = _number(spec.get("value"))
        if value is None:
            raise NativeQueryError(f"{field}.value", "must be a number")
        op = {"greaterThan": ">", "lessThan": "<", "equalTo": "="}[kind]
        return f"({_cast(row.get(name), 'double')} {op} {value!r})"
    if kind == "dimSelector":
        if spec.get("extractionFn") is not None:
            raise _unsupported(f"{field}.extractionFn", "extraction functions are not supported")
        col = row.get(_str(spec.get("dimension"), f"{field}.dimension"))
        value = spec.get("value")
        return (
            f"({col.sql} IS NULL)"
            if value is None
            else f"({_cast(col, 'string')} = {_lit(str(value))})"
        )
    if kind == "filter":
        return compile_filter(spec.get("filter"), row, f"{field}.filter")
    if kind in ("always", "never"):
        return "true" if kind == "always" else "false"
    raise _unsupported(f"{field}.type", f"having spec {kind!r}")


def _limit_order(
    q: _Query, spec, kinds: dict[str, str], dims: list[str], gran
) -> tuple[list, int | None, int]:
    """(ORDER BY terms, limit, offset) from a groupBy's limitSpec."""
    spec = _obj(spec or {"type": "default"}, "limitSpec")
    if spec.get("type", "default") != "default":
        raise _unsupported("limitSpec.type", f"{spec.get('type')!r} (only default)")
    _only(spec, "limitSpec", {"type", "columns", "limit", "offset"})
    terms = []
    for i, c in enumerate(_list(spec.get("columns") or [], "limitSpec.columns")):
        path = f"limitSpec.columns[{i}]"
        c = {"dimension": c} if isinstance(c, str) else _obj(c, path)
        name = _str(c.get("dimension"), f"{path}.dimension")
        if name not in kinds:
            raise NativeQueryError(f"{path}.dimension", f"{name!r} is not an output column")
        direction = str(c.get("direction") or "ascending").lower()
        if direction not in ("ascending", "descending", "asc", "desc"):
            raise NativeQueryError(f"{path}.direction", "must be ascending or descending")
        ordering = _ordering({"ordering": c.get("dimensionOrder")}, path)
        key = _q(name)
        if kinds[name] == "string" and ordering == "numeric":
            key = f"TRY_CAST({key} AS DOUBLE)"
        elif kinds[name] == "string" and ordering == "strlen":
            key = f"length({key}), {key}"
        desc = direction.startswith("desc")
        terms += [
            f"{k} {'DESC NULLS LAST' if desc else 'ASC NULLS FIRST'}" for k in key.split(", ")
        ]
    limit = spec.get("limit")
    limit = None if limit is None else _int(limit, "limitSpec.limit")
    offset = _int(spec.get("offset") or 0, "limitSpec.offset")
    # Druid orders by time first (unless sortByDimsFirst), then the limitSpec, then the
    # dimensions, in which order the groups come out of its merge.
    tail = [f"{_q(d)} ASC NULLS FIRST" for d in dims]
    by_dims = _bool(q.context.get("sortByDimsFirst"), "context.sortByDimsFirst")
    if gran.kind == "all":
        return terms + tail, limit, offset
    if by_dims:
        return terms + tail + ["__bucket ASC"], limit, offset
    return ["__bucket ASC"] + terms + tail, limit, offset


def _subtotals(spec, names: list[str]) -> list[list[str]] | None:
    """subtotalsSpec: sets of the dimensions' output names, each in their order."""
    if spec is None:
        return None
    sets = []
    for i, names_i in enumerate(_list(spec, "subtotalsSpec")):
        chosen = [
            _str(n, f"subtotalsSpec[{i}][{j}]")
            for j, n in enumerate(_list(names_i, f"subtotalsSpec[{i}]"))
        ]
        unknown = [n for n in chosen if n not in names]
        if unknown:
            raise NativeQueryError(
                f"subtotalsSpec[{i}]", f"{unknown[0]!r} is not an outputName of `dimensions`"
            )
        sets.append(chosen)
    if not sets:
        raise NativeQueryError("subtotalsSpec", "give at least one set of dimensions")
    return sets


def _grouped_sql(q: _Query, bucket: str, span: str, dims, aggs, subtotals) -> str:
    """The grouping SELECT; with subtotals, one per set (`__sub` its index), the
    dimensions outside the set null, as Druid returns them."""
    agg_items = [(a.name, a.sql) for a in aggs]
    if subtotals is None:
        items = [(n, s) for n, s, _ in dims] + agg_items
        group_by = ", ".join(str(i) for i in range(1, len(dims) + 2))
        return (
            f"SELECT {bucket} AS __bucket{_comma(items)} FROM __base{span} "
            f"WHERE {q.where} GROUP BY {group_by}"
        )
    parts = []
    for i, chosen in enumerate(subtotals):
        types = {"string": _text(), "long": "BIGINT"}
        items = [
            (n, s if n in chosen else f"CAST(NULL AS {types.get(k, 'DOUBLE')})") for n, s, k in dims
        ]
        keys = ["__bucket"] + [_q(n) for n in chosen]
        parts.append(
            f"SELECT {i} AS __sub, {bucket} AS __bucket{_comma(items + agg_items)} "
            f"FROM __base{span} WHERE {q.where} GROUP BY {', '.join(keys)}"
        )
    return " UNION ALL ".join(parts)


def _groupby(q: _Query) -> Plan:
    gran = parse_granularity(q.body.get("granularity"))
    dims = [
        _dimension_sql(q, d, f"dimensions[{i}]")
        for i, d in enumerate(_list(q.body.get("dimensions") or [], "dimensions"))
    ]
    subtotals = _subtotals(q.body.get("subtotalsSpec"), [n for n, _, _ in dims])
    aggs = _aggregators(q)
    known = {
        **{n: Col(_q(n), k) for n, _, k in dims},
        **{a.name: a.col() for a in aggs},
    }
    posts = compile_post_aggregators(q.body.get("postAggregations"), known)
    if gran.kind == "all":  # Druid stamps every row with the first interval's start
        bucket, span = f"CAST({_first_start_ms(q)} AS BIGINT)", ""
    else:
        bucket, span = _grouped_bucket(q, gran)
    outputs = [(n, _q(n)) for n, _, _ in dims] + [(a.name, a.out()) for a in aggs]
    outputs += [(n, c.sql) for n, c in posts]
    kinds = (
        {n: k for n, _, k in dims} | {a.name: a.kind for a in aggs} | {n: c.kind for n, c in posts}
    )
    row = _Outputs({n: Col(_q(n), k) for n, k in kinds.items()})
    having = "true" if q.body.get("having") is None else _having(q.body["having"], "having", row)
    order, limit, offset = _limit_order(
        q, q.body.get("limitSpec"), kinds, [n for n, _, _ in dims], gran
    )
    order_sql = ", ".join(order) or "__bucket"
    sub = "" if subtotals is None else "__sub, "
    selected = f"__bucket{_comma([(n, _q(n)) for n, _ in outputs])}"
    sql = (
        f"WITH {_base(q)}, __grouped AS ({_grouped_sql(q, bucket, span, dims, aggs, subtotals)}), "
        f"__post AS (SELECT {sub}__bucket{_comma(outputs)} FROM __grouped) "
    )
    if subtotals is None:
        sql += (
            f"SELECT {selected} FROM __post WHERE {having} ORDER BY {order_sql}"
            + (f" LIMIT {limit}" if limit is not None else "")
            + (f" OFFSET {offset}" if offset else "")
        )
    else:  # the limitSpec applies to each subtotal's rows
        last = "" if limit is None else f" AND __n <= {(offset or 0) + limit}"
        sql += (
            f"SELECT {selected} FROM (SELECT *, row_number() OVER (PARTITION BY __sub "
            f"ORDER BY {order_sql}) AS __n FROM __post WHERE {having}) "
            f"WHERE __n > {offset or 0}{last} ORDER BY __sub, __n"
        )
    return Plan(
        "groupBy",
        q.datasource,
        sql,
        tuple(kinds.items()),
        gran,
        {
            "dimensions": [n for n, _, _ in dims],
            "result_as_array": _bool(q.context.get("resultAsArray"), "context.resultAsArray"),
        },
    )


def _scan_order(body: dict) -> str | None:
    order = body.get("order")
    if body.get("orderBy") is not None:
        specs = _list(body["orderBy"], "orderBy")
        if len(specs) > 1 or (specs and _obj(specs[0], "orderBy[0]").get("columnName") != "__time"):
            raise _unsupported("orderBy", "scan ordering by columns other than __time")
        order = specs[0].get("order", "ascending") if specs else None
    order = str(order or "none").lower()
    if order not in ("none", "ascending", "descending"):
        raise NativeQueryError("order", "must be none, ascending or descending")
    return None if order == "none" else ("ASC" if order == "ascending" else "DESC")


def _scan(q: _Query) -> Plan:
    body = q.body
    if _bool(body.get("legacy"), "legacy"):
        raise _unsupported("legacy", "legacy scan results")
    fmt = body.get("resultFormat") or "list"
    if fmt not in ("list", "compactedList"):
        raise _unsupported("resultFormat", f"{fmt!r} (list, compactedList)")
    names = _list(body.get("columns") or [], "columns")
    if not names:  # every column, __time first, as Druid lists a segment's columns
        names = ["__time"] + [n for n in q.cols.schema if n != "__time"]
    items, columns = [], []
    for i, name in enumerate(names):
        col = q.cols.get(_str(name, f"columns[{i}]"))
        items.append((name, col.sql))
        columns.append((name, "long" if name == "__time" else col.kind))
    order = _scan_order(body)
    limit = body.get("limit")
    offset = _int(body.get("offset") or 0, "offset")
    batch = _int(body.get("batchSize") or 20480, "batchSize", minimum=1)
    sql = (
        f"WITH {_base(q)} SELECT {_select_list(items)} FROM __base WHERE {q.where}"
        + (f" ORDER BY __base.__time {order}" if order else "")
        + (f" LIMIT {_int(limit, 'limit')}" if limit is not None else "")
        + (f" OFFSET {offset}" if offset else "")
    )
    return Plan(
        "scan", q.datasource, sql, tuple(columns), None, {"result_format": fmt, "batch_size": batch}
    )


def _time_boundary(q: _Query) -> Plan:
    bound = q.body.get("bound")
    if bound not in (None, "minTime", "maxTime"):
        raise NativeQueryError("bound", "must be minTime or maxTime")
    sql = (
        f"WITH {_base(q)} SELECT {_epoch_ms('min(__time)')} AS minTime, "
        f"{_epoch_ms('max(__time)')} AS maxTime FROM __base WHERE {q.where}"
    )
    return Plan(
        "timeBoundary",
        q.datasource,
        sql,
        (("minTime", "long"), ("maxTime", "long")),
        None,
        {"bound": bound},
    )


def _search_spec(spec: dict, field: str) -> dict:
    """Druid's SearchQuerySpec as the search filter's query (`case_sensitive` or
    `caseSensitive`); `regex` matches anywhere in the value."""
    spec = dict(_obj(spec, field))
    if "case_sensitive" in spec:
        spec["caseSensitive"] = spec.pop("case_sensitive")
    return spec


def _search_query(q: _Query) -> Plan:
    gran = parse_granularity(q.body.get("granularity"))
    spec = _search_spec(q.body.get("query"), "query")
    names = _list(q.body.get("searchDimensions") or [], "searchDimensions")
    dims = [dimension_spec(d, f"searchDimensions[{i}]")[:2] for i, d in enumerate(names)]
    if not names:  # Druid searches every dimension: here, every string column
        dims = [(n, n) for n, kind in q.cols.schema.items() if kind == "string"]
    limit = _int(q.body.get("limit", 1000), "limit", minimum=1)
    sort = _ordering({"ordering": _obj(q.body.get("sort") or {}, "sort").get("type")}, "sort")
    bucket, span = _grouped_bucket(q, gran)
    hits = []
    for name, out in dims:
        value = _cast(q.cols.get(name), "string")
        match = _search_match(value, spec, "query")
        hits.append(
            f"SELECT {bucket} AS __bucket, {_lit(out)} AS dimension, {value} AS value, "
            f"COUNT(*) AS count FROM __base{span} WHERE ({q.where}) AND {match} GROUP BY 1, 3"
        )
    keys = {
        "lexicographic": ["value"],
        "numeric": ["TRY_CAST(value AS DOUBLE)", "value"],
        "strlen": ["length(value)", "value"],
    }[sort]
    union = " UNION ALL ".join(hits) or "SELECT CAST(NULL AS BIGINT), '', '', 0 WHERE false"
    sql = (
        f"WITH {_base(q)}, __span AS (SELECT min(__time) AS lo FROM __base), "
        f"__hits AS ({union}), "
        f"__ranked AS (SELECT *, row_number() OVER (PARTITION BY __bucket ORDER BY "
        f"{', '.join(f'{k} ASC NULLS FIRST' for k in keys)}, dimension) AS __rank FROM __hits) "
        f"SELECT __bucket, dimension, value, count FROM __ranked WHERE __rank <= {limit} "
        f"ORDER BY __bucket, __rank"
    )
    columns = (("dimension", "string"), ("value", "string"), ("count", "long"))
    return Plan("search", q.datasource, sql, columns, gran)


def _datasource_metadata(q: _Query) -> Plan:
    sql = f"SELECT {_epoch_ms('max(__time)')} AS maxIngestedEventTime FROM {_q(q.datasource)}"
    return Plan("dataSourceMetadata", q.datasource, sql, (("maxIngestedEventTime", "long"),))


_ANALYSES = ("cardinality", "interval", "minmax")
# What each segment records of its ingestion (metastore.schema), merged across segments
_SEGMENT_FACTS = ("aggregators", "rollup", "queryGranularity", "timestampSpec")
_TYPE_NAMES = {"long": "LONG", "double": "DOUBLE", "float": "FLOAT", "string": "STRING"}


def _included_columns(q: _Query) -> list[str]:
    spec = _obj(q.body.get("toInclude") or {"type": "all"}, "toInclude")
    kind = _type_of(spec, "toInclude")
    names = ["__time"] + [n for n in q.cols.schema if n != "__time"]
    if kind == "all":
        return names
    if kind == "none":
        return []
    if kind == "list":
        wanted = _list(spec.get("columns"), "toInclude.columns")
        return [n for n in names if n in wanted]
    raise NativeQueryError("toInclude.type", "must be all, none or list")


def _shared_pieces(segments) -> bool:
    pieces = sorted(iv for s in segments for iv in s[2])
    return any(a.end > b.start for a, b in zip(pieces, pieces[1:], strict=False))


def _aggregator_merge_lenient(body: dict) -> bool:
    """Whether segments' aggregators merge leniently: `aggregatorMergeStrategy`, or the
    older `lenientAggregatorMerge`; strict by default."""
    strategy = body.get("aggregatorMergeStrategy")
    if strategy is None:
        return _bool(body.get("lenientAggregatorMerge"), "lenientAggregatorMerge")
    strategy = _str(strategy, "aggregatorMergeStrategy").lower()
    if strategy in ("earliest", "latest"):
        raise _unsupported("aggregatorMergeStrategy", f"{strategy!r} (strict, lenient)")
    if strategy not in ("strict", "lenient"):
        raise NativeQueryError(
            "aggregatorMergeStrategy", "must be strict, lenient, earliest or latest"
        )
    return strategy == "lenient"


def _analysis_types(body: dict) -> list:
    analyses = _list(body.get("analysisTypes", list(_ANALYSES)), "analysisTypes")
    known = _ANALYSES + _SEGMENT_FACTS
    for i, a in enumerate(analyses):
        if a not in known:
            raise _unsupported(f"analysisTypes[{i}]", f"{a!r} (supported: {', '.join(known)})")
    return analyses


def _json_dimensions(segments: list[tuple]) -> set[str]:
    """The dimensions these segments' recorded schemas type json (stored as JSON
    text in a string column; Druid's COMPLEX<json>)."""
    return {
        d["name"]
        for s in segments
        if len(s) > 3 and isinstance(s[3], dict)
        for d in s[3].get("dimensions") or ()
        if isinstance(d, dict) and d.get("type") == "json"
    }


def _segment_metadata(q: _Query, segments: list[tuple]) -> Plan:
    """Per visible segment (or merged): row count and, per column, its type, nulls,
    and for strings the number of distinct values and the smallest and largest."""
    analyses = _analysis_types(q.body)
    merge = _bool(q.body.get("merge"), "merge")
    lenient = _aggregator_merge_lenient(q.body)
    overlapping = [s for s in segments if any(s[1].overlaps(iv) for iv in q.intervals)]
    pieces = [iv for s in overlapping for iv in s[2]]
    if not pieces:
        return Plan(
            "segmentMetadata",
            q.datasource,
            "SELECT 1 WHERE false",
            (),
            None,
            {"segments": [], "merge": merge, "analyses": analyses, "columns": []},
        )
    if not merge and _shared_pieces(overlapping):
        raise _unsupported(
            "merge",
            "per-segment results where a time chunk holds several partitions (their rows "
            'share the time range, and are read as one table here); use "merge": true',
        )
    tag = (
        "0"
        if merge
        else "CASE "
        + " ".join(f"WHEN {_intervals_sql(s[2])} THEN {i}" for i, s in enumerate(overlapping))
        + " END"
    )
    stats, columns = [], []
    json_dims = _json_dimensions(overlapping)
    for name in _included_columns(q):
        col = Col("__time", "time") if name == "__time" else q.cols.get(name)
        kind = "json" if col.kind == "string" and name in json_dims else col.kind
        columns.append((name, kind))
        stats.append(f"bool_or({_q(name)} IS NULL)")
        if kind == "string":
            stats += [f"COUNT(DISTINCT {col.sql})", f"min({col.sql})", f"max({col.sql})"]
    sql = (
        f"WITH __base AS (SELECT * FROM {_q(q.datasource)} WHERE {_intervals_sql(pieces)}), "
        f"__tagged AS (SELECT {tag} AS __segment, * FROM __base) "
        f"SELECT __segment, COUNT(*) AS __rows{''.join(', ' + x for x in stats)} "
        f"FROM __tagged GROUP BY 1 ORDER BY 1"
    )
    return Plan(
        "segmentMetadata",
        q.datasource,
        sql,
        (),
        None,
        {
            "segments": [(s[0], s[1]) for s in overlapping],
            "schemas": [s[3] if len(s) > 3 else None for s in overlapping],
            "merge": merge,
            "lenient": lenient,
            "analyses": analyses,
            "columns": columns,
        },
    )


_COMPILERS = {
    "timeseries": _timeseries,
    "topN": _topn,
    "groupBy": _groupby,
    "scan": _scan,
    "timeBoundary": _time_boundary,
    "search": _search_query,
    "dataSourceMetadata": _datasource_metadata,
}


def query_datasource(body) -> tuple[str, str]:
    """(queryType, dataSource name) of a request body, checked before its schema is read."""
    body = _obj(body, "(body)")
    kind = body.get("queryType")
    if kind in _REFUSED_TYPES:
        raise _unsupported(
            "queryType", f"{kind} queries are not supported; supported: " + ", ".join(QUERY_TYPES)
        )
    if kind not in QUERY_TYPES:
        raise NativeQueryError(
            "queryType", f"unknown query type {kind!r}; one of " + ", ".join(QUERY_TYPES)
        )
    try:
        return kind, _datasource(body.get("dataSource"))
    except RecursionError:
        raise NativeQueryError("dataSource", "is nested too deeply") from None


def compile_query(
    body,
    schema: dict[str, str] | None,
    dialect: str = "duckdb",
    segments=None,
    tables=None,
    times: TableTimes | None = None,
) -> Plan:
    """A native query (parsed JSON) as a Plan, in DuckDB's or Spark's SQL (`dialect`).
    `tables`: the columns (name -> kind, see `column_kinds`) of each table its
    dataSource reads (`datasource_names`), None for one that does not exist; or
    `schema`, the columns of them all. A segmentMetadata query also needs the
    visible `segments`: (id, interval, visible pieces[, recorded schema]). `times`,
    if given: what is known of the tables' `__time` without reading them
    (TableTimes): a granularity `all` timestamp then needs no pass over `__time`,
    nor tables whose rows are all within the intervals a time filter. Raises
    NativeQueryError."""
    if dialect not in DIALECTS:
        raise ValueError(f"dialect must be one of {DIALECTS}")
    query_datasource(body)
    if tables is None:
        tables = {name: schema for name in datasource_names(body.get("dataSource"))}
    token = _DIALECT.set(dialect)
    try:
        return _compile(body, tables, segments, times)
    except RecursionError:
        raise NativeQueryError("(body)", "the query is nested too deeply") from None
    finally:
        _DIALECT.reset(token)


def _compile(body: dict, tables: dict, segments, times=None) -> Plan:
    query_datasource(body)
    q = _parse_common(body, tables, times)
    if body["queryType"] == "segmentMetadata":
        plan = _segment_metadata(q, list(segments or []))
    else:
        plan = _COMPILERS[body["queryType"]](q)
    return Plan(
        plan.query_type,
        plan.datasource,
        plan.sql,
        plan.columns,
        plan.granularity,
        plan.options,
        _timeout(q.context),
        {t: q.intervals for t in q.relation.tables} if q.relation.unfiltered else {},
    )
