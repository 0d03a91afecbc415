"""Druid's auto-compaction config and `lastCompactionState`, pure.

- `validate_compaction_config(raw)`: a Druid `DataSourceCompactionConfig` JSON ->
  `CompactionConfigSpec`, or `SpecError` naming the field. Everything a compact
  task checks is checked by building the task the duty would submit and
  validating it as a task (`metastore.specs`), so a config that is accepted
  always gives tasks that are.
- `compaction_task_spec(config, interval)`: the `compact` task for one interval.
- `state_of_compaction(spec, ...)`: the `lastCompactionState` a compaction records
  on every segment it writes (also used by `workers.jobs.compact`).
- `compaction_mismatch(states, config)`: why an interval's segments are not
  compacted as the config asks (Druid's `CompactionStatus` checks, in order), or
  None when they are.

No Django, no Spark.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from metastore.druid.compaction import CompactionSpec
from metastore.druid.errors import SpecError
from metastore.druid.granularity import add_period
from metastore.druid.metrics import Metric
from metastore.druid.partitions import PartitionsSpec
from metastore.druid.tasks import validate_task_spec
from metastore.intervals import Interval

DEFAULT_PRIORITY = 25
DEFAULT_INPUT_BYTES = 100_000_000_000_000
DEFAULT_SKIP_OFFSET = "P1D"
DEFAULT_SLOT_RATIO = 0.1
DEFAULT_MAX_SLOTS = 2_147_483_647
# Segments are Parquet files (snappy): the one index spec Strata writes.
INDEX_SPEC = {"format": "parquet", "compression": "snappy"}

CONFIG_FIELDS = (
    "dataSource",
    "taskPriority",
    "inputSegmentSizeBytes",
    "maxRowsPerSegment",
    "skipOffsetFromLatest",
    "skipIntervals",
    "tuningConfig",
    "granularitySpec",
    "dimensionsSpec",
    "metricsSpec",
    "transformSpec",
    "ioConfig",
    "taskContext",
)
# Accepted for Druid's clients; meaningless here ("engine" must be native).
_ACCEPTED_EXTRA = ("engine", "type")
# Druid's fields that Strata refuses, each with its reason (a 400 naming it).
_REFUSED = {
    "projections": "segments here are Parquet files without projections; compaction "
    "writes none (leave the field out)",
    "baseTable": "goes with projections, which Strata's segments do not have",
    "skipOffsetFromNow": "belongs to Druid's cascading reindexing templates; use "
    "skipOffsetFromLatest (and skipIntervals)",
}
_PLACEHOLDER = "2000-01-01T00:00:00.000Z/2000-01-02T00:00:00.000Z"
_INT_MAX = 2**63 - 1


def _state_partitions(partitions: PartitionsSpec) -> dict:
    ps = asdict(partitions)
    out: dict[str, Any] = {"type": ps["type"]}
    if ps["type"] == "dynamic":
        out.update(maxRowsPerSegment=ps["max_rows_per_segment"], maxTotalRows=ps["max_total_rows"])
    else:
        if ps["num_shards"]:
            out["numShards"] = ps["num_shards"]
        if ps["target_rows_per_segment"]:
            out["targetRowsPerSegment"] = ps["target_rows_per_segment"]
        out["partitionDimensions"] = list(ps["partition_dimensions"])
    return out


def metric_json(m: Metric) -> dict:
    out = {"type": m.type, "name": m.name}
    if m.field_name:
        out["fieldName"] = m.field_name
    return out


def state_of_compaction(
    spec: CompactionSpec,
    *,
    dimensions: list[dict],
    metrics: list[Metric],
    segment_granularity: str,
    query_granularity: str,
    rollup: bool,
) -> dict:
    """Druid's `lastCompactionState` of what a compaction writes."""
    return {
        "partitionsSpec": _state_partitions(spec.partitions),
        "dimensionsSpec": {"dimensions": dimensions},
        "metricsSpec": [metric_json(m) for m in metrics],
        "granularitySpec": {
            "segmentGranularity": segment_granularity,
            "queryGranularity": query_granularity,
            "rollup": rollup,
        },
        "transformSpec": {"filter": spec.filter} if spec.filter else None,
        "indexSpec": dict(INDEX_SPEC),
    }


