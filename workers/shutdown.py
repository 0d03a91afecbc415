"""SIGTERM: a running task is failed deliberately, never left RUNNING.

In a prefork pool process, SIGTERM fails the running task (stopping its Spark
jobs, or killing its slot process) and unwinds it at once. A warm shutdown of
the worker's main process forwards SIGTERM to its pool processes, or, with a
threads pool, fails the tasks running in it. `workers/tasks.py` hooks these to
Celery's signals.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading

from metastore.models import TaskStatus
from workers.heartbeat import worker_name

log = logging.getLogger("workers.tasks")


def on_sigterm(signum, frame) -> None:
    """In a pool process: fail the running task (stopping its Spark jobs) and
    unwind it now, unless it is publishing (then it finishes or fails whole)."""
    from workers.monitor import TaskStopped, running_task_ids, terminate_running_tasks
    from workers.supervisor import supervised_task_ids, terminate_supervised

    supervised = supervised_task_ids()
    if supervised:  # the supervisor stops them (killing their slot process) and returns
        log.warning("SIGTERM: failing %s", supervised)
        terminate_supervised(
            f"worker {worker_name()} received SIGTERM while the task ran; stopped deliberately"
        )
        return
    ids = running_task_ids()
    if not ids:  # idle: stop as the default action would
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    reason = f"worker {worker_name()} received SIGTERM while the task ran; stopped deliberately"
    log.warning("SIGTERM: failing %s", ids)
    if terminate_running_tasks(reason):
        raise TaskStopped(TaskStatus.FAILED, reason)


def install_sigterm_handler() -> None:
    """Handle SIGTERM with `on_sigterm`, only in a prefork pool process: a solo
    or threaded worker's own SIGTERM handling (warm shutdown) stays Celery's."""
    from billiard.process import current_process

    in_pool = current_process().name.startswith("ForkPoolWorker")
    if in_pool and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_sigterm)


def forward_sigterm_to_pool(worker, sig=None) -> None:
    """A warm shutdown (SIGTERM to the main process) would wait for a running
    ingestion however long it takes; tell the pool processes to fail their tasks
    now instead, so nothing is left RUNNING when the supervisor's patience ends."""
    try:
        processes = worker.pool._pool._pool  # billiard's prefork processes
    except AttributeError:
        # A threads (or solo) pool, as `make run` starts: the tasks run in this
        # process; fail them now, and the warm shutdown waits only for them to
        # unwind (a task that is publishing finishes or fails whole).
        from workers.monitor import terminate_running_tasks
        from workers.supervisor import terminate_supervised

        reason = (
            f"worker {worker_name()} received {sig or 'a warm shutdown'} while the task "
            "ran; stopped deliberately"
        )
        terminate_running_tasks(reason)
        terminate_supervised(reason)
        return
    for process in list(processes):
        pid = getattr(process, "pid", None)
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
