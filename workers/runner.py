"""Running a claimed task: locks, the Spark job, deep storage, publish, cleanup.

The Spark jobs in `workers.jobs` know nothing of the metastore; everything that
writes to it goes through `metastore.services`. Whatever happens, a task ends
with a final status, its locks released and its intermediary directory removed;
files it moved into deep storage but did not publish are deleted.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings
from django.db import close_old_connections

from metastore import locking, selectors, services
from metastore.druid.errors import SpecError
from metastore.druid.ingestion import IngestionSpec
from metastore.intervals import Granularity, Interval, is_open_ended
from metastore.models import (
    DataSource,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
    TaskType,
)
from workers.compaction import run_compaction
from workers.jobs.ingest import (
    MergeFailed,
    ParseExceptionsExceeded,
    SourcePiece,
    StagedSegment,
    run_ingest,
    runs_two_phases,
)
from workers.jobs.input_files import resolve_local_inputs
from workers.jobs.parsing import file_extent
from workers.kill import run_kill
from workers.monitor import Monitor, TaskProgress, TaskStopped, clean_up
from workers.paths import intermediary_dir, remove_unpublished
from workers.slots import driver_exit_reason
from workers.spark import get_spark
from workers.steps import (
    SINGLE_PASS_SPANS,
    TWO_PHASE_SPANS,
    append_needs_replan,
    append_pieces,
    into_deep_storage,
    lock_plan,
    publish_once,
    read_as_of_report,
    read_points,
    retrying_db,
    shard_spec,
)

log = logging.getLogger(__name__)


def run_task(task_id: str) -> None:
    """Run a claimed task to its end (any outcome is recorded on the task)."""
    task = Task.objects.get(id=task_id)
    monitor = Monitor(task_id, interval_s=settings.STRATA_HEARTBEAT_SECONDS)
    monitor.start()
    moved: list[Path] = []
    report: dict = {"phases": {}}
    started = time.monotonic()
    try:
        run = _RUNNERS.get(task.type)
        if run is None:
            raise SpecError("type", f"{task.type} tasks cannot run yet")
        report = run(task, monitor, moved)
        report["ingest/task/time"] = round(time.monotonic() - started, 3)
        monitor.stop()
        clean_up(task_id)
        retrying_db(
            lambda: services.task_finish(task_id=task_id, status=TaskStatus.SUCCESS, report=report)
        )
    except BaseException as exc:  # noqa: BLE001 - every failure must end the task
        monitor.stop()
        status, reason = _failure(exc, monitor)
        # Nothing of the task may remain once its final status is visible.
        clean_up(task_id)
        remove_unpublished(moved)
        report = dict(report)
        if isinstance(exc, ParseExceptionsExceeded):
            report["rowStats"] = exc.row_stats
            report["parseExceptionSamples"] = exc.samples
        report["ingest/task/time"] = round(time.monotonic() - started, 3)
        try:
            close_old_connections()
            retrying_db(
                lambda: services.task_finish(
                    task_id=task_id, status=status, error=reason, report=report
                )
            )
        except Exception:
            log.exception("could not record the end of %s", task_id)
        if not isinstance(exc, Exception):
            raise
    finally:
        shutil.rmtree(intermediary_dir(task_id), ignore_errors=True)


def _failure(exc: BaseException, monitor: Monitor) -> tuple[str, str]:
    driver_gone = driver_exit_reason(exc)
    if driver_gone:  # the driver JVM died under the task (out of memory, a crash)
        return TaskStatus.FAILED, driver_gone
    if monitor.stop_status:  # a Spark error caused by our own cancel
        return monitor.stop_status, monitor.stop_reason
    if isinstance(exc, TaskStopped):
        return exc.status, exc.reason
    if isinstance(exc, services.TaskCanceled):
        return TaskStatus.CANCELED, str(exc)
    if isinstance(exc, services.LockRevoked):
        return TaskStatus.FAILED, f"preempted: {exc}"
    if isinstance(exc, SpecError):
        return TaskStatus.FAILED, f"invalid spec: {exc}"
    if isinstance(exc, (services.ServiceError, ParseExceptionsExceeded, MergeFailed)):
        return TaskStatus.FAILED, str(exc)
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return TaskStatus.FAILED, "worker stopped while the task ran"
    log.exception("task failed")
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return TaskStatus.FAILED, f"{type(exc).__name__}: {first_line}"[:2000]


class _IndexRun:
    """An index task's spec, lock mode, and what it locked and read as it runs."""

    def __init__(self, task: Task, monitor: Monitor) -> None:
        validated = services.task_validate(spec=task.spec)
        # The files of local input sources are found now, on the worker (SPEC §1:
        # validation is pure); a missing or empty input fails the task naming its field.
        self.spec = resolve_local_inputs(
            validated.ingestion, input_roots=settings.STRATA_INPUT_ROOTS
        )
        self.task = task
        self.monitor = monitor
        self.timeout = validated.context.task_lock_timeout_ms
        # SPEC §5: concurrent append and replace take APPEND / REPLACE locks; an append
        # with forceTimeChunkLock false locks only the segments it allocates.
        mode = services.task_lock_mode(validated)
        self.lock_type = mode.type
        self.segment_locked = mode.granularity == locking.SEGMENT
        self.timings: dict[str, float] = {}
        # Where a replace (or a task re-reading its own dataSource) takes its input
        # from: each time-chunk lock's interval and grant (the report's readAsOf).
        self.read_as_of: list[tuple[Interval, int]] = []
        druid = self.spec.input.druid_source
        self.rereads_itself = druid is not None and druid.datasource == self.spec.datasource
        self.open_ended = any(map(is_open_ended, self.spec.intervals or ()))

    def lock(self, intervals: list[Interval]) -> list[TaskLock]:
        if self.segment_locked:
            return []
        t = time.monotonic()
        self.monitor.set_phase("locking", self.monitor.progress(), 0.0)
        spec = self.spec
        # All intervals in one decision (SPEC §5): the task never holds some while
        # waiting for others, and reads every interval as of the same grant.
        locks = services.locks_acquire(
            task=self.task,
            intervals=lock_plan(
                self.task.datasource, intervals, spec.segment_granularity, spec.append_to_existing
            ),
            lock_type=self.lock_type,
            timeout_ms=self.timeout,
        )
        self.timings["lock"] = round(self.timings.get("lock", 0.0) + time.monotonic() - t, 3)
        self.read_as_of.extend(read_points(locks))
        return locks

    def up_front(self) -> list[Interval]:
        """The intervals locked before reading: the spec's when it names them, and
        always a dataSource this task rewrites (it must replace exactly what it read).
        Open-ended intervals (Druid's ETERNITY) are clipped to what exists: the used
        segments there now and, once read, the chunks the task's rows fall in."""
        intervals = list(self.spec.intervals or ())
        if intervals and not self.open_ended:
            return intervals
        if not self.rereads_itself:
            return []
        druid = self.spec.input.druid_source
        return _clip_open(self.task.datasource, [druid.interval, *intervals], [])

    def clip_open_intervals(self, chunks: list[Interval]) -> None:
        """Clip the spec's open-ended intervals to the used segments and `chunks`."""
        clipped = _clip_open(self.task.datasource, self.spec.intervals, chunks)
        self.spec = dataclasses.replace(self.spec, intervals=tuple(clipped))

    def pieces(self, locks: list[TaskLock]) -> list[SourcePiece]:
        """The visible segment parts a druid input reads."""
        if self.spec.input.druid_source is None:
            return []
        points = None
        if self.rereads_itself and locks:
            # A task rewriting its own dataSource reads each interval as of its own
            # lock's grant (SPEC §5): what committed there before is its input, and
            # appends committing after are carried onto its version at publish.
            points = read_points(locks)
        return source_pieces(self.spec, read_points=points)

    def ingest(self, pieces: list[SourcePiece]):
        spec = self.spec
        spans = TWO_PHASE_SPANS if runs_two_phases(spec) else SINGLE_PASS_SPANS
        return run_ingest(
            get_spark(),
            spec,
            work_dir=intermediary_dir(self.task.id),
            job_group=self.task.id,
            source_pieces=pieces,
            progress=TaskProgress(self.monitor, spans),
        )


