"""SPEC §8 under concurrent locks (CONC, `useConcurrentLocks`), randomized, through
the real worker: random appends (DAY and HOUR segment granularity), replaces
(`dropExisting`, DAY or HOUR, over one or two days) and compactions over two
days, submitted at random moments onto a worker with two task slots, with
random failures (a Spark job that raises, a cancel, a preemption by priority).
After each history the exact multiset of visible row ids, read back from the
segments' Parquet files through the visible timeline, must equal the serial
replay of the committed tasks.

Under concurrent locks an append that commits while a replace or compaction
runs over its interval is carried onto that task's version instead of being
read by it, so the replay must know, for each committed replace or compaction,
the commit as of which it took each interval's input: the `readAsOf` of its
report (its REPLACE lock's grant, `workers/runner.py`).

STRATA_E2E_CONC_HISTORIES=N runs N histories (default 1 per CI run);
STRATA_E2E_SEED=S repeats a seed (the submission timing still varies);
STRATA_E2E_SLOTS=K gives the worker K task slots (default 2).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

import pytest
from e2e_driver import (  # noqa: F401
    SLOTS,
    Rows,
    Scenario,
    _slot_worker,
    compaction_spec,
    slots_worker_process,
)

from metastore.intervals import Interval, parse_ts
from metastore.models import TaskLock

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

DAYS = ("2013-01-01", "2013-01-02")
NEXT = {"2013-01-01": "2013-01-02", "2013-01-02": "2013-01-03"}
SPAN = f"{DAYS[0]}/{NEXT[DAYS[-1]]}"

HISTORIES = int(os.environ.get("STRATA_E2E_CONC_HISTORIES", "1"))
HISTORY_SEED = int(os.environ.get("STRATA_E2E_SEED", str(random.randrange(10**6))))

# Task slots of the worker (at least 2); more by hand make more tasks overlap.
WORKER_SLOTS = max(SLOTS, int(os.environ.get("STRATA_E2E_SLOTS", str(SLOTS))))

Row = tuple[str, datetime]  # (id, timestamp)


@pytest.fixture(scope="module", name="slots_worker")
def _slots_worker(django_db_setup, redis_url, strata_dirs, tmp_path_factory):
    """The driver's real worker, with WORKER_SLOTS task slots."""
    yield from slots_worker_process(redis_url, strata_dirs, tmp_path_factory, slots=WORKER_SLOTS)


def day_interval(day: str) -> str:
    return f"{day}/{NEXT[day]}"


def rows_of(rows: Rows) -> tuple[Row, ...]:
    return tuple((i, parse_ts(t)) for i, t in zip(rows.ids, rows.times, strict=True))


# --- the oracle: SPEC §8's serial replay ----------------------------------------------


@dataclass(frozen=True)
class Committed:
    """A committed task's change set: an append's rows, or a replace's or
    compaction's read points (interval, seq) and, for a replace, its new rows."""

    commit: int
    kind: str  # "append" | "replace" | "compact"
    rows: tuple[Row, ...] = ()
    read_as_of: tuple[tuple[Interval, int], ...] = ()


def serial_replay(seed: Counter, committed: list[Committed]) -> Counter:
    """SPEC §8, in commit order: an append adds its rows; a replace or compaction
    removes exactly its input, the rows visible in each of its intervals as of
    that interval's read point, and adds its output (a replace its new rows, a
    compaction its input again). Rows that committed in its intervals after its
    read point are not its input and stay."""
    history: list[tuple[int, Counter]] = []

    def as_of(seq: int) -> Counter:
        state = seed
        for commit, after in history:
            if commit <= seq:
                state = after
        return state

    state = Counter(seed)
    for change in sorted(committed, key=lambda c: c.commit):
        if change.kind == "append":
            state = state + Counter(change.rows)
        else:
            taken = Counter()
            for interval, seq in change.read_as_of:
                taken.update({row: n for row, n in as_of(seq).items() if interval.contains(row[1])})
            added = Counter(change.rows) if change.kind == "replace" else taken
            state = (state - taken) + added
        history.append((change.commit, state))
    return state


def read_points(report: dict) -> tuple[tuple[Interval, int], ...]:
    return tuple((Interval.parse(p["interval"]), int(p["seq"])) for p in report["readAsOf"])


# --- the scenario ---------------------------------------------------------------------


S1 = Rows.at("s1", [(DAYS[0], h) for h in range(24)])
S2 = Rows.at("s2", [(DAYS[1], h) for h in range(0, 24, 2)])


