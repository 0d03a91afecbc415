"""Celery's entry points, and nothing else: the tasks (found by their names,
`workers.tasks.<name>`, which beat's schedule and `RUN_TASK` use) and the signal
hookups that start and stop the background duties in the worker and beat
processes. Tasks take ids, claim work once and call the module that does it.

Each background duty is a module of its own: the worker heartbeat
(`heartbeat.py`), SIGTERM handling (`shutdown.py`), the task reaper
(`reaper.py`), what the broker holds (`broker_queue.py`), the intermediary
janitor (`janitor.py`) and the Coordinator's duties (`compaction_duty.py`,
`retention_duty.py`, `history_duty.py`, `kill_duty.py`).
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.signals import (
    beat_init,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)
from django.conf import settings

from metastore import services
from metastore.models import Task
from workers import heartbeat, reaper, shutdown
from workers.heartbeat import worker_name

log = logging.getLogger(__name__)


@shared_task(name="workers.tasks.run_task", acks_late=True, reject_on_worker_lost=True)
def run_task(task_id: str) -> None:
    """Run one Strata task. A redelivered message finds it claimed and does nothing."""
    if not services.task_claim(task_id=task_id, worker=worker_name()):
        log.info("task %s is not PENDING (already claimed, canceled or unknown): skipping", task_id)
        return
    from metastore.task_logs import task_log_capture
    from workers.runner import run_task as run

    shutdown.install_sigterm_handler()
    with task_log_capture(task_id):
        log.info("task %s runs on %s", task_id, worker_name())
        if settings.STRATA_TASK_ISOLATION == "process":
            from workers.supervisor import run_in_slot

            run_in_slot(task_id)  # in a slot process of its own, killed if it must stop
        else:
            run(task_id)  # records any outcome on the task; only a process exit escapes
        ended = Task.objects.filter(id=task_id).values_list("status", "error").first()
        if ended:
            log.info("task %s ended %s%s", task_id, ended[0], f": {ended[1]}" if ended[1] else "")


# --- signal hookups: what this process started (its worker, heartbeat, beat's threads)

_pool_holder: dict = {}


@worker_init.connect
def _remember_worker(sender=None, **_kwargs) -> None:
    _pool_holder["worker"] = sender


@worker_process_init.connect
def _install_sigterm_handler(**_kwargs) -> None:
    shutdown.install_sigterm_handler()  # also called before each run


@worker_ready.connect
def _start_worker_beat(sender=None, **_kwargs) -> None:
    worker = _pool_holder.get("worker")
    if worker is None or "beat" in _pool_holder:
        return
    _pool_holder["beat"] = heartbeat.start_worker_beat(worker)


@worker_shutdown.connect
def _end_worker_beat(sender=None, **_kwargs) -> None:
    heartbeat.end_worker_beat(_pool_holder.pop("beat", None))


@worker_shutting_down.connect
def _forward_sigterm_to_pool(sig=None, how=None, **_kwargs) -> None:
    shutdown.forward_sigterm_to_pool(_pool_holder.get("worker"), sig)


@beat_init.connect
def _start_reaper(sender=None, **_kwargs) -> None:
    if "reaper" not in _pool_holder:
        _pool_holder["reaper"] = reaper.start_reaper()


@beat_init.connect
def _start_compaction_duty(sender=None, **_kwargs) -> None:
    from workers.compaction_duty import CompactionDutyThread

    if "compaction" not in _pool_holder:
        duty = _pool_holder["compaction"] = CompactionDutyThread()
        duty.thread.start()


# --- the background duties' entry points (beat schedules some: console/settings.py) ------


@shared_task(name="workers.tasks.compaction_duty", ignore_result=True)
def compaction_duty() -> dict[str, list[str]]:
    """One run of the auto-compaction duty (the beat process runs it periodically
    by itself; this entry point runs it once, on a worker, when asked)."""
    from workers.compaction_duty import run_once

    return run_once()


@shared_task(name="workers.tasks.task_reaper", ignore_result=True)
def task_reaper() -> list[str]:
    """One reaper round on a worker, if asked (`workers/reaper.py`; the beat
    process runs it by itself every STRATA_REAPER_SECONDS)."""
    return reaper.reap()


@shared_task(name="workers.tasks.intermediary_janitor")
def intermediary_janitor() -> list[str]:
    """One round of the intermediary janitor (`workers/janitor.py`); beat
    schedules it every minute."""
    from workers.janitor import run_janitor

    return run_janitor()


@shared_task(name="workers.tasks.retention_duty", ignore_result=True)
def retention_duty() -> dict:
    """Druid's retention rules over every dataSource (workers/retention_duty.py)."""
    from workers.retention_duty import run_retention_duty

    return run_retention_duty()


@shared_task(name="workers.tasks.history_duty", ignore_result=True)
def history_duty() -> dict:
    """History retention: overshadowed segments past the time-travel window go unused."""
    from workers.history_duty import run_history_duty

    return run_history_duty()


@shared_task(name="workers.tasks.kill_duty", ignore_result=True)
def kill_duty() -> dict:
    """Druid's auto-kill (druid.coordinator.kill.*; off unless STRATA_KILL_ON)."""
    from workers.kill_duty import run_kill_duty

    return run_kill_duty()
