"""granularitySpec, and the interval and granularity values specs use elsewhere
(kill and compact intervals, druid input sources)."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, object_at
from metastore.intervals import (
    GRANULARITY_NAMES,
    Granularity,
    Interval,
    format_ts,
    granularity_divides,
)

GRANULARITY_SPEC_FIELDS = {"type", "segmentGranularity", "queryGranularity", "rollup", "intervals"}
GRANULARITY_SPEC_TYPES = ("uniform", "arbitrary")
LATEST_END = datetime(9999, 1, 1, tzinfo=UTC)

_PERIOD = re.compile(
    r"^P(?:(?P<Y>\d+)Y)?(?:(?P<M>\d+)M)?(?:(?P<W>\d+)W)?(?:(?P<D>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)
_YEAR_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_YEAR = re.compile(r"^(\d{4})$")


def _add_period(start: datetime, period: str, sign: int) -> datetime:
    m = _PERIOD.match(period)
    if not m or not any(m.groupdict().values()):
        raise ValueError(f"{period!r} is not an ISO-8601 period like P1D, PT1H or P1M")
    g = {k: (v or "0") for k, v in m.groupdict().items()}
    months = int(g["Y"]) * 12 + int(g["M"])
    if months:
        index = start.year * 12 + start.month - 1 + sign * months
        year, month = divmod(index, 12)
        day = min(start.day, calendar.monthrange(year, month + 1)[1])
        start = start.replace(year=year, month=month + 1, day=day)
    delta = timedelta(
        weeks=int(g["W"]),
        days=int(g["D"]),
        hours=int(g["h"]),
        minutes=int(g["m"]),
        seconds=float(g["s"]),
    )
    return start + sign * delta


def add_period(ts: datetime, period: str, sign: int = 1) -> datetime:
    """`ts` moved by an ISO-8601 period (P1D, PT1H, P1M; calendar months and
    years), forward (sign 1) or back (-1). Raises ValueError for anything else."""
    return _add_period(ts, period, sign)


def _instant(text: str) -> datetime:
    """An interval end point: ISO-8601, also Druid's year-month (2016-06) and year forms."""
    if m := _YEAR_MONTH.match(text):
        text = f"{m.group(1)}-{m.group(2)}-01"
    elif m := _YEAR.match(text):
        text = f"{m.group(1)}-01-01"
    return Interval.parse(f"{text}/{text}").start


def expand_interval(value: str) -> str:
    """An ISO-8601 interval in Druid's other forms (start/period, period/end,
    year-month and year end points) as plain start/end text; other text unchanged."""
    if not isinstance(value, str) or value.count("/") != 1:
        return value
    first, second = (part.strip() for part in value.split("/"))
    plain = not any(
        p.startswith("P") or _YEAR_MONTH.match(p) or _YEAR.match(p) for p in (first, second)
    )
    if plain:
        return value
    if first.startswith("P") and second.startswith("P"):
        raise ValueError(f"interval {value!r}: give a start or an end, not two periods")
    if second.startswith("P"):
        start = _instant(first)
        end = _add_period(start, second, 1)
    elif first.startswith("P"):
        end = _instant(second)
        start = _add_period(end, first, -1)
    else:
        start, end = _instant(first), _instant(second)
    return f"{format_ts(start)}/{format_ts(end)}"


def interval_at(value: Any, path: str) -> Interval:
    """An interval field: ISO-8601 in any of Druid's forms, not empty, ending by 9999."""
    if not isinstance(value, str):
        raise SpecError(path, "must be an ISO-8601 interval string like 2013-01-01/2013-01-02")
    if len(value) > 100:
        raise SpecError(path, f"an interval of {len(value)} characters is not an interval")
    try:
        interval = Interval.parse(expand_interval(value))
    except (ValueError, OverflowError) as exc:
        raise SpecError(
            path, f"malformed interval {value!r} ({exc}); expected e.g. 2013-01-01/2013-01-02"
        ) from None
    if interval.is_empty:
        raise SpecError(path, f"interval {value!r} is empty")
    # Years 1-9999 only, and the segment-granularity buckets (up to YEAR) around
    # an interval must end by 9999-01-01 to stay representable.
    if interval.end > LATEST_END:
        raise SpecError(
            path, f"interval {value!r} ends after 9999-01-01; intervals lie in the years 0001-9998"
        )
    return interval


# Druid's named granularities (a query's `granularity`, an extraction's) as periods.
NAMED_PERIODS = {
    "second": "PT1S",
    "minute": "PT1M",
    "five_minute": "PT5M",
    "ten_minute": "PT10M",
    "fifteen_minute": "PT15M",
    "thirty_minute": "PT30M",
    "hour": "PT1H",
    "six_hour": "PT6H",
    "eight_hour": "PT8H",
    "day": "P1D",
    "week": "P1W",
    "month": "P1M",
    "quarter": "P3M",
    "year": "P1Y",
}

