"""Segment allocation: which chunk, version and partition numbers a task writes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Max

from metastore import allocation_rules, lockbox_sql, locking
from metastore.allocation_rules import NON_ROOT_PARTITION_START
from metastore.intervals import Interval
from metastore.models import (
    FINAL_STATUSES,
    DataSource,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
)
from metastore.services._common import (
    LockRevoked,
    PublishError,
    ServiceError,
    _refuse_inactive,
    _revoked_reason,
    datasource_for_update,
    lock_request_of,
)
from metastore.services.locks import lock_decide
from metastore.timeline import Timeline

# --- allocation ---------------------------------------------------------------


@dataclass(frozen=True)
class Allocation:
    interval: Interval
    version: str
    partitions: tuple[int, ...]
    core_partitions: int
    append: bool
    minor_version: int = 0
    root_partitions: tuple[int, ...] | None = None  # overwrite by segment lock: union of inputs


@dataclass(frozen=True)
class AllocationRequest:
    """`count` segment identities wanted in `interval` under `sequence_name`."""

    interval: Interval
    count: int
    sequence_name: str = ""


def segments_allocate(
    *,
    task: Task,
    interval: Interval,
    count: int,
    append: bool,
    sequence_name: str = "",
    lock_granularity: str = locking.TIME_CHUNK,
) -> Allocation | None:
    """Hand out `count` segment identities for rows in `interval` for `task`.

    Overwrite (append=False): the version of the task's time-chunk lock and
    partitions 0..count-1, which form the chunk's core set. Append (SPEC §5,
    `allocation_rules.append_target`): the chunk visible over `interval` (its
    interval and version win over the append's granularity, so the returned
    `Allocation.interval` may be wider than `interval`), else the chunk a
    running append was given, else `interval` at EPOCH (a fresh fixed-width
    version if an EPOCH chunk was killed or abandoned there); partition numbers
    after the highest ever handed out there; the core set is unchanged. The
    task's lock must cover the chunk it writes. Idempotent per (task,
    sequence_name, interval).

    With `lock_granularity=SEGMENT` (appends under `forceTimeChunkLock: false`)
    the task needs no time-chunk lock: each allocated segment is locked with an
    EXCLUSIVE segment lock in the same transaction; if that must wait for
    another task's time-chunk lock, nothing is allocated and None is returned
    (the task is WAITING).
    """
    request = AllocationRequest(interval, count, sequence_name)
    if lock_granularity != locking.SEGMENT:
        return segments_allocate_many(task=task, requests=[request], append=append)[0]
    if not append:
        raise ServiceError("segment-locked overwrites use segments_allocate_overwrite")
    with transaction.atomic():
        ds, _, (chunk,) = _allocation_reads(task, [request], append=True)
        if chunk.existing:
            return _existing_allocation(ds, chunk.existing, append=True)
        target = _append_target(interval, chunk.append)
        partitions = tuple(range(target.next_partition, target.next_partition + count))
        if not _segment_locks_for_new(task, target.interval, target.version, partitions):
            return None
        lockbox_sql.pending_insert(
            task_id=task.id,
            datasource=task.datasource,
            allocations=[(target.interval, target.version, partitions, sequence_name)],
            append=True,
        )
        return Allocation(target.interval, target.version, partitions, target.core, True)


def segments_allocate_many(
    *, task: Task, requests: Sequence[AllocationRequest], append: bool
) -> list[Allocation]:
    """`segments_allocate` for many chunks of a task that holds time-chunk locks,
    in one transaction: the allocations, in order, that calling it for each
    request in turn would give, for one critical section and two round trips.
    A task publishing hundreds of chunks allocates them all at once."""
    requests = list(requests)
    if not requests:
        return []
    commit = lockbox_sql.commits_with_last_write()
    with transaction.atomic():
        ds, locks, chunks = _allocation_reads(task, requests, append=append)
        batch = _Batch(task, locks, append)
        out = [
            batch.allocate(ds, request, chunk)
            for request, chunk in zip(requests, chunks, strict=True)
        ]
        try:
            lockbox_sql.pending_insert(
                task_id=task.id,
                datasource=task.datasource,
                allocations=batch.new_rows,
                append=append,
                commit=commit,
            )
        except IntegrityError as exc:
            # Only an overwrite can collide: its core set starts at partition 0.
            raise ServiceError(
                f"task {task.id} already allocated the core set of one of these chunks "
                f"under another sequence name; an overwrite allocates it once"
            ) from exc
        return out


class _Batch:
    """The allocations of one `segments_allocate_many` call so far: what each
    (interval, sequence name) was given, the next partition planned in each chunk
    appended to, the intervals overwritten, and the new rows to record."""

    def __init__(self, task: Task, locks: list[tuple[Interval, str, str]], append: bool) -> None:
        self.task, self.locks, self.append = task, locks, append
        self.done: dict[tuple[Interval, str], Allocation] = {}
        self.planned: dict[tuple[Interval, str], tuple[int, int]] = {}  # chunk -> (next, core)
        self.overwritten: set[Interval] = set()
        self.new_rows: list[tuple[Interval, str, tuple[int, ...], str]] = []

    def allocate(
        self, ds: DataSource, request: AllocationRequest, chunk: lockbox_sql.ChunkReads
    ) -> Allocation:
        """The request's allocation: what the batch or an earlier call gave the same
        (interval, sequence name), else new identities."""
        key = (request.interval, request.sequence_name)
        if key not in self.done:
            if chunk.existing:
                self.done[key] = _existing_allocation(ds, chunk.existing, append=self.append)
            else:
                self.done[key] = self._new(request, chunk)
        return self.done[key]

    def _new(self, request: AllocationRequest, chunk: lockbox_sql.ChunkReads) -> Allocation:
        lock = _covering(self.locks, request.interval)
        if lock is None:
            raise PublishError(f"task {self.task.id} holds no lock covering {request.interval}")
        if self.append:
            interval, version, partitions, core = self._append_slots(request, chunk)
        else:
            interval, version, partitions, core = self._overwrite_slots(request, lock)
        self.new_rows.append((interval, version, partitions, request.sequence_name))
        return Allocation(interval, version, partitions, core, self.append)

    def _overwrite_slots(self, request: AllocationRequest, lock: tuple[Interval, str, str]):
        """An overwrite: the core set 0..count-1 of the request's interval at its lock's version."""
        if lock[2] == locking.APPEND:
            raise ServiceError(
                f"task {self.task.id} holds an APPEND lock on {request.interval}: it may "
                "only append there, never overwrite at its lock's version"
            )
        if request.interval in self.overwritten:
            raise ServiceError(
                f"an overwrite allocates the core set of {request.interval} once; "
                f"it was already asked for under another sequence name"
            )
        self.overwritten.add(request.interval)
        return request.interval, lock[1], tuple(range(request.count)), request.count

    def _append_slots(self, request: AllocationRequest, chunk: lockbox_sql.ChunkReads):
        """An append: the next partitions of its target chunk, which the task's locks cover."""
        target = _append_target(request.interval, chunk.append)
        interval, version = target.interval, target.version
        if _covering(self.locks, interval) is None:
            raise ServiceError(
                f"cannot append {request.interval}: its rows go into the chunk "
                f"{interval} v{version}, which task {self.task.id}'s locks do not cover; "
                "lock that chunk's interval"
            )
        first, core = self.planned.get((interval, version), (target.next_partition, target.core))
        self.planned[(interval, version)] = (first + request.count, core)
        return interval, version, tuple(range(first, first + request.count)), core


