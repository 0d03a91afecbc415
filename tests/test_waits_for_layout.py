"""The locks page's waits-for graph layout (console.waits_for_layout): where each
waiting task's box, each holder's box and each wait's arrow goes, without drawing it."""

from __future__ import annotations

from console import waits_for_layout as layout_module
from console.waits_for_layout import (
    BOX_H,
    BOX_W,
    HOLDER_X,
    LABEL_CHARS,
    ROW,
    TOP,
    UNKNOWN,
    WAITER_X,
    WIDTH,
    Box,
    Edge,
    waits_for_layout,
)


def wait(task: str | None, lock_type: str = "EXCLUSIVE", interval: str = "2024-01-01/2024-01-02"):
    return {"task": task, "type": lock_type, "interval": interval, "priority": 0}


def test_nobody_waiting_on_anything_lays_out_nothing():
    assert waits_for_layout([]) is None
    assert waits_for_layout([("a", None), ("b", [])]) is None


def test_waiters_left_holders_right_one_arrow_per_wait_from_box_edge_to_box_edge():
    graph = waits_for_layout(
        [
            ("w1", [wait("h1"), wait("h2", "SHARED", "2024-01-02/2024-01-03")]),
            ("w2", [wait("h1")]),
            ("w3", None),  # waits on nothing known: a box, no arrow
        ]
    )
    assert graph.width == WIDTH == 960
    assert [b.task for b in graph.waiters] == ["w1", "w2", "w3"]
    assert [b.task for b in graph.holders] == ["h1", "h2"]  # in the order first named
    # Row i is centred on TOP + i * ROW; a box is BOX_H tall around its centre.
    assert graph.waiters[1] == Box(
        task="w2",
        x=WAITER_X,
        y=TOP + ROW - BOX_H // 2,
        w=BOX_W,
        h=BOX_H,
        text_x=WAITER_X + 6,
        text_y=TOP + ROW + 4,
        label="w2",
        linked=True,
    )
    assert graph.holders[1] == Box(
        task="h2", x=HOLDER_X, y=43, w=320, h=22, text_x=626, text_y=58, label="h2", linked=True
    )
    assert graph.edges == (
        Edge("w1", "h1", "EXCLUSIVE 2024-01-01/2024-01-02", 330, 20, 620, 20),
        Edge("w1", "h2", "SHARED 2024-01-02/2024-01-03", 330, 20, 620, 54),
        Edge("w2", "h1", "EXCLUSIVE 2024-01-01/2024-01-02", 330, 54, 620, 20),
    )
    for e in graph.edges:  # arrows start at a waiter box's right edge, end at a holder's left
        assert e.x1 == WAITER_X + BOX_W and e.x2 == HOLDER_X
    assert graph.height == 3 * ROW + 20  # the taller column decides


