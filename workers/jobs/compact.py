"""Compaction on Spark: rewrite the visible rows of existing segments.

A plain function of (validated compaction spec, the input segments' schemas,
the visible pieces to read, the output granularity and intervals, a work
directory) -> staged segment files and a report. It never touches the ORM.

Compaction is re-ingestion of the dataSource's own visible rows through the
same machinery as ingestion (`workers.jobs.ingest.run_ingest`: parsing of a
`druid` input, rollup, dynamic / hashed / range partitioning: one shuffle when
the shard count is known up front (dynamic, hashed with numShards), else the
two-phase shuffle and its intermediary cleanup). What it adds is the spec that run
needs, derived from the inputs' schema metadata: by default the union of their
dimensions and each metric's *combining* aggregator, so rolled-up rows roll up
further without changing any metric total.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from metastore.compaction_state import state_of_compaction
from metastore.druid.compaction import CompactionSpec
from metastore.druid.dimensions import Dimension
from metastore.druid.errors import SpecError
from metastore.druid.ingestion import IngestionSpec
from metastore.druid.input_sources import InputSpec
from metastore.druid.metrics import Metric
from metastore.intervals import GRANULARITY_NAMES, Interval, granularity_divides
from metastore.schema import schema_from_columns
from workers.jobs.ingest import IngestResult, Progress, SourcePiece, run_ingest

__all__ = ["CompactionInputs", "compaction_plan", "file_schema", "run_compaction_job"]


class CompactionInputs(Exception):
    """The inputs cannot be compacted as asked (said in words)."""


@dataclass(frozen=True)
class Plan:
    """What a compaction writes: the ingestion spec it runs, and the state it records."""

    ingestion: IngestionSpec
    compaction_state: dict


def file_schema(
    path: str, *, metrics: Sequence[Metric], rollup: bool, query_granularity: str
) -> dict:
    """The schema (metastore.schema) of a staged segment file: its dimensions are
    the file's columns other than `__time` and the metrics."""
    import pyarrow.parquet as pq

    columns = [(f.name, str(f.type)) for f in pq.read_schema(path)]
    return schema_from_columns(
        columns,
        metrics=[(m.type, m.name, m.field_name) for m in metrics],
        rollup=rollup,
        query_granularity=query_granularity,
    )


def _finest(granularities: Sequence[str]) -> str:
    return min(granularities, key=GRANULARITY_NAMES.index)


# A float metric in one input and a double one in another (segments written before
# float metrics were FLOAT columns) combine as the double, as Druid merges the types.
_WIDENED = [{f"float{op}", f"double{op}"} for op in ("Sum", "Min", "Max", "First", "Last")]


def merged_input_schema(schemas: Sequence[dict]) -> tuple[list[Dimension], list[Metric], bool, str]:
    """(dimensions, combining metrics, rollup, queryGranularity) of the inputs: the
    union of their dimensions (a name typed differently becomes a string), each
    metric's combining aggregator, rollup if all were rolled up, and the finest of
    their query granularities (nothing is truncated that was not already)."""
    dims: dict[str, str] = {}
    metrics: dict[str, Metric] = {}
    rollups, grans = [], []
    for schema in schemas:
        for d in schema.get("dimensions") or []:
            known = dims.get(d["name"])
            if {known, d["type"]} == {"float", "double"}:  # read widened, as Druid merges
                dims[d["name"]] = "double"
            else:
                dims[d["name"]] = d["type"] if known in (None, d["type"]) else "string"
        for m in schema.get("metrics") or []:
            combining = m.get("combining") or {}
            metric = Metric(combining.get("type"), m["name"], combining.get("fieldName", m["name"]))
            known = metrics.get(m["name"])
            if known is not None and {known.type, metric.type} in _WIDENED:
                metric = Metric(known.type.replace("float", "double"), m["name"], metric.field_name)
            elif known is not None and known.type != metric.type:
                raise CompactionInputs(
                    f"metric {m['name']!r} is combined as {known.type} in one input segment "
                    f"and as {metric.type} in another; give metricsSpec"
                )
            metrics[m["name"]] = metric
        rollups.append(bool(schema.get("rollup", True)))
        grans.append(schema.get("queryGranularity") or "NONE")
    for name in list(dims):
        if name in metrics:
            del dims[name]
    return (
        [Dimension(n, t) for n, t in dims.items()],
        list(metrics.values()),
        all(rollups) if rollups else True,
        _finest(grans) if grans else "NONE",
    )


