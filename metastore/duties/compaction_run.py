"""The auto-compaction duty's run: read the facts, decide (metastore.duties.compaction),
submit through the services.

`compaction_plans()` is the read-only view the status API and the console show;
`compaction_duty_run()` is one run of the duty (the beat process calls it every
STRATA_COMPACTION_PERIOD_SECONDS, see workers/compaction_duty.py). A run holds
the cluster config row from its first read to its last submission, so a config
deleted meanwhile waits for the run and the next run sees it gone, and two runs
never share out the same free slot twice.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from metastore import services
from metastore.compaction_state import compaction_task_spec
from metastore.druid.errors import SpecError
from metastore.duties.compaction import (
    IntervalStatus,
    allocate_slots,
    plan_datasource,
    slot_budget,
)
from metastore.models import CompactionClusterConfig
from metastore.selectors import compaction as reads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionPlans:
    statuses: dict[str, list[IntervalStatus]]
    budget: int
    used: int
    last_run_at: datetime | None


def retry_base() -> timedelta:
    return timedelta(seconds=float(settings.STRATA_COMPACTION_PERIOD_SECONDS))


def _plans(cluster: CompactionClusterConfig, now: datetime, datasource: str | None):
    configs = list(reads.compaction_configs())
    plans = {}
    for config in configs:
        facts = reads.compaction_facts(datasource=config.datasource, now=now)
        plans[config.datasource] = plan_datasource(
            reads.config_spec(config), facts, now=now, retry_base=retry_base()
        )
    used = reads.active_compaction_tasks()
    budget = slot_budget(reads.total_task_slots(), cluster.slot_ratio, cluster.max_slots)
    plans = allocate_slots(plans, used=used, budget=budget)
    if datasource is not None:
        plans = {ds: p for ds, p in plans.items() if ds == datasource}
    return CompactionPlans(plans, budget, used, cluster.last_run_at), configs


def compaction_plans(*, datasource: str | None = None) -> CompactionPlans:
    """Every configured dataSource's intervals with status and reason, as the
    duty would decide now (the intervals it would submit marked `submit`)."""
    return _plans(reads.compaction_cluster(), timezone.now(), datasource)[0]


def duty_task_id(datasource: str, now: datetime) -> str:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f"{reads.DUTY_TASK_PREFIX}compact_{datasource}_{stamp}_{secrets.token_hex(4)}"


def compaction_duty_run(*, now: datetime | None = None) -> CompactionPlans:
    """One run: submit a `compact` task for each interval given a slot. Returns
    the plans it acted on (submitted intervals carry their new task id)."""
    now = now or timezone.now()
    with transaction.atomic():
        cluster = services.compaction_cluster_for_update()
        plans, configs = _plans(cluster, now, None)
        by_name = {c.datasource: c for c in configs}
        out: dict[str, list[IntervalStatus]] = {}
        for ds, statuses in plans.statuses.items():
            spec = reads.config_spec(by_name[ds])
            done = []
            for st in statuses:
                if st.submit:
                    task_id = duty_task_id(ds, now)
                    try:
                        with transaction.atomic():
                            services.task_submit(
                                spec=compaction_task_spec(spec, st.interval, task_id)
                            )
                    except (SpecError, services.ServiceError) as exc:
                        log.warning("auto-compaction of %s %s refused: %s", ds, st.interval, exc)
                        done.append(_refused(st, exc))
                        continue
                    st = IntervalStatus(
                        st.interval,
                        "running",
                        "TASK_RUNNING",
                        f"submitted compaction task {task_id}; was: {st.reason}",
                        st.segments,
                        st.bytes,
                        task_id=task_id,
                        submit=True,
                    )
                    log.info("auto-compaction of %s %s: task %s", ds, st.interval, task_id)
                done.append(st)
            out[ds] = done
        services.compaction_run_mark(cluster=cluster, at=now)
    return CompactionPlans(out, plans.budget, plans.used, now)


def _refused(st: IntervalStatus, exc: Exception) -> IntervalStatus:
    return IntervalStatus(
        st.interval,
        "skipped",
        "INVALID_JOB",
        f"the compaction task was refused: {exc}",
        st.segments,
        st.bytes,
    )
