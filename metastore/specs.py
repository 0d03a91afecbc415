"""Validation of Druid-shaped task specs (SPEC §6) into plain, checked dataclasses.

A spec that a Druid user would submit runs unchanged; anything Strata does not
understand is refused with a `SpecError` that names the field (as a dotted path)
and says what would be accepted. Nothing here touches the database or Spark, so
the API, the console and the workers share one definition of a valid spec.
"""

from __future__ import annotations

import glob
import os
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from metastore.intervals import GRANULARITY_NAMES, Granularity, Interval

TASK_TYPES = ("index_parallel", "index", "compact", "kill")
INPUT_SOURCES = ("local", "inline", "druid")
INPUT_FORMATS = ("json", "csv", "parquet")
TIMESTAMP_FORMATS = ("iso", "auto", "millis", "posix", "nano")
DIMENSION_TYPES = ("string", "long", "double", "float")
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
)
PARTITION_TYPES = ("dynamic", "hashed", "range", "single_dim")
HASH_PARTITION_FUNCTION = "murmur3_32_abs"  # Druid's only name; Strata hashes with Spark's murmur3
FILTER_TYPES = ("selector", "in", "bound", "and", "or", "not")
DEFAULT_MAX_ROWS_PER_SEGMENT = 5_000_000
DEFAULT_MAX_TOTAL_ROWS = 20_000_000
DEFAULT_TASK_LOCK_TIMEOUT_MS = 300_000
UNLIMITED = 2**31 - 1


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


@dataclass(frozen=True)
class Dimension:
    name: str
    type: str = "string"


@dataclass(frozen=True)
class Metric:
    type: str
    name: str
    field_name: str | None = None


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

    @property
    def schemaless(self) -> bool:
        return not self.dimensions

    @property
    def two_phase(self) -> bool:
        return self.partitions.type != "dynamic" or self.force_guaranteed_rollup


@dataclass(frozen=True)
class TaskSpec:
    type: str  # canonical: index_parallel | compact | kill
    datasource: str
    context: Context
    ingestion: IngestionSpec | None = None
    interval: Interval | None = None  # kill / compact(interval)
    segment_ids: tuple[str, ...] = ()  # compact(segments)
    raw: dict = field(default_factory=dict, compare=False)


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
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{path}.{key}", f"must be an integer from {minimum} to {maximum}")
    if value < minimum or value > maximum:
        shown = value if abs(value) < 10**20 else f"{str(value)[:12]}... ({len(str(value))} digits)"
        raise SpecError(
            f"{path}.{key}", f"must be an integer from {minimum} to {maximum}, got {shown}"
        )
    return value


def _bool(obj: dict, key: str, path: str, default: bool) -> bool:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise SpecError(f"{path}.{key}", "must be true or false")
    return value


LATEST_END = datetime(9999, 1, 1, tzinfo=UTC)


def _interval(value: Any, path: str) -> Interval:
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
    if interval.end > LATEST_END:
        raise SpecError(
            path, f"interval {value!r} ends after 9999-01-01; intervals lie in the years 0001-9998"
        )
    return interval


def _granularity(value: Any, path: str, *, default: str) -> str:
    if value is None:
        return default
    if isinstance(value, dict):  # Druid's {"type": "period", ...} / {"type": "day"}
        _allow(value, path, {"type"})
        value = value.get("type")
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
    )


# --- filters (transformSpec.filter), checked here, applied by the workers -------


def validate_filter(flt: Any, path: str) -> dict:
    flt = _obj(flt, path)
    kind = flt.get("type")
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


