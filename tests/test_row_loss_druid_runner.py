"""Apache Druid's data-loss bugs through the runner's real steps (real Spark,
`workers/runner.py`), on small inline data; the service-level versions are in
tests/test_druid_bugs.py, path 1 and #17852's DAY append beside an HOUR replace
in tests/test_row_loss_runner.py.

Interleavings are set from the test's side: each task runs `runner.run_task` in
its own thread, and the test can stop it at one of the runner's own steps —
before it reads its input (`source_pieces`, after its locks are granted),
before it allocates (`allocate_segments`, after Spark wrote its files) or before it
publishes (`publish_once`, after allocation) — and let it go on later. A
compaction (`workers/compaction.py`) stops at its own steps: before it reads
(`read_locked`, after its locks are granted), before its Spark job
(`run_job`) or before it publishes (its `publish_once`). The steps run
unchanged: a pause only waits before calling the real function. Each scenario
asserts the exact visible row ids (duplicates count) and that no lock outlives
its task.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone
from test_row_loss_runner import _append_spec, _claim, _druid_reindex, _rows, visible_pages

from metastore import locking, services
from metastore.intervals import Interval
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
)
from workers import compaction, runner
from workers.reaper import reap_dead_tasks

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]

DAY1 = "2024-01-01/2024-01-02"
# Where a task can be stopped: the runner's steps, and a compaction's own.
STEPS = {
    "source_pieces": (runner,),
    "allocate_segments": (runner,),
    "publish_once": (runner, compaction),  # compaction imports it by name
    "read_locked": (compaction,),
    "run_job": (compaction,),
}
WAIT_S = 600


@pytest.fixture
def no_queue(settings, no_enqueue):
    settings.STRATA_HEARTBEAT_SECONDS = 0.2


class Paused:
    """A task run by the runner in its own thread, stopped before one step."""

    def __init__(self, task_id: str, step: str) -> None:
        self.task_id, self.step = task_id, step
        self.reached, self.released = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, name=task_id)

    def _run(self) -> None:
        try:
            runner.run_task(self.task_id)
        finally:
            connection.close()  # the thread's own connection, or the test database stays busy

    def release(self) -> Task:
        """Let it go on, and wait for its end."""
        self.released.set()
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive(), f"{self.task_id} did not end"
        return Task.objects.get(id=self.task_id)


@pytest.fixture
def pause(monkeypatch, no_queue):
    """`pause(task_id, step)`: start the task and return once it waits before `step`."""
    paused: dict[str, Paused] = {}

    def wrap(module, name: str):
        real = getattr(module, name)

        def step(*args, **kwargs):
            p = paused.get(threading.current_thread().name)
            if p is not None and p.step == name and not p.released.is_set():
                p.reached.set()
                assert p.released.wait(WAIT_S), f"{p.task_id} was never released"
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, step)

    for name, modules in STEPS.items():
        for module in modules:
            wrap(module, name)

    def start(task_id: str, step: str) -> Paused:
        assert step in STEPS
        p = paused[task_id] = Paused(task_id, step)
        p.thread.start()
        while not p.reached.wait(0.2):
            status = Task.objects.get(id=task_id).status
            assert p.thread.is_alive(), f"{task_id} ended ({status}) before {step}"
        return p

    yield start
    for p in paused.values():  # a failed test leaves no thread stopped
        p.released.set()
        p.thread.join(timeout=WAIT_S)


def run(inline_spec, spec: dict) -> Task:
    """Claim and run a task to its end in this thread."""
    task = _claim(inline_spec, spec)
    runner.run_task(task.id)
    return Task.objects.get(id=task.id)


def ok(task: Task) -> Task:
    assert task.status == TaskStatus.SUCCESS, task.error
    return task


def seed(inline_spec, ds: str, day: int = 1) -> list[str]:
    """s at v1: six rows in hours 0-5 of the day."""
    ok(run(inline_spec, inline_spec(ds, data=_rows(day, "s", range(6)), intervals=[_day(day)])))
    return [f"s{day}.{h}" for h in range(6)]


def _day(n: int) -> str:
    return f"2024-01-0{n}/2024-01-0{n + 1}"


def append(inline_spec, ds: str, prefix: str, hours, day: int = 1, **context) -> dict:
    return _append_spec(
        inline_spec,
        ds,
        _rows(day, prefix, hours),
        intervals=[_day(day)],
        context={"useConcurrentLocks": True, **context},
    )


def replace(inline_spec, ds: str, prefix: str, hours, days=(1,)) -> dict:
    data = "\n".join(_rows(d, prefix, hours) for d in days)
    return inline_spec(
        ds, data=data, intervals=[_day(d) for d in days], context={"useConcurrentLocks": True}
    )


def ids(prefix: str, hours, day: int = 1) -> list[str]:
    return [f"{prefix}{day}.{h}" for h in hours]


def visible(ds: str) -> list[str]:
    return visible_pages(ds, Interval.parse("2024-01-01/2024-01-10"))


def test_druid_15085_reindex_never_reads_rows_appended_after_its_lock(inline_spec, pause):
    """A replace reading its own dataSource locks, then an append commits before
    it reads: it reads as of its lock (without the append's rows), and the
    append is carried onto its version — each row visible once, not twice."""
    ds = "d15085"
    s = seed(inline_spec, ds)
    r = _claim(inline_spec, _druid_reindex(inline_spec, ds, DAY1, [DAY1], useConcurrentLocks=True))
    paused = pause(r.id, "source_pieces")  # locked, not read yet
    ok(run(inline_spec, append(inline_spec, ds, "j", [2, 7])))
    ok(paused.release())
    assert visible(ds) == sorted(s + ids("j", [2, 7]))
    assert Segment.objects.filter(created_by=r, used=True).exists()
    assert not TaskLock.objects.exists()


def test_druid_15813_repeated_appends_during_a_replace_are_seen_once(inline_spec, pause):
    """Three appends commit one after another while a replace holds its lock:
    before it publishes each is visible once over s; after, each is visible once
    over the replace's rows (upgraded copy, never both, never neither)."""
    ds = "d15813"
    s = seed(inline_spec, ds)
    r = _claim(inline_spec, replace(inline_spec, ds, "r", [1, 9]))
    paused = pause(r.id, "allocate_segments")
    appended: list[str] = []
    for n, hour in enumerate((3, 11, 20)):
        ok(run(inline_spec, append(inline_spec, ds, f"a{n}", [hour])))
        appended += ids(f"a{n}", [hour])
        assert visible(ds) == sorted(s + appended)
    ok(paused.release())
    assert visible(ds) == sorted(ids("r", [1, 9]) + appended)
    ok(run(inline_spec, append(inline_spec, ds, "a3", [5])))
    assert visible(ds) == sorted(ids("r", [1, 9]) + appended + ids("a3", [5]))
    assert not TaskLock.objects.exists()


def test_druid_15459_and_16393_appends_allocated_before_a_replace_publishes(inline_spec, pause):
    """a allocates under its APPEND lock, then a replace locks; b publishes while
    the replace runs (upgraded by its publish), the replace publishes, then a
    publishes (carried onto the replace's version, never at an overshadowed
    one), then c appends: every append visible once over the replace's rows."""
    ds = "d16393"
    seed(inline_spec, ds)
    a = _claim(inline_spec, append(inline_spec, ds, "a", [2]))
    a_paused = pause(a.id, "publish_once")  # allocated, not published
    r = _claim(inline_spec, replace(inline_spec, ds, "r", [1, 9]))
    r_paused = pause(r.id, "allocate_segments")
    ok(run(inline_spec, append(inline_spec, ds, "b", [4])))
    ok(r_paused.release())
    assert visible(ds) == sorted(ids("r", [1, 9]) + ids("b", [4]))
    ok(a_paused.release())
    ok(run(inline_spec, append(inline_spec, ds, "c", [6])))
    want = ids("r", [1, 9]) + ids("a", [2]) + ids("b", [4]) + ids("c", [6])
    assert visible(ds) == sorted(want)
    assert not TaskLock.objects.exists()


def test_druid_16316_replace_covers_a_day_held_by_an_append_lock(inline_spec, pause):
    """A replace of three days while an append holds an APPEND lock on the middle
    one: the replace writes all three days, and the append is carried onto it."""
    ds = "d16316"
    s = []
    for day in (1, 2, 3):
        s += seed(inline_spec, ds, day)
    a = _claim(inline_spec, append(inline_spec, ds, "a", [5], day=2))
    a_paused = pause(a.id, "publish_once")
    r = ok(run(inline_spec, replace(inline_spec, ds, "r", [8], days=(1, 2, 3))))
    starts = set(Segment.objects.filter(created_by=r).values_list("start", flat=True))
    assert {st.day for st in starts} == {1, 2, 3}
    ok(a_paused.release())
    want = [f"r{d}.8" for d in (1, 2, 3)] + ids("a", [5], day=2)
    assert visible(ds) == sorted(want)
    assert not TaskLock.objects.exists()


@pytest.mark.parametrize("killed", [False, True], ids=["unused", "killed"])
def test_druid_18216_18230_append_into_a_day_of_unused_segments_is_visible(
    inline_spec, no_queue, killed
):
    """All of a day's segments marked unused (and killed): appends land visibly."""
    ds = f"d18216{int(killed)}"
    seed(inline_spec, ds)
    services.segments_mark_used(datasource=ds, used=False, interval=Interval.parse(DAY1))
    if killed:
        kill = _claim(
            inline_spec, {"type": "kill", "dataSource": ds, "interval": DAY1, "context": {}}
        )
        runner.run_task(kill.id)
        ok(Task.objects.get(id=kill.id))
        assert not Segment.objects.filter(datasource__name=ds).exists()
    ok(run(inline_spec, append(inline_spec, ds, "j", [2], useConcurrentLocks=False)))
    assert visible(ds) == ids("j", [2])
    ok(run(inline_spec, append(inline_spec, ds, "k", [3], useConcurrentLocks=False)))
    assert visible(ds) == sorted(ids("j", [2]) + ids("k", [3]))
    assert not TaskLock.objects.exists()


def test_druid_19737_kill_keeps_the_file_an_upgraded_copy_points_at(inline_spec, pause):
    """An append upgraded onto a replace's version shares its file with the
    original; marking the original unused and killing it deletes no file a used
    segment still reads."""
    ds = "d19737"
    seed(inline_spec, ds)
    r = _claim(inline_spec, replace(inline_spec, ds, "r", [1]))
    r_paused = pause(r.id, "allocate_segments")
    a = ok(run(inline_spec, append(inline_spec, ds, "a", [2])))
    ok(r_paused.release())
    original = Segment.objects.get(created_by=a)
    copy = Segment.objects.get(upgraded_from=original.id)
    assert copy.location == original.location
    services.segments_mark_used(datasource=ds, used=False, segment_ids=[original.id])
    kill = _claim(inline_spec, {"type": "kill", "dataSource": ds, "interval": DAY1, "context": {}})
    runner.run_task(kill.id)
    ok(Task.objects.get(id=kill.id))
    assert not Segment.objects.filter(id=original.id).exists()
    assert visible(ds) == sorted(ids("r", [1]) + ids("a", [2]))  # the copy's file is read
    assert not TaskLock.objects.exists()


def test_day_append_beside_a_running_hour_append_lands_at_hour_granularity(inline_spec, pause):
    """Issue 10, item 3a through the runner: an HOUR append into an empty day is
    still running (allocated, not published) when a DAY append of the same day
    runs: the DAY append is split at HOUR granularity (its hour-3 row joins the
    running HOUR chunk, the others get HOUR chunks of their own) instead of
    being refused, and every row of both is visible."""
    ds = "hourday"
    h = _claim(
        inline_spec,
        _append_spec(
            inline_spec,
            ds,
            _rows(1, "h", [3]),
            intervals=["2024-01-01T03:00:00Z/2024-01-01T04:00:00Z"],
            segment_granularity="HOUR",
            context={"useConcurrentLocks": True},
        ),
    )
    h_paused = pause(h.id, "publish_once")
    d = ok(run(inline_spec, append(inline_spec, ds, "d", [1, 3, 20])))
    hours = sorted(s.start.hour for s in Segment.objects.filter(created_by=d))
    assert hours == [1, 3, 20]
    assert all(s.end - s.start == timedelta(hours=1) for s in Segment.objects.filter(created_by=d))
    ok(h_paused.release())
    assert visible(ds) == sorted(ids("d", [1, 3, 20]) + ids("h", [3]))
    assert not TaskLock.objects.exists()


# --- #18099: a replace that succeeds has published (rows or tombstones) ---------------


def _drop_existing(spec: dict, drop: bool = True, keep_page: str | None = None) -> dict:
    """`spec` with `dropExisting`, and a transform filter keeping only `keep_page`."""
    spec["spec"]["ioConfig"]["dropExisting"] = drop
    if keep_page is not None:
        spec["spec"]["dataSchema"]["transformSpec"] = {
            "filter": {"type": "selector", "dimension": "page", "value": keep_page}
        }
    return spec


def _commit_of(task: Task) -> CommitLogEntry:
    return CommitLogEntry.objects.get(task=task, kind=CommitKind.PUBLISH)


def test_druid_18099_a_replace_that_succeeds_has_published_its_rows_and_tombstones(
    inline_spec, no_queue
):
    """A replace of days 1 and 2 (dropExisting) whose rows all fall in day 1:
    SUCCESS means day 1 shows its rows, day 2 a tombstone (s2 is dropped, not
    silently left), and the report names the commit that did it."""
    ds = "d18099"
    seed(inline_spec, ds, 1)
    seed(inline_spec, ds, 2)
    spec = inline_spec(ds, data=_rows(1, "r", [4]), intervals=[_day(1), _day(2)])
    r = ok(run(inline_spec, _drop_existing(spec)))
    assert visible(ds) == ids("r", [4])
    entry = _commit_of(r)
    published = Segment.objects.filter(created_by=r)
    assert sorted(entry.added) == sorted(s.id for s in published)
    assert {(s.start.day, s.tombstone) for s in published} == {(1, False), (2, True)}
    assert r.report["commit"] == entry.seq
    assert r.report["segmentsPublished"] == 2
    assert not TaskLock.objects.exists()


def test_druid_18099_a_reindex_left_without_rows_drops_the_day_keeping_a_later_append(
    inline_spec, pause
):
    """A reindex of day 1 onto itself (dropExisting, concurrent locks) whose filter
    keeps no row, while an append commits after its lock: it publishes a tombstone
    (s is dropped as asked, not left visible under a SUCCESS that published
    nothing), and the append is carried onto the tombstone's version."""
    ds = "d18099r"
    seed(inline_spec, ds)
    spec = _druid_reindex(inline_spec, ds, DAY1, [DAY1], useConcurrentLocks=True)
    r = _claim(inline_spec, _drop_existing(spec, keep_page="no such page"))
    paused = pause(r.id, "source_pieces")  # locked, not read yet
    ok(run(inline_spec, append(inline_spec, ds, "j", [2, 7])))
    r = ok(paused.release())
    assert visible(ds) == ids("j", [2, 7])
    (tombstone,) = Segment.objects.filter(created_by=r, upgraded_from="")
    assert tombstone.tombstone
    carried = Segment.objects.filter(created_by=r).exclude(upgraded_from="")
    assert {s.version for s in carried} == {tombstone.version}
    entry = _commit_of(r)
    assert tombstone.id in entry.added and r.report["commit"] == entry.seq
    assert r.report["rowStats"]["thrownAway"] == 6
    assert not TaskLock.objects.exists()


def test_druid_18099_a_replace_without_drop_existing_that_gets_no_row_says_so(
    inline_spec, no_queue
):
    """Without dropExisting (Druid's legacy replace) only chunks that get rows are
    replaced: a reindex whose filter keeps no row leaves s visible, and its
    report says that it published nothing and why, instead of a bare SUCCESS."""
    ds = "d18099n"
    s = seed(inline_spec, ds)
    spec = _druid_reindex(inline_spec, ds, DAY1, [DAY1])
    r = ok(run(inline_spec, _drop_existing(spec, drop=False, keep_page="no such page")))
    assert visible(ds) == sorted(s)
    assert not CommitLogEntry.objects.filter(task=r).exists()
    assert r.report["segmentsPublished"] == 0 and r.report["commit"] is None
    assert "dropExisting" in r.report["nothingPublished"], r.report
    assert not TaskLock.objects.exists()


# --- #18464: no lock outlives its task, whatever ends it ------------------------------


def _preempt(ds: str) -> Task:
    """A higher-priority task takes DAY1, revoking the lock of whoever holds it."""
    top = services.task_create(
        spec={"context": {"priority": 90}}, task_type="index_parallel", datasource=ds, enqueue=False
    )
    assert services.task_claim(task_id=top.id, worker="pytest")
    services.locks_acquire(
        task=top, intervals=[Interval.parse(DAY1)], lock_type=locking.EXCLUSIVE, timeout_ms=0
    )
    return top


def _deep_files(ds: str) -> set[str]:
    folder = Path(settings.STRATA_DEEP_STORAGE) / ds
    return {str(p) for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


@pytest.mark.parametrize("step", ["source_pieces", "allocate_segments", "publish_once"])
@pytest.mark.parametrize("how", ["cancel", "preempt", "janitor"])
def test_druid_18464_no_lock_outlives_a_task_stopped_at_any_step(inline_spec, pause, how, step):
    """A reindex of day 1 stopped at one of the runner's steps is canceled, or
    preempted by a higher-priority task, or failed by the janitor (its heartbeat
    judged stale), then let go on: whatever the order, it ends CANCELED or
    FAILED with its reason, holds no lock, published and allocated nothing after
    its end, left no intermediary directory or deep-storage file, and day 1 can
    be locked by another task afterwards."""
    ds = f"d18464_{how}{step}"
    s = seed(inline_spec, ds)
    seeded = _deep_files(ds)
    r = _claim(inline_spec, _druid_reindex(inline_spec, ds, DAY1, [DAY1]))
    paused = pause(r.id, step)
    allocated = set(PendingSegment.objects.filter(task=r).values_list("id", flat=True))
    top = None
    if how == "cancel":
        services.task_cancel(task_id=r.id)
    elif how == "preempt":
        top = _preempt(ds)
    else:  # the reaper, as if the worker had stopped heartbeating long ago
        reaped, _ = reap_dead_tasks(older_than=timezone.now() + timedelta(minutes=5))
        assert reaped == [r.id]
    r = paused.release()
    if how == "cancel":
        assert r.status == TaskStatus.CANCELED, (r.status, r.error)
    elif how == "preempt":
        assert r.status == TaskStatus.FAILED and "preempted" in r.error and top.id in r.error
        services.task_finish(task_id=top.id, status=TaskStatus.SUCCESS)
    else:
        assert r.status == TaskStatus.FAILED and "stopped heartbeating" in r.error, r.error
    assert not TaskLock.objects.filter(task=r).exists()
    assert not Segment.objects.filter(created_by=r).exists()
    assert not CommitLogEntry.objects.filter(task=r).exists()
    assert set(PendingSegment.objects.filter(task=r).values_list("id", flat=True)) == allocated
    assert not runner.intermediary_dir(r.id).exists()
    assert _deep_files(ds) == seeded
    assert visible(ds) == sorted(s)
    after = services.task_create(spec={}, task_type="index_parallel", datasource=ds, enqueue=False)
    assert services.task_claim(task_id=after.id, worker="pytest")
    services.locks_acquire(
        task=after, intervals=[Interval.parse(DAY1)], lock_type=locking.EXCLUSIVE, timeout_ms=0
    )
    services.task_finish(task_id=after.id, status=TaskStatus.SUCCESS)
    assert not TaskLock.objects.exists()


# --- #17852: a MONTH compacted to DAY while an append into one of its days runs ---------

MONTH = "2024-01-01/2024-02-01"


def _month_seed(inline_spec, ds: str) -> list[str]:
    """m at v1: one MONTH chunk holding three rows in each of days 1-3."""
    data = "\n".join(_rows(d, "m", range(3)) for d in (1, 2, 3))
    spec = inline_spec(ds, data=data, intervals=[MONTH], segment_granularity="MONTH")
    ok(run(inline_spec, spec))
    return [f"m{d}.{h}" for d in (1, 2, 3) for h in range(3)]


def _month_to_day(ds: str) -> dict:
    return {
        "type": "compact",
        "dataSource": ds,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": MONTH}},
        "granularitySpec": {"segmentGranularity": "DAY"},
        "context": {"useConcurrentLocks": True},
    }


def _assert_compacted_to_days(c: Task) -> None:
    own = Segment.objects.filter(created_by=c, upgraded_from="")
    assert {s.end - s.start for s in own} == {timedelta(days=1)}
    assert sorted(s.start.day for s in own if not s.tombstone) == [1, 2, 3]
    assert c.report["commit"] == _commit_of(c).seq


def test_druid_17852_month_compacted_to_day_while_an_append_commits_into_a_day(inline_spec, pause):
    """The compaction holds its REPLACE lock on the month (not read yet) when an
    append into day 2 runs and commits into the MONTH chunk (the chunk visible
    there): the compaction reads as of its lock, so without the append, and its
    publish carries the append onto its DAY chunks. Every row once."""
    ds = "d17852a"
    m = _month_seed(inline_spec, ds)
    c = _claim(inline_spec, _month_to_day(ds))
    paused = pause(c.id, "read_locked")
    j = ok(run(inline_spec, append(inline_spec, ds, "j", [5, 20], day=2)))
    assert {s.end - s.start for s in Segment.objects.filter(created_by=j)} == {timedelta(days=31)}
    assert visible_pages(ds, Interval.parse(MONTH)) == sorted(m + ids("j", [5, 20], day=2))
    c = ok(paused.release())
    _assert_compacted_to_days(c)
    assert Segment.objects.filter(created_by=c).exclude(upgraded_from="").exists()
    assert visible_pages(ds, Interval.parse(MONTH)) == sorted(m + ids("j", [5, 20], day=2))
    assert not TaskLock.objects.exists()


def test_druid_17852_month_compacted_to_day_before_a_running_append_publishes(inline_spec, pause):
    """The append allocated in the MONTH chunk before the compaction locked, and
    publishes after the compaction published its DAY chunks: its publish carries
    it onto them. Every row once."""
    ds = "d17852b"
    m = _month_seed(inline_spec, ds)
    j = _claim(inline_spec, append(inline_spec, ds, "j", [5, 20], day=2))
    j_paused = pause(j.id, "publish_once")
    c = ok(run(inline_spec, _month_to_day(ds)))
    _assert_compacted_to_days(c)
    assert visible_pages(ds, Interval.parse(MONTH)) == sorted(m)
    ok(j_paused.release())
    assert visible_pages(ds, Interval.parse(MONTH)) == sorted(m + ids("j", [5, 20], day=2))
    assert not TaskLock.objects.exists()
