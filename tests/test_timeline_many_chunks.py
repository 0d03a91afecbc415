"""Property tests: many small chunks against the brute-force reading of SPEC §3 (issue 16).

The timeline keeps its runs and its chunk index in blocks (``BLOCK`` items);
these tests shrink the blocks to a few items so that a timeline of a few dozen
chunks already spans many blocks, and its splits, joins and cross-block
searches are exercised. The shapes: long runs of adjacent one-minute chunks
(some missing, some incomplete, some with overwrite groups or tombstones),
coarser chunks of other versions overlapping them (hiding all, part or none
of a run), and streaming histories that append chunk after chunk at the end,
then add and remove late data in the middle.

STRATA_HYPOTHESIS_EXAMPLES sets max_examples per test (default 600; these
tests run a sixth of that, their examples being larger).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metastore.timeline as timeline_module
from metastore.intervals import Interval
from metastore.timeline import SegmentRef, Timeline

try:
    from tests.test_timeline_property import assert_same_reads, chunk_segments
    from tests.timeline_reference import ReferenceTimeline
except ImportError:  # tests/ itself on sys.path
    from test_timeline_property import assert_same_reads, chunk_segments
    from timeline_reference import ReferenceTimeline

EXAMPLES = max(int(os.environ.get("STRATA_HYPOTHESIS_EXAMPLES", "600")) // 6, 10)
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

BASE = datetime(2024, 1, 1, tzinfo=UTC)
CELLS = 48  # minutes on the grid
GRID = [BASE + timedelta(minutes=m) for m in range(CELLS + 1)]
EVERYTHING = Interval(GRID[0], GRID[-1])


def at(a: int, b: int) -> Interval:
    return Interval(GRID[a], GRID[b])


@contextmanager
def small_blocks(size: int):
    """Run with the timeline's blocks holding ``size`` items instead of hundreds."""
    saved = timeline_module.BLOCK
    timeline_module.BLOCK = size
    try:
        yield
    finally:
        timeline_module.BLOCK = saved


def roots_chunk(interval: Interval, version: str, prefix: str, n: int) -> list[SegmentRef]:
    """A complete chunk of ``n`` root segments (the usual minute chunk)."""
    return [SegmentRef(f"{prefix}{p}", interval, version, p, core_partitions=n) for p in range(n)]


@st.composite
def minute_runs(draw, version: str = "v2", first: int = 0) -> list[SegmentRef]:
    """Adjacent one-minute chunks from ``first`` on: mostly complete roots, with gaps and odd ones."""
    stop = draw(st.integers(first + 1, CELLS))
    per = draw(st.integers(1, 2))
    out: list[SegmentRef] = []
    for cell in range(first, stop):
        kind = draw(st.sampled_from(["roots"] * 6 + ["gap", "drawn"]))
        interval, prefix = at(cell, cell + 1), f"m{cell}-{version}-"
        if kind == "roots":
            out.extend(roots_chunk(interval, version, prefix, per))
        elif kind == "drawn":  # groups, appends, tombstones, missing roots
            out.extend(draw(chunk_segments(interval, version, prefix)))
    return out


@st.composite
def overlays(draw, taken: set[tuple[int, int, str]]) -> list[SegmentRef]:
    """Coarser chunks (2 minutes to the whole grid) below and above the minute run."""
    out: list[SegmentRef] = []
    for _ in range(draw(st.integers(0, 4))):
        length = draw(st.sampled_from([2, 5, 10, 15, 24, CELLS]))
        a = draw(st.integers(0, CELLS - length))
        version = draw(st.sampled_from(["v1", "v3", "v3"]))
        if (a, a + length, version) in taken:
            continue
        taken.add((a, a + length, version))
        prefix = f"c{a}-{a + length}-{version}-"
        if draw(st.booleans()):
            out.extend(roots_chunk(at(a, a + length), version, prefix, draw(st.integers(1, 2))))
        else:
            out.extend(draw(chunk_segments(at(a, a + length), version, prefix)))
    return out


@st.composite
def many_chunk_sets(draw) -> list[SegmentRef]:
    run = draw(minute_runs(first=draw(st.integers(0, 6))))
    return run + draw(overlays(set()))


queries = st.lists(
    st.tuples(st.integers(0, CELLS - 1), st.integers(1, CELLS)).map(
        lambda ab: (min(ab), max(ab) if ab[0] != ab[1] else ab[0] + 1)
    ),
    min_size=1,
    max_size=3,
).map(lambda qs: [(0, CELLS), *qs])


def same_lookups(timeline: Timeline, expected, query: Interval = EVERYTHING) -> None:
    assert timeline.lookup(query) == expected.lookup(query)
    assert timeline.lookup(query, include_incomplete=True) == expected.lookup(
        query, include_incomplete=True
    )


@SETTINGS
@given(segments=many_chunk_sets(), queries=queries, block=st.sampled_from([4, 5, 8, 512]))
def test_many_small_chunks_match_the_brute_force_reference(segments, queries, block):
    with small_blocks(block):
        timeline = Timeline.build(segments)
        reference = ReferenceTimeline(segments, GRID)
        assert_same_reads(timeline, reference, segments, [(a, b) for a, b in queries], at)


