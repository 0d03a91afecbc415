"""Druid SQL's typed parameters (issue 26, item 7): bound as Druid binds them -- each
`?` becomes a literal of its type before planning -- so Druid's implicit casts and
the session's `sqlTimeZone` apply to a parameter as to a literal. The cases and
their expected rows are Druid's own (CalciteParameterQueryTest), over Druid's test
dataSources `foo` and `numfoo` (tests/druid_test_data.py), sent to /druid/v2/sql.
"""

from __future__ import annotations

import pytest
from druid_test_data import publish_foo, publish_numfoo

pytestmark = pytest.mark.django_db


@pytest.fixture
def druid_data(inline_spec):
    publish_foo(inline_spec)
    publish_numfoo(inline_spec)


def _post(api_client, query: str, parameters: list, zone: str | None = None):
    body = {"query": query, "parameters": parameters, "resultFormat": "array"}
    if zone:
        body["context"] = {"sqlTimeZone": zone}
    return api_client.post("/druid/v2/sql", body, format="json")


def _rows(api_client, query: str, *parameters, zone: str | None = None) -> list:
    response = _post(
        api_client,
        query,
        [p if p is None else {"type": p[0], "value": p[1]} for p in parameters],
        zone,
    )
    assert response.status_code == 200, response.content
    return response.json()


def _sorted(rows: list) -> list:
    return sorted(rows, key=lambda row: [(v is not None, str(v)) for v in row])


def test_parameters_in_selects_filters_limits_and_casts(api_client, druid_data):
    assert _rows(api_client, "SELECT 1 + ?", ("INTEGER", 1)) == [[2]]
    assert _rows(
        api_client, "SELECT 1 + ?, dim1 FROM foo LIMIT ?", ("INTEGER", 1), ("INTEGER", 1)
    ) == [[2, ""]]
    assert _rows(
        api_client,
        "SELECT exp(count(*)) + ?, sum(m2) FROM druid.foo WHERE  dim2 = ?",
        ("INTEGER", 10),
        ("INTEGER", 0),
    ) == [[11.0, None]]
    assert _rows(
        api_client,
        "SELECT SUBSTRING(dim2, ?, ?) FROM druid.foo LIMIT ?",
        ("INTEGER", 1),
        ("INTEGER", 1),
        ("INTEGER", 2),
    ) == [["a"], [None]]
    assert _rows(
        api_client,
        "SELECT dim1, m1, COUNT(*) FROM druid.foo WHERE m1 - CAST(? as INT) = dim1 "
        "GROUP BY dim1, m1",
        ("INTEGER", 1),
    ) == [["2", 3.0, 1]]
    strange = _rows(
        api_client,
        "SELECT dim1, COUNT(*) FILTER(WHERE dim2 <> ?)/COUNT(*) as ratio FROM druid.foo "
        "GROUP BY dim1 HAVING COUNT(*) FILTER(WHERE dim2 <> ?)/COUNT(*) = ?",
        ("VARCHAR", "a"),
        ("VARCHAR", "a"),
        ("INTEGER", 1),
    )
    assert _sorted(strange) == [["2", 1], ["def", 1]]
    cases = (
        "SELECT CASE 'foo' WHEN ? THEN SUM(cnt) / CAST(? as INT) "
        "WHEN ? THEN SUM(m1) / CAST(? as INT) WHEN ? THEN SUM(m2) / CAST(? as INT) END FROM foo"
    )
    bound = [("VARCHAR", "bar"), ("INTEGER", 10), ("VARCHAR", "foo"), ("INTEGER", 10)]
    assert _rows(api_client, cases, *bound, ("VARCHAR", "baz"), ("INTEGER", 10)) == [[2.1]]


def test_trim_family_with_parameters(api_client, druid_data):
    query = (
        "SELECT TRIM(BOTH ? FROM ?), TRIM(TRAILING ? FROM ?), TRIM(? FROM ?), "
        "TRIM(TRAILING FROM ?), TRIM(?), BTRIM(?), BTRIM(?, ?), LTRIM(?), LTRIM(?, ?), "
        "RTRIM(?), RTRIM(?, ?), COUNT(*) FROM foo"
    )
    values = ["x", "xfoox", "x", "xfoox", " ", " foo ", " foo ", " foo ", " foo ", "xfoox", "x"]
    values += [" foo ", "xfoox", "x", " foo ", "xfoox", "x"]
    expected = ["foo", "xfoo", "foo", " foo", "foo", "foo", "foo", "foo ", "foox", " foo"]
    assert _rows(api_client, query, *[("VARCHAR", v) for v in values]) == [[*expected, "xfoo", 6]]


