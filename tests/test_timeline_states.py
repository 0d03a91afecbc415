"""The console's timeline state, computed per chunk (`Timeline.chunk_visibility`),
against the per-segment reading it replaced: each segment's share of its chunk
in a lookup of the chunk's interval. Random timelines, then random commits moved
into the state through only the chunks they touched (`states.state_moved`)."""

from __future__ import annotations

import os
from datetime import timedelta

from hypothesis import HealthCheck, given, settings

from metastore.selectors import states as state_reads
from metastore.timeline import Timeline

try:
    from tests.test_timeline_property import histories, segment_sets
except ImportError:  # tests/ itself on sys.path
    from test_timeline_property import histories, segment_sets

SETTINGS = settings(
    max_examples=int(os.environ.get("STRATA_HYPOTHESIS_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def per_segment(timeline: Timeline) -> dict[str, str]:
    """Each segment's state as the console used to compute it, one by one."""
    chunks: dict[tuple, list] = {}
    for ref in timeline.segments():
        chunks.setdefault((ref.interval, ref.version), []).append(ref)
    status = {}
    for (interval, version), members in chunks.items():
        shown: dict[str, timedelta] = {}
        for piece, ref in timeline.lookup(interval):
            shown[ref.id] = shown.get(ref.id, timedelta(0)) + (piece.end - piece.start)
        complete = timeline.chunk_complete((interval, version))
        for r in members:
            if not complete:
                status[r.id] = "incomplete"
            elif r.id not in shown:
                status[r.id] = "overshadowed"
            else:
                status[r.id] = (
                    "visible" if shown[r.id] >= interval.end - interval.start else "partial"
                )
    return status


def assert_state_reads(state, timeline: Timeline) -> None:
    expected = per_segment(timeline)
    assert dict(state.status.items()) == expected
    assert len(state.status) == len(expected)
    for sid, st in expected.items():
        assert state.status.get(sid) == st and state.status[sid] == st
    assert state.status.get("no such id") is None
    counts = dict.fromkeys(("visible", "partial", "overshadowed", "incomplete"), 0)
    for st in expected.values():
        counts[st] += 1
    assert state.counts == counts
    for c in state.chunks:
        members = [
            r for r in timeline.segments() if (r.interval, r.version) == (c.interval, c.version)
        ]
        assert c.segments == sorted(members, key=lambda r: r.partition)
        assert c.size == len(members)
        assert c.complete == timeline.chunk_complete((c.interval, c.version))
        assert c.tombstones == sum(1 for r in members if r.tombstone)
        present = {r.partition for r in members}
        assert c.partial_aug == frozenset(r.id for r in members if not r.aug <= present)
        mine = [expected[r.id] for r in members]
        assert [c.status_of(r) for r in c.segments] == [expected[r.id] for r in c.segments]
        assert (c.n_visible, c.n_partial) == (mine.count("visible"), mine.count("partial"))
        assert c.n_overshadowed == mine.count("overshadowed") + mine.count("incomplete")
        assert c.uniform_status == (mine[0] if len(set(mine)) == 1 else None)
    assert [c.interval.start for c in state.chunks] == sorted(
        r.interval.start for r in state.chunks
    )


@SETTINGS
@given(segments=segment_sets())
def test_the_state_of_a_timeline_equals_the_per_segment_reading(segments):
    timeline = Timeline.build(segments)
    assert_state_reads(state_reads.state_of(timeline, 1), timeline)


@SETTINGS
@given(history=histories())
def test_a_state_moved_through_the_touched_chunks_equals_a_fresh_one(history):
    pool, initial, steps = history
    live = {pool[i].id: pool[i] for i in sorted(initial)}
    state = state_reads.state_of(Timeline.build(live.values()), 1)
    for seq, (index, moved_now) in enumerate(steps, start=2):
        seg = pool[index]
        if state.pending_timeline is None:
            state.pending_timeline = state.timeline.copy()
        changed = state.pending_timeline
        if seg.id in live:
            del live[seg.id]
            changed.remove(seg.id)
        else:
            live[seg.id] = seg
            changed.add(seg)
            state.pending_added.append(seg)
        state.pending_spans.append((seg.interval.start, seg.interval.end))
        state.pending_seq = seq
        if moved_now:
            old = state
            state = state_reads.state_moved(old, seq)
            assert_state_reads(state, changed)
            assert_state_reads(old, old.timeline)  # the old state still reads its own timeline
    state = state_reads.state_moved(state, len(steps) + 2)
    assert_state_reads(state, Timeline.build(live.values()))
