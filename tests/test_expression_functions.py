"""The one function table of Druid's expressions (metastore/druid/expressions/functions.py)
and the dialects that spell it for each engine.

- both dialects spell the same things, so a function written once over a dialect
  runs on both engines;
- a row that says its function is null when any argument is null (STRICT) is
  null, on DuckDB and on Spark, for every documented example with a null in place
  of each of its arguments in turn (where the argument may be a null at all:
  a period or a type must be a literal);
- arguments that must be literal numbers or keys are refused by name, not with a
  Python error.
"""

from __future__ import annotations

import duckdb
import pytest

from metastore.druid.expressions import ExpressionError, parse, translate, tree
from metastore.druid.expressions.duckdb_sql import DUCKDB, to_duckdb
from metastore.druid.expressions.emit import emit
from metastore.druid.expressions.functions import FUNCTIONS, REFUSED, STRICT, TABLE
from metastore.druid.expressions.periods import EXTRACT_UNITS
from metastore.druid.expressions.spark_sql import SPARK, ident
from metastore.druid.expressions.types import Arg
from tests.druid_expression_cases import CASES, ROW


def test_both_dialects_spell_the_same_things():
    assert set(SPARK.SPELLING) == set(DUCKDB.SPELLING)
    assert (
        set(SPARK.EXTRACT) == set(DUCKDB.EXTRACT) == set(EXTRACT_UNITS) - {"EPOCH", "MILLISECOND"}
    )
    assert set(SPARK.TYPES) == set(DUCKDB.TYPES)


def test_the_table_has_one_row_per_function_and_none_it_refuses():
    names = [row.name for row in TABLE]
    assert len(names) == len(set(names)) == len(FUNCTIONS) > 100
    assert not set(FUNCTIONS) & set(REFUSED)
    for row in TABLE:
        lo, hi = row.arity
        assert row.name == row.name.lower() and lo >= 0 and (hi is None or lo <= hi), row
        assert row.args and all(a in ("text", "num", "long", "double", "any") for a in row.args)
        assert row.nulls, row


def _with_a_null_argument() -> list[tuple[str, int, tree.Call]]:
    """(documented example, argument position, the call with a null there) for every
    example of a STRICT function."""
    calls = []
    for expression, _ in CASES:
        root = parse(expression)
        if not isinstance(root, tree.Call) or root.name not in FUNCTIONS:
            continue
        if FUNCTIONS[root.name].nulls != STRICT:
            continue
        for i in range(len(root.args)):
            args = root.args[:i] + (tree.NullLiteral(),) + root.args[i + 1 :]
            calls.append((expression, i, tree.Call(root.name, args)))
    return calls


def _emitted(emit_one) -> list[tuple[str, int, str]]:
    """(example, position, SQL) of the null calls an engine accepts (a literal-only
    argument that is null is refused, and that is no null result to check)."""
    emitted = []
    for expression, i, call in _with_a_null_argument():
        try:
            emitted.append((expression, i, emit_one(call)))
        except ExpressionError:
            continue
    return emitted


def test_a_strict_function_is_null_when_an_argument_is_null_on_duckdb():
    con = duckdb.connect()
    columns = ", ".join(f'CAST(? AS VARCHAR) AS "{name}"' for name in ROW)
    con.execute(f"CREATE TABLE r AS SELECT {columns}", list(ROW.values()))
    checked = _emitted(lambda call: to_duckdb(call, lambda c: Arg(f'"{c}"', "string")).sql)
    functions = {parse(expression).name for expression, _, _ in checked}
    assert len(checked) > 150 and len(functions) > 50
    for expression, i, sql in checked:
        got = con.execute(f"SELECT {sql} FROM r").fetchone()[0]
        assert got is None, (expression, f"null as argument {i}", got)


@pytest.mark.spark
def test_a_strict_function_is_null_when_an_argument_is_null_on_spark():
    from pyspark.sql import types as T

    from workers.spark import get_spark

    schema = T.StructType([T.StructField(name, T.StringType()) for name in ROW])
    df = get_spark().createDataFrame([tuple(ROW.values())], schema)
    checked = _emitted(lambda call: emit(SPARK, call, lambda c: Arg(ident(c), "string")).sql)
    assert len(checked) > 150
    values = []
    for start in range(0, len(checked), 100):
        batch = checked[start : start + 100]
        columns = [f"{sql} AS `c{n}`" for n, (_, _, sql) in enumerate(batch)]
        values += list(df.selectExpr(*columns).collect()[0])
    for (expression, i, _), got in zip(checked, values, strict=True):
        assert got is None, (expression, f"null as argument {i}", got)


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("parse_long(x, null)", "parse_long(): the radix must be from 2 to 36"),
        ("parse_long(x, 'ten')", "parse_long(): the radix must be from 2 to 36"),
        ("human_readable_decimal_format(x, 'two')", "the precision must be from 0 to 3"),
        ("human_readable_binary_byte_format(x, null)", "the precision must be from 0 to 3"),
        ("json_object(null, 1)", "json_object(): a key must not be null"),
    ],
)
def test_a_literal_argument_of_the_wrong_kind_is_refused_by_name(expression, words):
    for engine in (translate, lambda e: to_duckdb(e, lambda c: Arg(c, "string"))):
        with pytest.raises(ExpressionError, match=words.replace("(", r"\(").replace(")", r"\)")):
            engine(expression)


def test_a_null_escape_or_pattern_means_none():
    duck = duckdb.connect()
    resolve = lambda c: Arg(c, "string")  # noqa: E731
    like = to_duckdb("like('a%b', 'a%', null)", resolve).sql
    assert duck.execute(f"SELECT {like}").fetchone() == (1,)
    iso = to_duckdb("timestamp('2019-01-01T00:00:00Z', null)", resolve).sql
    assert duck.execute(f"SELECT {iso}").fetchone() == (1546300800000,)
    assert "ESCAPE" not in translate("like(x, 'a%', null)").sql
    assert translate("timestamp(x, null)").sql == translate("timestamp(x)").sql


def test_an_array_function_of_a_null_array_is_null_as_in_druid():
    """Druid's array functions give null for a null array input (its
    ArrayScalarFunction / ArraysFunction); DuckDB's list functions took it as empty."""
    duck = duckdb.connect()
    resolve = lambda c: Arg(c, "string")  # noqa: E731
    for expression in (
        "array_append(null, 1)",
        "array_prepend(1, null)",
        "array_concat(null, array(1))",
        "array_concat(array(1), null)",
        "array_set_add(null, 1)",
        "array_set_add_all(array(1), null)",
    ):
        assert duck.execute(f"SELECT {to_duckdb(expression, resolve).sql}").fetchone() == (None,)
    kept = to_duckdb("array_append(array(1), null)", resolve).sql
    assert duck.execute(f"SELECT {kept}").fetchone() == ([1, None],)


def test_a_trailing_dot_in_a_json_path_is_the_path_before_it_as_in_druid():
    """Druid's own qaJsonCols specs write json_query(x, '$.') for the root."""
    duck = duckdb.connect()
    resolve = lambda c: Arg(c, "string")  # noqa: E731
    root = to_duckdb("""json_query('{"a": {"b": 1}}', '$.')""", resolve).sql
    assert duck.execute(f"SELECT {root}").fetchone() == ('{"a":{"b":1}}',)
    inner = to_duckdb("""json_value('{"a": {"b": 1}}', '$.a.b.')""", resolve).sql
    assert duck.execute(f"SELECT {inner}").fetchone() == ("1",)
    assert "'$'" in translate("json_query(x, '$.')").sql