# --- the config ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CompactionConfigSpec:
    """A validated DataSourceCompactionConfig; the JSON fields as Druid shows them."""

    datasource: str
    task_priority: int
    input_segment_size_bytes: int
    max_rows_per_segment: int | None
    skip_offset_from_latest: str
    tuning_config: dict | None
    granularity_spec: dict | None
    dimensions_spec: dict | None
    metrics_spec: list | None
    transform_spec: dict | None
    io_config: dict | None
    task_context: dict | None
    skip_intervals: tuple[Interval, ...] = ()

    def as_json(self) -> dict:
        """Druid's GET shape: every field, null where not given."""
        return {
            "dataSource": self.datasource,
            "taskPriority": self.task_priority,
            "inputSegmentSizeBytes": self.input_segment_size_bytes,
            "maxRowsPerSegment": self.max_rows_per_segment,
            "skipOffsetFromLatest": self.skip_offset_from_latest,
            "skipIntervals": [str(iv) for iv in self.skip_intervals],
            "tuningConfig": self.tuning_config,
            "granularitySpec": self.granularity_spec,
            "dimensionsSpec": self.dimensions_spec,
            "metricsSpec": self.metrics_spec,
            "transformSpec": self.transform_spec,
            "ioConfig": self.io_config,
            "taskContext": self.task_context,
        }

    @property
    def segment_granularity(self) -> str | None:
        return self.compaction.segment_granularity

    @cached_property
    def compaction(self) -> CompactionSpec:
        """The compact task this config gives (for any interval)."""
        return _validated(compaction_task_spec(self, Interval.parse(_PLACEHOLDER))).compaction

    def skip_cutoff(self, latest_end: datetime) -> datetime:
        """Intervals ending after this are within skipOffsetFromLatest."""
        return add_period(latest_end, self.skip_offset_from_latest, -1)


def _integer(raw: dict, key: str, default: int | None, minimum: int) -> int | None:
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _INT_MAX:
        raise SpecError(key, f"must be an integer of at least {minimum}, got {value!r}")
    return value


def _object(raw: dict, key: str) -> dict | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, dict):
        raise SpecError(key, f"must be a JSON object, got {json.dumps(value)[:60]}")
    return value


def _period(raw: dict) -> str:
    value = raw.get("skipOffsetFromLatest")
    if value is None:
        return DEFAULT_SKIP_OFFSET
    if not isinstance(value, str):
        raise SpecError("skipOffsetFromLatest", "must be an ISO-8601 period like P1D or PT6H")
    if value.startswith("-"):
        raise SpecError("skipOffsetFromLatest", f"must not be negative, got {value!r}")
    try:
        add_period(datetime(2000, 1, 1, tzinfo=UTC), value, -1)
    except ValueError:
        raise SpecError(
            "skipOffsetFromLatest", f"{value!r} is not an ISO-8601 period like P1D, PT6H or P1M"
        ) from None
    return value


def _skip_intervals(raw: dict) -> tuple[Interval, ...]:
    value = raw.get("skipIntervals")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SpecError("skipIntervals", "must be a list of ISO-8601 intervals")
    out = []
    for i, text in enumerate(value):
        try:
            out.append(Interval.parse(text))
        except ValueError as exc:
            raise SpecError(f"skipIntervals[{i}]", str(exc)) from None
    return tuple(out)


