"""transformSpec filters on null values, on real Spark (`run_ingest`), as Druid's
default SQL-compatible null handling has them (Druid 28+,
`druid.generic.useThreeValueLogicForNativeFilters=true`): a filter whose value is
null is UNKNOWN for `selector`/`equals`/`in`/`bound`/`range`/`like`/`regex`/`search`/
`arrayContainsElement`/`expression`, and Druid's `NotFilter` negates the three-valued
match (`baseMatcher.matches().negate()`), so a row is kept by neither the filter nor
its `not` (docs/tutorials/tutorial-sql-null.md, docs/querying/filters.md)."""

from __future__ import annotations

import pytest

from tests.test_filters_arrays_missing import _ids

# One full row matching none of the filters below, and one row per filter with
# that filter's column null (its id names the column).
FULL = {
    "s": "a",
    "e": 1,
    "i": "a",
    "b": 1,
    "r": 1,
    "l": "abc",
    "x": "abc",
    "q": "abc",
    "t": ["a", "b"],
    "ex": 1,
}
ROWS = [{"id": "full", **FULL}] + [{"id": k, **FULL, k: None} for k in FULL]

INNER = [
    {"type": "selector", "dimension": "s", "value": "z"},
    {"type": "equals", "column": "e", "matchValueType": "LONG", "matchValue": 9},
    {"type": "in", "dimension": "i", "values": ["z", "y"]},
    {"type": "bound", "dimension": "b", "lower": "5", "ordering": "numeric"},
    {"type": "range", "column": "r", "matchValueType": "LONG", "lower": 5},
    {"type": "like", "dimension": "l", "pattern": "z%"},
    {"type": "regex", "dimension": "x", "pattern": "^z"},
    {"type": "search", "dimension": "q", "query": {"type": "contains", "value": "zz"}},
    {
        "type": "arrayContainsElement",
        "column": "t",
        "elementMatchValueType": "STRING",
        "elementMatchValue": "z",
    },
    {"type": "expression", "expression": "ex > 5"},
]


@pytest.mark.spark
def test_not_of_an_unknown_filter_keeps_no_row(tmp_path):
    # Each `not` is true on the full row and UNKNOWN on the row whose column is null:
    # an AND of them keeps the full row only.
    flt = {"type": "and", "fields": [{"type": "not", "field": f} for f in INNER]}
    assert [r["id"] for r in _ids(tmp_path, flt, data=ROWS)] == ["full"]


@pytest.mark.spark
def test_null_matching_filters_stay_two_valued(tmp_path):
    # A null value is a match (not unknown) for `null`, a null `selector` and an `in`
    # holding null: their `not` drops it and keeps the others.
    flt = {
        "type": "or",
        "fields": [
            {"type": "not", "field": {"type": "selector", "dimension": "s", "value": None}},
            {"type": "not", "field": {"type": "in", "dimension": "i", "values": [None, "a"]}},
            {"type": "not", "field": {"type": "null", "column": "e"}},
        ],
    }
    kept = [r["id"] for r in _ids(tmp_path, flt, data=ROWS)]
    assert kept == sorted(r["id"] for r in ROWS)  # every row has s, i or e non-null
    flt = {"type": "not", "field": {"type": "in", "dimension": "i", "values": [None, "a"]}}
    assert _ids(tmp_path, flt, data=ROWS) == []
