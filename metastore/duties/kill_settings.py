"""The kill duty's configuration from the STRATA_KILL_* settings, as Druid's
`druid.coordinator.kill.*` and dynamic kill fields (read by the duty and by
the Coordinator dynamic config endpoint)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django.conf import settings

from metastore.duties.kill import KillConfig
from metastore.duties.periods import Period


def kill_datasources(text: str) -> tuple[str, ...]:
    """Druid's killDataSourceWhitelist: comma-separated names or a JSON array."""
    text = (text or "").strip()
    names = json.loads(text) if text.startswith("[") else text.split(",")
    return tuple(sorted({str(n).strip() for n in names if str(n).strip()}))


def kill_config() -> KillConfig:
    """The STRATA_KILL_* settings as Druid's kill configuration."""
    max_interval = Period.parse(settings.STRATA_KILL_MAX_INTERVAL)
    unlimited = max_interval.add_to(datetime(2000, 1, 1, tzinfo=UTC)) == datetime(
        2000, 1, 1, tzinfo=UTC
    )
    return KillConfig(
        on=settings.STRATA_KILL_ON,
        duration_to_retain=Period.parse(settings.STRATA_KILL_DURATION_TO_RETAIN),
        ignore_duration_to_retain=settings.STRATA_KILL_IGNORE_DURATION_TO_RETAIN,
        buffer_period=Period.parse(settings.STRATA_KILL_BUFFER_PERIOD),
        max_segments=settings.STRATA_KILL_MAX_SEGMENTS,
        max_interval=None if unlimited else max_interval,
        datasources=kill_datasources(settings.STRATA_KILL_DATASOURCES),
        task_slot_ratio=settings.STRATA_KILL_TASK_SLOT_RATIO,
        max_task_slots=settings.STRATA_KILL_MAX_TASK_SLOTS,
    )
