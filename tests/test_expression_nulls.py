"""Druid's null semantics in the expression functions where Spark and DuckDB
differ from Druid and from each other (functions.py's `nulls` column), checked
against Druid's Java (processing/.../math/expr/Function.java, ExprEval.java,
query/expression/RegexpExtractExprMacro.java) through the product's paths: an
ingestion transform on Spark, and a native query's expression virtual column
compiled for DuckDB and run on a connection with Strata's functions.

- array_to_string: a null separator joins with '' (`join != null ? join : ""`);
- string_to_array: a null pattern splits with '' (`split != null ? split : ""`),
  Java's String.split into characters;
- format: a null value prints "null" (java.util.Formatter), width and `-` kept;
  a null format is null;
- strpos: a null start is 0 (`asInt()` of a null is 0), a negative one too
  (`String.indexOf`);
- regexp_extract: a group that took no part in the match is null
  (`Matcher.group`), an empty one that did is ''; the index must be a literal.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from metastore import sketches
from metastore.druid import native
from metastore.druid.tasks import validate_task_spec

ROW = {"s": "hello", "csv": "a,b", "nothing": None}
CASES = [
    ("array_to_string(array('a', 'b'), nothing)", "ab"),
    ("array_to_string(array('a', nothing), '-')", "a-null"),
    ("string_to_array(csv, nothing)", ["a", ",", "b"]),
    ("format('%s|%d|%5s|%-5d|', nothing, nothing, nothing, nothing)", "null|null| null|null |"),
    ("format('%s=%d%%', s, 5)", "hello=5%"),
    ("format(nothing, s)", None),
    ("strpos(s, 'l', nothing)", 2),
    ("strpos(s, 'l', -3)", 2),
    ("strpos(s, 'l', 3)", 3),
    ("regexp_extract('foo', 'f(x)?oo', 1)", None),
    ("regexp_extract('foo', 'f(x?)oo', 1)", ""),
    ("regexp_extract('foo', 'f(x)|oo', 1)", None),
    ("regexp_extract('foo', 'f(o)(x)?', 1)", "o"),
    ("regexp_extract(nothing, 'f(x)?oo', 1)", None),
]


def _as_list(value):
    return list(value) if isinstance(value, list | tuple) else value


@pytest.fixture(scope="module")
def on_duckdb() -> list:
    con = duckdb.connect()
    sketches.register(con)  # Strata's functions, as the query engine has them
    columns = ", ".join(f'CAST(? AS VARCHAR) AS "{name}"' for name in ROW)
    con.execute(
        f"CREATE TABLE exprs AS SELECT TIMESTAMP '2019-01-01 12:00:00' AS __time, {columns}",
        list(ROW.values()),
    )
    names = [f"c{i}" for i in range(len(CASES))]
    body = {
        "queryType": "scan",
        "dataSource": "exprs",
        "intervals": ["2019-01-01/2019-01-02"],
        "virtualColumns": [
            {"type": "expression", "name": n, "expression": e}
            for n, (e, _) in zip(names, CASES, strict=True)
        ],
        "columns": names,
    }
    schema = {"__time": "time", **dict.fromkeys(ROW, "string")}
    row = con.execute(native.compile_query(body, schema).sql).fetchone()
    return [_as_list(v) for v in row[len(row) - len(names) :]]


@pytest.mark.parametrize(("index", "case"), list(enumerate(CASES)), ids=[c[0] for c in CASES])
def test_a_null_argument_gives_druids_answer_in_native_queries(on_duckdb, index, case):
    assert on_duckdb[index] == case[1], case[0]


@pytest.fixture(scope="module")
def on_spark() -> list:
    from pyspark.sql import types as T

    from workers.jobs.parsing import apply_transforms
    from workers.spark import get_spark

    transforms = [
        {"type": "expression", "name": f"c{i}", "expression": e} for i, (e, _) in enumerate(CASES)
    ]
    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "nulls",
                "timestampSpec": {"column": "t", "format": "millis"},
                "dimensionsSpec": {"dimensions": list(ROW)},
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
                "transformSpec": {"transforms": transforms},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": json.dumps(ROW)},
                "inputFormat": {"type": "json"},
            },
        },
    }
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    schema = T.StructType([T.StructField(name, T.StringType()) for name in ROW])
    frame = get_spark().createDataFrame([tuple(ROW.values())], schema)
    got = apply_transforms(frame, ingestion).select(*[f"c{i}" for i in range(len(CASES))])
    return [_as_list(v) for v in got.collect()[0]]


@pytest.mark.spark
@pytest.mark.parametrize(("index", "case"), list(enumerate(CASES)), ids=[c[0] for c in CASES])
def test_a_null_argument_gives_druids_answer_at_ingestion(on_spark, index, case):
    assert on_spark[index] == case[1], case[0]


@pytest.mark.parametrize("index", ["nothing", "-1", "s"])
def test_regexp_extract_takes_its_group_as_a_literal_as_druid_does(index):
    body = {
        "queryType": "scan",
        "dataSource": "exprs",
        "intervals": ["2019-01-01/2019-01-02"],
        "virtualColumns": [
            {"type": "expression", "name": "v", "expression": f"regexp_extract(s, 'h(.)', {index})"}
        ],
    }
    with pytest.raises(native.NativeQueryError, match="regexp_extract"):
        native.compile_query(body, {"__time": "time", "s": "string", "nothing": "string"})


# --- NOT over a filter whose expression is null -----------------------------------------
# Druid (SQL-compatible, the default): an expression filter whose value is null
# matches as "unknown" (ExpressionFilter's matcher: `includeUnknown && value == null`),
# and NOT of unknown is unknown, so the row matches neither the filter nor its NOT.

FILTER_ROWS = [(1, "true", "x"), (0, "abc", "y"), (None, None, None)]


def _timeseries(flt: dict) -> dict:
    return {
        "queryType": "timeseries",
        "dataSource": "f",
        "granularity": "all",
        "intervals": ["2019-01-01/2019-01-02"],
        "filter": flt,
        "aggregations": [{"type": "count", "name": "n"}],
    }


FILTER_SCHEMA = {"__time": "time", "x": "long", "s": "string", "tag": "string"}


def _count(flt: dict) -> int:
    con = duckdb.connect()
    sketches.register(con)
    con.execute("CREATE TABLE f (__time TIMESTAMP, x BIGINT, s VARCHAR, tag VARCHAR)")
    for row in FILTER_ROWS:
        con.execute("INSERT INTO f VALUES (TIMESTAMP '2019-01-01 12:00:00', ?, ?, ?)", list(row))
    plan = native.compile_query(_timeseries(flt), FILTER_SCHEMA)
    return con.execute(plan.sql).fetchall()[0][-1]


def _not(flt: dict) -> dict:
    return {"type": "not", "field": flt}


CONTAINS_X = {
    "type": "arrayContainsElement",
    "column": "tag",
    "elementMatchValueType": "STRING",
    "elementMatchValue": "x",
}


NOT_CASES = [
    ({"type": "expression", "expression": "x > 0"}, 1),
    (_not({"type": "expression", "expression": "x > 0"}), 1),  # 0, not the null row
    (_not({"type": "expression", "expression": "s"}), 1),  # 'abc' is false, null unknown
    (_not(_not({"type": "expression", "expression": "x > 0"})), 1),
    (CONTAINS_X, 1),
    (_not(CONTAINS_X), 1),  # 'y'; a null row holds nothing, matched by neither
]


@pytest.mark.parametrize(("flt", "matched"), NOT_CASES)
def test_not_of_a_null_expression_matches_neither_way(flt, matched):
    assert _count(flt) == matched


@pytest.mark.spark
def test_not_of_a_null_expression_matches_neither_way_on_spark_sql():
    from datetime import UTC, datetime

    from workers.spark import get_spark

    spark = get_spark()
    when = datetime(2019, 1, 1, 12, tzinfo=UTC)
    frame = spark.createDataFrame(
        [(when, *row) for row in FILTER_ROWS], "__time timestamp, x bigint, s string, tag string"
    )
    frame.createOrReplaceTempView("f")
    for flt, matched in NOT_CASES:
        plan = native.compile_query(_timeseries(flt), FILTER_SCHEMA, dialect="spark")
        assert spark.sql(plan.sql).collect()[0][-1] == matched, flt
