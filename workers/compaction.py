"""Running a claimed `compact` task: plan, lock, read what was visible, rewrite, publish.

The shape follows ingestion (`workers.runner`): locks and publish go through
`metastore.services`, the Spark job (`workers.jobs.compact`) never touches the
ORM, and whatever happens the runner ends the task with its locks released and
its intermediary directory and unpublished files removed.

Two ways to lock (SPEC §5):

- time-chunk locks (default; `useConcurrentLocks` makes them REPLACE locks):
  the input interval widened to the output segment granularity is locked, each
  locked interval is read exactly as it was visible when its lock was granted,
  and the output gets a new major version. With `inputSpec.segments`, visible
  segments of those chunks that were not named are re-registered at the new
  version (same file, `upgraded_from` set) instead of being hidden (SPEC §8
  row 12); those that cannot be (another interval, partly visible) are read and
  rewritten with the rest.
- segment locks (`forceTimeChunkLock: false`, keeping the granularity): each
  input segment is locked alone and every chunk is rewritten inside itself,
  same major version, next minor version; segments not read stay visible.
  A chunk whose input leaves no rows (a filter threw them all away) gets a
  tombstone overwrite of the same identity, which hides exactly its inputs
  (with `dropExisting: false`, Druid's legacy replace, they stay, as under
  time-chunk locks, and the report names the chunk).
  What it reads is decided once it holds its locks: if a segment it planned to
  read was hidden while it waited (a replace, SPEC §8 row 10), it re-resolves
  the visible segments as of its grant and locks those too, or, when they are
  not one segment per granularity bucket, falls back to time-chunk locks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from metastore import locking, selectors, services
from metastore.druid.compaction import CompactionSpec
from metastore.druid.errors import SpecError
from metastore.intervals import GRANULARITY_NAMES, Granularity, Interval, is_open_ended
from metastore.models import DataSource, Segment, Task, TaskLock
from metastore.timeline import SegmentRef, Timeline
from workers.jobs.compact import Plan, compaction_plan, run_compaction_job
from workers.jobs.ingest import SourcePiece, runs_two_phases
from workers.jobs.parsing import file_extent
from workers.monitor import Monitor, TaskProgress
from workers.paths import intermediary_dir
from workers.spark import get_spark
from workers.steps import (
    TWO_PHASE_SPANS,
    into_deep_storage,
    lock_intervals,
    publish_once,
    read_as_of_report,
    shard_spec,
)

_SINGLE_PASS_SPANS = {"phase 1": (0.05, 0.8)}


@dataclass
class _Read:
    """What a compaction reads and keeps, as of its locks."""

    pieces: list[tuple[Interval, SegmentRef]]  # visible parts of the segments it rewrites
    keep: list[SegmentRef]  # visible segments it re-registers at its version (row 12)
    had_data: set[Interval]  # output chunks that held visible rows


@dataclass
class _Run:
    """One compaction's task, spec and target, and where its steps record what they do."""

    task: Task
    spec: CompactionSpec
    monitor: Monitor
    moved: list[Path]  # deep-storage directories written and not yet published
    timings: dict[str, float]
    timeout_ms: int
    target: Interval
    named: dict[str, Segment]  # the segments an inputSpec of segments names
    granularity: str  # of the output

    def nothing(self, reason: str, inputs=()) -> dict:
        return _nothing_to_compact(reason, self.target, self.timings, inputs=inputs)

    def locked(self, t: float) -> None:
        """Record the lock time since `t` and stop here if the task was stopped."""
        self.timings["lock"] = round(time.monotonic() - t, 3)
        self.monitor.check()


