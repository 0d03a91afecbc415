"""Druid's time expression functions as DuckDB SQL (the counterpart of
`spark_time`). Timestamps are epoch milliseconds (longs), as in Druid; periods
are ISO 8601, time zones names or offsets (DuckDB's ICU time zones); Java date
patterns are translated to strftime formats where they have one. Pure."""

from __future__ import annotations

import re

from metastore.druid.expressions.duckdb_types import long, sql_string, text
from metastore.druid.expressions.periods import (
    MILLIS,
    check_alignment,
    extract_unit,
    origin_arg,
    period,
    zone_literal,
)
from metastore.druid.expressions.types import Arg, ExpressionError, Function, literal


def _zone(args: list[Arg], index: int, name: str) -> str | None:
    zone = zone_literal(args, index, name)
    return None if zone is None else sql_string(zone)


def _local(millis: str, zone: str | None) -> str:
    """The wall-clock time in `zone` as a naive TIMESTAMP."""
    ts = f"make_timestamp(CAST({millis} AS BIGINT) * 1000)"
    return f"timezone({zone}, timezone('UTC', {ts}))" if zone else ts


def _utc_millis(local: str, zone: str | None) -> str:
    return f"epoch_ms(timezone({zone}, {local}))" if zone else f"epoch_ms({local})"


def _pmod(x: str, n: int) -> str:
    return f"((({x}) % {n} + {n}) % {n})"


def _floor_local(local: str, unit: str, n: int, name: str) -> str:
    """`local` truncated to the period, aligned as Druid aligns it with no origin."""
    check_alignment(unit, n, name)
    if unit == "Y":
        year = f"(year({local}) - {_pmod(f'year({local})', n)})"
        return f"make_timestamp({year}, 1, 1, 0, 0, 0)"
    if unit == "M":
        month = f"(month({local}) - {_pmod(f'month({local}) - 1', n)})"
        return f"make_timestamp(year({local}), {month}, 1, 0, 0, 0)"
    if unit == "W":
        return f"date_trunc('week', {local})"
    step = MILLIS[unit] * n
    return f"make_timestamp(CAST(floor(epoch_ms({local}) / {step}) * {step} AS BIGINT) * 1000)"


def _floor(args: list[Arg], name: str) -> str:
    unit, n = period(args[1], name)
    millis = long(args[0])
    origin = origin_arg(args)
    zone = _zone(args, 3, name)
    if origin is not None:
        if unit in ("Y", "M"):
            raise ExpressionError(f"{name}(): an origin with a period of months is not supported")
        step, o = MILLIS[unit] * n, long(origin)
        return f"CAST(floor(({millis} - {o}) / {step}) * {step} + {o} AS BIGINT)"
    return _utc_millis(_floor_local(_local(millis, zone), unit, n, name), zone)


_ADD = {"Y": "to_years", "M": "to_months", "W": "to_weeks", "D": "to_days"}
_ADD.update(H="to_hours", MI="to_minutes", S="to_seconds")


def _shift(millis: str, unit: str, count: str, zone: str | None) -> str:
    local = _local(millis, zone)
    return _utc_millis(f"({local} + {_ADD[unit]}(CAST({count} AS INTEGER)))", zone)


def _timestamp_floor(a):
    return f"CAST({_floor(a, 'timestamp_floor')} AS BIGINT)", "long"


def _timestamp_ceil(a):
    floor = _floor(a, "timestamp_ceil")
    unit, n = period(a[1], "timestamp_ceil")
    up = _shift(floor, unit, str(n), _zone(a, 3, "timestamp_ceil"))
    return f"CAST(CASE WHEN {floor} = {long(a[0])} THEN {floor} ELSE {up} END AS BIGINT)", "long"


def _timestamp_shift(a):
    unit, n = period(a[1], "timestamp_shift")
    count = f"{long(a[2])} * {n}"
    return _shift(long(a[0]), unit, count, _zone(a, 3, "timestamp_shift")), "long"


_EXTRACT = {
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


def _timestamp_extract(a):
    unit = extract_unit(a[1])
    millis = long(a[0])
    if unit == "EPOCH":
        return f"CAST(floor({millis} / 1000) AS BIGINT)", "long"
    if unit == "MILLISECOND":
        return _pmod(millis, 1000), "long"
    local = _local(millis, _zone(a, 2, "timestamp_extract"))
    return f"CAST(date_part('{_EXTRACT[unit]}', {local}) AS BIGINT)", "long"


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


def _java_pattern(arg: Arg, name: str) -> str:
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
    return sql_string("".join(out))


_OFFSET = "'(Z|[+-][0-9]{2}(:?[0-9]{2})?)$'"


def _parsed_millis(t: str, zone: str | None) -> str:
    """ISO 8601 or SQL text as epoch millis; a zone applies only to text without an offset."""
    naive = f"TRY_CAST(regexp_replace({t}, {_OFFSET}, '') AS TIMESTAMP)"
    with_offset = f"epoch_ms(TRY_CAST({t} AS TIMESTAMPTZ))"
    return (
        f"(CASE WHEN regexp_matches({t}, {_OFFSET}) THEN {with_offset} "
        f"ELSE {_utc_millis(naive, zone)} END)"
    )


def _timestamp_parse(a):
    zone = _zone(a, 2, "timestamp_parse")
    t = f"trim({text(a[0])})"
    if len(a) > 1 and a[1].sql != "NULL":
        parsed = f"try_strptime({t}, {_java_pattern(a[1], 'timestamp_parse')})"
        return _utc_millis(parsed, zone), "long"
    return _parsed_millis(t, zone), "long"


def _timestamp_format(a):
    millis = long(a[0])
    zone = _zone(a, 2, "timestamp_format")
    local = _local(millis, zone)
    if len(a) > 1 and a[1].sql != "NULL":
        return f"strftime({local}, {_java_pattern(a[1], 'timestamp_format')})", "string"
    iso = f"strftime({local}, '%Y-%m-%dT%H:%M:%S.%g')"
    if zone is None:
        return f"({iso} || 'Z')", "string"
    offset = f"CAST((epoch_ms({local}) - {millis}) // 60000 AS INTEGER)"
    sign = f"CASE WHEN {offset} < 0 THEN '-' ELSE '+' END"
    return (
        f"({iso} || CASE WHEN {offset} = 0 THEN 'Z' ELSE printf('%s%02d:%02d', {sign}, "
        f"abs({offset}) // 60, abs({offset}) % 60) END)",
        "string",
    )


def _timestamp(a):
    t = f"trim({text(a[0])})"
    if len(a) == 2:
        return f"epoch_ms(try_strptime({t}, {_java_pattern(a[1], 'timestamp')}))", "long"
    return _parsed_millis(t, None), "long"


def _unix_timestamp(a):
    sql, _ = _timestamp(a)
    return f"CAST(floor({sql} / 1000) AS BIGINT)", "long"


TIME_FUNCTIONS = {
    name: Function(arity, emit)
    for name, arity, emit in (
        ("timestamp", (1, 2), _timestamp),
        ("unix_timestamp", (1, 2), _unix_timestamp),
        ("timestamp_floor", (2, 4), _timestamp_floor),
        ("timestamp_ceil", (2, 4), _timestamp_ceil),
        ("timestamp_shift", (3, 4), _timestamp_shift),
        ("timestamp_extract", (2, 3), _timestamp_extract),
        ("timestamp_parse", (1, 3), _timestamp_parse),
        ("timestamp_format", (1, 3), _timestamp_format),
    )
}
