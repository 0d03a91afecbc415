"""Named scenarios for segment visibility (SPEC §3, issue 3, seed 000)."""

from __future__ import annotations

import pytest

from metastore.intervals import Interval
from metastore.timeline import SegmentRef, Timeline

DAY = Interval.parse("2024-01-01/2024-01-02")
NEXT_DAY = Interval.parse("2024-01-02/2024-01-03")


def seg(
    seg_id: str,
    partition: int,
    *,
    interval: Interval = DAY,
    version: str = "v1",
    core: int = 0,
    minor: int = 0,
    roots: set[int] | None = None,
    aug: set[int] | None = None,
    tombstone: bool = False,
) -> SegmentRef:
    return SegmentRef(
        id=seg_id,
        interval=interval,
        version=version,
        partition=partition,
        minor_version=minor,
        root_partitions=frozenset(roots) if roots is not None else None,
        atomic_update_group=frozenset(aug) if aug is not None else None,
        core_partitions=core,
        tombstone=tombstone,
    )


def shown(timeline: Timeline, interval: Interval = DAY, **kwargs) -> list[str]:
    return [s.id for _, s in timeline.lookup(interval, **kwargs)]


def same_as_fresh_build(timeline: Timeline) -> None:
    fresh = Timeline.build(timeline.segments())
    everything = Interval.parse("2000-01-01/2100-01-01")
    assert timeline.lookup(everything) == fresh.lookup(everything)
    assert timeline.lookup(everything, include_incomplete=True) == fresh.lookup(
        everything, include_incomplete=True
    )
    assert timeline.fully_overshadowed() == fresh.fully_overshadowed()
    for s in fresh.segments():
        assert timeline.status(s.id) == fresh.status(s.id)


# --- the seed 000 example ---------------------------------------------------
#
# 1) a batch task writes 1, 2, 3 (partitions 0, 1, 2; core set of 3);
# 2) a compaction merges 2 and 3 into 4 (segment lock: minor 1, roots {1, 2})
#    while an append writes 5 (partition 3 >= core, a root of its own);
# 3) a compaction merges 4 and 5 into 6 and 7 (minor 2, one AUG {6, 7}, roots
#    {1, 2, 3}: the roots of 4 and of 5) while an append writes 8.


def seed_segments() -> dict[str, SegmentRef]:
    return {
        "1": seg("1", 0, core=3),
        "2": seg("2", 1, core=3),
        "3": seg("3", 2, core=3),
        "4": seg("4", 32768, core=3, minor=1, roots={1, 2}, aug={32768}),
        "5": seg("5", 3, core=3),
        "6": seg("6", 32769, core=3, minor=2, roots={1, 2, 3}, aug={32769, 32770}),
        "7": seg("7", 32770, core=3, minor=2, roots={1, 2, 3}, aug={32769, 32770}),
        "8": seg("8", 4, core=3),
    }


def test_seed_example_batch_then_compaction_with_concurrent_append_shows_1_4_5():
    segments = seed_segments()
    timeline = Timeline.build(segments[i] for i in "12345")
    assert sorted(shown(timeline)) == ["1", "4", "5"]
    assert timeline.fully_overshadowed() == {"2", "3"}


def test_seed_example_second_compaction_with_concurrent_append_shows_1_6_7_8():
    timeline = Timeline.build(seed_segments().values())
    assert sorted(shown(timeline)) == ["1", "6", "7", "8"]
    assert timeline.fully_overshadowed() == {"2", "3", "4", "5"}
    assert timeline.chunk_complete((DAY, "v1"))
    assert timeline.overshadowed_by("4") == {"6", "7"}
    assert timeline.overshadowed_by("2") == {"6", "7"}


def test_seed_example_removing_7_makes_its_group_partial_so_4_and_5_come_back():
    timeline = Timeline.build(seed_segments().values())
    timeline.remove("7")
    assert sorted(shown(timeline)) == ["1", "4", "5", "8"]
    assert timeline.status("6") == "overshadowed"
    assert timeline.chunk_complete((DAY, "v1"))
    same_as_fresh_build(timeline)


