"""Lock compatibility and lock decisions (SPEC §4), free of Django and Spark.

The lock box in ``metastore.services`` owns the database side: it loads the
locks held on a dataSource (holding the dataSource's lock), asks :func:`decide`
what to do with a request, and then grants, revokes or queues. Everything here
is a pure function of the locks it is given, so the rules can be tested alone.

Vocabulary:

- A *group* is one logical task family (e.g. the subtasks of one parallel
  ingestion, or the tasks of one supervisor). Locks of the same group never
  conflict with each other.
- A *time-chunk* lock covers every segment of its interval; a *segment* lock
  names one segment ``(interval, version, partition)``.
- Revoked locks stay recorded until their task ends, but conflict with nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from metastore.intervals import Interval

# Lock types.
EXCLUSIVE = "EXCLUSIVE"
SHARED = "SHARED"
APPEND = "APPEND"
REPLACE = "REPLACE"
LOCK_TYPES = (EXCLUSIVE, SHARED, APPEND, REPLACE)
# APPEND and REPLACE only make sense for a whole time chunk.
SEGMENT_LOCK_TYPES = (EXCLUSIVE, SHARED)

# Lock granularities.
TIME_CHUNK = "TIME_CHUNK"
SEGMENT = "SEGMENT"
GRANULARITIES = (TIME_CHUNK, SEGMENT)

# Decision kinds.
GRANT = "grant"
WAIT = "wait"
REVOKE = "revoke"
DECISION_KINDS = (GRANT, WAIT, REVOKE)

# Task types: the one list of the types a task is stored and run as. The models
# build their choices from it, the spec grammar accepts it (and Druid's legacy
# alias), and the lock-mode rule and the priority table key on it.
INDEX_TASK = "index_parallel"
COMPACT_TASK = "compact"
KILL_TASK = "kill"
TASK_TYPES = (INDEX_TASK, COMPACT_TASK, KILL_TASK)
# Druid's legacy name of a native batch ingestion: accepted, stored as INDEX_TASK.
INDEX_ALIAS = "index"
# The types a task spec may name.
SPEC_TASK_TYPES = (INDEX_TASK, INDEX_ALIAS, COMPACT_TASK, KILL_TASK)
# Druid's streaming ingestion: not run here; only its default priority is kept.
REALTIME_TASK = "index_realtime"

DEFAULT_PRIORITIES: dict[str, int] = {
    REALTIME_TASK: 75,
    INDEX_TASK: 50,
    INDEX_ALIAS: 50,
    COMPACT_TASK: 25,
    KILL_TASK: 0,
}
# Task types not listed above ("kill and others").
OTHER_TASK_PRIORITY = 0


@dataclass(frozen=True)
class LockSpec:
    """A lock, held or requested, on one interval of one dataSource.

    ``partition`` and ``version`` identify the locked segment of a SEGMENT
    lock; ``partition`` is required for SEGMENT locks and refused for
    TIME_CHUNK locks. A TIME_CHUNK lock may carry the version it was granted
    with (the lock box records it); compatibility ignores it. The interval
    must not be empty.
    """

    group_id: str
    datasource: str
    interval: Interval
    type: str  # "EXCLUSIVE" | "SHARED" | "APPEND" | "REPLACE"
    priority: int
    granularity: str = TIME_CHUNK  # or SEGMENT
    partition: int | None = None  # SEGMENT only
    version: str | None = None  # SEGMENT only: the locked segment's version
    revoked: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ValueError(f"lock group_id must be a non-empty string, got {self.group_id!r}")
        if not isinstance(self.datasource, str) or not self.datasource:
            raise ValueError(f"lock datasource must be a non-empty string, got {self.datasource!r}")
        if not isinstance(self.interval, Interval):
            raise ValueError(f"lock interval must be an Interval, got {self.interval!r}")
        if self.interval.start >= self.interval.end:
            raise ValueError(
                f"lock interval {self.interval} is empty; a lock must cover at least one instant"
            )
        if self.type not in LOCK_TYPES:
            raise ValueError(f"lock type must be one of {', '.join(LOCK_TYPES)}, got {self.type!r}")
        if self.granularity not in GRANULARITIES:
            raise ValueError(
                f"lock granularity must be one of {', '.join(GRANULARITIES)}, "
                f"got {self.granularity!r}"
            )
        if not _is_int(self.priority):
            raise ValueError(f"lock priority must be an integer, got {self.priority!r}")
        if self.granularity == SEGMENT:
            if self.type not in SEGMENT_LOCK_TYPES:
                raise ValueError(
                    f"{self.type} locks are time-chunk only; a SEGMENT lock must be "
                    f"{' or '.join(SEGMENT_LOCK_TYPES)}"
                )
            if not _is_int(self.partition) or self.partition < 0:
                raise ValueError(
                    f"a SEGMENT lock needs the locked segment's partition number "
                    f"(an integer >= 0), got {self.partition!r}"
                )
        elif self.partition is not None:
            raise ValueError(
                "only SEGMENT locks name a partition; a TIME_CHUNK lock covers them all"
            )


@dataclass(frozen=True)
class Decision:
    """What the lock box must do with a request.

    - ``grant``: take the lock (or reuse the group's lock, see
      :func:`find_reusable`); nothing is revoked.
    - ``revoke``: revoke every lock in ``revoke``, then take the lock.
    - ``wait``: do nothing now; ``blocking`` is what the request waits on.
    """

    kind: str  # "grant" | "wait" | "revoke"
    revoke: tuple[LockSpec, ...] = ()
    blocking: tuple[LockSpec, ...] = ()  # what a waiting request waits on

    def __post_init__(self) -> None:
        if self.kind not in DECISION_KINDS:
            raise ValueError(
                f"decision kind must be one of {', '.join(DECISION_KINDS)}, got {self.kind!r}"
            )


def compatible(request: LockSpec, held: LockSpec) -> bool:
    """Whether ``request`` may be held at the same time as ``held`` (SPEC §4).

    The rule is meant for locks of different groups; locks of the same group
    never conflict, so this returns True for them. It also returns True when
    either lock is revoked, when the dataSources differ, and when the
    intervals do not overlap. Otherwise:

    - Two TIME_CHUNK locks follow the matrix: only SHARED+SHARED, APPEND+APPEND,
      and REPLACE+APPEND where the REPLACE interval contains the APPEND
      interval, may coexist.
    - A SEGMENT lock conflicts with any TIME_CHUNK lock.
    - Two SEGMENT locks conflict if their intervals overlap but differ, or if
      they are on the same interval and partition unless both are SHARED.
      Versions are not compared: two segments with one interval and one
      partition number are treated as the same slot.

    The relation is symmetric.
    """
    if request.group_id == held.group_id:
        return True
    if request.revoked or held.revoked:
        return True
    if request.datasource != held.datasource:
        return True
    if not request.interval.overlaps(held.interval):
        return True

    if request.granularity == SEGMENT or held.granularity == SEGMENT:
        if request.granularity != held.granularity:
            return False
        if request.interval != held.interval:
            return False
        if request.partition != held.partition:
            return True
        return request.type == SHARED and held.type == SHARED

    pair = (request.type, held.type)
    if pair in ((SHARED, SHARED), (APPEND, APPEND)):
        return True
    if pair == (REPLACE, APPEND):
        return request.interval.contains(held.interval)
    if pair == (APPEND, REPLACE):
        return held.interval.contains(request.interval)
    return False


def conflicts(request: LockSpec, held: Iterable[LockSpec]) -> list[LockSpec]:
    """The locks of ``held`` that ``request`` is not :func:`compatible` with.

    Same-group and revoked locks are never in the result. Order is kept.
    """
    return [lock for lock in held if not compatible(request, lock)]


def find_reusable(request: LockSpec, held: Iterable[LockSpec]) -> LockSpec | None:
    """The lock of ``request``'s own group that already grants it, if any.

    A TIME_CHUNK lock is reusable if it is of the same group, dataSource, type
    and granularity, is not revoked, and its interval contains the requested
    one. A SEGMENT lock names one segment, so reuse needs the same segment:
    the same interval (not merely a containing one, which would be another
    segment), partition and version, and the same type. Returns the first
    match in the order given, or None.
    """
    for lock in held:
        if (
            lock.group_id != request.group_id
            or lock.datasource != request.datasource
            or lock.type != request.type
            or lock.granularity != request.granularity
            or lock.revoked
        ):
            continue
        if request.granularity == SEGMENT:
            if (
                lock.interval == request.interval
                and lock.partition == request.partition
                and lock.version == request.version
            ):
                return lock
        elif lock.interval.contains(request.interval):
            return lock
    return None


def decide(
    request: LockSpec,
    held: Iterable[LockSpec],
    queued_before: Iterable[LockSpec] = (),
) -> Decision:
    """Decide whether ``request`` is granted, preempts, or waits (SPEC §4).

    ``held`` are the locks recorded on the dataSource (revoked ones may be
    included; they are ignored). In order:

    1. A reusable lock of the request's own group (:func:`find_reusable`) →
       ``grant``; the caller reuses that lock and its version.
    2. Any request in ``queued_before`` that conflicts with ``request`` and
       has equal or higher priority makes it ``wait``. ``queued_before`` are
       the pending requests of other groups that arrived earlier and are still
       waiting; without this rule a stream of equal-priority requests could
       slip in between the locks a waiting request needs, and starve it
       (first come, first served among equals). An earlier request of strictly
       lower priority does not hold ``request`` back, just as its lock would
       not: it is preempted.
    3. No conflicting held lock → ``grant``.
    4. Every conflicting held lock has strictly lower priority → ``revoke``
       with all of them.
    5. Otherwise → ``wait``, revoking nothing (all-or-nothing).

    For ``wait``, ``blocking`` lists what the request waits on: the
    conflicting held locks whose priority is equal or higher (the lower ones
    would be revoked once those are gone, so they are not what it waits on),
    then the earlier queued requests it waits behind, each in the order given.
    """
    if request.revoked:
        raise ValueError("a lock request cannot be revoked")
    held = list(held)

    if find_reusable(request, held) is not None:
        return Decision(GRANT)

    # Same-group and revoked entries are excluded by compatible().
    queue_blockers = [
        pending
        for pending in queued_before
        if pending.priority >= request.priority and not compatible(request, pending)
    ]
    conflicting = conflicts(request, held)
    held_blockers = [lock for lock in conflicting if lock.priority >= request.priority]

    if queue_blockers or held_blockers:
        return Decision(WAIT, blocking=tuple(held_blockers + queue_blockers))
    if conflicting:
        return Decision(REVOKE, revoke=tuple(conflicting))
    return Decision(GRANT)


class Outcome(enum.Enum):
    """What one lock box decision on a task's requests came to."""

    GRANTED = "granted"  # every request granted (some victims may be revoked)
    WAITING = "waiting"  # none granted, nothing revoked: the task waits on `blockers`


