"""Apache Druid's data-loss bugs as named scenarios against the real services
(SPEC §8): each asserts the exact visible rows against the serial replay of the
committed tasks' change sets. Rows live in memory under their segment's
location; reads follow the real timeline (partial overshadowing, tombstones,
upgraded copies sharing a file). Runner-level versions (real Spark, the
runner's own steps) are in tests/test_row_loss_druid_runner.py (#15085,
#15459/#16393, #15813, #16316, #18099, #18216/#18230, #18464, #19737, #17852's
MONTH→DAY compaction with an append running) and tests/test_row_loss_runner.py
(#17852's DAY append beside an HOUR replace)."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metastore import allocation_rules, locking, selectors, services
from metastore.druid.ingestion import drop_existing_chunks
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskLock, TaskStatus

pytestmark = pytest.mark.django_db

DS = "druid"
DAY = Interval.parse("2024-01-01/2024-01-02")
_ids = itertools.count()


def day(n: int) -> Interval:
    return Interval(DAY.start + timedelta(days=n), DAY.start + timedelta(days=n + 1))


def hour(h: int) -> Interval:
    return Interval(DAY.start + timedelta(hours=h), DAY.start + timedelta(hours=h + 1))


class World:
    """Files of rows, the serial replay of committed change sets, and tasks."""

    def __init__(self) -> None:
        self.files: dict[str, list[tuple[str, datetime]]] = {}
        self.model: Counter = Counter()

    def task(self, concurrent: bool = True, priority: int = 50) -> Task:
        t = services.task_create(
            spec={"context": {"useConcurrentLocks": concurrent, "priority": priority}},
            task_type="index_parallel",
            datasource=DS,
            enqueue=False,
        )
        assert services.task_claim(task_id=t.id, worker="test")
        return t

    def lock(self, t: Task, intervals, lock_type: str) -> list:
        return services.locks_acquire(
            task=t, intervals=intervals, lock_type=lock_type, timeout_ms=0
        )

    def rows(self, prefix: str, interval: Interval, n: int = 3) -> list[tuple[str, datetime]]:
        step = (interval.end - interval.start) / n
        return [(f"{prefix}:{i}", interval.start + step * i) for i in range(n)]

    def stage(self, t: Task, content, *, interval: Interval, append: bool, sequence: str = ""):
        """Allocate and stage one segment per chunk the rows go into."""
        out = []
        if append:
            pieces = services.append_layout(datasource=DS, intervals=[interval])
        else:
            pieces = [(interval, interval)]
        for piece, _ in pieces:
            part = [r for r in content if piece.contains(r[1])]
            if not part:
                continue
            alloc = services.segments_allocate(
                task=t, interval=piece, count=1, append=append, sequence_name=f"{sequence}{piece}"
            )
            location = f"mem://{next(_ids)}"
            self.files[location] = part
            out.append(
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=alloc.partitions[0],
                    core_partitions=alloc.core_partitions,
                    location=location,
                    num_rows=len(part),
                )
            )
        return out

    def read(self, intervals_as_of) -> list[tuple[str, datetime]]:
        """The rows a replacing task reads: each interval as of its lock's grant."""
        out = []
        for interval, seq in intervals_as_of:
            out += self.visible(interval, as_of=seq)
        return out

    def visible(self, interval: Interval = DAY, as_of: int | None = None):
        locations = dict(Segment.objects.filter(datasource__name=DS).values_list("id", "location"))
        out = []
        timeline = selectors.timeline_for(datasource=DS, as_of=as_of)
        for piece, ref in timeline.lookup(interval):
            if not ref.tombstone:
                out += [r for r in self.files[locations[ref.id]] if piece.contains(r[1])]
        return out

    def publish(self, t: Task, segments, *, adds=(), removes=()) -> None:
        services.segments_publish(task=t, segments=segments)
        services.task_finish(task_id=t.id, status=TaskStatus.SUCCESS)
        self.model.subtract(r[0] for r in removes)
        self.model.update(r[0] for r in adds)
        self.model = +self.model

    def append(self, prefix: str, interval: Interval = DAY, concurrent: bool = True, n: int = 3):
        t = self.task(concurrent)
        content = self.rows(prefix, interval, n)
        chunks = [c for _, c in services.append_layout(datasource=DS, intervals=[interval])]
        self.lock(
            t,
            sorted(set(chunks), key=lambda c: c.start),
            locking.APPEND if concurrent else locking.EXCLUSIVE,
        )
        self.publish(t, self.stage(t, content, interval=interval, append=True), adds=content)
        return t

    def load(self, interval: Interval = DAY, prefix: str = "s1") -> None:
        t = self.task(concurrent=False)
        self.lock(t, [interval], locking.EXCLUSIVE)
        content = self.rows(prefix, interval, 6)
        self.publish(t, self.stage(t, content, interval=interval, append=False), adds=content)

    def assert_replay(self, interval: Interval = DAY) -> None:
        seen = Counter(r[0] for r in self.visible(interval))
        want = Counter({k: v for k, v in self.model.items() if k in seen or self._in(k, interval)})
        assert seen == want

    def _in(self, row_id: str, interval: Interval) -> bool:
        return any(
            row_id == r[0] and interval.contains(r[1]) for f in self.files.values() for r in f
        )