def _run_index(task: Task, monitor: Monitor, moved: list[Path]) -> dict:
    run = _IndexRun(task, monitor)
    up_front = run.up_front()
    locks = run.lock(up_front) if up_front else []
    pieces = run.pieces(locks)
    result = run.ingest(pieces)
    monitor.check()
    if run.open_ended:
        run.clip_open_intervals(result.chunks_with_rows)
    spec = run.spec
    after = list(spec.intervals) if run.open_ended else result.chunks_with_rows
    if not up_front and after:
        run.lock(after)

    monitor.set_phase("publishing", 0.9, 0.0)
    t3 = time.monotonic()
    by_chunk, allocations = _allocate_staged(run, result.segments)
    new_segments = _move_to_deep_storage(run, by_chunk, allocations, moved)
    if spec.drop_existing:
        new_segments += _tombstones(task, spec, set(by_chunk))
    monitor.check()
    entry = publish_once(task, new_segments) if new_segments else None
    moved.clear()  # published: the files belong to their segments now
    run.timings["publish"] = round(time.monotonic() - t3, 3)
    return _index_report(run, result.report, new_segments, entry, pieces)


def _allocate_staged(
    run: _IndexRun, staged: list[StagedSegment]
) -> tuple[dict[Interval, list[StagedSegment]], list[tuple[Interval, services.Allocation]]]:
    """Allocate ids for the staged files, by chunk: ({chunk: staged files},
    [(chunk, allocation)] in chunk order). An append splits its files by the
    chunks visible over their rows first, and again while that layout changes."""
    spec, task = run.spec, run.task
    buckets = sorted({s.chunk for s in staged}, key=lambda c: c.start)
    for attempt in range(_LAYOUT_ROUNDS):
        staged_segments = staged
        if spec.append_to_existing:
            layout = append_pieces(task.datasource, buckets)
            staged_segments = _split_by_layout(staged_segments, layout)
        by_chunk: dict[Interval, list[StagedSegment]] = {}
        for one in staged_segments:
            by_chunk.setdefault(one.chunk, []).append(one)
        chunks = sorted(by_chunk, key=lambda iv: iv.start)
        counts = [len(by_chunk[chunk]) for chunk in chunks]
        try:
            allocations = allocate_segments(
                task, chunks, counts, spec.append_to_existing, run.segment_locked, run.timeout
            )
            return by_chunk, list(zip(chunks, allocations, strict=True))
        except services.ServiceError as exc:
            # Allocation decides where an append's rows go again, under the lock
            # box, and refuses pieces split by a layout that changed since: a
            # replace or compaction beside it (an APPEND lock under concurrent
            # locks, or no lock yet under segment locks) published chunks over
            # its rows after the split. Their rows go into the new chunks (SPEC
            # §5, §8 row 7), or an append at another granularity took a wider
            # chunk over them (`append_needs_replan`): lock those chunks too and
            # split again.
            if (
                type(exc) is not services.ServiceError  # revoked, canceled, timed out...
                or not spec.append_to_existing
                or attempt + 1 == _LAYOUT_ROUNDS
                or not append_needs_replan(task, buckets, layout)
            ):
                raise
            run.monitor.check()
            run.lock(buckets)
            run.monitor.set_phase("publishing", 0.9, 0.0)
    raise AssertionError("unreachable: the last layout round re-raises")


