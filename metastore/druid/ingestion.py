"""The ingestion spec of an index_parallel (or legacy index) task: dataSchema,
ioConfig and tuningConfig, each read by its sub-grammar's module, and the rules
between them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metastore import locking
from metastore.druid.dimensions import Dimension, DimensionsSpec, dimensions_spec
from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, no_projections, object_at
from metastore.druid.granularity import (
    GRANULARITY_PATH,
    granularity_at,
    granularity_spec,
    interval_at,
)
from metastore.druid.input_sources import InputSpec, input_spec
from metastore.druid.metrics import Metric, metrics_spec
from metastore.druid.names import datasource_name
from metastore.druid.partitions import PartitionsSpec, check_partition_dimensions
from metastore.druid.timestamps import TIMESTAMP_PATH, TimestampSpec, timestamp_spec
from metastore.druid.transforms import Transform, transform_spec
from metastore.druid.tuning import TuningConfig, tuning_config
from metastore.intervals import Granularity, Interval, is_open_ended

INGESTION_SPEC_FIELDS = {"dataSchema", "ioConfig", "tuningConfig"}
DATA_SCHEMA_FIELDS = {
    "dataSource",
    "timestampSpec",
    "dimensionsSpec",
    "metricsSpec",
    "granularitySpec",
    "transformSpec",
}
IO_CONFIG_FIELDS = {"type", "inputSource", "inputFormat", "appendToExisting", "dropExisting"}
IO_PATH = "spec.ioConfig"
DIMENSION_LIST_PATH = "spec.dataSchema.dimensionsSpec.dimensions"


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
class _IoConfig:
    input: InputSpec
    append: bool
    drop_existing: bool


def _data_schema(raw: dict, spec: dict) -> tuple[dict, str]:
    """(dataSchema, dataSource): an index task may name its dataSource at the top
    level (as Druid accepts), as long as it agrees with dataSchema's."""
    schema = object_at(spec.get("dataSchema"), "spec.dataSchema")
    if schema.get("parser") is not None:
        raise SpecError(
            "spec.dataSchema.parser",
            "the legacy parser (parseSpec) is not supported, as in current Druid: use "
            "ioConfig.inputFormat, and timestampSpec / dimensionsSpec in dataSchema",
        )
    no_projections(schema, "spec.dataSchema")
    allow(schema, "spec.dataSchema", DATA_SCHEMA_FIELDS | {"projections"})
    top = raw.get("dataSource")
    if schema.get("dataSource") is None and top is not None:
        return schema, datasource_name(top, "dataSource")
    datasource = datasource_name(schema.get("dataSource"), "spec.dataSchema.dataSource")
    if top is not None and top != datasource:
        raise SpecError(
            "dataSource", f"{top!r} differs from spec.dataSchema.dataSource {datasource!r}"
        )
    return schema, datasource


def _check_columns(dims: DimensionsSpec, metrics: tuple[Metric, ...]) -> None:
    metric_names = {m.name for m in metrics}
    for d in dims.dimensions:
        if d.name in metric_names:
            raise SpecError(
                "spec.dataSchema.metricsSpec", f"{d.name!r} is both a dimension and a metric"
            )
        if d.name == "__time":
            raise SpecError(DIMENSION_LIST_PATH, "__time is reserved")


def _io_config(
    spec: dict, input_roots, dims: DimensionsSpec, has_intervals: bool, ignored: list[str]
) -> _IoConfig:
    io = object_at(spec.get("ioConfig"), IO_PATH)
    if io.get("firehose") is not None:
        raise SpecError(
            f"{IO_PATH}.firehose",
            "firehoses are not supported, as in current Druid: use ioConfig.inputSource",
        )
    allow(io, IO_PATH, IO_CONFIG_FIELDS)
    source = input_spec(io, input_roots, ignored)
    append = bool_at(io, "appendToExisting", IO_PATH, False)
    drop_existing = bool_at(io, "dropExisting", IO_PATH, False)
    if append and drop_existing:
        raise SpecError(f"{IO_PATH}.dropExisting", "cannot be true with appendToExisting")
    if drop_existing and not has_intervals:
        raise SpecError(f"{GRANULARITY_PATH}.intervals", "are required with dropExisting")
    if source.type == "combining" and not dims.dimensions:
        raise SpecError(
            DIMENSION_LIST_PATH,
            "a combining input source needs its dimensions listed (delegates differ in their fields)",
        )
    for inp in source.file_sources:
        if inp.flatten and not dims.dimensions and not inp.use_field_discovery:
            raise SpecError(
                DIMENSION_LIST_PATH, "list the dimensions, or turn flattenSpec.useFieldDiscovery on"
            )
    return _IoConfig(source, append, drop_existing)


