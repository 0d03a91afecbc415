"""The read side hands out timelines that never change (issue 24, item 3).

A `Timeline` handed to a reader is a snapshot of one commit sequence: commits are
applied to a copy (`Timeline.copy`), and the cache swaps its reference. Readers of
one timeline in many threads never see it change under them, and never race on its
lazily refreshed caches.
"""

from __future__ import annotations

import sys
import threading
from datetime import date, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metastore.intervals import Interval
from metastore.timeline import SegmentRef, Timeline

EVERYTHING = Interval.parse("2000-01-01/2100-01-01")


def _day(i: int) -> Interval:
    start = date(2024, 1, 1) + timedelta(days=i)
    return Interval.parse(f"{start}/{start + timedelta(days=1)}")


def _root(day: int, part: int, version: str = "v1", core: int = 2) -> SegmentRef:
    return SegmentRef(
        id=f"d{day}-{version}-p{part}",
        interval=_day(day),
        version=version,
        partition=part,
        core_partitions=core,
    )


def _compacted(day: int, part: int, roots: set[int], aug: set[int]) -> SegmentRef:
    # A segment-lock compaction: minor version 1 over the roots, one AUG.
    return SegmentRef(
        id=f"d{day}-v1-m{part}",
        interval=_day(day),
        version="v1",
        partition=part,
        minor_version=1,
        root_partitions=frozenset(roots),
        atomic_update_group=frozenset(aug),
        core_partitions=2,
    )


def _history(days: int) -> list[SegmentRef]:
    return [_root(d, p) for d in range(days) for p in range(2)]


def _all_views(timeline: Timeline):
    return (
        timeline.lookup(EVERYTHING),
        timeline.lookup(EVERYTHING, include_incomplete=True),
        sorted(timeline.fully_overshadowed()),
        sorted(s.id for s in timeline.segments()),
    )


def test_threads_reading_a_just_changed_timeline_do_not_race():
    """Four threads doing their first lookup on a timeline with pending changes.

    On the code this test was written against, the lazy refresh ran in every
    reader at once and raised "dictionary changed size during iteration".
    """
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    errors: list[BaseException] = []
    try:
        for trial in range(30):
            timeline = Timeline.build(_history(40))
            for d in range(40):  # each makes its chunk dirty (a group arrives)
                timeline.add(_compacted(d, 2 + trial % 3, {0, 1}, {2 + trial % 3}))
            start = threading.Barrier(4)

            def read(tl: Timeline = timeline, barrier: threading.Barrier = start) -> None:
                barrier.wait()
                try:
                    tl.lookup(EVERYTHING)
                    tl.lookup(EVERYTHING, include_incomplete=True)
                except BaseException as exc:  # noqa: BLE001 - the test reports any
                    errors.append(exc)

            threads = [threading.Thread(target=read) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(old_interval)
    assert errors == []


def test_a_copy_changes_alone():
    original = Timeline.build(_history(5))
    before = _all_views(original)
    copy = original.copy()
    copy.add(_compacted(1, 2, {0, 1}, {2}))
    copy.remove("d3-v1-p0")
    copy.add(_root(4, 0, version="v2", core=1))
    copy.add(_root(0, 2, core=2))  # an append into a complete chunk (the fast path)
    assert _all_views(original) == before
    fresh = Timeline.build(copy.segments())
    assert _all_views(copy) == _all_views(fresh)
    assert "d1-v1-p0" not in {s.id for _, s in copy.lookup(EVERYTHING)}
    assert "d1-v1-p0" in {s.id for _, s in original.lookup(EVERYTHING)}


_change = st.tuples(
    st.sampled_from(["add_root", "add_compacted", "add_append", "remove"]),
    st.integers(0, 5),
    st.integers(0, 4),
)


@settings(max_examples=150, deadline=None)
@given(start_days=st.integers(1, 6), batches=st.lists(st.lists(_change, max_size=6), max_size=5))
def test_a_chain_of_copies_equals_fresh_builds_and_never_changes_its_past(start_days, batches):
    """Each batch of changes goes to a copy of the last timeline: every timeline in
    the chain still shows what it showed when it was made, and each equals a fresh
    build of its own segments."""
    chain = [Timeline.build(_history(start_days))]
    seen = [_all_views(chain[0])]
    for batch in batches:
        nxt = chain[-1].copy()
        for kind, day, part in batch:
            _apply(nxt, kind, day, part)
        chain.append(nxt)
        seen.append(_all_views(nxt))
        assert _all_views(nxt) == _all_views(Timeline.build(nxt.segments()))
    for timeline, views in zip(chain, seen, strict=True):
        assert _all_views(timeline) == views


def _apply(timeline: Timeline, kind: str, day: int, part: int) -> None:
    try:
        if kind == "add_root":
            timeline.add(_root(day, part, version="v2", core=1 + part % 2))
        elif kind == "add_compacted":
            timeline.add(_compacted(day, 2 + part, {0, 1}, {2 + part}))
        elif kind == "add_append":
            timeline.add(_root(day, 5 + part, core=2))
        else:
            ids = sorted(s.id for s in timeline.segments())
            if ids:
                timeline.remove(ids[(day * 5 + part) % len(ids)])
    except ValueError:
        pass  # a partition already taken in that chunk: the change is refused whole


@pytest.mark.django_db(transaction=True)
def test_a_handed_out_timeline_stays_as_of_its_commit(publish):
    """`timeline_for` hands out one timeline per commit; a later commit makes a new
    one and leaves the first as it was."""
    from metastore import selectors

    publish("snap", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 2})
    first = selectors.timeline_for(datasource="snap")
    before = _all_views(first)
    publish("snap", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1})
    second = selectors.timeline_for(datasource="snap")
    assert second is not first
    assert _all_views(first) == before
    assert len(first) == 2 and len(second) == 3


