"""Row-loss paths of issue 10 through the runner's real steps (real Spark)."""

from __future__ import annotations

import json
import threading
import time

import pyarrow.parquet as pq
import pytest

from metastore import locking, selectors, services
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskLock, TaskStatus
from workers import runner

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]


def _rows(day: int, prefix: str, hours) -> str:
    return "\n".join(
        json.dumps(
            {"ts": f"2024-01-0{day}T{h:02d}:00:00Z", "page": f"{prefix}{day}.{h}", "added": 1}
        )
        for h in hours
    )


def _druid_reindex(inline_spec, ds: str, interval: str, intervals: list[str], **context) -> dict:
    spec = inline_spec(ds, intervals=intervals, context=context)
    spec["spec"]["dataSchema"]["timestampSpec"] = {"column": "__time", "format": "millis"}
    spec["spec"]["dataSchema"]["dimensionsSpec"] = {"dimensions": []}
    spec["spec"]["dataSchema"]["metricsSpec"] = [
        {"type": "longSum", "name": "count", "fieldName": "count"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ]
    spec["spec"]["ioConfig"] = {
        "type": "index_parallel",
        "inputSource": {"type": "druid", "dataSource": ds, "interval": interval},
    }
    return spec


def visible_pages(ds: str, interval: Interval) -> list[str]:
    locations = dict(Segment.objects.filter(datasource__name=ds).values_list("id", "location"))
    pages = []
    for piece, ref in selectors.timeline_for(datasource=ds).lookup(interval):
        if ref.tombstone:
            continue
        table = pq.read_table(locations[ref.id]).to_pylist()
        pages += [
            r["page"]
            for r in table
            if piece.start.timestamp() * 1000 <= _millis(r["__time"]) < piece.end.timestamp() * 1000
        ]
    return sorted(pages)


def _millis(value) -> float:
    return value.timestamp() * 1000 if hasattr(value, "timestamp") else float(value)


def _claim(inline_spec, spec: dict) -> Task:
    task = services.task_submit(spec=spec)
    assert services.task_claim(task_id=task.id, worker="pytest")
    return Task.objects.get(id=task.id)


@pytest.fixture
def no_queue(settings, no_enqueue):
    settings.STRATA_HEARTBEAT_SECONDS = 0.2


def test_replace_on_two_days_reads_the_overwrite_published_while_it_waited(inline_spec, no_queue):
    """Path 1: the replace waits for DAY3 while a batch overwrite publishes there;
    it must read DAY3 as of its own grant (after the overwrite), not DAY1's."""
    ds = "path1"
    day1, day3 = "2024-01-01/2024-01-02", "2024-01-03/2024-01-04"
    base = _claim(
        inline_spec,
        inline_spec(
            ds,
            data=_rows(1, "base", range(3)) + "\n" + _rows(3, "base", range(3)),
            intervals=[day1, day3],
        ),
    )
    runner.run_task(base.id)
    # Rows of the coming overwrite, written by a real ingestion elsewhere.
    src = _claim(
        inline_spec, inline_spec(ds + "_src", data=_rows(3, "new", range(2)), intervals=[day3])
    )
    runner.run_task(src.id)
    new_file = Segment.objects.get(created_by=src)

    holder = services.task_create(spec={}, task_type="index_parallel", datasource=ds, enqueue=False)
    services.task_claim(task_id=holder.id, worker="pytest")
    services.locks_acquire(
        task=holder, intervals=[Interval.parse(day3)], lock_type=locking.EXCLUSIVE
    )

    replace = _claim(
        inline_spec,
        _druid_reindex(
            inline_spec, ds, "2024-01-01/2024-01-04", [day1, day3], useConcurrentLocks=True
        ),
    )
    thread = threading.Thread(target=runner.run_task, args=(replace.id,))
    thread.start()
    deadline = time.monotonic() + 120
    while Task.objects.get(id=replace.id).status != TaskStatus.WAITING:
        assert time.monotonic() < deadline, "the replace never waited for DAY3"
        time.sleep(0.1)
    # The overwrite publishes DAY3 while the replace waits.
    alloc = services.segments_allocate(
        task=holder, interval=Interval.parse(day3), count=1, append=False
    )
    services.segments_publish(
        task=holder,
        segments=[
            services.NewSegment(
                interval=alloc.interval,
                version=alloc.version,
                partition=0,
                core_partitions=1,
                location=new_file.location,
                num_rows=new_file.num_rows,
            )
        ],
    )
    services.task_finish(task_id=holder.id, status=TaskStatus.SUCCESS)
    thread.join(timeout=600)
    replace.refresh_from_db()
    assert replace.status == TaskStatus.SUCCESS, replace.error
    span = Interval.parse("2024-01-01/2024-01-04")
    assert visible_pages(ds, span) == ["base1.0", "base1.1", "base1.2", "new3.0", "new3.1"]
    assert not TaskLock.objects.exists()


def _append_spec(inline_spec, ds: str, data: str, **kw) -> dict:
    spec = inline_spec(ds, data=data, **kw)
    spec["spec"]["ioConfig"]["appendToExisting"] = True
    return spec


@pytest.mark.parametrize("concurrent", [False, True], ids=["TC", "CONC"])
def test_late_day_append_after_an_hour_replace_lands_visibly(inline_spec, no_queue, concurrent):
    """Paths 2 and 9, Druid #17852: rows of a DAY append go into the chunk visible
    at their timestamp: the HOUR chunk of the replace for hour 3, the DAY chunk
    elsewhere. Nothing is hidden, nothing refused."""
    ds = f"late{int(concurrent)}"
    context = {"useConcurrentLocks": True} if concurrent else None
    day1 = "2024-01-01/2024-01-02"
    base = _claim(inline_spec, inline_spec(ds, data=_rows(1, "base", range(6)), intervals=[day1]))
    runner.run_task(base.id)
    replace = _claim(
        inline_spec,
        inline_spec(
            ds,
            data=_rows(1, "hour", [3]),
            intervals=["2024-01-01T03:00:00Z/2024-01-01T04:00:00Z"],
            segment_granularity="HOUR",
            context=context,
        ),
    )
    runner.run_task(replace.id)
    late = _claim(
        inline_spec, _append_spec(inline_spec, ds, _rows(1, "late", [1, 3, 4]), context=context)
    )
    runner.run_task(late.id)
    late.refresh_from_db()
    assert late.status == TaskStatus.SUCCESS, late.error
    expected = (
        [f"base1.{h}" for h in (0, 1, 2, 4, 5)] + ["hour1.3"] + [f"late1.{h}" for h in (1, 3, 4)]
    )
    assert visible_pages(ds, Interval.parse(day1)) == sorted(expected)
    assert not TaskLock.objects.exists()


def test_late_day_append_after_a_month_compaction_lands_in_the_month_chunk(inline_spec, no_queue):
    """Path 9: a DAY append into a dataSource compacted to MONTH goes into the MONTH chunk."""
    ds = "latemonth"
    month = "2024-01-01/2024-02-01"
    base = _claim(
        inline_spec,
        inline_spec(
            ds, data=_rows(1, "m", range(2)), intervals=[month], segment_granularity="MONTH"
        ),
    )
    runner.run_task(base.id)
    late = _claim(inline_spec, _append_spec(inline_spec, ds, _rows(2, "late", [5])))
    runner.run_task(late.id)
    late.refresh_from_db()
    assert late.status == TaskStatus.SUCCESS, late.error
    assert visible_pages(ds, Interval.parse(month)) == ["late2.5", "m1.0", "m1.1"]
    (seg,) = Segment.objects.filter(created_by=late)
    assert seg.interval == Interval.parse(month)
