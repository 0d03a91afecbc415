"""Property tests: the timeline against a brute-force reading of SPEC §3.

STRATA_HYPOTHESIS_EXAMPLES sets max_examples per test (default 600; the suite
runs thousands of examples in well under two minutes).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metastore.intervals import Interval
from metastore.timeline import SegmentRef, Timeline

try:
    from tests.timeline_reference import ReferenceTimeline
except ImportError:  # tests/ itself on sys.path
    from timeline_reference import ReferenceTimeline

EXAMPLES = int(os.environ.get("STRATA_HYPOTHESIS_EXAMPLES", "600"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

BASE = datetime(2024, 1, 1, tzinfo=UTC)
CELLS = 8  # hours on the grid
GRID = [BASE + timedelta(hours=h) for h in range(CELLS + 1)]
VERSIONS = ["v1", "v2", "v3"]


def at(a: int, b: int) -> Interval:
    return Interval(GRID[a], GRID[b])


intervals = st.tuples(st.integers(0, CELLS - 1), st.integers(1, CELLS)).map(
    lambda ab: (min(ab), max(ab) if ab[0] != ab[1] else ab[0] + 1)
)


@st.composite
def chunk_segments(draw, interval: Interval, version: str, prefix: str) -> list[SegmentRef]:
    """The segments of one chunk: roots, appends and overwrite groups, some of them missing."""
    core = draw(st.integers(0, 3))
    tombstone_chunk = core == 0 and draw(st.booleans())
    out: list[SegmentRef] = []

    def explicit(p: int) -> frozenset[int] | None:
        return frozenset({p}) if draw(st.booleans()) else None

    def core_of() -> int:
        # Segments of a chunk should agree on N; when they do not, the largest counts.
        return draw(st.sampled_from([core, core, core, max(core - 1, 0), core + 1]))

    roots_present = (
        draw(st.sets(st.integers(0, max(core - 1, 0)), max_size=core)) if core else set()
    )
    if tombstone_chunk:
        roots_present = {0}
    for p in sorted(roots_present):
        out.append(
            SegmentRef(
                prefix + str(p),
                interval,
                version,
                p,
                root_partitions=explicit(p),
                atomic_update_group=explicit(p),
                core_partitions=core_of(),
                tombstone=tombstone_chunk,
            )
        )
    first_append = max(core, 1 if tombstone_chunk else 0)
    for p in sorted(draw(st.sets(st.integers(first_append, first_append + 1), max_size=2))):
        out.append(SegmentRef(prefix + str(p), interval, version, p, core_partitions=core_of()))
    all_roots = list(range(first_append + 2))
    for g in range(draw(st.integers(0, 3))):
        minor = draw(st.integers(1, 3))
        roots = frozenset(draw(st.sets(st.sampled_from(all_roots), min_size=1, max_size=3)))
        size = draw(st.integers(1, 3))
        aug = frozenset(100 + 10 * g + i for i in range(size))
        members = draw(st.sets(st.sampled_from(sorted(aug)), min_size=1))
        for p in sorted(members):
            out.append(
                SegmentRef(
                    prefix + str(p),
                    interval,
                    version,
                    p,
                    minor_version=minor,
                    root_partitions=roots,
                    atomic_update_group=aug,
                    core_partitions=core_of(),
                )
            )
    return out


@st.composite
def segment_sets(draw) -> list[SegmentRef]:
    keys = draw(
        st.lists(
            st.tuples(intervals, st.sampled_from(VERSIONS)),
            min_size=1,
            max_size=5,
            unique=True,
        )
    )
    out: list[SegmentRef] = []
    for (a, b), version in keys:
        out.extend(draw(chunk_segments(at(a, b), version, f"{a}-{b}-{version}-")))
    return out


def assert_same_reads(timeline, expected, segments: list[SegmentRef], queries, at=at) -> None:
    for a, b in queries:
        query = at(a, b)
        assert timeline.lookup(query) == expected.lookup(query), f"lookup {query}"
        assert timeline.lookup(query, include_incomplete=True) == expected.lookup(
            query, include_incomplete=True
        ), f"lookup {query} with incomplete chunks"
    assert timeline.fully_overshadowed() == expected.fully_overshadowed()
    for s in segments:
        assert timeline.status(s.id) == expected.status(s.id), s.id
        assert timeline.visible_intervals(s.id) == expected.visible_intervals(s.id), s.id
        assert timeline.overshadowed_by(s.id) == expected.overshadowed_by(s.id), s.id
        key = (s.interval, s.version)
        assert timeline.chunk_complete(key) == expected.chunk_complete(key), key


queries = st.lists(intervals, min_size=1, max_size=3).map(lambda qs: [(0, CELLS), *qs])


@SETTINGS
@given(segments=segment_sets(), queries=queries)
def test_timeline_matches_the_brute_force_reference(segments, queries):
    timeline = Timeline.build(segments)
    reference = ReferenceTimeline(segments, GRID)
    assert_same_reads(timeline, reference, segments, queries)


@st.composite
def histories(draw):
    """A pool of segments and a sequence of adds and removes over it."""
    pool = draw(segment_sets().filter(bool))
    initial = draw(st.sets(st.sampled_from(range(len(pool)))))
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from(range(len(pool))), st.booleans()),
            min_size=1,
            max_size=12,
        )
    )
    return pool, initial, steps


@SETTINGS
@given(history=histories(), queries=queries)
def test_incremental_adds_and_removes_equal_a_fresh_build(history, queries):
    pool, initial, steps = history
    live = {pool[i].id: pool[i] for i in sorted(initial)}
    timeline = Timeline.build(live.values())
    for index, read_now in steps:
        seg = pool[index]
        if seg.id in live:
            del live[seg.id]
            timeline.remove(seg.id)
        else:
            live[seg.id] = seg
            timeline.add(seg)
        if read_now:  # reads refresh caches; mixing them in exercises the lazy paths
            fresh = Timeline.build(live.values())
            everything = at(0, CELLS)
            assert timeline.lookup(everything) == fresh.lookup(everything)
            assert timeline.fully_overshadowed() == fresh.fully_overshadowed()
    segments = list(live.values())
    assert_same_reads(timeline, Timeline.build(segments), segments, queries)
    assert_same_reads(timeline, ReferenceTimeline(segments, GRID), segments, queries)


@SETTINGS
@given(history=histories())
def test_incremental_lookup_with_incomplete_chunks_equals_a_fresh_build(history):
    pool, initial, steps = history
    live = {pool[i].id: pool[i] for i in sorted(initial)}
    timeline = Timeline.build(live.values())
    everything = at(0, CELLS)
    timeline.lookup(everything, include_incomplete=True)  # build the cache, then keep it current
    for index, read_now in steps:
        seg = pool[index]
        if seg.id in live:
            del live[seg.id]
            timeline.remove(seg.id)
        else:
            live[seg.id] = seg
            timeline.add(seg)
        if read_now:
            fresh = Timeline.build(live.values())
            assert timeline.lookup(everything, include_incomplete=True) == fresh.lookup(
                everything, include_incomplete=True
            )
    fresh = Timeline.build(live.values())
    assert timeline.lookup(everything, include_incomplete=True) == fresh.lookup(
        everything, include_incomplete=True
    )
