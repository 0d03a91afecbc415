"""Issue 22, defect B: concurrent appends at two granularities both succeed.

An HOUR append that names its interval locks its hour before its Spark job.
While the job runs, a DAY append locks the whole day and allocates (and
publishes) it at the EPOCH version. When the hourly append then allocates, its
rows belong in the DAY chunk now visible over its hour, which its hour lock does
not cover: it must plan and lock again, then land there. Nothing lost, nothing
duplicated, and neither task fails."""

from __future__ import annotations

import pytest
from test_compaction import events, ingest_spec, visible_rows

from metastore import services
from metastore.allocation_rules import EPOCH_VERSION
from metastore.intervals import Interval
from metastore.models import Segment, TaskStatus
from workers import runner

pytestmark = pytest.mark.spark

DAY = "2024-06-01/2024-06-02"
HOUR = "2024-06-01T05:00:00Z/2024-06-01T06:00:00Z"


def append_spec(rows, *, interval: str, segment: str) -> dict:
    spec = ingest_spec("mixed", rows, intervals=[interval], segment=segment, append=True)
    spec["context"] = {"useConcurrentLocks": True}
    return spec


def test_hour_append_whose_hour_a_day_append_took_meanwhile_locks_again_and_lands(
    run_spec, monkeypatch
):
    hourly = events(["2024-06-01"], hours=[5], per_hour=4, page="hourly", added=10)
    daily = events(["2024-06-01"], hours=[2, 5, 17], per_hour=2, page="daily", added=100)
    hour_task = services.task_submit(spec=append_spec(hourly, interval=HOUR, segment="HOUR"))
    assert services.task_claim(task_id=hour_task.id, worker="pytest")

    real_ingest = runner.run_ingest
    day_tasks = []

    def ingest_while_a_day_append_runs(*args, **kwargs):
        # The hourly append holds its hour lock and its job starts: the DAY append
        # runs to its end first (its own job goes straight to Spark).
        monkeypatch.setattr(runner, "run_ingest", real_ingest)
        day_tasks.append(run_spec(append_spec(daily, interval=DAY, segment="DAY")))
        return real_ingest(*args, **kwargs)

    monkeypatch.setattr(runner, "run_ingest", ingest_while_a_day_append_runs)
    runner.run_task(hour_task.id)

    (day_task,) = day_tasks
    assert day_task.status == TaskStatus.SUCCESS, day_task.error
    (day_segment,) = Segment.objects.filter(created_by=day_task)
    assert (day_segment.interval, day_segment.version) == (Interval.parse(DAY), EPOCH_VERSION)
    hour_task.refresh_from_db()
    assert hour_task.status == TaskStatus.SUCCESS, hour_task.error
    # The hourly rows went into the DAY chunk visible over their hour.
    (hour_segment,) = Segment.objects.filter(created_by=hour_task)
    assert (hour_segment.interval, hour_segment.version) == (Interval.parse(DAY), EPOCH_VERSION)
    after = visible_rows("mixed", DAY)
    assert int(after["count"].sum()) == len(hourly) + len(daily)
    assert int(after["added"].sum()) == sum(e["added"] for e in hourly + daily)
