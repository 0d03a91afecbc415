"""SPEC §8's table end to end, in TC, SEG and CONC modes: every task is submitted
through the REST API and run by a real Celery worker with two task slots, on real
Spark, publishing on PostgreSQL; interleavings are set by the driver's gate
(tests/e2e_driver.py). Each scenario asserts the exact multiset of row ids visible
through the timeline, read back from the segments' Parquet files.

Rows 3, 4, 5, 10 and 12 need the `compact` task; they are added here as soon as
it exists (the driver needs only a compaction spec builder for them).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections import Counter
from datetime import datetime

import pytest
from django.utils import timezone
from e2e_driver import (  # noqa: F401
    MODES,
    Rows,
    Scenario,
    _slot_worker,
    _slots_worker,
    compaction_spec,
)

from metastore import services
from metastore.models import Segment

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

S1 = Rows.at_hours("s1", range(24))  # one row in every hour of the DAY
J1 = Rows.at_hours("j1", [2, 9, 17])
J2 = Rows.at_hours("j2", [4, 11])
J3 = Rows.at_hours("j3", [6])
R = Rows.at_hours("r", [1, 13, 22])


@pytest.fixture
def scenario(request, api_client, slot_worker):
    """`scenario(name, mode)`: a Scenario on a fresh dataSource holding s1 at v1."""
    made = []

    def make(mode: str) -> Scenario:
        name = f"{request.node.originalname.removeprefix('test_')[:40]}_{mode.lower()}"
        sc = Scenario(api=api_client, worker=slot_worker, datasource=name, mode=mode)
        made.append(sc)
        sc.succeed(S1, append=False)  # s1 at v1
        sc.assert_visible(S1)
        sc.seed_ids = list(S1.ids)
        return sc

    yield make
    for sc in made:
        sc.close()  # opens the gate: a failed test leaves no task stuck behind it


modes = pytest.mark.parametrize("mode", list(MODES))


def _both(sc: Scenario, first_rows: Rows, second_rows: Rows, *, first_append=True,
          second_append=True, **first_kw) -> tuple[str, str]:  # fmt: skip
    """a ‖ b: a is submitted and reaches its first lock-box step, then b is
    submitted and reaches its own while a still runs; the gate opens with a's step
    first."""
    sc.hold_gate()
    a = sc.submit(first_rows, append=first_append, **first_kw)
    sc.at_gate(a)
    b = sc.submit(second_rows, append=second_append)
    sc.at_gate(a, b)
    sc.open_gate()
    return a, b


@modes
def test_row1_concurrent_appends_both_succeed(scenario, mode):
    sc = scenario(mode)
    a, b = _both(sc, J1, J2)
    assert sc.wait(a)["status"] == "SUCCESS"
    assert sc.wait(b)["status"] == "SUCCESS"
    sc.assert_visible(S1, J1, J2)


@modes
def test_row2_concurrent_appends_first_fails_in_spark_then_a_third(scenario, mode):
    sc = scenario(mode)
    a, b = _both(sc, J1, J2, malformed=True)
    failed = sc.assert_clean_failure(a, "FAILED")
    assert "maxParseExceptions" in failed["error"]
    assert sc.wait(b)["status"] == "SUCCESS"
    sc.succeed(J3)
    sc.assert_visible(S1, J2, J3)


def test_row2_first_append_preempted_by_a_higher_priority_append(scenario):
    # TC only: segment locks (SEG) and APPEND locks (CONC) of two appends never
    # conflict, so nothing is preempted there.
    sc = scenario("TC")
    sc.hold_gate()
    j1 = sc.submit(J1)
    sc.at_gate(j1)
    j2 = sc.submit(J2, priority=75)
    sc.at_gate(j1, j2)
    sc.open_gate()  # j1 takes its lock, then j2 (75 > 50) revokes it
    failed = sc.assert_clean_failure(j1, "FAILED")
    assert "preempted" in failed["error"] and j2 in failed["error"]
    assert sc.wait(j2)["status"] == "SUCCESS"
    sc.succeed(J3)
    sc.assert_visible(S1, J2, J3)


@modes
def test_row6_replace_canceled_while_append_runs_keeps_s1_and_append(scenario, mode):
    sc = scenario(mode)
    r, j = _both(sc, R, J1, first_append=False)
    # Let both first steps through (r's lock first), then stop r again before it
    # allocates: the gate is held again once the queued steps have passed.
    sc.hold_gate()
    if mode == "TC":
        assert sc.task(j)["status"] == "WAITING"  # equal priority: j waits for r's lock
    sc.at_gate(r, j)  # r at its allocation; j at its next step (or its next poll)
    asked = timezone.now()
    sc.cancel(r)
    # r's heartbeat after the cancel has told its worker to stop.
    sc.until(
        f"{r}'s worker saw the cancel",
        lambda: datetime.fromisoformat(sc.task(r)["heartbeat_at"]) > asked,
    )
    sc.open_gate()
    canceled = sc.assert_clean_failure(r, "CANCELED")
    assert "cancel" in canceled["error"]
    assert sc.wait(j)["status"] == "SUCCESS"
    sc.assert_visible(S1, J1)


@modes
def test_row7_replace_and_concurrent_append_both_succeed(scenario, mode):
    sc = scenario(mode)
    r, j = _both(sc, R, J1, first_append=False)
    assert sc.wait(r)["status"] == "SUCCESS"
    assert sc.wait(j)["status"] == "SUCCESS"
    sc.assert_visible(R, J1)


@modes
def test_row8_append_commits_after_the_replace_asked_for_its_lock(scenario, mode):
    sc = scenario(mode)
    j, r = _both(sc, J1, R, second_append=False)
    assert sc.wait(j)["status"] == "SUCCESS"
    assert sc.wait(r)["status"] == "SUCCESS"
    if mode == "CONC":
        sc.assert_visible(R, J1)  # j upgraded onto r's version
    else:
        sc.assert_visible(R)  # r waited and replaced s1+j
    if mode != "CONC":  # r waited for j: it read and replaced what j committed
        assert sc.task(j)["report"]["commit"] < sc.task(r)["report"]["commit"]


@modes
def test_row9_append_commits_then_replace_starts(scenario, mode):
    sc = scenario(mode)
    sc.succeed(J1)
    sc.succeed(R, append=False)
    sc.assert_visible(R)


@modes
def test_row11_replace_three_hours_with_drop_existing_overshadows_part_of_s1(scenario, mode):
    sc = scenario(mode)
    hours = Rows.at_hours("r", [1, 3])  # nothing in 02:00-03:00
    sc.succeed(
        hours,
        append=False,
        intervals=["2013-01-01T01:00:00Z/2013-01-01T04:00:00Z"],
        segment_granularity="HOUR",
        drop_existing=True,
    )
    untouched = [i for i in S1.ids if i not in ("s1-01", "s1-02", "s1-03")]
    sc.assert_visible(hours, untouched)
    tombstones = Segment.objects.filter(datasource__name=sc.datasource, tombstone=True)
    assert [(t.start.hour, t.end.hour) for t in tombstones] == [(2, 3)]


# --- compaction rows (3, 4, 5, 10, 12) ----------------------------------------------------

needs_compaction = pytest.mark.skipif(
    "compact" not in services.tasks.SUPPORTED_TASK_TYPES,
    reason="the compact task is not available on this branch (issue 11)",
)


def _creators(sc: Scenario, ids) -> set[str]:
    """The tasks that created the visible segments the rows `ids` are read from."""
    segments = sc.visible_segments()
    return {seg.created_by_id for i in ids for seg in segments[i]}


@needs_compaction
@modes
def test_row3_compaction_and_concurrent_append_both_succeed(scenario, mode):
    sc = scenario(mode)
    seed = _creators(sc, S1.ids)
    sc.hold_gate()
    c = sc.submit_spec(compaction_spec(sc.datasource, mode=mode))
    sc.at_gate(c)
    j = sc.submit(J1)
    sc.at_gate(c, j)
    sc.open_gate()
    assert sc.wait(j)["status"] == "SUCCESS"
    if mode == "TC":  # j (50) preempts c (25)
        failed = sc.assert_clean_failure(c, "FAILED")
        assert "preempted" in failed["error"]
        assert _creators(sc, S1.ids) == seed
    else:  # compact(s1) + j
        assert sc.wait(c)["status"] == "SUCCESS"
        assert _creators(sc, S1.ids) == {c}
    sc.assert_visible(S1, J1)


@needs_compaction
@modes
def test_row4_compaction_fails_while_an_append_runs(scenario, mode):
    sc = scenario(mode)
    seed = _creators(sc, S1.ids)
    sc.hold_gate()
    c = sc.submit_spec(compaction_spec(sc.datasource, mode=mode))
    sc.at_gate(c)
    j = sc.submit(J1)
    sc.at_gate(c, j)
    sc.open_gate()
    sc.hold_gate()  # stop c again at its next step (TC: j has preempted it already)
    sc.at_gate(c, j)
    if sc.task(c)["status"] not in ("FAILED", "CANCELED"):
        asked = timezone.now()
        sc.cancel(c)
        sc.until(
            f"{c}'s worker saw the cancel",
            lambda: (
                sc.task(c)["status"] in ("FAILED", "CANCELED")
                or datetime.fromisoformat(sc.task(c)["heartbeat_at"]) > asked
            ),
        )
    sc.open_gate()
    sc.assert_clean_failure(c, "FAILED" if mode == "TC" else "CANCELED")
    assert sc.wait(j)["status"] == "SUCCESS"
    assert _creators(sc, S1.ids) == seed  # s1 itself, never lost
    sc.assert_visible(S1, J1)


@needs_compaction
@modes
def test_row5_append_then_concurrent_compaction_both_succeed(scenario, mode):
    sc = scenario(mode)
    sc.hold_gate()
    j = sc.submit(J1)
    sc.at_gate(j)
    c = sc.submit_spec(compaction_spec(sc.datasource, mode=mode))
    sc.at_gate(j, c)
    sc.open_gate()
    assert sc.wait(j)["status"] == "SUCCESS"
    assert sc.wait(c)["status"] == "SUCCESS"
    sc.assert_visible(S1, J1)
    assert _creators(sc, S1.ids) == {c}
    if mode == "TC":  # c waited for j, then compacted s1 + j
        assert _creators(sc, J1.ids) == {c}


@needs_compaction
@modes
@pytest.mark.parametrize("first", ["compaction", "replace"])
def test_row10_compaction_and_replace_either_order_never_compact_s1_over_r(scenario, mode, first):
    sc = scenario(mode)
    sc.hold_gate()
    compact = compaction_spec(sc.datasource, mode=mode)
    if first == "compaction":
        c = sc.submit_spec(compact)
        sc.at_gate(c)
        r = sc.submit(R, append=False)
        sc.at_gate(c, r)
    else:
        r = sc.submit(R, append=False)
        sc.at_gate(r)
        c = sc.submit_spec(compact)
        sc.at_gate(r, c)
    sc.open_gate()
    assert sc.wait(r)["status"] == "SUCCESS"
    outcome = sc.wait(c)
    if first == "compaction":  # r (50) preempts c (25)
        assert outcome["status"] == "FAILED" and "preempted" in outcome["error"]
        sc.assert_clean_failure(c, "FAILED")
    else:
        assert outcome["status"] == "SUCCESS", outcome["error"]
    sc.assert_visible(R)  # never compact(s1) over r
    if first == "replace":  # c waits, then compacts r
        assert not outcome["report"]["compaction"]["nothingToCompact"], outcome["report"]
        assert _creators(sc, R.ids) == {c}


@needs_compaction
def test_row10_seg_compaction_waiting_on_an_hour_replace_falls_back_to_time_chunk_locks(
    scenario,
):
    """SEG, replace first, but r an HOUR inside s1's DAY: as of its grant, s1 is only
    partly visible, which a segment lock cannot rewrite in place; c takes a time-chunk
    lock on the DAY instead and compacts s1's visible hours with r."""
    sc = scenario("SEG")
    hour = Rows.at_hours("h", [13])
    rest = Rows.at_hours("s1", [h for h in range(24) if h != 13])
    sc.hold_gate()
    r = sc.submit(
        hour,
        append=False,
        segment_granularity="HOUR",
        intervals=["2013-01-01T13:00:00Z/2013-01-01T14:00:00Z"],
    )
    sc.at_gate(r)
    c = sc.submit_spec(compaction_spec(sc.datasource, mode="SEG"))
    sc.at_gate(r, c)
    sc.open_gate()
    assert sc.wait(r)["status"] == "SUCCESS"
    outcome = sc.wait(c)
    assert outcome["status"] == "SUCCESS", outcome["error"]
    compaction = outcome["report"]["compaction"]
    assert not compaction["nothingToCompact"], compaction
    assert compaction["lockGranularity"] == "TIME_CHUNK", compaction
    assert "changed while the task waited" in compaction["note"], compaction
    sc.assert_visible(rest, hour)
    assert _creators(sc, [*rest.ids, *hour.ids]) == {c}