def _move_to_deep_storage(
    run: _IndexRun,
    by_chunk: dict[Interval, list[StagedSegment]],
    allocations: list[tuple[Interval, services.Allocation]],
    moved: list[Path],
) -> list[services.NewSegment]:
    """Move each staged file to its allocated place in deep storage (recorded in
    `moved` until published) and describe the segment it becomes."""
    spec, task = run.spec, run.task
    new_segments: list[services.NewSegment] = []
    for chunk, alloc in allocations:
        staged = sorted(by_chunk[chunk], key=lambda s: s.index)
        for seg, partition in zip(staged, alloc.partitions, strict=True):
            # An append's rows go into the chunk visible over them, which may be
            # wider than the job's own bucket (SPEC §5): `alloc.interval`.
            target, schema = into_deep_storage(
                seg.path,
                datasource=task.datasource,
                interval=alloc.interval,
                version=alloc.version,
                partition=partition,
                ingestion=spec,
                moved=moved,
            )
            new_segments.append(
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=partition,
                    core_partitions=alloc.core_partitions,
                    location=str(target),
                    num_rows=seg.num_rows,
                    size_bytes=seg.size_bytes,
                    shard_spec=shard_spec(seg.shard_spec, partition, alloc.core_partitions),
                    schema=schema,
                )
            )
    return new_segments