def _input_spec(io: dict, input_roots: list[Path]) -> InputSpec:
    path = "spec.ioConfig.inputSource"
    src = _obj(io.get("inputSource"), path)
    kind = src.get("type")
    if kind not in INPUT_SOURCES:
        raise SpecError(
            f"{path}.type",
            f"unknown input source {kind!r}; accepted: {', '.join(INPUT_SOURCES)}",
        )
    fmt_path = "spec.ioConfig.inputFormat"
    fmt = None
    columns = None
    skip = 0
    if kind != "druid":
        fmt_obj = _obj(io.get("inputFormat"), fmt_path)
        fmt = fmt_obj.get("type")
        if fmt not in INPUT_FORMATS:
            raise SpecError(
                f"{fmt_path}.type",
                f"unknown input format {fmt!r}; accepted: {', '.join(INPUT_FORMATS)}",
            )
        if fmt == "csv":
            _allow(
                fmt_obj,
                fmt_path,
                {"type", "columns", "findColumnsFromHeader", "skipHeaderRows", "listDelimiter"},
            )
            if fmt_obj.get("columns") is not None:
                cols = fmt_obj["columns"]
                if (
                    not isinstance(cols, list)
                    or not cols
                    or not all(isinstance(c, str) for c in cols)
                ):
                    raise SpecError(f"{fmt_path}.columns", "must be a non-empty list of names")
                if fmt_obj.get("findColumnsFromHeader") is True:
                    raise SpecError(
                        f"{fmt_path}.findColumnsFromHeader",
                        "cannot be true when columns are given",
                    )
                columns = tuple(cols)
            elif fmt_obj.get("findColumnsFromHeader") is False:
                raise SpecError(
                    f"{fmt_path}.columns", "is required when findColumnsFromHeader is false"
                )
            skip = _int(fmt_obj, "skipHeaderRows", fmt_path, 0)
        elif fmt == "json":
            _allow(fmt_obj, fmt_path, {"type", "flattenSpec", "featureSpec"})
            if fmt_obj.get("flattenSpec"):
                raise SpecError(f"{fmt_path}.flattenSpec", "is not supported")
        else:
            _allow(fmt_obj, fmt_path, {"type", "binaryAsString"})
    if kind == "local":
        _allow(src, path, {"type", "baseDir", "filter", "files"})
        return InputSpec(
            type="local",
            format=fmt,
            files=_resolve_local_files(src, path, input_roots),
            csv_columns=columns,
            csv_skip_header_rows=skip,
        )
    if kind == "inline":
        _allow(src, path, {"type", "data"})
        data = src.get("data")
        if not isinstance(data, str):
            raise SpecError(f"{path}.data", "is required (a string of rows)")
        if not data.strip():
            raise SpecError(f"{path}.data", "is empty: the input has no rows")
        if fmt == "parquet":
            raise SpecError(f"{fmt_path}.type", "parquet cannot be given inline; use json or csv")
        return InputSpec(
            type="inline", format=fmt, data=data, csv_columns=columns, csv_skip_header_rows=skip
        )
    _allow(src, path, {"type", "dataSource", "interval"})
    return InputSpec(
        type="druid",
        datasource=_datasource_name(src.get("dataSource"), f"{path}.dataSource"),
        interval=_interval(src.get("interval"), f"{path}.interval"),
    )


def _dimensions(schema: dict) -> tuple[tuple[Dimension, ...], tuple[str, ...]]:
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
        },
    )
    if ds.get("spatialDimensions"):
        raise SpecError(f"{path}.spatialDimensions", "is not supported")
    dims: list[Dimension] = []
    raw_dims = ds.get("dimensions") or []
    if not isinstance(raw_dims, list):
        raise SpecError(f"{path}.dimensions", "must be a list")
    for i, d in enumerate(raw_dims):
        dpath = f"{path}.dimensions[{i}]"
        if isinstance(d, str):
            dims.append(Dimension(d, "string"))
            continue
        d = _obj(d, dpath)
        _allow(d, dpath, {"type", "name", "createBitmapIndex", "multiValueHandling"})
        dtype = d.get("type", "string")
        if dtype not in DIMENSION_TYPES:
            raise SpecError(
                f"{dpath}.type",
                f"unknown dimension type {dtype!r}; accepted: {', '.join(DIMENSION_TYPES)}",
            )
        dims.append(Dimension(_str(d, "name", dpath), "double" if dtype == "float" else dtype))
    names = [d.name for d in dims]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError(f"{path}.dimensions", f"dimension {dup!r} is listed twice")
    excl = ds.get("dimensionExclusions") or []
    if not isinstance(excl, list) or not all(isinstance(e, str) for e in excl):
        raise SpecError(f"{path}.dimensionExclusions", "must be a list of names")
    return tuple(dims), tuple(excl)