def test_seed_example_removing_4_keeps_1_6_7_8_because_6_and_7_carry_its_roots():
    timeline = Timeline.build(seed_segments().values())
    timeline.remove("4")
    assert sorted(shown(timeline)) == ["1", "6", "7", "8"]
    assert timeline.status("2") == "overshadowed"
    assert timeline.status("3") == "overshadowed"
    same_as_fresh_build(timeline)


def test_seed_example_removing_4_then_7_brings_back_2_3_and_5():
    timeline = Timeline.build(seed_segments().values())
    timeline.remove("4")
    timeline.remove("7")
    assert sorted(shown(timeline)) == ["1", "2", "3", "5", "8"]
    assert timeline.fully_overshadowed() == {"6"}
    same_as_fresh_build(timeline)


def test_seed_example_built_incrementally_in_publish_order_equals_fresh_build():
    segments = seed_segments()
    timeline = Timeline()
    for seg_id in "12345678":
        timeline.add(segments[seg_id])
        same_as_fresh_build(timeline)
    assert sorted(shown(timeline)) == ["1", "6", "7", "8"]


# --- inside one chunk -------------------------------------------------------


def test_root_segments_and_appends_of_one_chunk_are_all_visible_in_partition_order():
    timeline = Timeline.build([seg("b", 1, core=2), seg("c", 2, core=2), seg("a", 0, core=2)])
    assert shown(timeline) == ["a", "b", "c"]
    assert all(timeline.status(i) == "visible" for i in "abc")
    assert timeline.fully_overshadowed() == set()


def test_overwrite_group_whose_roots_cover_part_of_the_root_partitions_hides_only_those():
    timeline = Timeline.build(
        [
            seg("r0", 0, core=3),
            seg("r1", 1, core=3),
            seg("r2", 2, core=3),
            seg("c", 32768, core=3, minor=1, roots={0, 1}, aug={32768}),
        ]
    )
    assert shown(timeline) == ["r2", "c"]
    assert timeline.fully_overshadowed() == {"r0", "r1"}
    assert timeline.chunk_complete((DAY, "v1"))


def test_newer_partial_group_never_overshadows_and_older_full_group_stays_visible():
    timeline = Timeline.build(
        [
            seg("r0", 0, core=2),
            seg("r1", 1, core=2),
            seg("old", 32768, core=2, minor=1, roots={0, 1}, aug={32768}),
            # a newer compaction published {32769, 32770}; only one of them is used
            seg("new", 32769, core=2, minor=2, roots={0, 1}, aug={32769, 32770}),
        ]
    )
    assert shown(timeline) == ["old"]
    assert timeline.status("new") == "overshadowed"
    assert timeline.chunk_complete((DAY, "v1"))


def test_removing_one_member_of_a_full_group_falls_back_to_the_older_complete_set():
    timeline = Timeline.build(
        [
            seg("r0", 0, core=2),
            seg("r1", 1, core=2),
            seg("c1", 32768, core=2, minor=1, roots={0, 1}, aug={32768, 32769}),
            seg("c2", 32769, core=2, minor=1, roots={0, 1}, aug={32768, 32769}),
        ]
    )
    assert shown(timeline) == ["c1", "c2"]
    timeline.remove("c2")
    assert shown(timeline) == ["r0", "r1"]
    assert timeline.status("c1") == "overshadowed"
    assert timeline.chunk_complete((DAY, "v1"))
    same_as_fresh_build(timeline)


def test_partial_group_is_a_last_resort_shown_only_when_nothing_else_covers_its_roots():
    # The roots it replaced are gone too: the partial group is all that is left,
    # so it is shown, and the chunk is incomplete.
    timeline = Timeline.build(
        [
            seg("r0", 0, core=2),
            seg("c1", 32768, core=2, minor=1, roots={1}, aug={32768, 32769}),
        ]
    )
    assert shown(timeline, include_incomplete=True) == ["r0", "c1"]
    assert not timeline.chunk_complete((DAY, "v1"))
    assert shown(timeline) == []
    assert timeline.fully_overshadowed() == {"r0", "c1"}


