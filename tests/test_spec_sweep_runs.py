"""Druid spec shapes found by the spec sweep whose meaning shows only when they
run: the validated spec through `run_ingest` (what the worker calls) on Spark."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from metastore.druid.tasks import validate_task_spec

ROWS = "\n".join(
    [
        '{"ts": "2024-01-01T00:00:00Z", "page": "A", "n": 1, "tag": "x", "skip": "s"}',
        '{"ts": "2024-01-01T01:00:00Z", "page": "B", "n": 2, "tag": null, "skip": "s"}',
    ]
)


def _run(tmp_path, dimensions_spec: dict, tuning: dict | None = None) -> list[dict]:
    from workers.jobs.ingest import run_ingest
    from workers.spark import get_spark

    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "sweep_run",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": dimensions_spec,
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": ROWS},
                "inputFormat": {"type": "json"},
            },
            "tuningConfig": tuning or {"type": "index_parallel"},
        },
    }
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    result = run_ingest(get_spark(), ingestion, work_dir=tmp_path / "work", job_group="sweep")
    rows = [r for s in result.segments for r in pq.read_table(s.path).to_pylist()]
    return sorted(rows, key=lambda r: r["__time"])


@pytest.mark.spark
def test_schema_discovery_adds_the_unlisted_fields_to_the_listed_dimensions(tmp_path):
    # Druid (MapInputRowParser.findDimensions): with useSchemaDiscovery the listed
    # dimensions come first, then every other input field but the excluded ones.
    # Partitioning may name a discovered one.
    rows = _run(
        tmp_path,
        {
            "dimensions": [{"type": "long", "name": "n"}],
            "dimensionExclusions": ["skip"],
            "useSchemaDiscovery": True,
        },
        tuning={
            "type": "index_parallel",
            "forceGuaranteedRollup": True,
            "partitionsSpec": {"type": "hashed", "numShards": 1, "partitionDimensions": ["page"]},
        },
    )
    assert [k for k in rows[0] if not k.startswith("__")] == ["n", "page", "tag"]
    assert [(r["n"], r["page"], r["tag"]) for r in rows] == [(1, "A", "x"), (2, "B", None)]
