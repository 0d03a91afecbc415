"""The demo's follow-up tasks, run by the real worker on Spark after a small
flights-shaped ingestion, leave every state the console shows: a tombstone, a
DAY segment partially overshadowed by an HOUR replace, a day with late data
appended (two visible segments in one chunk) and a week of DAY segments compacted
into one WEEK segment with the same metric totals."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from metastore import selectors, services
from metastore.demo import COMPACT_INTERVAL, FOLLOWUPS, flight_row, followup_specs
from metastore.intervals import Interval
from metastore.models import Segment, TaskStatus

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DS = "flights_demo"
METRICS = ("count", "distance", "dep_delay", "arr_delay", "air_time")


def visible_totals(interval: str) -> dict:
    """Metric totals of the rows visible in `interval`, read from the visible pieces'
    files through the timeline."""
    iv = Interval.parse(interval)
    pieces = [
        (p, r) for p, r in selectors.timeline_for(datasource=DS).lookup(iv) if not r.tombstone
    ]
    locations = dict(
        Segment.objects.filter(id__in={r.id for _, r in pieces}).values_list("id", "location")
    )
    totals = dict.fromkeys(METRICS, 0.0)
    for piece, ref in pieces:
        df = pq.read_table(locations[ref.id]).to_pandas()
        times = pd.to_datetime(df["__time"], utc=True)
        df = df[(times >= piece.start) & (times < piece.end)]
        for m in METRICS:
            totals[m] += float(df[m].sum())
    return totals


def test_followups_show_tombstones_partial_overshadowing_and_late_data(worker, wait_for_task):
    specs = followup_specs(DS)
    assert [name for name, _ in specs] == [name for name, _ in FOLLOWUPS]
    # a small "flights": one hour of 15 Mar, 4 Jul, 30 and 31 Dec
    rows = [
        flight_row(ts, "UA", i, 1)
        for i, ts in enumerate(
            [
                "2013-03-15T10:00:00Z",
                "2013-07-04T09:00:00Z",
                "2013-07-04T12:00:00Z",
                "2013-12-30T10:00:00Z",
                "2013-12-31T10:00:00Z",
                # the compacted week (7–13 Jan), and the day after it
                "2013-01-07T06:00:00Z",
                "2013-01-07T06:00:00Z",
                "2013-01-09T14:00:00Z",
                "2013-01-10T08:00:00Z",
                "2013-01-13T23:00:00Z",
                "2013-01-14T07:00:00Z",
            ]
        )
    ]
    ingest = json.loads(json.dumps(specs[0][1]))
    ingest["spec"]["ioConfig"] = {
        "type": "index_parallel",
        "inputSource": {"type": "inline", "data": "\n".join(json.dumps(r) for r in rows)},
        "inputFormat": {"type": "json"},
        "appendToExisting": False,
    }
    ingest["spec"]["dataSchema"]["granularitySpec"]["intervals"] = ["2013-01-01/2014-01-01"]
    first = services.task_submit(spec=ingest, user=None)
    *ingestions, (compact_name, compact_spec) = specs
    assert compact_name == "compact"
    tasks = [services.task_submit(spec=spec, user=None) for _, spec in ingestions]
    for task in [first, *tasks]:
        done = wait_for_task(task.id)
        assert done.status == TaskStatus.SUCCESS, (task.id, done.error)
    week = Interval.parse(COMPACT_INTERVAL)
    before = visible_totals(COMPACT_INTERVAL)
    assert before["count"] == 5
    day_after = visible_totals("2013-01-14/2013-01-15")
    compact = wait_for_task(services.task_submit(spec=compact_spec, user=None).id)
    assert compact.status == TaskStatus.SUCCESS, compact.error
    assert compact.report["compaction"]["nothingToCompact"] is False
    assert visible_totals(COMPACT_INTERVAL) == before  # same rows, fewer segments
    assert visible_totals("2013-01-14/2013-01-15") == day_after
    compacted = list(Segment.objects.filter(created_by=compact, used=True))
    assert [s.interval for s in compacted] == [week]  # one WEEK segment
    assert compacted[0].compaction_state and compacted[0].schema["metrics"]

    state = selectors.timeline_state(datasource=DS)
    segments = {s.id: s for s in Segment.objects.filter(datasource__name=DS, used=True)}

    def on(day: str):
        iv = Interval.parse(day)
        return [s for s in segments.values() if s.start < iv.end and s.end > iv.start]

    (tomb,) = [s for s in on("2013-12-31/2014-01-01") if s.tombstone]
    assert state.status[tomb.id] == "visible"
    old_31 = [s for s in on("2013-12-31/2014-01-01") if not s.tombstone]
    assert old_31 and all(state.status[s.id] == "overshadowed" for s in old_31)
    july = on("2013-07-04/2013-07-05")
    whole_day = Interval.parse("2013-07-04/2013-07-05")
    (day_seg,) = [s for s in july if s.interval == whole_day]
    (hour_seg,) = [s for s in july if s is not day_seg]
    assert state.status[day_seg.id] == "partial" and state.status[hour_seg.id] == "visible"
    march = on("2013-03-15/2013-03-16")
    assert len(march) == 2 and {state.status[s.id] for s in march} == {"visible"}
    assert sum(s.num_rows for s in march) == 3
    (week_seg,) = [s for s in on(COMPACT_INTERVAL) if state.status[s.id] == "visible"]
    assert week_seg.id == compacted[0].id
    old_days = [s for s in on(COMPACT_INTERVAL) if s.id != week_seg.id]
    assert len(old_days) == 4 and {state.status[s.id] for s in old_days} == {"overshadowed"}