def test_a_partial_group_is_never_shown_beside_the_data_it_replaces():
    timeline = Timeline.build(
        [
            seg("r0", 0, core=2),
            seg("r1", 1, core=2),
            seg("c1", 32768, core=2, minor=1, roots={2}, aug={32768, 32769}),
        ]
    )
    assert shown(timeline, include_incomplete=True) == ["r0", "r1", "c1"]
    assert not timeline.chunk_complete((DAY, "v1"))
    timeline.add(seg("a2", 2, core=2))  # the appended root it compacted is used again
    assert shown(timeline) == ["r0", "r1", "a2"]
    assert timeline.chunk_complete((DAY, "v1"))
    same_as_fresh_build(timeline)


def test_of_two_partial_groups_sharing_a_root_only_the_higher_minor_is_shown():
    timeline = Timeline.build(
        [
            seg("a", 32768, core=1, minor=1, roots={0}, aug={32768, 32769}),
            seg("b", 32770, core=1, minor=2, roots={0}, aug={32770, 32771}),
        ]
    )
    assert shown(timeline, include_incomplete=True) == ["b"]


def test_full_groups_stack_across_minor_versions():
    timeline = Timeline.build(
        [
            seg("r0", 0, core=2),
            seg("r1", 1, core=2),
            seg("m1", 32768, core=2, minor=1, roots={0}, aug={32768}),
            seg("m2", 32769, core=2, minor=2, roots={0, 1}, aug={32769}),
        ]
    )
    assert shown(timeline) == ["m2"]
    timeline.remove("m2")
    assert shown(timeline) == ["r1", "m1"]
    same_as_fresh_build(timeline)


def test_chunk_missing_a_core_partition_is_incomplete_and_appends_never_change_the_core():
    timeline = Timeline.build([seg("r0", 0, core=2), seg("app", 2, core=2)])
    assert not timeline.chunk_complete((DAY, "v1"))
    assert shown(timeline) == []
    timeline.add(seg("r1", 1, core=2))
    assert shown(timeline) == ["r0", "r1", "app"]


def test_largest_core_partitions_of_a_chunk_counts():
    timeline = Timeline.build([seg("r0", 0, core=1), seg("r1", 1, core=2)])
    assert timeline.chunk_complete((DAY, "v1"))
    timeline.add(seg("r2", 2, core=3))
    assert timeline.chunk_complete((DAY, "v1"))
    timeline.add(seg("x", 4, core=5))
    assert not timeline.chunk_complete((DAY, "v1"))
    timeline.remove("x")
    assert timeline.chunk_complete((DAY, "v1"))


def test_removing_the_only_segment_claiming_a_larger_core_set_completes_the_chunk():
    timeline = Timeline.build([seg("r0", 0, core=1), seg("odd", 3, core=2)])
    assert not timeline.chunk_complete((DAY, "v1"))
    timeline.remove("odd")
    assert timeline.chunk_complete((DAY, "v1"))
    assert shown(timeline) == ["r0"]


def test_appends_into_an_empty_interval_at_epoch_form_a_complete_chunk():
    epoch = "1970-01-01T00:00:00.000Z"
    timeline = Timeline.build([seg("j1", 0, version=epoch), seg("j2", 1, version=epoch)])
    assert shown(timeline) == ["j1", "j2"]


# --- across chunks ----------------------------------------------------------


def test_newer_complete_version_overshadows_older_chunk():
    timeline = Timeline.build([seg("old", 0, version="v1"), seg("new", 0, version="v2")])
    assert shown(timeline) == ["new"]
    assert timeline.status("old") == "overshadowed"
    assert timeline.overshadowed_by("old") == {"new"}
    assert timeline.fully_overshadowed() == {"old"}