def _partitions(
    tuning: TuningConfig,
    io: _IoConfig,
    dims: DimensionsSpec,
    metrics: tuple[Metric, ...],
    ignored: list[str],
) -> PartitionsSpec:
    partitions = tuning.partitions
    if io.append and partitions.type != "dynamic":
        raise SpecError(
            f"{IO_PATH}.appendToExisting",
            f"appending requires dynamic partitioning, not {partitions.type}",
        )
    # Discovered dimensions (useSchemaDiscovery, includeAllDimensions) are known
    # only when the input is read: the task refuses a missing one then.
    discovers = dims.schema_discovery or dims.include_all
    names = {
        "dimensions": set() if discovers else {d.name for d in dims.dimensions},
        "metrics": {m.name for m in metrics},
        "counts": {m.name for m in metrics if m.type == "count"},
        "exclusions": set(dims.exclusions),
    }
    return check_partition_dimensions(partitions, tuning.raw, names, ignored)


def _timestamp_column(ts: TimestampSpec, source: InputSpec, ignored: list[str]) -> str:
    """A druid input source always reads each row's __time."""
    if source.druid_source is not None and ts.column_given not in (None, "__time"):
        if source.type == "druid":
            ignored.append(
                f"{TIMESTAMP_PATH}: a druid input source always reads each row's __time "
                f"(column {ts.column_given!r} is not used)"
            )
            return "__time"
        return ts.column
    return "__time" if source.type == "druid" else ts.column


def ingestion_spec(raw: dict, input_roots, ignored: list[str] | None = None) -> IngestionSpec:
    """The `spec` of an index_parallel / index task, validated without reading its input."""
    ignored = [] if ignored is None else ignored
    spec = object_at(raw.get("spec"), "spec")
    allow(spec, "spec", INGESTION_SPEC_FIELDS)
    schema, datasource = _data_schema(raw, spec)
    ts = timestamp_spec(schema)
    dims = dimensions_spec(schema, ignored)
    metrics = metrics_spec(schema, ignored)
    _check_columns(dims, metrics)
    gran = granularity_spec(schema)
    transforms, flt = transform_spec(schema)
    io = _io_config(spec, input_roots, dims, gran.intervals is not None, ignored)
    if io.drop_existing and gran.segment == "NONE":
        raise SpecError(
            f"{IO_PATH}.dropExisting",
            "cannot be true with segmentGranularity NONE: every millisecond of the "
            "intervals is a time chunk that would get a tombstone; use SECOND or coarser",
        )
    tuning = tuning_config(spec, ignored)
    partitions = _partitions(tuning, io, dims, metrics, ignored)
    return IngestionSpec(
        datasource=datasource,
        timestamp_column=_timestamp_column(ts, io.input, ignored),
        timestamp_format=ts.format,
        timestamp_missing_value=ts.missing_value,
        dimensions=dims.dimensions,
        dimension_exclusions=dims.exclusions,
        metrics=metrics,
        segment_granularity=gran.segment,
        query_granularity=gran.query,
        rollup=gran.rollup,
        intervals=gran.intervals,
        filter=flt,
        input=io.input,
        append_to_existing=io.append,
        drop_existing=io.drop_existing,
        partitions=partitions,
        force_guaranteed_rollup=tuning.force_guaranteed_rollup,
        max_parse_exceptions=tuning.max_parse_exceptions,
        max_saved_parse_exceptions=tuning.max_saved_parse_exceptions,
        max_retry=tuning.max_retry,
        max_num_concurrent_subtasks=tuning.max_num_concurrent_subtasks,
        total_num_merge_tasks=tuning.total_num_merge_tasks,
        transforms=transforms,
        include_all_dimensions=dims.include_all,
        schema_discovery=dims.schema_discovery,
        ignored=tuple(dict.fromkeys(ignored)),
    )


def drop_existing_chunks(raw: Any, locked: Sequence[Interval] = ()) -> list[Interval]:
    """The time chunks an index spec that replaces with `dropExisting` must
    publish rows or a tombstone into (SPEC §6): every segment-granularity bucket
    of `granularitySpec.intervals`, in time order; [] for any other spec.

    Reads only those fields, with `validate_task_spec`'s own parsing, never the
    input (so a publish can ask it cheaply). The spec was validated when it was
    submitted; one that no longer parses asks for nothing here. An open-ended
    interval (Druid's ETERNITY) asks only for the chunks inside the task's
    `locked` intervals: the task clipped it to what exists before locking."""
    if not isinstance(raw, dict) or raw.get("type") not in (
        locking.INDEX_TASK,
        locking.INDEX_ALIAS,
    ):
        return []
    try:
        spec = object_at(raw.get("spec"), "spec")
        io = object_at(spec.get("ioConfig"), "spec.ioConfig", required=False)
        if not bool_at(io, "dropExisting", "", False) or bool_at(io, "appendToExisting", "", False):
            return []
        schema = object_at(spec.get("dataSchema"), "spec.dataSchema", required=False)
        gran = object_at(schema.get("granularitySpec"), "granularitySpec", required=False)
        segment = granularity_at(gran.get("segmentGranularity"), "", default="DAY")
        intervals = [interval_at(v, "") for v in gran.get("intervals") or ()]
    except SpecError:
        return []
    buckets = Granularity.from_name(segment).iter_buckets
    bounded = [iv for iv in intervals if not is_open_ended(iv)]
    for iv in filter(is_open_ended, intervals):
        bounded += filter(None, (iv.intersection(lock) for lock in locked))
    return sorted({chunk for iv in bounded for chunk in buckets(iv)}, key=lambda c: c.start)
