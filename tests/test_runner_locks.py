"""The runner takes the locks the spec's context asks for (SPEC §5), and kill tasks
delete unused segments' rows and files through the lock box."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import TEST_WORKER
from django.db import transaction

from metastore import locking, selectors, services
from metastore.intervals import Interval
from metastore.models import CommitKind, CommitLogEntry, Segment, TaskLock, TaskStatus
from workers.runner import run_task

DAY = Interval.parse("2024-01-01/2024-01-02")


def _rows(prefix: str, n: int) -> str:
    return "\n".join(
        json.dumps({"ts": f"2024-01-01T{h:02d}:00:00Z", "page": f"{prefix}{h}", "added": 1})
        for h in range(n)
    )


def _visible_pages(datasource: str) -> list[str]:
    pages = []
    locations = dict(
        Segment.objects.filter(datasource__name=datasource).values_list("id", "location")
    )
    for _, ref in selectors.timeline_for(datasource=datasource).lookup(DAY):
        if not ref.tombstone:
            pages += pq.read_table(locations[ref.id]).column("page").to_pylist()
    return sorted(pages)


@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_concurrent_append_runs_beside_a_replace_and_is_upgraded_onto_its_version(claimed_task):
    base = claimed_task("conc", data=_rows("base", 3), intervals=["2024-01-01/2024-01-02"])
    run_task(base.id)
    # A replacing task holds a REPLACE lock on the day (it is still "running").
    replace = services.task_create(
        spec={"context": {"useConcurrentLocks": True}},
        task_type="index_parallel",
        datasource="conc",
        enqueue=False,
    )
    assert services.task_claim(task_id=replace.id, worker=TEST_WORKER)
    assert services.lock_try_acquire(task=replace, interval=DAY, lock_type=locking.REPLACE)
    # An appending ingestion with useConcurrentLocks takes an APPEND lock: it is not
    # blocked (an EXCLUSIVE request would wait and time out after 2 s).
    append = claimed_task(
        "conc",
        data=_rows("late", 2),
        intervals=["2024-01-01/2024-01-02"],
        context={"useConcurrentLocks": True, "taskLockTimeout": 2000},
    )
    spec = append.spec
    spec["spec"]["ioConfig"]["appendToExisting"] = True
    append.spec = spec
    type(append).objects.filter(id=append.id).update(spec=spec)
    run_task(append.id)
    append.refresh_from_db()
    assert append.status == TaskStatus.SUCCESS, append.error
    # The replace publishes its rows: the append is carried onto its version.
    alloc = services.segments_allocate(task=replace, interval=DAY, count=1, append=False)
    src = Segment.objects.filter(created_by=base).first()
    services.segments_publish(
        task=replace,
        segments=[
            services.NewSegment(
                interval=DAY,
                version=alloc.version,
                partition=0,
                core_partitions=1,
                location=src.location,
                num_rows=src.num_rows,
            )
        ],
    )
    upgraded = Segment.objects.exclude(upgraded_from="")
    assert upgraded.count() == 1 and upgraded[0].version == alloc.version
    assert _visible_pages("conc") == sorted(["base0", "base1", "base2", "late0", "late1"])
    assert not TaskLock.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_kill_task_deletes_unused_segments_rows_and_files_but_keeps_shared_ones(strata_dirs):
    task = services.task_create(spec={}, task_type="index_parallel", datasource="k", enqueue=False)
    assert services.task_claim(task_id=task.id, worker=TEST_WORKER)
    services.lock_acquire(task=task, interval=DAY, timeout_ms=1000)
    alloc = services.segments_allocate(task=task, interval=DAY, count=2, append=False)
    files = []
    for p in alloc.partitions:
        path = Path(strata_dirs.deep) / "k" / "v" / str(p) / "data.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 10)
        files.append(path)
    services.segments_publish(
        task=task,
        segments=[
            services.NewSegment(
                interval=DAY,
                version=alloc.version,
                partition=p,
                core_partitions=2,
                location=str(f),
            )
            for p, f in zip(alloc.partitions, files, strict=True)
        ],
    )
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    services.segments_mark_used(datasource="k", used=False, interval=DAY)
    # one unused segment's file is also used by another (e.g. an upgraded copy)
    Segment.objects.filter(partition=1).update(used=True)
    with transaction.atomic():  # claimed before any worker could see the message
        kill = services.task_submit(
            spec={"type": "kill", "dataSource": "k", "interval": "2024-01-01/2024-01-02"}
        )
        assert services.task_claim(task_id=kill.id, worker="test")
    run_task(kill.id)
    kill.refresh_from_db()
    assert kill.status == TaskStatus.SUCCESS, kill.error
    assert kill.report["segmentsKilled"] == 1
    assert list(Segment.objects.values_list("partition", flat=True)) == [1]
    assert not files[0].exists() and files[1].exists()
    entry = CommitLogEntry.objects.get(kind=CommitKind.KILL)
    assert entry.removed and entry.task_id == kill.id
    assert not TaskLock.objects.exists()


def _append_lock_held(datasource: str) -> None:
    """A claimed appending task of another group holds an APPEND lock on DAY."""
    append = services.task_create(
        spec={"context": {"useConcurrentLocks": True}},
        task_type=locking.INDEX_TASK,
        datasource=datasource,
        enqueue=False,
    )
    assert services.task_claim(task_id=append.id, worker=TEST_WORKER)
    assert services.lock_try_acquire(task=append, interval=DAY, lock_type=locking.APPEND)


def _run_kill(datasource: str, context: dict):
    with transaction.atomic():  # claimed before any worker could see the message
        kill = services.task_submit(
            spec={
                "type": locking.KILL_TASK,
                "dataSource": datasource,
                "interval": str(DAY),
                "context": {"taskLockTimeout": 1500, **context},
            }
        )
        assert services.task_claim(task_id=kill.id, worker="test")
    run_task(kill.id)
    kill.refresh_from_db()
    return kill


@pytest.mark.django_db(transaction=True)
def test_a_kill_with_concurrent_locks_takes_a_replace_lock_beside_an_append(strata_dirs):
    """Druid 30 (apache/druid#16362, KillUnusedSegmentsTask): a kill takes EXCLUSIVE
    locks by default and REPLACE locks when `useConcurrentLocks` is true, the rule
    of `locking.lock_mode`. A REPLACE lock coexists with an APPEND lock; an
    EXCLUSIVE one waits for it (and here times out)."""
    _append_lock_held("kc")
    kill = _run_kill("kc", {"useConcurrentLocks": True})
    assert kill.status == TaskStatus.SUCCESS, kill.error
    assert kill.report["segmentsKilled"] == 0
    exclusive = _run_kill("kc", {})
    assert exclusive.status == TaskStatus.FAILED
    assert "timed out" in exclusive.error and "EXCLUSIVE lock" in exclusive.error
    assert TaskLock.objects.filter(type=locking.APPEND).count() == 1
