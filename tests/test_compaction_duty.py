"""The auto-compaction duty's decisions, pure: facts in, (interval, status, reason) out."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from metastore.compaction_state import (
    compaction_mismatch,
    compaction_task_spec,
    desired_state,
    validate_compaction_config,
)
from metastore.druid.errors import SpecError
from metastore.duties.compaction import (
    AWAITING,
    COMPACTED,
    RUNNING,
    SKIPPED,
    Facts,
    LockFact,
    SegmentFact,
    TaskFact,
    allocate_slots,
    candidate_intervals,
    plan_datasource,
    slot_budget,
    snapshot,
)
from metastore.intervals import Interval

NOW = datetime(2024, 1, 20, tzinfo=UTC)


def day(d: int) -> Interval:
    return Interval.parse(f"2024-01-{d:02d}/2024-01-{d + 1:02d}")


def hour(d: int, h: int) -> Interval:
    start = datetime(2024, 1, d, h, tzinfo=UTC)
    return Interval(start, start + timedelta(hours=1))


def config(**overrides):
    raw = {
        "dataSource": "wiki",
        "skipOffsetFromLatest": "P1D",
        "granularitySpec": {"segmentGranularity": "DAY"},
        **overrides,
    }
    return validate_compaction_config(raw)


def compacted_state(cfg, **over):
    """The state a compaction with `cfg` records."""
    desired = desired_state(cfg)
    return {
        "partitionsSpec": desired["partitionsSpec"],
        "dimensionsSpec": {"dimensions": [{"name": "page", "type": "string"}]},
        "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
        "granularitySpec": {
            "segmentGranularity": "DAY",
            "queryGranularity": "NONE",
            "rollup": True,
            **over,
        },
        "transformSpec": None,
        "indexSpec": {"format": "parquet", "compression": "snappy"},
    }


def seg(iv: Interval, n: int = 0, *, size=100, state=None, by=None, upgraded=False, tomb=False):
    return SegmentFact(
        id=f"s_{iv.start:%d%H}_{n}",
        interval=iv,
        size_bytes=size,
        compaction_state=state,
        tombstone=tomb,
        created_by=by,
        upgraded=upgraded,
    )


def by_interval(statuses):
    return {st.interval: st for st in statuses}


def test_pure_modules_load_neither_django_nor_spark():
    code = (
        "import sys, metastore.duties.compaction, metastore.compaction_state; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'pyspark')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hourly_segments_group_into_days_newest_first_past_the_skip_offset():
    cfg = config()
    visible = tuple(seg(hour(d, h)) for d in (15, 16, 17) for h in (0, 5))
    plan = plan_datasource(cfg, Facts("wiki", visible), now=NOW)
    assert [st.interval for st in plan] == [day(17), day(16), day(15)]
    # The latest data ends at 17T06; one day back is 16T06: day 16 ends after it.
    assert [st.status for st in plan] == [SKIPPED, SKIPPED, AWAITING]
    assert {st.code for st in plan[:2]} == {"SKIP_OFFSET"}
    assert "P1D" in plan[0].reason
    assert plan[2].reason == "not compacted yet" and plan[2].segments == 2 and plan[2].bytes == 200


def test_skip_offset_is_measured_from_the_latest_data_not_from_now():
    cfg = config(skipOffsetFromLatest="PT0S")
    visible = (seg(day(1)), seg(day(2)))
    plan = plan_datasource(cfg, Facts("wiki", visible), now=NOW + timedelta(days=300))
    assert [st.status for st in plan] == [AWAITING, AWAITING]


def test_already_compacted_interval_is_compacted_and_late_data_makes_it_eligible_again():
    cfg = config(skipOffsetFromLatest="PT0S")
    state = compacted_state(cfg)
    facts = Facts("wiki", (seg(day(3), state=state, by="c1"),))
    (st,) = plan_datasource(cfg, facts, now=NOW)
    assert (st.status, st.code) == (COMPACTED, "ALREADY_COMPACTED")
    late = Facts("wiki", (seg(day(3), state=state, by="c1"), seg(day(3), 1, by="append")))
    (st,) = plan_datasource(cfg, late, now=NOW)
    assert (st.status, st.reason) == (AWAITING, "not compacted yet")


def test_a_config_change_makes_compacted_intervals_eligible_naming_the_mismatch():
    old = config(skipOffsetFromLatest="PT0S")
    new = config(
        skipOffsetFromLatest="PT0S",
        granularitySpec={"segmentGranularity": "DAY", "queryGranularity": "HOUR"},
    )
    facts = Facts("wiki", (seg(day(3), state=compacted_state(old)),))
    (st,) = plan_datasource(new, facts, now=NOW)
    assert st.status == AWAITING
    assert st.reason == '\'queryGranularity\' mismatch: required["HOUR"], current["NONE"]'


def test_mismatch_checks_run_in_druids_order():
    cfg = config()
    desired = desired_state(cfg)
    a, b = compacted_state(cfg), compacted_state(cfg, rollup=False)
    assert compaction_mismatch([a, None], desired) == "not compacted yet"
    assert compaction_mismatch([a, b], desired) == "segments have different last compaction states"
    other = {**a, "partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 10}}
    assert compaction_mismatch([other], desired).startswith("'partitionsSpec' mismatch")
    hourly = compacted_state(cfg, segmentGranularity="HOUR")
    assert compaction_mismatch([hourly], desired).startswith("'segmentGranularity' mismatch")
    assert compaction_mismatch([a], desired) is None


def test_locks_skip_an_interval_but_append_locks_do_not_with_concurrent_locks():
    cfg = config(skipOffsetFromLatest="PT0S")
    visible = (seg(day(3)), seg(day(4)))
    locks = (LockFact("idx1", day(3), "EXCLUSIVE"), LockFact("app1", day(4), "APPEND"))
    plan = by_interval(plan_datasource(cfg, Facts("wiki", visible, locks), now=NOW))
    assert (plan[day(3)].status, plan[day(3)].code, plan[day(3)].task_id) == (
        SKIPPED,
        "INTERVAL_LOCKED",
        "idx1",
    )
    assert "locked by task idx1" in plan[day(3)].reason
    assert plan[day(4)].status == AWAITING
    plain = config(skipOffsetFromLatest="PT0S", taskContext={"useConcurrentLocks": False})
    plan = by_interval(plan_datasource(plain, Facts("wiki", visible, locks), now=NOW))
    assert plan[day(4)].code == "INTERVAL_LOCKED"


def test_append_locks_do_not_skip_an_interval_whose_task_takes_replace_locks():
    """The duty asks `locking.ignores_append_locks` of the context its task gets:
    `taskLockType: REPLACE` takes REPLACE locks without `useConcurrentLocks`, and
    a REPLACE lock does not wait on an APPEND lock; an EXCLUSIVE one does."""
    visible = (seg(day(3)), seg(day(4)))
    locks = (LockFact("idx1", day(3), "EXCLUSIVE"), LockFact("app1", day(4), "APPEND"))
    replace = config(
        skipOffsetFromLatest="PT0S",
        taskContext={"useConcurrentLocks": False, "taskLockType": "REPLACE"},
    )
    plan = by_interval(plan_datasource(replace, Facts("wiki", visible, locks), now=NOW))
    assert plan[day(4)].status == AWAITING
    assert plan[day(3)].code == "INTERVAL_LOCKED"
    exclusive = config(
        skipOffsetFromLatest="PT0S",
        taskContext={"useConcurrentLocks": False, "taskLockType": "EXCLUSIVE"},
    )
    plan = by_interval(plan_datasource(exclusive, Facts("wiki", visible, locks), now=NOW))
    assert plan[day(4)].code == "INTERVAL_LOCKED"


def test_input_over_input_segment_size_bytes_is_skipped():
    cfg = config(skipOffsetFromLatest="PT0S", inputSegmentSizeBytes=150)
    visible = (seg(hour(3, 1)), seg(hour(3, 2)), seg(hour(4, 23)))
    plan = by_interval(plan_datasource(cfg, Facts("wiki", visible), now=NOW))
    assert plan[day(3)].code == "INPUT_TOO_LARGE" and "200 bytes" in plan[day(3)].reason
    assert plan[day(4)].status == AWAITING


def test_running_compaction_and_failed_attempts_with_retry_time():
    cfg = config(skipOffsetFromLatest="PT0S")
    visible = (seg(day(3)), seg(day(4)), seg(day(5)))
    ended = NOW - timedelta(seconds=30)
    job4, job5 = compaction_task_spec(cfg, day(4)), compaction_task_spec(cfg, day(5))
    tasks = (
        TaskFact("c3", day(3), "RUNNING", True, by_duty=True),
        TaskFact("c4a", day(4), "FAILED", False, ended - timedelta(hours=1), "boom", True, job4),
        TaskFact("c4b", day(4), "FAILED", False, ended, "disk full", True, job4),
        TaskFact("c5", day(5), "FAILED", False, NOW - timedelta(minutes=5), "old", True, job5),
    )
    plan = by_interval(plan_datasource(cfg, Facts("wiki", visible, (), tasks), now=NOW))
    assert (plan[day(3)].status, plan[day(3)].task_id) == (RUNNING, "c3")
    failed = plan[day(4)]
    assert (failed.status, failed.code, failed.task_id) == (SKIPPED, "LAST_ATTEMPT_FAILED", "c4b")
    # Two failures in a row: waits two periods (1 min base) after the last one.
    assert failed.next_retry == ended + timedelta(minutes=2)
    assert "disk full" in failed.reason and "2 failure(s)" in failed.reason
    assert plan[day(5)].status == AWAITING  # its retry time has passed


def test_output_that_never_matches_is_not_compacted_forever():
    cfg = config(skipOffsetFromLatest="PT0S")
    wrong = compacted_state(cfg, segmentGranularity="HOUR")
    job = compaction_task_spec(cfg, day(3))
    tasks = (TaskFact("c1", day(3), "SUCCESS", False, NOW, "", True, job),)
    facts = Facts("wiki", (seg(day(3), state=wrong, by="c1"),), (), tasks)
    (st,) = plan_datasource(cfg, facts, now=NOW)
    assert st.code == "OUTPUT_MISMATCH" and "c1" in st.reason
    # ...but an append carried onto its version afterwards makes it eligible again.
    carried = seg(day(3), 1, by="c1", upgraded=True)
    facts = Facts("wiki", (seg(day(3), state=wrong, by="c1"), carried), (), tasks)
    (st,) = plan_datasource(cfg, facts, now=NOW)
    assert st.status == AWAITING


def test_tombstones_alone_are_not_compacted():
    cfg = config(skipOffsetFromLatest="PT0S")
    plan = by_interval(
        plan_datasource(cfg, Facts("wiki", (seg(day(3), tomb=True), seg(day(4)))), now=NOW)
    )
    assert plan[day(3)].code == "ONLY_TOMBSTONES"
    assert snapshot("wiki", list(plan.values()), status="RUNNING")["intervalCountSkipped"] == 0


def test_a_short_slot_takes_the_awaiting_neighbours_along_in_one_task():
    # Late data made three days eligible at once and one slot is free: one task
    # compacts the three (not three tasks in turn); day 1 is not next to them.
    cfg = config(skipOffsetFromLatest="PT0S")
    visible = tuple(seg(day(d)) for d in (1, 3, 4, 5))
    plan = plan_datasource(cfg, Facts("wiki", visible), now=NOW)
    out = by_interval(
        allocate_slots({"wiki": plan}, used=0, budget=1, batch_bytes={"wiki": 10**9})["wiki"]
    )
    three = Interval.parse("2024-01-03/2024-01-06")
    assert {iv for iv, st in out.items() if st.submit} == {day(3), day(4), day(5)}
    assert {out[day(d)].task_interval for d in (3, 4, 5)} == {three}
    assert out[day(1)].code == "NO_SLOT" and "(1 of 1 used)" in out[day(1)].reason
    # Within inputSegmentSizeBytes only (100 bytes a day), and never without a batch size.
    out = allocate_slots({"wiki": plan}, used=0, budget=1, batch_bytes={"wiki": 250})["wiki"]
    assert [st.interval for st in out if st.submit] == [day(5), day(4)]
    out = allocate_slots({"wiki": plan}, used=0, budget=1)["wiki"]
    assert [(st.interval, st.task_interval) for st in out if st.submit] == [(day(5), None)]


def test_a_task_that_took_neighbours_along_counts_for_each_of_them():
    cfg = config(skipOffsetFromLatest="PT0S")
    three = Interval.parse("2024-01-03/2024-01-06")
    job = compaction_task_spec(cfg, three)
    failed = (TaskFact("c", three, "FAILED", False, NOW, "boom", True, job),)
    visible = (seg(day(3)), seg(day(4)))
    plan = by_interval(plan_datasource(cfg, Facts("wiki", visible, (), failed), now=NOW))
    assert plan[day(4)].code == "LAST_ATTEMPT_FAILED" and "task c" in plan[day(4)].reason
    ok = (TaskFact("c", three, "SUCCESS", False, NOW, "", True, job),)
    plan = plan_datasource(cfg, Facts("wiki", (seg(day(3), by="c"),), (), ok), now=NOW)
    assert plan[0].last_compacted_at == NOW


def test_segments_across_buckets_make_one_candidate():
    two_days = Interval.parse("2024-01-03/2024-01-05")
    groups = candidate_intervals((seg(two_days), seg(hour(4, 3)), seg(hour(6, 1))), "DAY")
    assert [iv for iv, _ in groups] == [two_days, day(6)]
    assert len(groups[0][1]) == 2


def test_slots_are_shared_between_datasources_in_turn_and_never_exceeded():
    def awaiting(ds, n):
        cfg = config(dataSource=ds, skipOffsetFromLatest="PT0S")
        return plan_datasource(cfg, Facts(ds, tuple(seg(day(d)) for d in range(1, n + 1))), now=NOW)

    plans = allocate_slots({"a": awaiting("a", 4), "b": awaiting("b", 2)}, used=1, budget=4)
    submitted = {ds: [st.interval for st in p if st.submit] for ds, p in plans.items()}
    assert submitted == {"a": [day(4), day(3)], "b": [day(2)]}  # 3 free: a, b, a
    waiting = [st for p in plans.values() for st in p if not st.submit]
    assert {st.code for st in waiting} == {"NO_SLOT"}
    assert all("(4 of 4 used)" in st.reason for st in waiting)
    none_free = allocate_slots({"a": awaiting("a", 2)}, used=5, budget=4)
    assert not any(st.submit for st in none_free["a"])
    # Taking neighbours along never takes another dataSource's turn, nor a slot.
    batched = allocate_slots(
        {"a": awaiting("a", 4), "b": awaiting("b", 2)},
        used=2,
        budget=4,
        batch_bytes={"a": 10**9, "b": 10**9},
    )
    tasks = {
        ds: {st.task_interval or st.interval for st in p if st.submit} for ds, p in batched.items()
    }
    assert tasks == {
        "a": {Interval.parse("2024-01-01/2024-01-05")},
        "b": {Interval.parse("2024-01-01/2024-01-03")},
    }


def test_slot_budget_is_the_ratio_capped_by_the_maximum_and_at_least_one():
    assert slot_budget(10, 0.1, 2147483647) == 1
    assert slot_budget(2, 0.1, 5) == 1
    assert slot_budget(40, 0.5, 5) == 5
    assert slot_budget(40, 0.5, 100) == 20


def test_snapshot_has_druids_fields():
    cfg = config(skipOffsetFromLatest="PT0S")
    visible = (seg(day(3), state=compacted_state(cfg)), seg(day(4), size=7), seg(day(4), 1, size=3))
    plan = plan_datasource(cfg, Facts("wiki", visible), now=NOW)
    assert snapshot("wiki", plan, status="RUNNING") == {
        "dataSource": "wiki",
        "scheduleStatus": "RUNNING",
        "bytesAwaitingCompaction": 10,
        "bytesCompacted": 100,
        "bytesSkipped": 0,
        "segmentCountAwaitingCompaction": 2,
        "segmentCountCompacted": 1,
        "segmentCountSkipped": 0,
        "intervalCountAwaitingCompaction": 1,
        "intervalCountCompacted": 1,
        "intervalCountSkipped": 0,
    }


def test_submitted_task_uses_concurrent_locks_and_the_config_priority():
    cfg = config(taskPriority=40, maxRowsPerSegment=1000, ioConfig={"dropExisting": True})
    spec = compaction_task_spec(cfg, day(3), "coordinator-issued_x")
    assert spec["context"] == {"useConcurrentLocks": True, "priority": 40}
    assert spec["ioConfig"]["inputSpec"] == {"type": "interval", "interval": str(day(3))}
    assert spec["ioConfig"]["dropExisting"] is True
    assert spec["tuningConfig"]["partitionsSpec"] == {"type": "dynamic", "maxRowsPerSegment": 1000}
    assert spec["id"] == "coordinator-issued_x"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({}, "dataSource"),
        ({"dataSource": ""}, "dataSource"),
        (
            {"dataSource": "w", "granularitySpec": {"segmentGranularity": "FORTNIGHT"}},
            "granularitySpec.segmentGranularity",
        ),
        (
            {"dataSource": "w", "granularitySpec": {"segmentGranularity": "ALL"}},
            "granularitySpec.segmentGranularity",
        ),
        ({"dataSource": "w", "skipOffsetFromLatest": "-P1D"}, "skipOffsetFromLatest"),
        ({"dataSource": "w", "skipOffsetFromLatest": "one day"}, "skipOffsetFromLatest"),
        ({"dataSource": "w", "skipOffsetFromLatest": 5}, "skipOffsetFromLatest"),
        ({"dataSource": "w", "taskPriority": "high"}, "taskPriority"),
        ({"dataSource": "w", "inputSegmentSizeBytes": 0}, "inputSegmentSizeBytes"),
        ({"dataSource": "w", "ioConfig": {"dropExisting": "yes"}}, "ioConfig.dropExisting"),
        (
            {"dataSource": "w", "taskContext": {"useConcurrentLocks": "yes"}},
            "taskContext.useConcurrentLocks",
        ),
        (
            {"dataSource": "w", "metricsSpec": [{"type": "nope", "name": "m"}]},
            "metricsSpec[0].type",
        ),
        (
            {"dataSource": "w", "tuningConfig": {"partitionsSpec": {"type": "shuffled"}}},
            "tuningConfig.partitionsSpec.type",
        ),
        ({"dataSource": "w", "skipOffsetFromLatst": "P1D"}, "skipOffsetFromLatst"),
        ({"dataSource": "w", "skipIntervals": "2024-01-01/2024-01-02"}, "skipIntervals"),
        ({"dataSource": "w", "skipIntervals": ["2024-01-01/P1D", "x"]}, "skipIntervals[1]"),
        ({"dataSource": "w", "projections": []}, "projections"),
        ({"dataSource": "w", "baseTable": {}}, "baseTable"),
        ({"dataSource": "w", "skipOffsetFromNow": "P1D"}, "skipOffsetFromNow"),
    ],
)
def test_invalid_configs_name_the_field(raw, field):
    with pytest.raises(SpecError) as err:
        validate_compaction_config(raw)
    assert err.value.field == field


def test_only_the_datasource_is_required_and_druids_defaults_fill_the_rest():
    cfg = validate_compaction_config({"dataSource": "not_yet_there"})
    out = cfg.as_json()
    assert out["taskPriority"] == 25
    assert out["inputSegmentSizeBytes"] == 100_000_000_000_000
    assert out["skipOffsetFromLatest"] == "P1D"
    assert out["maxRowsPerSegment"] is None and out["taskContext"] is None


def test_late_data_into_the_newest_interval_never_starves_older_ones():
    cfg = config(skipOffsetFromLatest="PT0S")
    visible = (seg(day(3)), seg(day(4)), seg(day(5)))
    # Day 4 was compacted a minute ago and got late data again; day 3 never was.
    tasks = (TaskFact("c4", day(4), "SUCCESS", False, NOW - timedelta(minutes=1), "", True),)
    plan = plan_datasource(cfg, Facts("wiki", visible, (), tasks), now=NOW)
    (chosen,) = [st for st in allocate_slots({"wiki": plan}, used=0, budget=1)["wiki"] if st.submit]
    assert chosen.interval == day(5)
    plans = allocate_slots({"wiki": plan}, used=0, budget=2)["wiki"]
    assert [st.interval for st in plans if st.submit] == [day(5), day(3)]


def test_a_config_change_retries_at_once_what_failed_or_did_not_match_before():
    old = config(skipOffsetFromLatest="PT0S")
    new = config(skipOffsetFromLatest="PT0S", taskPriority=60)
    wrong = compacted_state(old, segmentGranularity="HOUR")
    tasks = (
        TaskFact("c3", day(3), "SUCCESS", False, NOW, "", True, compaction_task_spec(old, day(3))),
        TaskFact(
            "c4", day(4), "FAILED", False, NOW, "boom", True, compaction_task_spec(old, day(4))
        ),
    )
    visible = (seg(day(3), state=wrong, by="c3"), seg(day(4)))
    before = by_interval(plan_datasource(old, Facts("wiki", visible, (), tasks), now=NOW))
    assert before[day(3)].code == "OUTPUT_MISMATCH"
    assert before[day(4)].code == "LAST_ATTEMPT_FAILED"
    after = by_interval(plan_datasource(new, Facts("wiki", visible, (), tasks), now=NOW))
    assert after[day(3)].status == AWAITING and after[day(4)].status == AWAITING


def test_skip_intervals_leave_the_intervals_they_overlap_with_a_typed_reason():
    cfg = config(skipOffsetFromLatest="PT0S", skipIntervals=["2024-01-16T05/2024-01-16T06"])
    visible = tuple(seg(hour(d, h)) for d in (15, 16, 17) for h in (0, 5))
    plan = by_interval(plan_datasource(cfg, Facts("wiki", visible), now=NOW))
    # The hour is widened to its DAY bucket, the interval a compaction would take.
    assert (plan[day(16)].status, plan[day(16)].code) == (SKIPPED, "SKIP_INTERVALS")
    assert "2024-01-16T05:00:00.000Z/2024-01-16T06:00:00.000Z" in plan[day(16)].reason
    assert plan[day(15)].status == AWAITING and plan[day(17)].code == "SKIP_OFFSET"
    assert cfg.as_json()["skipIntervals"] == ["2024-01-16T05:00:00.000Z/2024-01-16T06:00:00.000Z"]