@st.composite
def streams(draw):
    """Minute chunks appended in time order, coarse chunks, then late changes anywhere.

    Then removals: of single segments, and of whole chunks (so that chunks
    leave the runs and the index, at the front of a block as elsewhere).
    """
    run = draw(minute_runs())
    coarse = draw(overlays(set()))
    late = draw(minute_runs(version="v4", first=draw(st.integers(0, CELLS - 1))))
    pool = run + coarse + late
    chunks: dict[tuple[Interval, str], list[SegmentRef]] = {}
    for seg in pool:
        chunks.setdefault((seg.interval, seg.version), []).append(seg)
    keys = list(chunks)
    removals: list[SegmentRef] = []
    for whole, index in draw(
        st.lists(st.tuples(st.booleans(), st.integers(0, len(pool) - 1)), max_size=12)
    ):
        seg = pool[index]
        removals.extend(chunks[keys[index % len(keys)]] if whole else [seg])
    reads = draw(st.sets(st.integers(0, len(pool) + len(removals))))
    return run, coarse, late, removals, reads


@SETTINGS
@given(stream=streams(), queries=queries, block=st.sampled_from([4, 5, 8]))
def test_appending_minute_after_minute_then_late_data_equals_a_fresh_build(stream, queries, block):
    run, coarse, late, removals, reads = stream
    windows = [at(a, b) for a, b in queries]
    with small_blocks(block):
        timeline = Timeline.build([])
        live: dict[str, SegmentRef] = {}
        timeline.lookup(EVERYTHING, include_incomplete=True)  # keep that cache current too
        step = 0

        def compare() -> None:
            fresh = Timeline.build(live.values())
            for window in windows:
                same_lookups(timeline, fresh, window)

        for seg in [*run, *coarse, *late]:
            timeline.add(seg)
            live[seg.id] = seg
            step += 1
            if step in reads:  # reads refresh the caches; mixing them in exercises the lazy paths
                compare()
        for seg in removals:
            if seg.id in live:
                timeline.remove(seg.id)
                del live[seg.id]
            step += 1
            if step in reads:
                compare()
        compare()
        segments = list(live.values())
        assert_same_reads(timeline, ReferenceTimeline(segments, GRID), segments, queries, at)


def minutes(first: int, count: int, version: str = "v1", per: int = 1) -> list[SegmentRef]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    out: list[SegmentRef] = []
    for m in range(first, first + count):
        interval = Interval(start + timedelta(minutes=m), start + timedelta(minutes=m + 1))
        out.extend(roots_chunk(interval, version, f"{version}-{m}-", per))
    return out


def test_three_thousand_minutes_appended_one_by_one_read_as_a_fresh_build():
    # Real block sizes: 3,000 chunks fill several blocks of runs and of the index.
    segments = minutes(0, 3000, per=2)
    timeline = Timeline.build(segments[:1000])
    day = Interval.parse("2024-01-01/2024-01-04")
    for k, seg in enumerate(segments[1000:]):
        timeline.add(seg)
        if k % 194 == 1:  # the chunk's second (last) partition has just arrived
            last = timeline.lookup(seg.interval)
            assert [s.id for _, s in last] == [s.id for s in segments if s.interval == seg.interval]
    assert timeline.lookup(day) == Timeline.build(segments).lookup(day)
    assert timeline.lookup(day) == [(s.interval, s) for s in segments]


def test_a_newer_day_hides_its_minutes_and_they_return_when_it_goes():
    segments = minutes(0, 3 * 1440)  # three days of minutes, version v1
    day2 = Interval.parse("2024-01-02/2024-01-03")
    newer = SegmentRef("day2", day2, "v2", 0, core_partitions=1)
    timeline = Timeline.build(segments)
    timeline.add(newer)
    assert timeline.lookup(day2) == [(day2, newer)]
    window = Interval.parse("2024-01-02T23:59/2024-01-03T00:01")
    assert [s.id for _, s in timeline.lookup(window)] == ["day2", "v1-2880-0"]
    assert timeline.status(segments[1500].id) == "overshadowed"
    assert timeline.overshadowed_by(segments[1500].id) == {"day2"}
    assert len(timeline.fully_overshadowed()) == 1440
    timeline.remove("day2")
    assert timeline.lookup(day2) == [(s.interval, s) for s in segments[1440:2880]]
    assert timeline.fully_overshadowed() == set()


def test_an_incomplete_newer_hour_hides_nothing_until_its_last_partition_arrives():
    segments = minutes(0, 180)
    hour = Interval.parse("2024-01-01T01:00/2024-01-01T02:00")
    first = SegmentRef("h0", hour, "v2", 0, core_partitions=2)
    second = SegmentRef("h1", hour, "v2", 1, core_partitions=2)
    timeline = Timeline.build([*segments, first])
    assert timeline.lookup(hour) == [(s.interval, s) for s in segments[60:120]]
    assert timeline.lookup(hour, include_incomplete=True) == [(hour, first)]
    assert timeline.status(segments[60].id) == "visible"
    timeline.add(second)
    assert timeline.lookup(hour) == [(hour, first), (hour, second)]
    assert timeline.status(segments[60].id) == "overshadowed"
    assert timeline.status(segments[59].id) == "visible"


def test_a_year_long_old_chunk_under_minutes_shows_through_their_gaps():
    # One chunk far longer than the others: the overlap search must not scan
    # every chunk it spans, nor miss it.
    year = Interval.parse("2024-01-01/2025-01-01")
    old = SegmentRef("year", year, "v0", 0, core_partitions=1)
    segments = [s for s in minutes(0, 2000) if s.id != "v1-1000-0"]
    timeline = Timeline.build([old, *segments])
    gap = segments[1000].interval.start - timedelta(minutes=1)
    hole = Interval(gap, gap + timedelta(minutes=1))
    assert timeline.lookup(hole) == [(hole, old)]
    assert timeline.visible_intervals("year") == [
        hole,
        Interval(segments[-1].interval.end, year.end),
    ]
    timeline.add(SegmentRef("v1-1000-0", hole, "v1", 0, core_partitions=1))
    assert timeline.visible_intervals("year") == [Interval(segments[-1].interval.end, year.end)]
