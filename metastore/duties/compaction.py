"""The auto-compaction duty's decisions, pure.

Given one dataSource's config and facts (its visible segments with their
`lastCompactionState`, the locks held, its compaction tasks), `plan_datasource`
gives every interval a status and a typed reason, newest first; `allocate_slots`
then shares the free compaction slots out among dataSources, one interval each
in turn (so that one dataSource never takes every slot, Druid #12055), and
marks the intervals to submit. When slots are short, a submitted interval takes
the awaiting intervals next to it along into its task (`batch_neighbours`), so
that a stream of late data making several days eligible at once costs one
task, not one per day, each waiting its turn for the one slot.
`metastore.selectors.compaction` reads the facts and plans, and
`metastore.services.compaction_run` submits the tasks.

Statuses: compacted, awaiting (eligible; submitted when a slot is free),
running (a compaction task works on it), skipped (not eligible now), each with
a reason code:

    SKIP_OFFSET          within skipOffsetFromLatest of the latest data
    SKIP_INTERVALS       overlaps one of the config's skipIntervals
    INTERVAL_LOCKED      another task holds a lock that a compaction would wait on
    INPUT_TOO_LARGE      the interval's bytes exceed inputSegmentSizeBytes
    ALREADY_COMPACTED    its segments' lastCompactionState matches the config
    NO_SLOT              eligible, waiting for a compaction slot (n of m used)
    LAST_ATTEMPT_FAILED  the duty's last task for it failed; retried at a time given
    OUTPUT_MISMATCH      the last compaction succeeded, yet its output does not match
                         the config, and nothing changed since (no endless loop)
    ONLY_TOMBSTONES      nothing but tombstones: nothing to compact
    NEEDS_COMPACTION     eligible (the mismatch is the reason)
    TASK_RUNNING         a compaction task works on it

No Django, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from metastore import locking
from metastore.compaction_state import (
    CompactionConfigSpec,
    compaction_mismatch,
    compaction_task_context,
    compaction_task_spec,
    desired_state,
)
from metastore.intervals import Granularity, Interval, format_ts

COMPACTED, AWAITING, RUNNING, SKIPPED = "compacted", "awaiting", "running", "skipped"
# A failed interval waits this long after its first failure, doubling per
# further consecutive failure, at most MAX_RETRY_WAIT.
MAX_RETRY_WAIT = timedelta(hours=1)


@dataclass(frozen=True)
class SegmentFact:
    """A visible segment of the dataSource."""

    id: str
    interval: Interval
    size_bytes: int
    compaction_state: dict | None = None
    tombstone: bool = False
    created_by: str | None = None
    upgraded: bool = False  # an append carried onto a replace's version


@dataclass(frozen=True)
class LockFact:
    task_id: str
    interval: Interval
    type: str


@dataclass(frozen=True)
class TaskFact:
    """A compaction task of the dataSource (active, or ended recently)."""

    id: str
    interval: Interval | None
    status: str  # PENDING WAITING RUNNING SUCCESS FAILED CANCELED
    active: bool
    ended_at: datetime | None = None
    error: str = ""
    by_duty: bool = False
    spec: dict | None = None  # the task spec as submitted


@dataclass(frozen=True)
class Facts:
    datasource: str
    visible: tuple[SegmentFact, ...]
    locks: tuple[LockFact, ...] = ()
    tasks: tuple[TaskFact, ...] = ()


@dataclass(frozen=True)
class IntervalStatus:
    interval: Interval
    status: str
    code: str
    reason: str
    segments: int
    bytes: int
    task_id: str | None = None
    next_retry: datetime | None = None
    submit: bool = False
    last_compacted_at: datetime | None = None  # the duty's last success on it
    # The interval of the task it is submitted in, when that task takes the
    # awaiting intervals next to it along (`batch_neighbours`); None: its own.
    task_interval: Interval | None = None


def candidate_intervals(
    visible: Iterable[SegmentFact], segment_granularity: str | None
) -> list[tuple[Interval, list[SegmentFact]]]:
    """The intervals a compaction would take whole: each visible segment's interval,
    widened to the target granularity's buckets if the config sets one, and
    merged where they overlap (a compaction never cuts a segment). Oldest first."""
    gran = Granularity.from_name(segment_granularity) if segment_granularity else None
    spans = []
    for seg in visible:
        iv = seg.interval
        if gran is not None:
            end = iv.end if gran.truncate(iv.end) == iv.end else gran.next(iv.end)
            iv = Interval(gran.truncate(iv.start), end)
        spans.append((iv, seg))
    spans.sort(key=lambda item: (item[0].start, item[0].end))
    groups: list[tuple[Interval, list[SegmentFact]]] = []
    for iv, seg in spans:
        if groups and iv.start < groups[-1][0].end:
            last_iv, members = groups[-1]
            groups[-1] = (Interval(last_iv.start, max(last_iv.end, iv.end)), [*members, seg])
        else:
            groups.append((iv, [seg]))
    return groups


def retry_wait(failures: int, base: timedelta) -> timedelta:
    """How long after its `failures`-th consecutive failure an interval is retried."""
    return min(base * (2 ** max(0, failures - 1)), MAX_RETRY_WAIT)


def _same_job(spec: dict | None, job: dict) -> bool:
    """The task was submitted with the config as it is now (ids and its interval
    aside: a task may have taken neighbouring intervals along)."""
    if spec is None:
        return False
    return _job_key(spec) == _job_key(job)


def _job_key(spec: dict) -> dict:
    out = {k: v for k, v in spec.items() if k not in ("id", "groupId")}
    io = dict(out.get("ioConfig") or {})
    io["inputSpec"] = {k: v for k, v in (io.get("inputSpec") or {}).items() if k != "interval"}
    out["ioConfig"] = io
    return out


def _covers(task: TaskFact, interval: Interval) -> bool:
    """The task compacted `interval` (alone, or with its neighbours)."""
    return task.interval is not None and task.interval.contains(interval)


def _duty_history(
    tasks: Sequence[TaskFact], interval: Interval, job: dict
) -> tuple[TaskFact | None, int]:
    """The duty's latest ended task on exactly `interval` with the current config's
    job, and its consecutive failures (attempts under an older config do not count)."""
    ended = sorted(
        (
            t
            for t in tasks
            if t.by_duty
            and not t.active
            and _covers(t, interval)
            and t.ended_at
            and _same_job(t.spec, job)
        ),
        key=lambda t: t.ended_at,
        reverse=True,
    )
    failures = 0
    for task in ended:
        if task.status != "FAILED":
            break
        failures += 1
    return (ended[0] if ended else None), failures


def _blocking_lock(
    locks: Sequence[LockFact], interval: Interval, ignores_appends: bool
) -> LockFact | None:
    """A lock the compaction's locks would wait on: any overlapping lock, but an
    APPEND one only when its locks are not REPLACE (`locking.ignores_append_locks`)."""
    for lock in locks:
        if lock.interval.overlaps(interval) and not (
            ignores_appends and lock.type == locking.APPEND
        ):
            return lock
    return None


def _judge(
    config: CompactionConfigSpec,
    desired: dict,
    facts: Facts,
    interval: Interval,
    segs: list[SegmentFact],
    *,
    cutoff: datetime,
    now: datetime,
    retry_base: timedelta,
) -> IntervalStatus:
    data = [s for s in segs if not s.tombstone]
    size = sum(s.size_bytes for s in data)

    def status(kind: str, code: str, reason: str, **extra) -> IntervalStatus:
        return IntervalStatus(interval, kind, code, reason, len(data), size, **extra)

    if not data:
        return status(SKIPPED, "ONLY_TOMBSTONES", "holds only tombstones: nothing to compact")
    if interval.end > cutoff:
        return status(
            SKIPPED,
            "SKIP_OFFSET",
            f"within skipOffsetFromLatest {config.skip_offset_from_latest} of the latest "
            f"data (intervals ending after {format_ts(cutoff)} wait)",
        )
    excluded = next((iv for iv in config.skip_intervals if iv.overlaps(interval)), None)
    if excluded is not None:
        return status(SKIPPED, "SKIP_INTERVALS", f"overlaps skipIntervals entry {excluded}")
    running = next(
        (t for t in facts.tasks if t.active and t.interval and t.interval.overlaps(interval)), None
    )
    if running is not None:
        return status(
            RUNNING, "TASK_RUNNING", f"compaction task {running.id} works on it", task_id=running.id
        )
    ignores_appends = locking.ignores_append_locks(compaction_task_context(config))
    lock = _blocking_lock(facts.locks, interval, ignores_appends)
    if lock is not None:
        return status(
            SKIPPED,
            "INTERVAL_LOCKED",
            f"locked by task {lock.task_id} ({lock.type} on {lock.interval})",
            task_id=lock.task_id,
        )
    mismatch = compaction_mismatch([s.compaction_state for s in data], desired)
    if mismatch is None:
        return status(COMPACTED, "ALREADY_COMPACTED", "already compacted with the current config")
    if size > config.input_segment_size_bytes:
        return status(
            SKIPPED,
            "INPUT_TOO_LARGE",
            f"input of {size} bytes is over inputSegmentSizeBytes "
            f"{config.input_segment_size_bytes}",
        )
    job = compaction_task_spec(config, interval)
    return _after_failures(status, facts, interval, data, desired, mismatch, now, retry_base, job)


def _after_failures(status, facts, interval, data, desired, mismatch, now, retry_base, job):
    """An eligible interval, unless the duty's own last attempts on it say to wait."""
    last, failures = _duty_history(facts.tasks, interval, job)
    if last is not None and failures:
        next_retry = last.ended_at + retry_wait(failures, retry_base)
        if now < next_retry:
            return status(
                SKIPPED,
                "LAST_ATTEMPT_FAILED",
                f"last attempt (task {last.id}, {failures} failure(s) in a row) failed: "
                f"{last.error or 'no reason given'}; next retry at {format_ts(next_retry)}",
                task_id=last.id,
                next_retry=next_retry,
            )
    if last is not None and last.status == "SUCCESS" and _nothing_new(data, last.id, desired):
        return status(
            SKIPPED,
            "OUTPUT_MISMATCH",
            f"the last compaction (task {last.id}) succeeded and nothing changed since, "
            f"yet: {mismatch}",
            task_id=last.id,
        )
    return status(AWAITING, "NEEDS_COMPACTION", mismatch)