def _covering(
    locks: list[tuple[Interval, str, str]], interval: Interval
) -> tuple[Interval, str, str] | None:
    """The task's first time-chunk lock (interval, version, type) covering `interval`."""
    return next((lock for lock in locks if lock[0].contains(interval)), None)


def append_layout(
    *, datasource: str, intervals: Sequence[Interval]
) -> list[tuple[Interval, Interval]]:
    """A read for the runner before it locks and allocates an append: for rows in
    `intervals`, the pieces (piece, chunk interval) saying which chunk the rows
    of each piece go into now (`allocation_rules.append_layout`), in time order.
    The runner locks the chunks and splits its rows by the pieces; allocation
    decides again under the lock and refuses if the layout changed meanwhile."""
    out = []
    for interval in intervals:
        # Only a look: it does not wait for the dataSource's lock box (allocation
        # takes it and decides again).
        with transaction.atomic():
            reads = lockbox_sql.allocation_reads(
                datasource=datasource,
                task_id="",
                requests=[(interval, "")],
                append=True,
                lock=False,
            )
        if reads is None:
            out.append((interval, interval))
            continue
        try:
            layout = _layout(interval, reads.chunks[0].append)
        except ServiceError:
            out.append((interval, interval))  # allocation will refuse it with the reason
            continue
        out += [(piece, target.interval) for piece, target in layout]
    return out


