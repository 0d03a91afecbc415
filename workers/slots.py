"""Task slots as processes: each slot of a worker is a child process keeping a
warm SparkSession (its own driver JVM), and a task runs in it (`workers.slot_main`).

The Celery thread that claimed the task supervises it from outside: it beats the
task's heartbeat, and on a cancel, a shutdown, a revoked lock or a task ended
elsewhere it lets the task stop by itself for STRATA_TASK_STOP_GRACE_SECONDS
(its monitor cancels its Spark jobs), then kills the slot process and its JVM
(SIGTERM, then SIGKILL), and ends the task as the reaper would: locks released,
intermediary and unpublished files removed. Nothing else shares that process,
so a task stuck in Catalyst's planner, a driver-side collect or a Python step
stops as surely as one in a Spark job, and a task whose driver runs out of
memory or crashes fails alone. A killed or crashed slot process is replaced by
a fresh one, which starts its JVM at once so the slot is warm for its next task.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

# The driver JVM of a slot process: few collector threads (two drivers share the
# machine's cores), and an OutOfMemoryError ends the JVM at once, so a task that
# exhausts its driver's heap fails alone and says so, instead of leaving a
# half-broken driver behind for the next task. Only the quick C1 JIT compiler:
# each slot's JVM compiles the same code for itself, and C2's compiling cost
# more than its faster code gave back (bench/task_slots.py, slots+c1: the pair
# 0.81x the shared session's instead of 1.04x, and the first rounds after the
# warm-up 3x faster).
SLOT_JAVA_OPTIONS = "-XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError -XX:TieredStopAtLevel=1"

# After SIGTERM, how long the slot process has before SIGKILL.
KILL_GRACE_S = 0.5

log = logging.getLogger("workers.runner")

_OOM = re.compile(
    r"(?:Terminating due to |Exception in thread .*)java\.lang\.OutOfMemoryError: ?(.*)"
)


def driver_failure(returncode: int | None, log_path: Path | None, since: int = 0) -> str:
    """Why a slot's driver (its JVM, or the slot process itself) ended, in words:
    "driver ran out of memory: …" when the JVM said so in the slot's log (after
    byte `since`), else "Spark driver exited with …"."""
    from django.conf import settings

    tail = _read_from(log_path, since)
    oom = _OOM.search(tail)
    if oom:
        what = oom.group(1).strip() or "OutOfMemoryError"
        return (
            f"driver ran out of memory: {what} (each task's driver has "
            f"STRATA_TASK_DRIVER_MEMORY={settings.STRATA_TASK_DRIVER_MEMORY} of heap)"
        )
    return f"Spark driver exited with {exit_text(returncode)}"


# A line naming an error: a JVM exception ("Exception in thread "main"
# org.apache.spark.SparkException: …", "java.io.FileNotFoundException: …"),
# spark-submit's "Error: …", or Py4J's ": java.lang.…Exception: …".
_ERROR_LINE = re.compile(
    r'(?:Exception in thread "[^"]*" |: |Caused by: )?'
    r"((?:[A-Za-z_$][\w$]*\.)+[\w$]*(?:Exception|Error)\b.*|Error: .*)"
)


def error_lines(text: str, limit: int = 3) -> list[str]:
    """The first `limit` distinct lines of `text` (a driver's output, or an
    exception's text) that say what went wrong: its ERROR log lines and exception
    lines, without stack frames, warnings or informational lines."""
    found: list[str] = []
    for raw in text.splitlines():
        parsed = _log4j_line(raw.rstrip().encode("utf-8", "replace"))
        if parsed is not None:
            named = parsed[2].removeprefix("jvm: ").removeprefix("jvm.")
            line = named if parsed[1] in ("ERROR", "CRITICAL") else ""
        else:
            match = _ERROR_LINE.fullmatch(raw.strip())
            line = match[1] if match else ""
        if line and line not in found:
            found.append(line)
            if len(found) == limit:
                break
    return found


def start_failure(what: str, exc: BaseException, log_path: Path | None, since: int = 0) -> str:
    """Why `what` ("Spark driver", "the task's Spark application") failed to start,
    in words: the first error lines of the driver's output after byte `since` of
    `log_path`, else of the exception, else the exception's first line."""
    lines = error_lines(_read_from(log_path, since)) or error_lines(str(exc))
    if not lines:
        text = str(exc).strip()
        lines = [f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")]
    return f"{what} failed to start: {' | '.join(lines)}"[:2000]


# Where the slot's driver log stood when its current task started (set by
# slot_main): an OutOfMemoryError logged before it belongs to an earlier driver.
TASK_LOG_START = 0

# The driver JVM's log lines: Spark's default pattern, which the slot's driver
# writes (workers/log4j2.properties: "26/11/26 07:22:10 ERROR Logger: message",
# the JVM's local time), and log4j's own status layout, which it falls back to
# when its configuration fails ("2026-11-26T07:22:10.997036694Z <thread> ERROR
# message", UTC).
_SIMPLE = re.compile(
    rb"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,3})\d*)?Z (.*?) "
    rb"(TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (.*)"
)
_LOG4J = re.compile(
    rb"(\d\d)/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d) (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) "
    rb"([^:\s]+): ?(.*)"
)
_LEVELS = {b"TRACE": "DEBUG", b"WARN": "WARNING", b"FATAL": "CRITICAL"}


def _log4j_line(line: bytes) -> tuple[str, str, str] | None:
    """(UTC time, level, "name: message") of a log4j line; None for other output."""
    m = _SIMPLE.fullmatch(line)
    if m is not None:
        at = f"{m[1].decode()}.{(m[2] or b'0').decode():0<3}Z"
        text = f"jvm: [{m[3].decode('utf-8', 'replace')}] {m[5].decode('utf-8', 'replace')}"
        return at, _LEVELS.get(m[4], m[4].decode()), text
    m = _LOG4J.fullmatch(line)
    if m is not None:
        local = time.struct_time((2000 + int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]),
                                  int(m[6]), 0, 0, -1))  # fmt: skip
        at = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.mktime(local)))
        text = f"jvm.{m[8].decode('utf-8', 'replace')}: {m[9].decode('utf-8', 'replace')}"
        return at, _LEVELS.get(m[7], m[7].decode()), text
    return None