def _index_report(run: _IndexRun, job_report: dict, new_segments, entry, pieces) -> dict:
    spec = run.spec
    report = dict(job_report)
    report["phases"] = {**report.get("phases", {}), **run.timings}
    report["segmentsPublished"] = len(new_segments)
    report["commit"] = entry.seq if entry else None
    if entry is None:
        # A SUCCESS that changed nothing says so (Druid #18099): with dropExisting
        # every chunk of the intervals gets rows or a tombstone, so this is an
        # append, or a replace without dropExisting, that had no row to write.
        report["nothingPublished"] = _nothing_published(spec)
    if not spec.append_to_existing or run.rereads_itself:
        report["readAsOf"] = read_as_of_report(run.read_as_of)
    if spec.input.druid_source is not None:
        report["sourceSegments"] = len({p.location for p in pieces})
    return report


def _clip_open(datasource: str, intervals, chunks) -> list[Interval]:
    """`intervals` with each open-ended one (Druid's ETERNITY, or half of it)
    clipped to what exists there: the dataSource's used segments and `chunks`
    (where the task's rows fall); one that holds neither is dropped."""
    out = []
    for iv in intervals:
        if not is_open_ended(iv):
            out.append(iv)
            continue
        spans = [c for c in chunks if c.overlaps(iv)]
        extent = selectors.segments_extent(datasource=datasource, interval=iv, used=True)
        spans += [extent] if extent else []
        if spans:
            hull = Interval(min(s.start for s in spans), max(s.end for s in spans))
            out.append(hull.intersection(iv) or hull)
    return out


def _nothing_published(spec: IngestionSpec) -> str:
    """Why an ingestion that succeeded published nothing, for its report."""
    if spec.append_to_existing:
        return "no row to append (see rowStats): nothing was published"
    where = ", ".join(str(iv) for iv in spec.intervals) if spec.intervals else "its intervals"
    return (
        "no row to write (see rowStats): nothing was published, and as dropExisting is "
        f"false the segments already in {where} stay visible; with dropExisting true "
        "they would be dropped (tombstones)"
    )


# How many times an append splits its rows again because a replace or compaction
# changed the chunks over them meanwhile (each round needs another publish there).
_LAYOUT_ROUNDS = 8


def _split_by_layout(
    staged: list[StagedSegment], pieces: dict[Interval, list[Interval]]
) -> list[StagedSegment]:
    """An append's staged files split by where their rows go (SPEC §5): `pieces`
    is `append_pieces` of their buckets.

    The job buckets rows by the spec's segment granularity and knows nothing of
    the metastore. Rows go into the chunk visible at their timestamp, whose
    interval may differ (e.g. HOUR chunks of a replace inside a DAY bucket):
    the runner asks allocation for the layout of each bucket and, where a
    bucket spans several chunks, rewrites its files into one file per piece
    (plain Parquet filtering on `__time`, no Spark); each piece is then
    allocated on its own. Buckets inside one chunk (the usual case, or a DAY
    bucket inside a MONTH compaction) keep their files."""
    out = []
    next_index: dict[Interval, int] = {}
    for seg in sorted(staged, key=lambda s: (s.chunk.start, s.index)):
        parts = pieces[seg.chunk]
        if parts == [seg.chunk]:
            out.append(seg)
            continue
        table = pq.read_table(seg.path)
        column = table.column("__time")
        for n, piece in enumerate(parts):
            if pa.types.is_timestamp(column.type):
                low = pa.scalar(piece.start, type=column.type)
                high = pa.scalar(piece.end, type=column.type)
            else:  # epoch milliseconds
                low = int(piece.start.timestamp() * 1000)
                high = int(piece.end.timestamp() * 1000)
            mask = pc.and_(pc.greater_equal(column, low), pc.less(column, high))
            part = table.filter(mask)
            if part.num_rows == 0:
                continue
            path = f"{seg.path}.piece{n}.parquet"
            pq.write_table(part, path)
            index = next_index.get(piece, 0)
            next_index[piece] = index + 1
            out.append(
                StagedSegment(
                    chunk=piece,
                    index=index,
                    path=path,
                    num_rows=part.num_rows,
                    size_bytes=Path(path).stat().st_size,
                    shard_spec=seg.shard_spec,
                )
            )
    return out