def _io_config(raw: dict) -> dict | None:
    io = _object(raw, "ioConfig")
    if io is None:
        return None
    unknown = sorted(set(io) - {"dropExisting", "type"})
    if unknown:
        raise SpecError(f"ioConfig.{unknown[0]}", "unknown field; accepted: dropExisting")
    drop = io.get("dropExisting")
    if drop is not None and not isinstance(drop, bool):
        raise SpecError("ioConfig.dropExisting", "must be true or false")
    return {"dropExisting": bool(drop)} if drop is not None else {}


def validate_compaction_config(raw: Any) -> CompactionConfigSpec:
    """Check a DataSourceCompactionConfig (only `dataSource` is required); raise
    `SpecError` naming the field."""
    if not isinstance(raw, dict):
        raise SpecError("(body)", "a compaction config must be a JSON object")
    refused = sorted(set(raw) & set(_REFUSED))
    if refused:
        raise SpecError(refused[0], _REFUSED[refused[0]])
    unknown = sorted(set(raw) - set(CONFIG_FIELDS) - set(_ACCEPTED_EXTRA))
    if unknown:
        raise SpecError(unknown[0], f"unknown field; accepted: {', '.join(CONFIG_FIELDS)}")
    if raw.get("engine") not in (None, "native"):
        raise SpecError("engine", "only the native engine runs compaction here")
    if not isinstance(raw.get("dataSource"), str) or not raw["dataSource"]:
        raise SpecError("dataSource", "is required: the name of the dataSource to compact")
    metrics = raw.get("metricsSpec")
    if metrics is not None and not isinstance(metrics, list):
        raise SpecError("metricsSpec", "must be a list of aggregators")
    max_rows = _integer(raw, "maxRowsPerSegment", None, 1)
    tuning = _object(raw, "tuningConfig")
    if max_rows is not None and tuning and tuning.get("partitionsSpec") is not None:
        raise SpecError(
            "maxRowsPerSegment",
            "give it or tuningConfig.partitionsSpec, not both (it is deprecated)",
        )
    config = CompactionConfigSpec(
        datasource=raw["dataSource"],
        task_priority=_integer(raw, "taskPriority", DEFAULT_PRIORITY, -(2**31)),
        input_segment_size_bytes=_integer(raw, "inputSegmentSizeBytes", DEFAULT_INPUT_BYTES, 1),
        max_rows_per_segment=max_rows,
        skip_offset_from_latest=_period(raw),
        tuning_config=tuning,
        granularity_spec=_object(raw, "granularitySpec"),
        dimensions_spec=_object(raw, "dimensionsSpec"),
        metrics_spec=metrics,
        transform_spec=_object(raw, "transformSpec"),
        io_config=_io_config(raw),
        task_context=_object(raw, "taskContext"),
        skip_intervals=_skip_intervals(raw),
    )
    compaction = config.compaction  # the task it gives is valid, or say which field is not
    if compaction.segment_granularity == "ALL":
        raise SpecError(
            "granularitySpec.segmentGranularity", "auto-compaction skips ALL, as Druid does"
        )
    return config


def _validated(task: dict):
    try:
        return validate_task_spec(task, input_roots=[])
    except SpecError as exc:
        field = exc.field
        if field == "context" or field.startswith("context."):
            field = "taskContext" + field[len("context") :]
        elif field in ("interval", "ioConfig.inputSpec", "ioConfig.inputSpec.interval"):
            field = "(interval)"
        raise SpecError(field, exc.message) from None


def compaction_task_spec(
    config: CompactionConfigSpec, interval: Interval, task_id: str | None = None
) -> dict:
    """The `compact` task the duty submits for `interval` (Druid's ClientCompactionTaskQuery):
    the config's specs, at its priority, with concurrent locks unless its taskContext
    says otherwise, so appends never wait on it."""
    io: dict[str, Any] = {
        "type": "compact",
        "inputSpec": {"type": "interval", "interval": str(interval)},
    }
    if config.io_config and "dropExisting" in config.io_config:
        io["dropExisting"] = config.io_config["dropExisting"]
    spec: dict[str, Any] = {"type": "compact", "dataSource": config.datasource, "ioConfig": io}
    if task_id is not None:
        spec["id"] = task_id
    tuning = dict(config.tuning_config or {})
    if config.max_rows_per_segment is not None:
        tuning["partitionsSpec"] = {
            "type": "dynamic",
            "maxRowsPerSegment": config.max_rows_per_segment,
        }
    for key, value in (
        ("granularitySpec", config.granularity_spec),
        ("dimensionsSpec", config.dimensions_spec),
        ("metricsSpec", config.metrics_spec),
        ("transformSpec", config.transform_spec),
        ("tuningConfig", tuning or None),
    ):
        if value is not None:
            spec[key] = value
    spec["context"] = compaction_task_context(config)
    return spec


