"""Batch ingestion on Spark: read, parse, filter, bucket, partition, roll up, write.

A plain function of (validated spec, input, a work directory) -> staged segment
files and a report. It never touches the ORM; the caller takes locks, allocates
versions and partition numbers, moves the staged files into deep storage and
publishes them.

Dynamic partitioning runs in one pass: rows are clustered by time chunk, rolled
up (best effort: within a chunk, which is all of it here) and written, a new
segment every `maxRowsPerSegment` rows.

Hashed partitioning with `numShards` runs in one pass with one shuffle: the
shard of every row is known before any row is read (`pmod(hash(key),
numShards)`), so rows are repartitioned by (time chunk, shard), rolled up there
(perfect rollup: every row of a (chunk, shard) is in one Spark partition) and
each (chunk, shard) written straight to its one file, as raw Spark would. The
shard assignment is the same function as the two-phase path's.

Hashed partitioning sized from the data (`targetRowsPerSegment`), range
partitioning and `forceGuaranteedRollup` with dynamic partitioning run in two
phases (Druid's two-phase shuffle):

- phase 1 (after a determining pass when partitions must be sized from the
  data) reads and parses the input and writes, from every input split, the rows
  of each (time chunk, partition) it meets as a partial file under
  `<work dir>/<interval>/<partition>/`;
- phase 2 runs up to `totalNumMergeTasks` merge tasks (Spark jobs, at most
  `maxNumConcurrentSubTasks` at a time), each merging all partial files of its
  (time chunk, partition)s into exactly one segment per pair,
  rolling up across every phase-1 output (perfect rollup). A failed merge task
  is retried alone, up to `maxRetry` times; phase 1 is not redone.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from metastore.druid.ingestion import IngestionSpec
from metastore.intervals import Interval, format_ts
from workers.jobs.parsing import (
    ParsedInput,
    ParseExceptionsExceeded,
    SourcePiece,
    check_parse_exceptions,
    chunk_of,
    parse_input,
    row_stats,
)
from workers.jobs.partitioning import PartitionPlan, determine_partitions, plan_needs_determining
from workers.jobs.rollup import roll_up
from workers.spark import on_stop

__all__ = [
    "IngestResult",
    "MergeFailed",
    "ParseExceptionsExceeded",
    "Progress",
    "SourcePiece",
    "StagedSegment",
    "interval_dirname",
    "run_ingest",
    "runs_two_phases",
    "shuffles_once",
]

# A merge task is one Spark job using every core; below this much partial data
# per task, more tasks only add per-job overhead.
MERGE_TASK_BYTES = 64 * 1024 * 1024


class MergeFailed(Exception):
    """A phase-2 merge task failed more than `maxRetry` times."""


class _Abandoned(MergeFailed):
    """A merge task given up because another one failed for good."""


class Progress:
    """What a job tells whoever runs it. Each call is also a checkpoint: an
    implementation raises from it to stop the job (cancel, preemption)."""

    def phase(self, name: str) -> None:  # "phase 1", "phase 2"
        pass

    def fraction(self, done: float) -> None:  # of the current phase, 0..1
        pass


@dataclass
class StagedSegment:
    chunk: Interval
    index: int  # 0-based partition index inside the chunk
    path: str  # the Parquet file
    num_rows: int
    size_bytes: int
    shard_spec: dict = field(default_factory=dict)  # without partitionNum/numCorePartitions


@dataclass
class IngestResult:
    segments: list[StagedSegment]
    chunks_with_rows: list[Interval]
    report: dict


def interval_dirname(interval: Interval) -> str:
    """A path-safe directory name for an interval, e.g. `20130101T000000.000Z_20130102T000000.000Z`."""

    def safe(ts) -> str:
        # No ':' so Hadoop-style readers accept the paths.
        return format_ts(ts).replace(":", "").replace("-", "")

    return f"{safe(interval.start)}_{safe(interval.end)}"


def run_ingest(
    spark,
    spec: IngestionSpec,
    *,
    work_dir: Path,
    job_group: str,
    source_pieces: Sequence[SourcePiece] = (),
    progress: Progress | None = None,
) -> IngestResult:
    """Ingest `spec`'s input into staged segment files under `work_dir` (the
    task's own directory: whatever it held is removed first).

    `source_pieces` are the visible parts of existing segments for a `druid`
    input source. Raises `ParseExceptionsExceeded` (before phase 2, after
    removing what it wrote) when more rows fail to parse than
    `maxParseExceptions`, and `MergeFailed` when a merge task keeps failing.
    Every Spark job runs in job group `job_group`, so cancelling the group stops it.
    """
    progress = progress or Progress()
    spark = ingest_session(spark)
    started = time.monotonic()
    shutil.rmtree(work_dir, ignore_errors=True)  # the task's own: start clean
    work_dir.mkdir(parents=True)
    with _job_group(spark, job_group):
        progress.phase("phase 1")
        parsed = parse_input(spark, spec, scratch_dir=work_dir, source_pieces=source_pieces)
        if parsed is None:  # a druid input with nothing visible
            empty = {"processed": 0, "processedWithError": 0, "thrownAway": 0, "unparseable": 0}
            return _result([], empty, [], {}, 0, 0, ignored=list(spec.ignored))
        job = _job_class(spec)
        result = job(spark, spec, parsed, work_dir, job_group, progress).run()
    result.report["phases"]["ingest"] = round(time.monotonic() - started, 3)
    result.report["ignored"] = list(spec.ignored)
    return result


def shuffles_once(spec: IngestionSpec) -> bool:
    """Whether a two-phase spec runs as one shuffle: hashed with a fixed numShards,
    where every row's shard is known before reading."""
    return spec.partitions.type == "hashed" and bool(spec.partitions.num_shards)


