"""The process's current timelines and their console states, one entry per
dataSource, keyed by the commit seq they reflect, and a few states as of past
commits. Owned by `selectors.timeline` (which swaps entries, never changes a
timeline or a state it handed out) and `selectors.states`; everything here is
read and replaced under `lock`, and no database is read while it is held."""

from __future__ import annotations

import threading
from typing import Any

from metastore.timeline_view import Follow

lock = threading.Lock()
timelines: dict[str, tuple[int, Any]] = {}  # dataSource -> (seq, Timeline)
states: dict[str, Any] = {}  # dataSource -> TimelineState
follows: dict[str, Follow] = {}  # dataSource -> where its timeline went since its state


# (dataSource, as_of, current seq) -> TimelineState as of a past commit, oldest first
past: dict[tuple[str, int, int | None], Any] = {}


def clear() -> None:
    with lock:
        timelines.clear()
        states.clear()
        follows.clear()
        past.clear()
