"""Druid's own SQL test queries for window functions, joins, arrays/UNNEST and nested
JSON (tests/druid_sql_sweep_relational.py) through /druid/v2/sql: the share answered as
Druid answers them may only grow. STRATA_SQL_SWEEP_REPORT writes each miss and its cause."""

from __future__ import annotations

import pytest
from druid_sql_sweep import run
from druid_sql_sweep_relational import CASES, REFUSED
from druid_test_data import publish_foo, publish_lookyloo, publish_nested, publish_numfoo

pytestmark = pytest.mark.django_db

PASSING_AT_LEAST = 111  # of 114; 80 before the fixes of this sweep (issue 26)


def test_druid_relational_sql_test_queries_answer_as_druid_answers_them(api_client, inline_spec):
    for publish in (publish_foo, publish_numfoo, publish_nested, publish_lookyloo):
        publish(inline_spec)
    outcomes = run(api_client, CASES)
    passed = sum(o.ok for o in outcomes)
    assert passed >= PASSING_AT_LEAST, [o for o in outcomes if not o.ok]
    for name, query in REFUSED:
        response = api_client.post("/druid/v2/sql", {"query": query}, format="json")
        assert response.status_code == 400, name
        assert response.json()["errorMessage"].startswith("query: Incorrect syntax"), name
