"""The console's pages and APIs read the metastore through metastore.selectors
only (HackSoft's selectors; issue 24): no ORM query in the edges. Model classes
may still be imported there for their constants and types."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONSOLE = Path(__file__).resolve().parent.parent / "console"
# Every module of the console is an edge (pages, the REST API, Druid's API,
# authentication); the template tags only format.
EDGES = sorted(p.name for p in CONSOLE.glob("*.py"))


# A queryset refined in the edge is an ORM query written there, even when a
# selector handed the queryset out.
_QUERYSET_METHODS = {
    "objects",
    "select_related",
    "prefetch_related",
    "filter",
    "exclude",
    "annotate",
    "aggregate",
    "values_list",
    "order_by",
    "only",
    "defer",
    "extra",
    "raw",
    "count",  # (a selector returns the count: `selectors.tasks_count`)
    "exists",
}


def _orm_reads(source: str) -> list[int]:
    """Lines that use a model manager (`X.objects`) or refine a queryset."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in _QUERYSET_METHODS:
            lines.append(node.lineno)
    return sorted(set(lines))


def test_the_check_sees_a_queryset_refined_in_an_edge():
    assert _orm_reads("x = selectors.tasks_list().filter(status='RUNNING')") == [1]
    assert _orm_reads("x = sorted(rows.values())") == []
    assert _orm_reads("total = selectors.tasks_table().count()") == [1]


@pytest.mark.parametrize("name", EDGES)
def test_an_edge_module_reads_through_selectors_only(name):
    found = _orm_reads((CONSOLE / name).read_text())
    assert found == [], f"console/{name} queries the ORM at lines {found}"


def test_the_check_sees_an_orm_read():
    assert _orm_reads("t = Task.objects.filter(id=1).first()\n") == [1]
    assert _orm_reads("locks = task.locks.select_related('x')\n") == [1]