def test_a_timeline_with_changes_nobody_read_yet_can_be_copied():
    """`timeline_for` copies the last timeline it handed out, which may hold changes
    no read has refreshed yet: the copy must not wait on the timeline's own lock
    (it did, forever, holding the process's cache lock)."""
    timeline = Timeline.build(_history(3))
    timeline.add(_compacted(1, 2, {0, 1}, {2}))  # a group arrives: the chunk is dirty
    copies: list[Timeline] = []
    worker = threading.Thread(target=lambda: copies.append(timeline.copy()), daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert copies, "Timeline.copy of a timeline with pending changes never returned"
    (copy,) = copies
    copy.remove("d2-v1-p0")
    assert _all_views(copy) == _all_views(Timeline.build(copy.segments()))
    assert "d2-v1-p0" in timeline


def test_a_fresh_build_answers_by_id_alike_from_many_threads_and_refuses_a_repeated_id():
    """A build makes its id index on first use (under the timeline's lock): every
    thread asking at once gets the same answers, before and after it exists."""
    segments = _history(30)
    timeline = Timeline.build(iter(segments))
    assert len(timeline) == 60 and list(timeline.segments()) == segments
    start = threading.Barrier(4)
    answers: list[list] = []

    def read() -> None:
        start.wait()
        answers.append(
            [timeline.get(s.id) for s in segments] + [s.id in timeline for s in segments]
        )

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [segments + [True] * len(segments)] * 4
    assert list(timeline.segments()) == segments
    twice = _root(5, 0)
    with pytest.raises(ValueError, match="appears twice"):
        Timeline.build([*segments, SegmentRef(twice.id, _day(9), "v9", 0)])


def _state_facts(state):
    """Everything a console state holds that a commit could change in place."""
    return (
        state.seq,
        state.timeline,
        [(c.interval, c.version, c.size, c.n_visible, c.n_overshadowed) for c in state.chunks],
        list(state.starts),
        state.extent,
        sorted(vars(state)),  # no field appears or goes
        {k: v for k, v in vars(state).items() if k not in ("rows", "_counts", "_status")},
    )


@pytest.mark.django_db(transaction=True)
def test_a_handed_out_console_state_stays_as_of_its_commit(publish):
    """The console's state of a commit is never changed when later commits are
    applied to the timeline (it once recorded them on the state it had handed out);
    the next state is a new object moved through what they touched."""
    from metastore import selectors

    publish("snapstate", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 2})
    first = selectors.timeline_state(datasource="snapstate")
    facts = _state_facts(first)
    publish("snapstate", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1})
    selectors.timeline_for(datasource="snapstate")  # applies the commit to a copy
    assert _state_facts(first) == facts
    second = selectors.timeline_state(datasource="snapstate")
    assert second is not first and second.seq > first.seq
    assert _state_facts(first) == facts
    assert second.counts["visible"] == 3 and first.counts["visible"] == 2


@pytest.mark.django_db(transaction=True)
def test_a_reader_does_not_wait_for_another_dataSource_reading_the_database(publish):
    """No database read happens under the timelines' cache lock: while one thread
    brings a stale timeline up to date (held inside its read of the commit log),
    another thread's read of a different, current dataSource's timeline finishes."""
    from django.db import connection

    from metastore import selectors

    publish("slowds", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    publish("fastds", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    selectors.timeline_for(datasource="slowds")
    selectors.timeline_for(datasource="fastds")
    publish("slowds", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1})  # now stale
    inside, release = threading.Event(), threading.Event()

    def held_in_the_log_read(execute, sql, params, many, context):
        if "metastore_commitlogentry" in sql and "added" in sql:
            inside.set()
            release.wait(30)
        return execute(sql, params, many, context)

    def slow_reader():
        try:
            with connection.execute_wrapper(held_in_the_log_read):
                selectors.timeline_for(datasource="slowds")
        finally:
            connection.close()

    def fast_reader():
        try:
            selectors.timeline_for(datasource="fastds")
        finally:
            connection.close()

    slow = threading.Thread(target=slow_reader)
    slow.start()
    try:
        assert inside.wait(30), "the stale timeline's log read never started"
        fast = threading.Thread(target=fast_reader)
        fast.start()
        fast.join(20)
        blocked = fast.is_alive()
    finally:
        release.set()
        slow.join(30)
    assert not blocked, "a read of a current timeline waited on another's database read"
