"""Druid's compaction specs from the shared corpus (../shared/druid_specs), end to end.

Each spec file is used unchanged (the ingestion specs only get this run's input
root for the placeholder, as in tests/test_druid_tutorials.py), submitted
through the REST API and run by the real Celery worker on real Spark:

- the quickstart compaction tutorial (Druid docs: tutorial-compaction.md):
  wikiticker ingested at HOUR granularity with at most 1000 rows per segment
  (several segments in the busy hours), compacted keeping HOUR (one segment per
  hour), then compacted to DAY (one segment);
- the integration tests' compactions (ITCompactionTaskTest,
  ITCompactionSparseColumnTest) of the data their own ingestion specs load,
  including thetaSketch, quantilesDoublesSketch and HLLSketchBuild metrics.

After each compaction every visible row is compared with what was visible
before it (as a multiset, or per rolled-up key with its metric totals), read
back from the Parquet files through the timeline.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from datetime import UTC, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from metastore import selectors
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskStatus

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

CORPUS = Path(__file__).parents[2] / "shared" / "druid_specs"
PLACEHOLDER = "@INPUT_ROOT@"
EVERYTHING = Interval.parse("2000-01-01/2100-01-01")


@pytest.fixture
def corpus(strata_dirs):
    """load(name) -> the corpus spec `name`, reading the corpus data copied under
    this run's input root."""
    if not (CORPUS / "data" / "quickstart" / "tutorial").is_dir():
        pytest.skip(f"the shared Druid spec corpus is not at {CORPUS}")
    root = strata_dirs.input_root / "druid-corpus"
    for part in ("quickstart", "resources"):
        if not (root / part).exists():
            shutil.copytree(CORPUS / "data" / part, root / part)

    def load(name: str) -> dict:
        text = (CORPUS / f"{name}.json").read_text(encoding="utf-8")
        return json.loads(text.replace(PLACEHOLDER, json.dumps(str(root))[1:-1]))

    return load


def run(api_client, wait_for_task, spec: dict) -> Task:
    response = api_client.post("/api/v1/tasks", spec, format="json")
    assert response.status_code == 201, response.content
    task = wait_for_task(response.json()["task"])
    assert task.status == TaskStatus.SUCCESS, (task.error, task.report)
    return task


def visible_segments(datasource: str) -> dict[str, list[Interval]]:
    """Visible data segments (id -> the pieces of it that are visible)."""
    out: dict[str, list[Interval]] = {}
    for piece, ref in selectors.timeline_for(datasource=datasource).lookup(EVERYTHING):
        if not ref.tombstone:
            out.setdefault(ref.id, []).append(piece)
    return out


def visible_rows(datasource: str) -> list[dict]:
    rows = []
    for seg_id, pieces in visible_segments(datasource).items():
        seg = Segment.objects.get(id=seg_id)
        for row in pq.read_table(seg.location).to_pylist():
            t = row["__time"]
            t = t.astimezone(UTC) if t.tzinfo else t.replace(tzinfo=UTC)
            if any(p.start <= t < p.end for p in pieces):
                row["__time"] = t
                row["__segment"] = seg_id
                rows.append(row)
    return rows


def _multiset(rows: list[dict], columns: list[str]) -> Counter:
    return Counter(tuple(r.get(c) for c in columns) for r in rows)


def _chunks(datasource: str) -> Counter:
    """Visible data segments per (segment interval)."""
    return Counter(
        (s.start, s.end) for s in Segment.objects.filter(id__in=list(visible_segments(datasource)))
    )


WIKITICKER_DIMS = [
    "channel",
    "cityName",
    "comment",
    "countryIsoCode",
    "countryName",
    "isAnonymous",
    "isMinor",
    "isNew",
    "isRobot",
    "isUnpatrolled",
    "metroCode",
    "namespace",
    "page",
    "regionIsoCode",
    "regionName",
    "user",
    "added",
    "deleted",
    "delta",
]


