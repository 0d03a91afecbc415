"""The intermediary janitor: it removes the intermediary directories of tasks that
no longer run once they sat idle past STRATA_INTERMEDIARY_EXPIRY, and fails
tasks whose worker stopped heartbeating (releasing their locks). Time passing
is simulated by backdating heartbeats and file times."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from metastore import services
from metastore.intervals import Interval
from metastore.models import Task, TaskLock, TaskStatus
from workers.janitor import run_janitor

pytestmark = pytest.mark.django_db

EXPIRY_S = 60


@pytest.fixture(autouse=True)
def intermediary(settings, tmp_path) -> Path:
    """This test's own intermediary root (other tests' leftovers are not its business)."""
    settings.STRATA_INTERMEDIARY_EXPIRY = EXPIRY_S
    settings.STRATA_INTERMEDIARY_DIR = tmp_path / "intermediary"
    return settings.STRATA_INTERMEDIARY_DIR


def partials(intermediary: Path, name: str, *, idle_s: float = 0) -> Path:
    """An intermediary directory with a partial file, last touched `idle_s` ago."""
    root = intermediary / name
    part = root / "20240101T000000.000Z_20240102T000000.000Z" / "0"
    part.mkdir(parents=True, exist_ok=True)
    data = part / "part-00000.parquet"
    data.write_bytes(b"PAR1")
    when = time.time() - idle_s
    for path in (data, part, part.parent, root):
        os.utime(path, (when, when))
    return root


def silent_for(task: Task, seconds: float) -> None:
    """As if the task's worker last heartbeat `seconds` ago."""
    Task.objects.filter(id=task.id).update(heartbeat_at=timezone.now() - timedelta(seconds=seconds))


def test_directories_of_running_tasks_are_kept_however_old(claimed_task, intermediary):
    task = claimed_task("kept")
    root = partials(intermediary, task.id, idle_s=10 * EXPIRY_S)

    assert run_janitor() == []
    assert root.exists()
    assert Task.objects.get(id=task.id).status == TaskStatus.RUNNING


def test_directories_of_ended_tasks_go_once_idle_past_the_expiry(claimed_task, intermediary):
    task = claimed_task("ended")
    services.task_finish(task_id=task.id, status=TaskStatus.FAILED, error="failed in a test")
    recent = partials(intermediary, task.id, idle_s=EXPIRY_S / 2)

    assert run_janitor() == []
    assert recent.exists()

    partials(intermediary, task.id, idle_s=2 * EXPIRY_S)
    assert run_janitor() == [task.id]
    assert not recent.exists()


def test_directories_of_unknown_tasks_go_and_stray_files_stay(intermediary):
    root = partials(
        intermediary, "index_parallel_gone_2020-01-01T00:00:00.000Z_0", idle_s=2 * EXPIRY_S
    )
    stray = intermediary / "README"
    stray.write_text("not a task directory")

    assert run_janitor() == [root.name]
    assert not root.exists() and stray.exists()
    stray.unlink()


def test_tasks_whose_worker_stopped_heartbeating_fail_and_release_their_locks(
    claimed_task, intermediary
):
    running = claimed_task("stale")
    services.lock_acquire(task=running, interval=Interval.parse("2024-01-01/2024-01-02"))
    root = partials(intermediary, running.id, idle_s=2 * EXPIRY_S)
    alive = claimed_task("alive")

    silent_for(running, 2 * EXPIRY_S)
    removed = run_janitor()

    running = Task.objects.get(id=running.id)
    assert running.status == TaskStatus.FAILED
    assert "stopped heartbeating" in running.error and "pytest" in running.error
    assert not TaskLock.objects.filter(task=running).exists()
    assert removed == [running.id] and not root.exists()
    assert Task.objects.get(id=alive.id).status == TaskStatus.RUNNING


