"""ISO-8601 periods as Druid (Joda-Time) reads them (pure core: standard library only).

Retention rules (`P1M`), kill settings (`P90D`, `durationToRetain` may be
negative, e.g. `-P1D` or `P-1D`) and history retention (`P7D`) are periods: a
calendar amount, not a fixed duration, so `P1M` back from March 31st is the last
day of February, as Joda's `DateTime.minus(Period)` gives.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

__all__ = ["Period", "PeriodError"]

_FIELD = r"(?:(?P<{0}>[-+]?\d+(?:[.,]\d+)?){1})?"
_PERIOD = re.compile(
    r"^(?P<sign>[-+])?P"
    + _FIELD.format("years", "Y")
    + _FIELD.format("months", "M")
    + _FIELD.format("weeks", "W")
    + _FIELD.format("days", "D")
    + r"(?:T"
    + _FIELD.format("hours", "H")
    + _FIELD.format("minutes", "M")
    + _FIELD.format("seconds", "S")
    + r")?$"
)
_CALENDAR = ("years", "months")
_WHOLE = ("years", "months", "weeks", "days", "hours", "minutes")


class PeriodError(ValueError):
    """Text that is not an ISO-8601 period."""


@dataclass(frozen=True)
class Period:
    """A signed ISO-8601 period: whole years, months, weeks, days, hours, minutes,
    and seconds (with a fraction)."""

    years: int = 0
    months: int = 0
    weeks: int = 0
    days: int = 0
    hours: int = 0
    minutes: int = 0
    seconds: float = 0.0
    text: str = ""

    @classmethod
    def parse(cls, text: object) -> Period:
        """`P1M`, `P30D`, `PT1H`, `P1Y2M3DT4H5M6.5S`, `P2W`, `-P1D`, `P-1D`."""
        if not isinstance(text, str):
            raise PeriodError(f"must be an ISO-8601 period string such as P1D, got {text!r}")
        match = _PERIOD.match(text.strip().upper())
        fields = match.groupdict() if match else {}
        if not match or not any(fields[name] for name in (*_WHOLE, "seconds")):
            raise PeriodError(
                f"{text!r} is not an ISO-8601 period; expected e.g. P1D, PT1H, P1M or P1Y2M3DT4H"
            )
        if text.strip().upper().endswith("T"):
            raise PeriodError(f"{text!r} is not an ISO-8601 period: nothing follows T")
        sign = -1 if fields["sign"] == "-" else 1
        values: dict = {}
        for name in _WHOLE:
            raw = fields[name]
            if raw and ("." in raw or "," in raw):
                raise PeriodError(f"{text!r}: only seconds may have a fraction")
            values[name] = sign * int(raw) if raw else 0
        raw = fields["seconds"]
        values["seconds"] = sign * float(raw.replace(",", ".")) if raw else 0.0
        return cls(**values, text=text.strip())

    def __str__(self) -> str:
        return self.text or self._canonical()

    def _canonical(self) -> str:
        date = "".join(
            f"{v}{u}"
            for v, u in ((self.years, "Y"), (self.months, "M"), (self.weeks, "W"), (self.days, "D"))
            if v
        )
        seconds = f"{self.seconds:g}" if self.seconds else ""
        time = "".join(f"{v}{u}" for v, u in ((self.hours, "H"), (self.minutes, "M")) if v)
        time += f"{seconds}S" if seconds else ""
        return "P" + (date or ("" if time else "0D")) + (f"T{time}" if time else "")

    def _fixed(self) -> timedelta:
        return timedelta(
            weeks=self.weeks,
            days=self.days,
            hours=self.hours,
            minutes=self.minutes,
            seconds=self.seconds,
        )

    def add_to(self, ts: datetime, sign: int = 1) -> datetime:
        """`ts` plus (or with `sign=-1` minus) this period: months first, clamped to
        the month's last day, then the fixed part, as Joda does."""
        months = sign * (self.years * 12 + self.months)
        if months:
            index = ts.year * 12 + ts.month - 1 + months
            year, month = divmod(index, 12)
            if not 1 <= year <= 9999:
                raise OverflowError(f"{self} from {ts.isoformat()} leaves the years 1 to 9999")
            day = min(ts.day, calendar.monthrange(year, month + 1)[1])
            ts = ts.replace(year=year, month=month + 1, day=day)
        return ts + sign * self._fixed()

    def before(self, ts: datetime) -> datetime:
        """`ts` minus this period (Joda's `DateTime.minus(Period)`); clamped to the
        earliest representable time when it would fall before it."""
        try:
            return self.add_to(ts, -1)
        except OverflowError:
            return datetime.min.replace(tzinfo=ts.tzinfo) if self._positive() else ts

    def _positive(self) -> bool:
        return (self.years * 12 + self.months) > 0 or self._fixed() > timedelta(0)

    def is_negative(self) -> bool:
        """Whether the period points back in time (Druid allows it for durationToRetain)."""
        return (self.years * 12 + self.months) < 0 or self._fixed() < timedelta(0)