@dataclass(frozen=True)
class BoxDecision:
    """One all-or-nothing decision on all of a task's requests (:func:`decide_all`).

    ``reuse[i]`` is the lock of the task's own group that grants request ``i``
    (the lock box reuses it and its version), or None (a new lock).
    ``revoke`` are the held locks to revoke when granted; ``blockers`` what a
    waiting task waits on (held locks, then earlier queued requests)."""

    outcome: Outcome
    reuse: tuple[LockSpec | None, ...] = ()
    revoke: tuple[LockSpec, ...] = ()
    blockers: tuple[LockSpec, ...] = ()


def decide_all(
    requests: Sequence[LockSpec],
    held: Iterable[LockSpec],
    queued_before: Iterable[LockSpec] = (),
) -> BoxDecision:
    """The lock box's one decision (SPEC §4): :func:`decide` for each request
    against the locks ``held`` on the dataSource and the requests queued before
    it (first come, first served), all or nothing. If any request must wait,
    none is granted and nothing is revoked (a task never holds some of its locks
    while waiting for others); else every request is granted, revoking the
    union of what each one preempts. Blockers and victims keep their order and
    appear once, by identity."""
    held = list(held)
    queued_before = list(queued_before)
    decisions = [decide(request, held, queued_before) for request in requests]
    waiting = [d for d in decisions if d.kind == WAIT]
    if waiting:
        return BoxDecision(Outcome.WAITING, blockers=_once(b for d in waiting for b in d.blocking))
    return BoxDecision(
        Outcome.GRANTED,
        reuse=tuple(find_reusable(request, held) for request in requests),
        revoke=_once(v for d in decisions for v in d.revoke),
    )


