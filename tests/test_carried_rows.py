"""Issue 22, defect A: an append carried onto a replace's finer chunks claims only
the rows it shows there. A concurrent-lock compaction of a DAY into HOUR segments
runs while a DAY append into that day commits; the compaction's publish carries
the append onto each of its HOUR chunks (a copy sharing the file, read only
inside its hour). Every visible segment's num_rows and size must be true: the
console, sys.segments, the Coordinator API and auto-compaction all read them."""

from __future__ import annotations

import os
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_compaction import compact_spec, events, ingest_spec, visible_rows

from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import Segment, TaskStatus
from workers import runner

pytestmark = pytest.mark.spark

DAY = "2024-04-01/2024-04-02"


def assert_every_visible_segment_is_true(datasource: str, interval: str) -> None:
    """num_rows of each visible segment = the rows read from it (its file inside
    its interval); a copy's size is its share of the file it reads."""
    after = visible_rows(datasource, interval)
    shown = after.groupby("__segment").size().to_dict()
    timeline = selectors.timeline_for(datasource=datasource)
    ids = {ref.id for _, ref in timeline.lookup(Interval.parse(interval)) if not ref.tombstone}
    for seg in Segment.objects.filter(id__in=ids):
        assert seg.num_rows == shown[seg.id], (seg.id, seg.num_rows, shown[seg.id])
        whole = pq.read_metadata(seg.location).num_rows
        file_size = os.path.getsize(seg.location)
        assert seg.size_bytes == round(file_size * seg.num_rows / whole), seg.id
    assert sum(s.num_rows for s in Segment.objects.filter(id__in=ids)) == len(after)


def test_day_append_carried_onto_hour_compaction_claims_only_its_rows_per_hour(
    run_spec, monkeypatch
):
    base = run_spec(ingest_spec("carried", events(["2024-04-01"]), intervals=[DAY]))
    assert base.status == TaskStatus.SUCCESS, base.error
    compaction = services.task_submit(
        spec=compact_spec(
            "carried",
            DAY,
            granularitySpec={"segmentGranularity": "HOUR"},
            context={"useConcurrentLocks": True},
        )
    )
    assert services.task_claim(task_id=compaction.id, worker="pytest")
    # The compaction's REPLACE lock is granted first, as its runner would take it.
    services.lock_acquire(task=compaction, interval=Interval.parse(DAY), lock_type="REPLACE")

    # A DAY append, rows in four of the day's hours, commits while the compaction runs.
    extra = events(["2024-04-01"], hours=[0, 3, 6, 21], per_hour=2, page="late", added=1000)
    appended = ingest_spec("carried", extra, intervals=[DAY], append=True)
    appended["context"] = {"useConcurrentLocks": True}
    append = run_spec(appended)
    assert append.status == TaskStatus.SUCCESS, append.error
    (append_segment,) = Segment.objects.filter(created_by=append)
    assert append_segment.num_rows == 4 * 2

    runner.run_task(compaction.id)
    compaction.refresh_from_db()
    assert compaction.status == TaskStatus.SUCCESS, compaction.error

    copies = Segment.objects.filter(upgraded_from=append_segment.id)
    # One copy per HOUR chunk of the compaction holding appended rows (none where it shows none).
    assert copies.count() == 4
    assert sorted(c.num_rows for c in copies) == [2, 2, 2, 2]
    assert sum(c.size_bytes for c in copies) == pytest.approx(append_segment.size_bytes, abs=4)
    after = visible_rows("carried", DAY)
    assert int(after["count"].sum()) == len(events(["2024-04-01"])) + len(extra)
    assert_every_visible_segment_is_true("carried", DAY)


def test_append_publishing_after_an_hour_replace_carries_true_figures_per_hour(
    transactional_db, tmp_path
):
    """The other path: the DAY append was allocated before the HOUR replace
    published, and publishes last; its publish carries it onto the replace's
    HOUR chunks over it. Each copy claims the rows of the shared file inside its
    hour and that share of the file's bytes; an hour with none gets no copy."""
    from test_lockbox import task

    day = Interval.parse("2024-01-01/2024-01-02")
    replace = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=replace, interval=day, lock_type="REPLACE")
    append = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=append, interval=day, lock_type="APPEND")
    alloc = services.segments_allocate(task=append, interval=day, count=1, append=True)

    hours = [
        Interval(day.start + timedelta(hours=h), day.start + timedelta(hours=h + 1))
        for h in range(4)
    ]
    new = []
    for h in hours:
        a = services.segments_allocate(task=replace, interval=h, count=1, append=False)
        new.append(
            services.NewSegment(interval=h, version=a.version, partition=0, core_partitions=1)
        )
    services.segments_publish(task=replace, segments=new)

    # The append's file: 2 rows in hour 0, 1 in hour 1, 3 in hour 5.
    stamps = [
        day.start + timedelta(hours=h, minutes=m)
        for h, m in [(0, 1), (0, 2), (1, 5), (5, 0), (5, 1), (5, 2)]
    ]
    path = tmp_path / "append.parquet"
    pq.write_table(
        pa.table({"__time": pa.array(stamps, pa.timestamp("ms", tz="UTC")), "x": list(range(6))}),
        path,
    )
    size = os.path.getsize(path)
    services.segments_publish(
        task=append,
        segments=[
            services.NewSegment(
                interval=day,
                version=alloc.version,
                partition=alloc.partitions[0],
                core_partitions=alloc.core_partitions,
                location=str(path),
                num_rows=6,
                size_bytes=size,
            )
        ],
    )
    original = Segment.objects.get(created_by=append, upgraded_from="")
    copies = {c.interval: c for c in Segment.objects.filter(upgraded_from=original.id)}
    assert set(copies) == {hours[0], hours[1]}
    assert (copies[hours[0]].num_rows, copies[hours[1]].num_rows) == (2, 1)
    assert copies[hours[0]].size_bytes == round(size * 2 / 6)
    assert copies[hours[1]].size_bytes == round(size / 6)
    assert (original.num_rows, original.size_bytes) == (6, size)