def _metrics(schema: dict) -> tuple[Metric, ...]:
    path = "spec.dataSchema.metricsSpec"
    raw = schema.get("metricsSpec") or []
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of aggregators")
    out: list[Metric] = []
    for i, m in enumerate(raw):
        mpath = f"{path}[{i}]"
        m = _obj(m, mpath)
        mtype = m.get("type")
        if mtype not in METRIC_TYPES:
            raise SpecError(
                f"{mpath}.type",
                f"unknown metric type {mtype!r}; accepted: {', '.join(METRIC_TYPES)}",
            )
        _allow(m, mpath, {"type", "name", "fieldName", "isInputHyperUnique", "round"})
        name = _str(m, "name", mpath)
        field_name = None if mtype == "count" else _str(m, "fieldName", mpath)
        canonical = mtype.replace("float", "double")
        out.append(Metric(canonical, name, field_name))
    names = [m.name for m in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError(path, f"metric name {dup!r} is used twice")
    return tuple(out)


def _partitions(tuning: dict) -> PartitionsSpec:
    path = "spec.tuningConfig.partitionsSpec"
    ps = _obj(tuning.get("partitionsSpec"), path, required=False)
    kind = ps.get("type", "dynamic")
    if kind not in PARTITION_TYPES:
        raise SpecError(
            f"{path}.type",
            f"unknown partitionsSpec type {kind!r}; accepted: {', '.join(PARTITION_TYPES)}",
        )
    if kind == "dynamic":
        _allow(ps, path, {"type", "maxRowsPerSegment", "maxTotalRows"})
        return PartitionsSpec(
            type="dynamic",
            max_rows_per_segment=_int(
                ps, "maxRowsPerSegment", path, DEFAULT_MAX_ROWS_PER_SEGMENT, minimum=1
            ),
            max_total_rows=_int(ps, "maxTotalRows", path, DEFAULT_MAX_TOTAL_ROWS, minimum=1),
        )

    def dims(key: str) -> tuple[str, ...]:
        value = ps.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SpecError(f"{path}.{key}", "must be a list of dimension names")
        for i, name in enumerate(value):
            if name in value[:i]:
                raise SpecError(f"{path}.{key}[{i}]", f"{name!r} is listed twice")
            if name == "__time":
                raise SpecError(f"{path}.{key}[{i}]", "__time cannot be a partition dimension")
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
            },
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


def _ingestion(raw: dict, input_roots: list[Path]) -> IngestionSpec:
    spec = _obj(raw.get("spec"), "spec")
    _allow(spec, "spec", {"dataSchema", "ioConfig", "tuningConfig"})
    schema = _obj(spec.get("dataSchema"), "spec.dataSchema")
    _allow(
        schema,
        "spec.dataSchema",
        {
            "dataSource",
            "timestampSpec",
            "dimensionsSpec",
            "metricsSpec",
            "granularitySpec",
            "transformSpec",
        },
    )
    datasource = _datasource_name(schema.get("dataSource"), "spec.dataSchema.dataSource")

    ts_path = "spec.dataSchema.timestampSpec"
    ts = _obj(schema.get("timestampSpec"), ts_path, required=False)
    _allow(ts, ts_path, {"column", "format", "missingValue"})
    ts_column = _str(ts, "column", ts_path, required=False, default="timestamp")
    ts_format = _str(ts, "format", ts_path, required=False, default="auto")
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

    dims, exclusions = _dimensions(schema)
    metrics = _metrics(schema)
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
    _allow(gran, gpath, {"type", "segmentGranularity", "queryGranularity", "rollup", "intervals"})
    segment_granularity = _granularity(
        gran.get("segmentGranularity"), f"{gpath}.segmentGranularity", default="DAY"
    )
    if segment_granularity == "NONE":
        raise SpecError(f"{gpath}.segmentGranularity", "NONE is only a query granularity")
    query_granularity = _granularity(
        gran.get("queryGranularity"), f"{gpath}.queryGranularity", default="NONE"
    )
    if not _divides(query_granularity, segment_granularity):
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
    _allow(transform, tpath, {"filter", "transforms"})
    if transform.get("transforms"):
        raise SpecError(f"{tpath}.transforms", "expression transforms are not supported")
    flt = (
        validate_filter(transform["filter"], f"{tpath}.filter") if transform.get("filter") else None
    )

    io_path = "spec.ioConfig"
    io = _obj(spec.get("ioConfig"), io_path)
    _allow(io, io_path, {"type", "inputSource", "inputFormat", "appendToExisting", "dropExisting"})
    input_spec = _input_spec(io, input_roots)
    append = _bool(io, "appendToExisting", io_path, False)
    drop_existing = _bool(io, "dropExisting", io_path, False)
    if append and drop_existing:
        raise SpecError(f"{io_path}.dropExisting", "cannot be true with appendToExisting")
    if drop_existing and intervals is None:
        raise SpecError(f"{gpath}.intervals", "are required with dropExisting")

    tun_path = "spec.tuningConfig"
    tuning = _obj(spec.get("tuningConfig"), tun_path, required=False)
    _allow(
        tuning,
        tun_path,
        {
            "type",
            "partitionsSpec",
            "forceGuaranteedRollup",
            "maxParseExceptions",
            "maxSavedParseExceptions",
            "logParseExceptions",
            "maxRetry",
            "maxNumConcurrentSubTasks",
            "totalNumMergeTasks",
            "maxRowsInMemory",
            "maxBytesInMemory",
        },
    )
    partitions = _partitions(tuning)
    force_rollup = _bool(tuning, "forceGuaranteedRollup", tun_path, False)
    if partitions.type != "dynamic" and not force_rollup:
        # Druid requires forceGuaranteedRollup with hashed/range partitioning.
        raise SpecError(
            f"{tun_path}.forceGuaranteedRollup",
            f"must be true with {partitions.type} partitioning (as in Druid)",
        )
    if force_rollup:
        if partitions.type == "dynamic":
            raise SpecError(
                f"{tun_path}.partitionsSpec.type",
                "forceGuaranteedRollup requires hashed, range or single_dim partitioning",
            )
        if intervals is None:
            raise SpecError(f"{gpath}.intervals", "are required when forceGuaranteedRollup is true")
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
        for i, name in enumerate(partitions.partition_dimensions):
            where = f"{tun_path}.partitionsSpec.{field_name}"
            where += "" if field_name == "partitionDimension" else f"[{i}]"
            if name in metric_names or name in exclusions:
                raise SpecError(where, f"{name!r} is not a dimension (a metric or excluded)")
            if dims and name not in known:
                raise SpecError(where, f"{name!r} is not a dimension of this spec")
    if input_spec.type == "druid":
        if ts.get("column") not in (None, "__time"):
            raise SpecError(
                f"{ts_path}.column",
                "with a druid input source the timestamp is the __time column; "
                "leave timestampSpec out or name __time",
            )
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
    )


