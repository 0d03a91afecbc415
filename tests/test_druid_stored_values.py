"""Values a spec stores are Druid's: ingested on real Spark (`run_ingest`, what
the worker runs), then the written segments are queried with DuckDB, as the
Broker surface reads them.

- A `json_value()` transform that finds nothing (or a JSON null) stores NULL,
  so `WHERE col IS NULL` counts those rows (it stored the text "null").
- Booleans are longs, as Druid stores them with `druid.expressions.useStrictBooleans`
  (the default): an array of booleans in an `auto` dimension is `[1,0,null]`,
  and a boolean found by schema discovery is a long 1/0.
- A transform reads `__time` as the row's timestamp in epoch millis.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from metastore.specs import validate_task_spec

pytestmark = pytest.mark.spark

# The rows of Druid's qaArray test data (sql/src/test/quidem/qatests/qaArray), cut down.
EVENTS = [
    {
        "ts": "2022-01-01T00:00:00Z",
        "a_bool": [True, False, None],
        "a_null": [None, None, None],
        "obj": {"x": 1, "z": None},
        "flag": True,
    },
    {
        "ts": "2022-01-02T00:00:00Z",
        "a_bool": [None, False, True],
        "a_null": [None, None, None],
        "obj": {"x": None},
        "flag": False,
    },
]


def _stored(inline_spec, tmp_path, *, dimensions, transforms=(), discovery=False):
    """A DuckDB relation name over the segments a spec of EVENTS wrote."""
    from workers.jobs.ingest import run_ingest
    from workers.spark import get_spark

    spec = inline_spec(
        "stored_values",
        data="\n".join(json.dumps(e) for e in EVENTS),
        dimensions=dimensions,
        metrics=[{"type": "count", "name": "count"}],
    )
    schema = spec["spec"]["dataSchema"]
    schema["transformSpec"] = {"transforms": list(transforms)}
    schema["dimensionsSpec"]["dimensions"] = list(dimensions)  # [] discovers them
    if discovery:
        schema["dimensionsSpec"]["useSchemaDiscovery"] = True
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    result = run_ingest(get_spark(), ingestion, work_dir=tmp_path / "work", job_group=tmp_path.name)
    files = [s.path for s in result.segments]
    db = duckdb.connect()
    db.execute(f"CREATE VIEW stored AS SELECT * FROM read_parquet({files!r}, union_by_name=true)")
    return db


def test_json_value_finding_nothing_stores_null(inline_spec, tmp_path):
    transforms = [
        {"type": "expression", "name": "t_null", "expression": "json_value(a_null, '$[0]')"},
        {"type": "expression", "name": "t_missing", "expression": "json_value(obj, '$.nope')"},
        {"type": "expression", "name": "t_x", "expression": "json_value(obj, '$.x')"},
        {"type": "expression", "name": "t_auto", "expression": "json_value(obj, '$.z')"},
    ]
    dims = ["t_null", "t_missing", "t_x", {"type": "auto", "name": "t_auto"}]
    db = _stored(inline_spec, tmp_path, dimensions=dims, transforms=transforms)

    def nulls(column: str) -> int:
        return db.execute(f"SELECT count(*) FROM stored WHERE {column} IS NULL").fetchone()[0]

    assert nulls("t_null") == 2
    assert nulls("t_missing") == 2
    assert nulls("t_auto") == 2
    assert db.execute("SELECT t_x FROM stored ORDER BY __time").fetchall() == [("1",), (None,)]


def test_boolean_arrays_in_auto_dimensions_are_stored_as_longs(inline_spec, tmp_path):
    dims = [{"type": "auto", "name": "a_bool"}, {"type": "auto", "name": "a_null"}]
    db = _stored(inline_spec, tmp_path, dimensions=dims)
    rows = db.execute("SELECT a_bool, a_null FROM stored ORDER BY __time").fetchall()
    # compared as JSON text: in Python, True == 1
    assert [_json(a) for a, _ in rows] == ["[1, 0, null]", "[null, 0, 1]"]
    assert [_json(n) for _, n in rows] == ["[null, null, null]"] * 2


def test_discovered_booleans_are_stored_as_longs(inline_spec, tmp_path):
    # json_value reads a discovered nested field (a Spark struct) as JSON
    transforms = [{"type": "expression", "name": "t_x", "expression": "json_value(obj, '$.x')"}]
    db = _stored(inline_spec, tmp_path, dimensions=[], transforms=transforms, discovery=True)
    rows = db.execute("SELECT flag, a_bool, t_x FROM stored ORDER BY __time").fetchall()
    assert [(type(flag), flag) for flag, _, _ in rows] == [(int, 1), (int, 0)]
    assert [_json(a) for _, a, _ in rows] == ["[1, 0, null]", "[null, 0, 1]"]
    assert [t for _, _, t in rows] == ["1", None]


def _json(stored: str) -> str:
    return json.dumps(json.loads(stored))


def test_transforms_read_the_rows_timestamp_as_time(inline_spec, tmp_path):
    transforms = [
        {"type": "expression", "name": "day", "expression": "timestamp_extract(__time, 'DAY')"},
        {"type": "expression", "name": "millis", "expression": "__time"},
    ]
    dims = [{"type": "long", "name": "day"}, {"type": "long", "name": "millis"}]
    db = _stored(inline_spec, tmp_path, dimensions=dims, transforms=transforms)
    rows = db.execute("SELECT day, millis FROM stored ORDER BY __time").fetchall()
    assert rows == [(1, 1640995200000), (2, 1641081600000)]