@needs_compaction
@modes
def test_row12_rewriting_one_of_two_segments_keeps_the_other_visible(scenario, mode):
    sc = scenario(mode)
    # The DAY again, as two segments of one version (12 rows each).
    both = sc.succeed(S1, append=False, max_rows_per_segment=12)
    two = list(Segment.objects.filter(created_by_id=both).order_by("partition"))
    assert len(two) == 2
    first, second = two
    first_ids = {i for i, segs in sc.visible_segments().items() if segs[0].id == first.id}
    c = sc.submit_spec(compaction_spec(sc.datasource, mode=mode, segments=[first.id]))
    assert sc.wait(c)["status"] == "SUCCESS"
    sc.assert_visible(S1)
    segments = sc.visible_segments()
    assert {segments[i][0].created_by_id for i in first_ids} == {c}  # s1 rewritten
    rest = [segments[i][0] for i in S1.ids if i not in first_ids]
    assert {seg.location for seg in rest} == {second.location}  # s2's file, never rewritten
    if mode == "SEG":  # s1' at a higher minor version; s2 as it was
        assert {seg.id for seg in rest} == {second.id}
    else:  # s2 re-registered at the compaction's version
        assert {seg.version for seg in rest} == {segments[next(iter(first_ids))][0].version}


# --- task slots on the real worker -------------------------------------------------------