def runs_two_phases(spec: IngestionSpec) -> bool:
    """Whether ingestion of `spec` writes partial files and merges them (phase 1, phase 2)."""
    return spec.two_phase and not shuffles_once(spec)


def _job_class(spec: IngestionSpec):
    if not spec.two_phase:
        return _SinglePass
    return _OneShuffle if shuffles_once(spec) else _TwoPhase


# id(session) -> (session, ingest session), for the sessions that run: an entry
# goes when its session stops (`_forget`), so a slot process on a cluster, which
# starts and stops an application per task, holds none of the stopped ones.
_sessions: dict[int, tuple[object, object]] = {}
_sessions_lock = threading.Lock()


def _forget(spark) -> None:
    """Drop what was derived from `spark` (stopped), and from any other stopped session."""
    with _sessions_lock:
        for key, (parent, _) in list(_sessions.items()):
            if parent is spark or _stopped(parent):
                del _sessions[key]


def _stopped(spark) -> bool:
    return getattr(getattr(spark, "_sc", None), "_jsc", None) is None


on_stop(_forget)


def ingest_session(spark):
    """The session ingestion plans in: `spark`'s own SparkContext (job groups, pools
    and cancellation are shared), with Catalyst's constraint propagation off. For
    each alias of a projection it rewrites every constraint gathered so far, so
    planning the parse projection of a wide input (an alias per column) grew with
    the square of its columns; ingestion has no joins, whose filters it infers."""
    _forget(None)  # sessions stopped other than by `stop_spark`
    with _sessions_lock:
        parent, session = _sessions.get(id(spark), (None, None))
        if parent is not spark:
            session = spark.newSession()
            session.conf.set("spark.sql.constraintPropagation.enabled", "false")
            _sessions[id(spark)] = (spark, session)
        return session


def _slot_pool() -> str:
    return f"slot-{threading.current_thread().name}"


@contextmanager
def _job_group(spark, job_group: str, pool: str | None = None):
    """Put this thread's Spark jobs in `job_group` (thread-local in PySpark), in the
    FAIR scheduler pool `pool`, by default the calling thread's: one per task slot,
    a bounded set of pools."""
    sc = spark.sparkContext
    sc.setJobGroup(job_group, f"strata task {job_group}", interruptOnCancel=True)
    sc.addJobTag(job_group)
    sc.setLocalProperty("spark.scheduler.pool", pool or _slot_pool())
    try:
        yield
    finally:
        sc.removeJobTag(job_group)
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.scheduler.pool", None)


# Options of every Parquet write into a task's own directory. Creating files is
# what small segments cost most (Hadoop's local file system forks `chmod` for each
# file and directory), so: no `.crc` side files (the raw local file system), and
# each task commit moves its files in place (committer v2), sparing the job
# commit a second pass of renames over every partition directory.
WRITE_OPTIONS = {
    "mapreduce.fileoutputcommitter.algorithm.version": "2",
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


def _writer(df):
    return df.write.mode("overwrite").options(**WRITE_OPTIONS)


def _shuffle_partitions(spark) -> int:
    return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))


