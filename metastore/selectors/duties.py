"""The overview's panel of the Coordinator's duties: for compaction, retention,
history and kill, when each last ran, what it did, and when it runs next (or
that it is off), from the records the duties leave (`metastore.last_runs`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from metastore.last_runs import DUTIES, duty_runs

LABELS = {
    "compaction": "Auto-compaction",
    "retention": "Retention rules",
    "history": "History retention",
    "kill": "Kill",
}


@dataclass(frozen=True)
class DutyRun:
    name: str
    label: str
    every_seconds: float | None  # None: the duty is off
    last_at: datetime | None
    did: str
    next_at: datetime | None


def _periods() -> dict[str, float | None]:
    compaction = float(settings.STRATA_COMPACTION_PERIOD_SECONDS)
    return {
        "compaction": compaction if compaction > 0 else None,
        "retention": float(settings.STRATA_RETENTION_SECONDS),
        "history": float(settings.STRATA_HISTORY_SECONDS),
        "kill": float(settings.STRATA_KILL_PERIOD_SECONDS) if settings.STRATA_KILL_ON else None,
    }


def duties_glance(*, now: datetime) -> tuple[list[DutyRun], str | None]:
    """Each duty's last run and next run; the second item says why the records
    could not be read (Redis away), in which case the runs are unknown."""
    try:
        runs, problem = duty_runs(redis_url=settings.REDIS_URL), None
    except Exception as exc:  # Redis away: said so, not a 500
        runs, problem = dict.fromkeys(DUTIES), f"Redis unreachable: {exc.__class__.__name__}"
    periods = _periods()
    out = []
    for name in DUTIES:
        every, last = periods[name], runs.get(name)
        at, did = last if last else (None, "")
        next_at = None
        if every is not None:
            next_at = at + timedelta(seconds=every) if at else now
        out.append(DutyRun(name, LABELS[name], every, at, did, next_at))
    return out, problem
