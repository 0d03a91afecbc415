"""granularitySpec, and the interval and granularity values specs use elsewhere
(kill and compact intervals, druid input sources)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, object_at
from metastore.intervals import (
    GRANULARITY_NAMES,
    MAX_TS,
    Granularity,
    Interval,
    add_period,
    granularity_divides,
)

__all__ = ["add_period", "expand_interval", "interval_at", "granularity_at", "granularity_spec"]

GRANULARITY_SPEC_FIELDS = {"type", "segmentGranularity", "queryGranularity", "rollup", "intervals"}
GRANULARITY_SPEC_TYPES = ("uniform", "arbitrary")
LATEST_END = datetime(9999, 1, 1, tzinfo=UTC)


def expand_interval(value: str) -> str:
    """An ISO-8601 interval in any of Druid's forms (start/period, period/end,
    year-month and year end points, ETERNITY's) as plain start/end text; text
    that is no interval unchanged (`Interval.parse` reads every form itself)."""
    try:
        return str(Interval.parse(value))
    except (ValueError, OverflowError):
        return value


def interval_at(value: Any, path: str) -> Interval:
    """An interval field: ISO-8601 in any of Druid's forms, not empty, ending by
    9999 or open-ended as Druid's ETERNITY (the task clips such a span to the
    data that exists before it locks anything: `is_open_ended`)."""
    if not isinstance(value, str):
        raise SpecError(path, "must be an ISO-8601 interval string like 2013-01-01/2013-01-02")
    if len(value) > 100:
        raise SpecError(path, f"an interval of {len(value)} characters is not an interval")
    try:
        interval = Interval.parse(value)
    except (ValueError, OverflowError) as exc:
        raise SpecError(
            path, f"malformed interval {value!r} ({exc}); expected e.g. 2013-01-01/2013-01-02"
        ) from None
    if interval.is_empty:
        raise SpecError(path, f"interval {value!r} is empty")
    # Years 1-9999 only, and the segment-granularity buckets (up to YEAR) around
    # an interval must end by 9999-01-01 to stay representable.
    if LATEST_END < interval.end < MAX_TS:
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
