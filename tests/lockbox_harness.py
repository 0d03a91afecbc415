"""A deterministic, service-level harness for SPEC §8: tasks that append, compact
and replace one DAY or several (at DAY or HOUR granularity), interleaved step by
step through the real lock box services and the runner's own lock, read and
allocation steps (`workers.steps.lock_plan`, `read_points` and `append_pieces`,
`workers.runner.source_pieces` and `allocate_segments`).

Rows have ids and hours; a "file" is a list of rows held in memory under a
segment's location, so reads follow the real timeline (partial overshadowing,
tombstones, upgraded copies sharing a file) without Spark.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from conftest import TEST_WORKER

from metastore import locking, selectors, services
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskStatus
from workers import runner, steps

DS = "wiki"
DAY = Interval.parse("2024-01-01/2024-01-02")
SPAN = Interval.parse("2024-01-01/2024-01-04")  # the days multi-interval histories use
TC, SEG, CONC = "TC", "SEG", "CONC"
MODES = (TC, SEG, CONC)
_ids = itertools.count()


def hour(h: int) -> Interval:
    return Interval(DAY.start + timedelta(hours=h), DAY.start + timedelta(hours=h + 1))


def day(n: int) -> Interval:
    return Interval(DAY.start + timedelta(days=n), DAY.start + timedelta(days=n + 1))


def at(row: Row) -> object:
    return DAY.start + timedelta(hours=row.hour)


@dataclass(frozen=True)
class Row:
    id: str
    hour: int


def rows(prefix: str, hours) -> list[Row]:
    return [Row(f"{prefix}:{h}", h) for h in hours]


def claimed_task(*, spec: dict, task_type: str = "index_parallel") -> Task:
    """A task as a worker runs it: created, then claimed (RUNNING). Only a RUNNING
    or WAITING task may lock, allocate or publish (SPEC §5)."""
    task = services.task_create(spec=spec, task_type=task_type, datasource=DS, enqueue=False)
    assert services.task_claim(task_id=task.id, worker=TEST_WORKER)
    task.refresh_from_db()
    return task


class World:
    def __init__(self) -> None:
        self.files: dict[str, list[Row]] = {}
        self.writer: dict[str, str] = {}  # location -> name of the task that wrote it
        self.model: Counter = Counter()  # the serial replay of committed change sets
        self.commits: list[str] = []

    def new_file(self, writer: str, content: list[Row]) -> str:
        location = f"mem://{writer}/{next(_ids)}"
        self.files[location] = list(content)
        self.writer[location] = writer
        return location

    def visible(self, interval: Interval = SPAN) -> list[tuple[Row, str]]:
        """(row, writer) for every visible row: pieces filter rows to their sub-interval."""
        timeline = selectors.timeline_for(datasource=DS)
        locations = dict(
            Segment.objects.filter(datasource__name=DS, used=True).values_list("id", "location")
        )
        out = []
        for piece, ref in timeline.lookup(interval):
            if ref.tombstone:
                continue
            location = locations[ref.id]
            for row in self.files[location]:
                if piece.contains(DAY.start + timedelta(hours=row.hour)):
                    out.append((row, self.writer[location]))
        return out

    def visible_ids(self) -> Counter:
        return Counter(row.id for row, _ in self.visible())

    def visible_writers(self) -> set[str]:
        return {writer for _, writer in self.visible()}

    def load(
        self, name: str = "s1", partitions: list[list[Row]] | None = None, interval: Interval = DAY
    ) -> None:
        """The starting state: segments of one batch at version v1 (of one DAY)."""
        partitions = partitions or [rows("s1", range(24))]
        task = claimed_task(spec={})
        services.lock_acquire(task=task, interval=interval, timeout_ms=0)
        alloc = services.segments_allocate(
            task=task, interval=interval, count=len(partitions), append=False
        )
        segs = []
        for p, content in zip(alloc.partitions, partitions, strict=True):
            segs.append(
                services.NewSegment(
                    interval=interval,
                    version=alloc.version,
                    partition=p,
                    core_partitions=alloc.core_partitions,
                    location=self.new_file(name, content),
                    num_rows=len(content),
                )
            )
        services.segments_publish(task=task, segments=segs)
        services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
        for content in partitions:
            self.model.update(r.id for r in content)


@dataclass(frozen=True)
class _DruidInput:
    """What the runner's `source_pieces` reads of a spec: its druid input."""

    datasource: str
    interval: Interval

    @property
    def input(self):
        return self

    @property
    def druid_source(self):
        return self


