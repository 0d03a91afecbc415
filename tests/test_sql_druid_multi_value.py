"""Multi-value string dimensions in Druid SQL (issue 26, item 7), as Druid answers
them: an expression of one outside GROUP BY maps over its values, a filter matches
any value, GROUP BY unnests it -- also through a CTE, a derived table of a UNION ALL
and an `IN (SELECT ...)` list, where Druid's grouping unnests it too. Expected rows
are Druid's (CalciteMultiValueStringQueryTest) over Druid's `foo`/`numfoo`
(tests/druid_test_data.py), sent to /druid/v2/sql; unordered results are compared
as multisets.
"""

from __future__ import annotations

import pytest
from druid_test_data import publish_foo, publish_numfoo

pytestmark = pytest.mark.django_db

AB, BC = '["a","b"]', '["b","c"]'


@pytest.fixture
def druid_data(inline_spec):
    publish_foo(inline_spec)
    publish_numfoo(inline_spec)


def _rows(api_client, query: str) -> list:
    body = {"query": query, "resultFormat": "array"}
    response = api_client.post("/druid/v2/sql", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _bag(rows: list) -> list:
    return sorted(rows, key=lambda row: [(v is not None, str(v)) for v in row])


SCANS = [
    (
        "SELECT concat(dim3, 'foo') FROM druid.numfoo",
        [['["afoo","bfoo"]'], ['["bfoo","cfoo"]'], ["dfoo"], ["foo"], [None], [None]],
    ),
    (
        "SELECT concat(dim3, '-lol-', dim3) FROM druid.numfoo",
        [['["a-lol-a","b-lol-b"]'], ['["b-lol-b","c-lol-c"]'], ["d-lol-d"], ["-lol-"]]
        + [[None], [None]],
    ),
    (
        "SELECT concat(dim3, '', 'foo') FROM druid.numfoo where concat(dim3, '', 'foo') = 'bfoo'",
        [['["afoo","bfoo"]'], ['["bfoo","cfoo"]']],
    ),
    ("SELECT MV_SLICE(dim3, 1) FROM druid.numfoo", [["b"], ["c"], ["[]"], ["[]"], [None], [None]]),
    ("SELECT dim3 FROM druid.numfoo WHERE MV_OVERLAP(dim3, ARRAY['a','b']) LIMIT 5", [[AB], [BC]]),
    ("SELECT dim3 FROM druid.numfoo WHERE MV_OVERLAP(dim3, ARRAY[dim2]) LIMIT 5", [[AB]]),
    ("SELECT dim3 FROM druid.numfoo WHERE MV_CONTAINS(dim3, ARRAY['a','b']) LIMIT 5", [[AB]]),
    ("SELECT dim3 FROM druid.numfoo WHERE MV_CONTAINS(dim3, ARRAY[dim2]) LIMIT 5", [[AB]]),
]


@pytest.mark.parametrize(("query", "expected"), SCANS)
def test_multi_value_strings_outside_group_by(api_client, druid_data, query, expected):
    assert _rows(api_client, query) == expected


GROUPED = [
    (
        "SELECT concat(dim3, 'foo'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
        [[None, 2], ["bfoo", 2], ["afoo", 1], ["cfoo", 1], ["dfoo", 1], ["foo", 1]],
    ),
    (
        "SELECT concat(dim3, '', 'foo'), SUM(cnt) FROM druid.numfoo "
        "where concat(dim3, '', 'foo') = 'bfoo' GROUP BY 1 ORDER BY 2 DESC",
        [["bfoo", 2], ["afoo", 1], ["cfoo", 1]],
    ),
    (
        "SELECT dim1, MV_LENGTH(dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1, 2 ORDER BY 2 DESC",
        [["", 2, 1], ["10.1", 2, 1], ["1", 1, 1], ["2", 1, 1], ["abc", None, 1], ["def", None, 1]],
    ),
    (
        "SELECT MV_APPEND(dim3, 'foo'), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
        [["foo", 4], [None, 2], ["b", 2], ["", 1], ["a", 1], ["c", 1], ["d", 1]],
    ),
    (
        "SELECT MV_PREPEND('foo', dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
        [["foo", 4], [None, 2], ["b", 2], ["", 1], ["a", 1], ["c", 1], ["d", 1]],
    ),
    (
        "SELECT MV_TO_STRING(MV_PREPEND('foo', dim3), ','), MV_TO_STRING(MV_APPEND(dim3, 'foo'), "
        "','), SUM(cnt) FROM druid.numfoo GROUP BY 1,2 ORDER BY 3 DESC",
        [[None, None, 2], ["foo,", ",foo", 1], ["foo,a,b", "a,b,foo", 1]]
        + [["foo,b,c", "b,c,foo", 1], ["foo,d", "d,foo", 1]],
    ),
    (
        "SELECT MV_CONCAT(dim3, dim3), SUM(cnt) FROM druid.numfoo GROUP BY 1 ORDER BY 2 DESC",
        [["b", 4], [None, 2], ["", 2], ["a", 2], ["c", 2], ["d", 2]],
    ),
]


@pytest.mark.parametrize(("query", "expected"), GROUPED)
def test_group_by_unnests_multi_value_strings(api_client, druid_data, query, expected):
    assert _bag(_rows(api_client, query)) == _bag(expected)


# foo's dim3 grouped: a, b (twice), c, d, "" and null (the rows with no value).
DIM3_GROUPS = [["a", 1], ["b", 2], ["c", 1], ["d", 1], ["", 1], [None, 2]]


@pytest.mark.parametrize(
    ("query", "times"),
    [
        ("WITH t AS (SELECT dim3 FROM foo) SELECT dim3, COUNT(*) FROM t GROUP BY dim3", 1),
        ("SELECT d, COUNT(*) FROM (SELECT dim3 AS d FROM foo) GROUP BY 1", 1),
        (
            "SELECT d, COUNT(*) FROM (SELECT dim3 AS d FROM foo UNION ALL "
            "SELECT dim3 FROM numfoo) GROUP BY d",
            2,
        ),
        (
            "WITH t AS (SELECT dim1, dim3 FROM foo UNION ALL SELECT dim1, dim3 FROM numfoo) "
            "SELECT dim3, COUNT(*) FROM t GROUP BY 1",
            2,
        ),
    ],
)
def test_group_by_through_a_cte_or_a_union_all_unnests(api_client, druid_data, query, times):
    expected = [[value, count * times] for value, count in DIM3_GROUPS]
    assert _bag(_rows(api_client, query)) == _bag(expected)


def test_in_a_subquery_of_a_multi_value_string(api_client, druid_data):
    """The subquery's multi-value string is grouped (so unnested) as Druid plans an IN
    list; a multi-value string left of IN matches if any of its values is listed."""
    assert _rows(api_client, "SELECT COUNT(*) FROM foo WHERE dim2 IN (SELECT dim3 FROM foo)") == [
        [3]
    ]
    listed = _rows(api_client, "SELECT dim3 FROM foo WHERE dim3 IN (SELECT dim2 FROM foo)")
    assert _bag(listed) == _bag([[AB], [""]])
