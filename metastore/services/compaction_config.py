"""Auto-compaction configs: set, delete, cluster slots, and the duty's run mark.

Every write takes the cluster config row first (`compaction_cluster_for_update`),
the row the compaction duty holds while it decides and submits: a config
deleted here stops submissions at once, since a run that started before waits
for nothing of it and a run after sees it gone. Each change is audited with
author, comment and address (Druid's config history).
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from metastore.compaction_state import CompactionConfigSpec, validate_compaction_config
from metastore.druid.errors import SpecError
from metastore.models import (
    COMPACTION_DEFAULT_MAX_SLOTS,
    CompactionClusterConfig,
    CompactionConfig,
    CompactionConfigAudit,
)

CLUSTER_ROW = 1


def compaction_cluster_for_update() -> CompactionClusterConfig:
    """The cluster config row, created with Druid's defaults on first use, locked
    until the caller's transaction ends."""
    CompactionClusterConfig.objects.get_or_create(pk=CLUSTER_ROW)
    return CompactionClusterConfig.objects.select_for_update().get(pk=CLUSTER_ROW)


def cluster_json(cluster: CompactionClusterConfig) -> dict:
    """Druid's ClusterCompactionConfig (`globalConfig` in the history)."""
    return {
        "compactionTaskSlotRatio": cluster.slot_ratio,
        "maxCompactionTaskSlots": cluster.max_slots,
        "compactionPolicy": {"type": "newestSegmentFirst", "priorityDatasource": None},
        "useSupervisors": False,
        "engine": "native",
    }


def config_fields(spec: CompactionConfigSpec) -> dict:
    """A validated config as the model's fields."""
    return {
        "task_priority": spec.task_priority,
        "input_segment_size_bytes": spec.input_segment_size_bytes,
        "max_rows_per_segment": spec.max_rows_per_segment,
        "skip_offset_from_latest": spec.skip_offset_from_latest,
        "skip_intervals": [str(iv) for iv in spec.skip_intervals],
        "tuning_config": spec.tuning_config,
        "granularity_spec": spec.granularity_spec,
        "dimensions_spec": spec.dimensions_spec,
        "metrics_spec": spec.metrics_spec,
        "transform_spec": spec.transform_spec,
        "io_config": spec.io_config,
        "task_context": spec.task_context,
    }


def _audit(
    cluster, *, datasource: str, config: dict | None, author: str, comment: str, ip: str
) -> None:
    CompactionConfigAudit.objects.create(
        datasource=datasource,
        compaction_config=config,
        global_config=cluster_json(cluster),
        author=author or "",
        comment=comment or "",
        ip=ip or "",
    )


def compaction_config_set(
    *, data: dict, author: str = "", comment: str = "", ip: str = ""
) -> CompactionConfig:
    """Create or replace a dataSource's auto-compaction config (Druid's POST
    /config/compaction). `data` is Druid's JSON; an invalid one raises `SpecError`
    naming the field and stores nothing. The dataSource need not exist yet."""
    spec = validate_compaction_config(data)
    with transaction.atomic():
        cluster = compaction_cluster_for_update()
        config, _ = CompactionConfig.objects.update_or_create(
            datasource=spec.datasource, defaults=config_fields(spec)
        )
        _audit(
            cluster,
            datasource=spec.datasource,
            config=spec.as_json(),
            author=author,
            comment=comment,
            ip=ip,
        )
    return config


def compaction_config_delete(
    *, datasource: str, author: str = "", comment: str = "", ip: str = ""
) -> bool:
    """Turn auto-compaction of `datasource` off: no task is submitted for it from
    now on (running ones finish, or are canceled like any task). False if it was
    not on."""
    with transaction.atomic():
        cluster = compaction_cluster_for_update()
        deleted, _ = CompactionConfig.objects.filter(datasource=datasource).delete()
        if deleted:
            _audit(
                cluster, datasource=datasource, config=None, author=author, comment=comment, ip=ip
            )
    return bool(deleted)


def compaction_cluster_set(
    *,
    slot_ratio: float | None = None,
    max_slots: int | None = None,
    author: str = "",
    comment: str = "",
    ip: str = "",
) -> CompactionClusterConfig:
    """Set the share of task slots compaction may use (`compactionTaskSlotRatio`,
    0..1) and its maximum (`maxCompactionTaskSlots`, at least 1)."""
    if slot_ratio is not None and not (0.0 <= slot_ratio <= 1.0):
        raise SpecError("compactionTaskSlotRatio", f"must be from 0 to 1, got {slot_ratio}")
    if max_slots is not None and not (1 <= max_slots <= COMPACTION_DEFAULT_MAX_SLOTS):
        raise SpecError(
            "maxCompactionTaskSlots",
            f"must be from 1 to {COMPACTION_DEFAULT_MAX_SLOTS}, got {max_slots}",
        )
    with transaction.atomic():
        cluster = compaction_cluster_for_update()
        if slot_ratio is not None:
            cluster.slot_ratio = slot_ratio
        if max_slots is not None:
            cluster.max_slots = max_slots
        cluster.save()
        _audit(cluster, datasource="", config=None, author=author, comment=comment, ip=ip)
    return cluster


def compaction_run_mark(*, cluster: CompactionClusterConfig, at: datetime) -> None:
    """Record when the duty last ran (Druid's scheduleStatus leaves AWAITING_FIRST_RUN).
    Called inside the duty's transaction, on the row it holds."""
    cluster.last_run_at = at
    cluster.save(update_fields=["last_run_at"])