def _worker_rss_mib(worker) -> tuple[float, float]:
    """(RSS of the worker's JVMs, RSS of its whole process tree), MiB."""
    import psutil

    root = psutil.Process(worker.proc.pid)
    java = total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            rss, name = proc.memory_info().rss, proc.name()
        except psutil.Error:
            continue
        total += rss
        java += rss if name == "java" else 0
    return java / 2**20, total / 2**20


def test_third_task_stays_pending_while_two_hold_the_slots(scenario, api_client):
    sc = scenario("CONC")
    sc.hold_gate()
    first = sc.submit(J1)
    second = sc.submit(J2)
    sc.at_gate(first, second)  # both slots run a task at once
    third = sc.submit(J3)

    body = api_client.get("/api/v1/slots").json()
    # The worker registered its two slots itself, with its heartbeat.
    [mine] = [w for w in body["workers"] if w["nodename"] == sc.worker.nodename]
    assert mine["capacity"] == 2 and sorted(mine["tasks"]) == sorted([first, second])
    assert {s["task"] for s in body["slots"] if s["task"]} == {first, second}
    assert {s["status"] for s in body["slots"] if s["task"]} == {"RUNNING"}
    assert [p["task"] for p in body["pending"]] == [third]
    # (The session's one-slot worker, if a test started it, listens on another queue.)
    others_free = sum(w["free"] for w in body["workers"] if w is not mine)
    assert body["pending_reason"] == (
        "no free task slot" if not others_free else "queued: a free slot picks it up"
    )
    assert sc.task(third)["status"] == "PENDING"  # not WAITING: no lock is involved
    java, tree = _worker_rss_mib(sc.worker)
    print(f"worker with {body['capacity']} busy slots: JVM RSS {java:.0f} MiB, tree {tree:.0f} MiB")

    sc.open_gate()
    for task_id in (first, second, third):
        assert sc.wait(task_id)["status"] == "SUCCESS"
    sc.assert_visible(S1, J1, J2, J3)