def test_the_taller_column_sets_the_height():
    graph = waits_for_layout([("w", [wait(f"h{i}") for i in range(5)])])
    assert graph.height == 5 * ROW + 20
    assert [b.y + BOX_H // 2 for b in graph.holders] == [TOP + i * ROW for i in range(5)]
    assert {e.y1 for e in graph.edges} == {TOP}


def test_a_wait_naming_no_holder_points_at_one_unlinked_box():
    graph = waits_for_layout(
        [("w1", [{"interval": "2024-01-05/2024-01-06"}]), ("w2", [wait(None), wait("h")])]
    )
    assert [(b.task, b.linked) for b in graph.holders] == [(UNKNOWN, False), ("h", True)]
    assert [(e.waiter, e.blocker, e.wants) for e in graph.edges] == [
        ("w1", UNKNOWN, " 2024-01-05/2024-01-06"),  # no type: as the page always wrote it
        ("w2", UNKNOWN, "EXCLUSIVE 2024-01-01/2024-01-02"),
        ("w2", "h", "EXCLUSIVE 2024-01-01/2024-01-02"),
    ]


def test_labels_clip_long_ids_but_keep_them_whole_elsewhere():
    long_id = "index_parallel_" + "x" * 60
    graph = waits_for_layout([(long_id, [wait(long_id + "_holder")])])
    (waiter,), (holder,), (edge,) = graph.waiters, graph.holders, graph.edges
    assert waiter.task == long_id and waiter.label == long_id[:LABEL_CHARS]
    assert holder.label == (long_id + "_holder")[:LABEL_CHARS]
    assert edge.waiter == long_id and edge.blocker == long_id + "_holder"


def test_ids_are_data_not_markup():
    hostile = 'q"><script>alert(1)</script> & b'
    graph = waits_for_layout([(hostile, [wait(hostile + "2", "<b>", '"x"')])])
    assert graph.waiters[0].task == hostile and graph.holders[0].task == hostile + "2"
    assert graph.edges[0].wants == '<b> "x"'  # escaping is the template's job


def test_arrows_are_capped_but_every_box_is_laid_out(monkeypatch):
    monkeypatch.setattr(layout_module, "MAX_EDGES", 3)
    graph = waits_for_layout([(f"w{i}", [wait(f"h{i}")]) for i in range(5)])
    assert [e.waiter for e in graph.edges] == ["w0", "w1", "w2"]
    assert len(graph.waiters) == len(graph.holders) == 5


# What the page drew before the layout moved out of the view (its f-strings, on
# this input): the template draws the same elements at the same coordinates.
BEFORE = (
    '<svg class="waits-for" xmlns="http://www.w3.org/2000/svg" width="960" height="88">'
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto"><path d="M0 0L10 5L0 10z" fill="#8a5a00"/></marker>'
    "</defs>"
    '<g class="wait-edge" data-waiter="w1" data-blocker="h1"><title>w1 waits for h1: '
    'EXCLUSIVE 2024-01-01/2024-01-02</title><line x1="330" y1="20" x2="620" y2="20" '
    'stroke="#8a5a00" stroke-width="1.5" marker-end="url(#arrow)"/></g>'
    '<g class="wait-edge" data-waiter="w1" data-blocker="?"><title>w1 waits for ?:  '
    '2024-01-05/2024-01-06</title><line x1="330" y1="20" x2="620" y2="54" stroke="#8a5a00" '
    'stroke-width="1.5" marker-end="url(#arrow)"/></g>'
    '<g class="wait-edge" data-waiter="w2" data-blocker="h1"><title>w2 waits for h1: '
    'SHARED 2024-01-01/2024-01-02</title><line x1="330" y1="54" x2="620" y2="20" '
    'stroke="#8a5a00" stroke-width="1.5" marker-end="url(#arrow)"/></g>'
    '<g class="wait-node waiter" data-task="w1"><rect x="10" y="9" width="320" height="22" '
    'rx="4" fill="#fff0c9" stroke="#8a5a00"/><a href="/tasks/w1"><text x="16" y="24" '
    'font-size="11">⏳ w1</text></a></g>'
    '<g class="wait-node waiter" data-task="w2"><rect x="10" y="43" width="320" '
    'height="22" rx="4" fill="#fff0c9" stroke="#8a5a00"/><a href="/tasks/w2"><text x="16" '
    'y="58" font-size="11">⏳ w2</text></a></g>'
    '<g class="wait-node holder" data-task="h1"><rect x="620" y="9" width="320" '
    'height="22" rx="4" fill="#dbe8ff" stroke="#1b4aa6"/><a href="/tasks/h1"><text x="626" '
    'y="24" font-size="11">🔒 h1</text></a></g>'
    '<g class="wait-node holder" data-task="?"><rect x="620" y="43" width="320" '
    'height="22" rx="4" fill="#dbe8ff" stroke="#1b4aa6"/><a href="#"><text x="626" y="58" '
    'font-size="11">🔒 ?</text></a></g></svg>'
)


def test_the_template_draws_the_layout_as_the_page_did(settings):
    from django.template.loader import render_to_string

    graph = waits_for_layout(
        [
            ("w1", [wait("h1"), {"interval": "2024-01-05/2024-01-06"}]),
            ("w2", [wait("h1", "SHARED")]),
        ]
    )
    assert render_to_string("svg/waits_for.svg", {"graph": graph}).replace("\n", "") == BEFORE