def _nothing_new(data: list[SegmentFact], task_id: str, desired: dict) -> bool:
    """Every segment that does not match was written by that task itself (no late
    data, no carried append, no other writer since)."""
    return all(
        s.created_by == task_id and not s.upgraded
        for s in data
        if compaction_mismatch([s.compaction_state], desired) is not None
    )


def plan_datasource(
    config: CompactionConfigSpec,
    facts: Facts,
    *,
    now: datetime,
    retry_base: timedelta = timedelta(minutes=1),
) -> list[IntervalStatus]:
    """Every candidate interval of the dataSource with its status, newest first.
    Skipping starts from the end of the latest data (skipOffsetFromLatest)."""
    data = [s for s in facts.visible if not s.tombstone]
    if not data:
        return []
    cutoff = config.skip_cutoff(max(s.interval.end for s in data))
    desired = desired_state(config)
    groups = candidate_intervals(facts.visible, config.segment_granularity)
    out = [
        _judge(config, desired, facts, iv, segs, cutoff=cutoff, now=now, retry_base=retry_base)
        for iv, segs in groups
    ]
    out = [replace(st, last_compacted_at=_last_success(facts.tasks, st.interval)) for st in out]
    out.sort(key=lambda s: (s.interval.start, s.interval.end), reverse=True)
    return out


