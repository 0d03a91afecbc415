"""Druid's ETERNITY interval in a task that runs (issue 27): accepted with
Druid's meaning, all of time, and clipped to what exists before anything is
locked, allocated or tombstoned (the segments there and the rows read), never
cut into every day of 10,000 years. Real Spark, real metastore."""

from __future__ import annotations

import pytest

from metastore import services
from metastore.intervals import Interval
from metastore.models import Segment, TaskStatus

DRUID_ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"

pytestmark = pytest.mark.spark


def _rows(*days: str) -> str:
    return "".join(f'{{"ts": "{day}T01:00:00Z", "page": "A", "added": 2}}\n' for day in days)


def test_replace_over_eternity_tombstones_only_the_chunks_that_held_data(run_spec, inline_spec):
    first = run_spec(inline_spec("eternal", data=_rows("2023-12-30", "2024-01-05")))
    assert first.status == TaskStatus.SUCCESS, first.error

    spec = inline_spec("eternal", data=_rows("2024-01-01"), intervals=[DRUID_ETERNITY])
    spec["spec"]["ioConfig"]["dropExisting"] = True
    task = run_spec(spec)

    assert task.status == TaskStatus.SUCCESS, task.error
    # Druid's meaning: all of time replaced; here the span that exists, 2023-12-30
    # to 2024-01-06, is locked, and only its empty days that held data get tombstones.
    mine = Segment.objects.filter(created_by=task)
    assert sorted((str(s.interval)[:10], s.tombstone) for s in mine) == [
        ("2023-12-30", True),
        ("2023-12-31", True),
        ("2024-01-01", False),
        ("2024-01-02", True),
        ("2024-01-03", True),
        ("2024-01-04", True),
        ("2024-01-05", True),
    ]
    read = task.report["readAsOf"]
    assert [r["interval"] for r in read] == ["2023-12-30T00:00:00.000Z/2024-01-06T00:00:00.000Z"], (
        read
    )


def test_replace_over_eternity_of_an_empty_datasource_locks_the_rows_days(run_spec, inline_spec):
    spec = inline_spec("eternal_new", data=_rows("2024-03-01"), intervals=[DRUID_ETERNITY])
    spec["spec"]["ioConfig"]["dropExisting"] = True
    task = run_spec(spec)

    assert task.status == TaskStatus.SUCCESS, task.error
    assert [
        (str(s.interval)[:10], s.tombstone) for s in Segment.objects.filter(created_by=task)
    ] == [("2024-03-01", False)]


def test_kill_over_eternity_kills_the_unused_segments_there(run_spec, publish):
    publish("eternal_kill", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 2})
    services.segments_mark_used(
        datasource="eternal_kill", used=False, interval=Interval.parse("2024-01-01/2024-01-03")
    )
    task = run_spec({"type": "kill", "dataSource": "eternal_kill", "interval": DRUID_ETERNITY})

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["segmentsKilled"] == 2
    assert not Segment.objects.filter(datasource__name="eternal_kill").exists()
    # Nothing there: nothing to lock, nothing killed.
    again = run_spec({"type": "kill", "dataSource": "eternal_kill", "interval": DRUID_ETERNITY})
    assert again.status == TaskStatus.SUCCESS, again.error
    assert again.report["segmentsKilled"] == 0


def test_compaction_over_eternity_compacts_the_data_there(run_spec, inline_spec):
    first = run_spec(inline_spec("eternal_compact", data=_rows("2024-01-01", "2024-01-02")))
    assert first.status == TaskStatus.SUCCESS, first.error
    task = run_spec(
        {
            "type": "compact",
            "dataSource": "eternal_compact",
            "ioConfig": {
                "type": "compact",
                "inputSpec": {"type": "interval", "interval": DRUID_ETERNITY},
            },
            "granularitySpec": {"segmentGranularity": "MONTH"},
        }
    )
    assert task.status == TaskStatus.SUCCESS, task.error
    # The month holding the data, not every month of all time.
    assert [str(s.interval) for s in Segment.objects.filter(created_by=task)] == [
        "2024-01-01T00:00:00.000Z/2024-02-01T00:00:00.000Z"
    ]
    assert task.report["compaction"]["intervals"] == [
        "2024-01-01T00:00:00.000Z/2024-02-01T00:00:00.000Z"
    ]


def test_segment_granularity_none_makes_one_time_chunk_per_millisecond(run_spec, inline_spec):
    rows = (
        '{"ts": "2024-01-01T00:00:00.001Z", "page": "A", "added": 1}\n'
        '{"ts": "2024-01-01T00:00:00.001Z", "page": "A", "added": 2}\n'
        '{"ts": "2024-01-01T00:00:00.250Z", "page": "B", "added": 4}\n'
    )
    task = run_spec(inline_spec("per_ms", data=rows, segment_granularity="NONE"))

    assert task.status == TaskStatus.SUCCESS, task.error
    assert sorted(
        (str(s.interval), s.num_rows) for s in Segment.objects.filter(created_by=task)
    ) == [
        ("2024-01-01T00:00:00.001Z/2024-01-01T00:00:00.002Z", 1),  # rolled up
        ("2024-01-01T00:00:00.250Z/2024-01-01T00:00:00.251Z", 1),
    ]


def test_reindexing_itself_over_eternity_locks_and_reads_the_span_of_its_segments(
    run_spec, inline_spec
):
    first = run_spec(inline_spec("eternal_self", data=_rows("2024-01-01", "2024-01-03")))
    assert first.status == TaskStatus.SUCCESS, first.error
    spec = inline_spec("eternal_self")
    spec["spec"]["dataSchema"]["timestampSpec"] = {"column": "__time", "format": "millis"}
    spec["spec"]["dataSchema"]["metricsSpec"] = [
        {"type": "longSum", "name": "count", "fieldName": "count"},
        {"type": "longSum", "name": "added", "fieldName": "added"},
    ]
    spec["spec"]["ioConfig"]["inputSource"] = {
        "type": "druid",
        "dataSource": "eternal_self",
        "interval": DRUID_ETERNITY,
    }
    spec["spec"]["ioConfig"].pop("inputFormat")
    task = run_spec(spec)

    assert task.status == TaskStatus.SUCCESS, task.error
    assert [r["interval"] for r in task.report["readAsOf"]] == [
        "2024-01-01T00:00:00.000Z/2024-01-04T00:00:00.000Z"
    ]
    assert sorted(str(s.interval)[:10] for s in Segment.objects.filter(created_by=task)) == [
        "2024-01-01",
        "2024-01-03",
    ]
