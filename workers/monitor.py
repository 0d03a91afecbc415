"""A running task's monitor: heartbeats, cancel and revocation, progress, and
stopping its Spark jobs.

Each task that runs in this process has a `Monitor` whose side thread beats the
task's heartbeat and watches for a cancel, a revoked lock or a lost lease; on
any, it cancels the task's Spark jobs (by job group) and records why.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass, field

from django.db import connection

from metastore import services
from metastore.models import TaskStatus
from workers.jobs.ingest import Progress
from workers.paths import intermediary_dir

log = logging.getLogger("workers.runner")


class TaskStopped(Exception):
    """The task was canceled or preempted while running."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(eq=False)  # hashable by identity: kept in _MONITORS
class Monitor:
    """Heartbeats the task and watches for cancel/revocation from a side thread.

    On either it cancels the task's Spark jobs (by job group) so the main thread
    stops within about one heartbeat. A phase change is recorded at once; the
    progress inside a phase is the fraction the job reports, or else the share
    of finished tasks among the Spark jobs the phase started.
    """

    task_id: str
    interval_s: float = 1.0
    phase: str = "starting"
    base_progress: float = 0.0
    span: float = 0.0
    stop_status: str | None = None
    stop_reason: str = ""
    _fraction: float | None = None
    _jobs_before: frozenset[int] = frozenset()
    _stop: threading.Event = field(default_factory=threading.Event)
    _wake: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def terminate(self, reason: str) -> None:
        """Stop the task from outside (SIGTERM): fail it, stop its Spark jobs."""
        if not self.stop_status:
            self.stop_status = TaskStatus.FAILED
            self.stop_reason = reason
        self._wake.set()

    @property
    def interruptible(self) -> bool:
        """False once publishing began: the publish must run or not, never half."""
        return self.phase != "publishing"

    def start(self) -> None:
        _MONITORS.add(self)
        self._thread = threading.Thread(
            target=self._run, name=f"monitor-{self.task_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop beating, after recording the last phase and progress."""
        _MONITORS.discard(self)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        try:
            services.task_heartbeat(
                task_id=self.task_id, phase=self.phase, progress=self.progress()
            )
        except Exception:  # the task's end is recorded next; this is best effort
            log.exception("last heartbeat of %s failed", self.task_id)

    def set_phase(self, phase: str, base: float, span: float) -> None:
        log.info("phase %s", phase)  # into the task's log (metastore.task_logs)
        self.phase, self.base_progress, self.span = phase, base, span
        self._fraction = None
        self._jobs_before = frozenset(self._group_jobs())
        self._wake.set()  # record the new phase now, not at the next beat
        self.check()

    def set_fraction(self, fraction: float) -> None:
        self._fraction = max(0.0, min(1.0, fraction))
        self.check()

    def check(self) -> None:
        if self.stop_status:
            raise TaskStopped(self.stop_status, self.stop_reason)

    def progress(self) -> float:
        fraction = self._fraction if self._fraction is not None else self._spark_fraction()
        return self.base_progress + self.span * fraction

    def _group_jobs(self) -> list[int]:
        try:
            return _group_job_ids(self.task_id)
        except Exception:  # progress is best effort
            return []

    def _spark_fraction(self) -> float:
        try:
            from workers import spark as spark_mod

            session = spark_mod._session
            if session is None:
                return 0.0
            tracker = session.sparkContext.statusTracker()
            done = total = 0
            for job_id in self._group_jobs():
                if job_id in self._jobs_before:
                    continue
                job = tracker.getJobInfo(job_id)
                if job is None:
                    continue
                for stage_id in job.stageIds:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
                        total += stage.numTasks
            return done / total if total else 0.0
        except Exception:  # progress is best effort; never let it kill the task
            return 0.0

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.clear()
                try:
                    signals = services.task_heartbeat(
                        task_id=self.task_id, phase=self.phase, progress=self.progress()
                    )
                except Exception:
                    log.exception("heartbeat of %s failed", self.task_id)
                    signals = services.TaskSignals()
                if not self.stop_status:
                    if signals.ended_reason:
                        # Failed elsewhere (the reaper, while this worker was
                        # unreachable): stop Spark, publish nothing, keep its reason.
                        self.stop_status = TaskStatus.FAILED
                        self.stop_reason = signals.ended_reason
                    elif signals.revoked_reason:
                        self.stop_status = TaskStatus.FAILED
                        self.stop_reason = f"preempted: {signals.revoked_reason}"
                    elif signals.cancel_requested:
                        self.stop_status = TaskStatus.CANCELED
                        self.stop_reason = "canceled on request"
                if self.stop_status:
                    # Every heartbeat, not once: a job started after the first
                    # cancel (e.g. while the JVM was still booting) is stopped too.
                    cancel_spark(self.task_id)
                self._wake.wait(self.interval_s)
        finally:
            connection.close()


# The monitors of the tasks running in this process (one, in a prefork child).
_MONITORS: set[Monitor] = set()


def terminate_running_tasks(reason: str) -> bool:
    """Fail every task running in this process (called on SIGTERM). True if the
    caller may interrupt the main thread (no task is publishing)."""
    monitors = list(_MONITORS)
    for monitor in monitors:
        monitor.terminate(reason)
        try:
            cancel_spark(monitor.task_id)
        except Exception:  # the monitor thread retries at its next beat
            log.exception("could not cancel the Spark jobs of %s", monitor.task_id)
    return bool(monitors) and all(m.interruptible for m in monitors)


def running_task_ids() -> list[str]:
    return [m.task_id for m in _MONITORS]


class TaskProgress(Progress):
    """The job's progress reports, mapped onto the task's phase and progress."""

    def __init__(self, monitor: Monitor, spans: dict[str, tuple[float, float]]) -> None:
        self.monitor = monitor
        self.spans = spans

    def phase(self, name: str) -> None:
        base, span = self.spans[name]
        self.monitor.set_phase(name, base, span)

    def fraction(self, done: float) -> None:
        self.monitor.set_fraction(done)


def cancel_spark(group: str) -> None:
    from workers import spark as spark_mod

    if spark_mod._session is not None:
        sc = spark_mod._session.sparkContext
        sc.cancelJobGroup(group)
        sc.cancelJobsWithTag(group)


def _group_job_ids(group: str) -> list[int]:
    """Ids of the Spark jobs run under a task's job group (none without a session)."""
    from workers import spark as spark_mod

    session = spark_mod._session
    if session is None:
        return []
    return list(session.sparkContext.statusTracker().getJobIdsForGroup(group))


def clean_up(task_id: str, timeout_s: float = 60.0) -> None:
    """Stop the task's Spark jobs, wait until none is running (a cancelled job's
    tasks may still be writing), then remove its intermediary directory."""
    from workers import spark as spark_mod

    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            job_ids = _group_job_ids(task_id)
            if not job_ids:
                break
            tracker = spark_mod._session.sparkContext.statusTracker()
            running = [
                job_id
                for job_id in job_ids
                if (info := tracker.getJobInfo(job_id)) is not None and info.status == "RUNNING"
            ]
            if not running:
                break
            cancel_spark(task_id)
            time.sleep(0.2)
    except Exception:  # a driver that died runs no job: nothing to wait for
        log.warning("could not ask Spark about the jobs of %s", task_id, exc_info=True)
    shutil.rmtree(intermediary_dir(task_id), ignore_errors=True)
