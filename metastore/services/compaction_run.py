"""The auto-compaction duty's run: read the facts and decide
(`selectors.compaction.compaction_plans_at`, over the pure rules of
`metastore.duties.compaction`), then submit through the services.

`compaction_duty_run()` is one run of the duty (the beat process calls it every
STRATA_COMPACTION_PERIOD_SECONDS, see workers/compaction_duty.py); the read-only
view the status API and the console show is `selectors.compaction.compaction_plans()`.
A run holds the cluster config row from its first read to its last submission,
so a config deleted meanwhile waits for the run and the next run sees it gone,
and two runs never share out the same free slot twice.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import replace
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from metastore.compaction_state import compaction_task_spec
from metastore.druid.errors import SpecError
from metastore.duties.compaction import IntervalStatus
from metastore.intervals import Interval
from metastore.selectors import compaction as reads
from metastore.selectors.compaction import CompactionPlans
from metastore.services._common import ServiceError
from metastore.services.compaction_config import compaction_cluster_for_update, compaction_run_mark
from metastore.services.tasks import task_submit

log = logging.getLogger(__name__)


def duty_task_id(datasource: str, now: datetime) -> str:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return f"{reads.DUTY_TASK_PREFIX}compact_{datasource}_{stamp}_{secrets.token_hex(4)}"


def compaction_duty_run(*, now: datetime | None = None) -> CompactionPlans:
    """One run: submit a `compact` task for each interval given a slot (one for
    an interval and the neighbours it takes along). Returns the plans it acted
    on (submitted intervals carry their new task id)."""
    now = now or timezone.now()
    with transaction.atomic():
        cluster = compaction_cluster_for_update()
        plans, configs = reads.compaction_plans_at(cluster=cluster, now=now)
        by_name = {c.datasource: c for c in configs}
        out = {
            ds: _submit_datasource(ds, reads.config_spec(by_name[ds]), statuses, now)
            for ds, statuses in plans.statuses.items()
        }
        compaction_run_mark(cluster=cluster, at=now)
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
            task_submit(spec=compaction_task_spec(spec, interval, task_id))
    except (SpecError, ServiceError) as exc:
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
