"""Druid SQL's DataSketches functions over stored sketches (metastore/sql_druid_sketches.py):
the `sk` dataSource of test_native_sketches, whose sketch columns hold, per row,
the users {a, b}, {b, c} (day 1) and {c, d} (day 2), and the values 1..30.

Over a sketch column, APPROX_COUNT_DISTINCT counted distinct sketches before;
now it is the estimate of their union, as in Druid.
"""

from __future__ import annotations

import base64

import datasketches as ds
import pytest

from metastore import query
from tests.test_native_sketches import publish_sk


@pytest.fixture
def stored(db, inline_spec):
    publish_sk(inline_spec)


def one(sql: str):
    [[value]] = query.run_query(sql=sql, druid_sql=True).rows
    return value


def test_counts_and_quantiles_over_stored_sketches_are_of_their_union(stored):
    assert one("SELECT APPROX_COUNT_DISTINCT_DS_THETA(users_theta) FROM sk") == 4
    assert one("SELECT APPROX_COUNT_DISTINCT_DS_HLL(users_hll) FROM sk") == 4
    assert one("SELECT APPROX_COUNT_DISTINCT(users_hll) FROM sk") == 4
    assert one("SELECT APPROX_QUANTILE_DS(value_kll, 0.5) FROM sk") in (15.0, 16.0)
    assert one("SELECT DS_GET_QUANTILE(DS_QUANTILES_SKETCH(value_kll), 1) FROM sk") == 30.0
    assert one("SELECT THETA_SKETCH_ESTIMATE(DS_THETA(users_theta)) FROM sk") == 4.0
    # the values path is unchanged beside them
    assert one('SELECT APPROX_COUNT_DISTINCT("user") FROM sk') == 3


def test_a_filter_and_a_group_by_apply_to_the_sketches(stored):
    day_one = "SELECT APPROX_COUNT_DISTINCT_DS_THETA(users_theta) FILTER (WHERE __time < '2024-01-02') FROM sk"
    assert one(day_one) == 3
    by_day = query.run_query(
        sql="SELECT TIME_FLOOR(__time, 'P1D') d, APPROX_COUNT_DISTINCT(users_hll) n "
        "FROM sk GROUP BY 1 ORDER BY 1",
        druid_sql=True,
    ).rows
    assert [n for _, n in by_day] == [3, 2]
    both = (
        "SELECT THETA_SKETCH_ESTIMATE(THETA_SKETCH_INTERSECT("
        "DS_THETA(users_theta) FILTER (WHERE __time < '2024-01-02'), "
        "DS_THETA(users_theta) FILTER (WHERE __time >= '2024-01-02'))) FROM sk"
    )
    assert one(both) == 1.0  # {c}


def test_a_sketch_in_a_result_is_base64_as_druid_writes_it(stored, api_client):
    response = api_client.post(
        "/druid/v2/sql", {"query": "SELECT DS_THETA(users_theta) AS s FROM sk"}, format="json"
    )
    assert response.status_code == 200, response.content
    sketch = ds.compact_theta_sketch.deserialize(base64.b64decode(response.json()[0]["s"]))
    assert sketch.get_estimate() == 4.0
