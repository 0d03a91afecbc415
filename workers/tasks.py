"""Celery tasks: interfaces that take ids, claim work once, and call the runner."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

from celery import shared_task
from celery.signals import worker_init, worker_process_init, worker_shutting_down
from django.conf import settings
from django.utils import timezone

from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import Task, TaskStatus

log = logging.getLogger(__name__)


@shared_task(name="workers.tasks.run_task", acks_late=True, reject_on_worker_lost=True)
def run_task(task_id: str) -> None:
    """Run one Strata task. A redelivered message finds it claimed and does nothing."""
    if not services.task_claim(task_id=task_id, worker=f"{socket.gethostname()}:{os.getpid()}"):
        log.info("task %s is not PENDING (already claimed, canceled or unknown): skipping", task_id)
        return
    from workers.runner import run_task as run

    _install_sigterm_handler()
    run(task_id)


def _worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# --- SIGTERM: a running task is failed deliberately, never left RUNNING ---------------


def _on_sigterm(signum, frame) -> None:
    """In a pool process: fail the running task (stopping its Spark jobs) and
    unwind it now, unless it is publishing (then it finishes or fails whole)."""
    from workers.runner import TaskStopped, running_task_ids, terminate_running_tasks

    ids = running_task_ids()
    if not ids:  # idle: stop as the default action would
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    reason = f"worker {_worker_name()} received SIGTERM while the task ran; stopped deliberately"
    log.warning("SIGTERM: failing %s", ids)
    if terminate_running_tasks(reason):
        raise TaskStopped(TaskStatus.FAILED, reason)


@worker_process_init.connect
def _install_sigterm_handler(**_kwargs) -> None:
    # Also called before each run. Only in a prefork pool process: a solo or
    # threaded worker's own SIGTERM handling (warm shutdown) stays Celery's.
    from billiard.process import current_process

    in_pool = current_process().name.startswith("ForkPoolWorker")
    if in_pool and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


_pool_holder: dict = {}


@worker_init.connect
def _remember_worker(sender=None, **_kwargs) -> None:
    _pool_holder["worker"] = sender


@worker_shutting_down.connect
def _forward_sigterm_to_pool(sig=None, how=None, **_kwargs) -> None:
    """A warm shutdown (SIGTERM to the main process) would wait for a running
    ingestion however long it takes; tell the pool processes to fail their tasks
    now instead, so nothing is left RUNNING when the supervisor's patience ends."""
    worker = _pool_holder.get("worker")
    try:
        processes = worker.pool._pool._pool  # billiard's prefork processes
    except AttributeError:
        return
    for process in list(processes):
        pid = getattr(process, "pid", None)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)


@shared_task(name="workers.tasks.task_reaper", ignore_result=True)
def task_reaper() -> list[str]:
    """Fail every RUNNING/WAITING task whose heartbeat is older than
    STRATA_HEARTBEAT_TIMEOUT (its worker died: SIGKILL, OOM, a lost machine),
    releasing its locks and removing its intermediary data and the deep-storage
    files it never published, at once. Runs every STRATA_REAPER_SECONDS."""
    timeout = max(settings.STRATA_HEARTBEAT_TIMEOUT, 5 * settings.STRATA_HEARTBEAT_SECONDS)
    reaped, _ = reap_dead_tasks(older_than=timezone.now() - timedelta(seconds=timeout))
    return reaped