def run_compaction(task: Task, monitor: Monitor, moved: list[Path]) -> dict:
    validated = services.task_validate(spec=task.spec)
    spec = validated.compaction
    context = validated.context
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    monitor.set_phase("planning", 0.01, 0.0)

    timeline = (
        selectors.timeline_for(datasource=spec.datasource)
        if DataSource.objects.filter(name=spec.datasource).exists()
        else Timeline.build([])
    )
    named = _named_segments(spec)
    target = spec.interval or Interval(
        min(s.start for s in named.values()), max(s.end for s in named.values())
    )
    candidates = _data_refs(timeline.lookup(target), named)
    if not candidates:
        return _nothing_to_compact(f"no visible data in {target}", target, timings)
    if is_open_ended(target):  # Druid's ETERNITY: the data there, not all of time
        target = Interval(
            min(r.interval.start for r in candidates), max(r.interval.end for r in candidates)
        ).intersection(target)
    chunk_grans = {ref.interval: _granularity_of(ref.interval) for ref in candidates}
    granularity = spec.segment_granularity or _coarsest([g or "ALL" for g in chunk_grans.values()])
    mode = services.task_lock_mode(validated)
    # Segment locks need every input chunk already at the target granularity.
    segment_locked = mode.granularity == locking.SEGMENT and all(
        g is not None and g == granularity for g in chunk_grans.values()
    )
    timings["plan"] = round(time.monotonic() - t0, 3)
    run = _Run(
        task,
        spec,
        monitor,
        moved,
        timings,
        context.task_lock_timeout_ms,
        target,
        named,
        granularity,
    )
    report = _segment_locked(run) if segment_locked else _time_chunk_locked(run, mode.type)
    report["phases"] = {**report.get("phases", {}), **timings}
    report["compaction"].setdefault(
        "lockGranularity", locking.SEGMENT if segment_locked else locking.TIME_CHUNK
    )
    if not context.force_time_chunk_lock and not segment_locked:
        report["compaction"]["note"] = (
            "time-chunk locks: the segment granularity changes, or an input is not one "
            "granularity bucket, or concurrent locks were asked for"
        )
    return report


# --- locking --------------------------------------------------------------------------


def _lock_time_chunks(
    task: Task, intervals: Sequence[Interval], lock_type: str, timeout_ms: int
) -> list[TaskLock]:
    """Time-chunk locks on every interval, decided at once (all or nothing); each
    lock's `granted_seq` is the commit as of which its interval is read."""
    return services.locks_acquire(
        task=task, intervals=list(intervals), lock_type=lock_type, timeout_ms=timeout_ms
    )


def _lock_segments(task: Task, refs: Sequence[SegmentRef], timeout_ms: int) -> list[TaskLock]:
    """EXCLUSIVE segment locks on every input segment, decided at once (all or
    nothing): the task never holds some while it waits for others."""
    return services.segment_locks_acquire(
        task=task, segments=refs, lock_type=locking.EXCLUSIVE, timeout_ms=timeout_ms
    )


_MAX_RESOLVES = 8  # each round needs another task's publish in the meantime


def _lock_visible_segments(
    task: Task,
    spec: CompactionSpec,
    target: Interval,
    named: dict[str, Segment],
    granularity: str,
    timeout_ms: int,
) -> tuple[Timeline, list[tuple[Interval, SegmentRef]]] | None:
    """Segment-lock the segments visible in `target` and return the timeline as of
    the last grant with the visible pieces of the locked segments, which no one can
    overshadow any more. If the input changed while the task waited (a replace hid a
    segment it planned to read), the visible segments are re-resolved as of the grant
    and locked too, until what it locked is what it reads. `None`: the new input is
    not one segment per `granularity` bucket, so segment locks cannot rewrite it."""
    planned = selectors.timeline_for(datasource=spec.datasource)
    refs = _data_refs(planned.lookup(target), named)
    locked: dict[str, SegmentRef] = {}
    locks: list[TaskLock] = []
    for _ in range(_MAX_RESOLVES):
        new = [ref for ref in refs if ref.id not in locked]
        locks += _lock_segments(task, new, timeout_ms)
        locked.update((ref.id, ref) for ref in new)
        expected = _pieces_of(planned, target, set(locked))
        if not locks:
            return planned, []
        # A segment visible at its lock's grant stays visible while it is locked, so
        # the last grant is a snapshot in which every locked segment is as it was read.
        as_of = selectors.timeline_for(
            datasource=spec.datasource, as_of=max(lock.granted_seq for lock in locks)
        )
        pieces = _pieces_of(as_of, target, set(locked))
        if pieces == expected:
            return as_of, pieces
        # The input changed while the task waited: what is visible now is its input.
        refs = _data_refs(as_of.lookup(target), named)
        if any(_granularity_of(ref.interval) != granularity for ref in refs):
            return None
        planned = as_of
    raise RuntimeError(
        f"the input of {target} kept changing while the compaction waited for its "
        f"segment locks ({_MAX_RESOLVES} rounds)"
    )


def _pieces_of(
    timeline: Timeline, target: Interval, ids: set[str]
) -> list[tuple[Interval, SegmentRef]]:
    """The visible pieces of the segments `ids` within `target` in `timeline`."""
    return [
        (piece, ref)
        for piece, ref in timeline.lookup(target)
        if ref.id in ids and not ref.tombstone
    ]


