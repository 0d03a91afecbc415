"""A task spec as Druid's Overlord takes it: index_parallel (and the legacy
index), compact and kill, validated into one `TaskSpec`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from metastore import locking
from metastore.druid.compaction import CompactionSpec, compaction_spec
from metastore.druid.context import Context, task_context
from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, int_at
from metastore.druid.granularity import interval_at
from metastore.druid.ingestion import IngestionSpec, ingestion_spec
from metastore.druid.names import datasource_name
from metastore.intervals import Interval

TASK_TYPES = locking.SPEC_TASK_TYPES  # index is Druid's alias of index_parallel
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


def validate_task_spec(raw: Any, *, input_roots) -> TaskSpec:
    """Check a Druid-shaped task spec; return it validated, or raise `SpecError`.

    Pure: nothing is read from the file system. `input_roots` (paths or strings)
    bound where a local input source may read; the files it names are found when
    the task runs."""
    if not isinstance(raw, dict):
        raise SpecError("(body)", "a task spec must be a JSON object")
    kind = raw.get("type")
    if kind not in TASK_TYPES:
        raise SpecError("type", f"unknown task type {kind!r}; accepted: {', '.join(TASK_TYPES)}")
    context = task_context(raw.get("context"))
    if kind in (locking.INDEX_TASK, locking.INDEX_ALIAS):
        allow(raw, "", INDEX_TOP_LEVEL)
        ingestion = ingestion_spec(raw, input_roots)
        return TaskSpec(
            type=locking.INDEX_TASK,
            datasource=ingestion.datasource,
            context=context,
            ingestion=ingestion,
            raw=raw,
            ignored=ingestion.ignored,
        )
    if kind == locking.KILL_TASK:
        return _kill_task(raw, context)
    compaction = compaction_spec(raw)
    return TaskSpec(
        type=locking.COMPACT_TASK,
        datasource=compaction.datasource,
        context=context,
        interval=compaction.interval,
        segment_ids=compaction.segment_ids,
        compaction=compaction,
        raw=raw,
        ignored=compaction.ignored,
    )


def _versions(raw: dict) -> tuple[str, ...] | None:
    versions = raw.get("versions")
    if versions is None:
        return None
    if not isinstance(versions, list) or not versions:
        raise SpecError("versions", "must be a non-empty list of segment versions (or absent: all)")
    for i, version in enumerate(versions):
        if not isinstance(version, str) or not version:
            raise SpecError(f"versions[{i}]", "must be a segment version string")
    return tuple(dict.fromkeys(versions))


def _cutoff(raw: dict) -> datetime | None:
    cutoff = raw.get("maxUsedStatusLastUpdatedTime")
    if cutoff is None:
        return None
    try:
        cutoff = Interval.parse(f"{cutoff}/{cutoff}").start if isinstance(cutoff, str) else None
    except ValueError:
        cutoff = None
    if cutoff is None:
        raise SpecError(
            "maxUsedStatusLastUpdatedTime",
            f"{raw['maxUsedStatusLastUpdatedTime']!r} is not an ISO-8601 timestamp",
        )
    return cutoff


def _kill_lock_type(context: Context) -> str | None:
    """The lock type the one lock-mode rule gives a kill of `context` (None if its
    taskLockType is refused: that is reported where the context is checked)."""
    try:
        return locking.lock_mode(
            task_type=locking.KILL_TASK,
            use_concurrent_locks=context.use_concurrent_locks,
            task_lock_type=context.task_lock_type,
        ).type
    except ValueError:
        return None


def _kill_task(raw: dict, context: Context) -> TaskSpec:
    """Druid's kill task (data-management/delete.md): interval, versions, batchSize,
    limit, maxUsedStatusLastUpdatedTime, and the deprecated markAsUnused."""
    allow(raw, "", KILL_TOP_LEVEL)
    versions = _versions(raw)
    mark_as_unused = bool_at(raw, "markAsUnused", "", False)
    if mark_as_unused and versions is not None:
        raise SpecError("markAsUnused", "cannot be used with versions (as in Druid)")
    if mark_as_unused and _kill_lock_type(context) not in (None, locking.EXCLUSIVE):
        # Under a REPLACE lock appends commit beside the kill: it would mark them
        # unused and delete them. Druid removed markAsUnused when it let kill take
        # REPLACE locks (apache/druid#16362).
        raise SpecError(
            "markAsUnused",
            "cannot be used with a REPLACE lock (context useConcurrentLocks or taskLockType "
            "REPLACE): appends running beside the kill would be marked unused and deleted",
        )
    cutoff = _cutoff(raw)
    ignored = []
    if raw.get("batchSize") is not None:
        ignored.append(
            "batchSize: a kill task deletes the segments it selects in one commit "
            "(the lock box is not held by the deletion)"
        )
    return TaskSpec(
        type=locking.KILL_TASK,
        datasource=datasource_name(raw.get("dataSource"), "dataSource"),
        context=context,
        interval=interval_at(raw.get("interval"), "interval"),
        raw=raw,
        mark_as_unused=mark_as_unused,
        kill=KillSpec(
            versions=versions,
            limit=int_at(raw, "limit", "", None, minimum=1),
            max_used_status_last_updated=cutoff,
            batch_size=int_at(raw, "batchSize", "", DEFAULT_KILL_BATCH_SIZE, minimum=1),
        ),
        ignored=tuple(ignored),
    )
