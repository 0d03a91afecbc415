"""Publish: a task's segments, with replace upgrades and append carry-overs, in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction

from metastore import allocation_rules, lockbox_sql, locking, segment_files, upgrade_rules
from metastore.allocation_rules import NON_ROOT_PARTITION_START
from metastore.druid.ingestion import drop_existing_chunks
from metastore.intervals import Interval
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    DataSource,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
)
from metastore.services._common import (
    LockRevoked,
    PublishError,
    _chunks_text,
    _refuse_inactive,
    _revoked_reason,
    datasource_for_update,
)
from metastore.services.checkpoints import checkpoint_after_commit
from metastore.timeline import REF_COLUMNS, Timeline, refs_from_rows

# --- publish ------------------------------------------------------------------


@dataclass(frozen=True)
class NewSegment:
    """A segment a task wrote (or re-registers) and wants published."""

    interval: Interval
    version: str
    partition: int
    core_partitions: int
    location: str = ""
    num_rows: int = 0
    size_bytes: int = 0
    shard_spec: dict = field(default_factory=dict)
    minor_version: int = 0
    root_partitions: tuple[int, ...] | None = None
    atomic_update_group: tuple[int, ...] | None = None
    tombstone: bool = False
    upgraded_from: str = ""
    schema: dict = field(default_factory=dict)  # metastore.schema: what the segment holds
    compaction_state: dict | None = None  # on a compaction's output: its lastCompactionState


def segments_publish(
    *, task: Task, segments: Sequence[NewSegment], note: str = ""
) -> CommitLogEntry:
    """Publish a task's segments atomically and release its locks.

    One transaction: every lock of the task must be held and unrevoked and
    every segment must be covered by the task's locks at a version it was
    given (and a replace with dropExisting must give every time chunk of its
    intervals rows or a tombstone); the segments are inserted, one commit-log
    entry records them, and the task's locks are released. Any failure
    publishes nothing.

    Concurrent append and replace (SPEC §5): a REPLACE publish also copies
    every segment appended into its intervals after its lock was granted onto
    its version; an APPEND publish also copies its segments onto any newer
    version a replace committed meanwhile. Copies share the file, take
    partition numbers after the target chunk's core set and name
    `upgraded_from`.
    """
    with transaction.atomic():
        ds = datasource_for_update(task.datasource)
        task, locks = _publisher(task)
        _refuse_dropped_chunks(task, locks, segments)
        rows = _new_rows(ds, task, locks, segments)
        upgrades = _replace_upgrades(ds, task, locks, rows)
        upgrades += _append_carry_overs(ds, task, locks, rows)
        rows += upgrades
        _insert(ds, task, rows, upgrades)
        entry = CommitLogEntry.objects.create(
            datasource=ds.name,
            task=task,
            kind=CommitKind.PUBLISH,
            added=[r.id for r in rows],
            removed=[],
            note=note,
        )
        TaskLock.objects.filter(task=task).delete()
        lockbox_sql.notify_release(ds.name)
        checkpoint_after_commit(ds.name)
        return entry


def _publisher(task: Task) -> tuple[Task, list[TaskLock]]:
    """The task's row (locked) and its locks, if it may publish: its locks are not
    revoked and it is still active."""
    reason = _revoked_reason(task.id)
    if reason:
        raise LockRevoked(f"cannot publish: {reason}")
    task = Task.objects.select_for_update().get(id=task.id)
    _refuse_inactive(task.id, task.status, task.cancel_requested)
    return task, list(TaskLock.objects.filter(task=task, revoked=False))


def _refuse_dropped_chunks(
    task: Task, locks: Sequence[TaskLock], segments: Sequence[NewSegment]
) -> None:
    """A replace with dropExisting gives every time chunk of its intervals rows or a tombstone."""
    left_out = allocation_rules.chunks_left_out(
        drop_existing_chunks(task.spec, [lock.interval for lock in locks]),
        [seg.interval for seg in segments],
    )
    if left_out:
        raise PublishError(
            f"cannot publish: task {task.id} replaces its intervals with dropExisting, "
            "so every time chunk of them gets new rows or a tombstone; "
            f"{_chunks_text(left_out)} would keep showing the rows it was asked to drop"
        )


def _new_rows(
    ds: DataSource, task: Task, locks: list[TaskLock], segments: Sequence[NewSegment]
) -> list[Segment]:
    """The rows of the task's segments, each checked against its locks and allocations;
    overwrites inside a chunk (minor > 0) form one atomic update group per chunk."""
    allocated = {
        (Interval(start, end), version, partition)
        for start, end, version, partition in PendingSegment.objects.filter(task=task).values_list(
            "start", "end", "version", "partition"
        )
    }
    groups: dict[tuple, list[int]] = {}
    for seg in segments:
        if seg.minor_version > 0 and seg.atomic_update_group is None:
            key = (seg.interval, seg.version, seg.minor_version)
            groups.setdefault(key, []).append(seg.partition)
    rows = []
    for seg in segments:
        _check_covered(task, locks, allocated, seg)
        roots = list(seg.root_partitions or (seg.partition,))
        aug = seg.atomic_update_group
        if aug is None:
            aug = groups.get((seg.interval, seg.version, seg.minor_version), [seg.partition])
        rows.append(_segment_row(ds, task, seg, roots, list(aug)))
    return rows


def _insert(ds: DataSource, task: Task, rows: list[Segment], upgrades: list[Segment]) -> None:
    """Insert the rows. Upgraded copies take partition numbers like allocations do:
    record them, so no later allocation hands out their ids again, even after they
    are marked unused and killed (time travel would show the wrong rows)."""
    try:
        Segment.objects.bulk_create(rows)
        lockbox_sql.pending_insert(
            task_id=task.id,
            datasource=ds.name,
            allocations=[
                (r.interval, r.version, [r.partition], f"upgrade:{r.upgraded_from}")
                for r in upgrades
            ],
            append=True,
        )
    except IntegrityError as exc:
        raise PublishError(f"cannot publish: a segment id already exists ({exc})") from None


def _check_covered(task: Task, locks: list[TaskLock], allocated: set, seg: NewSegment) -> None:
    refusal = allocation_rules.publish_refusal(
        task_id=task.id,
        segment=allocation_rules.Published(
            seg.interval, seg.version, seg.partition, seg.minor_version
        ),
        locks=[
            allocation_rules.HeldLock(
                lk.interval, lk.type, lk.granularity, lk.version, lk.partition
            )
            for lk in locks
        ],
        allocated=allocated,
    )
    if refusal:
        raise PublishError(refusal)


def _segment_row(ds: DataSource, task: Task, seg: NewSegment, roots, aug) -> Segment:
    return Segment(
        id=Segment.make_id(ds.name, seg.interval, seg.version, seg.partition),
        datasource=ds,
        start=seg.interval.start,
        end=seg.interval.end,
        version=seg.version,
        partition=seg.partition,
        minor_version=seg.minor_version,
        root_partitions=sorted(roots),
        atomic_update_group=sorted(aug),
        core_partitions=seg.core_partitions,
        tombstone=seg.tombstone,
        shard_spec=seg.shard_spec,
        size_bytes=seg.size_bytes,
        num_rows=seg.num_rows,
        location=seg.location,
        used=True,
        created_by=task,
        upgraded_from=seg.upgraded_from,
        schema=seg.schema,
        compaction_state=seg.compaction_state,
    )


def _copy_onto(
    ds: DataSource,
    task: Task,
    source: Segment,
    copy: upgrade_rules.Copy,
    slot: tuple[int, int],
    figures: tuple[int, int],
) -> Segment:
    """The copy's row: the source's file at the copy's interval and version,
    `slot` its (partition, core partitions), `figures` its (rows, bytes)."""
    partition, core = slot
    num_rows, size_bytes = figures
    return Segment(
        id=Segment.make_id(ds.name, copy.interval, copy.version, partition),
        datasource=ds,
        start=copy.interval.start,
        end=copy.interval.end,
        version=copy.version,
        partition=partition,
        minor_version=0,
        root_partitions=[partition],
        atomic_update_group=[partition],
        core_partitions=core,
        tombstone=False,
        shard_spec={**(source.shard_spec or {}), "partitionNum": partition},
        size_bytes=size_bytes,
        num_rows=num_rows,
        location=source.location,
        used=True,
        created_by=task,
        upgraded_from=source.upgraded_from or source.id,
        schema=source.schema,
        compaction_state=source.compaction_state,
    )


def _write_copies(
    ds: DataSource,
    task: Task,
    copies: list[upgrade_rules.Copy],
    rows_of: dict[str, Segment],
    taken: dict,
    cores: dict,
) -> list[Segment]:
    """Rows for `copies`, each claiming the rows of its file inside its interval
    (`upgrade_rules.copy_figures`); a copy that shows none is not made. Each
    takes the next free partition number of its chunk (after its core set)."""
    wanted: dict[str, set[Interval]] = {}
    for copy in copies:
        if upgrade_rules.needs_count(copy):
            location = rows_of[copy.source.id].location
            wanted.setdefault(location, set()).add(copy.interval)
    files = {loc: segment_files.file_facts(loc, ivs) for loc, ivs in wanted.items()}
    out = []
    for copy in copies:
        source = rows_of[copy.source.id]
        file = files.get(source.location)
        if not upgrade_rules.shows_rows(copy, file):
            continue
        key = (copy.interval.start, copy.interval.end, copy.version)
        if key not in taken:
            core, free = lockbox_sql.chunk_partitions(ds, copy.interval, copy.version)
            cores.setdefault(key, core)
            taken[key] = max(free, cores[key])
        partition, taken[key] = taken[key], taken[key] + 1
        figures = upgrade_rules.copy_figures(copy, file)
        out.append(_copy_onto(ds, task, source, copy, (partition, cores[key]), figures))
    return out


def _source(seg: Segment, committed_seq: int = 0) -> upgrade_rules.Source:
    return upgrade_rules.Source(
        id=seg.id,
        interval=seg.interval,
        version=seg.version,
        original=seg.upgraded_from or seg.id,
        committed_seq=committed_seq,
        num_rows=seg.num_rows,
        size_bytes=seg.size_bytes,
    )


def _replace_upgrades(ds: DataSource, task: Task, locks: list[TaskLock], new_rows) -> list[Segment]:
    """Copies of the segments appended into a REPLACE task's intervals after its
    lock was granted, onto its version (`upgrade_rules.replace_upgrades`)."""
    replace_locks = [
        upgrade_rules.ReplaceLock(lk.interval, lk.version, lk.granted_seq)
        for lk in locks
        if lk.type == locking.REPLACE
    ]
    if not replace_locks:
        return []
    since = min(lk.granted_seq for lk in replace_locks)
    committed_at: dict[str, int] = {}
    for seq, added in (
        CommitLogEntry.objects.filter(datasource=ds.name, seq__gt=since, kind=CommitKind.PUBLISH)
        .exclude(task=task)
        .values_list("seq", "added")
    ):
        for seg_id in added or []:
            committed_at[seg_id] = seq
    if not committed_at:
        return []
    candidates = {
        s.id: s
        for s in Segment.objects.filter(id__in=list(committed_at), used=True, tombstone=False)
    }
    copies = upgrade_rules.replace_upgrades(
        locks=replace_locks,
        committed=[_source(s, committed_at[s.id]) for s in candidates.values()],
        published=[upgrade_rules.Chunk(r.interval, r.version) for r in new_rows],
    )
    cores: dict[tuple, int] = {}
    taken: dict = {}
    for row in new_rows:
        key = (row.start, row.end, row.version)
        cores[key] = max(cores.get(key, 0), row.core_partitions)
    for row in new_rows:
        key = (row.start, row.end, row.version)
        if row.partition < NON_ROOT_PARTITION_START:
            taken[key] = max(taken.get(key, 0), row.partition + 1, cores[key])
    return _write_copies(ds, task, copies, candidates, taken, cores)


def _append_carry_overs(
    ds: DataSource, task: Task, locks: list[TaskLock], new_rows
) -> list[Segment]:
    """Copies of an APPEND task's new segments onto every newer chunk that a
    replace committed over them meanwhile, at whatever granularity
    (`upgrade_rules.append_carry_overs`). Without it, a DAY append allocated
    before an HOUR replace published would be hidden under the replace's HOUR
    chunks."""
    if not any(lk.type == locking.APPEND for lk in locks):
        return []
    roots = [row for row in new_rows if not row.tombstone and row.minor_version == 0]
    visible = {}
    for row in roots:
        overlapping = Segment.objects.filter(
            datasource=ds, used=True, start__lt=row.end, end__gt=row.start
        ).values_list(*REF_COLUMNS)
        timeline = Timeline.build(refs_from_rows(overlapping))
        visible[row.id] = [
            upgrade_rules.Chunk(ref.interval, ref.version)
            for _, ref in timeline.lookup(row.interval)
        ]
    copies = upgrade_rules.append_carry_overs(
        published=[_source(row) for row in roots], visible=visible
    )
    return _write_copies(ds, task, copies, {row.id: row for row in roots}, {}, {})