# --- time-chunk locked --------------------------------------------------------------


def _time_chunk_locked(run: _Run, lock_type: str) -> dict:
    task, spec, monitor = run.task, run.spec, run.monitor
    gran = Granularity.from_name(run.granularity)
    t = time.monotonic()
    monitor.set_phase("locking", 0.02, 0.0)
    intervals = lock_intervals([run.target], run.granularity)
    locks = _lock_time_chunks(task, intervals, lock_type, run.timeout_ms)
    run.locked(t)

    read = _Read([], [], set())
    for lock in locks:
        as_of = selectors.timeline_for(datasource=spec.datasource, as_of=lock.granted_seq)
        read_locked(as_of, lock.interval, run.named, gran, read)
    intervals = [lock.interval for lock in locks]
    if not read.pieces and not read.keep:
        return run.nothing("no visible data in the locked intervals")
    inputs = _segments_by_id({ref.id for _, ref in read.pieces} | {ref.id for ref in read.keep})
    plan = compaction_plan(
        spec,
        input_schemas=[inputs[i].schema for i in {ref.id for _, ref in read.pieces}],
        segment_granularity=run.granularity,
        intervals=intervals,
    )
    if not run.named and _already_compacted(read, gran, inputs, plan):
        return run.nothing(
            "already compacted: every chunk is in the requested shape", inputs=sorted(inputs)
        )
    result = run_job(task, spec, monitor, plan, read.pieces, inputs, intermediary_dir(task.id))
    monitor.check()

    monitor.set_phase("publishing", 0.9, 0.0)
    t = time.monotonic()
    new_segments = _time_chunk_segments(run, plan, result.segments, read, inputs)
    monitor.check()
    entry = publish_once(task, new_segments, note="compaction")
    run.moved.clear()  # published: the files belong to their segments now
    run.timings["publish"] = round(time.monotonic() - t, 3)
    report = _report(
        result.report,
        read_ids=sorted({ref.id for _, ref in read.pieces}),
        kept_ids=sorted(ref.id for ref in read.keep),
        new_segments=new_segments,
        entry=entry,
        granularity=run.granularity,
        intervals=intervals,
        plan=plan,
    )
    report["readAsOf"] = read_as_of_report([(lk.interval, lk.granted_seq) for lk in locks])
    return report


def _time_chunk_segments(
    run: _Run, plan: Plan, staged_segments, read: _Read, inputs: dict[str, Segment]
) -> list[services.NewSegment]:
    """The segments a time-chunk locked compaction publishes at its new version:
    per written chunk its staged files (moved into deep storage) then the segments
    it keeps, re-registered; with dropExisting, a tombstone per emptied chunk."""
    by_chunk: dict[Interval, list] = {}
    for staged in staged_segments:
        by_chunk.setdefault(staged.chunk, []).append(staged)
    keep_by_chunk: dict[Interval, list[SegmentRef]] = {}
    for ref in read.keep:
        keep_by_chunk.setdefault(ref.interval, []).append(ref)
    written = sorted(set(by_chunk) | set(keep_by_chunk), key=lambda iv: iv.start)
    emptied = sorted(read.had_data - set(written), key=lambda iv: iv.start)
    requests = [
        services.AllocationRequest(c, len(by_chunk.get(c, ())) + len(keep_by_chunk.get(c, ())))
        for c in written
    ]
    if run.spec.drop_existing:
        requests += [services.AllocationRequest(c, 1) for c in emptied]
    allocations = services.segments_allocate_many(task=run.task, requests=requests, append=False)
    new_segments: list[services.NewSegment] = []
    for request, alloc in zip(requests, allocations, strict=True):
        chunk = request.interval
        staged = sorted(by_chunk.get(chunk, ()), key=lambda s: s.index)
        kept = sorted(keep_by_chunk.get(chunk, ()), key=lambda r: r.partition)
        if not staged and not kept:
            new_segments.append(_tombstone(chunk, alloc))
            continue
        partitions = list(alloc.partitions)
        for seg, partition in zip(staged, partitions, strict=False):
            # Kept files were partitioned otherwise: a mixed chunk is just numbered.
            template = {"type": "numbered"} if kept else seg.shard_spec
            shard = shard_spec(template, partition, alloc.core_partitions)
            new_segments.append(_staged_segment(run, plan, seg, chunk, alloc, partition, shard))
        for ref, partition in zip(kept, partitions[len(staged) :], strict=True):
            new_segments.append(_kept_segment(inputs[ref.id], chunk, alloc, partition))
    return new_segments


