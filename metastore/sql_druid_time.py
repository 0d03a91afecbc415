"""Druid SQL's time arguments read at translation time (no Django): ISO 8601
periods, time zones, intervals and Joda-Time patterns, each turned into the
engine's SQL text (DuckDB). A bad argument raises SqlRefused naming the function."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re

from metastore.intervals import parse_ts
from metastore.sql_guard import SqlRefused

_PERIOD = re.compile(
    r"^P(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)


def period(text, function: str) -> dict[str, float]:
    """The fields of an ISO 8601 period (`PT1H`, `P3M`, `P1W`, `P1DT12H`...)."""
    match = _PERIOD.match(str(text).upper()) if isinstance(text, str) else None
    fields = {k: float(v) for k, v in (match.groupdict().items() if match else ()) if v}
    if not fields or not any(fields.values()):
        raise SqlRefused(
            f"{function}: {text!r} is not an ISO 8601 period (e.g. PT1H, P1D, P1W, P3M, P1Y)"
        )
    return fields


def interval_text(fields: dict[str, float]) -> str:
    """The engine's INTERVAL literal for a period."""
    parts = []
    for name, value in fields.items():
        number = int(value) if value == int(value) else value
        parts.append(f"{number} {name}")
    return "INTERVAL '" + " ".join(parts) + "'"


def zone(text, function: str) -> str:
    """A time zone name or `+hh:mm` offset, as the engine names it."""
    if not isinstance(text, str) or not text:
        raise SqlRefused(f"{function}: give the time zone as a literal, e.g. 'America/Los_Angeles'")
    offset = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", text)
    if offset:
        sign, hours, minutes = offset.groups()
        if minutes != "00":
            raise SqlRefused(f"{function}: only whole-hour offsets are supported, not {text!r}")
        if int(hours) == 0:
            return "UTC"
        name = f"Etc/GMT{'-' if sign == '+' else '+'}{int(hours)}"  # POSIX names flip the sign
        if name not in _zone_names():
            raise SqlRefused(f"{function}: no time zone has the offset {text!r}")
        return name
    if text.upper() in ("UTC", "Z", "GMT"):
        return "UTC"
    if text not in _zone_names():  # never the server's own `localtime`
        raise SqlRefused(f"{function}: unknown time zone {text!r}")
    return text


def _timestamp_literal(text: str, function: str) -> str:
    try:
        moment = parse_ts(text)
    except ValueError as exc:
        raise SqlRefused(f"{function}: {exc}") from None
    literal = f"TIMESTAMP '{moment.replace(tzinfo=None).isoformat()}'"
    if session_zone() == "UTC" or re.search(r"(Z|[+-]\d{2}(:?\d{2})?)$", text.strip()):
        return literal
    return from_local(literal, session_zone())  # a time without an offset: the session's


# --- the session's time zone (Druid's `sqlTimeZone` context parameter) ---------------------

_SESSION_ZONE: contextvars.ContextVar[str] = contextvars.ContextVar("sqlTimeZone", default="UTC")


def session_zone() -> str:
    """The time zone of the Druid SQL query being translated (the engine's name)."""
    return _SESSION_ZONE.get()


@contextlib.contextmanager
def sql_time_zone(text):
    """Druid SQL translated inside this block follows `sqlTimeZone` `text` (a zone name
    or offset; None: UTC): time functions without a time zone argument, FLOOR/CEIL
    TO a unit, EXTRACT, DATE_TRUNC, timestamp literals and CURRENT_DATE. A bad zone
    raises SqlRefused naming the parameter."""
    zone_name = "UTC" if text is None else zone(text, "context.sqlTimeZone")
    token = _SESSION_ZONE.set(zone_name)
    try:
        yield zone_name
    finally:
        _SESSION_ZONE.reset(token)


@functools.cache
def _zone_names() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones() - {"localtime"})


def to_local(instant: str, zone_name: str) -> str:
    """SQL of the wall-clock time in `zone_name` of a UTC timestamp."""
    return f"CAST(timezone('{zone_name}', CAST({instant} AS TIMESTAMPTZ)) AS TIMESTAMP)"


def from_local(local: str, zone_name: str) -> str:
    """SQL of the UTC timestamp of a wall-clock time in `zone_name`."""
    return f"CAST(timezone('{zone_name}', CAST({local} AS TIMESTAMP)) AS TIMESTAMP)"