def _max_rows(spec: IngestionSpec) -> int:
    """Rows per segment with dynamic partitioning: maxRowsPerSegment, and never more
    than maxTotalRows (Druid pushes every segment it holds once maxTotalRows rows
    are buffered, so no segment can outgrow it)."""
    return min(spec.partitions.max_rows_per_segment, spec.partitions.max_total_rows)


def _result(
    segments: list[StagedSegment], stats, samples, phases, bytes_read, input_files, **extra
) -> IngestResult:
    """The staged segments of an ingestion, the chunks they hold rows of, and its
    report (`extra` adds to or overrides the report's entries)."""
    chunks = sorted({s.chunk for s in segments}, key=lambda iv: iv.start)
    per_chunk: dict[str, int] = {}
    for s in segments:
        per_chunk[str(s.chunk)] = per_chunk.get(str(s.chunk), 0) + 1
    report = {
        "rowStats": stats,
        "parseExceptionSamples": samples,
        "phases": phases,
        "ingest/task/bytes/processed": bytes_read,
        "ingest/shuffle/bytes": 0,
        "ingest/shuffle/requests": 0,
        "inputFiles": input_files,
        "partitionsPerChunk": {str(c): per_chunk[str(c)] for c in chunks[:1000]},
        "bytesWritten": sum(s.size_bytes for s in segments),
        "rowsWritten": sum(s.num_rows for s in segments),
    }
    report.update(extra)
    return IngestResult(segments=segments, chunks_with_rows=chunks, report=report)


class _Job:
    def __init__(
        self,
        spark,
        spec: IngestionSpec,
        parsed: ParsedInput,
        work_dir: Path,
        job_group: str,
        progress: Progress,
    ) -> None:
        self.spark = spark
        self.spec = spec
        self.parsed = parsed
        self.work_dir = work_dir
        self.job_group = job_group
        self.progress = progress
        self.phases: dict[str, float] = {}

    def _timed(self, name: str, started: float) -> None:
        self.phases[name] = round(time.monotonic() - started, 3)

    def _checked(self, observation, out_dir: Path) -> tuple[dict, list]:
        """The row stats of the rows written under `out_dir` and the parse exception
        samples; when more rows failed to parse than allowed, removes `out_dir` and
        raises `ParseExceptionsExceeded`."""
        stats = row_stats(observation, self.parsed)
        try:
            samples = check_parse_exceptions(self.spec, stats, self.parsed)
        except ParseExceptionsExceeded:
            shutil.rmtree(out_dir, ignore_errors=True)
            raise
        return stats, samples

    def _roll_up_and_write(
        self, rows, chunk: str, bucket: str, partitions: int, out_dir: Path
    ) -> dict[tuple[int, int], str]:
        """Shuffle `rows` into `partitions` Spark partitions by their (chunk,
        partition) columns `chunk` and `bucket`, roll up and write one file per
        (chunk, partition) under `out_dir`; returns {(chunk, partition): file}.
        Every row of a (chunk, partition) lands in one Spark partition, so the
        rollup groups all of its rows (perfect rollup, and no second exchange: the
        grouping keys include the partitioning columns)."""
        parsed = self.parsed
        clustered = rows.repartition(partitions, chunk, bucket)
        rolled = roll_up(
            clustered,
            [chunk, bucket, "__time", *parsed.dimension_names],
            parsed.metric_inputs,
            rollup=self.spec.rollup,
        )
        keyed = rolled.withColumn("__key", _key_col(chunk, bucket)).drop(chunk, bucket)
        _writer(keyed.sortWithinPartitions("__key", "__time")).partitionBy("__key").parquet(
            str(out_dir)
        )
        return _written_keys(out_dir)

    def _result(self, segments: list[StagedSegment], stats, samples, **extra) -> IngestResult:
        parsed = self.parsed
        return _result(
            segments, stats, samples, self.phases, parsed.bytes_read, parsed.input_files, **extra
        )

    def _partitioned_result(
        self, plan: PartitionPlan, files, stats, samples, *, partial_files=0, chunks=None, **extra
    ) -> IngestResult:
        """The result of a hashed or range partitioned job that wrote `files`,
        {(chunk, partition): file}; `chunks`, the determined chunks' report."""
        segments = _chunk_segments(plan, files, self.spec.segment_granularity)
        partitioning = {"type": plan.type, "keyColumns": plan.key_columns, "chunks": chunks}
        return self._result(
            segments, stats, samples, partialFiles=partial_files, partitioning=partitioning, **extra
        )