def test_numbers_bind_with_their_types(api_client, druid_data):
    between = "SELECT COUNT(*) FROM druid.foo WHERE cnt > ? and cnt < ?"
    assert _rows(api_client, between, ("DOUBLE", 1.1), ("FLOAT", 100000001.0)) == [[0]]
    either = "SELECT COUNT(*) FROM druid.foo WHERE cnt = ? or cnt = ?"
    assert _rows(api_client, either, ("DOUBLE", 1.0), ("FLOAT", 100000001.0)) == [[6]]
    assert _rows(api_client, "SELECT COUNT(*) FROM druid.foo WHERE cnt = ?", ("REAL", 1.0)) == [[6]]
    assert _rows(api_client, "SELECT COUNT(*) FROM druid.numfoo WHERE l1 > ?", ("BIGINT", 3)) == [
        [2]
    ]
    # A string where a number is compared casts as a literal would: 'wat' is null.
    wrong = "SELECT COUNT(*) FROM druid.numfoo WHERE l1 > ? AND f1 = ?"
    assert _rows(api_client, wrong, ("BIGINT", 3), ("VARCHAR", "wat")) == [[0]]


def test_null_parameters(api_client, druid_data):
    query = "SELECT COALESCE(dim2, ?, ?), COUNT(*) FROM druid.foo GROUP BY 1"
    expected = [["", 1], ["a", 2], ["abc", 1], ["parameter", 2]]
    both = (("VARCHAR", "parameter"), ("VARCHAR", None))
    assert _sorted(_rows(api_client, query, *both)) == expected
    assert _sorted(_rows(api_client, query, *reversed(both))) == expected


def test_timestamps_and_dates_from_text_or_millis(api_client, druid_data):
    query = "SELECT exp(count(*)) + ?, sum(m2)  FROM druid.foo WHERE  __time >= ?"
    for later in (
        ("TIMESTAMP", 32472144000000),  # 2999-01-01T00:00:00Z in milliseconds
        ("TIMESTAMP", "2999-01-01 00:00:00"),
        ("DATE", "2999-01-01"),
    ):
        assert _rows(api_client, query, ("INTEGER", 10), later) == [[11.0, None]], later


def test_a_timestamp_parameter_is_a_wall_clock_time_of_the_sql_time_zone(api_client, druid_data):
    """20:00 in Los Angeles is 04:00Z the next day: rows from 2000-01-03 on (in UTC the
    row of 2000-01-02T00:00Z would count too). From millis, Druid reads the time the
    millis write in UTC as the wall-clock time, like a literal."""
    query = "SELECT COUNT(*) FROM foo WHERE __time >= ?"
    zone = "America/Los_Angeles"
    assert _rows(api_client, query, ("TIMESTAMP", "2000-01-01 20:00:00"), zone=zone) == [[4]]
    assert _rows(api_client, query, ("TIMESTAMP", 946756800000), zone=zone) == [[4]]
    assert _rows(api_client, query, ("TIMESTAMP", "2000-01-01 20:00:00")) == [[5]]
    (row,) = _rows(api_client, "SELECT ?", ("DATE", "2000-01-02"), zone=zone)
    assert row == ["2000-01-02T00:00:00.000-08:00"]


@pytest.mark.parametrize(
    ("query", "parameters", "position"),
    [
        ("SELECT COUNT(*) FROM druid.numfoo WHERE l1 > ?", [], 1),
        (
            "SELECT COUNT(*) FROM druid.numfoo WHERE l1 > ? AND f1 = ?",
            [{"type": "BIGINT", "value": 3}],
            2,
        ),
        ("SELECT 1 + ?, dim1 FROM foo LIMIT ?", [None, {"type": "INTEGER", "value": 1}], 1),
    ],
)
def test_a_missing_parameter_is_druids_error_naming_its_position(
    api_client, druid_data, query, parameters, position
):
    response = _post(api_client, query, parameters)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "druidException" and body["category"] == "INVALID_INPUT"
    assert body["errorMessage"].endswith(f"No value bound for parameter (position [{position}])")
