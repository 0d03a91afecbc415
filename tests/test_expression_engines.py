"""One Druid expression, the same value on both engines: an ingestion transform on
Spark and a native query's expression virtual column on DuckDB, both emitted from
the one parse tree of `metastore.druid.expressions`.

The table is Druid's documented examples (tests/druid_expression_cases.py, from
docs/querying/math-expr.md), over one row read as an ingestion reads JSON: text.
The Spark side runs the worker's own transform step (`apply_transforms`) on a
validated spec; the DuckDB side compiles a native scan query with one virtual
column per case and runs its SQL over a table holding the same row; the same scans
compiled for Spark SQL run on Spark too. Every value is checked against the
documented one, so the engines agree with each other.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from metastore.druid import native
from metastore.druid.tasks import validate_task_spec
from tests.druid_expression_cases import CASES, ROW, same

BATCH = 100  # cases per Spark projection and per native query


def _spec() -> dict:
    transforms = [
        {"type": "expression", "name": f"c{i}", "expression": expr}
        for i, (expr, _) in enumerate(CASES)
    ]
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "exprs",
                "timestampSpec": {"column": "t", "format": "millis"},
                "dimensionsSpec": {"dimensions": [n for n in ROW if n != "t"]},
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


@pytest.fixture(scope="module")
def on_spark() -> list:
    """Every case's value from the ingestion's transform step, on Spark."""
    from pyspark.sql import types as T

    from workers.jobs.parsing import apply_transforms
    from workers.spark import get_spark

    ingestion = validate_task_spec(_spec(), input_roots=[]).ingestion
    schema = T.StructType([T.StructField(name, T.StringType()) for name in ROW])
    transformed = apply_transforms(
        get_spark().createDataFrame([tuple(ROW.values())], schema), ingestion
    )
    names = [f"c{i}" for i in range(len(CASES))]
    values = []
    for start in range(0, len(names), BATCH):
        values += list(transformed.select(*names[start : start + BATCH]).collect()[0])
    return values


SCHEMA = {"__time": "time", **dict.fromkeys(ROW, "string")}


def _native_scans(dialect: str):
    """(names, SQL) of native scans with one expression virtual column per case."""
    for start in range(0, len(CASES), BATCH):
        names = [f"c{i}" for i in range(start, min(start + BATCH, len(CASES)))]
        body = {
            "queryType": "scan",
            "dataSource": "exprs",
            "intervals": ["2019-01-01/2019-01-02"],
            "virtualColumns": [
                {"type": "expression", "name": name, "expression": CASES[int(name[1:])][0]}
                for name in names
            ],
            "columns": names,
        }
        yield names, native.compile_query(body, SCHEMA, dialect=dialect).sql


@pytest.fixture(scope="module")
def on_duckdb() -> list:
    """Every case's value from a native scan's expression virtual columns, on DuckDB."""
    con = duckdb.connect()
    columns = ", ".join(f'CAST(? AS VARCHAR) AS "{name}"' for name in ROW)
    con.execute(
        f"CREATE TABLE exprs AS SELECT TIMESTAMP '2019-01-01 12:00:00' AS __time, {columns}",
        list(ROW.values()),
    )
    values = []
    for names, sql in _native_scans("duckdb"):
        row = con.execute(sql).fetchone()
        values += list(row[len(row) - len(names) :])
    return values


@pytest.fixture(scope="module")
def on_spark_native() -> list:
    """The same native scans compiled for Spark SQL (the engine that scales out)."""
    from datetime import UTC, datetime

    from pyspark.sql import types as T

    from workers.spark import get_spark

    spark = get_spark()
    fields = [T.StructField("__time", T.TimestampType())]
    fields += [T.StructField(name, T.StringType()) for name in ROW]
    row = (datetime(2019, 1, 1, 12, tzinfo=UTC), *ROW.values())
    spark.createDataFrame([row], T.StructType(fields)).createOrReplaceTempView("exprs")
    values = []
    for names, sql in _native_scans("spark"):
        got = spark.sql(sql).collect()[0]
        values += list(got[len(got) - len(names) :])
    return values


@pytest.mark.spark
@pytest.mark.parametrize(("index", "case"), list(enumerate(CASES)), ids=[c[0] for c in CASES])
def test_an_expression_gives_the_documented_value_at_ingestion_and_in_native_queries(
    on_spark, on_duckdb, on_spark_native, index, case
):
    expression, documented = case
    spark, duck, native_spark = on_spark[index], on_duckdb[index], on_spark_native[index]
    assert same(spark, documented), ("ingestion on spark", expression, spark, documented)
    assert same(duck, documented), ("native on duckdb", expression, duck, documented)
    assert same(native_spark, documented), ("native on spark", expression, native_spark)


def test_a_function_duckdb_lacks_is_refused_by_name_in_native_queries():
    body = {
        "queryType": "scan",
        "dataSource": "exprs",
        "intervals": ["2019-01-01/2019-01-02"],
        "virtualColumns": [{"type": "expression", "name": "v", "expression": "json_merge(a, b)"}],
    }
    with pytest.raises(native.NativeQueryError, match=r"function json_merge\(\) is not supported"):
        native.compile_query(body, {"__time": "time", "a": "string", "b": "string"})
