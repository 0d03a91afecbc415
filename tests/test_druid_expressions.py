"""Druid's expression functions, translated to Spark SQL and run on Spark.

The cases come from Druid's "Expressions" reference (docs/querying/math-expr.md):
the values it states (the logical operator examples, `human_readable_*`...) and,
where it states none, the value its description of the function implies
(`array_offset` is 0-based, `strpos` returns -1 when not found, ...). Every case
runs through the real translation, all in one select over one input row, so the
whole table costs a few Spark jobs. Refusals name the function.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metastore.druid.expressions import (
    FUNCTIONS,
    REFUSED,
    ExpressionError,
    translate,
    translate_predicate,
)
from tests.druid_expression_cases import CASES, ROW, same

APPLY = ("map", "filter", "fold", "any", "all", "cartesian_map", "cartesian_fold")

STATUS_DOC = Path(__file__).resolve().parent.parent / "docs" / "druid-expression-status.md"


@pytest.fixture(scope="module")
def evaluated():
    """Every case's value, from selects over the one input row."""
    from pyspark.sql import types as T

    from workers.spark import get_spark

    spark = get_spark()
    schema = T.StructType([T.StructField(name, T.StringType()) for name in ROW])
    df = spark.createDataFrame([tuple(ROW.values())], schema)
    kinds = dict.fromkeys(ROW, "string")
    columns = [f"{translate(expr, kinds).sql} AS `c{i}`" for i, (expr, _) in enumerate(CASES)]
    values = []
    for start in range(0, len(columns), 100):  # a few wide selects, not one per case
        values += list(df.selectExpr(*columns[start : start + 100]).collect()[0])
    return values


@pytest.mark.spark
@pytest.mark.parametrize(("index", "case"), list(enumerate(CASES)), ids=[c[0] for c in CASES])
def test_druid_expression_evaluates_to_druids_value(evaluated, index, case):
    expression, expected = case
    assert same(evaluated[index], expected), (expression, evaluated[index], expected)


@pytest.mark.spark
def test_an_expression_as_a_filter_keeps_the_rows_where_it_is_true():
    from workers.spark import get_spark

    rows = [("100", "a"), ("5", None), (None, "true")]
    df = get_spark().createDataFrame(rows, "n string, s string")
    predicates = ["n > 50", "s == 'a'", "s", "n", "notnull(s) && n < 10"]
    sql = [f"{translate_predicate(p).sql} AS `p{i}`" for i, p in enumerate(predicates)]
    got = [tuple(r) for r in df.selectExpr(*sql).collect()]
    assert got == [
        (True, True, False, True, False),
        (False, False, False, True, False),  # null is false
        (False, False, True, False, False),
    ]


# --- refusals, and the status table kept in step with the code --------------------------


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_function_strata_does_not_translate_is_refused_by_name(name):
    with pytest.raises(ExpressionError, match=rf"function {name}\(\) is not supported: \w"):
        translate(f"{name}(x, 'y')")


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("no_such_function(x)", "function no_such_function() is not supported"),
        ("mv_length(x)", "Druid SQL function"),
        ("time_floor(__time, 'PT1H')", "timestamp_floor"),
        ("json_value(x, '$..a')", "JSONPath '$..a' is not supported"),
        ("json_value(x, '$.a', 'BOOLEAN')", "type 'BOOLEAN' is not supported"),
        ("timestamp_floor(t, 'P1M1D')", "period 'P1M1D' is not supported"),
        ("timestamp_extract(t, 'FORTNIGHT')", "unit 'FORTNIGHT' is not supported"),
        ("cast(x, 'BOOLEAN')", "cast to 'BOOLEAN' is not supported"),
        ("json_object('a')", "in pairs"),
        ("substring(x, 1)", "substring() takes 3 arguments, not 2"),
        ("map(x, [1])", "map() takes a lambda"),
        ("(x) -> x", "a lambda is only an argument"),
    ],
)
def test_an_untranslatable_expression_is_refused_saying_why(expression, words):
    with pytest.raises(ExpressionError, match=re.escape(words)):
        translate(expression)


def test_the_status_table_lists_every_function_with_the_codes_status():
    """docs/druid-expression-status.md has a row per function of Druid's reference;
    a "supported" row is translated, a "refused" row is refused with its reason."""
    rows = re.findall(r"^\| `([a-zA-Z0-9_]+)` \| (supported|refused)", STATUS_DOC.read_text(), re.M)
    assert len(rows) > 100
    for name, status in rows:
        key = name.lower()
        if status == "supported":
            assert key in FUNCTIONS or key in APPLY, name
        else:
            assert key in REFUSED, name
    listed = {name.lower() for name, _ in rows}
    assert set(FUNCTIONS) <= listed and set(REFUSED) <= listed
