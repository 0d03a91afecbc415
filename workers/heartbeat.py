"""The worker's own heartbeat: its capacity, for the task slots view.

The worker's main process registers itself and its task slots
(`services.worker_heartbeat`) every STRATA_HEARTBEAT_SECONDS from a thread, and
removes itself when it shuts down, so the slots shown are the live ones. With
process isolation it also starts its slot processes when it is ready and stops
them when it shuts down. `workers/tasks.py` hooks these to Celery's signals.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from django.conf import settings

from metastore import services

log = logging.getLogger("workers.tasks")


def worker_name() -> str:
    """This process as a task's worker and the worker heartbeat name it: host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


class WorkerBeat:
    """Registers this worker and its task slots (`services.worker_heartbeat`)
    every STRATA_HEARTBEAT_SECONDS from a thread of its main process, and
    removes it when the worker shuts down: the slots shown are the live ones."""

    def __init__(self, worker) -> None:
        self.worker = worker
        self.name = worker_name()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="strata-worker-beat", daemon=True)

    def describe(self) -> dict:
        """What the heartbeat registers: name, capacity, node, queues, pool processes."""
        worker = self.worker
        host = socket.gethostname()
        try:
            pids = [p.pid for p in worker.pool._pool._pool if getattr(p, "pid", None)]
        except AttributeError:  # a thread (or solo) pool runs tasks in this process
            pids = []
        try:
            queues = list(worker.app.amqp.queues.consume_from)
        except AttributeError:
            queues = []
        return {
            "name": self.name,
            "capacity": max(1, int(worker.concurrency or 1)),
            "nodename": worker.hostname or "",
            "queues": queues,
            "processes": [f"{host}:{pid}" for pid in pids],
        }

    def _run(self) -> None:
        from django.db import connection

        try:
            while not self.stop.is_set():
                try:
                    services.worker_heartbeat(**self.describe())
                except Exception:  # the next beat tries again
                    log.exception("worker heartbeat of %s failed", self.name)
                    connection.close()
                self.stop.wait(settings.STRATA_HEARTBEAT_SECONDS)
        finally:
            connection.close()

    def end(self) -> None:
        """Stop beating and deregister the worker."""
        from django.db import connection

        self.stop.set()
        self.thread.join(timeout=10)
        try:
            services.worker_stopped(name=self.name)
        except Exception:  # it expires with its heartbeat anyway
            log.exception("could not deregister worker %s", self.name)
        finally:
            connection.close()


def start_worker_beat(worker) -> WorkerBeat:
    """The worker is ready: start beating for it, and start its slot processes."""
    beat = WorkerBeat(worker)
    beat.thread.start()
    prestart_slots(worker)
    return beat


def end_worker_beat(beat: WorkerBeat | None) -> None:
    """The worker shuts down: deregister it, and stop its idle slot processes."""
    if beat is not None:
        beat.end()
    if settings.STRATA_TASK_ISOLATION == "process":
        from workers.slots import POOL

        POOL.stop()  # the idle slot processes and their drivers


def prestart_slots(worker) -> None:
    """A threads-pool worker starts one slot process per slot at once, so its
    first tasks find warm drivers (a prefork child starts its own on demand)."""
    if settings.STRATA_TASK_ISOLATION != "process":
        return
    try:
        worker.pool._pool._pool  # noqa: B018 - prefork: no slot processes here
        return
    except AttributeError:
        pass
    from workers.slots import POOL

    POOL.prestart(max(1, int(worker.concurrency or 1)))