def test_quickstart_compaction_tutorial(api_client, wait_for_task, corpus):
    ds = "compaction-tutorial"
    columns = ["__time", *WIKITICKER_DIMS]

    # "Load the initial data": 24 HOUR chunks, several segments in the busy hours.
    run(api_client, wait_for_task, corpus("qs-compaction-init-index"))
    before = visible_rows(ds)
    assert len(before) == 39244  # SELECT COUNT(*) FROM "compaction-tutorial"
    chunks = _chunks(ds)
    assert len(chunks) == 24 and sum(chunks.values()) > 24
    assert all(end - start == timedelta(hours=1) for start, end in chunks)
    rows_before = _multiset(before, columns)

    # "Compact the data": keep HOUR, one segment per hour, every row kept.
    task = run(api_client, wait_for_task, corpus("qs-compaction-keep-granularity"))
    after = visible_rows(ds)
    assert _multiset(after, columns) == rows_before
    assert sorted(_chunks(ds)) == sorted(chunks) and set(_chunks(ds).values()) == {1}
    assert {r["__segment"] for r in after} == set(
        Segment.objects.filter(created_by=task, tombstone=False).values_list("id", flat=True)
    )
    summary = task.report["compaction"]
    assert summary["segmentsIn"] == sum(chunks.values()) and summary["segmentsOut"] == 24
    assert summary["segmentGranularity"] == "HOUR"
    assert summary["rowsWritten"] == 39244

    # "Compact the data with new segment granularity": one DAY segment.
    task = run(api_client, wait_for_task, corpus("qs-compaction-day-granularity"))
    after = visible_rows(ds)
    assert _multiset(after, columns) == rows_before
    day = Interval.parse("2015-09-12/2015-09-13")
    assert _chunks(ds) == Counter({(day.start, day.end): 1})
    assert task.report["compaction"]["segmentGranularity"] == "DAY"
    (segment,) = Segment.objects.filter(created_by=task, tombstone=False)
    assert segment.compaction_state["granularitySpec"]["segmentGranularity"] == "DAY"

    # Compacting it again finds nothing to do and rewrites nothing.
    again = run(api_client, wait_for_task, corpus("qs-compaction-day-granularity"))
    assert again.report["compaction"]["nothingToCompact"] is True
    assert not Segment.objects.filter(created_by=again).exists()


# --- the integration tests' compactions (ITCompactionTaskTest) ---------------------------

WIKI_DAYS = ["2013-08-31", "2013-09-01"]
WIKI_SUMS = ["count", "added", "deleted", "delta"]


def _day(row: dict) -> str:
    return row["__time"].date().isoformat()


def sketch_estimates(rows: list[dict], key) -> dict:
    """Per key(row): the estimates of the union of the rows' sketches (theta and HLL
    distinct counts, the quantiles sketch's n, min, median and max), computed by
    Spark's DataSketches functions in this process, apart from the product's code."""
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    data = [
        (str(key(r)), r["thetaSketch"], r["HLLSketchBuild"], r["quantilesDoublesSketch"])
        for r in rows
    ]
    df = get_spark().createDataFrame(data, "key string, theta binary, hll binary, kll binary")
    merged = df.groupBy("key").agg(
        F.theta_union_agg("theta").alias("theta"),
        F.hll_union_agg("hll", True).alias("hll"),
        F.kll_merge_agg_double("kll").alias("kll"),
    )
    out = merged.select(
        "key",
        F.theta_sketch_estimate("theta").alias("theta"),
        F.hll_sketch_estimate("hll").alias("hll"),
        F.kll_sketch_get_n_double("kll").alias("n"),
        F.kll_sketch_get_quantile_double("kll", F.lit(0.0)).alias("min"),
        F.kll_sketch_get_quantile_double("kll", F.lit(0.5)).alias("median"),
        F.kll_sketch_get_quantile_double("kll", F.lit(1.0)).alias("max"),
    ).collect()
    return {r["key"]: {k: r[k] for k in ("theta", "hll", "n", "min", "median", "max")} for r in out}


def wiki_totals(rows: list[dict]) -> dict:
    totals: dict[str, dict[str, float]] = {}
    for r in rows:
        day = totals.setdefault(_day(r), dict.fromkeys(WIKI_SUMS, 0.0))
        for m in WIKI_SUMS:
            day[m] += r[m]
    return totals