def zoned_text(text, zone_name: str):
    """A UTC timestamp as Druid writes it (`2000-01-01T00:00:00.000Z`) written in
    `zone_name` as Druid writes it for that `sqlTimeZone` (`1999-12-31T16:00:00.000-08:00`)."""
    import datetime as dt
    import zoneinfo

    if not isinstance(text, str) or not text.endswith("Z") or zone_name == "UTC":
        return text
    try:
        moment = dt.datetime.fromisoformat(text[:-1]).replace(tzinfo=dt.UTC)
    except ValueError:
        return text
    local = moment.astimezone(zoneinfo.ZoneInfo(zone_name))
    offset = local.strftime("%z")
    offset = "Z" if offset in ("+0000", "-0000") else f"{offset[:3]}:{offset[3:]}"
    return local.strftime("%Y-%m-%dT%H:%M:%S.") + f"{local.microsecond // 1000:03d}{offset}"


def zone_result(result, zone_name: str) -> None:
    """The TIMESTAMP and DATE columns of a Druid SQL result, in place, as Druid writes
    them: in the session's time zone, a date as the start of its day
    (`2000-01-01T00:00:00.000Z`)."""
    types = [str(kind) for kind in result.types]
    times = [i for i, kind in enumerate(types) if kind.startswith("timestamp")]
    dates = [i for i, kind in enumerate(types) if kind.startswith("date")]
    if zone_name == "UTC" and not dates:
        return
    for row in result.rows:
        for i in dates:
            if isinstance(row[i], str) and len(row[i]) == 10:
                row[i] = f"{row[i]}T00:00:00.000Z"
        for i in times:
            row[i] = zoned_text(row[i], zone_name)


def interval_bounds(text, function: str) -> tuple[str, str]:
    """(start, end) timestamps of an ISO 8601 interval: `start/end`, `start/period`
    or `period/end`."""
    parts = text.split("/") if isinstance(text, str) else []
    if len(parts) != 2 or not all(parts):
        raise SqlRefused(f"{function}: {text!r} is not an ISO 8601 interval (e.g. 2000-01-01/P1D)")
    first, second = (p.strip() for p in parts)
    if first.upper().startswith("P"):
        end = _timestamp_literal(second, function)
        return f"({end} - {interval_text(period(first, function))})", end
    start = _timestamp_literal(first, function)
    if second.upper().startswith("P"):
        return start, f"({start} + {interval_text(period(second, function))})"
    return start, _timestamp_literal(second, function)


# Joda-Time pattern letters (runs of them) and the engine's strftime equivalents.
_JODA = {
    "yyyy": "%Y",
    "YYYY": "%Y",
    "yy": "%y",
    "xxxx": "%G",
    "MMMM": "%B",
    "MMM": "%b",
    "MM": "%m",
    "M": "%-m",
    "dd": "%d",
    "d": "%-d",
    "DDD": "%j",
    "HH": "%H",
    "H": "%-H",
    "hh": "%I",
    "h": "%-I",
    "mm": "%M",
    "m": "%-M",
    "ss": "%S",
    "s": "%-S",
    "SSS": "%g",
    "a": "%p",
    "EEEE": "%A",
    "EEE": "%a",
    "ww": "%V",
    "Z": "%z",
    "ZZ": "%z",
}


def strftime_pattern(pattern, function: str) -> str:
    """The engine's strftime pattern for a Joda-Time DateTimeFormat pattern."""
    if not isinstance(pattern, str):
        raise SqlRefused(f"{function}: give the pattern as a string literal")
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end == -1:
                raise SqlRefused(f"{function}: unclosed quote in pattern {pattern!r}")
            out.append(pattern[i + 1 : end].replace("%", "%%") or "'")
            i = end + 1
            continue
        if char.isalpha():
            run = len(pattern) - i - len(pattern[i:].lstrip(char))
            letters = pattern[i : i + run]
            if letters not in _JODA:
                raise SqlRefused(f"{function}: pattern letters {letters!r} are not supported")
            out.append(_JODA[letters])
            i += run
            continue
        out.append("%%" if char == "%" else char)
        i += 1
    return "".join(out)
