"""Time intervals and granularities (pure core: standard library only).

Every timestamp here is a timezone-aware UTC ``datetime``. Intervals are
half-open ``[start, end)`` and are written ``start/end`` in ISO-8601, with
millisecond precision and a ``Z`` suffix, as Druid writes them.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = [
    "UTC",
    "MIN_TS",
    "MAX_TS",
    "ETERNITY",
    "format_ts",
    "parse_ts",
    "add_period",
    "is_open_ended",
    "Interval",
    "Granularity",
    "GRANULARITY_NAMES",
    "granularity_divides",
    "SECOND",
    "MINUTE",
    "FIVE_MINUTE",
    "FIFTEEN_MINUTE",
    "THIRTY_MINUTE",
    "HOUR",
    "SIX_HOUR",
    "DAY",
    "WEEK",
    "MONTH",
    "QUARTER",
    "YEAR",
    "ALL",
    "NONE",
]


# The ends of representable time. MAX_TS is millisecond-aligned so that it
# survives a format_ts/parse_ts round trip unchanged.
MIN_TS = datetime(1, 1, 1, tzinfo=UTC)
MAX_TS = datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)

_END_OF_DAY = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})T24(?::00(?::00(?:\.0+)?)?)?(?P<zone>Z|[+-]\d{2}:?\d{2})?$"
)
_TS_EXAMPLE = "2024-01-01, 2024-01-01T05, 2024-01-01T05:00:00Z or 2024-01-01T05:00:00.000Z"


def _as_utc(ts: datetime) -> datetime:
    """Return ``ts`` in UTC; reject naive datetimes, which have no meaning here."""
    tz = ts.tzinfo
    if tz is UTC:
        return ts
    if tz is None or tz.utcoffset(ts) is None:
        raise ValueError(
            f"timestamp {ts.isoformat()} has no time zone; Strata uses timezone-aware UTC datetimes only"
        )
    return ts.astimezone(UTC)


def format_ts(dt: datetime) -> str:
    """Format a timezone-aware datetime as ``2013-01-01T00:00:00.000Z`` (UTC, milliseconds)."""
    d = _as_utc(dt)
    # Built by hand: strftime("%Y") does not zero-pad years below 1000 on glibc.
    return (
        f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
        f".{d.microsecond // 1000:03d}Z"
    )


def parse_ts(s: str) -> datetime:
    """Parse an ISO-8601 timestamp into a timezone-aware UTC datetime.

    Accepts a date (``2013-01-01``), a date and hour (``2013-01-01T05``), full
    times with or without fractions, and ``Z`` or ``+hh:mm`` offsets. A
    timestamp without an offset is taken to be UTC.
    """
    if not isinstance(s, str):
        raise ValueError(
            f"expected an ISO-8601 timestamp string such as {_TS_EXAMPLE}, got {type(s).__name__}"
        )
    text = s.strip()
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        # ISO-8601 allows 24:00 for the midnight that ends a day.
        match = _END_OF_DAY.match(text)
        if match is None:
            raise ValueError(
                f"{s!r} is not an ISO-8601 timestamp; expected e.g. {_TS_EXAMPLE}"
            ) from None
        try:
            dt = datetime.fromisoformat(f"{match['date']}T00{match['zone'] or ''}")
            dt += timedelta(days=1)
        except OverflowError:
            raise ValueError(f"{s!r} is after the year 9999") from None
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    try:
        return dt.astimezone(UTC) if dt.tzinfo is not UTC else dt
    except OverflowError:
        # An offset that moves the time past 9999-12-31 or before 0001-01-01 in UTC.
        raise ValueError(f"{s!r} is outside the years 1 to 9999 in UTC") from None


@dataclass(frozen=True, slots=True, order=True)
class Interval:
    """A half-open time interval ``[start, end)`` over timezone-aware UTC datetimes.

    Intervals order by ``(start, end)``. Datetimes in another time zone are
    converted to UTC; naive datetimes and ``end < start`` are rejected.
    """

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        start, end = self.start, self.end
        try:
            plain_utc = start.tzinfo is UTC and end.tzinfo is UTC
        except AttributeError:
            plain_utc = False
        if not plain_utc:
            if not isinstance(start, datetime) or not isinstance(end, datetime):
                raise ValueError(
                    f"an Interval's start and end must be timezone-aware datetimes, got {start!r} and {end!r}"
                )
            object.__setattr__(self, "start", _as_utc(start))
            object.__setattr__(self, "end", _as_utc(end))
            start, end = self.start, self.end
        if end < start:
            raise ValueError(
                f"interval end {format_ts(end)} is before its start {format_ts(start)}"
            )

    @classmethod
    def parse(cls, text: str) -> Interval:
        """Parse an ISO-8601 interval in any of Druid's (Joda's) forms: ``start/end``
        (``2024-01-01/2024-01-02``), ``start/period`` (``2024-01-01/P1D``),
        ``period/end`` (``P1D/2024-01-02``), year and year-month end points
        (``2016/2017``, ``2016-06/2016-07``). An end point beyond the years 1-9999,
        as Druid's ETERNITY writes them (``-146136543-09-08T08:23:32.096Z``,
        ``146140482-04-24T15:36:27.903Z``), is the end of representable time:
        ``MIN_TS`` or ``MAX_TS`` (see `is_open_ended`)."""
        if not isinstance(text, str):
            raise ValueError(f"expected an interval string 'start/end', got {type(text).__name__}")
        parts = [part.strip() for part in text.strip().split("/")]
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise ValueError(
                f"{text!r} is not an interval; expected 'start/end' in ISO-8601, e.g. 2024-01-01/2024-01-02"
            )
        # Joda reads a period in any case (pydruid's docs write "2013-10-04/pt1h")
        first, second = (p.upper() if p[:1] == "p" else p for p in parts)
        try:
            if first.startswith("P") and second.startswith("P"):
                raise ValueError("give a start or an end, not two periods")
            if second.startswith("P"):
                start = _end_point(first)
                end = add_period(start, second, 1)
            elif first.startswith("P"):
                end = _end_point(second)
                start = add_period(end, first, -1)
            else:
                start, end = _end_point(first), _end_point(second)
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"interval {text!r}: {exc}") from None
        if end < start:
            raise ValueError(f"interval {text!r} ends before it starts")
        return cls(start, end)

    def __str__(self) -> str:
        return f"{format_ts(self.start)}/{format_ts(self.end)}"

    def __repr__(self) -> str:
        if self.start.microsecond % 1000 or self.end.microsecond % 1000:
            return f"Interval({self.start!r}, {self.end!r})"
        return f"Interval.parse({str(self)!r})"

    @property
    def is_empty(self) -> bool:
        """True when the interval holds no instant (``start == end``)."""
        return self.start == self.end

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    def overlaps(self, other: Interval) -> bool:
        """True when the two intervals share at least one instant (empty intervals overlap nothing)."""
        return (
            self.start < other.end
            and other.start < self.end
            and self.start < self.end
            and other.start < other.end
        )

    def contains(self, other: Interval | datetime) -> bool:
        """True when ``other`` (an interval or an instant) lies inside this interval."""
        if isinstance(other, Interval):
            return self.start <= other.start and other.end <= self.end
        return self.start <= other < self.end

    def intersection(self, other: Interval) -> Interval | None:
        """The common part of both intervals, or None when they share no instant."""
        start = self.start if self.start >= other.start else other.start
        end = self.end if self.end <= other.end else other.end
        if start < end:
            return Interval(start, end)
        return None

    def difference(self, other: Interval) -> list[Interval]:
        """The parts of this interval not in ``other``: zero, one or two non-empty intervals, time-ordered."""
        if not self.overlaps(other):
            return [] if self.is_empty else [self]
        pieces = []
        if self.start < other.start:
            pieces.append(Interval(self.start, other.start))
        if other.end < self.end:
            pieces.append(Interval(other.end, self.end))
        return pieces


ETERNITY = Interval(MIN_TS, MAX_TS)


def is_open_ended(interval: Interval) -> bool:
    """True when an end of ``interval`` is an end of representable time (as
    Druid's ETERNITY, or half of it, parses): a span to clip to what exists
    before locking or cutting it into buckets."""
    return interval.start == MIN_TS or interval.end == MAX_TS


# Joda's partial instants (2016, 2016-06) and Druid's extended-year instants
# (ETERNITY's ends: years beyond 9999, or before year 1, with a sign).
_YEAR_MONTH = re.compile(r"^(\d{4})(?:-(\d{2}))?$")
_EXTENDED_YEAR = re.compile(r"^([+-]?)(\d+)-\d{2}-\d{2}(?:T[\d:.]*)?(?:Z|[+-]\d{2}:?\d{2})?$")


def _end_point(text: str) -> datetime:
    """One end of an interval: ISO-8601, Joda's year and year-month forms, or an
    instant outside the years 1-9999 (clamped to ``MIN_TS`` / ``MAX_TS``)."""
    if m := _YEAR_MONTH.match(text):
        return parse_ts(f"{m.group(1)}-{m.group(2) or '01'}-01")
    m = _EXTENDED_YEAR.match(text)
    if m and (m.group(1) == "-" or int(m.group(2)) == 0):
        return MIN_TS
    if m and int(m.group(2)) > 9999:
        return MAX_TS
    return parse_ts(text)


_PERIOD = re.compile(
    r"^P(?:(?P<Y>\d+)Y)?(?:(?P<M>\d+)M)?(?:(?P<W>\d+)W)?(?:(?P<D>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def add_period(ts: datetime, period: str, sign: int = 1) -> datetime:
    """``ts`` moved by an ISO-8601 period (P1D, PT1H, P1M; calendar months and
    years, the day clamped to the month's last), forward (sign 1) or back (-1).
    Raises ValueError for anything else, OverflowError past the years 1-9999."""
    m = _PERIOD.match(period) if isinstance(period, str) else None
    if not m or not any(m.groupdict().values()):
        raise ValueError(f"{period!r} is not an ISO-8601 period like P1D, PT1H or P1M")
    g = {k: (v or "0") for k, v in m.groupdict().items()}
    months = int(g["Y"]) * 12 + int(g["M"])
    if months:
        index = ts.year * 12 + ts.month - 1 + sign * months
        year, month = divmod(index, 12)
        if not 1 <= year <= 9999:
            raise OverflowError(f"{period} from {format_ts(ts)} leaves the years 1-9999")
        day = min(ts.day, calendar.monthrange(year, month + 1)[1])
        ts = ts.replace(year=year, month=month + 1, day=day)
    delta = timedelta(
        weeks=int(g["W"]),
        days=int(g["D"]),
        hours=int(g["h"]),
        minutes=int(g["m"]),
        seconds=float(g["s"]),
    )
    return ts + sign * delta


_MILLI = timedelta(milliseconds=1)
_WEEK_STEP = timedelta(days=7)
_DAYS = tuple(timedelta(days=d) for d in range(7))
_datetime = datetime


class Granularity:
    """A way of cutting time into buckets (segment or query granularity).

    Get one with ``Granularity.from_name("day")`` or use the module constants
    (``DAY``, ``HOUR``...). Instances are singletons and compare by identity.

    ``ALL`` has a single bucket, ``ETERNITY`` = ``[MIN_TS, MAX_TS)``: it
    truncates every timestamp to ``MIN_TS`` (0001-01-01T00:00:00.000Z).
    ``NONE`` is Druid's: one bucket per millisecond (``truncate`` drops only
    the microseconds), so it buckets time as finely as Druid can store it.
    """

    __slots__ = ("name",)

    name: str

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Granularity.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple:
        return (Granularity.from_name, (self.name,))

    @staticmethod
    def from_name(name: str) -> Granularity:
        """Look up a granularity by name, case-insensitively (``"day"``, ``"FIVE_MINUTE"``...)."""
        if isinstance(name, Granularity):
            return name
        found = _BY_NAME.get(name.strip().upper()) if isinstance(name, str) else None
        if found is None:
            raise ValueError(
                f"unknown granularity {name!r}; accepted (any case): {', '.join(GRANULARITY_NAMES)}"
            )
        return found

    def truncate(self, ts: datetime) -> datetime:  # pragma: no cover - overridden
        """The start of the bucket holding ``ts``."""
        raise NotImplementedError

    def next(self, ts: datetime) -> datetime:  # pragma: no cover - overridden
        """The start of the bucket after the one holding ``ts`` (clamped to ``MAX_TS``)."""
        raise NotImplementedError

    def bucket(self, ts: datetime) -> Interval:
        """The bucket holding ``ts``."""
        return Interval(self.truncate(ts), self.next(ts))

    def iter_buckets(self, interval: Interval) -> Iterator[Interval]:
        """Buckets overlapping ``interval``, time-ordered (none for an empty interval)."""
        end = interval.end
        if interval.start >= end:
            return
        current = self.truncate(interval.start)
        while current < end:
            following = self.next(current)
            yield Interval(current, following)
            if following <= current:  # clamped at MAX_TS
                return
            current = following

    def is_aligned(self, interval: Interval) -> bool:
        """True when both ends of ``interval`` fall on bucket boundaries of this granularity."""
        if self is ALL:
            return interval.start == MIN_TS and interval.end == MAX_TS
        return (
            self.truncate(interval.start) == interval.start
            and self.truncate(interval.end) == interval.end
        )


class _Fixed(Granularity):
    """Granularities that cut inside a day: fixed length, aligned to midnight UTC."""

    __slots__ = ("_n", "_step", "_unit")

    def __init__(self, name: str, step: timedelta, unit: int, n: int) -> None:
        super().__init__(name)
        self._step = step
        self._unit = unit  # 0 second, 1 minute, 2 hour, 3 day
        self._n = n

    def truncate(self, ts: datetime) -> datetime:
        if ts.tzinfo is not UTC:
            ts = _as_utc(ts)
        # Positional datetime() is several times faster than datetime.replace().
        unit = self._unit
        if unit == 3:
            return _datetime(ts.year, ts.month, ts.day, 0, 0, 0, 0, UTC)
        if unit == 2:
            hour = ts.hour
            n = self._n
            return _datetime(
                ts.year, ts.month, ts.day, hour - hour % n if n != 1 else hour, 0, 0, 0, UTC
            )
        if unit == 1:
            minute = ts.minute
            n = self._n
            return _datetime(
                ts.year,
                ts.month,
                ts.day,
                ts.hour,
                minute - minute % n if n != 1 else minute,
                0,
                0,
                UTC,
            )
        return _datetime(ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second, 0, UTC)

    def next(self, ts: datetime) -> datetime:
        try:
            return self.truncate(ts) + self._step
        except OverflowError:
            return MAX_TS


class _Week(Granularity):
    __slots__ = ()

    def truncate(self, ts: datetime) -> datetime:
        if ts.tzinfo is not UTC:
            ts = _as_utc(ts)
        return _datetime(ts.year, ts.month, ts.day, 0, 0, 0, 0, UTC) - _DAYS[ts.weekday()]

    def next(self, ts: datetime) -> datetime:
        try:
            return self.truncate(ts) + _WEEK_STEP
        except OverflowError:
            return MAX_TS


class _Months(Granularity):
    """MONTH, QUARTER and YEAR: calendar months counted from January."""

    __slots__ = ("_months",)

    def __init__(self, name: str, months: int) -> None:
        super().__init__(name)
        self._months = months

    def truncate(self, ts: datetime) -> datetime:
        if ts.tzinfo is not UTC:
            ts = _as_utc(ts)
        n = self._months
        month = ts.month if n == 1 else ts.month - (ts.month - 1) % n
        return _datetime(ts.year, month, 1, 0, 0, 0, 0, UTC)

    def next(self, ts: datetime) -> datetime:
        start = self.truncate(ts)
        index = start.month - 1 + self._months
        year = start.year + index // 12
        if year > 9999:
            return MAX_TS
        return datetime(year, index % 12 + 1, 1, tzinfo=UTC)


class _All(Granularity):
    __slots__ = ()

    def truncate(self, ts: datetime) -> datetime:
        return MIN_TS

    def next(self, ts: datetime) -> datetime:
        return MAX_TS


class _None(Granularity):
    """Druid's NoneGranularity: one bucket per millisecond (Druid's time unit)."""

    __slots__ = ()

    def truncate(self, ts: datetime) -> datetime:
        if ts.tzinfo is not UTC:
            ts = _as_utc(ts)
        micros = ts.microsecond
        return ts if micros % 1000 == 0 else ts.replace(microsecond=micros - micros % 1000)

    def next(self, ts: datetime) -> datetime:
        try:
            return self.truncate(ts) + _MILLI
        except OverflowError:
            return MAX_TS


SECOND: Granularity = _Fixed("SECOND", timedelta(seconds=1), 0, 1)
MINUTE: Granularity = _Fixed("MINUTE", timedelta(minutes=1), 1, 1)
FIVE_MINUTE: Granularity = _Fixed("FIVE_MINUTE", timedelta(minutes=5), 1, 5)
FIFTEEN_MINUTE: Granularity = _Fixed("FIFTEEN_MINUTE", timedelta(minutes=15), 1, 15)
THIRTY_MINUTE: Granularity = _Fixed("THIRTY_MINUTE", timedelta(minutes=30), 1, 30)
HOUR: Granularity = _Fixed("HOUR", timedelta(hours=1), 2, 1)
SIX_HOUR: Granularity = _Fixed("SIX_HOUR", timedelta(hours=6), 2, 6)
DAY: Granularity = _Fixed("DAY", timedelta(days=1), 3, 1)
WEEK: Granularity = _Week("WEEK")
MONTH: Granularity = _Months("MONTH", 1)
QUARTER: Granularity = _Months("QUARTER", 3)
YEAR: Granularity = _Months("YEAR", 12)
ALL: Granularity = _All("ALL")
NONE: Granularity = _None("NONE")

_ORDERED = (
    SECOND,
    MINUTE,
    FIVE_MINUTE,
    FIFTEEN_MINUTE,
    THIRTY_MINUTE,
    HOUR,
    SIX_HOUR,
    DAY,
    WEEK,
    MONTH,
    QUARTER,
    YEAR,
    ALL,
    NONE,
)
GRANULARITY_NAMES: tuple[str, ...] = tuple(g.name for g in _ORDERED)
_BY_NAME: dict[str, Granularity] = {g.name: g for g in _ORDERED}

for _g in _ORDERED:
    setattr(Granularity, _g.name, _g)  # also reachable as Granularity.DAY etc.
del _g


def granularity_divides(query: str, segment: str) -> bool:
    """True when every segment-granularity bucket is a union of query buckets."""
    if query == "NONE":
        return True
    if segment == "NONE":  # one-millisecond chunks: only NONE fits inside
        return False
    if query == "WEEK" and segment in ("MONTH", "QUARTER", "YEAR"):
        return False  # ISO weeks straddle months and years
    # GRANULARITY_NAMES runs from the finest to ALL.
    return GRANULARITY_NAMES.index(query) <= GRANULARITY_NAMES.index(segment)
