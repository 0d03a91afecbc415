"""The demo's follow-up tasks, run by the real worker on Spark after a small
flights-shaped ingestion, leave every state the console shows: a tombstone, a
DAY segment partially overshadowed by an HOUR replace, and a day with late data
appended (two visible segments in one chunk)."""

from __future__ import annotations

import json

import pytest

from metastore import selectors, services
from metastore.demo import FOLLOWUPS, _flight, followup_specs
from metastore.intervals import Interval
from metastore.models import Segment, TaskStatus

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DS = "flights_demo"


def test_followups_show_tombstones_partial_overshadowing_and_late_data(worker, wait_for_task):
    specs = followup_specs(DS)
    assert [name for name, _ in specs] == [name for name, _ in FOLLOWUPS]
    # a small "flights": one hour of 15 Mar, 4 Jul, 30 and 31 Dec
    rows = [
        _flight(ts, "UA", i, 1)
        for i, ts in enumerate(
            [
                "2013-03-15T10:00:00Z",
                "2013-07-04T09:00:00Z",
                "2013-07-04T12:00:00Z",
                "2013-12-30T10:00:00Z",
                "2013-12-31T10:00:00Z",
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
    tasks = [services.task_submit(spec=spec, user=None) for _, spec in specs]
    for task in [first, *tasks]:
        done = wait_for_task(task.id)
        assert done.status == TaskStatus.SUCCESS, (task.id, done.error)

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