def reap_dead_tasks(*, older_than) -> tuple[list[str], list[str]]:
    """Fail the tasks silent since before `older_than`; return their ids and the
    ids whose intermediary directory was removed."""
    from workers.runner import deep_storage_dir, intermediary_dir

    reaped, removed_dirs = [], []
    started = timezone.now() - timedelta(seconds=1)
    for task in selectors.stale_active_tasks(older_than=older_than):
        silent = (timezone.now() - (task.heartbeat_at or task.created_at)).total_seconds()
        services.task_finish(
            task_id=task.id,
            status=TaskStatus.FAILED,
            error=(
                f"worker {task.worker or '?'} stopped heartbeating {silent:.0f} s ago "
                "(lost or killed); the task was failed and its locks released"
            ),
        )
        reaped.append(task.id)
        try:
            work_dir = intermediary_dir(task.id)
        except ValueError:  # an id that is no directory name has no directory
            work_dir = None
        if work_dir is not None and work_dir.exists():
            shutil.rmtree(work_dir, ignore_errors=True)
            removed_dirs.append(task.id)
        deep = Path(settings.STRATA_DEEP_STORAGE).resolve()
        mine = [
            pending
            for pending in selectors.unpublished_allocations(
                ended_after=started, ended_before=timezone.now() + timedelta(seconds=1)
            )
            if pending.task_id == task.id
        ]
        for pending in mine:
            folder = deep_storage_dir(
                pending.datasource,
                Interval(pending.start, pending.end),
                pending.version,
                pending.partition,
            ).resolve()
            if (
                deep in folder.parents
                and folder.exists()
                and not selectors.locations_under(directory=str(folder))
            ):
                shutil.rmtree(folder, ignore_errors=True)
    if reaped:
        log.warning("reaper failed tasks whose worker stopped heartbeating: %s", reaped)
    return reaped, removed_dirs


@shared_task(name="workers.tasks.intermediary_janitor")
def intermediary_janitor() -> list[str]:
    """Remove intermediary directories of tasks that no longer run and sat idle
    past STRATA_INTERMEDIARY_EXPIRY, and deep-storage folders of segments ended
    tasks never published; fail tasks whose worker stopped heartbeating."""
    expiry = settings.STRATA_INTERMEDIARY_EXPIRY
    # The reaper does this within seconds; here too, in case beat ran without it.
    timeout = max(settings.STRATA_HEARTBEAT_TIMEOUT, 5 * settings.STRATA_HEARTBEAT_SECONDS)
    _, removed = reap_dead_tasks(older_than=timezone.now() - timedelta(seconds=timeout))
    _remove_unpublished_files(ended_before=timezone.now() - timedelta(seconds=expiry))
    root = settings.STRATA_INTERMEDIARY_DIR
    if not root.exists():
        return removed
    now = time.time()
    running = set(
        Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING)).values_list(
            "id", flat=True
        )
    )
    for entry in root.iterdir():
        if not entry.is_dir() or entry.name in running:
            continue
        newest = max((p.stat().st_mtime for p in entry.rglob("*")), default=entry.stat().st_mtime)
        if now - newest >= expiry:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
    if removed:
        log.info("janitor removed intermediary data of %s", removed)
    return removed


# Tasks that ended longer ago than this were looked at by earlier janitor runs.
UNPUBLISHED_LOOKBACK = timedelta(days=7)


def _remove_unpublished_files(*, ended_before) -> list[str]:
    """Remove the deep-storage folders of segment ids that tasks which ended (past
    the expiry) never published: a worker killed between moving a segment into
    deep storage and publishing it leaves the file behind. Partition numbers are
    never reused, so such a folder belongs to nobody else; a folder a segment's
    location still points into is kept all the same."""
    from workers.runner import deep_storage_dir

    deep = Path(settings.STRATA_DEEP_STORAGE).resolve()
    removed = []
    for pending in selectors.unpublished_allocations(
        ended_after=ended_before - UNPUBLISHED_LOOKBACK, ended_before=ended_before
    ):
        folder = deep_storage_dir(
            pending.datasource,
            Interval(pending.start, pending.end),
            pending.version,
            pending.partition,
        ).resolve()
        if deep not in folder.parents or not folder.exists():
            continue
        if selectors.locations_under(directory=str(folder)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    if removed:
        log.info("janitor removed %d unpublished segment folders: %s", len(removed), removed)
    return removed
