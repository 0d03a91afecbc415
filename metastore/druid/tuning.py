"""tuningConfig of an ingestion task: partitioning, perfect rollup, parse-error
limits, sub-task counts, and the fields that have no meaning on Spark (accepted,
reported as ignored)."""

from __future__ import annotations

from dataclasses import dataclass

from metastore.druid.fields import allow, bool_at, int_at, object_at
from metastore.druid.partitions import (
    LEGACY_TUNING,
    TUNING_PATH,
    PartitionsSpec,
    check_rollup_mode,
    partitions_spec,
)

UNLIMITED = 2**31 - 1
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
# tuningConfig fields with no meaning in Strata: accepted, and reported as ignored.
IGNORED_TUNING = {
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


@dataclass(frozen=True)
class TuningConfig:
    raw: dict  # the tuningConfig object as given ({} when absent)
    partitions: PartitionsSpec
    force_guaranteed_rollup: bool
    max_parse_exceptions: int
    max_saved_parse_exceptions: int
    max_retry: int
    max_num_concurrent_subtasks: int
    total_num_merge_tasks: int


def report_ignored_tuning(tuning: dict, path: str, ignored: list[str]) -> None:
    for key, reason in IGNORED_TUNING.items():
        if tuning.get(key) is not None:
            ignored.append(f"{path}.{key}: {reason}")


def tuning_config(spec: dict, ignored: list[str]) -> TuningConfig:
    """An ingestion spec's tuningConfig (absent: the defaults, dynamic partitioning)."""
    path = TUNING_PATH
    tuning = object_at(spec.get("tuningConfig"), path, required=False)
    allow(tuning, path, {*INDEX_TUNING_FIELDS, *LEGACY_TUNING, *IGNORED_TUNING})
    report_ignored_tuning(tuning, path, ignored)
    if tuning.get("logParseExceptions") is not None:
        bool_at(tuning, "logParseExceptions", path, False)
        ignored.append(
            f"{path}.logParseExceptions: parse errors are sampled in the task report "
            "(maxSavedParseExceptions), not logged row by row"
        )
    partitions = partitions_spec(tuning, ignored)
    force_rollup = bool_at(tuning, "forceGuaranteedRollup", path, False)
    check_rollup_mode(tuning, partitions, force_rollup)
    return TuningConfig(
        raw=tuning,
        partitions=partitions,
        force_guaranteed_rollup=force_rollup,
        max_parse_exceptions=int_at(tuning, "maxParseExceptions", path, UNLIMITED),
        max_saved_parse_exceptions=int_at(tuning, "maxSavedParseExceptions", path, 10),
        max_retry=int_at(tuning, "maxRetry", path, 3),
        max_num_concurrent_subtasks=int_at(tuning, "maxNumConcurrentSubTasks", path, 1, minimum=1),
        total_num_merge_tasks=int_at(tuning, "totalNumMergeTasks", path, 10, minimum=1),
    )