def test_incomplete_chunk_does_not_overshadow_an_older_complete_one():
    timeline = Timeline.build(
        [
            seg("old", 0, version="v1", core=1),
            seg("new0", 0, version="v2", core=2),  # partition 1 of v2 is missing
        ]
    )
    assert shown(timeline) == ["old"]
    assert timeline.status("old") == "visible"
    assert not timeline.chunk_complete((DAY, "v2"))
    assert timeline.overshadowed_by("new0") == set()


def test_lookup_with_incomplete_chunks_shows_them_and_marks_them_incomplete():
    timeline = Timeline.build(
        [seg("old", 0, version="v1", core=1), seg("new0", 0, version="v2", core=2)]
    )
    assert shown(timeline, include_incomplete=True) == ["new0"]
    [piece] = timeline.lookup_pieces(DAY, include_incomplete=True)
    assert (piece.interval, piece.segment.id, piece.complete) == (DAY, "new0", False)
    [piece] = timeline.lookup_pieces(DAY, include_incomplete=False)
    assert (piece.segment.id, piece.complete) == ("old", True)


def test_tombstone_hides_older_data():
    timeline = Timeline.build(
        [seg("data", 0, version="v1"), seg("tomb", 0, version="v2", tombstone=True)]
    )
    pieces = timeline.lookup(DAY)
    assert [(iv, s.id, s.tombstone) for iv, s in pieces] == [(DAY, "tomb", True)]
    assert timeline.status("data") == "overshadowed"


def test_tombstone_with_an_append_at_its_version_shows_the_append():
    timeline = Timeline.build(
        [
            seg("data", 0, version="v1"),
            seg("tomb", 0, version="v2", tombstone=True),
            seg("append", 1, version="v2"),
        ]
    )
    assert shown(timeline) == ["tomb", "append"]
    assert [s.id for _, s in timeline.lookup(DAY) if not s.tombstone] == ["append"]
    assert timeline.fully_overshadowed() == {"data"}


def hour(h: int) -> Interval:
    return Interval.parse(f"2024-01-01T{h:02d}/2024-01-01T{h + 1:02d}")


def test_hour_segments_of_a_newer_version_over_a_day_leave_the_rest_visible_as_a_partial_piece():
    # SPEC §8 scenario 11: 3 HOURs replaced, one of them with a tombstone.
    timeline = Timeline.build(
        [
            seg("day", 0, version="v1"),
            seg("h5", 0, interval=hour(5), version="v2"),
            seg("h6", 0, interval=hour(6), version="v2", tombstone=True),
            seg("h7", 0, interval=hour(7), version="v2"),
        ]
    )
    assert timeline.status("day") == "partial"
    assert timeline.visible_intervals("day") == [
        Interval.parse("2024-01-01T00/2024-01-01T05"),
        Interval.parse("2024-01-01T08/2024-01-02T00"),
    ]
    assert [(str(iv), s.id) for iv, s in timeline.lookup(DAY)] == [
        ("2024-01-01T00:00:00.000Z/2024-01-01T05:00:00.000Z", "day"),
        ("2024-01-01T05:00:00.000Z/2024-01-01T06:00:00.000Z", "h5"),
        ("2024-01-01T06:00:00.000Z/2024-01-01T07:00:00.000Z", "h6"),
        ("2024-01-01T07:00:00.000Z/2024-01-01T08:00:00.000Z", "h7"),
        ("2024-01-01T08:00:00.000Z/2024-01-02T00:00:00.000Z", "day"),
    ]
    assert timeline.overshadowed_by("day") == {"h5", "h6", "h7"}
    assert timeline.fully_overshadowed() == set()
    # Removing the hours gives the whole day back.
    for seg_id in ("h5", "h6", "h7"):
        timeline.remove(seg_id)
    assert timeline.status("day") == "visible"
    assert timeline.visible_intervals("day") == [DAY]
    same_as_fresh_build(timeline)


