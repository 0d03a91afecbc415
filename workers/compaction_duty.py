"""The auto-compaction duty, run by the beat process every
STRATA_COMPACTION_PERIOD_SECONDS (`metastore.services.compaction_run` decides and
submits; this module only schedules it and logs what it did).

It runs in a thread of the beat process, like the task reaper, not as a queued
Celery task: a message for it would wait behind the very tasks it schedules
whenever every worker slot is busy (Druid #14973, no new compaction while one
runs), and the web process never runs it.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

from metastore.last_runs import duty_run_mark
from metastore.services.compaction_run import compaction_duty_run

log = logging.getLogger(__name__)


def run_once() -> dict[str, list[str]]:
    """One run of the duty: {dataSource: ids of the compaction tasks it submitted}."""
    plans = compaction_duty_run()
    submitted = {  # a task that took neighbouring intervals along is named once
        ds: list(dict.fromkeys(st.task_id for st in statuses if st.submit and st.task_id))
        for ds, statuses in plans.statuses.items()
    }
    total = sum(len(ids) for ids in submitted.values())
    statuses = [st for sts in plans.statuses.values() for st in sts]
    awaiting = sum(1 for st in statuses if st.status == "awaiting")
    skipped = sum(1 for st in statuses if st.status == "skipped")
    duty_run_mark(
        "compaction",
        summary=f"submitted {total} compaction task(s) over {len(plans.statuses)} "
        f"dataSource(s) ({plans.used} of {plans.budget} slots were used); "
        f"{awaiting} interval(s) awaiting, {skipped} skipped",
        redis_url=settings.REDIS_URL,
    )
    if total:
        log.info(
            "auto-compaction submitted %d task(s) (%d of %d slots were used): %s",
            total,
            plans.used,
            plans.budget,
            submitted,
        )
    return submitted


# How often the thread looks for a compaction slot that was freed between runs.
SLOT_POLL_SECONDS = 2.0


class CompactionDutyThread:
    """Runs `run_once` every STRATA_COMPACTION_PERIOD_SECONDS (0 or less: never),
    and also as soon as a compaction task ends between runs (its slot goes to the
    next awaiting interval at once, as Druid's compaction supervisors do) or new
    data lands in a dataSource with auto-compaction on (an interval it made
    eligible is submitted while a slot is free), instead of a period later."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="strata-compaction", daemon=True)

    def _run(self) -> None:
        from django.db import connection
        from django.utils import timezone

        from metastore.selectors.compaction import compaction_ended_since, data_landed_since

        period = float(settings.STRATA_COMPACTION_PERIOD_SECONDS)
        if period <= 0:
            log.info("auto-compaction duty off (STRATA_COMPACTION_PERIOD_SECONDS=%s)", period)
            return
        last_run, last_wall = time.monotonic(), timezone.now()
        try:
            while not self.stop.wait(min(period, SLOT_POLL_SECONDS)):
                try:
                    due = time.monotonic() - last_run >= period
                    if due or compaction_ended_since(last_wall) or data_landed_since(last_wall):
                        last_run, last_wall = time.monotonic(), timezone.now()
                        run_once()
                except Exception:  # the database is away: the next round tries again
                    log.exception("auto-compaction duty run failed")
                    connection.close()
        finally:
            connection.close()