@pytest.fixture
def seeded(request, api_client, slot_worker):
    """`seeded(mode)`: a Scenario on a fresh dataSource: s1 on the first day, s2 on
    the second."""
    made = []

    def make(mode: str) -> Scenario:
        name = f"{request.node.originalname.removeprefix('test_')[:40]}_{mode.lower()}"
        sc = Scenario(api=api_client, worker=slot_worker, datasource=name, mode=mode)
        made.append(sc)
        sc.succeed(S1, append=False, intervals=[day_interval(DAYS[0])])
        sc.succeed(S2, append=False, intervals=[day_interval(DAYS[1])])
        sc.assert_visible(S1, S2)
        return sc

    yield make
    for sc in made:
        sc.close()  # opens the gate: a failed test leaves no task stuck behind it


@pytest.fixture
def conc(seeded):
    return seeded("CONC")


STATS: Counter = Counter()  # what the histories of this run exercised, printed at the end

# A failure the history asked for, recognised by its reason; anything else is a bug.
EXPECTED_FAILURES = ("maxParseExceptions", "cancel", "preempted")


@dataclass
class Planned:
    kind: str
    rows: Rows | None
    what: str  # for the failure message


def _plan(rng: random.Random, name: str) -> tuple[Planned, dict]:
    """One random task: (what it is, its spec arguments)."""
    roll = rng.random()
    if roll < 0.45:
        points = [(rng.choice(DAYS), rng.randrange(24)) for _ in range(rng.randint(1, 4))]
        rows = Rows.at(name, points)
        days = sorted({d for d, _ in points})
        kw = {
            "append": True,
            "intervals": [day_interval(d) for d in days],
            "segment_granularity": rng.choice(["DAY", "HOUR"]),
            "malformed": rng.random() < 0.15,
        }
        return Planned("append", rows, f"append {kw}"), kw
    if roll < 0.75:
        days = sorted(rng.sample(DAYS, 1 if rng.random() < 0.7 else 2))
        points = [(rng.choice(days), rng.randrange(24)) for _ in range(rng.randint(1, 3))]
        rows = Rows.at(name, points)
        kw = {
            "append": False,
            "intervals": [day_interval(d) for d in days],
            "segment_granularity": rng.choice(["DAY", "HOUR"]),
            "drop_existing": True,  # it replaces all of its days: empty buckets get tombstones
            "malformed": rng.random() < 0.15,
            "priority": 75 if rng.random() < 0.15 else None,  # may preempt another replace
        }
        return Planned("replace", rows, f"replace {kw}"), kw
    interval = rng.choice([SPAN, *map(day_interval, DAYS)])
    return Planned("compact", None, f"compact {interval}"), {"interval": interval}


def _submit(sc: Scenario, planned: Planned, kw: dict) -> str:
    if planned.kind == "compact":
        return sc.submit_spec(compaction_spec(sc.datasource, mode="CONC", **kw))
    return sc.submit(planned.rows, **kw)


def _run_history(sc: Scenario, rng: random.Random, n: int, seed: Counter) -> Counter:
    """One random history on `sc`, checked against the serial replay; returns
    the visible rows it leaves (the next history's seed)."""
    tasks: dict[str, Planned] = {}
    gate_held = False
    for k in range(rng.randint(3, 7)):
        if not gate_held and rng.random() < 0.25:
            # Bunch the next tasks' lock-box steps: they queue at the gate together.
            sc.hold_gate()
            gate_held = True
        planned, kw = _plan(rng, f"h{n}t{k}")
        task_id = _submit(sc, planned, kw)
        tasks[task_id] = planned
        if rng.random() < 0.15:
            time.sleep(rng.uniform(0, 2))
            with contextlib.suppress(AssertionError):  # it may have ended already
                sc.cancel(task_id)
        # Right after a replace or compaction, often submit the next task at once:
        # an append then likely commits between its read point and its commit.
        burst = planned.kind != "append" and rng.random() < 0.5
        time.sleep(rng.uniform(0, 0.3 if burst else 1.5))
        if gate_held and rng.random() < 0.5:
            sc.open_gate()
            gate_held = False
    if gate_held:
        sc.open_gate()

    committed: list[Committed] = []
    outcomes = {}
    for task_id, planned in tasks.items():
        detail = sc.wait(task_id)
        report = detail["report"] or {}
        outcomes[task_id] = (
            planned.what,
            detail["status"],
            detail["error"],
            report.get("commit"),
            report.get("readAsOf"),
        )
        if detail["status"] != "SUCCESS":
            assert any(reason in (detail["error"] or "") for reason in EXPECTED_FAILURES), (
                f"history {n}: {task_id} ({planned.what}) failed unexpectedly: {detail['error']}"
            )
            sc.assert_clean_failure(task_id, detail["status"])
            continue
        if report.get("commit") is None:
            assert planned.kind == "compact", (task_id, planned.what, report)
            STATS["compact: nothing to compact"] += 1
            continue  # nothing to compact: no change
        rows = rows_of(planned.rows) if planned.rows else ()
        reads = read_points(report) if planned.kind != "append" else ()
        assert planned.kind == "append" or reads, (task_id, planned.what, report)
        committed.append(Committed(report["commit"], planned.kind, rows, reads))
    # What the history exercised: outcomes, and appends carried over (committed
    # between a replace's or compaction's read point and its commit).
    STATS.update(f"{o[0].split()[0]} {o[1]}" for o in outcomes.values())
    STATS["carried appends"] += sum(
        1
        for a in committed
        if a.kind == "append"
        for c in committed
        if c.kind != "append"
        and any(
            seq < a.commit < c.commit and iv.contains(row[1])
            for iv, seq in c.read_as_of
            for row in a.rows
        )
    )
    expected = serial_replay(seed, committed)
    visible = sc.visible_ids()
    want = Counter({row_id: n for (row_id, _), n in expected.items()})
    assert visible == want, (
        f"history {n} (seed {HISTORY_SEED}): extra {visible - want}, missing {want - visible}; "
        f"tasks {outcomes}"
    )
    assert not TaskLock.objects.filter(datasource=sc.datasource).exists()
    return expected