@pytest.fixture
def world() -> World:
    return World()


def replace_start(world: World, intervals) -> tuple[Task, list]:
    t = world.task()
    locks = world.lock(t, intervals, locking.REPLACE)
    read = world.read([(lk.interval, lk.granted_seq) for lk in locks])
    return t, read


def replace_finish(world: World, t: Task, read, intervals, prefix: str = "r") -> None:
    segments, adds = [], []
    for interval in intervals:
        content = world.rows(f"{prefix}{interval.start:%d%H}", interval)
        segments += world.stage(t, content, interval=interval, append=False)
        adds += content
    world.publish(t, segments, adds=adds, removes=read)


def test_druid_15085_replace_never_reads_rows_appended_after_its_lock(world):
    world.load()
    r, read = replace_start(world, [DAY])
    world.append("j")
    assert {row[0].split(":")[0] for row in read} == {"s1"}
    replace_finish(world, r, read, [DAY])
    world.assert_replay()
    assert Counter(row[0] for row in world.visible()).most_common(1)[0][1] == 1


def test_druid_15459_no_pending_id_is_reused_at_an_overshadowed_version(world):
    world.load()
    a = world.task()
    world.lock(a, [DAY], locking.APPEND)
    a_rows = world.rows("a", DAY)
    staged = world.stage(a, a_rows, interval=DAY, append=True)
    r, read = replace_start(world, [DAY])
    replace_finish(world, r, read, [DAY])
    # A publishes after the replace: its rows are carried onto the replace's version.
    world.publish(a, staged, adds=a_rows)
    world.append("b")
    world.assert_replay()


def test_druid_15813_repeated_appends_during_a_replace_are_seen_once(world):
    world.load()
    r, read = replace_start(world, [DAY])
    for name in ("a1", "a2", "a3"):
        world.append(name)
        world.assert_replay()
    replace_finish(world, r, read, [DAY])
    world.assert_replay()
    world.append("a4")
    world.assert_replay()


def test_druid_16316_replace_covers_intervals_held_by_append_locks(world):
    for n in range(3):
        world.load(day(n), prefix=f"s{n}")
    a = world.task()
    world.lock(a, [day(1)], locking.APPEND)
    a_rows = world.rows("a", day(1))
    staged = world.stage(a, a_rows, interval=day(1), append=True)
    span = Interval(day(0).start, day(2).end)
    r, read = replace_start(world, [day(0), day(1), day(2)])
    world.publish(a, staged, adds=a_rows)
    replace_finish(world, r, read, [day(0), day(1), day(2)])
    world.assert_replay(span)
    assert {v for v in Segment.objects.filter(created_by=r).values_list("start", flat=True)} == {
        day(n).start for n in range(3)
    }


def test_druid_16393_interleaved_append_and_replace_publishes_keep_every_upgrade(world):
    world.load()
    a = world.task()
    world.lock(a, [DAY], locking.APPEND)
    a_rows = world.rows("a", DAY)
    a_staged = world.stage(a, a_rows, interval=DAY, append=True)
    r, read = replace_start(world, [DAY])
    world.publish(a, a_staged, adds=a_rows)  # committed while r holds its lock
    b = world.task()
    world.lock(b, [DAY], locking.APPEND)
    b_rows = world.rows("b", DAY)
    b_staged = world.stage(b, b_rows, interval=DAY, append=True)
    replace_finish(world, r, read, [DAY])  # upgrades a
    world.publish(b, b_staged, adds=b_rows)  # carried onto r's version
    world.assert_replay()