class _SinglePass(_Job):
    """Dynamic partitioning: cluster by chunk, roll up, write; split every maxRowsPerSegment rows."""

    def run(self) -> IngestResult:
        spec, parsed = self.spec, self.parsed
        t0 = time.monotonic()
        rows, observation = parsed.observed(f"rows_{self.job_group}")
        # All rows of a chunk in one Spark partition: one file per chunk, split by
        # the writer every maxRowsPerSegment rows, and no shuffle beyond this one.
        clustered = rows.repartition(_shuffle_partitions(self.spark), "__chunk")
        rolled = roll_up(
            clustered,
            ["__chunk", "__time", *parsed.dimension_names],
            parsed.metric_inputs,
            rollup=spec.rollup,
        )
        out_dir = self.work_dir / "segments"
        (
            _writer(rolled.sortWithinPartitions("__chunk", "__time"))
            .option("maxRecordsPerFile", _max_rows(spec))
            .partitionBy("__chunk")
            .parquet(str(out_dir))
        )
        stats, samples = self._checked(observation, out_dir)
        self._timed("phase1", t0)
        segments = []
        for chunk_dir in sorted(out_dir.glob("__chunk=*")):
            chunk = chunk_of(int(chunk_dir.name.split("=", 1)[1]), spec.segment_granularity)
            for index, path in enumerate(sorted(chunk_dir.glob("*.parquet"))):
                segments.append(_staged(chunk, index, path, {"type": "numbered"}))
        return self._result(segments, stats, samples)


class _OneShuffle(_Job):
    """Hashed partitioning with numShards: one shuffle by (chunk, shard), perfect
    rollup within each, one file per (chunk, shard) written directly."""

    def run(self) -> IngestResult:
        spec, parsed = self.spec, self.parsed
        t0 = time.monotonic()
        rows, observation = parsed.observed(f"rows_{self.job_group}")
        # No determining pass runs: this only checks the key columns and builds the plan.
        plan = determine_partitions(
            self.spark, rows, spec.partitions, parsed.dimension_names, rollup=spec.rollup
        )
        out_dir = self.work_dir / "segments"
        files = self._write(plan, rows, out_dir)
        stats, samples = self._checked(observation, out_dir)
        self._timed("phase1", t0)
        return self._partitioned_result(plan, files, stats, samples)

    def _write(self, plan: PartitionPlan, rows, out_dir: Path) -> dict[tuple[int, int], str]:
        """Shuffle the rows once by (chunk, shard), roll up, and write one file per
        (chunk, shard); returns {(chunk, shard): file}."""
        assigned = plan.assign(self.spark, rows)
        partitions = _shuffle_partitions(self.spark)
        return self._roll_up_and_write(assigned, "__chunk", "__partition", partitions, out_dir)


@dataclass
class _Partial:
    """The phase-1 files of one (time chunk, partition)."""

    chunk: int  # epoch micros of the chunk's start
    bucket: int
    files: list[str]
    size: int


@dataclass
class _MergeTask:
    number: int
    partials: list[_Partial] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.partials)

    @property
    def files(self) -> list[str]:
        return [f for p in self.partials for f in p.files]


