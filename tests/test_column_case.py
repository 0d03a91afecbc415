"""Druid column names are case-sensitive; Spark's are not by default
(`spark.sql.caseSensitive=false`). On real Spark (`run_ingest`): input columns `a`
and `A` are two columns, and a transform naming `B` where the input has `b` reads
a missing column (null, as Druid), not `b`."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from metastore.druid.tasks import validate_task_spec


def _rows(tmp_path, data: list[str], fmt: dict, dims: list[str], transforms=()) -> list[dict]:
    from workers.jobs.ingest import run_ingest
    from workers.spark import get_spark

    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "case",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": dims},
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
                "transformSpec": {"transforms": list(transforms)},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(data)},
                "inputFormat": fmt,
            },
        },
    }
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    work = tmp_path / str(abs(hash(json.dumps(spec))))
    result = run_ingest(get_spark(), ingestion, work_dir=work, job_group=work.name)
    rows = [r for s in result.segments for r in pq.read_table(s.path).to_pylist()]
    return sorted(rows, key=lambda r: r["a"])


@pytest.mark.spark
def test_columns_differing_in_case_are_two_columns(tmp_path):
    csv = ["ts,a,A", "2022-01-01T00:00:00Z,x,X", "2022-01-01T00:00:00Z,y,Y"]
    fmt = {"type": "csv", "findColumnsFromHeader": True}
    rows = _rows(tmp_path, csv, fmt, ["a", "A"])
    assert [(r["a"], r["A"]) for r in rows] == [("x", "X"), ("y", "Y")]
    lines = [json.dumps({"ts": "2022-01-01T00:00:00Z", "a": v, "A": v.upper()}) for v in "xy"]
    rows = _rows(tmp_path, lines, {"type": "json"}, ["a", "A"])
    assert [(r["a"], r["A"]) for r in rows] == [("x", "X"), ("y", "Y")]


@pytest.mark.spark
def test_a_transform_naming_another_case_reads_a_missing_column(tmp_path):
    lines = [json.dumps({"ts": "2022-01-01T00:00:00Z", "a": "x", "b": "low"})]
    transforms = [{"type": "expression", "name": "t", "expression": "B"}]
    rows = _rows(tmp_path, lines, {"type": "json"}, ["a", "t"], transforms)
    assert [(r["a"], r.get("t")) for r in rows] == [("x", None)]
