"""Reads for auto-compaction: configs, their history, the facts the duty
decides on (visible segments with their compaction state, locks, tasks), and
the plans it would act on now (`compaction_plans`; the duty's run, which
submits them, is `metastore.services.compaction_run`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from metastore.compaction_state import CompactionConfigSpec, validate_compaction_config
from metastore.duties.compaction import (
    Facts,
    IntervalStatus,
    LockFact,
    SegmentFact,
    TaskFact,
    allocate_slots,
    plan_datasource,
    slot_budget,
)
from metastore.intervals import ETERNITY, Interval
from metastore.models import (
    ACTIVE_STATUSES,
    CompactionClusterConfig,
    CompactionConfig,
    CompactionConfigAudit,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
    TaskType,
)
from metastore.selectors.timeline import timeline_for
from metastore.selectors.workers import live_workers

DUTY_TASK_PREFIX = "coordinator-issued_"
# The duty looks back this far at its ended tasks (Druid keeps 12 h of task status).
TASK_HISTORY = timedelta(hours=12)
_TASK_HISTORY_LIMIT = 1000


def compaction_configs() -> QuerySet[CompactionConfig]:
    return CompactionConfig.objects.order_by("datasource")


def compaction_config(*, datasource: str) -> CompactionConfig | None:
    return CompactionConfig.objects.filter(datasource=datasource).first()


def compaction_cluster() -> CompactionClusterConfig:
    """The cluster config; Druid's defaults (unsaved) until first set."""
    return CompactionClusterConfig.objects.filter(pk=1).first() or CompactionClusterConfig(pk=1)


def config_json(config: CompactionConfig) -> dict:
    """A stored config in Druid's shape (every field, null where not given)."""
    return {
        "dataSource": config.datasource,
        "taskPriority": config.task_priority,
        "inputSegmentSizeBytes": config.input_segment_size_bytes,
        "maxRowsPerSegment": config.max_rows_per_segment,
        "skipOffsetFromLatest": config.skip_offset_from_latest,
        "skipIntervals": list(config.skip_intervals or []),
        "tuningConfig": config.tuning_config,
        "granularitySpec": config.granularity_spec,
        "dimensionsSpec": config.dimensions_spec,
        "metricsSpec": config.metrics_spec,
        "transformSpec": config.transform_spec,
        "ioConfig": config.io_config,
        "taskContext": config.task_context,
    }


def config_spec(config: CompactionConfig) -> CompactionConfigSpec:
    """A stored config as the pure core's validated spec."""
    return validate_compaction_config(config_json(config))


def compaction_history(
    *, datasource: str, interval: Interval | None = None, count: int | None = None
) -> list[tuple[CompactionConfigAudit, dict | None]]:
    """Druid's config history of `datasource`, oldest first: each change of its
    config (None once deleted), and each change of the cluster slots while it had
    one, with its config as it stood. `interval` limits by audit time, `count`
    keeps the newest n."""
    rows = CompactionConfigAudit.objects.filter(Q(datasource=datasource) | Q(datasource=""))
    entries, current = [], None
    for row in rows.order_by("created_at", "id"):
        if row.datasource:
            current = row.compaction_config
            entries.append((row, current))
        elif current is not None:
            entries.append((row, current))
    if interval is not None:
        entries = [e for e in entries if interval.contains(e[0].created_at)]
    return entries[-count:] if count else entries


def _task_interval(spec: dict) -> Interval | None:
    io = spec.get("ioConfig") if isinstance(spec.get("ioConfig"), dict) else {}
    text = (io.get("inputSpec") or {}).get("interval") or spec.get("interval")
    try:
        return Interval.parse(text) if isinstance(text, str) else None
    except ValueError:
        return None


