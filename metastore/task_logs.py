"""Each task's log, kept with the task: one file per task under
STRATA_DATA_DIR/task-logs, written by the worker while the task runs and read by
the console and by Druid's `GET /druid/indexer/v1/task/{id}/log`.

What goes in: the task's own lines (Strata's `workers` and `metastore` loggers at
INFO and above: phases, locks, what was published, why it failed) and every other
logger's warnings and errors while the task runs (Spark's, through PySpark).
A worker process runs one task at a time, so everything logged meanwhile is the
task's.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

TAIL_BYTES = 64 * 1024  # what the task page shows of a long log
_OWN = ("workers", "metastore")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


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
    handler = logging.FileHandler(path, encoding="utf-8")
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
