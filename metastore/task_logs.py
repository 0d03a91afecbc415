"""Each task's log, kept with the task: one file per task under
STRATA_DATA_DIR/task-logs, written by the worker while the task runs and read by
the console and by Druid's `GET /druid/indexer/v1/task/{id}/log`.

What goes in: the task's own lines (Strata's `workers` and `metastore` loggers at
INFO and above: phases, locks, what was published, why it failed) and every other
logger's warnings and errors while the task runs (Spark's, through PySpark).
A worker process runs one task at a time, so everything logged meanwhile is the
task's. A task in a slot process (`workers.slots`) also gets its driver JVM's
output (Spark's log4j lines, the JVM's own messages), copied in by its supervisor.

A log is capped at STRATA_TASK_LOG_MAX_BYTES: past it, its head and its most
recent lines are kept with a line between them saying how much was cut. Every
write takes an exclusive `flock` on the file, so the writers of one task (the
worker thread, its slot process, the JVM copier) never lose each other's lines
when the log is cut in place. Logs are removed STRATA_TASK_LOG_RETENTION after
their last line (`task_logs_prune`, run by the janitor).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

TAIL_BYTES = 64 * 1024  # what the task page shows of a long log
_OWN = ("workers", "metastore")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_CUT = re.compile(
    rb"\n\[\.\.\. (\d+) bytes of this log cut here \(STRATA_TASK_LOG_MAX_BYTES=\d+\)[^\n]*\n"
)


def task_log_path(task_id: str) -> Path:
    """The log file of `task_id`: a readable prefix of the id and a digest of all
    of it (ids may hold characters no file name should)."""
    from django.conf import settings

    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    stem = _UNSAFE.sub("_", task_id)[:80]
    return Path(settings.STRATA_DATA_DIR) / "task-logs" / f"{stem}-{digest}.log"


def task_log_read(*, task_id: str, offset: int = 0) -> bytes | None:
    """The log as Druid serves it: all of it for offset 0, from byte `offset` when
    positive, the last -`offset` bytes when negative; None when there is no log."""
    path = task_log_path(task_id)
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            start = min(offset, size) if offset >= 0 else max(size + offset, 0)
            f.seek(start)
            return f.read()
    except FileNotFoundError:
        return None


def task_log_append(path: Path, data: bytes, *, max_bytes: int | None = None) -> None:
    """Append `data` to the log at `path`, then cut it if it passed `max_bytes`
    (STRATA_TASK_LOG_MAX_BYTES by default): see `cut_log`."""
    if max_bytes is None:
        from django.conf import settings

        max_bytes = settings.STRATA_TASK_LOG_MAX_BYTES
    # Not O_APPEND: a cut rewrites the file in place. Every writer holds the
    # lock while it seeks to the end and writes, so none overwrites another.
    with open(os.open(path, os.O_RDWR | os.O_CREAT, 0o644), "r+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
        f.seek(0, os.SEEK_END)
        f.write(data)
        f.flush()
        if max_bytes and f.tell() > max_bytes:
            f.seek(0)
            text = cut_log(f.read(), max_bytes)
            f.seek(0)
            f.write(text)
            f.truncate()


def cut_log(text: bytes, max_bytes: int) -> bytes:
    """`text` cut to at most about three quarters of `max_bytes` (so the next cut
    is a quarter of the cap away): its first half-cap and its last quarter-cap,
    each at whole lines, with one line between them saying how many bytes were
    cut there in all (an earlier cut's count is added to)."""
    if len(text) <= max_bytes:
        return text
    half, quarter = max_bytes // 2, max_bytes // 4
    earlier = _CUT.search(text, 0, half + 256)
    if earlier:
        head, cut, rest = text[: earlier.start()], int(earlier[1]), text[earlier.end() :]
    else:
        end = text.rfind(b"\n", 0, half) + 1 or half
        head, cut, rest = text[:end], 0, text[end:]
    start = max(len(rest) - quarter, 0)
    start = rest.find(b"\n", start) + 1 or start
    cut += start
    marker = (
        f"\n[... {cut} bytes of this log cut here (STRATA_TASK_LOG_MAX_BYTES={max_bytes}): "
        "its beginning and its end are kept ...]\n"
    ).encode()
    return head.rstrip(b"\n") + marker + rest[start:]


def task_logs_prune(*, before: datetime, active_task_ids: Iterable[str]) -> list[Path]:
    """Remove the task logs (and slot processes' logs) last written before
    `before`, except those of the tasks still active; what was removed."""
    from django.conf import settings

    keep = {task_log_path(task_id) for task_id in active_task_ids}
    horizon = before.timestamp()
    removed = []
    root = Path(settings.STRATA_DATA_DIR)
    for folder in (root / "task-logs", root / "slot-logs"):
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            try:
                if path not in keep and path.is_file() and path.stat().st_mtime < horizon:
                    path.unlink()
                    removed.append(path)
            except FileNotFoundError:
                continue
    return removed


class _TaskLogHandler(logging.Handler):
    """Each record appended to the task's log through `task_log_append`."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        try:
            task_log_append(self.path, (self.format(record) + "\n").encode("utf-8", "replace"))
        except Exception:
            self.handleError(record)


class _TaskLogFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        own = record.name.split(".", 1)[0] in _OWN
        return record.levelno >= (logging.INFO if own else logging.WARNING)


class _UTCFormatter(logging.Formatter):
    converter = time.gmtime

    def formatTime(self, record, datefmt=None):  # noqa: N802 - logging's name
        return time.strftime("%Y-%m-%dT%H:%M:%S", self.converter(record.created)) + (
            f".{int(record.msecs):03d}Z"
        )


@contextlib.contextmanager
def task_log_capture(task_id: str) -> Iterator[Path]:
    """Append what is logged while the block runs to the task's log file."""
    path = task_log_path(task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = _TaskLogHandler(path)
    handler.setFormatter(_UTCFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_TaskLogFilter())
    root = logging.getLogger()
    own = [logging.getLogger(name) for name in _OWN]
    saved = [(lg, lg.level) for lg in [root, *own]]
    root.addHandler(handler)
    for lg in own:  # the task's own INFO lines reach the handler whatever the root's level
        if lg.getEffectiveLevel() > logging.INFO:
            lg.setLevel(logging.INFO)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()
        for lg, level in saved[1:]:
            lg.setLevel(level)