def test_random_conc_histories_equal_the_serial_replay(conc):
    """Random CONC histories on two slots; after each, the visible rows equal the
    serial replay of the committed tasks using each one's readAsOf."""
    rng = random.Random(f"{HISTORY_SEED}-CONC")
    print(
        f"seed {HISTORY_SEED} (STRATA_E2E_SEED), {HISTORIES} CONC histories, {WORKER_SLOTS} slots"
    )
    started = time.monotonic()
    state = Counter(rows_of(S1) + rows_of(S2))
    for n in range(HISTORIES):
        t = time.monotonic()
        state = _run_history(conc, rng, n, state)
        print(f"history {n}: {time.monotonic() - t:.0f} s, {sum(state.values())} rows visible")
    print(f"{HISTORIES} CONC histories in {time.monotonic() - started:.0f} s: {dict(STATS)}")


# --- readAsOf, deterministically -------------------------------------------------------


J0 = Rows.at("j0", [(DAYS[0], 3)])
J1 = Rows.at("j1", [(DAYS[0], 5), (DAYS[0], 17)])
R = Rows.at("r", [(DAYS[0], 1), (DAYS[0], 13)])


def test_read_as_of_is_the_replace_locks_grant_and_drives_the_replay(conc, api_client):
    """j0 commits, then r (a replace of the first day) takes its lock while j1 runs
    and j1 commits after r's grant: r's readAsOf is its lock's grant, at or after
    j0's commit and before j1's, so r replaces s1+j0 and j1 is carried onto r's
    version. A compaction alone reads the day as of the last commit."""
    sc = conc
    j0 = sc.succeed(J0, intervals=[day_interval(DAYS[0])])
    sc.hold_gate()
    j1 = sc.submit(J1, intervals=[day_interval(DAYS[0])])
    sc.at_gate(j1)
    r = sc.submit(R, append=False, intervals=[day_interval(DAYS[0])])
    sc.at_gate(j1, r)
    sc.open_gate()
    done = {t: sc.wait(t) for t in (j0, j1, r)}
    assert {t: d["status"] for t, d in done.items()} == dict.fromkeys(done, "SUCCESS")
    reports = {t: d["report"] for t, d in done.items()}
    assert "readAsOf" not in reports[j0] and "readAsOf" not in reports[j1]  # appends read nothing
    [point] = reports[r]["readAsOf"]
    assert Interval.parse(point["interval"]) == Interval.parse(day_interval(DAYS[0]))
    assert reports[j0]["commit"] <= point["seq"] < reports[j1]["commit"]
    sc.assert_visible(R, J1, S2)  # j1 carried onto r's version; s1 and j0 replaced

    # The same read points in Druid's reports payload.
    payload = api_client.get(f"/druid/indexer/v1/task/{r}/reports").json()
    assert payload["ingestionStatsAndErrors"]["payload"]["readAsOf"] == reports[r]["readAsOf"]

    c = sc.submit_spec(compaction_spec(sc.datasource, mode="CONC", interval=SPAN))
    compacted = sc.wait(c)
    assert compacted["status"] == "SUCCESS", compacted["error"]
    last = max(reports[r]["commit"], reports[j1]["commit"])
    assert {p["seq"] for p in compacted["report"]["readAsOf"]} == {last}
    sc.assert_visible(R, J1, S2)

    seed = Counter(rows_of(S1) + rows_of(S2))
    replay = serial_replay(
        seed,
        [
            Committed(reports[j0]["commit"], "append", rows_of(J0)),
            Committed(reports[j1]["commit"], "append", rows_of(J1)),
            Committed(reports[r]["commit"], "replace", rows_of(R), read_points(reports[r])),
            Committed(
                compacted["report"]["commit"], "compact", (), read_points(compacted["report"])
            ),
        ],
    )
    assert Counter({i: n for (i, _), n in replay.items()}) == sc.visible_ids()