def _allocation_reads(
    task: Task, requests: list[AllocationRequest], *, append: bool
) -> tuple[DataSource, list, list[lockbox_sql.ChunkReads]]:
    """Lock the dataSource (creating its row on first use) and read every request's chunk."""
    args = {
        "datasource": task.datasource,
        "task_id": task.id,
        "requests": [(r.interval, r.sequence_name) for r in requests],
        "append": append,
    }
    reads = lockbox_sql.allocation_reads(**args)
    if reads is None:  # the dataSource's first allocation: create its row, read again
        datasource_for_update(task.datasource)
        reads = lockbox_sql.allocation_reads(**args)
    if not reads.task_exists:
        raise ServiceError(f"there is no task {task.id}")
    _refuse_inactive(task.id, reads.task_status, reads.task_cancel_requested)
    if reads.task_revoked:
        raise LockRevoked(_revoked_reason(task.id))
    return reads.datasource, reads.locks, reads.chunks


def _existing_allocation(
    ds: DataSource, existing: list[tuple[Interval, str, int]], *, append: bool
) -> Allocation:
    """What an earlier call with the same (task, sequence name, interval) was given."""
    interval, version = existing[0][0], existing[0][1]
    partitions = tuple(p for iv, v, p in existing if (iv, v) == (interval, version))
    core = lockbox_sql.chunk_partitions(ds, interval, version)[0] if append else len(partitions)
    return Allocation(interval, version, partitions, core, append)


def _segment_locks_for_new(task: Task, interval: Interval, version: str, partitions) -> bool:
    """Lock freshly allocated segments (inside the caller's critical section),
    through the lock box's one decision path (`lock_decide`, FCFS queue
    included): all granted, or none and the task is WAITING."""
    requests = [
        lock_request_of(task, interval, locking.EXCLUSIVE, locking.SEGMENT, p, version)
        for p in partitions
    ]
    return lock_decide(task_id=task.id, requests=requests).granted


def segments_allocate_overwrite(
    *, task: Task, input_segment_ids: Sequence[str], count: int, sequence_name: str = ""
) -> Allocation:
    """Identities for segments that overwrite `input_segment_ids` inside their chunk
    (segment locks, `forceTimeChunkLock: false`): same major version, the next
    minor version, partition numbers from 32768, roots = union of the inputs' roots.
    The task must hold segment locks on every input."""
    with transaction.atomic():
        datasource_for_update(task.datasource)
        row = Task.objects.select_for_update().get(id=task.id)
        _refuse_inactive(task.id, row.status, row.cancel_requested)
        reason = _revoked_reason(task.id)
        if reason:
            raise LockRevoked(reason)
        inputs, interval, version = _overwrite_inputs(task, input_segment_ids)
        roots = tuple(sorted({r for s in inputs for r in (s.root_partitions or [s.partition])}))
        chunk = Segment.objects.filter(
            datasource__name=task.datasource,
            start=interval.start,
            end=interval.end,
            version=version,
        )
        minor = (chunk.aggregate(m=Max("minor_version"))["m"] or 0) + 1
        core = chunk.aggregate(m=Max("core_partitions"))["m"] or 0
        partitions = _overwrite_partitions(task, chunk, (interval, version), count, sequence_name)
        return Allocation(interval, version, partitions, core, False, minor, roots)


