"""ISO 8601 periods and time zones as Druid's time functions take them, for every
engine: a period is one unit (`PT1H`, `P1D`, `P3M`, `P1Y`...), periods and zones
are literals. Pure: no Spark or Django import."""

from __future__ import annotations

import re

from metastore.druid.expressions.types import Arg, ExpressionError, literal

_PERIOD = re.compile(
    r"^P(?:(?P<Y>\d+)Y)?(?:(?P<M>\d+)M)?(?:(?P<W>\d+)W)?(?:(?P<D>\d+)D)?"
    r"(?:T(?:(?P<H>\d+)H)?(?:(?P<MI>\d+)M)?(?:(?P<S>\d+)S)?)?$"
)
MILLIS = {"W": 604_800_000, "D": 86_400_000, "H": 3_600_000, "MI": 60_000, "S": 1000}
UNIT = {"Y": "YEAR", "M": "MONTH", "W": "WEEK", "D": "DAY", "H": "HOUR", "MI": "MINUTE"}
UNIT["S"] = "SECOND"
# Periods that align the same way whether counted from the epoch or within their
# parent field (Druid aligns hours within the day, months within the year...).
ALIGNED_WITHIN = {"H": 24, "MI": 60, "S": 60, "M": 12, "D": 1, "W": 1}


def period(arg: Arg, name: str) -> tuple[str, int]:
    """(unit, count) of a single-unit ISO 8601 period."""
    value = str(literal(arg, "the period", name)).upper()
    m = _PERIOD.match(value)
    units = [(u, int(n)) for u, n in (m.groupdict().items() if m else ()) if n]
    if len(units) != 1 or units[0][1] == 0:
        raise ExpressionError(
            f"{name}(): period {value!r} is not supported; use one unit, e.g. PT1H, P1D, P3M, P1Y"
        )
    return units[0]


def check_alignment(unit: str, n: int, name: str) -> None:
    """A multiple of a unit that does not divide its parent needs an origin here."""
    if n > 1 and ALIGNED_WITHIN.get(unit, 0) % n and unit != "Y":
        raise ExpressionError(
            f"{name}(): a period of {n} {UNIT[unit].lower()}s needs an origin here"
        )


def zone_literal(args: list[Arg], index: int, name: str) -> str | None:
    """The time zone argument at `index` (None when absent or null)."""
    if len(args) <= index or args[index].sql == "NULL":
        return None
    return str(literal(args[index], "the time zone", name))


def origin_arg(args: list[Arg]) -> Arg | None:
    return args[2] if len(args) > 2 and args[2].sql != "NULL" else None


EXTRACT_UNITS = (
    "EPOCH",
    "MILLISECOND",
    "SECOND",
    "MINUTE",
    "HOUR",
    "DAY",
    "DOW",
    "ISODOW",
    "DOY",
    "WEEK",
    "MONTH",
    "QUARTER",
    "YEAR",
    "ISOYEAR",
)


def extract_unit(arg: Arg) -> str:
    unit = str(literal(arg, "the unit", "timestamp_extract")).upper()
    if unit not in EXTRACT_UNITS:
        raise ExpressionError(
            f"timestamp_extract(): unit {unit!r} is not supported; accepted: "
            + ", ".join(EXTRACT_UNITS)
        )
    return unit
