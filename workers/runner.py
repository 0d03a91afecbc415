"""Running a claimed task: locks, the Spark job, deep storage, publish, cleanup.

The Spark jobs in `workers.jobs` know nothing of the metastore; everything that
writes to it goes through `metastore.services`. Whatever happens, a task ends
with a final status, its locks released and its intermediary directory removed;
files it moved into deep storage but did not publish are deleted.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from metastore import locking, selectors, services
from metastore.intervals import Granularity, Interval
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    DataSource,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
)
from metastore.specs import IngestionSpec, SpecError
from workers.jobs.compact import file_schema
from workers.jobs.ingest import (
    MergeFailed,
    ParseExceptionsExceeded,
    Progress,
    SourcePiece,
    StagedSegment,
    interval_dirname,
    run_ingest,
)
from workers.jobs.parsing import file_extent
from workers.kill import run_kill
from workers.spark import get_spark

log = logging.getLogger(__name__)


class TaskStopped(Exception):
    """The task was canceled or preempted while running."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _confined(root: Path, *parts: str) -> Path:
    """`root/parts...`, refusing any part that could leave `root` (separators,
    '.'/'..', NUL, absolute paths): task ids and dataSource names become paths."""
    for part in parts:
        if (
            not part
            or part in (".", "..")
            or "/" in part
            or "\\" in part
            or "\x00" in part
            or len(os.fsencode(part)) > 255
        ):
            raise ValueError(f"{part[:80]!r} cannot be a directory name under {root}")
    path = Path(root).joinpath(*parts)
    resolved_root = Path(root).resolve()
    if resolved_root not in path.resolve().parents:
        raise ValueError(f"{path} escapes {root}")
    return path


def intermediary_dir(task_id: str) -> Path:
    return _confined(settings.STRATA_INTERMEDIARY_DIR, task_id)


def deep_storage_dir(datasource: str, interval: Interval, version: str, partition: int) -> Path:
    """`<data>/deep/<dataSource>/<start>_<end>/<version>/<partition>/`."""
    return _confined(
        settings.STRATA_DEEP_STORAGE,
        datasource,
        interval_dirname(interval),
        # Deep-storage paths avoid ':' so Hadoop-style readers accept them.
        version.replace(":", "").replace("-", ""),
        str(partition),
    )