def _overwrite_inputs(
    task: Task, input_segment_ids: Sequence[str]
) -> tuple[list[Segment], Interval, str]:
    """The input segments of a segment-locked overwrite and their one chunk
    (interval, version); each must be used and under one of the task's segment locks."""
    inputs = list(Segment.objects.filter(id__in=list(input_segment_ids), used=True))
    if len(inputs) != len(set(input_segment_ids)):
        raise ServiceError("some input segments are not used segments of this dataSource")
    chunks = {(s.start, s.end, s.version) for s in inputs}
    if len(chunks) != 1:
        raise ServiceError(
            "a segment-locked overwrite works inside one chunk (interval and version); "
            "changing granularity or versions needs time-chunk locks"
        )
    start, end, version = chunks.pop()
    locked = set(
        TaskLock.objects.filter(
            task=task, granularity=locking.SEGMENT, revoked=False, start=start, end=end
        ).values_list("partition", flat=True)
    )
    missing = [s.id for s in inputs if s.partition not in locked]
    if missing:
        raise ServiceError(f"task {task.id} holds no segment lock on {missing[0]}")
    return inputs, Interval(start, end), version


def _overwrite_partitions(
    task: Task, chunk, key: tuple[Interval, str], count: int, sequence_name: str
) -> tuple[int, ...]:
    """What the task's sequence already got in the chunk (`chunk`: its segments),
    else `count` partitions after the highest non-root number the chunk's segments
    and allocations ever had, recorded now."""
    interval, version = key
    same_chunk = {
        "datasource": task.datasource,
        "start": interval.start,
        "end": interval.end,
        "version": version,
    }
    existing = list(
        PendingSegment.objects.filter(task=task, sequence_name=sequence_name, **same_chunk)
        .order_by("partition")
        .values_list("partition", flat=True)
    )
    if existing:
        return tuple(existing)
    highest = [
        chunk.filter(partition__gte=NON_ROOT_PARTITION_START).aggregate(m=Max("partition"))["m"],
        PendingSegment.objects.filter(
            partition__gte=NON_ROOT_PARTITION_START, **same_chunk
        ).aggregate(m=Max("partition"))["m"],
    ]
    first = max([h + 1 for h in highest if h is not None] + [NON_ROOT_PARTITION_START])
    partitions = tuple(range(first, first + count))
    lockbox_sql.pending_insert(
        task_id=task.id,
        datasource=task.datasource,
        allocations=[(interval, version, partitions, sequence_name)],
        append=False,
    )
    return partitions


def _layout(
    interval: Interval, facts: lockbox_sql.AppendFacts
) -> list[tuple[Interval, allocation_rules.AppendTarget]]:
    """The pure rule, fed with the visible pieces of the chunks overlapping `interval`."""
    timeline = Timeline.build(facts.segments)
    try:
        return allocation_rules.append_layout(
            interval=interval,
            visible=[
                (piece, ref.interval, ref.version) for piece, ref in timeline.lookup(interval)
            ],
            chunks=facts.chunks,
            running_lock_versions=facts.running_lock_versions,
        )
    except allocation_rules.AllocationRefused as exc:
        raise ServiceError(str(exc)) from None


def _append_target(
    interval: Interval, facts: lockbox_sql.AppendFacts
) -> allocation_rules.AppendTarget:
    """Where an append of rows in `interval` goes (SPEC §5): one chunk, or refused."""
    layout = _layout(interval, facts)
    if len(layout) == 1:
        return layout[0][1]
    names = ", ".join(f"{t.interval} v{t.version}" for _, t in layout)
    raise ServiceError(
        f"cannot append {interval} as one piece: its rows go into the chunks {names}; "
        "split them by the append layout"
    )


def pending_segments_prune(*, task_id: str) -> int:
    """Forget what an ended task was allocated, keeping what allocation still needs.

    A pending segment serves its own task while it runs (idempotent allocation,
    what it may publish, "an append is running here"); after that only two
    things: that partition numbers of a chunk are never handed out again, even
    once its segments are killed (`allocation_rules.next_partition` reads the
    highest one ever recorded; so does a segment-locked overwrite for numbers
    from 32768), and the janitor's sweep of what ended tasks left unpublished in
    deep storage. So an ended task's allocations that were published are
    dropped unless one is its chunk's highest root (or non-root) number, and so
    are those of tasks that ended before in the same chunks; the unpublished
    ones stay for the janitor. A chunk then keeps at most two
    pending rows of ended tasks, however many tasks wrote into it.

    The highest row of a chunk is never deleted (a row goes only while a higher
    one exists), so concurrent prunes and allocations never lower a chunk's
    watermark. Returns how many rows were deleted."""
    return lockbox_sql.pending_prune(task_id, [str(s) for s in FINAL_STATUSES])
