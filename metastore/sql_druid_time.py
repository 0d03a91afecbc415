"""Druid SQL's time arguments read at translation time (no Django): ISO 8601
periods, time zones, intervals and Joda-Time patterns, each turned into the
engine's SQL text (DuckDB). A bad argument raises SqlRefused naming the function."""

from __future__ import annotations

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
    import zoneinfo

    if not isinstance(text, str) or not text:
        raise SqlRefused(f"{function}: give the time zone as a literal, e.g. 'America/Los_Angeles'")
    offset = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", text)
    if offset:
        sign, hours, minutes = offset.groups()
        if minutes != "00":
            raise SqlRefused(f"{function}: only whole-hour offsets are supported, not {text!r}")
        if int(hours) == 0:
            return "UTC"
        return f"Etc/GMT{'-' if sign == '+' else '+'}{int(hours)}"  # POSIX names flip the sign
    if text.upper() in ("UTC", "Z", "GMT"):
        return "UTC"
    try:
        zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise SqlRefused(f"{function}: unknown time zone {text!r}") from None
    return text


def _timestamp_literal(text: str, function: str) -> str:
    try:
        moment = parse_ts(text)
    except ValueError as exc:
        raise SqlRefused(f"{function}: {exc}") from None
    return f"TIMESTAMP '{moment.replace(tzinfo=None).isoformat()}'"


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