def driver_log_lines(data: bytes, now: float | None = None) -> bytes:
    """The driver JVM's output as task log lines ("<UTC time> <LEVEL> jvm...:
    message", like the task's own): a log4j line keeps its time and level; any
    other line (a stack trace's, the JVM's own messages) is `jvm:` with the level
    of the log4j line above it (WARNING if none) and the time it was copied."""
    copied = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(now))
    level, out = "WARNING", []
    for line in data.splitlines():
        parsed = _log4j_line(line)
        if parsed is None:
            out.append(f"{copied} {level} jvm: {line.decode('utf-8', 'replace')}\n")
            continue
        at, level, text = parsed
        out.append(f"{at} {level} {text}\n")
    return "".join(out).encode("utf-8")


def copy_driver_log(jvm_log: Path, since: int, task_log: Path, *, final: bool = False) -> int:
    """Append the driver JVM's output from byte `since` of `jvm_log` (whole
    lines only, unless `final`) to a task's log (`driver_log_lines`); where the
    copy got to. A slot runs one task at a time, so what its JVM wrote between
    the task's start and end is the task's."""
    from metastore.task_logs import task_log_append

    try:
        with jvm_log.open("rb") as f:
            f.seek(since)
            data = f.read(16 * 1024 * 1024)
    except OSError:
        return since
    end = len(data) if final else data.rfind(b"\n") + 1
    if end <= 0:
        return since
    task_log.parent.mkdir(parents=True, exist_ok=True)
    task_log_append(task_log, driver_log_lines(data[:end]))
    return since + end


def driver_exit_reason(exc: BaseException) -> str | None:
    """If this process's driver JVM has exited, why (see `driver_failure`);
    None while it runs. After an error that looks like the lost connection to
    a dying JVM, waits up to 3 s for it to be gone."""
    from workers.spark import driver_process

    proc = driver_process()
    if proc is None:
        return None
    lost = "py4j" in type(exc).__module__ or isinstance(exc, ConnectionError)
    deadline = time.monotonic() + (3.0 if lost else 0.0)
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.poll() is None:
        return None
    path = os.environ.get("STRATA_SLOT_JVM_LOG")
    return driver_failure(proc.returncode, Path(path) if path else None, TASK_LOG_START)


def exit_text(returncode: int | None) -> str:
    if returncode is None:
        return "an unknown status"
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"code {returncode}"


def _read_from(path: Path | None, since: int) -> str:
    if path is None:
        return ""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(since, size - 256 * 1024))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def log_size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


