"""The commit page draws the timeline before and after one commit from the
segments around what the commit touched, not from the dataSource's whole
history: what it shows is what the whole timelines say there, and its cost is
the same beside 10 segments of history as beside 1,000."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, Segment
from metastore.selectors import commits as commit_reads
from metastore.timeline import Timeline
from tests.conftest import TEST_PASSWORD
from tests.test_console_timeline import marks

pytestmark = pytest.mark.django_db

DS = "commits"
WINDOW = "2024-03-01/2024-03-03"


def _day(n: int) -> str:
    return f"2024-03-{n:02d}/2024-03-{n + 1:02d}"


@pytest.fixture
def logged_in(client, user):
    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


@pytest.fixture
def history(publish):
    """`history(ds, old)`: `old` segments of 2023 (10 per day), then March 2024:
    days 1 and 2 (two partitions of 10 rows each) and day 5; the commit under test
    replaces day 2 and an HOUR of day 1 (30 rows each: day 1's segments are then
    partly overshadowed); later, day 2's old segments are marked unused and day 9
    is published (neither in its window)."""

    def make(ds: str, old: int) -> dict:
        start = datetime(2023, 1, 1, tzinfo=UTC)
        days = {
            str(Interval(start + timedelta(days=d), start + timedelta(days=d + 1))): 10
            for d in range(old // 10)
        }
        if days:
            publish(ds, "2023-01-01/2023-06-01", days)
        first = publish(ds, WINDOW, {_day(1): 2, _day(2): 2})
        publish(ds, _day(5), {_day(5): 1})
        commit = publish(
            ds, WINDOW, {"2024-03-01T06:00/2024-03-01T07:00": 1, _day(2): 1}, rows=30, size=3000
        )
        old_day2 = [s for s in first.segment_ids if s.startswith(f"{ds}_2024-03-02T")]
        unmark = services.segments_mark_used(datasource=ds, used=False, segment_ids=old_day2)
        last = publish(ds, _day(9), {_day(9): 1})
        day1 = [s for s in first.segment_ids if s.startswith(f"{ds}_2024-03-01T")]
        return {
            "seq": commit.commit_seq,
            "unmark": unmark.seq,
            "last": last.commit_seq,
            "day1": day1,
            "old_day2": old_day2,
        }

    return make


def _page(client, seq: int, ds: str = DS) -> str:
    response = client.get(f"/datasources/{ds}/commits/{seq}")
    assert response.status_code == 200
    return response.content.decode()


def _statuses(html: str, side: str) -> dict[str, str]:
    svg = html.split(f'class="svg-wrap commit-{side}"')[1].split("</div>")[0]
    return {sid: m["status"] for sid, m in marks(svg).items()}


def _whole_timeline_says(seq: int, window: str) -> dict[str, str]:
    """segment id -> status in the chunks overlapping `window`, from the whole
    timeline as of `seq`."""
    state = selectors.timeline_state(datasource=DS, as_of=seq)
    chunks = state.chunks_overlapping(Interval.parse(window))
    return {r.id: state.status[r.id] for c in chunks for r in c.segments}


def _before(seq: int) -> int:
    return CommitLogEntry.objects.filter(datasource=DS, seq__lt=seq).order_by("-seq")[0].seq


def test_commit_page_shows_what_the_whole_timelines_say(logged_in, history):
    h = history(DS, old=10)
    seq, day1, old_day2 = h["seq"], h["day1"], h["old_day2"]

    html = _page(logged_in, seq)

    after, before = _statuses(html, "after"), _statuses(html, "before")
    assert after == _whole_timeline_says(seq, WINDOW)
    assert before == _whole_timeline_says(_before(seq), WINDOW)
    assert {after[s] for s in day1} == {"partial"}
    assert {after[s] for s in old_day2} == {"overshadowed"}
    assert {before[s] for s in day1 + old_day2} == {"visible"}
    assert not any("2024-03-05" in s or "2023-" in s for s in after | before)
    table = re.search(r'<table class="overshadowed-table">(.*?)</table>', html, re.S)[1]
    listed = re.findall(r'<tr data-segment="([^"]+)".*?<td>([a-z ]+)</td></tr>', table, re.S)
    assert dict(listed) == {
        **dict.fromkeys(day1, "partially overshadowed"),
        **dict.fromkeys(old_day2, "overshadowed"),
    }
    assert "Overshadowed (4)" in html
    delta = re.search(r'data-rows="(-?\d+)" data-bytes="(-?\d+)" data-segments="(-?\d+)"', html)
    # before: four visible segments of 10 rows and 1000 bytes; after: day 1's two
    # (partial, counted whole), the hour and the new day 2 (30 rows, 3000 bytes)
    assert tuple(map(int, delta.groups())) == (80 - 40, 8000 - 4000, 0)

    # the commit after it (day 2's old segments marked unused): day 2 only
    html = _page(logged_in, h["unmark"])
    assert _statuses(html, "before") == _whole_timeline_says(seq, _day(2))
    assert _statuses(html, "after") == _whole_timeline_says(h["unmark"], _day(2))
    assert set(_statuses(html, "after")).isdisjoint(old_day2)
    assert "Overshadowed (0)" in html
    # the last one, outside the window: its own day only, nothing before it there
    html = _page(logged_in, h["last"])
    assert set(_statuses(html, "after")) == {
        s.id for s in Segment.objects.filter(datasource__name=DS, start__day=9)
    }
    assert _statuses(html, "before") == {}


def test_an_old_commit_reads_what_was_used_from_the_checkpoint(logged_in, history, monkeypatch):
    h = history(DS, old=10)
    # more commits after it than are undone: the checkpoint before it says instead
    monkeypatch.setattr(commit_reads, "UNDO_MAX", 1)

    html = _page(logged_in, h["seq"])

    assert _statuses(html, "after") == _whole_timeline_says(h["seq"], WINDOW)
    assert _statuses(html, "before") == _whole_timeline_says(_before(h["seq"]), WINDOW)
    assert "Overshadowed (4)" in html


@pytest.fixture
def built_sizes(monkeypatch):
    """How many segments each Timeline built while the test runs holds (the real
    build, recorded)."""
    sizes: list[int] = []
    real = Timeline.build.__func__

    def build(cls, refs, *args, **kwargs):
        refs = list(refs)
        sizes.append(len(refs))
        return real(cls, refs, *args, **kwargs)

    monkeypatch.setattr(Timeline, "build", classmethod(build))
    return sizes


def test_commit_page_cost_does_not_grow_with_the_history(logged_in, history, built_sizes):
    cost = {}
    for ds, old in (("small", 10), ("large", 1000)):
        seq = history(ds, old=old)["seq"]
        selectors.timeline_caches_clear()
        built_sizes.clear()
        with CaptureQueriesContext(connection) as queries:
            _page(logged_in, seq, ds)
        cost[ds] = (len(queries), built_sizes[:])

    assert cost["small"] == cost["large"]
    # each timeline built holds the window's segments only: 6 after it, 4 before
    assert max(cost["large"][1]) <= 6, cost


def test_segments_overlapping_a_window_are_found_by_the_time_range_index(history):
    from metastore.selectors.segments import overlapping

    history(DS, old=10)
    day2 = Interval.parse(_day(2))

    found = set(overlapping(Segment.objects.all(), day2).values_list("id", flat=True))

    # the same segments as the b-tree comparisons: day 1's end touching it is not in
    assert found == set(
        Segment.objects.filter(start__lt=day2.end, end__gt=day2.start).values_list("id", flat=True)
    )
    assert found and not any(s.startswith(f"{DS}_2024-03-01T") for s in found)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    assert "segment_time_range" in overlapping(Segment.objects.all(), day2).explain()
