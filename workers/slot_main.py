"""The body of a slot process (`workers.slots`): start the driver JVM once, then
run the tasks the supervisor hands over, one at a time, through the same runner
a shared-session worker uses.

    python -m workers.slot_main <fd of the supervisor's socket>

It exits when the supervisor goes away (its socket closes, or its parent
changes), after a task whose driver JVM died, and when its driver cannot start
(it says why first: {"failed": the first error lines of the driver's output}):
a fresh process replaces it. On a cluster, a task whose own application cannot
start fails with the cause, and the process stays for the next task.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger("workers.runner")


def _watch_parent(parent: int) -> None:
    """Exit (taking the JVM along) when the worker that started us is gone."""
    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            _end_driver()
            os._exit(0)


def _end_driver() -> None:
    from workers.spark import driver_process

    proc = driver_process()
    if proc is not None and proc.poll() is None:
        proc.kill()


@contextlib.contextmanager
def _output_to(path: str | None) -> Iterator[None]:
    """Point this process's stdout and stderr at `path` while the block runs: a
    JVM started meanwhile writes there (the supervisor copies each task's part
    into its log), while this process's own lines go where they went."""
    if not path:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in zip((1, 2), saved, strict=True):
            os.dup2(original, fd)
            os.close(original)
        os.close(target)


def on_cluster() -> bool:
    """The slot drivers' master is a cluster's (not `local`): each task is an
    application of its own there, named by the task."""
    from django.conf import settings

    return not settings.STRATA_SLOT_SPARK_MASTER.startswith("local")


def _session_options() -> dict:
    from django.conf import settings

    from workers.slots import SLOT_JAVA_OPTIONS

    return {
        "master": settings.STRATA_SLOT_SPARK_MASTER,
        "driver_memory": settings.STRATA_TASK_DRIVER_MEMORY,
        "java_options": SLOT_JAVA_OPTIONS,
    }


def app_name(task_id: str) -> str:
    """The name of a task's application on a cluster's master (its UI lists it)."""
    return f"strata task {task_id}"


def _start_driver() -> int:
    """Start the driver JVM, its output to STRATA_SLOT_JVM_LOG; on a local
    master, with its session warm (one tiny job run); its pid."""
    import pyspark.sql  # noqa: F401 - its import warnings stay in this process's log

    from workers.spark import driver_process, get_spark, start_gateway

    options = _session_options()
    with _output_to(os.environ.get("STRATA_SLOT_JVM_LOG")):
        if on_cluster():
            start_gateway(**options)
        else:
            get_spark(**options, scheduler_mode="FIFO").range(1).count()
    return driver_process().pid


def _start_application(task_id: str) -> str:
    """On a cluster, start the task's own application on the warm JVM; why it
    failed to start ("" if it started, or on a local master: the warm session)."""
    from workers import slots
    from workers.spark import get_spark

    if not on_cluster():
        return ""
    try:
        get_spark(**_session_options(), scheduler_mode="FIFO", app_name=app_name(task_id))
    except Exception as exc:  # noqa: BLE001 - any cause: the task fails with it
        log.exception("task %s's Spark application failed to start", task_id)
        path = os.environ.get("STRATA_SLOT_JVM_LOG")
        return slots.start_failure(
            "the task's Spark application", exc, Path(path) if path else None, slots.TASK_LOG_START
        )
    return ""


def _stop_application(task_id: str) -> None:
    """On a cluster, stop the task's application (its executors released, and
    what was derived from its session, `workers.spark.on_stop`)."""
    from workers.spark import stop_spark

    if not on_cluster():
        return
    try:
        stop_spark()
    except Exception:  # a dead driver: the supervisor replaces this process
        log.warning("stopping task %s's application failed", task_id, exc_info=True)


def _fail_unstarted(task_id: str, reason: str) -> None:
    """End a task whose application never started: nothing of it ran (no lock,
    no file), so only its status and error are recorded."""
    from metastore import services
    from metastore.models import TaskStatus
    from workers.steps import retrying_db

    try:
        retrying_db(
            lambda: services.task_finish(task_id=task_id, status=TaskStatus.FAILED, error=reason)
        )
    except Exception:
        log.exception("could not record the end of %s", task_id)


def _run(task_id: str) -> None:
    from metastore.task_logs import task_log_capture
    from workers import slots
    from workers.runner import run_task

    path = os.environ.get("STRATA_SLOT_JVM_LOG")
    slots.TASK_LOG_START = slots.log_size(Path(path) if path else None)
    with task_log_capture(task_id):
        log.info("task %s runs in slot process %s", task_id, os.getpid())
        failed = _start_application(task_id)
        if failed:
            _fail_unstarted(task_id, failed)
            return
        try:
            run_task(task_id)
        finally:
            _stop_application(task_id)


def _started_driver(conn: socket.socket) -> bool:
    """Start the driver and say so on `conn`: {"ready": its pid}, or {"failed":
    why} (the first error lines of its output) when it could not start."""
    from workers import slots

    try:
        pid = _start_driver()
    except Exception as exc:  # noqa: BLE001 - any cause: said, then this process exits
        log.exception("the slot's Spark driver failed to start")
        path = os.environ.get("STRATA_SLOT_JVM_LOG")
        reason = slots.start_failure("Spark driver", exc, Path(path) if path else None)
        conn.sendall(json.dumps({"failed": reason}).encode() + b"\n")
        return False
    conn.sendall(json.dumps({"ready": pid}).encode() + b"\n")
    return True


def main(fd: int) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    django.setup()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    conn = socket.socket(fileno=fd)
    if not _started_driver(conn):
        _end_driver()
        sys.exit(1)
    reader = conn.makefile("rb")
    from workers.spark import driver_process

    for line in reader:
        task_id = json.loads(line)["run"]
        _run(task_id)
        driver = driver_process()
        exited = driver is not None and driver.poll() is not None
        conn.sendall(json.dumps({"done": task_id, "driver_exited": exited}).encode() + b"\n")
        if exited:  # a dead driver cannot run the next task: a fresh process will
            break
    _end_driver()


if __name__ == "__main__":
    main(int(sys.argv[1]))