def compaction_task_context(config: CompactionConfigSpec) -> dict[str, Any]:
    """The context of the tasks the duty submits for `config`: concurrent locks
    unless its taskContext says otherwise, at the config's priority."""
    return {
        "useConcurrentLocks": True,
        **(config.task_context or {}),
        "priority": config.task_priority,
    }


# --- is it compacted as configured? ----------------------------------------------------------


def desired_state(config: CompactionConfigSpec) -> dict:
    """The parts of `lastCompactionState` the config fixes; what it leaves null is
    not compared (as in Druid, a null config field counts as up to date)."""
    spec = config.compaction
    out: dict[str, Any] = {"partitionsSpec": _state_partitions(spec.partitions)}
    gran = {}
    if spec.segment_granularity is not None:
        gran["segmentGranularity"] = spec.segment_granularity
    if spec.query_granularity is not None:
        gran["queryGranularity"] = spec.query_granularity
    if spec.rollup is not None:
        gran["rollup"] = spec.rollup
    out["granularitySpec"] = gran
    if spec.dimensions is not None:
        dims = [d for d in spec.dimensions if d.name not in spec.dimension_exclusions]
        out["dimensionsSpec"] = [{"name": d.name, "type": d.type} for d in dims]
    if spec.metrics is not None:
        out["metricsSpec"] = [metric_json(m) for m in spec.metrics]
    if spec.filter is not None:
        out["transformSpec"] = spec.filter
    return out


def _mismatch(name: str, required: Any, current: Any) -> str:
    return (
        f"'{name}' mismatch: required[{json.dumps(required, sort_keys=True)}], "
        f"current[{json.dumps(current, sort_keys=True)}]"
    )


def compaction_mismatch(states: list[dict | None], desired: dict) -> str | None:
    """Why segments with these `lastCompactionState`s are not compacted as `desired`
    (`desired_state`) asks, Druid's checks in Druid's order; None if they are."""
    if not states or any(not s for s in states):
        return "not compacted yet"
    first = states[0]
    if any(s != first for s in states[1:]):
        return "segments have different last compaction states"
    if first.get("partitionsSpec") != desired["partitionsSpec"]:
        return _mismatch("partitionsSpec", desired["partitionsSpec"], first.get("partitionsSpec"))
    current_gran = first.get("granularitySpec") or {}
    for key, value in desired["granularitySpec"].items():
        if current_gran.get(key) != value:
            return _mismatch(key, value, current_gran.get(key))
    if "dimensionsSpec" in desired:
        current = [
            {"name": d.get("name"), "type": d.get("type", "string")}
            for d in (first.get("dimensionsSpec") or {}).get("dimensions") or []
        ]
        if current != desired["dimensionsSpec"]:
            return _mismatch("dimensionsSpec", desired["dimensionsSpec"], current)
    if "metricsSpec" in desired and first.get("metricsSpec") != desired["metricsSpec"]:
        return _mismatch("metricsSpec", desired["metricsSpec"], first.get("metricsSpec"))
    if "transformSpec" in desired:
        current_filter = (first.get("transformSpec") or {}).get("filter")
        if current_filter != desired["transformSpec"]:
            return _mismatch("transformSpec.filter", desired["transformSpec"], current_filter)
    return None
