"""A task's `context`: priority and the lock options Druid reads from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.fields import INT_MAXIMUM, bool_at, int_at, object_at, string_at

DEFAULT_TASK_LOCK_TIMEOUT_MS = 300_000


@dataclass(frozen=True)
class Context:
    priority: int | None = None
    task_lock_timeout_ms: int = DEFAULT_TASK_LOCK_TIMEOUT_MS
    force_time_chunk_lock: bool = True
    use_concurrent_locks: bool = False
    task_lock_type: str | None = None  # Druid's taskLockType; see locking.lock_mode


def task_context(raw: Any) -> Context:
    """The validated `context` object of a task spec (absent: the defaults)."""
    ctx = object_at(raw, "context", required=False)
    priority = ctx.get("priority")
    if priority is not None and (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not -INT_MAXIMUM - 1 <= priority <= INT_MAXIMUM
    ):
        raise SpecError(
            "context.priority", f"must be an integer from {-INT_MAXIMUM - 1} to {INT_MAXIMUM}"
        )
    return Context(
        priority=priority,
        task_lock_timeout_ms=int_at(
            ctx, "taskLockTimeout", "context", DEFAULT_TASK_LOCK_TIMEOUT_MS
        ),
        force_time_chunk_lock=bool_at(ctx, "forceTimeChunkLock", "context", True),
        use_concurrent_locks=bool_at(ctx, "useConcurrentLocks", "context", False),
        task_lock_type=string_at(ctx, "taskLockType", "context", required=False),
    )