def _once(specs: Iterable[LockSpec]) -> tuple[LockSpec, ...]:
    seen: set[int] = set()
    out = []
    for spec in specs:
        if id(spec) not in seen:
            seen.add(id(spec))
            out.append(spec)
    return tuple(out)


@dataclass(frozen=True)
class LockMode:
    """The locks a task takes: their type and granularity (SPEC §4, §5)."""

    type: str
    granularity: str


def lock_mode(
    *,
    task_type: str,
    append: bool = False,
    force_time_chunk_lock: bool = True,
    use_concurrent_locks: bool = False,
    task_lock_type: str | None = None,
) -> LockMode:
    """Which lock type and granularity a task takes, from its type and context
    (Druid's rule for `useConcurrentLocks`, `taskLockType`, `forceTimeChunkLock`):

    - ``useConcurrentLocks`` wins: an append takes APPEND, anything else REPLACE,
      always time-chunk locks;
    - else ``taskLockType`` (APPEND for an append, REPLACE or EXCLUSIVE);
    - else EXCLUSIVE.

    An EXCLUSIVE append or compaction with ``forceTimeChunkLock: false`` locks
    segments instead of time chunks (a compaction only when its input allows:
    the caller decides that). A kill takes EXCLUSIVE time-chunk locks, or REPLACE
    under concurrent locks. Raises ValueError, naming the context field, for a
    combination that has no meaning (an APPEND lock for a task that replaces).
    """
    if task_lock_type is not None and task_lock_type not in (APPEND, REPLACE, EXCLUSIVE):
        if task_lock_type == SHARED:
            raise ValueError(
                "taskLockType: SHARED locks are not supported; for appends that run "
                "side by side use useConcurrentLocks: true (APPEND locks)"
            )
        raise ValueError(
            f"taskLockType: {task_lock_type!r} is not a lock type; accepted: APPEND, REPLACE, "
            "EXCLUSIVE (or leave it out and set useConcurrentLocks)"
        )
    appends = append and task_type == INDEX_TASK
    if use_concurrent_locks:
        return LockMode(APPEND if appends else REPLACE, TIME_CHUNK)
    if task_lock_type == APPEND and not appends:
        raise ValueError(
            "taskLockType: APPEND locks are only for appending ingestion "
            "(ioConfig.appendToExisting true); use REPLACE or EXCLUSIVE"
        )
    if task_lock_type in (APPEND, REPLACE):
        return LockMode(task_lock_type, TIME_CHUNK)
    segments = not force_time_chunk_lock and (appends or task_type == COMPACT_TASK)
    return LockMode(EXCLUSIVE, SEGMENT if segments else TIME_CHUNK)


def ignores_append_locks(context: Mapping[str, Any] | None) -> bool:
    """Whether a task with this context takes REPLACE locks whatever it does, so
    APPEND locks never block it (Druid's lockedIntervals policies)."""
    context = context or {}
    return bool(context.get("useConcurrentLocks")) or context.get("taskLockType") == REPLACE


def default_priority(task_type: str, context: Mapping[str, Any] | None = None) -> int:
    """The lock priority of a task: ``context["priority"]`` if given, else
    the default of its type (realtime 75, batch index 50, compaction 25, kill
    and any other type 0).

    Raises ValueError if ``context["priority"]`` is present but not an integer.
    """
    if context is not None and "priority" in context:
        priority = context["priority"]
        if not _is_int(priority):
            raise ValueError(f"context.priority must be an integer, got {priority!r}")
        return priority
    return DEFAULT_PRIORITIES.get(task_type, OTHER_TASK_PRIORITY)


def _is_int(value: object) -> bool:
    # bool is an int subclass, but True is not a priority or a partition.
    return isinstance(value, int) and not isinstance(value, bool)