def test_a_waiting_task_whose_worker_died_stops_waiting(claimed_task):
    holder = claimed_task("queue")
    day = Interval.parse("2024-01-01/2024-01-02")
    services.lock_acquire(task=holder, interval=day)
    waiter = claimed_task("queue")
    with pytest.raises(services.LockTimeout):
        services.lock_acquire(task=waiter, interval=day, timeout_ms=0)
    Task.objects.filter(id=waiter.id).update(status=TaskStatus.WAITING)  # as while it waited

    silent_for(waiter, 2 * EXPIRY_S)
    run_janitor()

    assert Task.objects.get(id=waiter.id).status == TaskStatus.FAILED
    assert Task.objects.get(id=holder.id).status == TaskStatus.RUNNING


def test_queued_tasks_are_not_failed_for_lack_of_heartbeat(inline_spec, no_enqueue):
    task = services.task_submit(spec=inline_spec("queued"))
    Task.objects.filter(id=task.id).update(created_at=timezone.now() - timedelta(hours=1))

    run_janitor()

    assert Task.objects.get(id=task.id).status == TaskStatus.PENDING


DAY = Interval.parse("2024-01-01/2024-01-02")


def written(task: Task, count: int) -> list[Path]:
    """Lock DAY, allocate `count` segments and write their files into deep storage,
    as the runner does just before it publishes."""
    from workers.paths import deep_storage_dir

    services.lock_acquire(task=task, interval=DAY)
    alloc = services.segments_allocate(task=task, interval=DAY, count=count, append=False)
    folders = []
    for partition in alloc.partitions:
        folder = deep_storage_dir(task.datasource, DAY, alloc.version, partition)
        folder.mkdir(parents=True)
        (folder / "data.parquet").write_bytes(b"PAR1")
        folders.append(folder)
    return folders


def ended(task: Task, status: str, seconds_ago: float) -> None:
    services.task_finish(task_id=task.id, status=status, error="" if status == "SUCCESS" else "x")
    Task.objects.filter(id=task.id).update(ended_at=timezone.now() - timedelta(seconds=seconds_ago))


def test_files_a_killed_worker_wrote_but_never_published_leave_deep_storage(
    claimed_task, settings, tmp_path
):
    settings.STRATA_DEEP_STORAGE = tmp_path / "deep"
    published = claimed_task("orphans")
    kept = written(published, 1)
    services.segments_publish(
        task=published,
        segments=[
            services.NewSegment(
                interval=DAY,
                version=Task.objects.get(id=published.id).locks.get().version,
                partition=0,
                core_partitions=1,
                location=str(kept[0] / "data.parquet"),
                num_rows=1,
            )
        ],
    )
    ended(published, TaskStatus.SUCCESS, 2 * EXPIRY_S)
    killed = claimed_task("orphans")
    orphans = written(killed, 2)
    ended(killed, TaskStatus.FAILED, 2 * EXPIRY_S)  # as the janitor fails a silent worker
    recent = claimed_task("orphans")
    fresh = written(recent, 1)
    ended(recent, TaskStatus.FAILED, EXPIRY_S / 2)
    running = claimed_task("orphans2")
    in_flight = written(running, 1)

    run_janitor()

    assert not any(folder.exists() for folder in orphans)
    assert kept[0].exists()  # published
    assert fresh[0].exists()  # ended, but not yet past the expiry
    assert in_flight[0].exists()  # still running


def test_an_unpublished_folder_a_segment_still_points_into_is_kept(
    claimed_task, settings, tmp_path
):
    settings.STRATA_DEEP_STORAGE = tmp_path / "deep"
    killed = claimed_task("shared")
    (folder,) = written(killed, 1)
    ended(killed, TaskStatus.FAILED, 2 * EXPIRY_S)
    other = claimed_task("shared")
    services.lock_acquire(task=other, interval=DAY)
    alloc = services.segments_allocate(task=other, interval=DAY, count=1, append=False)
    services.segments_publish(
        task=other,
        segments=[
            services.NewSegment(
                interval=DAY,
                version=alloc.version,
                partition=0,
                core_partitions=1,
                location=str(folder / "data.parquet"),  # e.g. an upgraded copy's file
                num_rows=1,
            )
        ],
    )

    run_janitor()

    assert folder.exists()
