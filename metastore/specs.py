"""Validation of Druid-shaped task specs (SPEC §6) into plain, checked dataclasses.

A spec that a Druid user would submit runs unchanged; anything Strata does not
understand is refused with a `SpecError` that names the field (as a dotted path)
and says what would be accepted. Nothing here touches the database or Spark, so
the API, the console and the workers share one definition of a valid spec.
"""

from __future__ import annotations

import calendar
import glob
import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from metastore.druid_expr import ExpressionError
from metastore.druid_expr import translate as translate_expression
from metastore.intervals import (
    GRANULARITY_NAMES,
    Granularity,
    Interval,
    format_ts,
    granularity_divides,
)

TASK_TYPES = ("index_parallel", "index", "compact", "kill")
INPUT_SOURCES = ("local", "inline", "druid", "combining")
INPUT_FORMATS = ("json", "csv", "tsv", "parquet", "orc", "avro_ocf")
FILE_FORMATS = ("parquet", "orc", "avro_ocf")  # files with their own schema, never inline
# Input sources that need something outside this product: what to use instead.
OUT_OF_SCOPE_SOURCES = {
    "http": "download the files into an input root (STRATA_INPUT_ROOTS) and use a local input source",
    "s3": "copy the objects into an input root (STRATA_INPUT_ROOTS) and use a local input source",
    "google": "copy the objects into an input root and use a local input source",
    "azure": "copy the blobs into an input root and use a local input source",
    "azureStorage": "copy the blobs into an input root and use a local input source",
    "hdfs": "copy the files into an input root and use a local input source",
    "sql": "export the query result to JSON or CSV in an input root and use a local input source",
    "delta": "export the table to Parquet in an input root and use a local input source",
    "iceberg": "export the table to Parquet in an input root and use a local input source",
    "oss": "copy the objects into an input root and use a local input source",
}
# Input formats Druid documents that Strata does not read: why, and what to use.
UNSUPPORTED_FORMATS = {
    "avro_stream": "is a streaming format (one record per message), outside Strata's "
    "batch scope; write the records as JSON or Parquet files",
    "protobuf": "is a streaming format (one record per message), outside Strata's "
    "batch scope; write the records as JSON or Parquet files",
    "kafka": "is Kafka ingestion's format, outside Strata's batch scope",
    "kinesis": "is Kinesis ingestion's format, outside Strata's batch scope",
    "thrift": "comes from a Druid contrib extension, outside Strata's scope",
    "regex": "is not implemented here; convert the lines to CSV or JSON",
}
# Filter types Druid documents that transformSpec.filter does not apply here.
UNSUPPORTED_FILTERS = (
    "equals",
    "null",
    "range",
    "columnComparison",
    "extraction",
    "search",
    "like",
    "regex",
    "interval",
    "true",
    "false",
    "arrayContainsElement",
    "expression",
    "javascript",
    "spatial",
)
TIMESTAMP_FORMATS = ("iso", "auto", "millis", "posix", "nano")
DIMENSION_TYPES = ("string", "long", "double", "float", "auto", "json")
MULTI_VALUE_HANDLING = ("SORTED_ARRAY", "SORTED_SET", "ARRAY")
FIRST_LAST_TYPES = tuple(
    f"{kind}{end}" for kind in ("string", "long", "double", "float") for end in ("First", "Last")
)
SKETCH_TYPES = ("thetaSketch", "HLLSketchBuild", "HLLSketchMerge", "quantilesDoublesSketch")
METRIC_TYPES = (
    "count",
    "longSum",
    "doubleSum",
    "floatSum",
    "longMin",
    "longMax",
    "doubleMin",
    "doubleMax",
    "floatMin",
    "floatMax",
    "hyperUnique",
    *FIRST_LAST_TYPES,
    *SKETCH_TYPES,
)
# Aggregator types Druid documents that Strata does not implement, with where
# they come from; a spec naming one is refused with the reason (issue 27).
_CONTRIB = "an aggregator of the Druid contrib extension {}, which is outside Strata's scope"
_CORE_EXT = "an aggregator of Druid's core extension {}, not implemented here"
UNSUPPORTED_AGGREGATORS = {
    **dict.fromkeys(
        (
            "compressedBigDecimal",
            "compressedBigDecimalSum",
            "compressedBigDecimalMax",
            "compressedBigDecimalMin",
        ),
        _CONTRIB.format("druid-compressed-bigdecimal"),
    ),
    **dict.fromkeys(
        ("Bitmap64ExactCountBuild", "Bitmap64ExactCountMerge"),
        _CONTRIB.format("druid-exact-count-bitmap"),
    ),
    **dict.fromkeys(
        ("spectatorHistogram", "spectatorHistogramTimer", "spectatorHistogramDistribution"),
        _CONTRIB.format("druid-spectator-histogram"),
    ),
    **dict.fromkeys(("momentSketch", "momentSketchMerge"), _CONTRIB.format("druid-momentsketch")),
    "tDigestSketch": _CONTRIB.format("druid-tdigestsketch"),
    "ddSketch": _CONTRIB.format("druid-ddsketch"),
    "distinctCount": _CONTRIB.format("druid-distinctcount"),
    **dict.fromkeys(("timeMin", "timeMax"), _CONTRIB.format("druid-time-min-max")),
    "unsigned_int": _CONTRIB.format("unsigned-int-extensions"),
    **dict.fromkeys(
        (
            "KllDoublesSketch",
            "KllFloatsSketch",
            "KllDoublesSketchMerge",
            "KllFloatsSketchMerge",
            "quantilesDoublesSketchMerge",
        ),
        _CORE_EXT.format("druid-datasketches (KLL / merge of quantiles sketches)")
        + "; use quantilesDoublesSketch",
    ),
    "arrayOfDoublesSketch": _CORE_EXT.format("druid-datasketches (tuple sketches)"),
    **dict.fromkeys(("variance", "varianceFold"), _CORE_EXT.format("druid-stats")),
    **dict.fromkeys(
        ("approxHistogram", "approxHistogramFold", "fixedBucketsHistogram"),
        _CORE_EXT.format("druid-histogram") + "; use quantilesDoublesSketch",
    ),
    "bloom": "a query-time aggregator of Druid's core extension druid-bloom-filter",
    **dict.fromkeys(
        ("longAny", "doubleAny", "floatAny", "stringAny"),
        "not implemented here; use the matching *First or *Last aggregator",
    ),
    "doubleMean": "a query-time aggregator in Druid; store a doubleSum and a count",
    "cardinality": "a query-time aggregator in Druid; use hyperUnique or HLLSketchBuild",
    "filtered": "not implemented here; filter or compute the value in transformSpec",
    "expression": "not implemented here; compute the value in transformSpec.transforms",
    "javascript": "a JavaScript aggregator (disabled in Druid by default), not implemented here",
    "grouping": "a query-time aggregator in Druid",
}
# Sketch defaults, as in Druid's DataSketches extension.
THETA_DEFAULT_SIZE = 16384  # nominal entries (Spark: lgNomEntries = log2(size))
HLL_DEFAULT_LG_K = 12
QUANTILES_DEFAULT_K = 128
PARTITION_TYPES = ("dynamic", "hashed", "range", "single_dim")
HASH_PARTITION_FUNCTION = "murmur3_32_abs"  # Druid's only name; Strata hashes with Spark's murmur3
FILTER_TYPES = ("selector", "in", "bound", "and", "or", "not")
DEFAULT_MAX_ROWS_PER_SEGMENT = 5_000_000
DEFAULT_MAX_TOTAL_ROWS = 20_000_000
DEFAULT_TASK_LOCK_TIMEOUT_MS = 300_000
UNLIMITED = 2**31 - 1
# The fields each part of a spec accepts (the validator's `_allow` sets), named so
# that metastore.spec_schema publishes the same ones in the OpenAPI schema.
INDEX_TOP_LEVEL = {"type", "id", "spec", "context", "groupId", "resource", "dataSource"}
KILL_TOP_LEVEL = {
    "type",
    "id",
    "dataSource",
    "interval",
    "context",
    "markAsUnused",
    "versions",
    "batchSize",
    "limit",
    "maxUsedStatusLastUpdatedTime",
}
KILL_UNSUPPORTED: tuple[str, ...] = ()  # every documented kill field is honoured
DEFAULT_KILL_BATCH_SIZE = 100  # Druid's default
INGESTION_SPEC_FIELDS = {"dataSchema", "ioConfig", "tuningConfig"}
DATA_SCHEMA_FIELDS = {
    "dataSource",
    "timestampSpec",
    "dimensionsSpec",
    "metricsSpec",
    "granularitySpec",
    "transformSpec",
}
TIMESTAMP_SPEC_FIELDS = {"column", "format", "missingValue"}
GRANULARITY_SPEC_FIELDS = {"type", "segmentGranularity", "queryGranularity", "rollup", "intervals"}
GRANULARITY_SPEC_TYPES = ("uniform", "arbitrary")
TRANSFORM_SPEC_FIELDS = {"filter", "transforms"}
IO_CONFIG_FIELDS = {"type", "inputSource", "inputFormat", "appendToExisting", "dropExisting"}
INPUT_SOURCE_FIELDS = {
    "local": {"type", "baseDir", "filter", "files"},
    "inline": {"type", "data"},
    "druid": {
        "type",
        "dataSource",
        "interval",
        "filter",
        "dimensions",
        "metrics",
        "maxInputSegmentBytesPerTask",
    },
    "combining": {"type", "delegates"},
}
DYNAMIC_PARTITIONS_FIELDS = {"type", "maxRowsPerSegment", "maxTotalRows"}
INDEX_TUNING_FIELDS = {
    "type",
    "partitionsSpec",
    "forceGuaranteedRollup",
    "maxParseExceptions",
    "maxSavedParseExceptions",
    "logParseExceptions",
    "maxRetry",
    "maxNumConcurrentSubTasks",
    "totalNumMergeTasks",
}