def _drop_existing_replace(inline_spec, intervals) -> Task:
    """A running replace whose spec has `dropExisting` over `intervals`."""
    spec = inline_spec(DS, intervals=[str(iv) for iv in intervals])
    spec["spec"]["ioConfig"]["dropExisting"] = True
    t = services.task_create(spec=spec, task_type="index_parallel", datasource=DS, enqueue=False)
    assert services.task_claim(task_id=t.id, worker="test")
    return t


def test_druid_18099_a_replace_that_succeeds_has_published_its_rows(world, inline_spec):
    """A replace of days 0 and 1 with dropExisting whose rows all fall in day 0.
    SUCCESS without a publish is refused (the rows it was asked to drop would stay
    visible), and so is a publish that leaves day 1 without rows or a tombstone;
    day 0's rows with a tombstone for day 1 publish, and the replay holds."""
    world.load(day(0), prefix="s0")
    world.load(day(1), prefix="s1")
    span = Interval(day(0).start, day(1).end)
    r = _drop_existing_replace(inline_spec, [day(0), day(1)])
    locks = world.lock(r, [day(0), day(1)], locking.REPLACE)
    read = world.read([(lk.interval, lk.granted_seq) for lk in locks])
    with pytest.raises(services.ServiceError, match="published nothing"):
        services.task_finish(task_id=r.id, status=TaskStatus.SUCCESS)
    assert Task.objects.get(id=r.id).status == TaskStatus.RUNNING
    content = world.rows("r", day(0))
    staged = world.stage(r, content, interval=day(0), append=False)
    with pytest.raises(services.PublishError, match=str(day(1))):
        services.segments_publish(task=r, segments=staged)
    world.assert_replay(span)  # nothing of it was published
    alloc = services.segments_allocate(task=r, interval=day(1), count=1, append=False)
    tomb = services.NewSegment(
        interval=day(1), version=alloc.version, partition=0, core_partitions=0, tombstone=True
    )
    world.publish(r, staged + [tomb], adds=content, removes=read)
    assert Task.objects.get(id=r.id).status == TaskStatus.SUCCESS
    assert world.visible(day(1)) == []
    world.assert_replay(span)


def test_druid_18099_a_replace_left_without_rows_publishes_only_a_tombstone(world, inline_spec):
    """Its input yielded no row at all: a tombstone is what it publishes, and the
    day's rows are gone once it succeeds."""
    world.load()
    r = _drop_existing_replace(inline_spec, [DAY])
    (lock,) = world.lock(r, [DAY], locking.REPLACE)
    read = world.read([(DAY, lock.granted_seq)])
    alloc = services.segments_allocate(task=r, interval=DAY, count=1, append=False)
    tomb = services.NewSegment(
        interval=DAY, version=alloc.version, partition=0, core_partitions=0, tombstone=True
    )
    world.publish(r, [tomb], removes=read)
    assert Task.objects.get(id=r.id).status == TaskStatus.SUCCESS
    assert world.visible() == []
    world.assert_replay()


def test_druid_18099_the_chunks_a_drop_existing_replace_must_publish(inline_spec):
    spec = inline_spec(DS, intervals=["2024-01-01T03:00:00Z/2024-01-01T06:00:00Z"])
    assert drop_existing_chunks(spec) == []  # dropExisting false: only chunks with rows
    spec["spec"]["ioConfig"]["dropExisting"] = "true"  # as Jackson reads it
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = {"type": "hour"}
    assert drop_existing_chunks(spec) == [hour(3), hour(4), hour(5)]
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "DAY"
    assert drop_existing_chunks(spec) == [DAY]
    spec["spec"]["ioConfig"]["appendToExisting"] = True
    assert drop_existing_chunks(spec) == []
    assert drop_existing_chunks({"type": "compact", "dataSource": DS}) == []


@settings(max_examples=200, deadline=None)
@given(
    required=st.lists(st.integers(0, 23), unique=True),
    published=st.lists(st.tuples(st.integers(0, 23), st.integers(1, 24)), max_size=6),
)
def test_chunks_left_out_are_those_some_hour_of_which_no_publish_covers(required, published):
    """Against the obvious reference, hour by hour, on HOUR chunks of one day."""
    chunks = [hour(h) for h in required]
    intervals = [Interval(hour(a).start, hour(min(a + n, 24) - 1).end) for a, n in published]
    covered = {h for iv in intervals for h in range(24) if iv.contains(hour(h))}
    assert allocation_rules.chunks_left_out(chunks, intervals) == [
        hour(h) for h in required if h not in covered
    ]


