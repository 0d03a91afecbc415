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
from dataclasses import dataclass, replace
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
from metastore.intervals import Interval
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
    plans, batch_bytes = {}, {}
    for config in configs:
        spec = reads.config_spec(config)
        facts = reads.compaction_facts(datasource=config.datasource, now=now)
        plans[config.datasource] = plan_datasource(spec, facts, now=now, retry_base=retry_base())
        if spec.segment_granularity:  # every interval a whole bucket: neighbours can join
            batch_bytes[config.datasource] = spec.input_segment_size_bytes
    used = reads.active_compaction_tasks()
    budget = slot_budget(reads.total_task_slots(), cluster.slot_ratio, cluster.max_slots)
    plans = allocate_slots(plans, used=used, budget=budget, batch_bytes=batch_bytes)
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
    """One run: submit a `compact` task for each interval given a slot (one for
    an interval and the neighbours it takes along). Returns the plans it acted
    on (submitted intervals carry their new task id)."""
    now = now or timezone.now()
    with transaction.atomic():
        cluster = services.compaction_cluster_for_update()
        plans, configs = _plans(cluster, now, None)
        by_name = {c.datasource: c for c in configs}
        out = {
            ds: _submit_datasource(ds, reads.config_spec(by_name[ds]), statuses, now)
            for ds, statuses in plans.statuses.items()
        }
        services.compaction_run_mark(cluster=cluster, at=now)
    return CompactionPlans(out, plans.budget, plans.used, now)


def _submit_datasource(ds, spec, statuses: list[IntervalStatus], now) -> list[IntervalStatus]:
    """Submit the tasks of one dataSource's intervals marked `submit`: one per
    task interval; each interval's status says which task took it."""
    submitted: dict[str, str | Exception] = {}  # task interval -> task id, or the refusal
    done = []
    for st in statuses:
        if not st.submit:
            done.append(st)
            continue
        interval = st.task_interval or st.interval
        if str(interval) not in submitted:
            submitted[str(interval)] = _submit(ds, spec, interval, now)
        outcome = submitted[str(interval)]
        if isinstance(outcome, Exception):
            done.append(_refused(st, outcome))
            continue
        along = f" (with its neighbours, {interval})" if st.task_interval else ""
        done.append(
            replace(
                st,
                status="running",
                code="TASK_RUNNING",
                reason=f"submitted compaction task {outcome}{along}; was: {st.reason}",
                task_id=outcome,
            )
        )
    return done


def _submit(ds: str, spec, interval: Interval, now: datetime) -> str | Exception:
    """Submit the compaction of `interval`: the task id, or why it was refused."""
    task_id = duty_task_id(ds, now)
    try:
        with transaction.atomic():
            services.task_submit(spec=compaction_task_spec(spec, interval, task_id))
    except (SpecError, services.ServiceError) as exc:
        log.warning("auto-compaction of %s %s refused: %s", ds, interval, exc)
        return exc
    log.info("auto-compaction of %s %s: task %s", ds, interval, task_id)
    return task_id


def _refused(st: IntervalStatus, exc: Exception) -> IntervalStatus:
    return IntervalStatus(
        st.interval,
        "skipped",
        "INVALID_JOB",
        f"the compaction task was refused: {exc}",
        st.segments,
        st.bytes,
    )
