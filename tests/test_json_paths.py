"""flattenSpec path fields into one field parse it once, and read what
get_json_object reads.

500 path fields into one object used to parse each row 500 times (7x raw Spark
in bench/wide.py). The shared parse must not change a single value: every field
is compared with Spark's get_json_object over the same lines, including the
shapes where the paths cannot share a schema.
"""

from __future__ import annotations

import json

import pytest

from metastore.druid.tasks import validate_task_spec
from workers.jobs.json_paths import accessor, shared_schema


def test_paths_into_objects_and_arrays_share_one_schema():
    schema = shared_schema([["a", "b"], ["a", "c", 0], ["a", "c", 2], ["d"]])
    assert schema == "struct<`a`: struct<`b`: string, `c`: array<string>>, `d`: string>"


@pytest.mark.parametrize(
    "paths",
    [
        [["a"], ["a", "b"]],  # one path stops where another goes on
        [["a", 0], ["a", "b"]],  # an array and an object
        [["a", 0, "x"], ["a", 1]],  # array elements of two shapes
        [["A"], ["a"]],  # names equal but for case
    ],
)
def test_paths_that_cannot_share_a_schema_are_refused(paths):
    assert shared_schema(paths) is None


def test_accessor_quotes_names_and_reads_indexes_safely():
    assert accessor("p", ["a b", 3, "c`d"]) == "get(p.`a b`, 3).`c``d`"


LINES = [
    {"ts": "2020-01-01", "v": {"a": {"b": "x", "n": 1.50, "e": 1e3}, "arr": [1, [2, 3], {"k": 1}]}},
    {"ts": "2020-01-02", "v": {"a": {"b": None, "n": -7}, "arr": []}},
    {"ts": "2020-01-03", "v": {"a": "not an object", "arr": "nope", "q": 'say "hi"'}},
    {"ts": "2020-01-04", "v": None},
    {"ts": "2020-01-05"},
    {"ts": "2020-01-06", "v": {"a": {"b": {"deep": [1, {"x": True}]}, "n": 12345678901234}}},
    {"ts": "2020-01-07", "v": {"a": {"b": 0, "B": 1}, "arr": [None, None, None, "last"]}},
]

# Shared: $.v.a.b, $.v.a.n, $.v.a.e, $.v.arr[0..3], $.v.q. Not shared: $.w (one path).
PATHS = {
    "ab": "$.v.a.b",
    "an": "$.v.a.n",
    "ae": "$.v.a.e",
    "arr0": "$.v.arr[0]",
    "arr1": "$.v.arr[1]",
    "arr2": "$.v['arr'][2]",
    "arr3": "$.v.arr[3]",
    "q": "$.v.q",
    "alone": "$.w.x",
}


def _spec(paths: dict[str, str], lines: list[dict]) -> dict:
    fields = [{"type": "path", "name": n, "expr": e} for n, e in paths.items()]
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "paths",
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {"dimensions": list(paths)},
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(map(json.dumps, lines))},
                "inputFormat": {
                    "type": "json",
                    "flattenSpec": {"useFieldDiscovery": False, "fields": fields},
                },
            },
        },
    }


def _read_values(paths: dict[str, str], lines: list[dict], scratch) -> dict[str, list]:
    """The flatten fields as the reader hands them to the parse (text)."""
    from workers.jobs.ingest import ingest_session
    from workers.jobs.parsing import read_files
    from workers.spark import get_spark

    ingestion = validate_task_spec(_spec(paths, lines), input_roots=[]).ingestion
    frame, _, _ = read_files(ingest_session(get_spark()), ingestion, scratch)
    rows = sorted(frame.select("ts", *paths).collect(), key=lambda r: r["ts"])
    return {name: [r[name] for r in rows] for name in paths}


def _get_json_object_values(paths: dict[str, str], lines: list[dict]) -> dict[str, list]:
    """What get_json_object reads for each path, line by line (the reference),
    except that a JSON null is NULL, as Druid reads it, where get_json_object
    gives the text 'null' for an array element (no value here is the string)."""
    from workers.spark import get_spark

    spark = get_spark()
    frame = spark.createDataFrame([(json.dumps(line),) for line in lines], "line string")
    quoted = {n: e.replace("'", "\\'") for n, e in paths.items()}
    selects = [f"get_json_object(line, '{e}') AS `{n}`" for n, e in quoted.items()]
    rows = frame.selectExpr("get_json_object(line, '$.ts') AS ts", *selects).collect()
    rows.sort(key=lambda r: r["ts"])
    return {name: [None if r[name] == "null" else r[name] for r in rows] for name in paths}


@pytest.mark.spark
def test_shared_parse_reads_what_get_json_object_reads(strata_dirs, tmp_path):
    got = _read_values(PATHS, LINES, tmp_path)
    want = _get_json_object_values(PATHS, LINES)
    for name in PATHS:
        assert got[name] == want[name], name


@pytest.mark.spark
def test_the_paths_into_one_field_parse_it_once(strata_dirs, tmp_path):
    from workers.jobs.ingest import ingest_session
    from workers.jobs.parsing import parse_input
    from workers.spark import get_spark

    paths = {f"c{i}": f"$.v.c{i}" for i in range(40)}
    lines = [{"ts": "2020-01-01", "v": {f"c{i}": i for i in range(40)}}]
    ingestion = validate_task_spec(_spec(paths, lines), input_roots=[]).ingestion
    parsed = parse_input(ingest_session(get_spark()), ingestion, scratch_dir=tmp_path)
    plan = parsed.parsed._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count(" AS __parsed_") == 1  # one parse of `v`, its own projection
    assert "get_json_object" not in plan
    assert [parsed.parsed.first()[f"c{i}"] for i in range(40)] == [str(i) for i in range(40)]
