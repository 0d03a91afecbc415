"""Lock compatibility and decisions (SPEC §4), tested without Django.

Held sets are plain lists of LockSpec; ``apply`` below plays the lock box's
part (revoke what the decision says, add the request unless a lock of its group
is reused), so scenarios read as a sequence of requests.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metastore.intervals import Interval
from metastore.locking import (
    APPEND,
    DEFAULT_PRIORITIES,
    EXCLUSIVE,
    GRANT,
    LOCK_TYPES,
    REPLACE,
    REVOKE,
    SEGMENT,
    SHARED,
    TIME_CHUNK,
    WAIT,
    Decision,
    LockSpec,
    compatible,
    conflicts,
    decide,
    default_priority,
    find_reusable,
)

L, M, H = 10, 50, 90

DAY1 = "2024-01-01/2024-01-02"
DAY2 = "2024-01-02/2024-01-03"
DAY3 = "2024-01-03/2024-01-04"
THREE_DAYS = "2024-01-01/2024-01-04"
YEAR = "2024-01-01/2025-01-01"


def chunk_lock(group, type_, interval=DAY1, priority=M, datasource="wiki", revoked=False):
    return LockSpec(
        group_id=group,
        datasource=datasource,
        interval=Interval.parse(interval),
        type=type_,
        priority=priority,
        revoked=revoked,
    )


def segment_lock(group, type_, interval=DAY1, partition=0, priority=M, version="v1", revoked=False):
    return LockSpec(
        group_id=group,
        datasource="wiki",
        interval=Interval.parse(interval),
        type=type_,
        priority=priority,
        granularity=SEGMENT,
        partition=partition,
        version=version,
        revoked=revoked,
    )


def apply(decision: Decision, request: LockSpec, held: list[LockSpec]) -> list[LockSpec]:
    """The held locks after the lock box carries out ``decision``."""
    if decision.kind == WAIT:
        return list(held)
    after = [replace(lock, revoked=True) if lock in decision.revoke else lock for lock in held]
    if find_reusable(request, held) is None:
        after.append(request)
    return after


def active(held):
    return [lock for lock in held if not lock.revoked]


# --- The compatibility matrix, cell by cell -------------------------------

# Rows: request type; columns: held type, in the order EXCLUSIVE, SHARED, REPLACE, APPEND.
NOTHING = {t: (False, False, False, False) for t in LOCK_TYPES}
EVERYTHING = {t: (True, True, True, True) for t in LOCK_TYPES}

# Same interval: the REPLACE interval contains the APPEND interval.
SAME_INTERVAL = {
    EXCLUSIVE: (False, False, False, False),
    SHARED: (False, True, False, False),
    REPLACE: (False, False, False, True),
    APPEND: (False, False, True, True),
}
# Partial overlap: neither interval contains the other.
PARTIAL_OVERLAP = {
    EXCLUSIVE: (False, False, False, False),
    SHARED: (False, True, False, False),
    REPLACE: (False, False, False, False),
    APPEND: (False, False, False, True),
}
# The request's interval contains the held one: a REPLACE request contains a
# held APPEND, but an APPEND request is not inside a held REPLACE.
REQUEST_CONTAINS_HELD = {
    EXCLUSIVE: (False, False, False, False),
    SHARED: (False, True, False, False),
    REPLACE: (False, False, False, True),
    APPEND: (False, False, False, True),
}
# The held interval contains the request's.
HELD_CONTAINS_REQUEST = {
    EXCLUSIVE: (False, False, False, False),
    SHARED: (False, True, False, False),
    REPLACE: (False, False, False, False),
    APPEND: (False, False, True, True),
}

CHUNK_RELATIONS = {
    # name: (request interval, held interval, expected matrix)
    "same-interval": (DAY1, DAY1, SAME_INTERVAL),
    "partial-overlap": ("2024-01-01/2024-01-03", "2024-01-02/2024-01-04", PARTIAL_OVERLAP),
    "request-contains-held": (YEAR, "2024-03-01/2024-04-01", REQUEST_CONTAINS_HELD),
    "held-contains-request": ("2024-03-01/2024-04-01", YEAR, HELD_CONTAINS_REQUEST),
    "disjoint": (DAY1, DAY3, EVERYTHING),
    "adjacent": (DAY1, DAY2, EVERYTHING),  # half-open intervals share no instant
}


def chunk_cells():
    for relation, (request_interval, held_interval, matrix) in CHUNK_RELATIONS.items():
        for request_type in LOCK_TYPES:
            for held_type, expected in zip(
                (EXCLUSIVE, SHARED, REPLACE, APPEND), matrix[request_type], strict=True
            ):
                yield pytest.param(
                    request_type,
                    request_interval,
                    held_type,
                    held_interval,
                    expected,
                    id=f"{relation}-{request_type}-vs-held-{held_type}",
                )


@pytest.mark.parametrize(
    ("request_type", "request_interval", "held_type", "held_interval", "expected"),
    list(chunk_cells()),
)
def test_time_chunk_compatibility_matrix(
    request_type, request_interval, held_type, held_interval, expected
):
    request = chunk_lock("new", request_type, request_interval)
    held = chunk_lock("old", held_type, held_interval)

    assert compatible(request, held) is expected
    assert compatible(held, request) is expected  # the relation is symmetric
    assert conflicts(request, [held]) == ([] if expected else [held])


@pytest.mark.parametrize("request_type", LOCK_TYPES)
@pytest.mark.parametrize("held_type", LOCK_TYPES)
def test_revoked_time_chunk_lock_conflicts_with_nothing(request_type, held_type):
    request = chunk_lock("new", request_type)
    held = chunk_lock("old", held_type, revoked=True)

    assert compatible(request, held)
    assert decide(request, [held]) == Decision(GRANT)


@pytest.mark.parametrize("request_type", LOCK_TYPES)
@pytest.mark.parametrize("held_type", LOCK_TYPES)
def test_locks_of_the_same_group_never_conflict(request_type, held_type):
    request = chunk_lock("g", request_type, "2024-01-01/2024-01-03", priority=L)
    held = chunk_lock("g", held_type, "2024-01-02/2024-01-04", priority=H)

    assert compatible(request, held)
    assert decide(request, [held]).kind == GRANT


@pytest.mark.parametrize("request_type", LOCK_TYPES)
def test_locks_on_other_datasources_never_conflict(request_type):
    request = chunk_lock("new", request_type, datasource="wiki")
    held = chunk_lock("old", EXCLUSIVE, datasource="clicks")

    assert compatible(request, held)


# Segment locks against segment locks: (request interval, request partition,
# held interval, held partition) -> expected for (EX/EX, EX/SH, SH/EX, SH/SH).
SEGMENT_RELATIONS = {
    "same-interval-same-partition": (DAY1, 3, DAY1, 3, (False, False, False, True)),
    "same-interval-other-partition": (DAY1, 3, DAY1, 2, (True, True, True, True)),
    "overlapping-other-interval-same-partition": (
        DAY1,
        3,
        "2024-01-01T00/2024-01-01T06",
        3,
        (False, False, False, False),
    ),
    "overlapping-other-interval-other-partition": (
        DAY1,
        3,
        "2024-01-01T12/2024-01-02T12",
        0,
        (False, False, False, False),
    ),
    "disjoint-same-partition": (DAY1, 3, DAY2, 3, (True, True, True, True)),
}


def segment_cells():
    pairs = ((EXCLUSIVE, EXCLUSIVE), (EXCLUSIVE, SHARED), (SHARED, EXCLUSIVE), (SHARED, SHARED))
    for relation, cells in SEGMENT_RELATIONS.items():
        request_interval, request_part, held_interval, held_part, row = cells
        for (request_type, held_type), expected in zip(pairs, row, strict=True):
            yield pytest.param(
                segment_lock("new", request_type, request_interval, request_part),
                segment_lock("old", held_type, held_interval, held_part),
                expected,
                id=f"{relation}-{request_type}-vs-held-{held_type}",
            )


@pytest.mark.parametrize(("requested", "held", "expected"), list(segment_cells()))
def test_segment_lock_compatibility(requested, held, expected):
    assert compatible(requested, held) is expected
    assert compatible(held, requested) is expected


def test_segment_locks_on_one_slot_conflict_whatever_their_versions():
    # The slot (interval, partition) is what is locked; versions are not compared.
    request = segment_lock("new", EXCLUSIVE, partition=3, version="v2")
    held = segment_lock("old", EXCLUSIVE, partition=3, version="v1")

    assert not compatible(request, held)


@pytest.mark.parametrize("segment_type", [EXCLUSIVE, SHARED])
@pytest.mark.parametrize("chunk_type", LOCK_TYPES)
@pytest.mark.parametrize(
    ("segment_interval", "chunk_interval", "expected"),
    [
        pytest.param(DAY1, DAY1, False, id="same-interval"),
        pytest.param(DAY1, YEAR, False, id="chunk-contains-segment"),
        pytest.param(
            "2024-01-01T00/2024-01-01T06",
            "2024-01-01T03/2024-01-01T09",
            False,
            id="partial-overlap",
        ),
        pytest.param(DAY1, DAY2, True, id="disjoint"),
    ],
)
def test_segment_lock_against_time_chunk_lock(
    segment_type, chunk_type, segment_interval, chunk_interval, expected
):
    segment = segment_lock("seg", segment_type, segment_interval)
    chunk = chunk_lock("chunk", chunk_type, chunk_interval)

    assert compatible(segment, chunk) is expected
    assert compatible(chunk, segment) is expected


@pytest.mark.parametrize("held_type", [EXCLUSIVE, SHARED])
@pytest.mark.parametrize("request_type", [EXCLUSIVE, SHARED])
def test_revoked_segment_lock_conflicts_with_nothing(request_type, held_type):
    held = segment_lock("old", held_type, partition=3, revoked=True)

    assert compatible(segment_lock("new", request_type, partition=3), held)
    assert compatible(chunk_lock("new", request_type), held)


# --- Decisions: the named scenarios ----------------------------------------


def test_exclusive_held_denies_shared_then_preemption_climbs_the_priorities():
    exclusive_h = chunk_lock("a", EXCLUSIVE, priority=H)
    held = [exclusive_h]

    shared_h = chunk_lock("b", SHARED, priority=H)
    assert decide(shared_h, held) == Decision(WAIT, blocking=(exclusive_h,))

    held = [replace(exclusive_h, revoked=True)]
    shared_l = chunk_lock("c", SHARED, priority=L)
    decision = decide(shared_l, held)
    assert decision == Decision(GRANT)
    held = apply(decision, shared_l, held)

    exclusive_m = chunk_lock("d", EXCLUSIVE, priority=M)
    decision = decide(exclusive_m, held)
    assert decision == Decision(REVOKE, revoke=(shared_l,))
    held = apply(decision, exclusive_m, held)

    decision = decide(shared_h, held)
    assert decision == Decision(REVOKE, revoke=(exclusive_m,))
    held = apply(decision, shared_h, held)
    assert active(held) == [shared_h]


def test_priority_10_request_revokes_shared_and_exclusive_locks_of_priority_0_on_three_days():
    held = [
        chunk_lock("s1", SHARED, DAY1, priority=0),
        chunk_lock("s2", SHARED, DAY1, priority=0),
        chunk_lock("x", EXCLUSIVE, DAY2, priority=0),
        chunk_lock("s3", SHARED, DAY3, priority=0),
    ]
    request = chunk_lock("high", EXCLUSIVE, THREE_DAYS, priority=10)

    assert decide(request, held) == Decision(REVOKE, revoke=tuple(held))


@pytest.mark.parametrize("request_type", [EXCLUSIVE, SHARED])
@pytest.mark.parametrize("day", [DAY1, DAY2, DAY3])
def test_priority_0_request_waits_for_a_priority_10_lock_on_three_days(request_type, day):
    held = [chunk_lock("high", EXCLUSIVE, THREE_DAYS, priority=10)]
    request = chunk_lock("low", request_type, day, priority=0)

    assert decide(request, held) == Decision(WAIT, blocking=tuple(held))


def test_segment_locks_on_two_partitions_are_granted_and_a_second_request_for_one_waits():
    held: list[LockSpec] = []
    part3 = segment_lock("a", EXCLUSIVE, partition=3)
    part2 = segment_lock("b", EXCLUSIVE, partition=2)
    for request in (part3, part2):
        decision = decide(request, held)
        assert decision == Decision(GRANT)
        held = apply(decision, request, held)

    other_for_3 = segment_lock("c", EXCLUSIVE, partition=3)
    assert decide(other_for_3, held) == Decision(WAIT, blocking=(part3,))

    other_interval = segment_lock("d", EXCLUSIVE, "2024-01-01T12/2024-01-02T12", partition=7)
    assert decide(other_interval, held) == Decision(WAIT, blocking=(part3, part2))


def test_time_chunk_lock_at_priority_100_revokes_segment_lock_at_priority_10():
    segment = segment_lock("compact", EXCLUSIVE, partition=0, priority=10)
    request = chunk_lock("replace", EXCLUSIVE, priority=100)

    assert decide(request, [segment]) == Decision(REVOKE, revoke=(segment,))


def test_replace_must_enclose_a_held_append_and_appends_continue_inside_it():
    append_year = chunk_lock("append", APPEND, YEAR, priority=M)
    held = [append_year]

    replace_january = chunk_lock("replace-part", REPLACE, "2024-01-01/2024-02-01", priority=M)
    assert decide(replace_january, held) == Decision(WAIT, blocking=(append_year,))

    replace_year = chunk_lock("replace-year", REPLACE, YEAR, priority=M)
    decision = decide(replace_year, held)
    assert decision == Decision(GRANT)
    held = apply(decision, replace_year, held)

    replace_wider = chunk_lock("replace-wider", REPLACE, "2023-01-01/2026-01-01", priority=M)
    assert decide(replace_wider, held) == Decision(WAIT, blocking=(replace_year,))

    for group, interval in [
        ("append-march", "2024-03-01/2024-04-01"),
        ("append-day", "2024-07-04/2024-07-05"),
    ]:
        request = chunk_lock(group, APPEND, interval, priority=L)
        decision = decide(request, held)
        assert decision == Decision(GRANT)
        held = apply(decision, request, held)
    assert not any(lock.revoked for lock in held)


def test_replace_revokes_lower_locks_but_keeps_an_enclosed_append_even_of_lower_priority():
    exclusive = chunk_lock("x", EXCLUSIVE, "2024-01-01/2024-01-02", priority=L)
    shared = chunk_lock("s", SHARED, "2024-01-02/2024-01-03", priority=L)
    other_replace = chunk_lock("r", REPLACE, "2024-01-03/2024-01-04", priority=L)
    straddling_append = chunk_lock("a-out", APPEND, "2024-01-05/2024-01-08", priority=L)
    enclosed_append = chunk_lock("a-in", APPEND, "2024-01-04/2024-01-05", priority=L)
    held = [exclusive, shared, other_replace, straddling_append, enclosed_append]
    request = chunk_lock("replace", REPLACE, "2024-01-01/2024-01-06", priority=M)

    decision = decide(request, held)

    assert decision == Decision(
        REVOKE, revoke=(exclusive, shared, other_replace, straddling_append)
    )
    assert active(apply(decision, request, held)) == [enclosed_append, request]


def test_waiting_request_blocks_only_on_locks_it_cannot_preempt_and_revokes_nothing():
    low = chunk_lock("low", SHARED, priority=L)
    high = chunk_lock("high", SHARED, priority=H)
    equal = chunk_lock("equal", EXCLUSIVE, DAY2, priority=M)
    request = chunk_lock("new", EXCLUSIVE, THREE_DAYS, priority=M)

    assert decide(request, [low, high, equal]) == Decision(WAIT, blocking=(high, equal))


# --- Reuse within a group ----------------------------------------------------


def test_same_group_reuses_its_lock_on_a_containing_interval():
    month = chunk_lock("g", EXCLUSIVE, "2024-01-01/2024-02-01")
    other = chunk_lock("other", SHARED, "2024-02-01/2024-03-01")
    request = chunk_lock("g", EXCLUSIVE, "2024-01-10/2024-01-11")

    assert find_reusable(request, [other, month]) is month
    assert decide(request, [other, month]) == Decision(GRANT)
    assert apply(Decision(GRANT), request, [other, month]) == [other, month]


def test_reuse_is_granted_where_a_new_lock_of_the_group_would_conflict():
    # The group's REPLACE covers the year, so an APPEND of another group inside
    # the year coexists with it; a new REPLACE on part of the year would not.
    replace_year = chunk_lock("g", REPLACE, YEAR)
    append_march = chunk_lock("other", APPEND, "2024-03-01/2024-04-01", priority=H)
    request = chunk_lock("g", REPLACE, "2024-03-15/2024-05-01")

    assert not compatible(request, append_march)
    assert find_reusable(request, [append_march, replace_year]) is replace_year
    assert decide(request, [append_march, replace_year]) == Decision(GRANT)


@pytest.mark.parametrize(
    ("held", "why"),
    [
        (chunk_lock("g", SHARED, "2024-01-01/2024-02-01"), "other type"),
        (chunk_lock("g", EXCLUSIVE, "2024-01-05/2024-02-01"), "interval not contained"),
        (chunk_lock("g", EXCLUSIVE, "2024-01-01/2024-02-01", revoked=True), "revoked"),
        (
            chunk_lock("g", EXCLUSIVE, "2024-01-01/2024-02-01", datasource="clicks"),
            "other datasource",
        ),
        (chunk_lock("h", EXCLUSIVE, "2024-01-01/2024-02-01"), "other group"),
        (segment_lock("g", EXCLUSIVE, "2024-01-01/2024-02-01"), "other granularity"),
    ],
)
def test_no_reuse_without_a_matching_lock_of_the_group(held, why):
    request = chunk_lock("g", EXCLUSIVE, "2024-01-01/2024-01-03")

    assert find_reusable(request, [held]) is None, why


def test_segment_lock_reuse_needs_the_same_segment():
    held = segment_lock("g", EXCLUSIVE, DAY1, partition=3, version="v1")

    assert (
        find_reusable(segment_lock("g", EXCLUSIVE, DAY1, partition=3, version="v1"), [held]) is held
    )
    assert (
        find_reusable(segment_lock("g", EXCLUSIVE, DAY1, partition=2, version="v1"), [held]) is None
    )
    assert (
        find_reusable(segment_lock("g", EXCLUSIVE, DAY1, partition=3, version="v2"), [held]) is None
    )
    assert find_reusable(segment_lock("g", SHARED, DAY1, partition=3, version="v1"), [held]) is None
    inside = segment_lock("g", EXCLUSIVE, "2024-01-01T00/2024-01-01T06", partition=3, version="v1")
    assert find_reusable(inside, [held]) is None


def test_a_revoked_lock_of_the_group_is_not_reused_and_does_not_block_it():
    held = [chunk_lock("g", EXCLUSIVE, revoked=True)]
    request = chunk_lock("g", EXCLUSIVE)

    assert find_reusable(request, held) is None
    assert decide(request, held) == Decision(GRANT)
    assert apply(Decision(GRANT), request, held) == [*held, request]


# --- Requests queued earlier (first come, first served) --------------------


@pytest.mark.parametrize("queued_priority", [M, H])
def test_request_waits_behind_an_earlier_conflicting_request_of_equal_or_higher_priority(
    queued_priority,
):
    queued = chunk_lock("earlier", EXCLUSIVE, priority=queued_priority)
    request = chunk_lock("later", SHARED, priority=M)

    assert decide(request, [], queued_before=[queued]) == Decision(WAIT, blocking=(queued,))


def test_request_overtakes_an_earlier_request_of_lower_priority():
    queued = chunk_lock("earlier", EXCLUSIVE, priority=L)
    request = chunk_lock("later", EXCLUSIVE, priority=M)

    assert decide(request, [], queued_before=[queued]) == Decision(GRANT)


def test_earlier_requests_that_do_not_conflict_or_share_the_group_do_not_hold_a_request_back():
    queued = [
        chunk_lock("earlier-shared", SHARED, priority=H),
        chunk_lock("earlier-elsewhere", EXCLUSIVE, DAY3, priority=H),
        chunk_lock("later", EXCLUSIVE, priority=H),
    ]
    request = chunk_lock("later", SHARED, priority=M)

    assert decide(request, [], queued_before=queued) == Decision(GRANT)


def test_request_behind_an_earlier_one_revokes_nothing_and_lists_what_it_waits_on():
    low_held = chunk_lock("low", SHARED, DAY1, priority=L)
    equal_held = chunk_lock("equal", SHARED, DAY2, priority=M)
    queued = chunk_lock("earlier", EXCLUSIVE, DAY3, priority=M)
    request = chunk_lock("later", EXCLUSIVE, THREE_DAYS, priority=M)

    assert decide(request, [low_held], queued_before=[queued]) == Decision(WAIT, blocking=(queued,))
    assert decide(request, [low_held, equal_held], queued_before=[queued]) == Decision(
        WAIT, blocking=(equal_held, queued)
    )


def test_own_reusable_lock_is_granted_even_behind_a_queue():
    own = chunk_lock("g", EXCLUSIVE, THREE_DAYS)
    queued = chunk_lock("earlier", EXCLUSIVE, DAY1, priority=H)

    assert decide(chunk_lock("g", EXCLUSIVE, DAY1), [own], queued_before=[queued]) == Decision(
        GRANT
    )


# --- Priorities ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_type", "expected"),
    [
        ("index_realtime", 75),
        ("index_parallel", 50),
        ("index", 50),
        ("compact", 25),
        ("kill", 0),
        ("archive", 0),
    ],
)
def test_default_priority_by_task_type(task_type, expected):
    assert default_priority(task_type, None) == expected
    assert default_priority(task_type, {"taskLockTimeout": 1000}) == expected


def test_context_priority_overrides_the_task_type():
    assert default_priority("compact", {"priority": 100}) == 100
    assert default_priority("index_realtime", {"priority": -5}) == -5


@pytest.mark.parametrize("bad", ["100", 1.5, 100.0, True, None, [1]])
def test_context_priority_must_be_an_integer(bad):
    with pytest.raises(ValueError, match="context.priority must be an integer"):
        default_priority("index", {"priority": bad})


def test_default_priorities_table_matches_the_spec():
    assert DEFAULT_PRIORITIES == {
        "index_realtime": 75,
        "index_parallel": 50,
        "index": 50,
        "compact": 25,
        "kill": 0,
    }


# --- Validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"type": "exclusive"}, "lock type must be one of"),
        ({"granularity": "CHUNK"}, "lock granularity must be one of"),
        ({"priority": True}, "priority must be an integer"),
        ({"priority": "50"}, "priority must be an integer"),
        ({"group_id": ""}, "group_id"),
        ({"datasource": ""}, "datasource"),
        ({"interval": "2024-01-01/2024-01-02"}, "must be an Interval"),
        ({"interval": Interval.parse("2024-01-01/2024-01-01")}, "is empty"),
        ({"partition": 3}, "only SEGMENT locks name a partition"),
        ({"granularity": SEGMENT}, "needs the locked segment's partition"),
        ({"granularity": SEGMENT, "partition": -1}, "needs the locked segment's partition"),
        ({"granularity": SEGMENT, "partition": 0, "type": APPEND}, "time-chunk only"),
        ({"granularity": SEGMENT, "partition": 0, "type": REPLACE}, "time-chunk only"),
    ],
)
def test_lock_spec_rejects_malformed_locks(fields, message):
    base = {
        "group_id": "g",
        "datasource": "wiki",
        "interval": Interval.parse(DAY1),
        "type": EXCLUSIVE,
        "priority": M,
    }
    with pytest.raises(ValueError, match=message):
        LockSpec(**(base | fields))


def test_time_chunk_lock_may_record_its_granted_version():
    lock = LockSpec(
        "g", "wiki", Interval.parse(DAY1), EXCLUSIVE, M, version="2024-05-01T00:00:00.000Z"
    )

    assert lock.granularity == TIME_CHUNK
    assert compatible(chunk_lock("h", SHARED, DAY2), lock)


def test_a_revoked_request_is_refused():
    with pytest.raises(ValueError, match="cannot be revoked"):
        decide(chunk_lock("g", EXCLUSIVE, revoked=True), [])


def test_decision_kind_is_checked():
    with pytest.raises(ValueError, match="decision kind"):
        Decision("granted")


def test_importing_locking_loads_neither_django_nor_pyspark():
    code = (
        "import sys, metastore.locking; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'pyspark')); "
        "assert not bad, bad"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


# --- Properties -------------------------------------------------------------------

# Intervals on an hour grid, few enough that equal, containing and
# overlapping intervals come up often.
HOUR_STARTS = [0, 6, 12, 24, 36, 48]
HOUR_LENGTHS = [6, 12, 24, 48]
BASE = Interval.parse("2024-01-01/2024-01-02").start


def hours(interval: Interval) -> frozenset[int]:
    """The whole hours an interval covers (intervals here are hour-aligned)."""
    first = int((interval.start - BASE).total_seconds()) // 3600
    last = int((interval.end - BASE).total_seconds()) // 3600
    return frozenset(range(first, last))


# The SPEC §4 matrix as written: request type -> held type -> rule.
CONTAINS = "if the REPLACE interval contains the APPEND interval"
SPEC_MATRIX = {
    EXCLUSIVE: {EXCLUSIVE: False, SHARED: False, REPLACE: False, APPEND: False},
    SHARED: {EXCLUSIVE: False, SHARED: True, REPLACE: False, APPEND: False},
    REPLACE: {EXCLUSIVE: False, SHARED: False, REPLACE: False, APPEND: CONTAINS},
    APPEND: {EXCLUSIVE: False, SHARED: False, REPLACE: CONTAINS, APPEND: True},
}


def reference_compatible(a: LockSpec, b: LockSpec) -> bool:
    """SPEC §4 read literally, on sets of hours rather than interval arithmetic."""
    if a.group_id == b.group_id or a.revoked or b.revoked or a.datasource != b.datasource:
        return True
    a_hours, b_hours = hours(a.interval), hours(b.interval)
    if not a_hours & b_hours:
        return True
    if a.granularity == SEGMENT and b.granularity == SEGMENT:
        if a_hours != b_hours:
            return False
        return a.partition != b.partition or a.type == b.type == SHARED
    if SEGMENT in (a.granularity, b.granularity):
        return False
    rule = SPEC_MATRIX[a.type][b.type]
    if rule == CONTAINS:
        replacing, appending = (a_hours, b_hours) if a.type == REPLACE else (b_hours, a_hours)
        return appending <= replacing
    return rule


def pairwise_compatible(locks) -> bool:
    return all(reference_compatible(a, b) for a, b in combinations(locks, 2))


REVOKED_OR_NOT = st.booleans()


@st.composite
def locks(draw, revoked=REVOKED_OR_NOT):
    start = draw(st.sampled_from(HOUR_STARTS))
    length = draw(st.sampled_from(HOUR_LENGTHS))
    interval = Interval(BASE + timedelta(hours=start), BASE + timedelta(hours=start + length))
    granularity = draw(st.sampled_from([TIME_CHUNK, TIME_CHUNK, SEGMENT]))
    if granularity == SEGMENT:
        type_ = draw(st.sampled_from([EXCLUSIVE, SHARED]))
        partition = draw(st.integers(0, 2))
        version = draw(st.sampled_from(["v1", "v2"]))
    else:
        type_ = draw(st.sampled_from(LOCK_TYPES))
        partition = version = None
    return LockSpec(
        group_id=draw(st.sampled_from(["g0", "g1", "g2", "g3", "g4"])),
        datasource=draw(st.sampled_from(["wiki", "wiki", "wiki", "clicks"])),
        interval=interval,
        type=type_,
        priority=draw(st.sampled_from([0, 25, 50, 75])),
        granularity=granularity,
        partition=partition,
        version=version,
        revoked=draw(revoked),
    )


@st.composite
def compatible_held_sets(draw):
    """Random held locks whose unrevoked members are pairwise compatible."""
    held: list[LockSpec] = []
    for lock in draw(
        st.lists(locks(revoked=st.sampled_from([False, False, False, True])), max_size=12)
    ):
        if lock.revoked or all(reference_compatible(lock, other) for other in active(held)):
            held.append(lock)
    return held


@settings(max_examples=500)
@given(locks(), locks())
def test_compatible_matches_the_spec_read_literally(a, b):
    assert compatible(a, b) == reference_compatible(a, b)
    assert compatible(a, b) == compatible(b, a)


@settings(max_examples=500)
@given(compatible_held_sets(), locks(revoked=st.just(False)))
def test_decide_keeps_the_held_set_pairwise_compatible(held, requested):
    decision = decide(requested, held)
    conflicting = [lock for lock in active(held) if not reference_compatible(requested, lock)]
    reusable = find_reusable(requested, held)

    assert pairwise_compatible(active(apply(decision, requested, held)))
    if decision.kind == WAIT:
        assert any(lock.priority >= requested.priority for lock in conflicting)
        assert decision.revoke == ()
        assert set(decision.blocking) == {
            lock for lock in conflicting if lock.priority >= requested.priority
        }
    elif decision.kind == REVOKE:
        assert reusable is None
        assert list(decision.revoke) == conflicting
        assert all(lock.priority < requested.priority for lock in decision.revoke)
    else:
        assert reusable is not None or not conflicting
        assert decision.revoke == ()
    # Nothing that could be granted is made to wait.
    if reusable is not None or all(lock.priority < requested.priority for lock in conflicting):
        assert decision.kind != WAIT


@settings(max_examples=300)
@given(
    compatible_held_sets(),
    locks(revoked=st.just(False)),
    st.lists(locks(revoked=st.just(False)), max_size=4),
)
def test_a_request_never_overtakes_an_earlier_conflicting_one_of_equal_or_higher_priority(
    held, requested, queued
):
    decision = decide(requested, held, queued_before=queued)
    ahead = [
        q
        for q in queued
        if q.priority >= requested.priority and not reference_compatible(requested, q)
    ]

    assert pairwise_compatible(active(apply(decision, requested, held)))
    if find_reusable(requested, held) is not None:
        assert decision == Decision(GRANT)
    elif ahead:
        assert decision.kind == WAIT
        assert decision.revoke == ()
        assert set(ahead) <= set(decision.blocking)
    else:
        assert decision == decide(requested, held)