def allocate_segments(
    task: Task,
    chunks: list[Interval],
    counts: list[int],
    append: bool,
    segment_locked: bool,
    timeout_ms: int,
) -> list[services.Allocation]:
    """Allocate segment ids for every chunk; under time-chunk locks in one batch,
    with segment locks chunk by chunk, waiting (up to the lock timeout) while
    another task's time-chunk lock blocks them."""
    if not segment_locked:
        # An append's pieces may share a chunk: each piece is its own sequence, so a
        # repeated call finds what each piece was given.
        requests = [
            services.AllocationRequest(c, n, str(c) if append else "")
            for c, n in zip(chunks, counts, strict=True)
        ]
        return services.segments_allocate_many(task=task, requests=requests, append=append)
    deadline = time.monotonic() + timeout_ms / 1000.0
    out = []
    for chunk, count in zip(chunks, counts, strict=True):
        while True:
            alloc = services.segments_allocate(
                task=task,
                interval=chunk,
                count=count,
                append=True,
                sequence_name=str(chunk),
                lock_granularity=locking.SEGMENT,
            )
            if alloc is not None:
                out.append(alloc)
                break
            if time.monotonic() >= deadline:
                raise services.LockTimeout(
                    f"timed out after {timeout_ms} ms waiting for segment locks in {chunk}"
                )
            time.sleep(services.LOCK_POLL_SECONDS)
    return out


def source_pieces(
    spec: IngestionSpec, read_points: list[tuple[Interval, int]] | None = None
) -> list[SourcePiece]:
    """The visible parts of the druid input's segments, from its timeline (SPEC §3):
    partially overshadowed segments are read only where they are visible, and
    tombstones hide what is under them and hold no rows.

    `read_points` ((locked interval, commit seq) pairs) reads each interval as
    of its own lock's grant; without it, everything is read as it is now."""
    source = spec.input.druid_source
    if not DataSource.objects.filter(name=source.datasource).exists():
        raise SpecError(
            "spec.ioConfig.inputSource.dataSource", f"there is no dataSource {source.datasource!r}"
        )
    if read_points is None:
        read_points = [(source.interval, None)]
    timelines: dict[int | None, object] = {}
    visible = []
    for locked, seq in sorted(read_points, key=lambda p: p[0].start):
        part = locked.intersection(source.interval)
        if part is None:
            continue
        if seq not in timelines:
            timelines[seq] = selectors.timeline_for(datasource=source.datasource, as_of=seq)
        visible += [(piece, ref) for piece, ref in timelines[seq].lookup(part) if not ref.tombstone]
    files = {
        seg_id: (location, upgraded_from)
        for seg_id, location, upgraded_from in Segment.objects.filter(
            id__in={ref.id for _, ref in visible}
        ).values_list("id", "location", "upgraded_from")
    }
    return [
        SourcePiece(
            location=files[ref.id][0],
            segment=file_extent(ref.interval, files[ref.id][1]),
            visible=piece,
        )
        for piece, ref in visible
        if files.get(ref.id, ("", ""))[0]
    ]


def _tombstones(task: Task, spec, chunks_with_rows: set[Interval]) -> list[services.NewSegment]:
    gran = Granularity.from_name(spec.segment_granularity)
    empty = [
        chunk
        for iv in spec.intervals
        for chunk in gran.iter_buckets(iv)
        if chunk not in chunks_with_rows
    ]
    allocations = services.segments_allocate_many(
        task=task,
        requests=[services.AllocationRequest(chunk, 1, "tombstone") for chunk in empty],
        append=False,
    )
    return [
        services.NewSegment(
            interval=alloc.interval,
            version=alloc.version,
            partition=alloc.partitions[0],
            core_partitions=0,
            tombstone=True,
            shard_spec={"type": "tombstone"},
        )
        for alloc in allocations
    ]


def _run_kill(task: Task, monitor: Monitor, moved: list[Path]) -> dict:
    monitor.set_phase("killing", 0.1, 0.0)
    return run_kill(task)


# The one table of which code runs a task of each type (`TaskType`).
_RUNNERS = {
    TaskType.INDEX_PARALLEL: _run_index,
    TaskType.COMPACT: run_compaction,
    TaskType.KILL: _run_kill,
}