def _tombstone(chunk: Interval, alloc: services.Allocation) -> services.NewSegment:
    """A tombstone at a time-chunk compaction's version over a chunk it emptied."""
    return services.NewSegment(
        interval=chunk,
        version=alloc.version,
        partition=alloc.partitions[0],
        core_partitions=0,
        tombstone=True,
        shard_spec={"type": "tombstone"},
    )


def _kept_segment(
    source: Segment, chunk: Interval, alloc: services.Allocation, partition: int
) -> services.NewSegment:
    """A visible segment re-registered as is (same file) at the compaction's version."""
    return services.NewSegment(
        interval=chunk,
        version=alloc.version,
        partition=partition,
        core_partitions=alloc.core_partitions,
        location=source.location,
        num_rows=source.num_rows,
        size_bytes=source.size_bytes,
        shard_spec=shard_spec({"type": "numbered"}, partition, alloc.core_partitions),
        upgraded_from=source.upgraded_from or source.id,
        schema=source.schema,
        compaction_state=source.compaction_state,
    )


def read_locked(
    timeline: Timeline,
    interval: Interval,
    named: dict[str, Segment],
    gran: Granularity,
    read: _Read,
) -> None:
    """Add to `read` what `interval` held in `timeline` (as of its lock)."""
    visible = [(piece, ref) for piece, ref in timeline.lookup(interval) if not ref.tombstone]
    for piece, _ in visible:
        read.had_data.update(gran.iter_buckets(piece))
    if not named:
        read.pieces += visible
        return
    keep_ids: set[str] = set()
    for piece, ref in visible:
        if ref.id in named:
            read.pieces.append((piece, ref))
        elif (
            ref.interval == gran.bucket(ref.interval.start)
            and timeline.status(ref.id) == "visible"
            and interval.contains(ref.interval)
        ):
            keep_ids.add(ref.id)  # re-registered as is at the new version
        else:
            read.pieces.append((piece, ref))  # cannot be re-registered: rewritten
    read.keep += [timeline.get(i) for i in sorted(keep_ids)]


def _already_compacted(read: _Read, gran: Granularity, inputs, plan: Plan) -> bool:
    """Every output chunk is already one whole visible chunk of that granularity,
    all of whose segments a compaction wrote in the shape asked for."""
    by_chunk: dict[Interval, list[SegmentRef]] = {}
    for piece, ref in read.pieces:
        if ref.interval != gran.bucket(ref.interval.start) or piece != ref.interval:
            return False  # another granularity, or partly visible
        by_chunk.setdefault(ref.interval, []).append(ref)
    return all(
        len({r.version for r in refs}) == 1
        and all(inputs[r.id].compaction_state == plan.compaction_state for r in refs)
        for refs in by_chunk.values()
    )


# --- segment locked -----------------------------------------------------------------


def _segment_locked(run: _Run) -> dict:
    task, spec, monitor = run.task, run.spec, run.monitor
    t = time.monotonic()
    monitor.set_phase("locking", 0.02, 0.0)
    resolved = _lock_visible_segments(
        task, spec, run.target, run.named, run.granularity, run.timeout_ms
    )
    run.locked(t)
    if resolved is None:
        return _time_chunks_instead(run)
    as_of, pieces = resolved
    if not pieces:
        return run.nothing("no visible data in the locked segments")
    inputs = _segments_by_id({ref.id for _, ref in pieces})
    chunks = sorted({ref.interval for _, ref in pieces}, key=lambda iv: iv.start)
    plan = compaction_plan(
        spec,
        input_schemas=[s.schema for s in inputs.values()],
        segment_granularity=run.granularity,
        intervals=chunks,
    )
    by_chunk_ids: dict[Interval, set[str]] = {}
    for _, ref in pieces:
        by_chunk_ids.setdefault(ref.interval, set()).add(ref.id)
    if not run.named and _each_chunk_compacted(as_of, by_chunk_ids, inputs, plan):
        return run.nothing(
            "already compacted: one segment per chunk in the requested shape",
            inputs=sorted(inputs),
        )
    result = run_job(task, spec, monitor, plan, pieces, inputs, intermediary_dir(task.id))
    monitor.check()

    monitor.set_phase("publishing", 0.9, 0.0)
    t = time.monotonic()
    new_segments, left_as_is = _overwrite_segments(run, plan, chunks, by_chunk_ids, result.segments)
    monitor.check()
    entry = publish_once(task, new_segments, note="compaction") if new_segments else None
    run.moved.clear()
    run.timings["publish"] = round(time.monotonic() - t, 3)
    report = _report(
        result.report,
        read_ids=sorted(inputs),
        kept_ids=[],
        new_segments=new_segments,
        entry=entry,
        granularity=run.granularity,
        intervals=chunks,
        plan=plan,
    )
    if left_as_is:
        report["compaction"]["chunksLeftAsIs"] = left_as_is
    return report


