"""The lock box's one decision function, `locking.decide_all`, as a table: for
requests, the locks held on the dataSource and the requests queued before, the
outcome, what it waits on, what it revokes and which own lock it reuses."""

from __future__ import annotations

import pytest

from metastore.intervals import Interval
from metastore.locking import (
    APPEND,
    EXCLUSIVE,
    REPLACE,
    SEGMENT,
    SHARED,
    TIME_CHUNK,
    LockSpec,
    Outcome,
    decide_all,
)

DAY1 = Interval.parse("2024-01-01/2024-01-02")
DAY2 = Interval.parse("2024-01-02/2024-01-03")
DAYS = Interval.parse("2024-01-01/2024-01-03")
HOUR = Interval.parse("2024-01-01T00:00:00Z/2024-01-01T01:00:00Z")


def spec(
    group, interval, kind=EXCLUSIVE, priority=50, *, partition=None, version=None, revoked=False
):
    return LockSpec(
        group_id=group,
        datasource="ds",
        interval=interval,
        type=kind,
        priority=priority,
        granularity=SEGMENT if partition is not None else TIME_CHUNK,
        partition=partition,
        version=version,
        revoked=revoked,
    )


# Held locks and queued requests, named so the table can refer to them.
H = {
    "a_ex_day1": spec("a", DAY1),
    "a_ex_day1_low": spec("a", DAY1, priority=10),
    "b_ex_day2_low": spec("b", DAY2, priority=10),
    "a_append_day1": spec("a", DAY1, APPEND),
    "a_replace_days": spec("a", DAYS, REPLACE),
    "a_shared_day1": spec("a", DAY1, SHARED),
    "a_ex_day1_revoked": spec("a", DAY1, revoked=True),
    "a_seg_hour_p0": spec("a", HOUR, partition=0, version="v1"),
    "me_ex_days": spec("me", DAYS),
}
Q = {
    "q_ex_day2": spec("q", DAY2),
    "q_ex_day2_low": spec("q", DAY2, priority=10),
    "q_ex_day1_high": spec("q", DAY1, priority=90),
}

# (case, requests, held, queued, outcome, blockers, revoked, reused)
TABLE = [
    ("free interval", [spec("me", DAY1)], [], [], Outcome.GRANTED, [], [], [None]),
    (
        "equal priority holder",
        [spec("me", DAY1)],
        ["a_ex_day1"],
        [],
        Outcome.WAITING,
        ["a_ex_day1"],
        [],
        [],
    ),
    (
        "lower priority holder is preempted",
        [spec("me", DAY1)],
        ["a_ex_day1_low"],
        [],
        Outcome.GRANTED,
        [],
        ["a_ex_day1_low"],
        [None],
    ),
    (
        "revoked lock conflicts with nothing",
        [spec("me", DAY1)],
        ["a_ex_day1_revoked"],
        [],
        Outcome.GRANTED,
        [],
        [],
        [None],
    ),
    (
        "appends share a chunk",
        [spec("me", DAY1, APPEND)],
        ["a_append_day1"],
        [],
        Outcome.GRANTED,
        [],
        [],
        [None],
    ),
    (
        "append inside a replace",
        [spec("me", DAY1, APPEND)],
        ["a_replace_days"],
        [],
        Outcome.GRANTED,
        [],
        [],
        [None],
    ),
    (
        "replace over an append it does not contain",
        [spec("me", HOUR, REPLACE)],
        ["a_append_day1"],
        [],
        Outcome.WAITING,
        ["a_append_day1"],
        [],
        [],
    ),
    (
        "shared locks share",
        [spec("me", DAY1, SHARED)],
        ["a_shared_day1"],
        [],
        Outcome.GRANTED,
        [],
        [],
        [None],
    ),
    (
        "own group's lock is reused",
        [spec("me", DAY1)],
        ["me_ex_days"],
        [],
        Outcome.GRANTED,
        [],
        [],
        ["me_ex_days"],
    ),
    # All or nothing: one blocked interval holds back the other, and nothing is revoked.
    (
        "all or nothing",
        [spec("me", DAY1), spec("me", DAY2)],
        ["a_ex_day1", "b_ex_day2_low"],
        [],
        Outcome.WAITING,
        ["a_ex_day1"],
        [],
        [],
    ),
    (
        "every victim of every interval",
        [spec("me", DAY1), spec("me", DAY2)],
        ["a_ex_day1_low", "b_ex_day2_low"],
        [],
        Outcome.GRANTED,
        [],
        ["a_ex_day1_low", "b_ex_day2_low"],
        [None, None],
    ),
    # First come, first served among equals; an earlier lower priority does not hold back.
    (
        "queued equal priority first",
        [spec("me", DAY2)],
        [],
        ["q_ex_day2"],
        Outcome.WAITING,
        ["q_ex_day2"],
        [],
        [],
    ),
    (
        "queued lower priority does not hold back",
        [spec("me", DAY2)],
        [],
        ["q_ex_day2_low"],
        Outcome.GRANTED,
        [],
        [],
        [None],
    ),
    (
        "held and queued blockers, held first",
        [spec("me", DAY1)],
        ["a_ex_day1"],
        ["q_ex_day1_high"],
        Outcome.WAITING,
        ["a_ex_day1", "q_ex_day1_high"],
        [],
        [],
    ),
    # Segment locks decide through the same function (allocation locks what it allocates).
    (
        "segment lock vs a time-chunk lock",
        [spec("me", HOUR, partition=1, version="v1")],
        ["a_ex_day1"],
        [],
        Outcome.WAITING,
        ["a_ex_day1"],
        [],
        [],
    ),
    (
        "segment locks on other partitions",
        [spec("me", HOUR, partition=1, version="v1")],
        ["a_seg_hour_p0"],
        [],
        Outcome.GRANTED,
        [],
        [],
        [None],
    ),
    (
        "segment lock behind a queued time-chunk request",
        [spec("me", HOUR, partition=1, version="v1")],
        [],
        ["q_ex_day1_high"],
        Outcome.WAITING,
        ["q_ex_day1_high"],
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    "requests,held,queued,outcome,blockers,revoked,reused",
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_decide_all(requests, held, queued, outcome, blockers, revoked, reused):
    named = {**H, **Q}
    decision = decide_all(requests, [H[n] for n in held], [Q[n] for n in queued])
    assert decision.outcome == outcome
    assert list(decision.blockers) == [named[n] for n in blockers]
    assert list(decision.revoke) == [H[n] for n in revoked]
    assert list(decision.reuse) == [None if n is None else H[n] for n in reused]


def test_a_blocker_of_several_requests_is_named_once():
    held = [spec("a", DAYS)]
    decision = decide_all([spec("me", DAY1), spec("me", DAY2)], held)
    assert decision.outcome == Outcome.WAITING and decision.blockers == (held[0],)