# --- what the random histories found ---------------------------------------------------


def test_seg_append_waiting_for_an_hour_replace_lands_in_the_chunks_it_left(seeded):
    """Found by the CONC histories (seed 4004, history 53), deterministic here in SEG:
    an append splits its rows by the chunks visible when its Spark job ends (s1's
    DAY), then waits to allocate while an HOUR replace of the day holds its lock.
    The replace publishes HOUR chunks over part of the day: the append's rows now
    go into several chunks. SPEC §8 row 7 (SEG): j waits, then r+j; the append used
    to fail ("cannot append ... as one piece") instead of splitting its rows again."""
    sc = seeded("SEG")
    day = day_interval(DAYS[0])
    r_rows = Rows.at("r", [(DAYS[0], 1), (DAYS[0], 13)])
    sc.hold_gate()
    r = sc.submit(r_rows, append=False, intervals=[day], segment_granularity="HOUR")
    sc.at_gate(r)
    sc.open_gate()  # r takes its time-chunk lock on the day
    sc.hold_gate()
    sc.at_gate(r)  # r waits to allocate, holding its lock
    j = sc.submit(J1, intervals=[day])  # SEG: no lock until it allocates
    sc.at_gate(r, j)  # j's Spark job is done and its rows split by s1's DAY chunk
    sc.open_gate()  # r allocates; j waits for r's lock; r publishes; j allocates
    assert sc.wait(r)["status"] == "SUCCESS"
    outcome = sc.wait(j)
    assert outcome["status"] == "SUCCESS", outcome["error"]
    s1_left = [i for i in S1.ids if not i.endswith(("T01", "T13"))]
    sc.assert_visible(s1_left, r_rows, J1, S2)


def test_conc_append_split_before_an_hour_replace_publishes_lands_in_the_chunks_it_left(
    seeded,
):
    """The same in CONC, as the history hit it: the append's APPEND lock and the
    replace's REPLACE lock on the day are compatible, so nothing makes the append
    wait; it splits its rows by s1's DAY chunk while the replace waits to
    publish, and allocates once the replace has published HOUR chunks over part
    of the day. SPEC §8 row 7 (CONC): r+j."""
    sc = seeded("CONC")
    day = day_interval(DAYS[0])
    r_rows = Rows.at("r", [(DAYS[0], 1), (DAYS[0], 13)])
    sc.hold_gate()
    r = sc.submit(r_rows, append=False, intervals=[day], segment_granularity="HOUR")
    sc.at_gate(r)
    sc.open_gate()  # r takes its REPLACE lock on the day
    sc.hold_gate()
    sc.at_gate(r)  # r waits to allocate
    j = sc.submit(J1, intervals=[day])
    sc.at_gate(r, j)  # j waits for its APPEND lock, behind r's allocation
    sc.open_gate()
    # Taken again at once: r's allocation and j's lock pass (they queued first);
    # then r waits to publish while j runs its Spark job, splits its rows by the
    # chunks visible now (s1's DAY) and waits to allocate, behind r's publish.
    sc.hold_gate()
    sc.at_gate(r, j)
    assert sc.task(j)["phase"] == "publishing"  # j has split its rows
    sc.open_gate()  # r publishes its HOUR chunks; then j allocates
    assert sc.wait(r)["status"] == "SUCCESS"
    outcome = sc.wait(j)
    assert outcome["status"] == "SUCCESS", outcome["error"]
    s1_left = [i for i in S1.ids if not i.endswith(("T01", "T13"))]
    sc.assert_visible(s1_left, r_rows, J1, S2)
    reports = {t: sc.task(t)["report"] for t in (r, j)}
    assert reports[r]["readAsOf"][0]["seq"] < reports[r]["commit"] < reports[j]["commit"]
