"""Druid spec shapes found by the spec sweep whose meaning shows only when they
run: the validated spec through `run_ingest` (what the worker calls) on Spark."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from metastore.druid.tasks import validate_task_spec

ROWS = "\n".join(
    [
        '{"ts": "2024-01-01T00:00:00Z", "page": "A", "n": 1, "ok": true, "skip": "s"}',
        '{"ts": "2024-01-01T01:00:00Z", "page": "B", "n": 2, "ok": false, "skip": "s"}',
    ]
)


def _run(
    tmp_path,
    dimensions_spec: dict,
    tuning: dict | None = None,
    transforms: list | None = None,
    **io,
) -> list[dict]:
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
                "transformSpec": {"transforms": transforms or []},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": io.get("data", ROWS)},
                "inputFormat": io.get("input_format", {"type": "json"}),
            },
            "tuningConfig": tuning or {"type": "index_parallel"},
        },
    }
    if "timestamp" in io:
        spec["spec"]["dataSchema"]["timestampSpec"] = io["timestamp"]
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    result = run_ingest(get_spark(), ingestion, work_dir=tmp_path / "work", job_group="sweep")
    rows = [r for s in result.segments for r in pq.read_table(s.path).to_pylist()]
    return sorted(rows, key=lambda r: r["__time"])


@pytest.mark.spark
def test_schema_discovery_adds_the_unlisted_fields_to_the_listed_dimensions(tmp_path):
    # Druid (MapInputRowParser.findDimensions): with useSchemaDiscovery the listed
    # dimensions come first, then every other input field but the excluded ones.
    # Partitioning may name a discovered one (range without rollup samples its keys
    # at random: Spark refuses rand() inside the aggregate). Expressions read a discovered JSON
    # boolean as Druid does, a long 1/0 (Druid's qaJsonCols: json_query(s_bool, '$.')).
    rows = _run(
        tmp_path,
        {
            "dimensions": [{"type": "long", "name": "n"}, {"type": "long", "name": "ok10"}],
            "dimensionExclusions": ["skip"],
            "useSchemaDiscovery": True,
        },
        tuning={
            "type": "index_parallel",
            "forceGuaranteedRollup": True,
            "partitionsSpec": {
                "type": "range",
                "partitionDimensions": ["page"],
                "targetRowsPerSegment": 1,
            },
        },
        transforms=[{"type": "expression", "name": "ok10", "expression": "ok * 10"}],
    )
    assert [k for k in rows[0] if not k.startswith("__")] == ["n", "ok10", "ok", "page"]
    assert [(r["n"], r["ok10"], r["ok"], r["page"]) for r in rows] == [
        (1, 10, 1, "A"),
        (2, 0, 0, "B"),
    ]


@pytest.mark.spark
def test_lines_input_and_a_transform_that_replaces_the_timestamp(tmp_path):
    # data-formats.md "Lines": each line is one row of one string field, `line`;
    # ingestion-spec.md: a transform named __time replaces the row's timestamp.
    rows = _run(
        tmp_path,
        {"dimensions": ["line"]},
        transforms=[
            {
                "type": "expression",
                "name": "__time",
                "expression": "timestamp_parse(left(line, 20))",
            }
        ],
        data="2024-01-02T03:00:00Z first\n2024-01-05T00:00:00Z second",
        input_format={"type": "lines"},
        timestamp={"column": "t", "missingValue": "2000-01-01T00:00:00Z"},
    )
    assert [(str(r["__time"])[:19], r["line"]) for r in rows] == [
        ("2024-01-02 03:00:00", "2024-01-02T03:00:00Z first"),
        ("2024-01-05 00:00:00", "2024-01-05T00:00:00Z second"),
    ]


@pytest.mark.spark
def test_csv_files_skip_rows_then_read_their_own_headers(tmp_path):
    # Druid's CSV reader skips skipHeaderRows lines, then takes each file's own
    # header; a file without the timestamp column has only unparseable rows.
    from workers.jobs.ingest import run_ingest
    from workers.jobs.input_files import resolve_local_inputs
    from workers.spark import get_spark

    root = tmp_path / "in"
    root.mkdir()
    (root / "a.csv").write_text("exported by x\nts,page,n\n2024-01-01T00:00:00Z,A,1\n")
    (root / "b.csv").write_text("exported by y\nn,ts,page\n2,2024-01-01T01:00:00Z,B\n")
    (root / "c.csv").write_text("exported by z\npage,n\nC,3\n")
    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "sweep_csv",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page", {"type": "long", "name": "n"}]},
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(root), "filter": "*.csv"},
                "inputFormat": {"type": "csv", "findColumnsFromHeader": True, "skipHeaderRows": 1},
            },
            "tuningConfig": {"type": "index_parallel", "maxSavedParseExceptions": 5},
        },
    }
    ingestion = validate_task_spec(spec, input_roots=[root]).ingestion
    ingestion = resolve_local_inputs(ingestion, input_roots=[root])
    result = run_ingest(get_spark(), ingestion, work_dir=tmp_path / "work", job_group="sweep")
    rows = [r for s in result.segments for r in pq.read_table(s.path).to_pylist()]
    assert sorted((r["page"], r["n"]) for r in rows) == [("A", 1), ("B", 2)]
    assert result.report["rowStats"]["unparseable"] == 1
    (sample,) = result.report["parseExceptionSamples"]
    assert sample["reason"].startswith("unparseable timestamp")


@pytest.mark.spark
def test_regex_input_reads_each_groups_and_marks_a_line_that_does_not_match(tmp_path):
    # Druid's RegexInputFormat: the whole line must match; groups are the columns.
    rows = _run(
        tmp_path,
        {"dimensions": ["page", {"type": "long", "name": "n"}]},
        data="2024-01-01T00:00:00Z A 1\nnot a row\n2024-01-01T01:00:00Z B 2 trailing",
        input_format={
            "type": "regex",
            "pattern": r"(\S+) (\w+) (\d+)",
            "columns": ["ts", "page", "n"],
        },
    )
    assert [(r["page"], r["n"]) for r in rows] == [("A", 1)]
