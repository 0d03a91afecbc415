"""An append under concurrent locks over several days must not preempt a compaction
of one of them: its APPEND locks are per time chunk, each inside a REPLACE lock,
never one lock merged over days it would then conflict with (SPEC §4: APPEND and
REPLACE coexist when the REPLACE interval contains the APPEND interval). Auto-
compaction under a stream of multi-day late appends otherwise never finishes."""

from __future__ import annotations

import pytest
from django.db import transaction

from metastore import locking, services
from metastore.intervals import Interval
from metastore.models import TaskLock
from workers.steps import lock_plan

pytestmark = pytest.mark.django_db

DAYS = [Interval.parse(f"2024-01-0{d}/2024-01-0{d + 1}") for d in (1, 2, 3)]


def test_an_append_locks_each_day_and_leaves_a_compactions_replace_lock_alone(claimed_task):
    with transaction.atomic():
        compaction = services.task_submit(
            spec={
                "type": "compact",
                "dataSource": "wiki",
                "ioConfig": {
                    "type": "compact",
                    "inputSpec": {"type": "interval", "interval": str(DAYS[1])},
                },
                "context": {"useConcurrentLocks": True},
            }
        )
        assert services.task_claim(task_id=compaction.id, worker="pytest")
    replace = services.lock_acquire(task=compaction, interval=DAYS[1], lock_type=locking.REPLACE)
    append = claimed_task("wiki", context={"useConcurrentLocks": True})
    plan = lock_plan("wiki", DAYS, "DAY", append=True)
    assert plan == DAYS
    services.locks_acquire(task=append, intervals=plan, lock_type=locking.APPEND, timeout_ms=1000)
    assert not TaskLock.objects.get(id=replace.id).revoked
    assert TaskLock.objects.filter(task=append, type=locking.APPEND).count() == 3


def test_an_overwrite_still_locks_touching_days_as_one_interval():
    assert lock_plan("wiki", DAYS, "DAY", append=False) == [Interval.parse("2024-01-01/2024-01-04")]
