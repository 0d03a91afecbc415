"""Druid's own SQL test queries over Druid's test dataSources, through /druid/v2/sql
(tests/druid_sql_sweep.py): the share answered as Druid answers them may only grow.
Set STRATA_SQL_SWEEP_REPORT to a file path to write each miss and its cause there
(`druid_sql_sweep.run`)."""

from __future__ import annotations

import pytest
from druid_sql_sweep import run
from druid_test_data import publish_foo, publish_numfoo

pytestmark = pytest.mark.django_db

PASSING_AT_LEAST = 186  # of 189; 137 before this sweep (issue 26 item 7)


def test_druid_sql_test_queries_answer_as_druid_answers_them(api_client, inline_spec):
    publish_foo(inline_spec)
    publish_numfoo(inline_spec)
    outcomes = run(api_client)
    passed = sum(o.ok for o in outcomes)
    assert passed >= PASSING_AT_LEAST, [o for o in outcomes if not o.ok]