def test_newer_day_over_older_hours_overshadows_them_fully():
    timeline = Timeline.build(
        [seg(f"h{h}", 0, interval=hour(h), version="v1") for h in range(24)]
        + [seg("day", 0, version="v2")]
    )
    assert shown(timeline) == ["day"]
    assert timeline.fully_overshadowed() == {f"h{h}" for h in range(24)}
    timeline.remove("day")
    assert len(shown(timeline)) == 24


def test_lookup_clips_pieces_to_the_query_and_orders_them_in_time():
    timeline = Timeline.build([seg("d1", 0), seg("d1b", 1), seg("d2", 0, interval=NEXT_DAY)])
    query = Interval.parse("2024-01-01T12/2024-01-02T06")
    assert [(str(iv), s.id) for iv, s in timeline.lookup(query)] == [
        ("2024-01-01T12:00:00.000Z/2024-01-02T00:00:00.000Z", "d1"),
        ("2024-01-01T12:00:00.000Z/2024-01-02T00:00:00.000Z", "d1b"),
        ("2024-01-02T00:00:00.000Z/2024-01-02T06:00:00.000Z", "d2"),
    ]
    assert timeline.lookup(Interval.parse("2024-01-05/2024-01-06")) == []
    empty = Interval(DAY.start, DAY.start)
    assert timeline.lookup(empty) == []


def test_rewriting_one_of_two_segments_at_a_higher_minor_keeps_the_other():
    # SPEC §8 scenario 12 under segment locks: s1' replaces s1 only.
    timeline = Timeline.build(
        [
            seg("s1", 0, core=2),
            seg("s2", 1, core=2),
            seg("s1'", 32768, core=2, minor=1, roots={0}, aug={32768}),
        ]
    )
    assert shown(timeline) == ["s2", "s1'"]


def test_removing_the_newer_version_brings_the_older_chunk_back():
    timeline = Timeline.build(
        [
            seg("old", 0, version="v1"),
            seg("new0", 0, version="v2", core=2),
            seg("new1", 1, version="v2", core=2),
        ]
    )
    assert shown(timeline) == ["new0", "new1"]
    timeline.remove("new1")
    assert shown(timeline) == ["old"]
    timeline.add(seg("new1", 1, version="v2", core=2))
    assert shown(timeline) == ["new0", "new1"]
    timeline.remove("new0")
    timeline.remove("new1")
    assert shown(timeline) == ["old"]
    same_as_fresh_build(timeline)


# --- the API itself ---------------------------------------------------------


def test_segment_ref_applies_defaults_and_shares_equal_partition_sets():
    a = SegmentRef("a", DAY, "v1", 5)
    assert a.roots == {5} and a.aug == {5}
    b = SegmentRef("b", DAY, "v1", 6, root_partitions=[1, 2], atomic_update_group={6})
    c = SegmentRef("c", DAY, "v1", 7, root_partitions=frozenset({2, 1}))
    assert b.root_partitions == frozenset({1, 2})
    assert b.root_partitions is c.root_partitions


def test_segment_ref_rejects_empty_interval_and_negative_numbers():
    with pytest.raises(ValueError, match="empty"):
        SegmentRef("a", Interval(DAY.start, DAY.start), "v1", 0)
    with pytest.raises(ValueError, match=">= 0"):
        SegmentRef("a", DAY, "v1", -1)


def test_two_segments_claiming_one_partition_of_a_chunk_are_rejected():
    with pytest.raises(ValueError, match="partition 0"):
        Timeline.build([seg("a", 0), seg("b", 0)])
    with pytest.raises(ValueError, match="twice"):
        Timeline.build([seg("a", 0), seg("a", 1)])


def test_adding_the_same_segment_again_does_nothing_and_a_changed_one_replaces_it():
    timeline = Timeline.build([seg("a", 0, core=1)])
    timeline.add(seg("a", 0, core=1))
    assert len(timeline) == 1
    timeline.add(seg("a", 0, core=2))
    assert not timeline.chunk_complete((DAY, "v1"))
    assert len(timeline) == 1 and "a" in timeline


