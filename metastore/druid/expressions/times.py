"""Druid's time functions written once over a dialect. Timestamps are epoch
milliseconds (longs), as in Druid; periods are ISO 8601 (`PT1H`, `P1D`, `P3M`,
`P1Y`...), time zones names or offsets; periods and zones must be literals
(`periods`). A dialect spells the conversions between epoch millis and its
timestamps, wall-clock time in a zone, and date patterns. Pure."""

from __future__ import annotations

from metastore.druid.expressions.dialect import Dialect
from metastore.druid.expressions.periods import (
    MILLIS,
    check_alignment,
    extract_unit,
    origin_arg,
    period,
    zone_literal,
)
from metastore.druid.expressions.types import Arg, ExpressionError


def _zone(d: Dialect, args: list[Arg], index: int, name: str) -> str | None:
    zone = zone_literal(args, index, name)
    return None if zone is None else d.sql_string(zone)


def local(d: Dialect, millis: str, zone: str | None) -> str:
    """The wall-clock time in `zone` as the engine's timestamp (read as UTC)."""
    ts = d.sql("millis_to_ts", millis)
    return d.sql("to_local", ts, zone) if zone else ts


def utc_millis(d: Dialect, local_ts: str, zone: str | None) -> str:
    """Epoch millis of a wall-clock time in `zone`."""
    return d.sql("epoch_millis", d.sql("from_local", local_ts, zone) if zone else local_ts)


def _floor_local(d: Dialect, t: str, unit: str, n: int, name: str) -> str:
    """`t` truncated to the period, aligned as Druid aligns it with no origin."""
    check_alignment(unit, n, name)
    if unit == "Y":
        year = f"(year({t}) - {d.sql('pmod', f'year({t})', n)})"
        return f"make_timestamp({year}, 1, 1, 0, 0, 0)"
    if unit == "M":
        month = f"(month({t}) - {d.sql('pmod', f'month({t}) - 1', n)})"
        return f"make_timestamp(year({t}), {month}, 1, 0, 0, 0)"
    if unit == "W":
        return f"date_trunc('week', {t})"
    step = MILLIS[unit] * n
    return d.sql("millis_to_ts", f"floor({d.sql('epoch_millis', t)} / {step}) * {step}")


def _floor(d: Dialect, args: list[Arg], name: str) -> str:
    unit, n = period(args[1], name)
    millis = d.long(args[0])
    origin = origin_arg(args)
    zone = _zone(d, args, 3, name)
    if origin is not None:
        if unit in ("Y", "M"):
            raise ExpressionError(f"{name}(): an origin with a period of months is not supported")
        return d.sql("origin_floor", millis, d.long(origin), MILLIS[unit] * n)
    floored = lambda t: utc_millis(d, _floor_local(d, t, unit, n, name), zone)  # noqa: E731
    return d.let(local(d, millis, zone), floored)


def _shift(d: Dialect, millis: str, unit: str, count: str, zone: str | None) -> str:
    return utc_millis(d, d.add_period(local(d, millis, zone), unit, count), zone)


def timestamp_floor(d: Dialect, a: list[Arg]) -> str:
    return f"CAST({_floor(d, a, 'timestamp_floor')} AS BIGINT)"


def timestamp_ceil(d: Dialect, a: list[Arg]) -> str:
    floor = _floor(d, a, "timestamp_ceil")
    unit, n = period(a[1], "timestamp_ceil")
    up = _shift(d, floor, unit, str(n), _zone(d, a, 3, "timestamp_ceil"))
    return f"CAST(CASE WHEN {floor} = {d.long(a[0])} THEN {floor} ELSE {up} END AS BIGINT)"


def timestamp_shift(d: Dialect, a: list[Arg]) -> str:
    unit, n = period(a[1], "timestamp_shift")
    count = f"{d.long(a[2])} * {n}"
    return _shift(d, d.long(a[0]), unit, count, _zone(d, a, 3, "timestamp_shift"))


def timestamp_extract(d: Dialect, a: list[Arg]) -> str:
    unit = extract_unit(a[1])
    millis = d.long(a[0])
    if unit == "EPOCH":
        return f"CAST(floor({millis} / 1000) AS BIGINT)"
    if unit == "MILLISECOND":
        return d.sql("pmod", millis, 1000)
    t = local(d, millis, _zone(d, a, 2, "timestamp_extract"))
    return f"CAST({d.EXTRACT[unit].format(t=t)} AS BIGINT)"


def _has_pattern(a: list[Arg]) -> bool:
    return len(a) > 1 and a[1].sql != "NULL"


def timestamp_parse(d: Dialect, a: list[Arg]) -> str:
    zone = _zone(d, a, 2, "timestamp_parse")
    t = f"trim({d.text(a[0])})"
    if _has_pattern(a):
        pattern = d.date_pattern(a[1], "timestamp_parse")
        return utc_millis(d, d.sql("parse_pattern", t, pattern), zone)
    return d.parse_iso(t, zone)


def timestamp_format(d: Dialect, a: list[Arg]) -> str:
    millis = d.long(a[0])
    zone = _zone(d, a, 2, "timestamp_format")
    t = local(d, millis, zone)
    if _has_pattern(a):
        return d.sql("format_pattern", t, d.date_pattern(a[1], "timestamp_format"))
    # ISO 8601 with the zone's offset: Z for UTC, +hh:mm otherwise
    if zone is None:
        return d.sql("iso_utc", t)
    minutes = d.sql("idiv", f"({d.sql('epoch_millis', t)} - {millis})", 60000)
    offset = d.sql("int", minutes)
    sign = f"CASE WHEN {offset} < 0 THEN '-' ELSE '+' END"
    hours = d.sql("idiv", f"abs({offset})", 60)
    suffix = (
        f"CASE WHEN {offset} = 0 THEN 'Z' ELSE {d.sql('printf')}('%s%02d:%02d', {sign}, "
        f"{hours}, abs({offset}) % 60) END"
    )
    return d.concat([d.sql("iso_local", t), suffix])


def timestamp(d: Dialect, a: list[Arg]) -> str:
    t = f"trim({d.text(a[0])})"
    if _has_pattern(a):
        pattern = d.date_pattern(a[1], "timestamp")
        return d.sql("epoch_millis", d.sql("parse_pattern", t, pattern))
    return d.parse_iso(t, None)


def unix_timestamp(d: Dialect, a: list[Arg]) -> str:
    return f"CAST(floor({timestamp(d, a)} / 1000) AS BIGINT)"