def _time_chunks_instead(run: _Run) -> dict:
    """The input changed while the task waited, into segments one segment lock
    each cannot rewrite in place: give the segment locks back and lock the time
    chunks instead (read as of their grant, like any time-chunk compaction)."""
    services.locks_release_all(task_id=run.task.id)
    report = _time_chunk_locked(run, locking.EXCLUSIVE)
    report["compaction"]["lockGranularity"] = locking.TIME_CHUNK
    report["compaction"]["note"] = (
        "time-chunk locks: the input changed while the task waited for its "
        "segment locks, into segments of another granularity"
    )
    return report


def _each_chunk_compacted(
    as_of: Timeline, by_chunk_ids: dict[Interval, set[str]], inputs, plan: Plan
) -> bool:
    """Every chunk is one visible segment a compaction wrote in the shape asked for."""
    return all(
        len(ids) == 1
        and inputs[next(iter(ids))].compaction_state == plan.compaction_state
        and as_of.status(next(iter(ids))) == "visible"
        for ids in by_chunk_ids.values()
    )


def _overwrite_segments(
    run: _Run,
    plan: Plan,
    chunks: list[Interval],
    by_chunk_ids: dict[Interval, set[str]],
    staged_segments,
) -> tuple[list[services.NewSegment], list[str]]:
    """The overwrite segments (same major version, next minor version) of each
    chunk's staged files, moved into deep storage, and the chunks left as they
    are (no rows left and no dropExisting)."""
    by_chunk: dict[Interval, list] = {}
    for staged in staged_segments:
        by_chunk.setdefault(staged.chunk, []).append(staged)
    new_segments: list[services.NewSegment] = []
    left_as_is = []
    for chunk in chunks:
        staged = sorted(by_chunk.get(chunk, ()), key=lambda s: s.index)
        if not staged and not run.spec.drop_existing:
            left_as_is.append(str(chunk))  # Druid's legacy replace: the inputs stay
            continue
        alloc = services.segments_allocate_overwrite(
            task=run.task,
            input_segment_ids=sorted(by_chunk_ids[chunk]),
            count=len(staged) or 1,
            sequence_name="compact",
        )
        if not staged:
            # Nothing of the inputs is left (the filter threw every row away): a
            # tombstone overwrite hides exactly them, as rewritten segments would.
            new_segments.append(_overwrite_tombstone(chunk, alloc))
            continue
        for seg, partition in zip(staged, alloc.partitions, strict=True):
            new_segments.append(
                _overwrite_segment(run, plan, seg, chunk, alloc, partition, len(staged))
            )
    return new_segments, left_as_is


def _overwrite_tombstone(chunk: Interval, alloc) -> services.NewSegment:
    return services.NewSegment(
        interval=chunk,
        version=alloc.version,
        partition=alloc.partitions[0],
        core_partitions=alloc.core_partitions,
        tombstone=True,
        shard_spec={
            "type": "tombstone",
            "partitionNum": alloc.partitions[0],
            "minorVersion": alloc.minor_version,
            "rootPartitions": list(alloc.root_partitions or ()),
        },
        minor_version=alloc.minor_version,
        root_partitions=alloc.root_partitions,
    )


def _overwrite_segment(
    run: _Run, plan: Plan, seg, chunk: Interval, alloc, partition: int, group_size: int
) -> services.NewSegment:
    """A staged file moved into deep storage as one segment of an overwrite's
    atomic update group."""
    shard = {
        "type": "numbered_overwrite",
        "partitionNum": partition,
        "minorVersion": alloc.minor_version,
        "atomicUpdateGroupSize": group_size,
        "rootPartitions": list(alloc.root_partitions or ()),
    }
    new = _staged_segment(run, plan, seg, chunk, alloc, partition, shard)
    return replace(new, minor_version=alloc.minor_version, root_partitions=alloc.root_partitions)


# --- shared steps -------------------------------------------------------------------