# Druid's period and duration granularities that are one of the named ones.
_STANDARD_PERIODS = {
    "PT1S": "SECOND",
    "PT1M": "MINUTE",
    "PT5M": "FIVE_MINUTE",
    "PT15M": "FIFTEEN_MINUTE",
    "PT30M": "THIRTY_MINUTE",
    "PT1H": "HOUR",
    "PT6H": "SIX_HOUR",
    "P1D": "DAY",
    "P1W": "WEEK",
    "P1M": "MONTH",
    "P3M": "QUARTER",
    "P1Y": "YEAR",
}
_STANDARD_DURATIONS = {1000: "SECOND", 60_000: "MINUTE", 3_600_000: "HOUR", 86_400_000: "DAY"}


def _period_granularity(value: dict, path: str) -> str:
    allow(value, path, {"type", "period", "timeZone", "origin"})
    named = _STANDARD_PERIODS.get(str(value.get("period")).upper())
    if named and value.get("timeZone") in (None, "UTC", "Etc/UTC") and not value.get("origin"):
        return named
    raise SpecError(
        path,
        f"period granularity {value.get('period')!r} is not supported here: only UTC "
        f"periods without origin equal to a named granularity ({', '.join(_STANDARD_PERIODS)})",
    )


def _duration_granularity(value: dict, path: str) -> str:
    allow(value, path, {"type", "duration", "origin"})
    duration = value.get("duration")
    # bool is an int and a dict is unhashable: neither is a duration in ms.
    ok = isinstance(duration, int) and not isinstance(duration, bool)
    named = _STANDARD_DURATIONS.get(duration) if ok else None
    if named and not value.get("origin"):
        return named
    raise SpecError(
        path,
        f"duration granularity {value.get('duration')!r} is not supported here: only "
        f"{', '.join(map(str, _STANDARD_DURATIONS))} ms without origin",
    )


def _granularity_object(value: dict, path: str) -> Any:
    """{"type": name}, or a period / duration granularity that equals a named one
    (UTC, no origin); other periods, time zones and origins are refused."""
    kind = value.get("type")
    if kind == "period":
        return _period_granularity(value, path)
    if kind == "duration":
        return _duration_granularity(value, path)
    allow(value, path, {"type"})
    return kind


def granularity_at(value: Any, path: str, *, default: str) -> str:
    """A granularity by name (any case) or as Druid's object form; the canonical name."""
    if value is None:
        return default
    if isinstance(value, dict):  # Druid's {"type": "period", ...} / {"type": "day"}
        value = _granularity_object(value, path)
    if not isinstance(value, str):
        raise SpecError(path, f"must be one of {', '.join(GRANULARITY_NAMES)}")
    try:
        return Granularity.from_name(value).name
    except ValueError:
        raise SpecError(
            path, f"unknown granularity {value!r}; accepted: {', '.join(GRANULARITY_NAMES)}"
        ) from None


@dataclass(frozen=True)
class GranularitySpec:
    segment: str
    query: str
    rollup: bool
    intervals: tuple[Interval, ...] | None


GRANULARITY_PATH = "spec.dataSchema.granularitySpec"


def granularity_spec(schema: dict) -> GranularitySpec:
    """An ingestion spec's dataSchema.granularitySpec (uniform; arbitrary accepted)."""
    gpath = GRANULARITY_PATH
    gran = object_at(schema.get("granularitySpec"), gpath, required=False)
    allow(gran, gpath, GRANULARITY_SPEC_FIELDS)
    if gran.get("type") not in (None, *GRANULARITY_SPEC_TYPES):
        raise SpecError(f"{gpath}.type", "must be uniform (or arbitrary)")
    segment = granularity_at(
        gran.get("segmentGranularity"), f"{gpath}.segmentGranularity", default="DAY"
    )
    if segment == "NONE":
        raise SpecError(f"{gpath}.segmentGranularity", "NONE is only a query granularity")
    query = granularity_at(
        gran.get("queryGranularity"), f"{gpath}.queryGranularity", default="NONE"
    )
    if not granularity_divides(query, segment):
        raise SpecError(
            f"{gpath}.queryGranularity",
            f"{query} does not divide segmentGranularity {segment}: "
            "truncated timestamps would fall outside their segments; use a finer one",
        )
    rollup = bool_at(gran, "rollup", gpath, True)
    intervals = None
    # [] is no intervals in Druid (it serializes a spec without them so).
    if gran.get("intervals") not in (None, []):
        raw_intervals = gran["intervals"]
        if not isinstance(raw_intervals, list):
            raise SpecError(f"{gpath}.intervals", "must be a list of intervals")
        intervals = tuple(
            interval_at(v, f"{gpath}.intervals[{i}]") for i, v in enumerate(raw_intervals)
        )
    return GranularitySpec(segment, query, rollup, intervals)
