"""SPEC §8: the twelve scenarios of seeds/001, in all three lock modes, through the
real lock box services, asserting the exact visible row ids after each."""

from __future__ import annotations

from collections import Counter

import pytest

from metastore.models import PendingSegment, Segment, TaskLock
from tests.lockbox_harness import CONC, MODES, SEG, TC, Actor, World, hour, rows, run

pytestmark = pytest.mark.django_db

S1 = rows("s1", range(24))
J = rows("j", [1, 5, 10])
J1 = rows("j1", [3])
J2 = rows("j2", [7])
J3 = rows("j3", [9])
R = rows("r", [0, 6, 12])


def ids(*groups) -> Counter:
    return Counter(r.id for g in groups for r in g)


@pytest.fixture
def world() -> World:
    w = World()
    w.load()
    return w


def actor(world, name, kind, mode, **kw) -> Actor:
    return Actor(world, name, kind, mode, **kw)


def assert_no_leftovers(world: World) -> None:
    assert TaskLock.objects.count() == 0
    assert world.visible_ids() == world.model, "visible rows differ from the serial replay"


@pytest.mark.parametrize("mode", MODES)
def test_1_concurrent_appends_both_succeed(world, mode):
    a = {
        "j1": actor(world, "j1", "append", mode, new_rows=J1),
        "j2": actor(world, "j2", "append", mode, new_rows=J2),
    }
    run(a, ["j1", "j1", "j2", "j2", "j1", "j1", "j2", "j2"])
    assert world.visible_ids() == ids(S1, J1, J2)
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_2_failed_append_leaves_the_other_and_later_append(world, mode):
    a = {
        "j1": actor(
            world, "j1", "append", mode, new_rows=J1, program=["lock", "read", "write", "fail"]
        ),
        "j2": actor(world, "j2", "append", mode, new_rows=J2),
    }
    run(a, ["j1", "j1", "j1", "j2", "j2", "j1", "j2", "j2"])
    j1_partition = a["j1"].allocation.partitions[0]
    j3 = {"j3": actor(world, "j3", "append", mode, new_rows=J3)}
    run(j3, ["j3"] * 4)
    assert world.visible_ids() == ids(S1, J2, J3)
    # partition numbers are never reused, even of a failed append
    assert j3["j3"].allocation.partitions[0] != j1_partition
    assert PendingSegment.objects.filter(partition=j1_partition).count() == 1
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_3_compaction_while_append_both_succeed(world, mode):
    a = {
        "c": actor(world, "c", "compact", mode),
        "j": actor(world, "j", "append", mode, new_rows=J),
    }
    run(a, ["c", "c", "j", "j", "j", "j", "c", "c"])
    assert world.visible_ids() == ids(S1, J)
    if mode == TC:
        assert a["c"].outcome == "revoked"  # j (50) preempts c (25)
        assert world.visible_writers() == {"s1", "j"}
    else:
        assert a["c"].outcome == "committed"
        assert world.visible_writers() == {"c", "j"}  # compact(s1) + j
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_4_compaction_fails_while_append_succeeds(world, mode):
    a = {
        "c": actor(world, "c", "compact", mode, program=["lock", "read", "write", "fail"]),
        "j": actor(world, "j", "append", mode, new_rows=J),
    }
    run(a, ["c", "c", "j", "j", "j", "j", "c", "c"])
    assert world.visible_ids() == ids(S1, J)
    assert world.visible_writers() == {"s1", "j"}
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_5_append_then_compaction_both_succeed(world, mode):
    a = {
        "j": actor(world, "j", "append", mode, new_rows=J),
        "c": actor(world, "c", "compact", mode),
    }
    run(a, ["j", "j", "j", "c", "c", "c", "c", "j"])
    assert world.visible_ids() == ids(S1, J)
    if mode == TC:
        # c waited for j, then compacted s1 + j
        assert world.visible_writers() == {"c"}
    else:
        assert world.visible_writers() == {"c", "j"}
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_6_replace_fails_while_append(world, mode):
    a = {
        "r": actor(
            world, "r", "replace", mode, new_rows=R, program=["lock", "read", "write", "fail"]
        ),
        "j": actor(world, "j", "append", mode, new_rows=J),
    }
    run(a, ["r", "r", "r", "j", "j", "j", "r", "j", "j"])
    assert world.visible_ids() == ids(S1, J)
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_7_replace_and_append_both_succeed(world, mode):
    a = {
        "r": actor(world, "r", "replace", mode, new_rows=R),
        "j": actor(world, "j", "append", mode, new_rows=J),
    }
    run(a, ["r", "r", "r", "j", "j", "j", "r", "j"])
    assert world.visible_ids() == ids(R, J)
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_8_append_commits_after_replace_requested_its_lock(world, mode):
    a = {
        "j": actor(world, "j", "append", mode, new_rows=J),
        "r": actor(world, "r", "replace", mode, new_rows=R),
    }
    run(a, ["j", "j", "j", "r", "j", "r", "r", "r"])
    if mode == CONC:
        assert world.visible_ids() == ids(R, J)  # j upgraded onto r's version
        assert Segment.objects.exclude(upgraded_from="").count() == 1
    else:
        assert world.visible_ids() == ids(R)  # r waited and replaced s1 + j
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_9_append_commits_then_replace(world, mode):
    a = {
        "j": actor(world, "j", "append", mode, new_rows=J),
        "r": actor(world, "r", "replace", mode, new_rows=R),
    }
    run(a, ["j"] * 4 + ["r"] * 4)
    assert world.visible_ids() == ids(R)
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_10a_replace_preempts_running_compaction(world, mode):
    a = {
        "c": actor(world, "c", "compact", mode),
        "r": actor(world, "r", "replace", mode, new_rows=R),
    }
    run(a, ["c", "c", "r", "r", "r", "r", "c", "c"])
    assert a["c"].outcome == "revoked"
    assert world.visible_ids() == ids(R)
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_10b_compaction_waits_and_compacts_the_replacement(world, mode):
    a = {
        "r": actor(world, "r", "replace", mode, new_rows=R),
        "c": actor(world, "c", "compact", mode),
    }
    run(a, ["r", "r", "r", "c", "r", "c", "c", "c"])
    assert a["c"].outcome == "committed"
    assert world.visible_ids() == ids(R)  # never compact(s1) over r
    assert world.visible_writers() == {"c"}
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_11_replace_three_hours_with_drop_existing_partially_overshadows(world, mode):
    hours = hour(2).start, hour(5).start
    from metastore.intervals import Interval

    r_rows = rows("r", [2, 3])  # hour 4 gets no row: a tombstone
    a = {
        "r": actor(
            world,
            "r",
            "replace",
            mode,
            new_rows=r_rows,
            interval=Interval(*hours),
            drop_existing=True,
        )
    }
    run(a, ["r"] * 4)
    kept = [r for r in S1 if r.hour not in (2, 3, 4)]
    assert world.visible_ids() == ids(kept, r_rows)
    tombstones = Segment.objects.filter(tombstone=True)
    assert [t.interval for t in tombstones] == [hour(4)]
    s1 = Segment.objects.get(created_by__isnull=False, version__lt=tombstones[0].version)
    from metastore.selectors import timeline_for

    assert timeline_for(datasource="wiki").status(s1.id) == "partial"
    assert_no_leftovers(world)


@pytest.mark.parametrize("mode", MODES)
def test_12_rewrite_one_segment_of_two_keeps_the_other(mode):
    world = World()
    s1, s2 = rows("s1", range(0, 12)), rows("s2", range(12, 24))
    world.load(partitions=[s1, s2])
    first = Segment.objects.get(partition=0)
    c = actor(world, "c", "compact", mode, input_ids=[first.id])
    run({"c": c}, ["c"] * 4)
    assert world.visible_ids() == ids(s1, s2)
    if mode == SEG:
        # s1' at a higher minor version; s2 untouched and never locked
        assert world.visible_writers() == {"c", "s1"}
        newest = Segment.objects.order_by("-minor_version").first()
        assert newest.minor_version == 1 and newest.partition >= 32768
        assert newest.root_partitions == [0]
    else:
        # s2 re-registered at the new version: same file, no rewrite
        copy = Segment.objects.exclude(upgraded_from="").get()
        assert copy.location == Segment.objects.get(id=copy.upgraded_from).location
        assert copy.version > first.version
    assert_no_leftovers(world)