def _named_segments(spec: CompactionSpec) -> dict[str, Segment]:
    if not spec.segment_ids:
        return {}
    found = {
        s.id: s
        for s in Segment.objects.filter(
            id__in=spec.segment_ids, datasource__name=spec.datasource, used=True
        )
    }
    missing = [i for i in spec.segment_ids if i not in found]
    if missing:
        raise SpecError(
            "ioConfig.inputSpec.segments",
            f"{missing[0]} is not a used segment of dataSource {spec.datasource!r}",
        )
    return found


def _data_refs(pieces, named: dict[str, Segment]) -> list[SegmentRef]:
    """The distinct segments with rows among visible pieces (only the named ones, if any)."""
    refs: dict[str, SegmentRef] = {}
    for _, ref in pieces:
        if not ref.tombstone and (not named or ref.id in named):
            refs.setdefault(ref.id, ref)
    return sorted(refs.values(), key=lambda r: (r.interval.start, r.version, r.partition))


def _granularity_of(interval: Interval) -> str | None:
    """The granularity whose bucket `interval` is, if any."""
    for name in GRANULARITY_NAMES:
        if name in ("NONE", "ALL"):
            continue
        if Granularity.from_name(name).bucket(interval.start) == interval:
            return name
    return None


def _coarsest(names: Sequence[str]) -> str:
    return max(names, key=GRANULARITY_NAMES.index)


def _segments_by_id(ids: set[str]) -> dict[str, Segment]:
    return {s.id: s for s in Segment.objects.filter(id__in=ids)}


def run_job(task, spec, monitor, plan: Plan, pieces, inputs, work_dir: Path):
    source = [
        SourcePiece(
            location=inputs[ref.id].location,
            segment=file_extent(ref.interval, inputs[ref.id].upgraded_from),
            visible=piece,
        )
        for piece, ref in pieces
        if inputs[ref.id].location
    ]
    spans = TWO_PHASE_SPANS if runs_two_phases(plan.ingestion) else _SINGLE_PASS_SPANS
    return run_compaction_job(
        get_spark(),
        plan,
        pieces=source,
        work_dir=work_dir,
        job_group=task.id,
        progress=TaskProgress(monitor, spans),
    )


def _staged_segment(
    run: _Run, plan: Plan, seg, chunk: Interval, alloc, partition: int, shard_spec: dict
) -> services.NewSegment:
    """Move a staged file into deep storage at `alloc`'s version (recorded in
    `run.moved`); the segment that will publish it."""
    target, schema = into_deep_storage(
        seg.path,
        datasource=run.task.datasource,
        interval=chunk,
        version=alloc.version,
        partition=partition,
        ingestion=plan.ingestion,
        moved=run.moved,
    )
    return services.NewSegment(
        interval=chunk,
        version=alloc.version,
        partition=partition,
        core_partitions=alloc.core_partitions,
        location=str(target),
        num_rows=seg.num_rows,
        size_bytes=seg.size_bytes,
        shard_spec=shard_spec,
        schema=schema,
        compaction_state=plan.compaction_state if run.spec.store_compaction_state else None,
    )


def _report(job_report, *, read_ids, kept_ids, new_segments, entry, granularity, intervals, plan):
    report = dict(job_report)
    data = [s for s in new_segments if not s.tombstone and not s.upgraded_from]
    stats = report.get("rowStats") or {}
    report["segmentsPublished"] = len(new_segments)
    report["commit"] = entry.seq if entry else None
    report["compaction"] = {
        "nothingToCompact": False,
        "inputSegments": read_ids,
        "segmentsIn": len(read_ids),
        "segmentsOut": len(data),
        "tombstones": sum(s.tombstone for s in new_segments),
        "reRegistered": kept_ids,
        "rowsRead": sum(stats.values()) if stats else 0,
        "rowsWritten": report.get("rowsWritten", 0),
        "bytesRead": report.get("ingest/task/bytes/processed", 0),
        "bytesWritten": report.get("bytesWritten", 0),
        "segmentGranularity": granularity,
        "intervals": [str(iv) for iv in intervals],
        "compactionState": plan.compaction_state,
    }
    return report


def _nothing_to_compact(reason: str, target: Interval, timings: dict, inputs=()) -> dict:
    return {
        "phases": dict(timings),
        "segmentsPublished": 0,
        "commit": None,
        "rowsWritten": 0,
        "compaction": {
            "nothingToCompact": True,
            "reason": f"nothing to compact: {reason}",
            "interval": str(target),
            "inputSegments": list(inputs),
            "segmentsIn": 0,
            "segmentsOut": 0,
        },
    }
