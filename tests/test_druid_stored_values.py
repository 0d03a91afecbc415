"""Values a spec stores are Druid's: ingested on real Spark (`run_ingest`, what
the worker runs), then the written segments are queried with DuckDB, as the
Broker surface reads them.

- A `json_value()` transform that finds nothing (or a JSON null) stores NULL,
  so `WHERE col IS NULL` counts those rows (it stored the text "null").
- Booleans are longs, as Druid stores them with `druid.expressions.useStrictBooleans`
  (the default): an array of booleans in an `auto` dimension is `[1,0,null]`,
  and a scalar boolean, in an `auto` dimension or found by schema discovery, is
  a long 1/0 (Druid's schema-design docs: longs when useStrictBooleans is true,
  the default).
- A transform reads `__time` as the row's timestamp in epoch millis.

Two ingestions (one with listed dimensions, one discovering them) serve all tests.
"""

from __future__ import annotations

import json

import duckdb
import pytest

from metastore.druid.tasks import validate_task_spec

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
TRANSFORMS = {
    "t_null": "json_value(a_null, '$[0]')",
    "t_missing": "json_value(obj, '$.nope')",
    "t_x": "json_value(obj, '$.x')",
    "t_auto": "json_value(obj, '$.z')",
    "day": "timestamp_extract(__time, 'DAY')",
    "millis": "__time",
}
LISTED = [
    "t_null",
    "t_missing",
    "t_x",
    {"type": "auto", "name": "t_auto"},
    {"type": "long", "name": "day"},
    {"type": "long", "name": "millis"},
    {"type": "auto", "name": "a_bool"},
    {"type": "auto", "name": "a_null"},
    {"type": "auto", "name": "flag"},
]


def _ingest(work, *, dimensions, transforms, discovery=False):
    """A DuckDB connection with a view `stored` over the segments a spec of EVENTS wrote."""
    from workers.jobs.ingest import run_ingest
    from workers.spark import get_spark

    dimensions_spec = {"dimensions": dimensions}
    if discovery:
        dimensions_spec["useSchemaDiscovery"] = True
    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "stored_values",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": dimensions_spec,
                "metricsSpec": [{"type": "count", "name": "count"}],
                "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "NONE"},
                "transformSpec": {
                    "transforms": [
                        {"type": "expression", "name": n, "expression": e}
                        for n, e in transforms.items()
                    ]
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(map(json.dumps, EVENTS))},
                "inputFormat": {"type": "json"},
            },
        },
    }
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    result = run_ingest(get_spark(), ingestion, work_dir=work, job_group=work.name)
    files = [s.path for s in result.segments]
    db = duckdb.connect()
    db.execute(f"CREATE VIEW stored AS SELECT * FROM read_parquet({files!r}, union_by_name=true)")
    return db


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    return _ingest(tmp_path_factory.mktemp("listed"), dimensions=LISTED, transforms=TRANSFORMS)


@pytest.fixture(scope="module")
def discovered(tmp_path_factory):
    # json_value reads a discovered nested field (a Spark struct) as JSON
    return _ingest(
        tmp_path_factory.mktemp("discovered"),
        dimensions=[],
        transforms={"t_x": TRANSFORMS["t_x"]},
        discovery=True,
    )


def _json(stored: str) -> str:
    """Stored JSON text, normalised (compared as text: in Python, True == 1)."""
    return json.dumps(json.loads(stored))


def test_json_value_finding_nothing_stores_null(listed):
    def nulls(column: str) -> int:
        return listed.execute(f"SELECT count(*) FROM stored WHERE {column} IS NULL").fetchone()[0]

    assert nulls("t_null") == 2
    assert nulls("t_missing") == 2
    assert nulls("t_auto") == 2
    assert listed.execute("SELECT t_x FROM stored ORDER BY __time").fetchall() == [("1",), (None,)]


def test_boolean_arrays_in_auto_dimensions_are_stored_as_longs(listed):
    rows = listed.execute("SELECT a_bool, a_null FROM stored ORDER BY __time").fetchall()
    assert [_json(a) for a, _ in rows] == ["[1, 0, null]", "[null, 0, 1]"]
    assert [_json(n) for _, n in rows] == ["[null, null, null]"] * 2


def test_scalar_booleans_in_auto_dimensions_are_stored_as_longs(listed):
    rows = listed.execute("SELECT flag FROM stored ORDER BY __time").fetchall()
    assert [(type(flag), flag) for (flag,) in rows] == [(int, 1), (int, 0)]


def test_discovered_booleans_are_stored_as_longs(discovered):
    rows = discovered.execute("SELECT flag, a_bool, t_x FROM stored ORDER BY __time").fetchall()
    assert [(type(flag), flag) for flag, _, _ in rows] == [(int, 1), (int, 0)]
    assert [_json(a) for _, a, _ in rows] == ["[1, 0, null]", "[null, 0, 1]"]
    assert [t for _, _, t in rows] == ["1", None]


def test_transforms_read_the_rows_timestamp_as_time(listed):
    rows = listed.execute("SELECT day, millis FROM stored ORDER BY __time").fetchall()
    assert rows == [(1, 1640995200000), (2, 1641081600000)]
