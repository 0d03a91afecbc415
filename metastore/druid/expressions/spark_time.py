"""Druid's time expression functions as Spark SQL. Timestamps are epoch
milliseconds (longs), as in Druid; periods are ISO 8601 (`PT1H`, `P1D`, `P3M`,
`P1Y`...), time zones names or offsets. Periods and zones must be literals."""

from __future__ import annotations

from metastore.druid.expressions.periods import (
    MILLIS,
    UNIT,
    check_alignment,
    extract_unit,
    origin_arg,
    period,
    zone_literal,
)
from metastore.druid.expressions.spark_types import (
    Arg,
    ExpressionError,
    Function,
    let,
    long,
    sql_string,
    text,
)
from metastore.druid.expressions.types import literal


def _zone(args: list[Arg], index: int, name: str) -> str | None:
    zone = zone_literal(args, index, name)
    return None if zone is None else sql_string(zone)


def _local(millis: str, zone: str | None) -> str:
    """The wall-clock time in `zone` as a Spark timestamp (read as UTC)."""
    ts = f"timestamp_millis({millis})"
    return f"from_utc_timestamp({ts}, {zone})" if zone else ts


def _utc_millis(local: str, zone: str | None) -> str:
    return f"unix_millis(to_utc_timestamp({local}, {zone}))" if zone else f"unix_millis({local})"


def _floor_local(local: str, unit: str, n: int, name: str) -> str:
    """`local` truncated to the period, aligned as Druid aligns it with no origin."""
    check_alignment(unit, n, name)
    if unit == "Y":
        year = f"(year({local}) - pmod(year({local}), {n}))"
        return f"make_timestamp({year}, 1, 1, 0, 0, 0)"
    if unit == "M":
        month = f"(month({local}) - pmod(month({local}) - 1, {n}))"
        return f"make_timestamp(year({local}), {month}, 1, 0, 0, 0)"
    if unit == "W":
        return f"date_trunc('week', {local})"
    step = MILLIS[unit] * n
    return f"timestamp_millis(floor(unix_millis({local}) / {step}) * {step})"


def _floor(args: list[Arg], name: str) -> str:
    unit, n = period(args[1], name)
    millis = long(args[0])
    origin = origin_arg(args)
    zone = _zone(args, 3, name)
    if origin is not None:
        if unit in ("Y", "M"):
            raise ExpressionError(f"{name}(): an origin with a period of months is not supported")
        step, o = MILLIS[unit] * n, long(origin)
        return f"(floor(({millis} - {o}) / {step}) * {step} + {o})"
    return let(_local(millis, zone), lambda t: _utc_millis(_floor_local(t, unit, n, name), zone))


def _shift(millis: str, unit: str, count: str, zone: str | None) -> str:
    local = _local(millis, zone)
    return _utc_millis(f"timestampadd({UNIT[unit]}, {count}, {local})", zone)


def _timestamp_floor(a):
    return f"CAST({_floor(a, 'timestamp_floor')} AS BIGINT)", "long"


def _timestamp_ceil(a):
    floor = _floor(a, "timestamp_ceil")
    unit, n = period(a[1], "timestamp_ceil")
    up = _shift(floor, unit, str(n), _zone(a, 3, "timestamp_ceil"))
    return f"CAST(CASE WHEN {floor} = {long(a[0])} THEN {floor} ELSE {up} END AS BIGINT)", "long"


def _timestamp_shift(a):
    unit, n = period(a[1], "timestamp_shift")
    count = f"CAST({long(a[2])} * {n} AS INT)"
    return _shift(long(a[0]), unit, count, _zone(a, 3, "timestamp_shift")), "long"


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


def _timestamp_extract(a):
    unit = extract_unit(a[1])
    millis = long(a[0])
    if unit == "EPOCH":
        return f"CAST(floor({millis} / 1000) AS BIGINT)", "long"
    if unit == "MILLISECOND":
        return f"pmod({millis}, 1000)", "long"
    local = _local(millis, _zone(a, 2, "timestamp_extract"))
    return f"CAST({_EXTRACT[unit].format(t=local)} AS BIGINT)", "long"


def _java_pattern(arg: Arg, name: str) -> str:
    return sql_string(str(literal(arg, "the pattern", name)))


def _timestamp_parse(a):
    zone = _zone(a, 2, "timestamp_parse")
    t = f"trim({text(a[0])})"
    if len(a) > 1 and a[1].sql != "NULL":
        parsed = f"try_to_timestamp({t}, {_java_pattern(a[1], 'timestamp_parse')})"
        return _utc_millis(parsed, zone), "long"
    if zone is None:  # ISO 8601 or SQL format
        return f"unix_millis(try_cast({t} AS TIMESTAMP))", "long"
    # a zone applies only to text without an offset
    has_offset = f"regexp_like({t}, '(Z|[+-][0-9]{{2}}(:?[0-9]{{2}})?)$')"
    return (
        f"(CASE WHEN {has_offset} THEN unix_millis(try_cast({t} AS TIMESTAMP)) "
        f"ELSE unix_millis(to_utc_timestamp(try_cast({t} AS TIMESTAMP_NTZ), {zone})) END)",
        "long",
    )


def _timestamp_format(a):
    millis = long(a[0])
    zone = _zone(a, 2, "timestamp_format")
    local = _local(millis, zone)
    if len(a) > 1 and a[1].sql != "NULL":
        return f"date_format({local}, {_java_pattern(a[1], 'timestamp_format')})", "string"
    # ISO 8601 with the zone's offset: Z for UTC, +hh:mm otherwise
    if zone is None:
        return f"date_format({local}, 'yyyy-MM-dd''T''HH:mm:ss.SSS''Z''')", "string"
    offset = f"CAST((unix_millis({local}) - {millis}) DIV 60000 AS INT)"
    sign = f"CASE WHEN {offset} < 0 THEN '-' ELSE '+' END"
    return (
        f"concat(date_format({local}, 'yyyy-MM-dd''T''HH:mm:ss.SSS'), "
        f"CASE WHEN {offset} = 0 THEN 'Z' ELSE format_string('%s%02d:%02d', {sign}, "
        f"abs({offset}) DIV 60, abs({offset}) % 60) END)",
        "string",
    )


def _timestamp(a):
    t = f"trim({text(a[0])})"
    if len(a) == 2:
        return f"unix_millis(try_to_timestamp({t}, {_java_pattern(a[1], 'timestamp')}))", "long"
    return f"unix_millis(try_cast({t} AS TIMESTAMP))", "long"


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
