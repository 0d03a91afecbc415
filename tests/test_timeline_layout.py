"""The interval view's layout (console.timeline_layout): where each segment,
chunk, unused segment, pending allocation and lock goes, without drawing it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from console import timeline_layout
from console.timeline_layout import (
    LANE_GAP,
    LEFT,
    LOCK_ROW,
    ROW,
    TOP,
    WIDTH,
    ChunkMark,
    LockMark,
    PendingMark,
    SegmentMark,
    UnusedMark,
    interval_layout,
)
from metastore.intervals import Interval
from metastore.timeline import SegmentRef, Timeline
from metastore.timeline_view import state_of


def at(day: int, hour: int = 0) -> datetime:
    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=day, hours=hour)


def days(a: int, b: int) -> Interval:
    return Interval(at(a), at(b))


def seg(sid: str, interval: Interval, version: str, partition: int = 0, **kw) -> SegmentRef:
    kw.setdefault("core_partitions", 0)
    return SegmentRef(id=sid, interval=interval, version=version, partition=partition, **kw)


@dataclass
class Lock:
    pk: int
    type: str
    task_id: str
    priority: int
    revoked: bool
    version: str
    interval: Interval

    @property
    def start(self) -> datetime:
        return self.interval.start

    @property
    def end(self) -> datetime:
        return self.interval.end


@dataclass
class Pending:
    pk: int
    task_id: str
    version: str
    partition: int
    start: datetime
    end: datetime


@dataclass
class Unused:
    id: str
    version: str
    partition: int
    start: datetime
    end: datetime
    tombstone: bool = False


def layout(refs, window, **kw):
    kw.setdefault("details", {})
    return interval_layout(state=state_of(Timeline.build(refs)), window=window, **kw)


def marks(result, kind):
    return [m for m in result.marks if isinstance(m, kind)]


def test_newest_version_lane_on_top_and_a_row_per_partition():
    refs = [seg(f"a{p}", days(0, 1), "v1", p) for p in range(3)] + [seg("b", days(1, 2), "v2")]
    result = layout(refs, days(0, 4))
    assert [(lane.version, lane.rows) for lane in result.lanes] == [("v2", 1), ("v1", 3)]
    v2, v1 = result.lanes
    assert v2.y == TOP and v1.y == TOP + ROW + LANE_GAP
    by_id = {m.id: m for m in marks(result, SegmentMark)}
    assert [by_id[f"a{p}"].y for p in range(3)] == [v1.y, v1.y + ROW, v1.y + 2 * ROW]
    assert by_id["b"].y == v2.y
    assert result.height == v1.y + 3 * ROW + LANE_GAP + 6
    assert result.info == {"mode": "segments", "segments": 4, "chunks": 2, "marks": 4}


def test_marks_are_placed_by_time_and_clamped_to_the_window():
    refs = [seg("before", days(0, 2), "v1"), seg("inside", days(2, 3), "v1")]
    result = layout(refs, days(1, 5))
    by_id = {m.id: m for m in marks(result, SegmentMark)}
    # "before" starts outside the window: it starts at the left edge
    assert (by_id["before"].x, by_id["before"].w) == (LEFT, round(WIDTH / 4, 2))
    assert (by_id["inside"].x, by_id["inside"].w) == (round(LEFT + WIDTH / 4, 2), WIDTH / 4)


def test_overshadowed_and_partial_segments_say_by_what_and_where_they_show():
    refs = [
        seg("old", days(0, 2), "v1"),
        seg("new", days(1, 2), "v2"),
        seg("gone", days(3, 4), "v1"),
    ]
    refs.append(seg("over", days(3, 4), "v3"))
    result = layout(refs, days(0, 4))
    by_id = {m.id: m for m in marks(result, SegmentMark)}
    old = by_id["old"]
    assert old.status == "partial" and old.overshadowed_by == ("new",)
    assert [(str(iv), x, w) for iv, x, w in old.visible_parts] == [
        (str(days(0, 1)), LEFT, WIDTH / 4)
    ]
    assert by_id["gone"].status == "overshadowed" and by_id["gone"].overshadowed_by == ("over",)
    assert by_id["gone"].visible_parts == ()
    assert by_id["new"].status == "visible" and by_id["new"].overshadowed_by == ()
    assert "overshadowed by new" in old.title


def test_flags_and_labels_say_tombstone_incomplete_and_upgraded():
    refs = [
        seg("tomb", days(0, 1), "v1", tombstone=True),
        seg("half", days(1, 2), "v1", 0, core_partitions=2),
        seg("copy", days(2, 3), "v1"),
    ]
    result = layout(refs, days(0, 3), details={"copy": (10, 100, "orig"), "tomb": (0, 0, "")})
    by_id = {m.id: m for m in marks(result, SegmentMark)}
    assert by_id["tomb"].flags == ("tombstone",) and by_id["tomb"].label == ("tombstone",)
    assert by_id["half"].flags == ("incomplete",) and by_id["half"].status == "incomplete"
    assert by_id["copy"].flags == ("upgraded",) and by_id["copy"].label == ("↑ upgraded",)
    assert by_id["copy"].title.endswith("10 rows, 100 bytes\nupgraded from orig")


def test_a_commits_segments_are_highlighted():
    refs = [seg("a", days(0, 1), "v1"), seg("b", days(1, 2), "v1")]
    result = layout(refs, days(0, 2), highlight={"b": "added"})
    assert {m.id: m.highlight for m in marks(result, SegmentMark)} == {"a": "", "b": "added"}


def test_unused_and_pending_stack_under_their_chunk_and_a_new_version_gets_a_lane():
    refs = [seg("a0", days(0, 1), "v1", 0), seg("a1", days(0, 1), "v1", 1)]
    unused = [Unused("u", "v1", 5, at(0), at(1), tombstone=True)]
    pendings = [Pending(7, "t1", "v1", 2, at(0), at(1)), Pending(8, "t2", "v9", 0, at(1), at(2))]
    result = layout(refs, days(0, 2), unused=unused, pendings=pendings)
    assert [(lane.version, lane.rows) for lane in result.lanes] == [("v9", 1), ("v1", 4)]
    v9, v1 = result.lanes
    (u,) = marks(result, UnusedMark)
    assert (u.id, u.y, u.tombstone) == ("u", v1.y + 2 * ROW, True)
    first, second = marks(result, PendingMark)
    assert (first.pk, first.y) == (7, v1.y + 3 * ROW)
    assert (second.pk, second.y, second.x) == (8, v9.y, LEFT + WIDTH / 2)
    assert "being written by t1" in first.title


def test_locks_take_rows_above_the_lanes_at_most_twelve():
    refs = [seg("a", days(0, 1), "v1")]
    locks = [Lock(i, "EXCLUSIVE", f"t{i}", 50, i == 1, "v2", days(0, 1)) for i in range(14)]
    result = layout(refs, days(0, 2), locks=locks)
    drawn = marks(result, LockMark)
    assert result.lock_rows == 12 and len(drawn) == 12
    assert [m.y for m in drawn[:2]] == [TOP, TOP + LOCK_ROW]
    assert drawn[1].revoked and drawn[1].text == "EXCLUSIVE t1 p50 revoked"
    assert result.lanes[0].y == TOP + 12 * LOCK_ROW + 6
    assert drawn[0].guide_height == result.height - TOP - 4


def test_past_the_segment_budget_a_chunk_is_one_mark(monkeypatch):
    monkeypatch.setattr(timeline_layout, "MAX_SEGMENT_MARKS", 3)
    refs = [seg(f"a{p}", days(0, 1), "v1", p) for p in range(3)]
    refs += [seg("b", days(0, 1), "v2"), seg("c", days(1, 2), "v1")]
    unused = [Unused("u", "v1", 9, at(0), at(1))]
    result = layout(refs, days(0, 2), unused=unused)
    assert result.mode == "chunks" and not marks(result, SegmentMark)
    assert not marks(result, UnusedMark)  # unused segments are not drawn per chunk
    chunks = {(str(m.interval), m.version): m for m in marks(result, ChunkMark)}
    assert chunks[(str(days(0, 1)), "v1")].status == "overshadowed"
    assert chunks[(str(days(0, 1)), "v2")].status == "visible"
    assert chunks[(str(days(1, 2)), "v1")].shown_share == 1
    assert [lane.rows for lane in result.lanes] == [1, 1]


def test_past_the_chunk_budget_nothing_is_laid_out(monkeypatch):
    monkeypatch.setattr(timeline_layout, "MAX_SEGMENT_MARKS", 1)
    monkeypatch.setattr(timeline_layout, "MAX_CHUNK_MARKS", 2)
    refs = [seg(f"d{d}", days(d, d + 1), "v1") for d in range(3)]
    result = layout(refs, days(0, 3))
    assert result.mode == "zoom" and result.marks == () and result.lanes == ()
    assert result.info == {"mode": "zoom", "segments": 3, "chunks": 3, "marks": 0}


@pytest.mark.parametrize("n_days", [1, 5])
def test_an_empty_window_has_no_marks_but_keeps_its_height(n_days):
    result = layout([seg("a", days(10, 11), "v1")], days(0, n_days))
    assert result.marks == () and result.lanes == () and result.height == TOP + 40


def test_overview_buckets_count_segments_spread_rows_and_flag_what_lies_there():
    from console.timeline_svg import bucket_facts

    refs = [seg(f"a{p}", days(0, 1), "v1", p) for p in range(2)]
    refs += [seg("b", days(1, 2), "v1"), seg("b2", days(1, 2), "v2")]
    refs.append(seg("t", days(3, 4), "v1", tombstone=True))
    state = state_of(Timeline.build(refs))
    rows = {(c.interval.start, c.interval.end, c.version): (240, 1) for c in state.chunks}
    locks = [Lock(1, "EXCLUSIVE", "t1", 50, False, "v3", days(2, 3))]
    pendings = [Pending(2, "t2", "v3", 0, at(2, 12), at(3))]
    # eight 12-hour buckets over four days
    segs, nrows, flags = bucket_facts(state, days(0, 4), rows, locks, pendings, 8)
    assert segs == [2, 2, 2, 2, 0, 0, 1, 1]
    # a day's 240 rows, half in each of its buckets; day 1's v1 chunk is hidden by v2
    assert nrows == [120, 120, 120, 120, 0, 0, 120, 120]
    assert flags[2] == flags[3] == {"overshadowed"}
    assert flags[4] == {"locked"} and flags[5] == {"locked", "writing"}
    assert flags[6] == {"tombstone"} and flags[0] == set()