class SpecError(ValueError):
    """A spec is invalid; `field` is the dotted path of the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


# --- the validated shapes -----------------------------------------------------


@dataclass(frozen=True)
class Context:
    priority: int | None = None
    task_lock_timeout_ms: int = DEFAULT_TASK_LOCK_TIMEOUT_MS
    force_time_chunk_lock: bool = True
    use_concurrent_locks: bool = False
    task_lock_type: str | None = None  # Druid's taskLockType; see locking.lock_mode


@dataclass(frozen=True)
class Dimension:
    """type: string, long, double, or json (Druid's auto/json nested columns, stored
    as JSON text). A string dimension whose input value is a list is multi-value:
    stored as an array of strings ordered by `multi_value_handling`."""

    name: str
    type: str = "string"
    multi_value_handling: str = "SORTED_ARRAY"


@dataclass(frozen=True)
class Metric:
    """type is canonical: float* metrics are double*; sketches keep Druid's names.
    `size` is the sketch's accuracy parameter: thetaSketch lgNomEntries,
    HLLSketchBuild lgK, quantilesDoublesSketch k (Spark's KLL sketch)."""

    type: str
    name: str
    field_name: str | None = None
    size: int | None = None


@dataclass(frozen=True)
class Transform:
    """An expression transform: `expression` is Druid's text, `columns` what it reads."""

    name: str
    expression: str
    columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class FlattenField:
    """flattenSpec field: kind "root" (a top-level field), "path" (JSONPath) or "jq"
    (a jq expression beyond keys and indexes; jq paths and tree fields are paths)."""

    name: str
    kind: str
    expr: str


@dataclass(frozen=True)
class InputSpec:
    type: str
    format: str | None = None
    files: tuple[str, ...] = ()  # local: resolved absolute paths
    data: str | None = None  # inline
    datasource: str | None = None  # druid
    interval: Interval | None = None  # druid
    csv_columns: tuple[str, ...] | None = None  # None: the first line is the header
    csv_skip_header_rows: int = 0
    delimiter: str = ","  # csv / tsv
    list_delimiter: str | None = None  # csv / tsv multi-value separator
    flatten: tuple[FlattenField, ...] = ()  # flattenSpec fields
    avro_schema: str | None = None  # avro_ocf reader schema (JSON text)
    binary_as_string: bool = False  # avro_ocf: bytes as UTF-8 text
    use_field_discovery: bool = True  # json flattenSpec: top-level fields too
    delegates: tuple[InputSpec, ...] = ()  # combining

    @property
    def druid_source(self) -> InputSpec | None:
        """The `druid` input read (itself, or the one druid delegate of a combining source)."""
        if self.type == "druid":
            return self
        return next((d for d in self.delegates if d.type == "druid"), None)

    @property
    def file_sources(self) -> tuple[InputSpec, ...]:
        """The local/inline inputs (itself, or the combining source's delegates)."""
        if self.type in ("local", "inline"):
            return (self,)
        return tuple(d for d in self.delegates if d.type in ("local", "inline"))


@dataclass(frozen=True)
class PartitionsSpec:
    type: str = "dynamic"
    max_rows_per_segment: int = DEFAULT_MAX_ROWS_PER_SEGMENT
    max_total_rows: int = DEFAULT_MAX_TOTAL_ROWS
    num_shards: int | None = None
    target_rows_per_segment: int | None = None
    partition_dimensions: tuple[str, ...] = ()


@dataclass(frozen=True)
class IngestionSpec:
    datasource: str
    timestamp_column: str
    timestamp_format: str
    timestamp_missing_value: str | None
    dimensions: tuple[Dimension, ...]
    dimension_exclusions: tuple[str, ...]
    metrics: tuple[Metric, ...]
    segment_granularity: str
    query_granularity: str
    rollup: bool
    intervals: tuple[Interval, ...] | None
    filter: dict | None
    input: InputSpec
    append_to_existing: bool
    drop_existing: bool
    partitions: PartitionsSpec
    force_guaranteed_rollup: bool
    max_parse_exceptions: int
    max_saved_parse_exceptions: int
    max_retry: int
    max_num_concurrent_subtasks: int
    total_num_merge_tasks: int
    transforms: tuple[Transform, ...] = ()
    # includeAllDimensions / useSchemaDiscovery (dimensions found in the input)
    include_all_dimensions: bool = False
    schema_discovery: bool = False
    # "field: reason" for every field accepted without effect (reported by the task)
    ignored: tuple[str, ...] = ()

    @property
    def schemaless(self) -> bool:
        return not self.dimensions

    @property
    def two_phase(self) -> bool:
        return self.partitions.type != "dynamic" or self.force_guaranteed_rollup


@dataclass(frozen=True)
class KillSpec:
    """A kill task's selection of unused segments in its interval (Druid's fields):
    only these versions (None: all), at most `limit` of them (None: all, oldest
    first), only those marked unused no later than `max_used_status_last_updated`."""

    versions: tuple[str, ...] | None = None
    limit: int | None = None
    max_used_status_last_updated: datetime | None = None
    batch_size: int = DEFAULT_KILL_BATCH_SIZE


@dataclass(frozen=True)
class TaskSpec:
    type: str  # canonical: index_parallel | compact | kill
    datasource: str
    context: Context
    ingestion: IngestionSpec | None = None
    interval: Interval | None = None  # kill / compact(interval)
    segment_ids: tuple[str, ...] = ()  # compact(segments)
    compaction: CompactionSpec | None = None
    raw: dict = field(default_factory=dict, compare=False)
    mark_as_unused: bool = False  # kill: mark the interval's used segments unused first
    kill: KillSpec | None = None
    ignored: tuple[str, ...] = ()  # "field: reason" of fields accepted without effect


# --- helpers ------------------------------------------------------------------


def _obj(value: Any, path: str, *, required: bool = True) -> dict:
    if value is None:
        if required:
            raise SpecError(path, "is required (an object)")
        return {}
    if not isinstance(value, dict):
        raise SpecError(path, f"must be an object, got {type(value).__name__}")
    return value


def _allow(obj: dict, path: str, allowed: set[str]) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise SpecError(
            f"{path}.{unknown[0]}" if path else unknown[0],
            f"unknown or unsupported field; accepted fields here: {', '.join(sorted(allowed))}",
        )


def _str(obj: dict, key: str, path: str, *, required: bool = True, default=None) -> str | None:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise SpecError(f"{path}.{key}" if path else key, "is required (a non-empty string)")
        return default
    if not isinstance(value, str):
        raise SpecError(f"{path}.{key}" if path else key, "must be a string")
    return value


# Upper bounds of integer fields whose meaning caps them (issue 15); any other
# integer field is capped at Java's int range, as in Druid.
INT_MAXIMUMS = {
    "numShards": 10_000,
    "maxRetry": 100,
    "maxNumConcurrentSubTasks": 1_000,
    "totalNumMergeTasks": 1_000,
    "skipHeaderRows": 1_000_000,
    "taskLockTimeout": 7 * 24 * 3600 * 1000,  # a week, in ms
    "maxSavedParseExceptions": 10_000,
}
INT_MAXIMUM = 2**31 - 1


def _int(
    obj: dict,
    key: str,
    path: str,
    default: int | None,
    *,
    minimum: int = 0,
    maximum: int | None = None,
) -> int | None:
    value = obj.get(key)
    if value is None:
        return default
    if maximum is None:
        maximum = INT_MAXIMUMS.get(key, INT_MAXIMUM)
    where = f"{path}.{key}" if path else key
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(where, f"must be an integer from {minimum} to {maximum}")
    if value < minimum or value > maximum:
        shown = value if abs(value) < 10**20 else f"{str(value)[:12]}... ({len(str(value))} digits)"
        raise SpecError(where, f"must be an integer from {minimum} to {maximum}, got {shown}")
    return value


def _bool(obj: dict, key: str, path: str, default: bool) -> bool:
    """A boolean; Druid (Jackson) also takes the strings "true" and "false"."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise SpecError(f"{f'{path}.' if path else ''}{key}", "must be true or false")
    return value


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


LATEST_END = datetime(9999, 1, 1, tzinfo=UTC)


def _interval(value: Any, path: str) -> Interval:
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


def _granularity_object(value: dict, path: str) -> Any:
    """{"type": name}, or a period / duration granularity that equals a named one
    (UTC, no origin); other periods, time zones and origins are refused."""
    kind = value.get("type")
    if kind == "period":
        _allow(value, path, {"type", "period", "timeZone", "origin"})
        named = _STANDARD_PERIODS.get(str(value.get("period")).upper())
        if named and value.get("timeZone") in (None, "UTC", "Etc/UTC") and not value.get("origin"):
            return named
        raise SpecError(
            path,
            f"period granularity {value.get('period')!r} is not supported here: only UTC "
            f"periods without origin equal to a named granularity ({', '.join(_STANDARD_PERIODS)})",
        )
    if kind == "duration":
        _allow(value, path, {"type", "duration", "origin"})
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
    _allow(value, path, {"type"})
    return kind


def _granularity(value: Any, path: str, *, default: str) -> str:
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


DATASOURCE_MAX_BYTES = 200  # UTF-8; it is a directory name and part of task ids


def _datasource_name(value: Any, path: str) -> str:
    """Druid's rules (IdUtils.validateId): not empty, no '/', not starting with '.',
    no whitespace but the space; and here also no control characters and no
    backslash, at most DATASOURCE_MAX_BYTES bytes of UTF-8."""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(path, "is required (a non-empty string)")
    shown = value if len(value) <= 60 else f"{value[:60]!r}... ({len(value)} chars)"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise SpecError(path, f"invalid dataSource name {shown}: not valid Unicode") from None
    if size > DATASOURCE_MAX_BYTES:
        raise SpecError(
            path, f"invalid dataSource name {shown}: {size} bytes, at most {DATASOURCE_MAX_BYTES}"
        )
    if value.startswith("."):
        raise SpecError(path, f"invalid dataSource name {shown}: cannot start with '.'")
    bad = next(
        (
            c
            for c in value
            if c in "/\\"
            or (c.isspace() and c != " ")
            or unicodedata.category(c) in ("Cc", "Cf", "Cs")
        ),
        None,
    )
    if bad is not None:
        raise SpecError(
            path,
            f"invalid dataSource name {shown}: {bad!r} is not allowed "
            "(no slashes, control characters or whitespace but the space)",
        )
    return value


TASK_ID_MAX_LENGTH = 200
_TASK_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:+\-]*\Z")


def validate_task_id(value: Any, path: str = "id") -> str:
    """A task id the user chose: it names directories under intermediary and deep
    storage, so only letters, digits and `_ . : + -`, not starting with '.' or '-',
    at most TASK_ID_MAX_LENGTH characters."""
    if not isinstance(value, str) or not value:
        raise SpecError(path, "must be a non-empty string")
    if len(value) > TASK_ID_MAX_LENGTH:
        raise SpecError(path, f"{len(value)} characters; at most {TASK_ID_MAX_LENGTH}")
    if not _TASK_ID.match(value):
        raise SpecError(
            path,
            f"invalid task id {value[:60]!r}: use letters, digits and _ . : + - "
            "(starting with a letter, digit or _)",
        )
    return value


def _context(raw: Any) -> Context:
    ctx = _obj(raw, "context", required=False)
    priority = ctx.get("priority")
    if priority is not None and (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not -INT_MAXIMUM - 1 <= priority <= INT_MAXIMUM
    ):
        raise SpecError(
            "context.priority", f"must be an integer from {-INT_MAXIMUM - 1} to {INT_MAXIMUM}"
        )
    return Context(
        priority=priority,
        task_lock_timeout_ms=_int(ctx, "taskLockTimeout", "context", DEFAULT_TASK_LOCK_TIMEOUT_MS),
        force_time_chunk_lock=_bool(ctx, "forceTimeChunkLock", "context", True),
        use_concurrent_locks=_bool(ctx, "useConcurrentLocks", "context", False),
        task_lock_type=_str(ctx, "taskLockType", "context", required=False),
    )


# --- filters (transformSpec.filter), checked here, applied by the workers -------


def _none_as(value: Any, default: Any) -> Any:
    """A field given as null counts as absent; any other value (false, 0, "") is
    checked for its type, never taken as absent."""
    return default if value is None else value


def validate_filter(flt: Any, path: str) -> dict:
    flt = _obj(flt, path)
    kind = flt.get("type")
    if isinstance(kind, str) and kind in UNSUPPORTED_FILTERS:
        raise SpecError(
            f"{path}.type",
            f"{kind} filters are not implemented here; accepted: {', '.join(FILTER_TYPES)} "
            "(or compute a column with an expression transform and filter it with selector)",
        )
    if kind not in FILTER_TYPES:
        raise SpecError(
            f"{path}.type", f"unknown filter type {kind!r}; accepted: {', '.join(FILTER_TYPES)}"
        )
    if kind == "selector":
        _allow(flt, path, {"type", "dimension", "value"})
        _str(flt, "dimension", path)
    elif kind == "in":
        _allow(flt, path, {"type", "dimension", "values"})
        _str(flt, "dimension", path)
        if not isinstance(flt.get("values"), list):
            raise SpecError(f"{path}.values", "must be a list")
    elif kind == "bound":
        _allow(
            flt,
            path,
            {"type", "dimension", "lower", "upper", "lowerStrict", "upperStrict", "ordering"},
        )
        _str(flt, "dimension", path)
        if flt.get("lower") is None and flt.get("upper") is None:
            raise SpecError(path, "a bound filter needs lower and/or upper")
        ordering = flt.get("ordering", "lexicographic")
        if ordering not in ("lexicographic", "numeric"):
            raise SpecError(f"{path}.ordering", "must be lexicographic or numeric")
    elif kind in ("and", "or"):
        _allow(flt, path, {"type", "fields"})
        fields = flt.get("fields")
        if not isinstance(fields, list) or not fields:
            raise SpecError(f"{path}.fields", "must be a non-empty list of filters")
        for i, sub in enumerate(fields):
            validate_filter(sub, f"{path}.fields[{i}]")
    else:  # not
        _allow(flt, path, {"type", "field"})
        validate_filter(flt.get("field"), f"{path}.field")
    return flt


# --- index_parallel -------------------------------------------------------------


PATH_MAX_BYTES = 4096  # Linux PATH_MAX
NAME_MAX_BYTES = 255  # Linux NAME_MAX: one path component


def _check_path_text(text: str, path: str) -> None:
    """Refuse, before the filesystem sees it, a path it would choke on: NUL or
    other control characters, a name over NAME_MAX bytes, a path over PATH_MAX."""
    if re.search(r"[\x00-\x1f\x7f]", text):
        raise SpecError(path, "contains a NUL or control character")
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        raise SpecError(path, "is not a valid file name") from None
    if len(encoded) > PATH_MAX_BYTES:
        raise SpecError(path, f"a path of {len(encoded)} bytes; at most {PATH_MAX_BYTES}")
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX_BYTES:
        raise SpecError(path, f"has a name of {longest} bytes; at most {NAME_MAX_BYTES}")


def _resolve_local_files(src: dict, path: str, input_roots: list[Path]) -> tuple[str, ...]:
    roots = [Path(r).resolve() for r in input_roots]
    shown_roots = ", ".join(str(r) for r in roots) or "(none configured)"

    def inside_roots(p: Path) -> bool:
        return any(p == r or r in p.parents for r in roots)

    files: list[Path] = []
    base_dir = src.get("baseDir")
    if base_dir is not None:
        if not isinstance(base_dir, str) or not base_dir:
            raise SpecError(f"{path}.baseDir", "must be a directory path")
        _check_path_text(base_dir, f"{path}.baseDir")
        if isinstance(src.get("filter"), str):
            _check_path_text(src["filter"], f"{path}.filter")
        base = Path(base_dir).resolve()
        if not inside_roots(base):
            raise SpecError(
                f"{path}.baseDir",
                f"{base_dir!r} is outside the allowed input roots (STRATA_INPUT_ROOTS: {shown_roots})",
            )
        if not base.is_dir():
            raise SpecError(f"{path}.baseDir", f"{base_dir!r} is not a directory")
        pattern = src.get("filter") or "*"
        if not isinstance(pattern, str):
            raise SpecError(f"{path}.filter", "must be a glob pattern string")
        for name in sorted(glob.glob(pattern, root_dir=base, recursive=True)):
            candidate = (base / name).resolve()
            if candidate.is_file() and inside_roots(candidate):
                files.append(candidate)
    listed = src.get("files")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(f, str) for f in listed):
            raise SpecError(f"{path}.files", "must be a list of file paths")
        for i, name in enumerate(listed):
            _check_path_text(name, f"{path}.files[{i}]")
            candidate = Path(name).resolve()
            if not inside_roots(candidate):
                raise SpecError(
                    f"{path}.files[{i}]",
                    f"{name!r} is outside the allowed input roots (STRATA_INPUT_ROOTS: {shown_roots})",
                )
            if not candidate.is_file():
                raise SpecError(f"{path}.files[{i}]", f"{name!r} does not exist or is not a file")
            files.append(candidate)
    if base_dir is None and listed is None:
        raise SpecError(path, "a local input source needs baseDir (with filter) or files")
    files = [f for f in dict.fromkeys(files) if os.path.getsize(f) > 0]
    if not files:
        raise SpecError(
            f"{path}.filter" if base_dir is not None else f"{path}.files",
            "matches no non-empty file: the input is empty",
        )
    return tuple(str(f) for f in files)


_JSONPATH = re.compile(
    r"^\$(?:\.[A-Za-z_$][\w$-]*|\[\d+\]|\['[^']*'\]|\[\"[^\"]*\"\])*"
    r"(?:\.(?:length|min|max|sum|avg)\(\))?$"
)


def _flatten_spec(
    fmt_obj: dict, fmt_path: str, *, jq: bool = True
) -> tuple[tuple[FlattenField, ...], bool]:
    path = f"{fmt_path}.flattenSpec"
    spec = _obj(fmt_obj.get("flattenSpec"), path, required=False)
    if not spec:
        return (), True
    _allow(spec, path, {"useFieldDiscovery", "fields"})
    discovery = _bool(spec, "useFieldDiscovery", path, True)
    fields = _none_as(spec.get("fields"), [])
    if not isinstance(fields, list):
        raise SpecError(f"{path}.fields", "must be a list")
    out: list[FlattenField] = []
    for i, f in enumerate(fields):
        fpath = f"{path}.fields[{i}]"
        f = _obj(f, fpath)
        _allow(f, fpath, {"type", "name", "expr", "nodes"})
        kind = f.get("type", "path")
        name = _str(f, "name", fpath)
        if kind == "root":
            out.append(FlattenField(name, "root", name))
            continue
        if kind in ("jq", "tree") and not jq:
            raise SpecError(
                f"{fpath}.type",
                f"{kind} flatten fields are only available with json input (as in Druid); "
                "use a path field with a JSONPath such as $.a.b[0]",
            )
        if kind in ("jq", "tree"):
            path_expr = _jq_or_tree_path(f, kind, fpath)
            # A jq path reads natively (a path field); the rest of jq runs in the jq library.
            out.append(
                FlattenField(name, "path", path_expr)
                if path_expr
                else FlattenField(name, "jq", f["expr"])
            )
            continue
        if kind != "path":
            raise SpecError(
                f"{fpath}.type",
                f"unknown flatten field type {kind!r}; accepted: root, path, jq, tree",
            )
        expr = _str(f, "expr", fpath)
        if not _JSONPATH.match(expr):
            raise SpecError(
                f"{fpath}.expr",
                f"JSONPath {expr!r} is not supported: use $ followed by .field, [index] or "
                "['field'] steps, optionally ending in .length(), .min(), .max(), .sum() or .avg()",
            )
        out.append(FlattenField(name, "path", expr))
    names = [f.name for f in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError(f"{path}.fields", f"field {dup!r} is defined twice")
    return tuple(out), discovery


_JQ_STEP = re.compile(
    r'\.?\[(\d+)\]\??|\.?\["((?:[^"\\]|\\.)*)"\]\??'
    r'|\.([A-Za-z_][A-Za-z0-9_]*)\??|\."((?:[^"\\]|\\.)*)"\??'
)
_PLAIN_KEY = re.compile(r"^[A-Za-z_$][\w$-]*$")


def _jq_or_tree_path(f: dict, kind: str, fpath: str) -> str | None:
    """The JSONPath a jq field (Druid's jq subset: `.a.b`, `.a[0]`, `.["key"]`) or a
    tree field (`nodes`: keys from the root) reads: both walk keys and indexes,
    which Spark evaluates natively, as path fields. None for a jq expression
    beyond keys and indexes (checked by the jq library)."""
    if kind == "tree":
        nodes = f.get("nodes")
        if not isinstance(nodes, list) or not nodes or not all(isinstance(n, str) for n in nodes):
            raise SpecError(f"{fpath}.nodes", "must be a non-empty list of field names")
        return "$" + "".join(_json_path_key(n) for n in nodes)
    expr = _str(f, "expr", fpath)
    import jq

    try:
        jq.compile(expr)
    except ValueError as exc:
        raise SpecError(
            f"{fpath}.expr", f"is not a jq expression: {str(exc).splitlines()[0]}"
        ) from exc
    steps, pos, text = [], 0, expr.strip()
    while pos < len(text):
        m = _JQ_STEP.match(text, pos)
        if m is None:
            return None
        index, quoted, plain, dotted = m.groups()
        if index is not None:
            steps.append(f"[{index}]")
        else:
            key = (
                plain
                if plain is not None
                else json.loads(f'"{quoted if quoted is not None else dotted}"')
            )
            steps.append(_json_path_key(key))
        pos = m.end()
    return "$" + "".join(steps) if steps else None


def _json_path_key(key: str) -> str:
    if _PLAIN_KEY.match(key):
        return f".{key}"
    return f"['{key}']" if "'" not in key else f'["{key}"]'


def _input_format(io: dict, ignored: list[str]) -> dict:
    """The checked inputFormat as keyword arguments of InputSpec."""
    fmt_path = "spec.ioConfig.inputFormat"
    fmt_obj = _obj(io.get("inputFormat"), fmt_path)
    fmt = fmt_obj.get("type")
    if isinstance(fmt, str) and fmt not in INPUT_FORMATS and fmt in UNSUPPORTED_FORMATS:
        raise SpecError(
            f"{fmt_path}.type",
            f"the {fmt} input format {UNSUPPORTED_FORMATS[fmt]}; "
            f"accepted: {', '.join(INPUT_FORMATS)}",
        )
    if fmt not in INPUT_FORMATS:
        raise SpecError(
            f"{fmt_path}.type",
            f"unknown input format {fmt!r}; accepted: {', '.join(INPUT_FORMATS)}",
        )
    out: dict = {"format": fmt}
    if fmt in ("csv", "tsv"):
        _allow(
            fmt_obj,
            fmt_path,
            {
                "type",
                "columns",
                "findColumnsFromHeader",
                "skipHeaderRows",
                "listDelimiter",
                "delimiter",
                "hasHeaderRow",
                "tryParseNumbers",
            },
        )
        if fmt == "csv" and fmt_obj.get("delimiter") not in (None, ","):
            raise SpecError(
                f"{fmt_path}.delimiter", "csv is comma-separated; use tsv with a delimiter"
            )
        delimiter = fmt_obj.get("delimiter") or ("\t" if fmt == "tsv" else ",")
        if not isinstance(delimiter, str) or len(delimiter) != 1:
            raise SpecError(f"{fmt_path}.delimiter", "must be a single character")
        out["delimiter"] = delimiter
        list_delimiter = fmt_obj.get("listDelimiter")
        if list_delimiter is not None:
            if not isinstance(list_delimiter, str) or not list_delimiter:
                raise SpecError(f"{fmt_path}.listDelimiter", "must be a non-empty string")
            if list_delimiter == delimiter:
                raise SpecError(f"{fmt_path}.listDelimiter", "must differ from the delimiter")
        # Druid's default list delimiter is \u0001 (Ctrl-A).
        out["list_delimiter"] = list_delimiter or "\u0001"
        header = _bool(fmt_obj, "findColumnsFromHeader", fmt_path, None)
        if header is None and "hasHeaderRow" in fmt_obj:  # Druid's legacy name
            header = _bool(fmt_obj, "hasHeaderRow", fmt_path, False)
        if fmt_obj.get("tryParseNumbers") is not None:
            ignored.append(
                f"{fmt_path}.tryParseNumbers: every column is parsed by the type its "
                "dimension or metric declares"
            )
        if fmt_obj.get("columns") is not None:
            cols = fmt_obj["columns"]
            if not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols):
                raise SpecError(f"{fmt_path}.columns", "must be a non-empty list of names")
            if header is True:
                raise SpecError(
                    f"{fmt_path}.findColumnsFromHeader",
                    "cannot be true when columns are given",
                )
            out["csv_columns"] = tuple(cols)
        elif header is False:
            raise SpecError(
                f"{fmt_path}.columns", "is required when findColumnsFromHeader is false"
            )
        out["csv_skip_header_rows"] = _int(fmt_obj, "skipHeaderRows", fmt_path, 0)
    elif fmt == "json":
        _allow(
            fmt_obj,
            fmt_path,
            {
                "type",
                "flattenSpec",
                "featureSpec",
                "keepNullColumns",
                "assumeNewlineDelimited",
                "useJsonNodeReader",
            },
        )
        out["flatten"], out["use_field_discovery"] = _flatten_spec(fmt_obj, fmt_path)
        for key, reason in (
            ("featureSpec", "Jackson parser features; rows are read by Spark's JSON reader"),
            (
                "keepNullColumns",
                "a column that is null in every row is kept when it is a declared dimension",
            ),
            ("assumeNewlineDelimited", "input is read one JSON object per line"),
            ("useJsonNodeReader", "input is read one JSON object per line"),
        ):
            if fmt_obj.get(key) not in (None, False, {}):
                ignored.append(f"{fmt_path}.{key}: {reason}")
    else:  # parquet, orc, avro_ocf: path flatten fields only, as in Druid
        allowed = {"type", "binaryAsString", "flattenSpec"}
        _allow(fmt_obj, fmt_path, allowed | ({"schema"} if fmt == "avro_ocf" else set()))
        out["flatten"], out["use_field_discovery"] = _flatten_spec(fmt_obj, fmt_path, jq=False)
        if fmt == "avro_ocf":
            out["avro_schema"] = _avro_schema(fmt_obj.get("schema"), f"{fmt_path}.schema")
            out["binary_as_string"] = _bool(fmt_obj, "binaryAsString", fmt_path, False)
        elif fmt_obj.get("binaryAsString") is not None:
            ignored.append(
                f"{fmt_path}.binaryAsString: {fmt} binary columns are read as Spark reads them"
            )
    return out


def _avro_schema(schema: Any, path: str) -> str | None:
    """An avro_ocf reader schema, checked, as JSON text (None: the files' own)."""
    if schema is None:
        return None
    import fastavro

    try:
        fastavro.parse_schema(schema)
    except Exception as exc:  # noqa: BLE001 - fastavro says what is wrong with it
        raise SpecError(path, f"is not a valid Avro schema: {exc}") from exc
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise SpecError(path, "must be an Avro record schema")
    return json.dumps(schema)


def _one_source(
    src: Any, path: str, io: dict, input_roots: list[Path], ignored: list[str], *, nested: bool
) -> InputSpec:
    src = _obj(src, path)
    kind = src.get("type")
    if not isinstance(kind, str):
        kind = repr(kind)  # e.g. an object: named in the error, never looked up as a key
    if kind in OUT_OF_SCOPE_SOURCES:
        raise SpecError(
            f"{path}.type",
            f"{kind} input sources are outside Strata's scope: {OUT_OF_SCOPE_SOURCES[kind]}",
        )
    if kind not in INPUT_SOURCES or (nested and kind == "combining"):
        accepted = [k for k in INPUT_SOURCES if not (nested and k == "combining")]
        raise SpecError(
            f"{path}.type",
            f"unknown input source {kind!r}; accepted: {', '.join(accepted)}",
        )
    if kind == "combining":
        _allow(src, path, INPUT_SOURCE_FIELDS["combining"])
        delegates = src.get("delegates")
        if not isinstance(delegates, list) or not delegates:
            raise SpecError(f"{path}.delegates", "must be a non-empty list of input sources")
        parts = tuple(
            _one_source(d, f"{path}.delegates[{i}]", io, input_roots, ignored, nested=True)
            for i, d in enumerate(delegates)
        )
        druids = [i for i, d in enumerate(parts) if d.type == "druid"]
        if len(druids) > 1:
            raise SpecError(
                f"{path}.delegates[{druids[1]}]",
                "at most one druid delegate; read several dataSources with several tasks",
            )
        fmt = next((d.format for d in parts if d.format), None)
        return InputSpec(type="combining", format=fmt, delegates=parts)
    if kind == "druid":
        _allow(src, path, INPUT_SOURCE_FIELDS["druid"])
        if src.get("filter"):
            raise SpecError(f"{path}.filter", "is not supported; use transformSpec.filter")
        for key in ("dimensions", "metrics"):
            if src.get(key) is not None:
                raise SpecError(
                    f"{path}.{key}",
                    "is not supported; list the columns to keep in dimensionsSpec and metricsSpec",
                )
        if src.get("maxInputSegmentBytesPerTask") is not None:
            ignored.append(
                f"{path}.maxInputSegmentBytesPerTask: Spark splits the segments it reads by itself"
            )
        if io.get("inputFormat") is not None and not nested:
            ignored.append(
                "spec.ioConfig.inputFormat: a druid input source reads segments, whatever the format says"
            )
        return InputSpec(
            type="druid",
            datasource=_datasource_name(src.get("dataSource"), f"{path}.dataSource"),
            interval=_interval(src.get("interval"), f"{path}.interval"),
        )
    fmt = _input_format(io, ignored)
    if kind == "local":
        _allow(src, path, INPUT_SOURCE_FIELDS["local"])
        return InputSpec(type="local", files=_resolve_local_files(src, path, input_roots), **fmt)
    _allow(src, path, INPUT_SOURCE_FIELDS["inline"])
    data = src.get("data")
    if not isinstance(data, str):
        raise SpecError(f"{path}.data", "is required (a string of rows)")
    if not data.strip():
        raise SpecError(f"{path}.data", "is empty: the input has no rows")
    if fmt["format"] in FILE_FORMATS:
        raise SpecError(
            "spec.ioConfig.inputFormat.type",
            f"{fmt['format']} cannot be given inline; use json or csv",
        )
    return InputSpec(type="inline", data=data, **fmt)


def _input_spec(io: dict, input_roots: list[Path], ignored: list[str] | None = None) -> InputSpec:
    ignored = [] if ignored is None else ignored
    spec = _one_source(
        io.get("inputSource"), "spec.ioConfig.inputSource", io, input_roots, ignored, nested=False
    )
    if spec.type == "combining":
        formats = {d.format for d in spec.delegates if d.format}
        if len(formats) > 1:  # cannot happen: one inputFormat for all
            raise SpecError("spec.ioConfig.inputFormat", "one format for every delegate")
    return spec


def _dimensions(
    schema: dict, ignored: list[str]
) -> tuple[tuple[Dimension, ...], tuple[str, ...], bool, bool]:
    """(dimensions, exclusions, includeAllDimensions, useSchemaDiscovery)."""
    path = "spec.dataSchema.dimensionsSpec"
    ds = _obj(schema.get("dimensionsSpec"), path, required=False)
    _allow(
        ds,
        path,
        {
            "dimensions",
            "dimensionExclusions",
            "spatialDimensions",
            "includeAllDimensions",
            "useSchemaDiscovery",
            "forceSegmentSortByTime",
        },
    )
    if ds.get("spatialDimensions"):
        raise SpecError(
            f"{path}.spatialDimensions",
            "spatial indexes are outside Strata's scope; ingest the coordinates as double dimensions",
        )
    if not _bool(ds, "forceSegmentSortByTime", path, True):
        raise SpecError(
            f"{path}.forceSegmentSortByTime",
            "segments are always sorted by __time here; leave it true",
        )
    dims: list[Dimension] = []
    raw_dims = _none_as(ds.get("dimensions"), [])
    if not isinstance(raw_dims, list):
        raise SpecError(f"{path}.dimensions", "must be a list")
    for i, d in enumerate(raw_dims):
        dpath = f"{path}.dimensions[{i}]"
        if isinstance(d, str):
            dims.append(Dimension(d, "string"))
            continue
        d = _obj(d, dpath)
        _allow(d, dpath, {"type", "name", "createBitmapIndex", "multiValueHandling", "castToType"})
        dtype = d.get("type", "string")
        if dtype == "spatial":
            raise SpecError(
                f"{dpath}.type",
                "spatial dimensions are outside Strata's scope; ingest the coordinates as "
                "double dimensions",
            )
        if dtype not in DIMENSION_TYPES:
            raise SpecError(
                f"{dpath}.type",
                f"unknown dimension type {dtype!r}; accepted: {', '.join(DIMENSION_TYPES)}",
            )
        name = _str(d, "name", dpath)
        if d.get("createBitmapIndex") is not None:
            ignored.append(
                f"{dpath}.createBitmapIndex: segments are Parquet files, which have no bitmap indexes"
            )
        handling = d.get("multiValueHandling")
        if handling is not None:
            if dtype != "string":
                raise SpecError(f"{dpath}.multiValueHandling", "applies to string dimensions only")
            handling = str(handling).upper()
            if handling not in MULTI_VALUE_HANDLING:
                raise SpecError(
                    f"{dpath}.multiValueHandling",
                    f"unknown {d['multiValueHandling']!r}; accepted: {', '.join(MULTI_VALUE_HANDLING)}",
                )
        cast = d.get("castToType")
        if cast is not None and dtype != "auto":
            raise SpecError(f"{dpath}.castToType", "applies to auto dimensions only")
        if dtype in ("auto", "json"):
            # Nested columns: stored as JSON text (numbers, strings, arrays and
            # objects keep their JSON form), queryable with JSON functions.
            ignored.append(
                f"{dpath}.type: {dtype} (nested) columns are stored as JSON text, "
                "not as Druid's typed nested columns"
                + (f"; castToType {cast} is kept as JSON text too" if cast else "")
            )
            dims.append(Dimension(name, "json"))
            continue
        dims.append(
            Dimension(
                name,
                "double" if dtype == "float" else dtype,
                handling or "SORTED_ARRAY",
            )
        )
    names = [d.name for d in dims]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError(f"{path}.dimensions", f"dimension {dup!r} is listed twice")
    excl = _none_as(ds.get("dimensionExclusions"), [])
    if not isinstance(excl, list) or not all(isinstance(e, str) for e in excl):
        raise SpecError(f"{path}.dimensionExclusions", "must be a list of names")
    include_all = _bool(ds, "includeAllDimensions", path, False)
    discovery = _bool(ds, "useSchemaDiscovery", path, False)
    if include_all and not dims:
        ignored.append(
            f"{path}.includeAllDimensions: with no dimensions listed every input field is a dimension anyway"
        )
    return tuple(dims), tuple(excl), include_all and bool(dims), discovery


def _metrics(schema: dict, ignored: list[str]) -> tuple[Metric, ...]:
    path = "spec.dataSchema.metricsSpec"
    raw = _none_as(schema.get("metricsSpec"), [])
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of aggregators")
    out: list[Metric] = []
    for i, m in enumerate(raw):
        mpath = f"{path}[{i}]"
        m = _obj(m, mpath)
        mtype = m.get("type")
        if isinstance(mtype, str) and mtype in UNSUPPORTED_AGGREGATORS:
            raise SpecError(
                f"{mpath}.type",
                f"{mtype} is {UNSUPPORTED_AGGREGATORS[mtype]}. "
                f"Supported aggregators: {', '.join(METRIC_TYPES)}",
            )
        if mtype not in METRIC_TYPES:
            raise SpecError(
                f"{mpath}.type",
                f"unknown metric type {mtype!r}; accepted: {', '.join(METRIC_TYPES)}",
            )
        allowed = {"type", "name", "fieldName"}
        if mtype == "hyperUnique":
            allowed |= {"isInputHyperUnique", "round"}
        elif mtype == "thetaSketch":
            allowed |= {"size", "isInputThetaSketch", "shouldFinalize"}
        elif mtype in ("HLLSketchBuild", "HLLSketchMerge"):
            allowed |= {"lgK", "tgtHllType", "round", "shouldFinalize"}
        elif mtype == "quantilesDoublesSketch":
            allowed |= {"k", "maxStreamLength", "shouldFinalize"}
        elif mtype in FIRST_LAST_TYPES:
            allowed |= {"timeColumn"}
            if mtype.startswith("string"):
                allowed |= {"maxStringBytes"}
        elif mtype != "count":
            allowed |= {"expression"}
        _allow(m, mpath, allowed)
        if m.get("expression") is not None:
            raise SpecError(
                f"{mpath}.expression",
                "aggregator expressions are not supported; compute the value with a "
                "transformSpec.transforms expression and name it in fieldName",
            )
        name = _str(m, "name", mpath)
        field_name = None if mtype == "count" else _str(m, "fieldName", mpath)
        size = None
        if mtype == "hyperUnique":
            # The input is detected: a column of sketches (re-ingestion) is unioned.
            if m.get("isInputHyperUnique") is not None:
                ignored.append(
                    f"{mpath}.isInputHyperUnique: whether the input holds sketches is read from "
                    "its column type (binary sketches are unioned, other values are sketched)"
                )
            if m.get("round") is not None:
                ignored.append(f"{mpath}.round: a query-time option; the stored sketch is the same")
        elif mtype == "thetaSketch":
            size = _int(m, "size", mpath, THETA_DEFAULT_SIZE, minimum=16)
            if size & (size - 1):
                raise SpecError(f"{mpath}.size", f"must be a power of 2, got {size}")
            size = size.bit_length() - 1  # Spark's lgNomEntries
            if size > 26:
                raise SpecError(f"{mpath}.size", "must be at most 2^26 (67108864)")
            if m.get("isInputThetaSketch") is not None:
                ignored.append(
                    f"{mpath}.isInputThetaSketch: whether the input holds sketches is read from its column type"
                )
        elif mtype in ("HLLSketchBuild", "HLLSketchMerge"):
            size = _int(m, "lgK", mpath, HLL_DEFAULT_LG_K, minimum=4)
            if size > 21:
                raise SpecError(f"{mpath}.lgK", "must be between 4 and 21")
            if m.get("tgtHllType") not in (None, "HLL_4", "HLL_6", "HLL_8"):
                raise SpecError(f"{mpath}.tgtHllType", "must be HLL_4, HLL_6 or HLL_8")
            if m.get("tgtHllType") not in (None, "HLL_4"):
                ignored.append(
                    f"{mpath}.tgtHllType: sketches are stored as Spark's HLL_4 (same estimates, smallest)"
                )
            if m.get("round") is not None:
                ignored.append(f"{mpath}.round: a query-time option; the stored sketch is the same")
        elif mtype == "quantilesDoublesSketch":
            size = _int(m, "k", mpath, QUANTILES_DEFAULT_K, minimum=8)
            if size > 65535:
                raise SpecError(f"{mpath}.k", "must be between 8 and 65535")
            if m.get("maxStreamLength") is not None:
                ignored.append(
                    f"{mpath}.maxStreamLength: a KLL sketch needs no stream-length bound"
                )
        elif mtype in FIRST_LAST_TYPES:
            if m.get("timeColumn") not in (None, "__time"):
                raise SpecError(
                    f"{mpath}.timeColumn", "first/last follow the row timestamp (__time) only"
                )
            if m.get("maxStringBytes") is not None:
                size = _int(m, "maxStringBytes", mpath, None, minimum=1)
        if m.get("shouldFinalize") is not None:
            ignored.append(
                f"{mpath}.shouldFinalize: a query-time option; the stored sketch is the same"
            )
        canonical = mtype if mtype in SKETCH_TYPES else mtype.replace("float", "double")
        if mtype == "HLLSketchMerge":
            canonical = "HLLSketchBuild"  # a build over sketches unions them
        out.append(Metric(canonical, name, field_name, size))
    names = [m.name for m in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError(path, f"metric name {dup!r} is used twice")
    return tuple(out)


_LEGACY_TUNING = (
    "maxRowsPerSegment",
    "maxTotalRows",
    "targetPartitionSize",
    "numShards",
    "partitionDimensions",
)


def _legacy_partitions(tuning: dict, ignored: list[str]) -> dict:
    """Druid's pre-partitionsSpec tuningConfig fields, folded into a partitionsSpec.

    maxRowsPerSegment / maxTotalRows are the dynamic spec's; targetPartitionSize
    is maxRowsPerSegment (or hashed targetRowsPerSegment with perfect rollup);
    numShards / partitionDimensions make a hashed spec. With a partitionsSpec
    given too, its own fields win and a legacy field only fills a gap.
    """
    path = "spec.tuningConfig"
    legacy = {k: tuning[k] for k in _LEGACY_TUNING if tuning.get(k) is not None}
    ps = dict(_obj(tuning.get("partitionsSpec"), f"{path}.partitionsSpec", required=False))
    if not legacy:
        return ps
    for key in legacy:
        if key != "partitionDimensions":
            _int(tuning, key, path, None, minimum=1)
    if "maxRowsPerSegment" in legacy and "targetPartitionSize" in legacy:
        raise SpecError(
            f"{path}.targetPartitionSize",
            "give maxRowsPerSegment (its newer name) or targetPartitionSize, not both",
        )
    guaranteed = _bool(tuning, "forceGuaranteedRollup", path, False)
    if not ps:
        # As Druid's IndexTuningConfig: the legacy fields make a hashed spec with
        # perfect rollup, a dynamic one (numShards and partitionDimensions unused) without.
        ps = {"type": "hashed" if guaranteed else "dynamic"}
    kind = ps.get("type", "dynamic")
    rows = legacy.get("maxRowsPerSegment", legacy.get("targetPartitionSize"))
    rows_key = "maxRowsPerSegment" if "maxRowsPerSegment" in legacy else "targetPartitionSize"
    used = set()
    if kind == "dynamic":
        if rows is not None and ps.get("maxRowsPerSegment") is None:
            ps["maxRowsPerSegment"] = rows
            used.add(rows_key)
        if "maxTotalRows" in legacy and ps.get("maxTotalRows") is None:
            ps["maxTotalRows"] = legacy["maxTotalRows"]
            used.add("maxTotalRows")
    elif kind == "hashed":
        if (
            "numShards" in legacy
            and ps.get("numShards") is None
            and ps.get("targetRowsPerSegment") is None
        ):
            ps["numShards"] = legacy["numShards"]
            used.add("numShards")
        if "partitionDimensions" in legacy and not ps.get("partitionDimensions"):
            ps["partitionDimensions"] = legacy["partitionDimensions"]
            used.add("partitionDimensions")
        if rows is not None and not any(
            ps.get(k) is not None
            for k in ("numShards", "targetRowsPerSegment", "maxRowsPerSegment")
        ):
            ps["targetRowsPerSegment"] = rows
            used.add(rows_key)
    elif rows is not None and not any(
        ps.get(k) is not None for k in ("targetRowsPerSegment", "maxRowsPerSegment")
    ):
        ps["maxRowsPerSegment"] = rows
        used.add(rows_key)
    for key in legacy:
        if key not in used:
            ignored.append(
                f"{path}.{key}: superseded by partitionsSpec ({kind}), which decides segment sizes"
                if tuning.get("partitionsSpec") or kind != "dynamic"
                else f"{path}.{key}: only used for hashed partitioning, with forceGuaranteedRollup"
            )
    return ps


def _partitions(tuning: dict, ignored: list[str] | None = None) -> PartitionsSpec:
    path = "spec.tuningConfig.partitionsSpec"
    ignored = [] if ignored is None else ignored
    ps = _legacy_partitions(tuning, ignored)
    if not ps and _bool(tuning, "forceGuaranteedRollup", "spec.tuningConfig", False):
        ps = {"type": "hashed"}  # Druid's default partitionsSpec for perfect rollup
    kind = ps.get("type", "dynamic")
    if kind not in PARTITION_TYPES:
        raise SpecError(
            f"{path}.type",
            f"unknown partitionsSpec type {kind!r}; accepted: {', '.join(PARTITION_TYPES)}",
        )
    if kind == "dynamic":
        _allow(ps, path, DYNAMIC_PARTITIONS_FIELDS)
        # maxTotalRows is honoured: no segment holds more rows than it (Druid pushes
        # every segment it holds once maxTotalRows rows are buffered).
        return PartitionsSpec(
            type="dynamic",
            max_rows_per_segment=_int(
                ps, "maxRowsPerSegment", path, DEFAULT_MAX_ROWS_PER_SEGMENT, minimum=1
            ),
            max_total_rows=_int(ps, "maxTotalRows", path, DEFAULT_MAX_TOTAL_ROWS, minimum=1),
        )

    def dims(key: str) -> tuple[str, ...]:
        value = _none_as(ps.get(key), [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SpecError(f"{path}.{key}", "must be a list of dimension names")
        for i, name in enumerate(value):
            if name in value[:i]:
                raise SpecError(f"{path}.{key}[{i}]", f"{name!r} is listed twice")
            if name == "__time" and kind != "range":
                raise SpecError(
                    f"{path}.{key}[{i}]", "__time cannot be a hashed partition dimension"
                )
        return tuple(value)

    if kind == "hashed":
        _allow(
            ps,
            path,
            {
                "type",
                "numShards",
                "targetRowsPerSegment",
                "maxRowsPerSegment",
                "partitionDimensions",
                "partitionFunction",
            },
        )
        function = ps.get("partitionFunction", HASH_PARTITION_FUNCTION)
        if function != HASH_PARTITION_FUNCTION:
            raise SpecError(
                f"{path}.partitionFunction",
                f"unknown partition function {function!r}; accepted: {HASH_PARTITION_FUNCTION}",
            )
        num_shards = _int(ps, "numShards", path, None, minimum=1)
        target = _int(ps, "targetRowsPerSegment", path, None, minimum=1)
        max_rows = _int(ps, "maxRowsPerSegment", path, None, minimum=1)
        if target and max_rows:
            raise SpecError(
                f"{path}.maxRowsPerSegment",
                "give targetRowsPerSegment (maxRowsPerSegment is its old name), not both",
            )
        target = target or max_rows
        if num_shards and target:
            raise SpecError(f"{path}.numShards", "give numShards or targetRowsPerSegment, not both")
        return PartitionsSpec(
            type="hashed",
            num_shards=num_shards,
            target_rows_per_segment=None
            if num_shards
            else (target or DEFAULT_MAX_ROWS_PER_SEGMENT),
            partition_dimensions=dims("partitionDimensions"),
        )
    # range / single_dim
    if kind == "single_dim":
        _allow(
            ps,
            path,
            {
                "type",
                "targetRowsPerSegment",
                "maxRowsPerSegment",
                "partitionDimension",
                "assumeGrouped",
            },
        )
        single = ps.get("partitionDimension")
        if not isinstance(single, str) or not single:
            raise SpecError(f"{path}.partitionDimension", "is required for single_dim")
        if single == "__time":
            raise SpecError(f"{path}.partitionDimension", "__time cannot be a partition dimension")
        partition_dims = (single,)
    else:
        _allow(
            ps,
            path,
            {
                "type",
                "targetRowsPerSegment",
                "maxRowsPerSegment",
                "partitionDimensions",
                "assumeGrouped",
                "maxTotalRows",
            },
        )
        if ps.get("maxTotalRows") is not None:
            ignored.append(
                f"{path}.maxTotalRows: a dynamic partitioning field; range partitions are sized "
                "by targetRowsPerSegment / maxRowsPerSegment (Druid ignores it here too)"
            )
        partition_dims = dims("partitionDimensions")
        if not partition_dims:
            raise SpecError(f"{path}.partitionDimensions", "is required for range partitioning")
    if ps.get("assumeGrouped"):
        raise SpecError(f"{path}.assumeGrouped", "is only for Hadoop ingestion; leave it false")
    target = _int(ps, "targetRowsPerSegment", path, None, minimum=1)
    max_rows = _int(ps, "maxRowsPerSegment", path, None, minimum=1)
    if target and max_rows:
        raise SpecError(
            f"{path}.targetRowsPerSegment",
            "give targetRowsPerSegment or maxRowsPerSegment, not both",
        )
    return PartitionsSpec(
        type="range",
        # With only maxRowsPerSegment, partitions are sized to stay under it.
        target_rows_per_segment=target if target or max_rows else DEFAULT_MAX_ROWS_PER_SEGMENT,
        max_rows_per_segment=max_rows or DEFAULT_MAX_ROWS_PER_SEGMENT,
        partition_dimensions=partition_dims,
    )


def _check_rollup_mode(tuning: dict, partitions: PartitionsSpec, force_rollup: bool) -> None:
    """Druid's rule (native-batch.md, partitionsSpec): hashed, range and single_dim
    are for perfect rollup and need forceGuaranteedRollup; dynamic is for best-effort
    rollup and cannot have it."""
    path = "spec.tuningConfig"
    if partitions.type != "dynamic" and not force_rollup:
        given = (tuning.get("partitionsSpec") or {}).get("type", partitions.type)
        raise SpecError(
            f"{path}.forceGuaranteedRollup",
            f"must be true with {given} partitioning, as in Druid: hashed, range and "
            "single_dim are for perfect rollup; use dynamic partitioning for best-effort rollup",
        )
    if force_rollup and partitions.type == "dynamic":
        raise SpecError(
            f"{path}.partitionsSpec.type",
            "dynamic partitioning cannot be used for perfect rollup (forceGuaranteedRollup): "
            "use hashed, range or single_dim, or leave forceGuaranteedRollup false",
        )


# tuningConfig fields with no meaning in Strata: accepted, and reported as ignored.
_IGNORED_TUNING = {
    "maxRowsInMemory": "Spark manages memory: rows are not buffered on a heap before persisting",
    "maxBytesInMemory": "Spark manages memory: rows are not buffered on a heap before persisting",
    "skipBytesInMemoryOverheadCheck": "Spark manages memory",
    "maxColumnsToMerge": "segments are written once by Spark, with no intermediate persists to merge",
    "maxPendingPersists": "segments are written once by Spark, with no intermediate persists",
    "indexSpec": "segments are Parquet files (snappy); Druid's column encodings do not apply",
    "indexSpecForIntermediatePersists": "there are no intermediate persists",
    "splitHintSpec": "Spark splits the input by itself",
    "awaitSegmentAvailabilityTimeoutMillis": "a segment is queryable as soon as it is published",
    "reportParseExceptions": "parse errors are counted and sampled in the report (see maxParseExceptions)",
    "pushTimeout": "segments are moved to deep storage by the worker itself, without a push timeout",
    "segmentWriteOutMediumFactory": "segments are written by Spark",
    "chatHandlerTimeout": "sub-tasks are Spark jobs, not HTTP peers",
    "chatHandlerNumRetries": "sub-tasks are Spark jobs, not HTTP peers",
    "taskStatusCheckPeriodMs": "sub-tasks are Spark jobs, not polled tasks",
    "maxNumSegmentsToMerge": "phase 2 merges with totalNumMergeTasks Spark jobs",
    "forceExtendableShardSpecs": "every segment gets a numbered (extendable) shard spec anyway",
    "numPersistThreads": "there are no intermediate persists",
    "maxAllowedLockCount": "locks are taken per time chunk of the intervals",
    "appendableIndexSpec": "there is no in-memory incremental index: Spark manages memory",
}


def _ingestion(
    raw: dict, input_roots: list[Path], ignored: list[str] | None = None
) -> IngestionSpec:
    ignored = [] if ignored is None else ignored
    spec = _obj(raw.get("spec"), "spec")
    _allow(spec, "spec", INGESTION_SPEC_FIELDS)
    schema = _obj(spec.get("dataSchema"), "spec.dataSchema")
    if schema.get("parser") is not None:
        raise SpecError(
            "spec.dataSchema.parser",
            "the legacy parser (parseSpec) is not supported, as in current Druid: use "
            "ioConfig.inputFormat, and timestampSpec / dimensionsSpec in dataSchema",
        )
    _allow(schema, "spec.dataSchema", DATA_SCHEMA_FIELDS)
    top = raw.get("dataSource")
    if schema.get("dataSource") is None and top is not None:
        # An index task may name its dataSource at the top level (as Druid accepts).
        datasource = _datasource_name(top, "dataSource")
    else:
        datasource = _datasource_name(schema.get("dataSource"), "spec.dataSchema.dataSource")
        if top is not None and top != datasource:
            raise SpecError(
                "dataSource", f"{top!r} differs from spec.dataSchema.dataSource {datasource!r}"
            )

    ts_path = "spec.dataSchema.timestampSpec"
    ts = _obj(schema.get("timestampSpec"), ts_path, required=False)
    _allow(ts, ts_path, TIMESTAMP_SPEC_FIELDS)
    ts_column = _str(ts, "column", ts_path, required=False, default="timestamp")
    ts_format = _str(ts, "format", ts_path, required=False, default="auto")
    if ts_format.lower() in ("micro", "ruby"):
        # Druid's names, not patterns: read as a pattern, no row would parse.
        raise SpecError(
            f"{ts_path}.format",
            f"the {ts_format} timestamp format is not implemented here; accepted: "
            f"{', '.join(TIMESTAMP_FORMATS)} or a pattern such as yyyy-MM-dd HH:mm:ss",
        )
    if ts_format.lower() in TIMESTAMP_FORMATS:
        ts_format = ts_format.lower()
    elif not any(ch.isalpha() for ch in ts_format):
        raise SpecError(
            f"{ts_path}.format",
            f"unknown timestamp format {ts_format!r}; accepted: "
            f"{', '.join(TIMESTAMP_FORMATS)} or a pattern such as yyyy-MM-dd HH:mm:ss or %Y-%m-%d",
        )
    missing = ts.get("missingValue")
    if missing is not None:
        if not isinstance(missing, str):
            raise SpecError(f"{ts_path}.missingValue", "must be an ISO timestamp string")
        try:
            Interval.parse(f"{missing}/{missing}")
        except ValueError:
            raise SpecError(
                f"{ts_path}.missingValue", f"{missing!r} is not an ISO timestamp"
            ) from None

    dims, exclusions, include_all, discovery = _dimensions(schema, ignored)
    metrics = _metrics(schema, ignored)
    metric_names = {m.name for m in metrics}
    for d in dims:
        if d.name in metric_names:
            raise SpecError(
                "spec.dataSchema.metricsSpec", f"{d.name!r} is both a dimension and a metric"
            )
        if d.name == "__time":
            raise SpecError("spec.dataSchema.dimensionsSpec.dimensions", "__time is reserved")

    gpath = "spec.dataSchema.granularitySpec"
    gran = _obj(schema.get("granularitySpec"), gpath, required=False)
    _allow(gran, gpath, GRANULARITY_SPEC_FIELDS)
    if gran.get("type") not in (None, *GRANULARITY_SPEC_TYPES):
        raise SpecError(f"{gpath}.type", "must be uniform (or arbitrary)")
    segment_granularity = _granularity(
        gran.get("segmentGranularity"), f"{gpath}.segmentGranularity", default="DAY"
    )
    if segment_granularity == "NONE":
        raise SpecError(f"{gpath}.segmentGranularity", "NONE is only a query granularity")
    query_granularity = _granularity(
        gran.get("queryGranularity"), f"{gpath}.queryGranularity", default="NONE"
    )
    if not granularity_divides(query_granularity, segment_granularity):
        raise SpecError(
            f"{gpath}.queryGranularity",
            f"{query_granularity} does not divide segmentGranularity {segment_granularity}: "
            "truncated timestamps would fall outside their segments; use a finer one",
        )
    rollup = _bool(gran, "rollup", gpath, True)
    intervals = None
    if gran.get("intervals") is not None:
        raw_intervals = gran["intervals"]
        if not isinstance(raw_intervals, list) or not raw_intervals:
            raise SpecError(f"{gpath}.intervals", "must be a non-empty list of intervals")
        intervals = tuple(
            _interval(v, f"{gpath}.intervals[{i}]") for i, v in enumerate(raw_intervals)
        )

    tpath = "spec.dataSchema.transformSpec"
    transform = _obj(schema.get("transformSpec"), tpath, required=False)
    _allow(transform, tpath, TRANSFORM_SPEC_FIELDS)
    transforms = _transforms(transform.get("transforms"), f"{tpath}.transforms")
    flt = (
        None
        if transform.get("filter") is None
        else validate_filter(transform["filter"], f"{tpath}.filter")
    )

    io_path = "spec.ioConfig"
    io = _obj(spec.get("ioConfig"), io_path)
    if io.get("firehose") is not None:
        raise SpecError(
            f"{io_path}.firehose",
            "firehoses are not supported, as in current Druid: use ioConfig.inputSource",
        )
    _allow(io, io_path, IO_CONFIG_FIELDS)
    input_spec = _input_spec(io, input_roots, ignored)
    append = _bool(io, "appendToExisting", io_path, False)
    drop_existing = _bool(io, "dropExisting", io_path, False)
    if append and drop_existing:
        raise SpecError(f"{io_path}.dropExisting", "cannot be true with appendToExisting")
    if drop_existing and intervals is None:
        raise SpecError(f"{gpath}.intervals", "are required with dropExisting")
    if input_spec.type == "combining" and not dims:
        raise SpecError(
            "spec.dataSchema.dimensionsSpec.dimensions",
            "a combining input source needs its dimensions listed (delegates differ in their fields)",
        )
    for inp in input_spec.file_sources:
        if inp.flatten and not dims and not inp.use_field_discovery:
            raise SpecError(
                "spec.dataSchema.dimensionsSpec.dimensions",
                "list the dimensions, or turn flattenSpec.useFieldDiscovery on",
            )

    tun_path = "spec.tuningConfig"
    tuning = _obj(spec.get("tuningConfig"), tun_path, required=False)
    _allow(tuning, tun_path, {*INDEX_TUNING_FIELDS, *_LEGACY_TUNING, *_IGNORED_TUNING})
    for key, reason in _IGNORED_TUNING.items():
        if tuning.get(key) is not None:
            ignored.append(f"{tun_path}.{key}: {reason}")
    if tuning.get("logParseExceptions") is not None:
        _bool(tuning, "logParseExceptions", tun_path, False)
        ignored.append(
            f"{tun_path}.logParseExceptions: parse errors are sampled in the task report "
            "(maxSavedParseExceptions), not logged row by row"
        )
    partitions = _partitions(tuning, ignored)
    force_rollup = _bool(tuning, "forceGuaranteedRollup", tun_path, False)
    _check_rollup_mode(tuning, partitions, force_rollup)
    if append and partitions.type != "dynamic":
        raise SpecError(
            f"{io_path}.appendToExisting",
            f"appending requires dynamic partitioning, not {partitions.type}",
        )
    if partitions.type != "dynamic":
        known = {d.name for d in dims}
        field_name = (
            "partitionDimension"
            if "partitionDimension" in (tuning.get("partitionsSpec") or {})
            else "partitionDimensions"
        )
        kept = []
        count_names = {m.name for m in metrics if m.type == "count"}
        for i, name in enumerate(partitions.partition_dimensions):
            where = f"{tun_path}.partitionsSpec.{field_name}"
            where += "" if field_name == "partitionDimension" else f"[{i}]"
            if name == "__time":
                kept.append(name)
            elif name in count_names:
                # Druid reads a partition dimension from the input row: a count
                # metric's name is no input field, null for every row: it splits nothing.
                ignored.append(
                    f"{where}: {name!r} is a count metric, not an input field; it splits nothing "
                    "(Druid reads it as null for every row)"
                )
            elif name in metric_names:
                raise SpecError(
                    where,
                    f"{name!r} is a metric, not a dimension; partition on dimensions "
                    f"({', '.join(sorted(known)) or 'those of the input'})",
                )
            elif name in exclusions:
                raise SpecError(where, f"{name!r} is excluded (dimensionExclusions)")
            elif dims and name not in known:
                raise SpecError(where, f"{name!r} is not a dimension of this spec")
            else:
                kept.append(name)
        if tuple(kept) != partitions.partition_dimensions:
            # Range on nothing but count metrics: every row's key is null, so each
            # time chunk is one range, as in Druid (the worker reads an empty key so).
            partitions = PartitionsSpec(
                type=partitions.type,
                max_rows_per_segment=partitions.max_rows_per_segment,
                max_total_rows=partitions.max_total_rows,
                num_shards=partitions.num_shards,
                target_rows_per_segment=partitions.target_rows_per_segment,
                partition_dimensions=tuple(kept),
            )
    druid_source = input_spec.druid_source
    if druid_source is not None and ts.get("column") not in (None, "__time"):
        if input_spec.type == "druid":
            ignored.append(
                f"{ts_path}: a druid input source always reads each row's __time "
                f"(column {ts.get('column')!r} is not used)"
            )
            ts_column = "__time"
    elif input_spec.type == "druid":
        ts_column = "__time"

    return IngestionSpec(
        datasource=datasource,
        timestamp_column=ts_column,
        timestamp_format=ts_format,
        timestamp_missing_value=missing,
        dimensions=dims,
        dimension_exclusions=exclusions,
        metrics=metrics,
        segment_granularity=segment_granularity,
        query_granularity=query_granularity,
        rollup=rollup,
        intervals=intervals,
        filter=flt,
        input=input_spec,
        append_to_existing=append,
        drop_existing=drop_existing,
        partitions=partitions,
        force_guaranteed_rollup=force_rollup,
        max_parse_exceptions=_int(tuning, "maxParseExceptions", tun_path, UNLIMITED),
        max_saved_parse_exceptions=_int(tuning, "maxSavedParseExceptions", tun_path, 10),
        max_retry=_int(tuning, "maxRetry", tun_path, 3),
        max_num_concurrent_subtasks=_int(
            tuning, "maxNumConcurrentSubTasks", tun_path, 1, minimum=1
        ),
        total_num_merge_tasks=_int(tuning, "totalNumMergeTasks", tun_path, 10, minimum=1),
        transforms=transforms,
        include_all_dimensions=include_all,
        schema_discovery=discovery,
        ignored=tuple(dict.fromkeys(ignored)),
    )


def _transforms(raw: Any, path: str) -> tuple[Transform, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of transforms")
    out: list[Transform] = []
    for i, t in enumerate(raw):
        tpath = f"{path}[{i}]"
        t = _obj(t, tpath)
        _allow(t, tpath, {"type", "name", "expression"})
        if t.get("type", "expression") != "expression":
            raise SpecError(
                f"{tpath}.type", f"unknown transform type {t.get('type')!r}; accepted: expression"
            )
        name = _str(t, "name", tpath)
        if name == "__time":
            raise SpecError(
                f"{tpath}.name", "transforming __time is not supported; use timestampSpec"
            )
        expression = t.get("expression")
        try:
            translated = translate_expression(expression)
        except ExpressionError as exc:
            raise SpecError(f"{tpath}.expression", str(exc)) from None
        out.append(Transform(name, expression, translated.columns))
    names = [t.name for t in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError(path, f"transform {dup!r} is defined twice")
    return tuple(out)


def drop_existing_chunks(raw: Any) -> list[Interval]:
    """The time chunks an index spec that replaces with `dropExisting` must
    publish rows or a tombstone into (SPEC §6): every segment-granularity bucket
    of `granularitySpec.intervals`, in time order; [] for any other spec.

    Reads only those fields, with `validate_task_spec`'s own parsing, never the
    input (so a publish can ask it cheaply). The spec was validated when it was
    submitted; one that no longer parses asks for nothing here."""
    if not isinstance(raw, dict) or raw.get("type") not in ("index_parallel", "index"):
        return []
    try:
        spec = _obj(raw.get("spec"), "spec")
        io = _obj(spec.get("ioConfig"), "spec.ioConfig", required=False)
        if not _bool(io, "dropExisting", "", False) or _bool(io, "appendToExisting", "", False):
            return []
        schema = _obj(spec.get("dataSchema"), "spec.dataSchema", required=False)
        gran = _obj(schema.get("granularitySpec"), "granularitySpec", required=False)
        segment = _granularity(gran.get("segmentGranularity"), "", default="DAY")
        intervals = [_interval(v, "") for v in gran.get("intervals") or ()]
    except SpecError:
        return []
    buckets = Granularity.from_name(segment).iter_buckets
    return sorted({chunk for iv in intervals for chunk in buckets(iv)}, key=lambda c: c.start)


def validate_task_spec(raw: Any, *, input_roots: list[Path]) -> TaskSpec:
    """Check a Druid-shaped task spec; return it validated, or raise `SpecError`."""
    if not isinstance(raw, dict):
        raise SpecError("(body)", "a task spec must be a JSON object")
    kind = raw.get("type")
    if kind not in TASK_TYPES:
        raise SpecError("type", f"unknown task type {kind!r}; accepted: {', '.join(TASK_TYPES)}")
    context = _context(raw.get("context"))
    if kind in ("index_parallel", "index"):
        _allow(raw, "", INDEX_TOP_LEVEL)
        ignored: list[str] = []
        ingestion = _ingestion(raw, input_roots, ignored)
        return TaskSpec(
            type="index_parallel",
            datasource=ingestion.datasource,
            context=context,
            ingestion=ingestion,
            raw=raw,
            ignored=ingestion.ignored,
        )
    if kind == "kill":
        return _kill_task(raw, context)
    compaction = _compaction(raw)
    return TaskSpec(
        type="compact",
        datasource=compaction.datasource,
        context=context,
        interval=compaction.interval,
        segment_ids=compaction.segment_ids,
        compaction=compaction,
        raw=raw,
        ignored=compaction.ignored,
    )


# --- kill -------------------------------------------------------------------------


def _kill_task(raw: dict, context: Context) -> TaskSpec:
    """Druid's kill task (data-management/delete.md): interval, versions, batchSize,
    limit, maxUsedStatusLastUpdatedTime, and the deprecated markAsUnused."""
    _allow(raw, "", KILL_TOP_LEVEL)
    versions = raw.get("versions")
    if versions is not None:
        if not isinstance(versions, list) or not versions:
            raise SpecError(
                "versions", "must be a non-empty list of segment versions (or absent: all)"
            )
        for i, version in enumerate(versions):
            if not isinstance(version, str) or not version:
                raise SpecError(f"versions[{i}]", "must be a segment version string")
        versions = tuple(dict.fromkeys(versions))
    mark_as_unused = _bool(raw, "markAsUnused", "", False)
    if mark_as_unused and versions is not None:
        raise SpecError("markAsUnused", "cannot be used with versions (as in Druid)")
    cutoff = raw.get("maxUsedStatusLastUpdatedTime")
    if cutoff is not None:
        try:
            cutoff = Interval.parse(f"{cutoff}/{cutoff}").start if isinstance(cutoff, str) else None
        except ValueError:
            cutoff = None
        if cutoff is None:
            raise SpecError(
                "maxUsedStatusLastUpdatedTime",
                f"{raw['maxUsedStatusLastUpdatedTime']!r} is not an ISO-8601 timestamp",
            )
    ignored = []
    if raw.get("batchSize") is not None:
        ignored.append(
            "batchSize: a kill task deletes the segments it selects in one commit "
            "(the lock box is not held by the deletion)"
        )
    return TaskSpec(
        type="kill",
        datasource=_datasource_name(raw.get("dataSource"), "dataSource"),
        context=context,
        interval=_interval(raw.get("interval"), "interval"),
        raw=raw,
        mark_as_unused=mark_as_unused,
        kill=KillSpec(
            versions=versions,
            limit=_int(raw, "limit", "", None, minimum=1),
            max_used_status_last_updated=cutoff,
            batch_size=_int(raw, "batchSize", "", DEFAULT_KILL_BATCH_SIZE, minimum=1),
        ),
        ignored=tuple(ignored),
    )


# --- compact ----------------------------------------------------------------------

COMPACT_TOP_LEVEL = {
    "type",
    "id",
    "groupId",
    "resource",
    "dataSource",
    "ioConfig",
    "interval",  # Druid's legacy form of ioConfig.inputSpec {type: interval}
    "segments",  # Druid's legacy form of ioConfig.inputSpec {type: segments}
    "segmentGranularity",  # Druid's legacy form of granularitySpec.segmentGranularity
    "granularitySpec",
    "dimensionsSpec",
    "metricsSpec",
    "transformSpec",
    "tuningConfig",
    "context",
}
COMPACT_TUNING = {
    "type",
    "partitionsSpec",
    "forceGuaranteedRollup",
    "maxRowsPerSegment",
    "maxTotalRows",
    "maxRowsInMemory",
    "maxBytesInMemory",
    "forceExtendableShardSpecs",
    "maxNumConcurrentSubTasks",
    "totalNumMergeTasks",
    "maxRetry",
    "maxParseExceptions",
    "maxSavedParseExceptions",
    "logParseExceptions",
    "maxPendingPersists",
    "splitHintSpec",
}


@dataclass(frozen=True)
class CompactionSpec:
    """A validated `compact` task. None means "as the input segments are"."""

    datasource: str
    interval: Interval | None  # inputSpec {type: interval}
    segment_ids: tuple[str, ...]  # inputSpec {type: segments}
    segment_granularity: str | None
    query_granularity: str | None
    rollup: bool | None
    dimensions: tuple[Dimension, ...] | None
    dimension_exclusions: tuple[str, ...]
    metrics: tuple[Metric, ...] | None
    filter: dict | None
    partitions: PartitionsSpec
    drop_existing: bool = True
    store_compaction_state: bool = True
    max_retry: int = 3
    max_num_concurrent_subtasks: int = 1
    total_num_merge_tasks: int = 10
    ignored: tuple[str, ...] = ()  # "field: why it has no effect here"


def _moved(path_from: str, path_to: str, check):
    """Run a shared validator written for ingestion specs, naming fields where they
    are in a compact spec."""
    try:
        return check()
    except SpecError as exc:
        field_name = exc.field
        if field_name.startswith(path_from):
            field_name = path_to + field_name[len(path_from) :]
        raise SpecError(field_name, exc.message) from None


def _compact_input(raw: dict) -> tuple[Interval | None, tuple[str, ...]]:
    legacy = [k for k in ("interval", "segments") if raw.get(k) is not None]
    io = _obj(raw.get("ioConfig"), "ioConfig", required=False)
    if io:
        _allow(io, "ioConfig", {"type", "inputSpec", "allowNonAlignedInterval", "dropExisting"})
        if io.get("type", "compact") != "compact":
            raise SpecError("ioConfig.type", f"must be compact, got {io.get('type')!r}")
        _bool(io, "allowNonAlignedInterval", "ioConfig", False)
        if legacy:
            raise SpecError(legacy[0], "give the input in ioConfig.inputSpec or here, not both")
        spec = _obj(io.get("inputSpec"), "ioConfig.inputSpec")
        kind = spec.get("type")
        if kind == "interval":
            _allow(spec, "ioConfig.inputSpec", {"type", "interval"})
            return _interval(spec.get("interval"), "ioConfig.inputSpec.interval"), ()
        if kind == "segments":
            _allow(spec, "ioConfig.inputSpec", {"type", "segments"})
            return None, _segment_ids(spec.get("segments"), "ioConfig.inputSpec.segments")
        raise SpecError(
            "ioConfig.inputSpec.type", f"unknown input spec {kind!r}; accepted: interval, segments"
        )
    if len(legacy) == 2:
        raise SpecError("segments", "give interval or segments, not both")
    if legacy == ["interval"]:
        return _interval(raw["interval"], "interval"), ()
    if legacy == ["segments"]:
        return None, _segment_ids(raw["segments"], "segments")
    raise SpecError(
        "ioConfig.inputSpec",
        "is required: {type: interval, interval: ...} or {type: segments, segments: [ids]}",
    )


def _segment_ids(value: Any, path: str) -> tuple[str, ...]:
    if isinstance(value, list):  # Druid's legacy form lists segment objects
        value = [v.get("id") if isinstance(v, dict) else v for v in value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise SpecError(path, "must be a non-empty list of segment ids")
    if len(set(value)) != len(value):
        raise SpecError(path, "lists a segment twice")
    return tuple(value)


def _compaction(raw: dict) -> CompactionSpec:
    _allow(raw, "", COMPACT_TOP_LEVEL)
    datasource = _datasource_name(raw.get("dataSource"), "dataSource")
    interval, segment_ids = _compact_input(raw)
    ignored: list[str] = []
    io = raw.get("ioConfig") or {}
    drop_existing = _bool(io, "dropExisting", "ioConfig", True)

    gpath = "granularitySpec"
    gran = _obj(raw.get(gpath), gpath, required=False)
    _allow(gran, gpath, {"type", "segmentGranularity", "queryGranularity", "rollup"})
    if raw.get("segmentGranularity") is not None and gran.get("segmentGranularity") is not None:
        raise SpecError(
            "segmentGranularity", "give it here or in granularitySpec.segmentGranularity, not both"
        )
    segment_granularity = None
    if gran.get("segmentGranularity") is not None:
        segment_granularity = _granularity(
            gran["segmentGranularity"], f"{gpath}.segmentGranularity", default="DAY"
        )
        where = f"{gpath}.segmentGranularity"
    elif raw.get("segmentGranularity") is not None:
        segment_granularity = _granularity(
            raw["segmentGranularity"], "segmentGranularity", default="DAY"
        )
        where = "segmentGranularity"
    if segment_granularity == "NONE":
        raise SpecError(where, "NONE is only a query granularity")
    query_granularity = None
    if gran.get("queryGranularity") is not None:
        query_granularity = _granularity(
            gran["queryGranularity"], f"{gpath}.queryGranularity", default="NONE"
        )
        if segment_granularity and not granularity_divides(query_granularity, segment_granularity):
            raise SpecError(
                f"{gpath}.queryGranularity",
                f"{query_granularity} does not divide segmentGranularity {segment_granularity}",
            )
    rollup = _bool(gran, "rollup", gpath, True) if gran.get("rollup") is not None else None

    dimensions = None
    exclusions: tuple[str, ...] = ()
    if raw.get("dimensionsSpec") is not None:
        _obj(raw["dimensionsSpec"], "dimensionsSpec")
        dims, exclusions, _, _ = _moved(
            "spec.dataSchema.dimensionsSpec",
            "dimensionsSpec",
            lambda: _dimensions({"dimensionsSpec": raw["dimensionsSpec"]}, ignored),
        )
        dimensions = dims or None  # empty: the inputs' dimensions
    metrics = None
    if raw.get("metricsSpec") is not None:
        metrics = _moved(
            "spec.dataSchema.metricsSpec",
            "metricsSpec",
            lambda: _metrics({"metricsSpec": raw["metricsSpec"]}, ignored),
        )
    if dimensions is not None and metrics is not None:
        both = {d.name for d in dimensions} & {m.name for m in metrics}
        if both:
            raise SpecError("metricsSpec", f"{sorted(both)[0]!r} is both a dimension and a metric")

    tpath = "transformSpec"
    transform = _obj(raw.get(tpath), tpath, required=False)
    _allow(transform, tpath, {"filter", "transforms"})
    if transform.get("transforms"):
        raise SpecError(
            f"{tpath}.transforms",
            "a compact task's transformSpec takes only a filter, as in Druid; "
            "transform with an index_parallel task reading a druid input source",
        )
    flt = (
        None
        if transform.get("filter") is None
        else validate_filter(transform["filter"], f"{tpath}.filter")
    )

    tun_path = "tuningConfig"
    tuning = _obj(raw.get(tun_path), tun_path, required=False)
    # Druid's compaction takes index_parallel's tuningConfig: its knobs without
    # meaning here are accepted and reported, as for ingestion.
    _allow(tuning, tun_path, COMPACT_TUNING | set(_IGNORED_TUNING))
    for key, reason in _IGNORED_TUNING.items():
        if tuning.get(key) is not None:
            ignored.append(f"{tun_path}.{key}: {reason}")
    legacy_max_rows = _int(tuning, "maxRowsPerSegment", tun_path, None, minimum=1)
    if tuning.get("partitionsSpec") is None and legacy_max_rows is not None:
        # Druid's legacy tuningConfig.maxRowsPerSegment: dynamic partitioning.
        tuning = {
            **tuning,
            "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": legacy_max_rows},
        }
    partitions = _moved(
        "spec.tuningConfig",
        tun_path,
        lambda: _partitions({"partitionsSpec": tuning.get("partitionsSpec")}, ignored),
    )
    force_rollup = _bool(tuning, "forceGuaranteedRollup", tun_path, partitions.type != "dynamic")
    if force_rollup and partitions.type == "dynamic":
        raise SpecError(
            f"{tun_path}.forceGuaranteedRollup",
            "requires hashed, range or single_dim partitioning (tuningConfig.partitionsSpec)",
        )
    if not force_rollup and partitions.type != "dynamic":
        raise SpecError(
            f"{tun_path}.forceGuaranteedRollup",
            f"must be true with {partitions.type} partitioning (as in Druid)",
        )
    if dimensions is not None:
        known = {d.name for d in dimensions}
        for i, name in enumerate(partitions.partition_dimensions):
            if name not in known:
                raise SpecError(
                    f"{tun_path}.partitionsSpec.partitionDimensions[{i}]",
                    f"{name!r} is not among dimensionsSpec.dimensions",
                )
    context = raw.get("context") if isinstance(raw.get("context"), dict) else {}
    store = context.get("storeCompactionState", True)
    if not isinstance(store, bool):
        raise SpecError("context.storeCompactionState", "must be true or false")
    return CompactionSpec(
        datasource=datasource,
        interval=interval,
        segment_ids=segment_ids,
        segment_granularity=segment_granularity,
        query_granularity=query_granularity,
        rollup=rollup,
        dimensions=dimensions,
        dimension_exclusions=exclusions,
        metrics=metrics,
        filter=flt,
        partitions=partitions,
        drop_existing=drop_existing,
        store_compaction_state=store,
        max_retry=_int(tuning, "maxRetry", tun_path, 3),
        max_num_concurrent_subtasks=_int(
            tuning, "maxNumConcurrentSubTasks", tun_path, 1, minimum=1
        ),
        total_num_merge_tasks=_int(tuning, "totalNumMergeTasks", tun_path, 10, minimum=1),
        ignored=tuple(ignored),
    )
