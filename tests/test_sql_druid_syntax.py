"""Druid SQL's own forms rewritten on DuckDB's tokens (metastore/sql_druid_syntax.py):
only real calls change, never text inside a string, a quoted name or a comment."""

from __future__ import annotations

import pytest

from metastore.sql_druid_syntax import SyntaxRefused, rewrite, split_explain


@pytest.mark.parametrize(
    ("druid", "engine"),
    [
        (
            "SELECT FLOOR(__time TO YEAR) FROM t",
            "SELECT druid_floor_to(__time, 'YEAR') FROM t",
        ),
        (
            'SELECT CEIL("__time" to month), FLOOR(x) FROM t',
            "SELECT druid_ceil_to(\"__time\", 'MONTH'), FLOOR(x) FROM t",
        ),
        (
            "SELECT FLOOR(TIME_PARSE(a) TO DAY) FROM t",
            "SELECT druid_floor_to(TIME_PARSE(a), 'DAY') FROM t",
        ),
        (
            "SELECT JSON_VALUE(j, '$.a' RETURNING BIGINT ARRAY) FROM t",
            "SELECT druid_json_value_returning(j, '$.a', 'BIGINT ARRAY') FROM t",
        ),
        (
            "SELECT JSON_OBJECT(KEY 'a' VALUE 1, KEY 'b' VALUE x) FROM t",
            "SELECT JSON_OBJECT( 'a' , 1,  'b' , x) FROM t",
        ),
        ("SELECT JSON_OBJECT('a': 1) FROM t", "SELECT JSON_OBJECT('a', 1) FROM t"),
        ("SELECT CAST(x AS VARCHAR ARRAY) FROM t", "SELECT CAST(x AS VARCHAR[]) FROM t"),
        # Text that only looks like Druid's forms stays as it is.
        ("SELECT 'FLOOR(a TO b)' FROM t", "SELECT 'FLOOR(a TO b)' FROM t"),
        ('SELECT "FLOOR(a TO b)" FROM t', 'SELECT "FLOOR(a TO b)" FROM t'),
        (
            "SELECT 1 -- FLOOR(a TO b), JSON_OBJECT(KEY 1 VALUE 2)\nFROM t",
            "SELECT 1 -- FLOOR(a TO b), JSON_OBJECT(KEY 1 VALUE 2)\nFROM t",
        ),
    ],
)
def test_druid_forms_become_calls_the_engine_reads(druid, engine):
    assert rewrite(druid) == engine


def test_explain_plan_for_is_split_from_the_query_it_explains():
    assert split_explain("EXPLAIN PLAN FOR SELECT 1") == (True, "SELECT 1")
    assert split_explain("explain plan for\n  select 2") == (True, "select 2")
    assert split_explain("SELECT 'EXPLAIN' AS x") == (False, "SELECT 'EXPLAIN' AS x")
    with pytest.raises(SyntaxRefused, match="EXPLAIN PLAN FOR"):
        split_explain("EXPLAIN SELECT 1")


def test_an_unclosed_call_is_refused_in_words():
    with pytest.raises(SyntaxRefused, match="not closed"):
        rewrite("SELECT FLOOR(__time TO DAY FROM t")