def _divides(query: str, segment: str) -> bool:
    """True when every segment-granularity bucket is a union of query buckets."""
    if query == "NONE":
        return True
    if query == "WEEK" and segment in ("MONTH", "QUARTER", "YEAR"):
        return False  # ISO weeks straddle months and years
    # GRANULARITY_NAMES runs from the finest to ALL.
    return GRANULARITY_NAMES.index(query) <= GRANULARITY_NAMES.index(segment)


def validate_task_spec(raw: Any, *, input_roots: list[Path]) -> TaskSpec:
    """Check a Druid-shaped task spec; return it validated, or raise `SpecError`."""
    if not isinstance(raw, dict):
        raise SpecError("(body)", "a task spec must be a JSON object")
    kind = raw.get("type")
    if kind not in TASK_TYPES:
        raise SpecError("type", f"unknown task type {kind!r}; accepted: {', '.join(TASK_TYPES)}")
    context = _context(raw.get("context"))
    if kind in ("index_parallel", "index"):
        _allow(raw, "", {"type", "id", "spec", "context", "groupId", "resource"})
        ingestion = _ingestion(raw, input_roots)
        return TaskSpec(
            type="index_parallel",
            datasource=ingestion.datasource,
            context=context,
            ingestion=ingestion,
            raw=raw,
        )
    if kind == "kill":
        _allow(raw, "", {"type", "id", "dataSource", "interval", "context", "markAsUnused"})
        return TaskSpec(
            type="kill",
            datasource=_datasource_name(raw.get("dataSource"), "dataSource"),
            context=context,
            interval=_interval(raw.get("interval"), "interval"),
            raw=raw,
        )
    # compact: validated fully by the compaction issue; its shape is checked here.
    _allow(
        raw,
        "",
        {
            "type",
            "id",
            "dataSource",
            "ioConfig",
            "granularitySpec",
            "dimensionsSpec",
            "metricsSpec",
            "tuningConfig",
            "context",
        },
    )
    datasource = _datasource_name(raw.get("dataSource"), "dataSource")
    io = _obj(raw.get("ioConfig"), "ioConfig")
    input_spec = _obj(io.get("inputSpec"), "ioConfig.inputSpec")
    ikind = input_spec.get("type")
    if ikind == "interval":
        return TaskSpec(
            type="compact",
            datasource=datasource,
            context=context,
            interval=_interval(input_spec.get("interval"), "ioConfig.inputSpec.interval"),
            raw=raw,
        )
    if ikind == "segments":
        segs = input_spec.get("segments")
        if not isinstance(segs, list) or not segs or not all(isinstance(s, str) for s in segs):
            raise SpecError(
                "ioConfig.inputSpec.segments", "must be a non-empty list of segment ids"
            )
        return TaskSpec(
            type="compact", datasource=datasource, context=context, segment_ids=tuple(segs), raw=raw
        )
    raise SpecError("ioConfig.inputSpec.type", f"unknown {ikind!r}; accepted: interval, segments")