@dataclass(eq=False)  # compared by identity: kept in the pool's list
class SlotProcess:
    """One slot's child process and the socket the supervisor talks to it on.

    Messages are JSON lines: the child says {"ready": jvm_pid} once its driver
    is warm (or {"failed": reason} if it could not start it, and exits) and
    {"done": task_id} after each task; the supervisor sends
    {"run": task_id}. The process's own output goes to `log_path`, its driver
    JVM's (log4j, the JVM's messages) to `jvm_log_path`."""

    process: subprocess.Popen
    conn: socket.socket
    log_path: Path
    jvm_log_path: Path
    ready: bool = False
    jvm_pid: int | None = None
    start_error: str = ""  # why its driver failed to start ({"failed": …}), if it did
    _buffer: bytes = b""

    @classmethod
    def start(cls, name: str) -> SlotProcess:
        from django.conf import settings

        mine, theirs = socket.socketpair()
        logs = Path(settings.STRATA_DATA_DIR) / "slot-logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path, jvm_log_path = logs / f"{name}.log", logs / f"{name}.jvm.log"
        with log_path.open("ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "workers.slot_main", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "STRATA_SLOT_JVM_LOG": str(jvm_log_path)},
            )
        theirs.close()
        log.info("slot process %s started (pid %s)", name, process.pid)
        return cls(process=process, conn=mine, log_path=log_path, jvm_log_path=jvm_log_path)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def trim_logs(self, max_bytes: int) -> None:
        """Empty the process's logs once past `max_bytes` (between two tasks:
        each task's part is in its own log by then). Both are written in append
        mode, so the writers go on at the new end."""
        for path in (self.log_path, self.jvm_log_path):
            if max_bytes and log_size(path) > max_bytes:
                with contextlib.suppress(OSError):
                    os.truncate(path, 0)

    def send(self, message: dict) -> None:
        self.conn.sendall(json.dumps(message).encode() + b"\n")

    def receive(self, timeout: float) -> dict | None:
        """The child's next message, waiting up to `timeout` s (None: none came)."""
        if b"\n" not in self._buffer:
            self.conn.settimeout(max(timeout, 0.001))
            try:
                data = self.conn.recv(65536)
            except (TimeoutError, BlockingIOError):
                return None
            except OSError:
                data = b""
            if not data:  # the child closed its end: it is exiting
                time.sleep(min(timeout, 0.1))
                return None
            self._buffer += data
        if b"\n" not in self._buffer:
            return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if "ready" in message:
            self.ready, self.jvm_pid = True, message["ready"]
        if "failed" in message:
            self.start_error = message["failed"]
        return message

    def kill(self) -> list[str]:
        """SIGTERM the slot process and its JVM, SIGKILL what is left after
        KILL_GRACE_S; returns what was done, for the task's report."""
        import psutil

        steps = []
        try:
            victims = [psutil.Process(self.process.pid)]
            victims += victims[0].children(recursive=True)
        except psutil.Error:
            victims = []
        for proc in victims:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGTERM)
        steps.append(f"SIGTERM to the slot process {self.process.pid} and its driver JVM")
        _, left = psutil.wait_procs(victims, timeout=KILL_GRACE_S)
        for proc in list(left):  # and whatever they started meanwhile
            with contextlib.suppress(psutil.Error):
                left += [p for p in proc.children(recursive=True) if p not in left]
        for proc in left:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        if left:
            steps.append(f"SIGKILL after {KILL_GRACE_S:g} s to {len(left)} process(es) left")
            psutil.wait_procs(left, timeout=5)
        self.close()
        return steps

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class SlotPool:
    """The worker's slot processes that run no task now, warm or warming. A
    task takes one (`acquire`), gives it back when it ended normally
    (`release`), or has it killed and replaced (`discard`)."""

    def __init__(self) -> None:
        self._idle: list[SlotProcess] = []
        self._lock = threading.Lock()
        self._started = 0

    def _new(self) -> SlotProcess:
        self._started += 1
        name = f"{socket.gethostname()}-{os.getpid()}-{self._started}"
        return SlotProcess.start(name)

    def prestart(self, count: int) -> None:
        """Start processes until `count` are idle (the worker's start)."""
        with self._lock:
            while len(self._idle) < count:
                self._idle.append(self._new())

    def acquire(self) -> SlotProcess:
        with self._lock:
            for slot in [s for s in self._idle if not s.alive]:
                self._idle.remove(slot)
                slot.close()
            for slot in self._idle:
                if not slot.ready:  # read a "ready" it sent while idle
                    slot.receive(timeout=0)
            if self._idle:
                chosen = next((s for s in self._idle if s.ready), self._idle[0])
                self._idle.remove(chosen)
                return chosen
            return self._new()

    def release(self, slot: SlotProcess) -> None:
        with self._lock:
            if slot.alive:
                self._idle.append(slot)
                return
        self.discard(slot)

    def discard(self, slot: SlotProcess) -> None:
        """Forget a killed or crashed process and start its replacement now, so
        the slot's next task finds its driver warm (or warming)."""
        if slot.alive:
            slot.kill()
        else:
            slot.close()
        with self._lock:
            self._idle.append(self._new())

    def idle(self) -> list[SlotProcess]:
        with self._lock:
            return list(self._idle)

    def stop(self) -> None:
        """Kill every idle slot process (the worker's shutdown)."""
        with self._lock:
            slots, self._idle = self._idle, []
        for slot in slots:
            if slot.alive:
                slot.kill()
            else:
                slot.close()


POOL = SlotPool()
