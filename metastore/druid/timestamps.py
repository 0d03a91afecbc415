"""timestampSpec: which column holds each row's time, in which format."""

from __future__ import annotations

from dataclasses import dataclass

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, object_at, string_at
from metastore.intervals import parse_ts

TIMESTAMP_FORMATS = ("iso", "auto", "millis", "posix", "micro", "nano", "ruby")
TIMESTAMP_SPEC_FIELDS = {"column", "format", "missingValue"}
TIMESTAMP_PATH = "spec.dataSchema.timestampSpec"


@dataclass(frozen=True)
class TimestampSpec:
    column: str
    format: str  # one of TIMESTAMP_FORMATS, or a Joda / strftime pattern
    missing_value: str | None
    column_given: str | None  # the column as the spec wrote it (None: absent)


def _format(ts: dict, path: str) -> str:
    fmt = string_at(ts, "format", path, required=False, default="auto")
    if fmt.lower() in TIMESTAMP_FORMATS:
        return fmt.lower()
    if not any(ch.isalpha() for ch in fmt):
        raise SpecError(
            f"{path}.format",
            f"unknown timestamp format {fmt!r}; accepted: "
            f"{', '.join(TIMESTAMP_FORMATS)} or a pattern such as yyyy-MM-dd HH:mm:ss or %Y-%m-%d",
        )
    return fmt


def timestamp_spec(schema: dict) -> TimestampSpec:
    """dataSchema.timestampSpec: column (default `timestamp`), format (default
    `auto`), and missingValue (an ISO timestamp for rows without one)."""
    path = TIMESTAMP_PATH
    ts = object_at(schema.get("timestampSpec"), path, required=False)
    allow(ts, path, TIMESTAMP_SPEC_FIELDS)
    column = string_at(ts, "column", path, required=False, default="timestamp")
    fmt = _format(ts, path)
    missing = ts.get("missingValue")
    if missing is not None:
        if not isinstance(missing, str):
            raise SpecError(f"{path}.missingValue", "must be an ISO timestamp string")
        try:
            parse_ts(missing)  # an instant in the years 1-9999, never clamped as interval ends are
        except ValueError:
            raise SpecError(
                f"{path}.missingValue", f"{missing!r} is not an ISO timestamp"
            ) from None
    return TimestampSpec(column, fmt, missing, ts.get("column"))
