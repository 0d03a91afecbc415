"""The compact task: which segments (interval or ids), and what to change in them
(granularity, dimensions, metrics, filter, partitioning). None means "as the input
segments are"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metastore.druid.dimensions import Dimension, dimensions_spec
from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, int_at, no_projections, object_at, renamed
from metastore.druid.filters import validate_filter
from metastore.druid.granularity import granularity_at, interval_at
from metastore.druid.metrics import Metric, metrics_spec
from metastore.druid.names import datasource_name
from metastore.druid.partitions import PartitionsSpec, partitions_spec
from metastore.druid.tuning import IGNORED_TUNING, report_ignored_tuning
from metastore.intervals import Interval, granularity_divides

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


def _segment_ids(value: Any, path: str) -> tuple[str, ...]:
    if isinstance(value, list):  # Druid's legacy form lists segment objects
        value = [v.get("id") if isinstance(v, dict) else v for v in value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise SpecError(path, "must be a non-empty list of segment ids")
    if len(set(value)) != len(value):
        raise SpecError(path, "lists a segment twice")
    return tuple(value)


def _input_spec(io: dict, legacy: list[str]) -> tuple[Interval | None, tuple[str, ...]]:
    allow(io, "ioConfig", {"type", "inputSpec", "allowNonAlignedInterval", "dropExisting"})
    if io.get("type", "compact") != "compact":
        raise SpecError("ioConfig.type", f"must be compact, got {io.get('type')!r}")
    bool_at(io, "allowNonAlignedInterval", "ioConfig", False)
    if legacy:
        raise SpecError(legacy[0], "give the input in ioConfig.inputSpec or here, not both")
    spec = object_at(io.get("inputSpec"), "ioConfig.inputSpec")
    kind = spec.get("type")
    if kind == "interval":
        allow(spec, "ioConfig.inputSpec", {"type", "interval"})
        return interval_at(spec.get("interval"), "ioConfig.inputSpec.interval"), ()
    if kind == "segments":
        allow(spec, "ioConfig.inputSpec", {"type", "segments"})
        return None, _segment_ids(spec.get("segments"), "ioConfig.inputSpec.segments")
    raise SpecError(
        "ioConfig.inputSpec.type", f"unknown input spec {kind!r}; accepted: interval, segments"
    )


def _compact_input(raw: dict) -> tuple[Interval | None, tuple[str, ...]]:
    legacy = [k for k in ("interval", "segments") if raw.get(k) is not None]
    io = object_at(raw.get("ioConfig"), "ioConfig", required=False)
    if io:
        return _input_spec(io, legacy)
    if len(legacy) == 2:
        raise SpecError("segments", "give interval or segments, not both")
    if legacy == ["interval"]:
        return interval_at(raw["interval"], "interval"), ()
    if legacy == ["segments"]:
        return None, _segment_ids(raw["segments"], "segments")
    raise SpecError(
        "ioConfig.inputSpec",
        "is required: {type: interval, interval: ...} or {type: segments, segments: [ids]}",
    )


def _segment_granularity(raw: dict, gran: dict) -> str | None:
    gpath = "granularitySpec"
    if raw.get("segmentGranularity") is not None and gran.get("segmentGranularity") is not None:
        raise SpecError(
            "segmentGranularity", "give it here or in granularitySpec.segmentGranularity, not both"
        )
    if gran.get("segmentGranularity") is not None:
        value, where = gran["segmentGranularity"], f"{gpath}.segmentGranularity"
    elif raw.get("segmentGranularity") is not None:
        value, where = raw["segmentGranularity"], "segmentGranularity"
    else:
        return None
    return granularity_at(value, where, default="DAY")


def _granularity(raw: dict) -> tuple[str | None, str | None, bool | None]:
    """(segmentGranularity, queryGranularity, rollup), None where not given."""
    gpath = "granularitySpec"
    gran = object_at(raw.get(gpath), gpath, required=False)
    allow(gran, gpath, {"type", "segmentGranularity", "queryGranularity", "rollup"})
    segment = _segment_granularity(raw, gran)
    query = None
    if gran.get("queryGranularity") is not None:
        query = granularity_at(
            gran["queryGranularity"], f"{gpath}.queryGranularity", default="NONE"
        )
        if segment and not granularity_divides(query, segment):
            raise SpecError(
                f"{gpath}.queryGranularity",
                f"{query} does not divide segmentGranularity {segment}",
            )
    rollup = bool_at(gran, "rollup", gpath, True) if gran.get("rollup") is not None else None
    return segment, query, rollup


def _columns(raw: dict, ignored: list[str]):
    """(dimensions or None, exclusions, metrics or None) of a compact spec."""
    dimensions = None
    exclusions: tuple[str, ...] = ()
    if raw.get("dimensionsSpec") is not None:
        object_at(raw["dimensionsSpec"], "dimensionsSpec")
        dims = renamed(
            "spec.dataSchema.dimensionsSpec",
            "dimensionsSpec",
            lambda: dimensions_spec({"dimensionsSpec": raw["dimensionsSpec"]}, ignored),
        )
        dimensions, exclusions = dims.dimensions or None, dims.exclusions  # empty: the inputs'
    metrics = None
    if raw.get("metricsSpec") is not None:
        metrics = renamed(
            "spec.dataSchema.metricsSpec",
            "metricsSpec",
            lambda: metrics_spec({"metricsSpec": raw["metricsSpec"]}, ignored),
        )
    if dimensions is not None and metrics is not None:
        both = {d.name for d in dimensions} & {m.name for m in metrics}
        if both:
            raise SpecError("metricsSpec", f"{sorted(both)[0]!r} is both a dimension and a metric")
    return dimensions, exclusions, metrics


def _filter(raw: dict) -> dict | None:
    tpath = "transformSpec"
    transform = object_at(raw.get(tpath), tpath, required=False)
    allow(transform, tpath, {"filter", "transforms"})
    if transform.get("transforms"):
        raise SpecError(
            f"{tpath}.transforms",
            "a compact task's transformSpec takes only a filter, as in Druid; "
            "transform with an index_parallel task reading a druid input source",
        )
    flt = transform.get("filter")
    return None if flt is None else validate_filter(flt, f"{tpath}.filter")


def _partitions(tuning: dict, dimensions, ignored: list[str]) -> PartitionsSpec:
    tun_path = "tuningConfig"
    legacy_max_rows = int_at(tuning, "maxRowsPerSegment", tun_path, None, minimum=1)
    if tuning.get("partitionsSpec") is None and legacy_max_rows is not None:
        # Druid's legacy tuningConfig.maxRowsPerSegment: dynamic partitioning.
        tuning = {
            **tuning,
            "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": legacy_max_rows},
        }
    partitions = renamed(
        "spec.tuningConfig",
        tun_path,
        lambda: partitions_spec({"partitionsSpec": tuning.get("partitionsSpec")}, ignored),
    )
    force_rollup = bool_at(tuning, "forceGuaranteedRollup", tun_path, partitions.type != "dynamic")
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
    return partitions


def _tuning(raw: dict, ignored: list[str]) -> dict:
    """Druid's compaction takes index_parallel's tuningConfig: its knobs without
    meaning here are accepted and reported, as for ingestion."""
    tun_path = "tuningConfig"
    tuning = object_at(raw.get(tun_path), tun_path, required=False)
    allow(tuning, tun_path, COMPACT_TUNING | set(IGNORED_TUNING))
    report_ignored_tuning(tuning, tun_path, ignored)
    return tuning


def _store_compaction_state(raw: dict) -> bool:
    context = raw.get("context") if isinstance(raw.get("context"), dict) else {}
    store = context.get("storeCompactionState", True)
    if not isinstance(store, bool):
        raise SpecError("context.storeCompactionState", "must be true or false")
    return store


def compaction_spec(raw: dict) -> CompactionSpec:
    """A compact task spec, validated."""
    no_projections(raw, "")
    allow(raw, "", COMPACT_TOP_LEVEL | {"projections"})
    datasource = datasource_name(raw.get("dataSource"), "dataSource")
    interval, segment_ids = _compact_input(raw)
    ignored: list[str] = []
    drop_existing = bool_at(raw.get("ioConfig") or {}, "dropExisting", "ioConfig", True)
    segment_granularity, query_granularity, rollup = _granularity(raw)
    dimensions, exclusions, metrics = _columns(raw, ignored)
    flt = _filter(raw)
    tuning = _tuning(raw, ignored)
    partitions = _partitions(tuning, dimensions, ignored)
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
        store_compaction_state=_store_compaction_state(raw),
        max_retry=int_at(tuning, "maxRetry", "tuningConfig", 3),
        max_num_concurrent_subtasks=int_at(
            tuning, "maxNumConcurrentSubTasks", "tuningConfig", 1, minimum=1
        ),
        total_num_merge_tasks=int_at(tuning, "totalNumMergeTasks", "tuningConfig", 10, minimum=1),
        ignored=tuple(ignored),
    )