@dataclass
class Actor:
    """One task of a scenario, advanced one step at a time."""

    world: World
    name: str
    kind: str  # append | compact | replace
    mode: str
    new_rows: list[Row] = field(default_factory=list)
    interval: Interval = DAY  # replace: the interval it overwrites
    intervals: list[Interval] | None = None  # replace/compact: several intervals at once
    granularity: str = ""  # replace: HOUR or DAY buckets (default: from `interval`)
    drop_existing: bool = False
    input_ids: list[str] | None = None  # compact: inputSpec.segments (by segment id)
    program: list[str] = field(default_factory=list)
    step: int = 0
    task: Task | None = None
    input_rows: list[tuple[Row, str]] = field(default_factory=list)
    model_input: Counter = field(default_factory=Counter)
    inputs: list[Segment] = field(default_factory=list)
    staged: list = field(default_factory=list)
    allocation: object = None
    outcome: str = ""  # "" while running, then committed | failed | revoked
    locks: list = field(default_factory=list)
    pieces: list = field(default_factory=list)  # the runner's SourcePieces of its input

    def __post_init__(self) -> None:
        context = {"useConcurrentLocks": self.mode == CONC, "forceTimeChunkLock": self.mode != SEG}
        task_type = "compact" if self.kind == "compact" else "index_parallel"
        self.task = claimed_task(spec={"context": context}, task_type=task_type)
        if not self.program:
            self.program = ["lock", "read", "write", "publish"]

    @property
    def done(self) -> bool:
        return bool(self.outcome) or self.step >= len(self.program)

    # --- steps ------------------------------------------------------------------
    def advance(self) -> bool:
        """Run the next step; False if it must wait for a lock (retry later)."""
        if self.done:
            return True
        action = self.program[self.step]
        try:
            ok = getattr(self, f"_{action}")()
        except services.LockRevoked:
            self._end(TaskStatus.FAILED, "revoked")
            return True
        if ok:
            self.step += 1
        return ok

    def _end(self, status: str, outcome: str) -> None:
        services.task_finish(task_id=self.task.id, status=status, error=outcome)
        self.outcome = outcome

    def _fail(self) -> bool:
        self._end(TaskStatus.FAILED, "failed")
        return True

    def _lock_type(self) -> tuple[str, str]:
        if self.mode == CONC:
            return (
                locking.APPEND if self.kind == "append" else locking.REPLACE
            ), locking.TIME_CHUNK
        return locking.EXCLUSIVE, locking.TIME_CHUNK

    def _lock(self) -> bool:
        self.task.refresh_from_db()
        if self.mode == SEG and self.kind == "append":
            return True  # segment locks are taken at allocation
        if self.mode == SEG and self.kind == "compact":
            return self._lock_segments()
        lock_type, granularity = self._lock_type()
        # The runner's own plan: intervals widened to the granularity, and for an
        # append the chunks its rows go into, all decided at once.
        plan = steps.lock_plan(DS, self._wanted(), self._granularity(), self.kind == "append")
        locks = services.locks_try_acquire(
            task=self.task, intervals=plan, lock_type=lock_type, granularity=granularity
        )
        if locks is None:
            return False
        self.locks = locks
        if self.kind != "append":
            # The model's input: what the serial replay holds in its intervals at grant time.
            self.model_input = Counter(r for iv in self._wanted() for r in self.world_rows_in(iv))
        if self.kind == "compact":
            self.inputs = self._input_segments(
                steps.read_points(locks) if self.mode == CONC else None
            )
        return True

    def _wanted(self) -> list[Interval]:
        if self.kind == "append":
            days = {
                Interval(
                    DAY.start + timedelta(days=r.hour // 24),
                    DAY.start + timedelta(days=r.hour // 24 + 1),
                )
                for r in self.new_rows
            }
            return sorted(days, key=lambda iv: iv.start)
        return list(self.intervals or [self.interval])

    def _granularity(self) -> str:
        if self.granularity:
            return self.granularity
        if self.kind == "replace" and self.interval != DAY and not self.intervals:
            return "HOUR"
        return "DAY"

    def world_rows_in(self, interval: Interval) -> list[str]:
        # Rows of the model inside interval: the model keeps ids; hours are in the ids.
        out = []
        for row_id, n in self.world.model.items():
            h = int(row_id.rsplit(":", 1)[1])
            if interval.contains(DAY.start + timedelta(hours=h)):
                out.extend([row_id] * n)
        return out

    def _input_segments(self, read_points) -> list[Segment]:
        """The visible input segments, each interval read as of its lock (the
        runner's `source_pieces`), or as they are now."""
        wanted = self._wanted()
        points = read_points or [(iv, None) for iv in wanted]
        spec = _DruidInput(
            DS, Interval(min(iv.start for iv in wanted), max(iv.end for iv in wanted))
        )
        pieces = runner.source_pieces(spec, read_points=points)
        by_location = {p.location for p in pieces}
        segs = Segment.objects.filter(location__in=by_location, used=True)
        ids = {
            ref.id
            for iv, seq in points
            for _, ref in selectors.timeline_for(datasource=DS, as_of=seq).lookup(iv)
            if not ref.tombstone
        }
        if self.input_ids is not None:
            ids &= set(self.input_ids)
        chosen = sorted((s for s in segs if s.id in ids), key=lambda s: (s.start, s.partition))
        # What the job reads: each file's rows inside the pieces where it is visible
        # (upgraded copies share a file and each shows only its own chunk's rows).
        keep = {s.location for s in chosen}
        self.pieces = [p for p in pieces if p.location in keep]
        return chosen

    def _lock_segments(self) -> bool:
        """SEG-mode compaction: EXCLUSIVE segment locks on the visible input segments."""
        inputs = self._input_segments(None)
        for seg in inputs:
            lock = services.lock_try_acquire(
                task=self.task,
                interval=seg.interval,
                lock_type=locking.EXCLUSIVE,
                granularity=locking.SEGMENT,
                partition=seg.partition,
                version=seg.version,
            )
            if lock is None:
                return False
        self.inputs = inputs
        self.model_input = Counter(self.world_rows_in(self.interval))
        return True

    def _read(self) -> bool:
        if self.kind == "compact":
            self.input_rows = [
                (row, piece.location)
                for piece in self.pieces
                for row in self.world.files[piece.location]
                if piece.visible.contains(at(row))
            ]
        return True

    def _write(self) -> bool:
        task = self.task
        if self.kind == "append":
            # The runner's steps: split the rows by the chunk each goes into, then
            # allocate every piece (segment-locked appends lock what they allocate).
            pieces = steps.append_pieces(DS, self._wanted())
            parts = []
            for bucket in self._wanted():
                for piece in pieces[bucket]:
                    content = [r for r in self.new_rows if piece.contains(at(r))]
                    if content:
                        parts.append((piece, content))
            try:
                allocations = runner.allocate_segments(
                    task, [p for p, _ in parts], [1] * len(parts), True, self.mode == SEG, 0
                )
            except services.LockTimeout:
                return False
            self.allocation = allocations[0]
            self.staged = [
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=alloc.partitions[0],
                    core_partitions=alloc.core_partitions,
                    location=self.world.new_file(self.name, content),
                    num_rows=len(content),
                )
                for alloc, (_, content) in zip(allocations, parts, strict=True)
            ]
            return True
        if self.kind == "compact":
            content = [row for row, _ in self.input_rows]
            if self.mode == SEG and not self.inputs:
                self.staged = []  # nothing to compact: publish nothing, as the runner does
                return True
            if self.mode == SEG:
                alloc = services.segments_allocate_overwrite(
                    task=task, input_segment_ids=[s.id for s in self.inputs], count=1
                )
                self.staged = [
                    services.NewSegment(
                        interval=DAY,
                        version=alloc.version,
                        partition=alloc.partitions[0],
                        core_partitions=alloc.core_partitions,
                        minor_version=alloc.minor_version,
                        root_partitions=alloc.root_partitions,
                        location=self.world.new_file(self.name, content),
                        num_rows=len(content),
                    )
                ]
                return True
            keep: list[Segment] = []
            if self.input_ids is not None:
                # Re-register the untouched segments of the chunk at the new version
                # (same file, no rewrite) so they are never silently hidden.
                timeline = selectors.timeline_for(datasource=DS)
                others = [ref.id for _, ref in timeline.lookup(DAY) if ref.id not in self.input_ids]
                keep = list(Segment.objects.filter(id__in=others).order_by("partition"))
            total = 1 + len(keep)
            alloc = services.segments_allocate(task=task, interval=DAY, count=total, append=False)
            staged = [
                services.NewSegment(
                    interval=DAY,
                    version=alloc.version,
                    partition=alloc.partitions[0],
                    core_partitions=total,
                    location=self.world.new_file(self.name, content),
                    num_rows=len(content),
                )
            ]
            for p, seg in zip(alloc.partitions[1:], keep, strict=True):
                staged.append(
                    services.NewSegment(
                        interval=DAY,
                        version=alloc.version,
                        partition=p,
                        core_partitions=total,
                        location=seg.location,
                        num_rows=seg.num_rows,
                        upgraded_from=seg.id,
                    )
                )
            self.staged = staged
            return True
        # replace: new rows, bucketed by the replace's granularity (its interval's hours or the day)
        step = timedelta(hours=1) if self._granularity() == "HOUR" else timedelta(days=1)
        buckets = []
        for iv in self._wanted():
            start = iv.start
            while start < iv.end:
                buckets.append(Interval(start, start + step))
                start += step
        staged = []
        for bucket in buckets:
            content = [r for r in self.new_rows if bucket.contains(at(r))]
            if not content and not self.drop_existing:
                continue
            alloc = services.segments_allocate(task=task, interval=bucket, count=1, append=False)
            staged.append(
                services.NewSegment(
                    interval=bucket,
                    version=alloc.version,
                    partition=alloc.partitions[0],
                    core_partitions=0 if not content else 1,
                    tombstone=not content,
                    location=self.world.new_file(self.name, content) if content else "",
                    num_rows=len(content),
                )
            )
        self.staged = staged
        return True

    def _publish(self) -> bool:
        try:
            if self.staged:
                services.segments_publish(task=self.task, segments=self.staged)
        except services.PublishError:
            self._end(TaskStatus.FAILED, "failed")
            return True
        services.task_finish(task_id=self.task.id, status=TaskStatus.SUCCESS)
        self.outcome = "committed"
        model = self.world.model
        if self.kind == "append":
            model.update(r.id for r in self.new_rows)
        elif self.kind == "replace":
            model.subtract(self.model_input)
            model.update(r.id for r in self.new_rows)
        # compaction: removes its input rows and adds them back (rollup is identity here)
        self.world.model = +model
        self.world.commits.append(self.name)
        return True


def run(actors: dict[str, Actor], order: list[str], max_rounds: int = 200) -> None:
    """Advance actors in `order` (a blocked actor retries on its next turn), then drain."""
    for name in order:
        actor = actors[name]
        actor.advance()
    for _ in range(max_rounds):
        if all(a.done for a in actors.values()):
            return
        for actor in actors.values():
            if not actor.done:
                actor.advance()
    stuck = {n: a.program[a.step] for n, a in actors.items() if not a.done}
    raise AssertionError(f"scenario did not finish: {stuck}")
