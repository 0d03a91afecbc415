"""The retention-rules duty: every dataSource's rules, each run (Druid's RunRules)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings

from metastore import selectors, services
from metastore.last_runs import duty_run_mark

log = logging.getLogger(__name__)


def run_retention_duty(*, now: datetime | None = None) -> dict:
    """Apply the rules of every dataSource; returns what each dropped (commit seq,
    segment count) and how many used segments no rule matched."""
    report: dict = {}
    for name in selectors.datasource_names():
        try:
            run = services.retention_apply(datasource=name, now=now)
        except Exception:  # one dataSource's failure must not stop the others
            log.exception("retention rules of %s failed", name)
            report[name] = {"error": True}
            continue
        report[name] = {
            "dropped": len(run.plan.drops),
            "commit": run.entry.seq if run.entry else None,
            "unmatched": len(run.plan.unmatched),
        }
        if run.plan.unmatched:
            log.warning(
                "Unable to find matching rules for %d segments of %s: left alone",
                len(run.plan.unmatched),
                name,
            )
    dropped = sum(r.get("dropped", 0) for r in report.values())
    failed = [n for n, r in report.items() if r.get("error")]
    duty_run_mark(
        "retention",
        summary=f"applied the rules of {len(report)} dataSource(s): {dropped} segment(s) "
        f"dropped" + (f"; failed for {', '.join(failed)}" if failed else ""),
        redis_url=settings.REDIS_URL,
    )
    return report