@pytest.mark.parametrize("killed", [False, True], ids=["unused", "killed"])
def test_druid_18216_18230_append_into_an_interval_of_unused_segments_is_visible(world, killed):
    world.load()
    services.segments_mark_used(datasource=DS, used=False, interval=DAY)
    world.model = Counter()
    if killed:
        k = services.task_create(spec={}, task_type="kill", datasource=DS, enqueue=False)
        services.task_claim(task_id=k.id, worker="test")
        world.lock(k, [DAY], locking.EXCLUSIVE)
        services.segments_kill(task=k, interval=DAY)
        services.task_finish(task_id=k.id, status=TaskStatus.SUCCESS)
    for name in ("j1", "j2"):
        world.append(name, concurrent=False)
        world.assert_replay()


def test_druid_18464_no_lock_outlives_its_task(world):
    ended = []
    # End, cancel, revoke and the janitor, each racing a task that holds locks.
    for how in ("end", "cancel", "revoke", "janitor"):
        t = world.task(concurrent=False, priority=25)
        world.lock(t, [day(0), day(1)], locking.EXCLUSIVE)
        if how == "end":
            services.task_finish(task_id=t.id, status=TaskStatus.SUCCESS)
        elif how == "cancel":
            services.task_cancel(task_id=t.id)
            services.task_finish(task_id=t.id, status=TaskStatus.CANCELED)
        elif how == "revoke":
            top = world.task(concurrent=False, priority=90)
            world.lock(top, [day(1)], locking.EXCLUSIVE)
            services.task_finish(task_id=t.id, status=TaskStatus.FAILED, error="preempted")
            services.task_finish(task_id=top.id, status=TaskStatus.SUCCESS)
        else:
            services.task_finish(task_id=t.id, status=TaskStatus.FAILED, error="no heartbeat")
        # Whatever the worker still tries afterwards takes no lock.
        with pytest.raises(services.ServiceError):
            world.lock(t, [day(2)], locking.EXCLUSIVE)
        ended.append(t.id)
        assert not TaskLock.objects.filter(task_id__in=ended).exists()


def test_druid_19737_kill_never_deletes_a_file_a_used_segment_points_at(world):
    world.load()
    r, read = replace_start(world, [DAY])
    a = world.append("a")
    replace_finish(world, r, read, [DAY])
    original = Segment.objects.get(created_by=a)
    (copy,) = Segment.objects.filter(upgraded_from=original.id)
    assert copy.location == original.location
    services.segments_mark_used(datasource=DS, used=False, segment_ids=[original.id])
    k = services.task_create(spec={}, task_type="kill", datasource=DS, enqueue=False)
    services.task_claim(task_id=k.id, worker="test")
    world.lock(k, [DAY], locking.EXCLUSIVE)
    _, files = services.segments_kill(task=k, interval=DAY)
    assert copy.location not in files
    world.assert_replay()


def test_druid_17852_day_append_beside_an_hour_replace_lands_visibly(world):
    world.load()
    r, read = replace_start(world, [hour(3)])
    replace_finish(world, r, read, [hour(3)])
    late = world.append("late", DAY, n=8)  # rows every third hour, one in hour 3
    world.assert_replay()
    # Every late row is visible, wherever its timestamp falls: the rows are split
    # between the HOUR chunk of the replace and the DAY chunk around it.
    assert {f"late:{i}" for i in range(8)} <= {row[0] for row in world.visible()}
    assert {s.interval for s in Segment.objects.filter(created_by=late)} == {DAY, hour(3)}


def test_druid_17852_month_to_day_compaction_with_appends_running(world):
    month = Interval.parse("2024-01-01/2024-02-01")
    world.load(month, prefix="m")
    # Appends into a day while a compaction to DAY of the first three days runs.
    days = [day(n) for n in range(3)]
    c, read = replace_start(world, days)
    # The append's rows go into the MONTH chunk, which the compaction is rewriting
    # at DAY granularity: it waits (its APPEND lock on the MONTH conflicts), and
    # nothing is written that the compaction would hide.
    j = world.task()
    with pytest.raises(services.LockTimeout):
        world.lock(j, [month], locking.APPEND)
    assert not TaskLock.objects.filter(task=j).exists()
    replace_finish(world, c, read, days, prefix="c")
    world.assert_replay(month)
    world.append("j", day(1))  # now into the compaction's DAY chunk
    world.assert_replay(month)
    world.append("k", day(1))
    world.assert_replay(month)
