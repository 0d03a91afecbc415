"""The kill duty (Druid's KillUnusedSegments, `druid.coordinator.kill.*`): per
dataSource, one kill task for its oldest eligible unused segments, submitted
through the services and run by a worker like any kill task."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone

from metastore import selectors, services
from metastore.duties.kill import KillConfig, KillPlan, kill_slot_budget, plan_kill
from metastore.duties.kill_settings import kill_config
from metastore.last_runs import duty_run_mark
from metastore.models import ACTIVE_STATUSES, Task, TaskType
from metastore.selectors import compaction as compaction_selectors
from metastore.selectors import retention as retention_selectors

log = logging.getLogger(__name__)

DUTY_CONTEXT_KEY = "strataDuty"


def kill_plan(*, datasource: str, config: KillConfig, now: datetime) -> KillPlan | None:
    horizon = retention_selectors.history_horizon(datasource=datasource, now=now)
    # Unused since before the oldest retained commit: no retained as_of shows it.
    history_starts = horizon.at if horizon.at is not None else now
    retain_end = None if config.ignore_duration_to_retain else config.duration_to_retain.before(now)
    return plan_kill(
        config=config,
        now=now,
        unused=retention_selectors.unused_segments(datasource=datasource, ended_by=retain_end),
        history_starts=history_starts,
        locked=retention_selectors.locked_intervals(datasource=datasource),
    )


def kill_spec(datasource: str, plan: KillPlan) -> dict:
    return {
        "type": "kill",
        "dataSource": datasource,
        "interval": str(plan.interval),
        "limit": plan.limit,
        # To the microsecond: the planned cutoff itself. Rounded down to Druid's
        # milliseconds it could fall before the segments it planned (marked in the
        # same millisecond), and the task would kill none of them.
        "maxUsedStatusLastUpdatedTime": _iso_micros(plan.max_used_status_last_updated),
        "context": {DUTY_CONTEXT_KEY: "kill"},
    }


def _duty_kills_running() -> set[str]:
    """The dataSources with an active kill task of this duty."""
    return set(
        Task.objects.filter(
            type=TaskType.KILL, status__in=ACTIVE_STATUSES, spec__context__strataDuty="kill"
        ).values_list("datasource", flat=True)
    )


def run_kill_duty(*, now: datetime | None = None, config: KillConfig | None = None) -> dict:
    """Submit one kill task per dataSource with eligible unused segments (none
    while the duty's previous kill task of that dataSource has not ended, none
    for a dataSource outside killDataSourceWhitelist, and no more active at
    once than the kill slot budget)."""
    config = config or kill_config()
    if not config.on:
        return {}
    now = now or timezone.now()
    report: dict = {}
    running = _duty_kills_running()
    free = kill_slot_budget(config, compaction_selectors.total_task_slots()) - len(running)
    for name in selectors.datasource_names():
        if not config.kills(name):
            continue
        if name in running:
            report[name] = {"skipped": "a kill task of this duty is still running"}
            continue
        plan = kill_plan(datasource=name, config=config, now=now)
        if plan is None:
            continue
        if free <= 0:
            report[name] = {
                "skipped": "no kill task slot free (killTaskSlotRatio, maxKillTaskSlots)"
            }
            continue
        free -= 1
        task = services.task_submit(spec=kill_spec(name, plan))
        report[name] = {"task": task.id, "segments": len(plan.segment_ids)}
        log.info("kill duty: %s kills up to %d segments of %s", task.id, plan.limit, name)
    tasks = [r for r in report.values() if "task" in r]
    duty_run_mark(
        "kill",
        summary=f"submitted {len(tasks)} kill task(s) for "
        f"{sum(r['segments'] for r in tasks)} unused segment(s)",
        redis_url=settings.REDIS_URL,
    )
    return report


def _iso_micros(instant) -> str:
    """`instant` as ISO-8601 UTC with microseconds (the kill spec's parser reads them)."""
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