def compaction_facts(*, datasource: str, now: datetime | None = None) -> Facts:
    """What the duty decides on for `datasource`: its visible segments, the locks
    held on it, its compaction tasks (active, or ended within TASK_HISTORY)."""
    timeline = timeline_for(datasource=datasource)
    ids = {ref.id for _, ref in timeline.lookup(ETERNITY)}
    rows = Segment.objects.filter(id__in=ids).values_list(
        "id",
        "start",
        "end",
        "size_bytes",
        "compaction_state",
        "tombstone",
        "created_by_id",
        "upgraded_from",
    )
    visible = tuple(
        SegmentFact(
            id=r[0],
            interval=Interval(r[1], r[2]),
            size_bytes=r[3],
            compaction_state=r[4],
            tombstone=r[5],
            created_by=r[6],
            upgraded=bool(r[7]),
        )
        for r in rows
    )
    locks = tuple(
        LockFact(task_id=lk.task_id, interval=lk.interval, type=lk.type)
        for lk in TaskLock.objects.filter(datasource=datasource, revoked=False)
    )
    since = (now or timezone.now()) - TASK_HISTORY
    tasks = (
        Task.objects.filter(datasource=datasource, type=TaskType.COMPACT)
        .filter(Q(status__in=ACTIVE_STATUSES) | Q(ended_at__gte=since))
        .only("id", "spec", "status", "ended_at", "error")
        .order_by("-created_at")[:_TASK_HISTORY_LIMIT]
    )
    return Facts(
        datasource=datasource,
        visible=visible,
        locks=locks,
        tasks=tuple(
            TaskFact(
                id=t.id,
                interval=_task_interval(t.spec or {}),
                status=t.status,
                active=t.status in ACTIVE_STATUSES,
                ended_at=t.ended_at,
                error=t.error,
                by_duty=t.id.startswith(DUTY_TASK_PREFIX),
                spec=t.spec,
            )
            for t in tasks
        ),
    )


def compaction_ended_since(since: datetime) -> bool:
    """A compaction task ended after `since` (its slot is free again)."""
    return Task.objects.filter(type=TaskType.COMPACT, ended_at__gt=since).exists()


def data_landed_since(since: datetime) -> bool:
    """A task other than a compaction succeeded after `since` on a dataSource
    with auto-compaction on: what it published may have made intervals eligible."""
    return (
        Task.objects.filter(
            ended_at__gt=since,
            status=TaskStatus.SUCCESS,
            datasource__in=CompactionConfig.objects.values("datasource"),
        )
        .exclude(type=TaskType.COMPACT)
        .exists()
    )


def active_compaction_tasks() -> int:
    """Compaction tasks queued or running, of every dataSource (they use the slots)."""
    return Task.objects.filter(type=TaskType.COMPACT, status__in=ACTIVE_STATUSES).count()


def total_task_slots() -> int:
    """The live workers' task slots (STRATA_TASK_SLOTS while none is registered)."""
    capacity = sum(w.capacity for w in live_workers())
    return capacity or int(settings.STRATA_TASK_SLOTS)


@dataclass(frozen=True)
class CompactionPlans:
    statuses: dict[str, list[IntervalStatus]]
    budget: int
    used: int
    last_run_at: datetime | None


def retry_base() -> timedelta:
    return timedelta(seconds=float(settings.STRATA_COMPACTION_PERIOD_SECONDS))


def compaction_plans_at(
    *, cluster: CompactionClusterConfig, now: datetime, datasource: str | None = None
) -> tuple[CompactionPlans, list[CompactionConfig]]:
    """The duty's decision at `now` under `cluster` (the row the duty's run holds
    locked), with the configs it was made from: every configured dataSource's
    intervals, the ones given a free slot marked `submit`."""
    configs = list(compaction_configs())
    plans, batch_bytes = {}, {}
    for config in configs:
        spec = config_spec(config)
        facts = compaction_facts(datasource=config.datasource, now=now)
        plans[config.datasource] = plan_datasource(spec, facts, now=now, retry_base=retry_base())
        if spec.segment_granularity:  # every interval a whole bucket: neighbours can join
            batch_bytes[config.datasource] = spec.input_segment_size_bytes
    used = active_compaction_tasks()
    budget = slot_budget(total_task_slots(), cluster.slot_ratio, cluster.max_slots)
    plans = allocate_slots(plans, used=used, budget=budget, batch_bytes=batch_bytes)
    if datasource is not None:
        plans = {ds: p for ds, p in plans.items() if ds == datasource}
    return CompactionPlans(plans, budget, used, cluster.last_run_at), configs


def compaction_plans(*, datasource: str | None = None) -> CompactionPlans:
    """Every configured dataSource's intervals with status and reason, as the
    duty would decide now (the intervals it would submit marked `submit`)."""
    cluster = compaction_cluster()
    return compaction_plans_at(cluster=cluster, now=timezone.now(), datasource=datasource)[0]