def test_integration_compaction_specs_keep_every_total_and_sketch(
    api_client, wait_for_task, corpus
):
    ds = "wikipedia_index_test"
    run(api_client, wait_for_task, corpus("it-wikipedia-index-task"))
    before = visible_rows(ds)
    totals = wiki_totals(before)
    assert sorted(totals) == WIKI_DAYS
    users = {d: len({r["user"] for r in before if _day(r) == d}) for d in WIKI_DAYS}
    estimates = sketch_estimates(before, _day)
    for d in WIKI_DAYS:  # small cardinalities: the sketches are exact
        assert estimates[d]["theta"] == users[d] and estimates[d]["hll"] == users[d]
    ingested = _chunks(ds)
    assert sum(ingested.values()) > len(ingested) == 2  # maxRowsPerSegment 3

    def check(task: Task, granularity: str, chunks: int) -> list[dict]:
        after = visible_rows(ds)
        assert wiki_totals(after) == totals
        assert sketch_estimates(after, _day) == estimates
        assert set(_chunks(ds).values()) == {1} and len(_chunks(ds)) == chunks
        summary = task.report["compaction"]
        assert summary["segmentGranularity"] == granularity
        for seg in Segment.objects.filter(created_by=task, tombstone=False):
            # context.storeCompactionState
            assert seg.compaction_state["granularitySpec"]["segmentGranularity"] == granularity
        return after

    # wikipedia_compaction_task.json: keep DAY, one segment per day.
    task = run(api_client, wait_for_task, corpus("it-compaction-task"))
    check(task, "DAY", 2)
    assert task.report["compaction"]["segmentsIn"] == sum(ingested.values())

    # wikipedia_compaction_task_parallel.json: hashed, guaranteed rollup.
    task = run(api_client, wait_for_task, corpus("it-compaction-task-parallel"))
    check(task, "DAY", 2)
    assert {s.shard_spec["type"] for s in Segment.objects.filter(created_by=task)} == {"hashed"}

    # wikipedia_compaction_task_with_granularity_spec.json: MONTH (the interval is
    # not aligned with MONTH: allowNonAlignedInterval), August and September.
    task = run(api_client, wait_for_task, corpus("it-compaction-granularity-spec"))
    check(task, "MONTH", 2)
    assert sorted(
        str(Interval(s.start, s.end)) for s in Segment.objects.filter(created_by=task)
    ) == [
        "2013-08-01T00:00:00.000Z/2013-09-01T00:00:00.000Z",
        "2013-09-01T00:00:00.000Z/2013-10-01T00:00:00.000Z",
    ]

    # wikipedia_compaction_task_with_segment_granularity.json: the same in the legacy
    # form (top-level segmentGranularity): already in that shape, nothing to rewrite.
    task = run(api_client, wait_for_task, corpus("it-compaction-segment-granularity"))
    assert task.report["compaction"]["nothingToCompact"] is True
    assert not Segment.objects.filter(created_by=task).exists()
    check_after = visible_rows(ds)
    assert wiki_totals(check_after) == totals


def test_integration_sparse_column_compaction_with_dimension_order(
    api_client, wait_for_task, corpus
):
    """ITCompactionSparseColumnTest: sparse rows in several HOUR segments compacted
    with a dimension order and one hashed shard roll up across the old segments."""
    ds = "sparse_column_test"
    run(api_client, wait_for_task, corpus("itex-sparse-column-index"))
    assert sum(_chunks(ds).values()) > 1
    task = run(api_client, wait_for_task, corpus("itex-sparse-column-compaction-dims"))
    (segment,) = Segment.objects.filter(created_by=task, tombstone=False)
    names = [f.name for f in pq.read_schema(segment.location)]
    dims = [n for n in names if n.startswith("dim")]
    assert dims == ["dimB", "dimA", "dimC", "dimD", "dimE", "dimF"][: len(dims)]
    rows = sorted(
        (
            (r["dimB"], r["dimA"], r.get("dimC"), r["count"], r["sum_metA"])
            for r in visible_rows(ds)
        ),
        key=lambda row: tuple("" if v is None else str(v) for v in row),
    )
    # The expected rows of ITCompactionSparseColumnTest (the three H/X rows were in
    # different segments before).
    assert rows == [
        ("F", "C", None, 1, 1),
        ("J", "C", None, 1, 1),
        ("R", "J", None, 1, 1),
        ("S", "Z", None, 1, 1),
        ("T", "H", None, 1, 1),
        ("X", None, "A", 1, 1),
        ("X", "H", None, 3, 3),
        ("Z", "H", None, 1, 1),
    ]