def test_unknown_segment_ids_raise_key_error():
    timeline = Timeline.build([seg("a", 0)])
    for call in (
        timeline.remove,
        timeline.status,
        timeline.visible_intervals,
        timeline.overshadowed_by,
    ):
        with pytest.raises(KeyError, match="nope"):
            call("nope")
    assert not timeline.chunk_complete((NEXT_DAY, "v1"))


def test_segments_iterates_every_segment_visible_or_not():
    segments = seed_segments()
    timeline = Timeline.build(segments.values())
    assert {s.id for s in timeline.segments()} == set(segments)
    assert timeline.get("4") is segments["4"]
    assert len(timeline) == 8


def test_empty_timeline_answers_empty():
    timeline = Timeline.build([])
    assert timeline.lookup(DAY) == []
    assert timeline.lookup(DAY, include_incomplete=True) == []
    assert timeline.fully_overshadowed() == set()
    timeline.add(seg("a", 0))
    assert shown(timeline) == ["a"]
    timeline.remove("a")
    assert shown(timeline) == []


def test_build_turns_the_garbage_collector_back_on_even_when_it_fails():
    import gc

    assert gc.isenabled()
    Timeline.build([seg("a", 0)])
    assert gc.isenabled()
    with pytest.raises(ValueError, match="appears twice"):
        Timeline.build([seg("a", 0), seg("a", 1)])
    assert gc.isenabled()
    gc.disable()
    try:
        Timeline.build([seg("a", 0)])
        assert not gc.isenabled()  # left off, as the caller had it
    finally:
        gc.enable()


def test_what_a_build_made_goes_to_the_oldest_generation_and_stays_collectable():
    import gc
    import weakref

    from metastore.timeline import collector_paused

    class Node:
        pass

    with collector_paused():
        made = [[] for _ in range(10)]
        cycle = Node()
        cycle.me = cycle
        gone = weakref.ref(cycle)
        del cycle
    assert gc.isenabled() and gc.get_freeze_count() == 0  # nothing left frozen
    assert any(o is made for o in gc.get_objects(generation=2))
    gc.collect()
    assert gone() is None  # a full collection still frees a cycle made there


def test_ref_fields_are_segment_refs_fields_and_rows_of_ref_columns_make_refs():
    import inspect

    from metastore.timeline import REF_COLUMNS, REF_FIELDS, refs_from_rows

    assert tuple(inspect.signature(SegmentRef).parameters) == REF_FIELDS
    iv = Interval.parse("2024-01-01/2024-01-02")
    rows = [
        ("a", iv.start, iv.end, "v1", 0, 0, None, None, 2, False),
        ("b", iv.start, iv.end, "v1", 1, 0, [1], "[1]", 2, False),
        ("c", iv.start, iv.end, "v1", 2, 1, "[0, 1]", [2, 3], 2, True),
    ]
    a, b, c = refs_from_rows(rows)
    assert dict(zip(REF_COLUMNS, rows[0], strict=True))["core_partitions"] == 2
    assert a == SegmentRef("a", iv, "v1", 0, core_partitions=2)
    assert b == SegmentRef("b", iv, "v1", 1, 0, {1}, {1}, 2)
    assert c == SegmentRef("c", iv, "v1", 2, 1, {0, 1}, {2, 3}, 2, True)
    assert a.interval is b.interval is c.interval


def test_fold_commits_keeps_the_net_change_in_commit_order():
    from metastore.timeline import fold_commits

    change = fold_commits([(["a", "b"], None), (["c"], ["a"]), (None, ["x"]), (["a", "x"], ["a"])])
    assert change.commits == 4
    assert list(change.added) == ["b", "c", "a", "x"]
    assert change.removed == set()
    change = fold_commits([(["a"], []), ([], ["a", "b"])])
    assert (dict(change.added), change.removed) == ({}, {"a", "b"})
    # inside one commit removals come first: an id both removed and added stays
    assert list(fold_commits([(["a"], ["a"])]).added) == ["a"]
    assert fold_commits([(["a", "b"], None), (["c"], None)], limit=2) is None
    assert fold_commits([(["a", "b"], None)], limit=2) is not None