# --- randomized histories through the real worker ---------------------------------------

HISTORIES = int(os.environ.get("STRATA_E2E_HISTORIES", "1"))
HISTORY_SEED = int(os.environ.get("STRATA_E2E_SEED", str(random.randrange(10**6))))


def _replay(seed_ids, committed: list[tuple[int, bool, tuple[str, ...]]]) -> Counter:
    """The serial replay, in commit order, of the committed tasks' change sets: an
    append adds its rows; a replace of the DAY removes what was visible (its
    input: under TC and SEG locks nothing commits between its lock and its
    publish) and adds its own."""
    rows = Counter(seed_ids)
    for _, append, ids in sorted(committed):
        if not append:
            rows = Counter()
        rows.update(ids)
    return rows


@pytest.mark.parametrize("mode", ["TC", "SEG"])
def test_random_histories_equal_the_serial_replay(scenario, mode):
    """Random appends and replaces, some failing in Spark and some canceled at a
    random moment, submitted at random moments onto two slots; after each
    history the visible rows equal the serial replay of the committed tasks.
    STRATA_E2E_HISTORIES=N runs N per mode (default 1); STRATA_E2E_SEED repeats one."""
    rng = random.Random(f"{HISTORY_SEED}-{mode}")
    print(f"seed {HISTORY_SEED} (STRATA_E2E_SEED), {HISTORIES} histories")
    started = time.monotonic()
    sc = scenario(mode)  # each history goes on from what the previous one left
    for n in range(HISTORIES):
        tasks: dict[str, tuple[bool, Rows]] = {}
        for k in range(rng.randint(3, 5)):
            append = rng.random() < 0.65
            hours = sorted(rng.sample(range(24), rng.randint(1, 3)))
            rows = Rows.at_hours(f"h{n}t{k}", hours)
            task_id = sc.submit(rows, append=append, malformed=rng.random() < 0.2)
            tasks[task_id] = (append, rows)
            if rng.random() < 0.2:
                time.sleep(rng.uniform(0, 2))
                with contextlib.suppress(AssertionError):  # it may have ended already
                    sc.cancel(task_id)
            time.sleep(rng.uniform(0, 1.5))
        committed = []
        for task_id, (append, rows) in tasks.items():
            detail = sc.wait(task_id)
            if detail["status"] == "SUCCESS":
                committed.append((detail["report"]["commit"], append, rows.ids))
            else:
                sc.assert_clean_failure(task_id, detail["status"])
        assert sc.visible_ids() == _replay(sc.seed_ids, committed), f"history {n}"
        sc.seed_ids = list(sc.visible_ids().elements())
    print(f"{HISTORIES} {mode} histories in {time.monotonic() - started:.0f} s")
