"""Where the locks page's waits-for graph puts each box and arrow: a pure function
of the waiting tasks and what each waits on, with no markup and no Django.
templates/svg/waits_for.svg draws the result (auto-escaped).

The waiting tasks are a column of boxes on the left, in the order given; the
tasks they wait on are a column on the right, in the order first named; each
wait is an arrow from its waiter to its holder (a wait that names no holder
points at one box "?"). At most MAX_EDGES arrows are drawn; every box is."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

UNKNOWN = "?"  # the holder of a wait that does not name one
MAX_EDGES = 300
LABEL_CHARS = 48  # of a task id, shown in its box (the title and data-task hold it all)
WIDTH = 960
TOP = 20  # the centre line of the first row
ROW = 34
BOTTOM = 20  # the height is rows * ROW + BOTTOM
BOX_W = 320
BOX_H = 22
WAITER_X = 10
HOLDER_X = 620
TEXT_DX = 6
TEXT_DY = 4


@dataclass(frozen=True)
class Box:
    """One task's box: the rectangle's corner and the label's baseline."""

    task: str
    x: int
    y: int
    w: int
    h: int
    text_x: int
    text_y: int
    label: str  # the task id, clipped to LABEL_CHARS
    linked: bool  # a known task (links to its page); False for UNKNOWN


@dataclass(frozen=True)
class Edge:
    """One wait: an arrow from the waiter's box to its holder's."""

    waiter: str
    blocker: str
    wants: str  # "<lock type> <interval>" of the wait
    x1: int
    y1: int
    x2: int
    y2: int


@dataclass(frozen=True)
class WaitsFor:
    width: int
    height: int
    edges: tuple[Edge, ...]
    waiters: tuple[Box, ...]
    holders: tuple[Box, ...]


def _box(task: str, x: int, centre: int, linked: bool) -> Box:
    return Box(
        task=task,
        x=x,
        y=centre - BOX_H // 2,
        w=BOX_W,
        h=BOX_H,
        text_x=x + TEXT_DX,
        text_y=centre + TEXT_DY,
        label=task[:LABEL_CHARS],
        linked=linked,
    )


def waits_for_layout(
    waiting: Iterable[tuple[str, Sequence[Mapping[str, Any]] | None]],
) -> WaitsFor | None:
    """The graph of `waiting`, (task id, the blockers it waits on) pairs, each
    blocker a mapping with "task", "type" and "interval" (any may be missing);
    None when no task waits on anything."""
    waiting = list(waiting)
    left = [task for task, _ in waiting]
    right: list[str] = []
    waits: list[tuple[str, str, str]] = []
    for task, blockers in waiting:
        for b in blockers or []:
            holder = b.get("task") or UNKNOWN
            if holder not in right:
                right.append(holder)
            waits.append((task, holder, f"{b.get('type', '')} {b.get('interval', '')}"))
    if not waits:
        return None
    ly = {task: TOP + i * ROW for i, task in enumerate(left)}
    ry = {task: TOP + i * ROW for i, task in enumerate(right)}
    edges = tuple(
        Edge(waiter=a, blocker=b, wants=wants, x1=WAITER_X + BOX_W, y1=ly[a], x2=HOLDER_X, y2=ry[b])
        for a, b, wants in waits[:MAX_EDGES]
    )
    return WaitsFor(
        width=WIDTH,
        height=max(len(left), len(right)) * ROW + BOTTOM,
        edges=edges,
        waiters=tuple(_box(task, WAITER_X, y, True) for task, y in ly.items()),
        holders=tuple(_box(task, HOLDER_X, y, task != UNKNOWN) for task, y in ry.items()),
    )