class _TwoPhase(_Job):
    """Hashed / range partitioning with perfect rollup."""

    def run(self) -> IngestResult:
        spec, parsed = self.spec, self.parsed
        samples = None
        t0 = time.monotonic()
        rows, observation = parsed.observed(f"determine_{self.job_group}")
        plan = determine_partitions(
            self.spark, rows, spec.partitions, parsed.dimension_names, rollup=spec.rollup
        )
        if plan_needs_determining(spec.partitions):  # it ran: fail before writing anything
            samples = check_parse_exceptions(spec, row_stats(observation, parsed), parsed)
            self._timed("determinePartitions", t0)

        t1 = time.monotonic()
        rows, observation = parsed.observed(f"phase1_{self.job_group}")
        partials, schema = self._phase1(plan, rows)
        stats = row_stats(observation, parsed)
        if samples is None:
            try:
                samples = check_parse_exceptions(spec, stats, parsed)
            except ParseExceptionsExceeded:
                self._remove_partials(partials)
                raise
        self._timed("phase1", t1)

        t2 = time.monotonic()
        self.progress.phase("phase 2")
        merged, requests, merge_report = self._phase2(partials, schema)
        self._timed("phase2", t2)

        chunk_names = {p.chunk: str(chunk_of(p.chunk, spec.segment_granularity)) for p in partials}
        return self._partitioned_result(
            plan,
            merged,
            stats,
            samples,
            partial_files=sum(len(p.files) for p in partials),
            chunks=plan.report(chunk_names) if plan.chunks else None,
            **{
                "ingest/shuffle/bytes": sum(p.size for p in partials),
                "ingest/shuffle/requests": requests,
            },
            **merge_report,
        )

    # --- phase 1 ---------------------------------------------------------------------

    def _phase1(self, plan: PartitionPlan, rows):
        """Write partial partitions; return them and the schema of their files."""
        from pyspark.sql import functions as F

        parsed = self.parsed
        assigned = plan.assign(self.spark, rows)
        columns = ["__time", *parsed.dimension_names]
        columns += parsed.input_columns
        # The key is kept inside the files too, so phase 2 reads them without
        # discovering partitions from directory names.
        out = assigned.select(
            *[F.col(f"`{c}`") for c in columns],
            F.col("__chunk").alias("__c"),
            F.col("__partition").alias("__p"),
            _key_col("__chunk", "__partition"),
        )
        staging = self.work_dir / "phase1"
        _writer(out).partitionBy("__key").parquet(str(staging))
        schema = out.drop("__key").schema
        partials = []
        for key_dir in sorted(staging.glob("__key=*")):
            chunk, bucket = _key_of(key_dir)
            target = (
                self.work_dir
                / interval_dirname(chunk_of(chunk, self.spec.segment_granularity))
                / str(bucket)
            )
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(key_dir, target)
            files = sorted(str(p) for p in target.glob("*.parquet"))
            if files:
                partials.append(_Partial(chunk, bucket, files, sum(map(os.path.getsize, files))))
        shutil.rmtree(staging, ignore_errors=True)
        return partials, schema

    def _remove_partials(self, partials: list[_Partial]) -> None:
        for chunk_dir in {Path(p.files[0]).parent.parent for p in partials}:
            shutil.rmtree(chunk_dir, ignore_errors=True)

    # --- phase 2 ---------------------------------------------------------------------

    def _phase2(self, partials: list[_Partial], schema):
        """Merge every (chunk, partition) into one file; returns
        ({(chunk, bucket): path}, partial files read, report)."""
        tasks = _plan_merges(partials, self.spec.total_num_merge_tasks)
        merges = _Merges(len(tasks))
        pool = _slot_pool()  # merge threads run in the task slot's pool

        def run(task: _MergeTask) -> None:
            with _job_group(self.spark, self.job_group, pool):
                self._merge_with_retries(task, schema, merges)

        workers = max(1, min(len(tasks), self.spec.max_num_concurrent_subtasks))
        if workers == 1:  # in this thread, already in the job group
            for task in tasks:
                self._merge_with_retries(task, schema, merges)
        else:
            _run_all(run, tasks, workers)
        report = {"mergeTasks": len(tasks), "mergeRetries": merges.retries}
        return merges.merged, merges.requests, report

    def _merge_with_retries(self, task: _MergeTask, schema, merges: _Merges) -> None:
        """Run one merge task, retried up to maxRetry times; given up as soon as
        another merge task failed for good."""
        attempt = 0
        while True:
            self.progress.fraction(merges.fraction())
            if merges.failed.is_set():
                raise _Abandoned("another merge task failed")
            out_dir = self.work_dir / f"merge-{task.number}-{attempt}"
            merges.count(requests=len(task.files))
            try:
                result = self._merge(task, schema, out_dir)
                break
            except Exception as exc:  # noqa: BLE001 - a merge task may fail any way
                shutil.rmtree(out_dir, ignore_errors=True)
                self.progress.fraction(merges.fraction())  # stopped?
                if attempt >= self.spec.max_retry or merges.failed.is_set():
                    merges.failed.set()
                    raise MergeFailed(
                        f"merge task {task.number} of {merges.total} "
                        f"({len(task.partials)} partitions) failed "
                        f"{attempt + 1} times (maxRetry={self.spec.max_retry}): "
                        f"{_first_line(exc)}"
                    ) from exc
                attempt += 1
                merges.count(retries=1)
        merges.done(result)
        self.progress.fraction(merges.fraction())

    def _read_partials(self, task: _MergeTask, schema):
        """The partial files one merge attempt reads, as a DataFrame."""
        return self.spark.read.schema(schema).parquet(*task.files)

    def _merge(self, task: _MergeTask, schema, out_dir: Path) -> dict[tuple[int, int], str]:
        partials = self._read_partials(task, schema)
        partitions = max(1, min(len(task.partials), _shuffle_partitions(self.spark)))
        return self._roll_up_and_write(partials, "__c", "__p", partitions, out_dir)


