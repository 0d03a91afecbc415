"""Where a task's files live: its intermediary directory and deep storage.

Task ids and dataSource names become directory names, so every path is checked
to stay under its root.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from django.conf import settings

from metastore.intervals import Interval
from workers.jobs.ingest import interval_dirname


def _confined(root: Path, *parts: str) -> Path:
    """`root/parts...`, refusing any part that could leave `root` (separators,
    '.'/'..', NUL, absolute paths): task ids and dataSource names become paths."""
    for part in parts:
        if (
            not part
            or part in (".", "..")
            or "/" in part
            or "\\" in part
            or "\x00" in part
            or len(os.fsencode(part)) > 255
        ):
            raise ValueError(f"{part[:80]!r} cannot be a directory name under {root}")
    path = Path(root).joinpath(*parts)
    resolved_root = Path(root).resolve()
    if resolved_root not in path.resolve().parents:
        raise ValueError(f"{path} escapes {root}")
    return path


def intermediary_dir(task_id: str) -> Path:
    return _confined(settings.STRATA_INTERMEDIARY_DIR, task_id)


def deep_storage_dir(datasource: str, interval: Interval, version: str, partition: int) -> Path:
    """`<data>/deep/<dataSource>/<start>_<end>/<version>/<partition>/`."""
    return _confined(
        settings.STRATA_DEEP_STORAGE,
        datasource,
        interval_dirname(interval),
        # Deep-storage paths avoid ':' so Hadoop-style readers accept them.
        version.replace(":", "").replace("-", ""),
        str(partition),
    )


def remove_unpublished(paths: list[Path]) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
        # prune empty parents up to the dataSource directory
        for parent in list(path.parents)[:3]:
            try:
                parent.rmdir()
            except OSError:
                break