def _last_success(tasks: Sequence[TaskFact], interval: Interval) -> datetime | None:
    ends = [
        t.ended_at
        for t in tasks
        if t.by_duty and t.status == "SUCCESS" and _covers(t, interval) and t.ended_at
    ]
    return max(ends, default=None)


def _turn_order(statuses: Sequence[IntervalStatus]) -> list[int]:
    """Awaiting intervals in the order they get slots: never compacted by the duty
    (or longest ago) first, newest first among equals, so that late data streaming
    into the newest interval never starves the older ones (Druid #16768)."""
    awaiting = [i for i, s in enumerate(statuses) if s.status == AWAITING]
    awaiting.sort(key=lambda i: statuses[i].last_compacted_at or datetime.min.replace(tzinfo=UTC))
    return awaiting


def slot_budget(total_slots: int, ratio: float, max_slots: int) -> int:
    """Compaction task slots: the ratio of all slots, at most `max_slots`, and at
    least one (Druid always lets one compaction run)."""
    return max(1, min(int(total_slots * ratio), max_slots))


# At most this many intervals go into one task (`batch_neighbours`): a backlog
# is worked through in tasks of bounded length and lock span, not one huge task.
BATCH_INTERVALS = 7


def allocate_slots(
    plans: dict[str, list[IntervalStatus]],
    *,
    used: int,
    budget: int,
    batch_bytes: Mapping[str, int] | None = None,
) -> dict[str, list[IntervalStatus]]:
    """Mark awaiting intervals to submit while slots are free: each dataSource's
    first awaiting interval (`_turn_order`) in turn (dataSources in name order),
    then each one's next. A dataSource in `batch_bytes` (its config sets a
    segment granularity; the value is its inputSegmentSizeBytes) then has each
    submitted interval take the awaiting ones next to it that got no slot into
    its task (`batch_neighbours`). The awaiting intervals left say how many
    slots are used."""
    free = max(0, budget - used)
    queues = {ds: _turn_order(p) for ds, p in plans.items()}
    out = {ds: list(p) for ds, p in plans.items()}
    taken = 0
    chosen: dict[str, list[int]] = {ds: [] for ds in plans}
    while taken < free and any(queues.values()):
        for ds in sorted(queues):
            if queues[ds] and taken < free:
                chosen[ds].append(queues[ds].pop(0))
                taken += 1
    for ds, indices in chosen.items():
        limit = (batch_bytes or {}).get(ds)
        for i in indices:
            group = [i] if limit is None else batch_neighbours(out[ds], i, queues[ds], limit)
            span = _span([out[ds][j].interval for j in group]) if len(group) > 1 else None
            for j in group:
                st = out[ds][j]
                reason = st.reason if j == i else _along(st, span)
                out[ds][j] = replace(st, submit=True, task_interval=span, reason=reason)
            queues[ds] = [j for j in queues[ds] if j not in group]
    in_use = used + taken
    for ds, remaining in queues.items():
        for i in remaining:
            st = out[ds][i]
            out[ds][i] = replace(
                st,
                code="NO_SLOT",
                reason=f"waiting for a compaction slot ({in_use} of {budget} used); {st.reason}",
            )
    return out