def _written_keys(out_dir: Path) -> dict[tuple[int, int], str]:
    """{(chunk, partition): its one file} of a write partitioned by `__key`."""
    return {
        _key_of(key_dir): str(_single_file(sorted(key_dir.glob("*.parquet"))))
        for key_dir in out_dir.glob("__key=*")
    }


def _chunk_segments(
    plan: PartitionPlan, files: dict[tuple[int, int], str], granularity: str
) -> list[StagedSegment]:
    """The staged segments of {(chunk, partition): file}, numbered in partition
    order within each chunk, with their shard specs."""
    by_chunk: dict[int, list[int]] = {}
    for chunk, bucket in files:
        by_chunk.setdefault(chunk, []).append(bucket)
    segments = []
    for chunk in sorted(by_chunk):
        buckets = sorted(by_chunk[chunk])
        interval = chunk_of(chunk, granularity)
        specs = plan.shard_specs(chunk, buckets)
        for index, (bucket, shard) in enumerate(zip(buckets, specs, strict=True)):
            segments.append(_staged(interval, index, Path(files[(chunk, bucket)]), shard))
    return segments


class _Merges:
    """What the merge tasks of one phase 2 have done so far (shared by their threads)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.lock = threading.Lock()
        self.failed = threading.Event()
        self.merged: dict[tuple[int, int], str] = {}
        self.finished = 0
        self.requests = 0
        self.retries = 0

    def fraction(self) -> float:
        return self.finished / max(1, self.total)

    def count(self, *, requests: int = 0, retries: int = 0) -> None:
        with self.lock:
            self.requests += requests
            self.retries += retries

    def done(self, result: dict[tuple[int, int], str]) -> None:
        with self.lock:
            self.merged.update(result)
            self.finished += 1


def _run_all(run, tasks: list[_MergeTask], workers: int) -> None:
    """Run `run(task)` for every task on `workers` threads; re-raise a stop (cancel)
    first, then the merge that failed for good, then any other error."""
    with ThreadPoolExecutor(workers, thread_name_prefix="merge") as pool:
        futures = [pool.submit(run, task) for task in tasks]
        errors = []
        for future in futures:
            try:
                future.result()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
    if errors:
        errors.sort(key=lambda e: (isinstance(e, MergeFailed), isinstance(e, _Abandoned)))
        raise errors[0]


def _key_col(chunk: str, bucket: str):
    """One partition column `__key` = "<chunk>_<bucket>": a single directory level
    per written file (every directory costs a `chmod` fork)."""
    from pyspark.sql import functions as F

    return F.concat_ws("_", F.col(chunk), F.col(bucket)).alias("__key")


def _key_of(key_dir: Path) -> tuple[int, int]:
    chunk, bucket = key_dir.name.split("=", 1)[1].split("_")
    return int(chunk), int(bucket)


def _plan_merges(partials: list[_Partial], limit: int) -> list[_MergeTask]:
    """Spread (chunk, partition)s over at most `limit` merge tasks (one per
    MERGE_TASK_BYTES of partial data), balancing bytes: largest first, each to
    the lightest task."""
    by_size = math.ceil(sum(p.size for p in partials) / MERGE_TASK_BYTES)
    tasks = [_MergeTask(i) for i in range(max(1, min(limit, len(partials), by_size)))]
    for partial in sorted(partials, key=lambda p: (-p.size, p.chunk, p.bucket)):
        min(tasks, key=lambda t: (t.size, t.number)).partials.append(partial)
    return [t for t in tasks if t.partials]


def _single_file(files: list[Path]) -> Path:
    """One Parquet file per segment: concatenate the rare split into one."""
    if len(files) == 1:
        return files[0]
    import pyarrow as pa
    import pyarrow.parquet as pq

    merged = files[0].parent / "merged.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(f) for f in files]), merged)
    for f in files:
        f.unlink()
    return merged


def _staged(chunk: Interval, index: int, path: Path, shard_spec: dict) -> StagedSegment:
    import pyarrow.parquet as pq

    return StagedSegment(
        chunk=chunk,
        index=index,
        path=str(path),
        num_rows=pq.read_metadata(path).num_rows,
        size_bytes=os.path.getsize(path),
        shard_spec=shard_spec,
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:500]