def compaction_plan(
    spec: CompactionSpec,
    *,
    input_schemas: Sequence[dict],
    segment_granularity: str,
    intervals: Sequence[Interval],
) -> Plan:
    """The ingestion spec a compaction runs and the lastCompactionState it records.

    Raises `CompactionInputs` when the inputs' schemas are missing or clash and
    the spec does not say what to write instead."""
    dims, metrics, rollup, query = _output_schema(spec, input_schemas)
    _check_output_schema(spec, dims, metrics, query, segment_granularity)
    ingestion = _reingestion_spec(
        spec, dims, metrics, rollup, query, segment_granularity, intervals
    )
    state = state_of_compaction(
        spec,
        dimensions=[{"name": d.name, "type": d.type} for d in dims],
        metrics=metrics,
        segment_granularity=segment_granularity,
        query_granularity=query,
        rollup=rollup,
    )
    return Plan(ingestion, state)


def _output_schema(
    spec: CompactionSpec, input_schemas: Sequence[dict]
) -> tuple[list[Dimension], list[Metric], bool, str]:
    """(dimensions, metrics, rollup, queryGranularity) a compaction writes: the
    spec's where it gives them, else derived from the inputs' schemas."""
    if any(not s for s in input_schemas) and (spec.dimensions is None or spec.metrics is None):
        raise CompactionInputs(
            "some input segments carry no schema metadata; give dimensionsSpec and metricsSpec"
        )
    dims, metrics, rollup, query = merged_input_schema([s for s in input_schemas if s])
    if spec.dimensions is not None:
        dims = [d for d in spec.dimensions if d.name not in spec.dimension_exclusions]
    else:
        dims = [d for d in dims if d.name not in spec.dimension_exclusions]
    if spec.metrics is not None:
        metrics = list(spec.metrics)
    rollup = spec.rollup if spec.rollup is not None else rollup
    query = spec.query_granularity or query
    return dims, metrics, rollup, query


def _check_output_schema(
    spec: CompactionSpec,
    dims: Sequence[Dimension],
    metrics: Sequence[Metric],
    query: str,
    segment_granularity: str,
) -> None:
    """Refuse an output schema no segment could have, naming the field."""
    if not granularity_divides(query, segment_granularity):
        raise SpecError(
            "granularitySpec.queryGranularity",
            f"{query} does not divide the segment granularity {segment_granularity}; "
            "use a finer queryGranularity or a coarser segmentGranularity",
        )
    names = [d.name for d in dims] + [m.name for m in metrics]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SpecError("dimensionsSpec.dimensions", f"{dup!r} is both a dimension and a metric")
    for name in spec.partitions.partition_dimensions:
        if name not in {d.name for d in dims}:
            raise SpecError(
                "tuningConfig.partitionsSpec.partitionDimensions",
                f"{name!r} is not a dimension of the compacted segments "
                f"({', '.join(d.name for d in dims) or 'none'})",
            )
    if not dims:
        # An empty list would mean schemaless discovery of whatever columns the files hold.
        raise SpecError("dimensionsSpec.dimensions", "a compaction keeps at least one dimension")


def _reingestion_spec(
    spec: CompactionSpec,
    dims: Sequence[Dimension],
    metrics: Sequence[Metric],
    rollup: bool,
    query: str,
    segment_granularity: str,
    intervals: Sequence[Interval],
) -> IngestionSpec:
    """The ingestion of the dataSource's own visible rows that a compaction runs."""
    umbrella = Interval(min(iv.start for iv in intervals), max(iv.end for iv in intervals))
    return IngestionSpec(
        datasource=spec.datasource,
        timestamp_column="__time",
        timestamp_format="millis",
        timestamp_missing_value=None,
        dimensions=tuple(dims),
        dimension_exclusions=(),
        metrics=tuple(metrics),
        segment_granularity=segment_granularity,
        query_granularity=query,
        rollup=rollup,
        intervals=tuple(intervals),
        filter=spec.filter,
        input=InputSpec(type="druid", datasource=spec.datasource, interval=umbrella),
        append_to_existing=False,
        drop_existing=True,
        partitions=spec.partitions,
        force_guaranteed_rollup=spec.partitions.type != "dynamic",
        max_parse_exceptions=0,
        max_saved_parse_exceptions=10,
        max_retry=spec.max_retry,
        max_num_concurrent_subtasks=spec.max_num_concurrent_subtasks,
        total_num_merge_tasks=spec.total_num_merge_tasks,
    )


def run_compaction_job(
    spark,
    plan: Plan,
    *,
    pieces: Sequence[SourcePiece],
    work_dir: Path,
    job_group: str,
    progress: Progress | None = None,
) -> IngestResult:
    """Read `pieces` (visible parts of the input segments), roll up and partition
    them as `plan` says, and stage one file per output segment under `work_dir`.
    The report counts rows read (`rowStats.processed`) and written, bytes read and
    written, and the shuffle of a two-phase run."""
    return run_ingest(
        spark,
        plan.ingestion,
        work_dir=work_dir,
        job_group=job_group,
        source_pieces=pieces,
        progress=progress,
    )