def batch_neighbours(
    statuses: Sequence[IntervalStatus], chosen: int, waiting: Iterable[int], max_bytes: int
) -> list[int]:
    """`chosen` and the `waiting` intervals adjacent to it in time, one after
    the other on either side (`statuses` newest first), while their bytes stay
    within `max_bytes` and their count within BATCH_INTERVALS: the intervals
    one task compacts."""
    waiting = set(waiting)
    group, size = [chosen], statuses[chosen].bytes
    newer, older = chosen - 1, chosen + 1
    while len(group) < BATCH_INTERVALS:
        span = _span([statuses[j].interval for j in group])
        if newer >= 0 and newer in waiting and statuses[newer].interval.start == span.end:
            pick, newer = newer, newer - 1
        elif (
            older < len(statuses)
            and older in waiting
            and statuses[older].interval.end == span.start
        ):
            pick, older = older, older + 1
        else:
            break
        if size + statuses[pick].bytes > max_bytes:
            break
        group.append(pick)
        size += statuses[pick].bytes
    return group


def _along(st: IntervalStatus, span: Interval) -> str:
    return f"taken along into one task compacting {span} (no slot of its own); {st.reason}"


def _span(intervals: Iterable[Interval]) -> Interval:
    intervals = list(intervals)
    return Interval(min(iv.start for iv in intervals), max(iv.end for iv in intervals))


def snapshot(datasource: str, statuses: Sequence[IntervalStatus], *, status: str) -> dict:
    """Druid's AutoCompactionSnapshot of one dataSource. Running intervals count as
    awaiting (their compaction has not landed yet); tombstone-only ones not at all."""
    totals = {"AwaitingCompaction": [0, 0, 0], "Compacted": [0, 0, 0], "Skipped": [0, 0, 0]}
    for st in statuses:
        if st.code == "ONLY_TOMBSTONES":
            continue
        key = {COMPACTED: "Compacted", SKIPPED: "Skipped"}.get(st.status, "AwaitingCompaction")
        totals[key][0] += st.bytes
        totals[key][1] += st.segments
        totals[key][2] += 1
    out = {"dataSource": datasource, "scheduleStatus": status}
    for key, (size, segments, intervals) in totals.items():
        out[f"bytes{key}"] = size
        out[f"segmentCount{key}"] = segments
        out[f"intervalCount{key}"] = intervals
    return {key: out[key] for key in SNAPSHOT_KEYS}


SNAPSHOT_KEYS = (
    "dataSource",
    "scheduleStatus",
    "bytesAwaitingCompaction",
    "bytesCompacted",
    "bytesSkipped",
    "segmentCountAwaitingCompaction",
    "segmentCountCompacted",
    "segmentCountSkipped",
    "intervalCountAwaitingCompaction",
    "intervalCountCompacted",
    "intervalCountSkipped",
)