@dataclass(eq=False)  # hashable by identity: kept in _MONITORS
class Monitor:
    """Heartbeats the task and watches for cancel/revocation from a side thread.

    On either it cancels the task's Spark jobs (by job group) so the main thread
    stops within about one heartbeat. A phase change is recorded at once; the
    progress inside a phase is the fraction the job reports, or else the share
    of finished tasks among the Spark jobs the phase started.
    """

    task_id: str
    interval_s: float = 1.0
    phase: str = "starting"
    base_progress: float = 0.0
    span: float = 0.0
    stop_status: str | None = None
    stop_reason: str = ""
    _fraction: float | None = None
    _jobs_before: frozenset[int] = frozenset()
    _stop: threading.Event = field(default_factory=threading.Event)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def terminate(self, reason: str) -> None:
        """Stop the task from outside (SIGTERM): fail it, stop its Spark jobs."""
        if not self.stop_status:
            self.stop_status = TaskStatus.FAILED
            self.stop_reason = reason
        self._wake.set()

    @property
    def interruptible(self) -> bool:
        """False once publishing began: the publish must run or not, never half."""
        return self.phase != "publishing"

    def start(self) -> None:
        _MONITORS.add(self)
        self._thread = threading.Thread(
            target=self._run, name=f"monitor-{self.task_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop beating, after recording the last phase and progress."""
        _MONITORS.discard(self)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            services.task_heartbeat(
                task_id=self.task_id, phase=self.phase, progress=self.progress()
            )
        except Exception:  # the task's end is recorded next; this is best effort
            log.exception("last heartbeat of %s failed", self.task_id)

    def set_phase(self, phase: str, base: float, span: float) -> None:
        self.phase, self.base_progress, self.span = phase, base, span
        self._fraction = None
        self._jobs_before = frozenset(self._group_jobs())
        self._wake.set()  # record the new phase now, not at the next beat
        self.check()

    def set_fraction(self, fraction: float) -> None:
        self._fraction = max(0.0, min(1.0, fraction))
        self.check()

    def check(self) -> None:
        if self.stop_status:
            raise TaskStopped(self.stop_status, self.stop_reason)

    def progress(self) -> float:
        fraction = self._fraction if self._fraction is not None else self._spark_fraction()
        return self.base_progress + self.span * fraction

    def _group_jobs(self) -> list[int]:
        try:
            return _group_job_ids(self.task_id)
        except Exception:  # progress is best effort
            return []

    def _spark_fraction(self) -> float:
        try:
            from workers import spark as spark_mod

            session = spark_mod._session
            if session is None:
                return 0.0
            tracker = session.sparkContext.statusTracker()
            done = total = 0
            for job_id in self._group_jobs():
                if job_id in self._jobs_before:
                    continue
                job = tracker.getJobInfo(job_id)
                if job is None:
                    continue
                for stage_id in job.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
            return done / total if total else 0.0
        except Exception:  # progress is best effort; never let it kill the task
            return 0.0

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    signals = services.task_heartbeat(
                        task_id=self.task_id, phase=self.phase, progress=self.progress()
                    )
                except Exception:
                    log.exception("heartbeat of %s failed", self.task_id)
                    signals = services.TaskSignals()
                if not self.stop_status:
                    if signals.ended_reason:
                        # Failed elsewhere (the reaper, while this worker was
                        # unreachable): stop Spark, publish nothing, keep its reason.
                        self.stop_status = TaskStatus.FAILED
                        self.stop_reason = signals.ended_reason
                    elif signals.revoked_reason:
                        self.stop_status = TaskStatus.FAILED
                        self.stop_reason = f"preempted: {signals.revoked_reason}"
                    elif signals.cancel_requested:
                        self.stop_status = TaskStatus.CANCELED
                        self.stop_reason = "canceled on request"
                if self.stop_status:
                    # Every heartbeat, not once: a job started after the first
                    # cancel (e.g. while the JVM was still booting) is stopped too.
                    _cancel_spark(self.task_id)
                self._wake.wait(self.interval_s)
        finally:
            connection.close()


# The monitors of the tasks running in this process (one, in a prefork child).
_MONITORS: set[Monitor] = set()


def terminate_running_tasks(reason: str) -> bool:
    """Fail every task running in this process (called on SIGTERM). True if the
    caller may interrupt the main thread (no task is publishing)."""
    monitors = list(_MONITORS)
    for monitor in monitors:
        monitor.terminate(reason)
        try:
            _cancel_spark(monitor.task_id)
        except Exception:  # the monitor thread retries at its next beat
            log.exception("could not cancel the Spark jobs of %s", monitor.task_id)
    return bool(monitors) and all(m.interruptible for m in monitors)


def running_task_ids() -> list[str]:
    return [m.task_id for m in _MONITORS]


class _TaskProgress(Progress):
    """The job's progress reports, mapped onto the task's phase and progress."""

    def __init__(self, monitor: Monitor, spans: dict[str, tuple[float, float]]) -> None:
        self.monitor = monitor
        self.spans = spans

    def phase(self, name: str) -> None:
        base, span = self.spans[name]
        self.monitor.set_phase(name, base, span)

    def fraction(self, done: float) -> None:
        self.monitor.set_fraction(done)


def _cancel_spark(group: str) -> None:
    from workers import spark as spark_mod

    if spark_mod._session is not None:
        sc = spark_mod._session.sparkContext
        sc.cancelJobGroup(group)
        sc.cancelJobsWithTag(group)


def run_task(task_id: str) -> None:
    """Run a claimed task to its end (any outcome is recorded on the task)."""
    task = Task.objects.get(id=task_id)
    monitor = Monitor(task_id, interval_s=settings.STRATA_HEARTBEAT_SECONDS)
    monitor.start()
    moved: list[Path] = []
    report: dict = {"phases": {}}
    started = time.monotonic()
    try:
        if task.type == "index_parallel":
            report = _run_index(task, monitor, moved)
        elif task.type == "compact":
            report = _run_compaction(task, monitor, moved)
        elif task.type == "kill":
            monitor.set_phase("killing", 0.1, 0.0)
            report = run_kill(task)
        else:
            raise SpecError("type", f"{task.type} tasks cannot run yet")
        report["ingest/task/time"] = round(time.monotonic() - started, 3)
        monitor.stop()
        _clean_up(task_id)
        _retrying_db(
            lambda: services.task_finish(task_id=task_id, status=TaskStatus.SUCCESS, report=report)
        )
    except BaseException as exc:  # noqa: BLE001 - every failure must end the task
        monitor.stop()
        status, reason = _failure(exc, monitor)
        # Nothing of the task may remain once its final status is visible.
        _clean_up(task_id)
        _remove(moved)
        report = dict(report)
        if isinstance(exc, ParseExceptionsExceeded):
            report["rowStats"] = exc.row_stats
            report["parseExceptionSamples"] = exc.samples
        report["ingest/task/time"] = round(time.monotonic() - started, 3)
        try:
            close_old_connections()
            _retrying_db(
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


def _run_compaction(task: Task, monitor: Monitor, moved: list[Path]) -> dict:
    from workers.compaction import run_compaction  # it builds on this module's helpers

    return run_compaction(task, monitor, moved)


# How long the runner waits for the database to come back (a restart, a failover)
# to record a task's end or learn whether its publish committed.
DB_RECOVERY_S = 60.0


def _retrying_db(call, timeout_s: float = DB_RECOVERY_S):
    """`call()`, retried while the database is unreachable (OperationalError,
    InterfaceError), with a fresh connection each time."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except (OperationalError, InterfaceError):
            if time.monotonic() > deadline:
                raise
            log.warning("database unreachable; retrying", exc_info=True)
            connection.close()
            time.sleep(0.5)


def _publish_once(task: Task, new_segments: list, note: str = "") -> CommitLogEntry:
    """Publish; if the connection drops during it (e.g. PostgreSQL restarts at
    COMMIT), find out once the database is back whether the commit happened: a
    committed publish is a success whose files must stay, an uncommitted one a
    failure whose files go. Never publish twice."""
    try:
        return services.segments_publish(task=task, segments=new_segments, note=note)
    except (OperationalError, InterfaceError):
        log.warning("connection lost while %s published; checking whether it committed", task.id)
        connection.close()
        committed = _retrying_db(
            lambda: CommitLogEntry.objects.filter(task_id=task.id, kind=CommitKind.PUBLISH).first()
        )
        if committed is None:
            raise
        log.warning("the publish of %s had committed (commit %s)", task.id, committed.seq)
        return committed


def _group_job_ids(group: str) -> list[int]:
    """Ids of the Spark jobs run under a task's job group (none without a session)."""
    from workers import spark as spark_mod

    session = spark_mod._session
    if session is None:
        return []
    return list(session.sparkContext.statusTracker().getJobIdsForGroup(group))


def _clean_up(task_id: str, timeout_s: float = 60.0) -> None:
    """Stop the task's Spark jobs, wait until none is running (a cancelled job's
    tasks may still be writing), then remove its intermediary directory."""
    from workers import spark as spark_mod

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job_ids = _group_job_ids(task_id)
        if not job_ids:
            break
        tracker = spark_mod._session.sparkContext.statusTracker()
        running = [
            job_id
            for job_id in job_ids
            if (info := tracker.getJobInfo(job_id)) is not None and info.status == "RUNNING"
        ]
        if not running:
            break
        _cancel_spark(task_id)
        time.sleep(0.2)
    shutil.rmtree(intermediary_dir(task_id), ignore_errors=True)


def _failure(exc: BaseException, monitor: Monitor) -> tuple[str, str]:
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


def _remove(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
        # prune empty parents up to the dataSource directory
        for parent in list(path.parents)[:3]:
            try:
                parent.rmdir()
            except OSError:
                break


def _lock_intervals(intervals: list[Interval], granularity: str) -> list[Interval]:
    """Intervals widened to segment-granularity boundaries and merged when they touch."""
    gran = Granularity.from_name(granularity)
    widened = []
    for iv in intervals:
        buckets = list(gran.iter_buckets(iv))
        widened.append(Interval(buckets[0].start, buckets[-1].end))
    return _merge(widened)


def lock_plan(
    datasource: str, intervals: list[Interval], granularity: str, append: bool
) -> list[Interval]:
    """The intervals a task locks, all at once: its intervals widened to its
    segment granularity; an append also covers the chunks its rows go into
    now (`services.append_layout`), which may be wider (SPEC §5)."""
    wanted = _lock_intervals(intervals, granularity)
    if append:
        layout = services.append_layout(datasource=datasource, intervals=wanted)
        wanted = _merge(wanted + [chunk for _, chunk in layout])
    return wanted


def append_pieces(datasource: str, buckets: list[Interval]) -> dict[Interval, list[Interval]]:
    """For each of an append's buckets, the pieces its rows split into: one per
    chunk they go into (`services.append_layout`); a bucket inside one chunk is
    one piece, itself."""
    return {
        bucket: [
            piece for piece, _ in services.append_layout(datasource=datasource, intervals=[bucket])
        ]
        for bucket in buckets
    }


def _read_points(locks: list[TaskLock]) -> list[tuple[Interval, int]]:
    """(locked interval, commit seq) pairs: a task reads each interval it
    rewrites as of its own lock's grant (SPEC §5)."""
    return [(lk.interval, lk.granted_seq) for lk in locks if lk.granularity == locking.TIME_CHUNK]


def read_as_of_report(points: list[tuple[Interval, int]]) -> list[dict]:
    """The report's `readAsOf`: for each interval a replace or compaction
    rewrites, the commit seq as of which it took its input (its lock's grant).
    What committed there up to that seq is what it replaces; what commits
    there later (appends under concurrent locks) is carried onto its version,
    not read. SPEC §8's serial replay needs exactly this."""
    seen: dict[tuple[str, int], dict] = {}
    for interval, seq in sorted(points, key=lambda p: (p[0].start, p[0].end, p[1])):
        seen.setdefault((str(interval), seq), {"interval": str(interval), "seq": seq})
    return list(seen.values())


def _merge(intervals: list[Interval]) -> list[Interval]:
    """Intervals merged where they touch or overlap, in time order."""
    merged: list[Interval] = []
    for iv in sorted(intervals, key=lambda iv: iv.start):
        if merged and iv.start <= merged[-1].end:
            merged[-1] = Interval(merged[-1].start, max(merged[-1].end, iv.end))
        else:
            merged.append(iv)
    return merged


# Where each phase's progress lies in the task's 0..1 progress.
_SINGLE_PASS_SPANS = {"phase 1": (0.02, 0.83)}
_TWO_PHASE_SPANS = {"phase 1": (0.02, 0.5), "phase 2": (0.52, 0.35)}


def _run_index(task: Task, monitor: Monitor, moved: list[Path]) -> dict:
    validated = services.task_validate(spec=task.spec)
    spec = validated.ingestion
    context = validated.context
    timeout = context.task_lock_timeout_ms
    # SPEC §5: concurrent append and replace take APPEND / REPLACE locks; an append
    # with forceTimeChunkLock false locks only the segments it allocates.
    lock_type = locking.EXCLUSIVE
    if context.use_concurrent_locks:
        lock_type = locking.APPEND if spec.append_to_existing else locking.REPLACE
    segment_locked = spec.append_to_existing and not context.force_time_chunk_lock
    if segment_locked and context.use_concurrent_locks:
        segment_locked = False  # concurrent locks are time-chunk locks
    timings: dict[str, float] = {}
    # Where a replace (or a task re-reading its own dataSource) takes its input
    # from: each time-chunk lock's interval and grant (the report's readAsOf).
    read_as_of: list[tuple[Interval, int]] = []

    def lock(intervals: list[Interval]) -> list[TaskLock]:
        if segment_locked:
            return []
        t = time.monotonic()
        monitor.set_phase("locking", monitor.progress(), 0.0)
        # All intervals in one decision (SPEC §5): the task never holds some while
        # waiting for others, and reads every interval as of the same grant.
        locks = services.locks_acquire(
            task=task,
            intervals=lock_plan(
                task.datasource, intervals, spec.segment_granularity, spec.append_to_existing
            ),
            lock_type=lock_type,
            timeout_ms=timeout,
        )
        timings["lock"] = round(timings.get("lock", 0.0) + time.monotonic() - t, 3)
        read_as_of.extend(_read_points(locks))
        return locks

    # Lock before reading when the intervals are known, and always before reading
    # a dataSource this task rewrites: it must replace exactly what it read.
    up_front = list(spec.intervals or ())
    druid = spec.input.druid_source
    rereads_itself = druid is not None and druid.datasource == spec.datasource
    if not up_front and rereads_itself:
        up_front = [druid.interval]
    locks = lock(up_front) if up_front else []
    read_points = None
    if rereads_itself and locks:
        # A task rewriting its own dataSource reads each interval as of its own
        # lock's grant (SPEC §5): what committed there before is its input, and
        # appends committing after are carried onto its version at publish.
        read_points = _read_points(locks)
    pieces = _source_pieces(spec, read_points=read_points) if druid is not None else []

    spans = _TWO_PHASE_SPANS if spec.two_phase else _SINGLE_PASS_SPANS
    result = run_ingest(
        get_spark(),
        spec,
        work_dir=intermediary_dir(task.id),
        job_group=task.id,
        source_pieces=pieces,
        progress=_TaskProgress(monitor, spans),
    )
    monitor.check()
    if not up_front and result.chunks_with_rows:
        lock(result.chunks_with_rows)

    monitor.set_phase("publishing", 0.9, 0.0)
    t3 = time.monotonic()
    buckets = sorted({s.chunk for s in result.segments}, key=lambda c: c.start)
    for attempt in range(_LAYOUT_ROUNDS):
        staged_segments = result.segments
        if spec.append_to_existing:
            layout = append_pieces(task.datasource, buckets)
            staged_segments = _split_by_layout(staged_segments, layout)
        by_chunk: dict[Interval, list] = {}
        for staged in staged_segments:
            by_chunk.setdefault(staged.chunk, []).append(staged)
        chunks = sorted(by_chunk, key=lambda iv: iv.start)
        counts = [len(by_chunk[chunk]) for chunk in chunks]
        try:
            allocations = _allocate(
                task, chunks, counts, spec.append_to_existing, segment_locked, timeout
            )
            break
        except services.ServiceError as exc:
            # Allocation decides where an append's rows go again, under the lock
            # box, and refuses pieces split by a layout that changed since: a
            # replace or compaction beside it (an APPEND lock under concurrent
            # locks, or no lock yet under segment locks) published chunks over
            # its rows after the split. Their rows go into the new chunks (SPEC
            # §5, §8 row 7): lock those chunks too and split again.
            if (
                type(exc) is not services.ServiceError  # revoked, canceled, timed out...
                or not spec.append_to_existing
                or attempt + 1 == _LAYOUT_ROUNDS
                or append_pieces(task.datasource, buckets) == layout
            ):
                raise
            monitor.check()
            lock(buckets)
            monitor.set_phase("publishing", 0.9, 0.0)
    new_segments: list[services.NewSegment] = []
    for chunk, alloc in zip(chunks, allocations, strict=True):
        staged = sorted(by_chunk[chunk], key=lambda s: s.index)
        for seg, partition in zip(staged, alloc.partitions, strict=True):
            # An append's rows go into the chunk visible over them, which may be
            # wider than the job's own bucket (SPEC §5): `alloc.interval`.
            target_dir = deep_storage_dir(task.datasource, alloc.interval, alloc.version, partition)
            target_dir.mkdir(parents=True, exist_ok=True)
            target = target_dir / "data.parquet"
            schema = file_schema(
                seg.path,
                metrics=spec.metrics,
                rollup=spec.rollup,
                query_granularity=spec.query_granularity,
            )
            moved.append(target_dir)
            shutil.move(seg.path, target)
            new_segments.append(
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=partition,
                    core_partitions=alloc.core_partitions,
                    location=str(target),
                    num_rows=seg.num_rows,
                    size_bytes=seg.size_bytes,
                    shard_spec=_shard_spec(seg.shard_spec, partition, alloc.core_partitions),
                    schema=schema,
                )
            )
    if spec.drop_existing:
        new_segments += _tombstones(task, spec, set(by_chunk))
    monitor.check()
    entry = _publish_once(task, new_segments) if new_segments else None
    moved.clear()  # published: the files belong to their segments now
    timings["publish"] = round(time.monotonic() - t3, 3)

    report = dict(result.report)
    report["phases"] = {**report.get("phases", {}), **timings}
    report["segmentsPublished"] = len(new_segments)
    report["commit"] = entry.seq if entry else None
    if entry is None:
        # A SUCCESS that changed nothing says so (Druid #18099): with dropExisting
        # every chunk of the intervals gets rows or a tombstone, so this is an
        # append, or a replace without dropExisting, that had no row to write.
        report["nothingPublished"] = _nothing_published(spec)
    if not spec.append_to_existing or rereads_itself:
        report["readAsOf"] = read_as_of_report(read_as_of)
    if druid is not None:
        report["sourceSegments"] = len({p.location for p in pieces})
    return report


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


def _allocate(
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


def _shard_spec(template: dict, partition: int, core_partitions: int) -> dict:
    """A staged segment's shard spec completed with its allocated partition number."""
    shard = {"partitionNum": partition, **template}
    if shard["type"] == "numbered":
        shard["partitions"] = core_partitions
    else:
        shard["numCorePartitions"] = core_partitions
    return shard


def _source_pieces(
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
