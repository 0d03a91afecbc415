"""The history-retention duty: overshadowed segments no retained commit shows any
more are marked unused (Druid's MarkOvershadowedSegmentsAsUnused, after the
time-travel window STRATA_HISTORY_RETENTION)."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings

from metastore import selectors, services
from metastore.last_runs import duty_run_mark

log = logging.getLogger(__name__)


def run_history_duty(*, now: datetime | None = None) -> dict:
    report: dict = {}
    for name in selectors.datasource_names():
        try:
            entry = services.history_apply(datasource=name, now=now)
        except Exception:
            log.exception("history retention of %s failed", name)
            report[name] = {"error": True}
            continue
        report[name] = {
            "markedUnused": len(entry.removed) if entry else 0,
            "commit": entry.seq if entry else None,
        }
    marked = sum(r.get("markedUnused", 0) for r in report.values())
    duty_run_mark(
        "history",
        summary=f"marked {marked} overshadowed segment(s) unused in {len(report)} dataSource(s)",
        redis_url=settings.REDIS_URL,
    )
    return report
