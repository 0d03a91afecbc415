"""Druid's RegexInputFormat on Spark (issue 27): a group that took no part in
the match is null, as Java's Matcher.group gives it to Druid, and a group that
matched nothing is ''."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from metastore.druid.input_formats import regex_group_probes
from metastore.druid.tasks import validate_task_spec


def test_each_capturing_group_gets_a_probe_at_its_start():
    probes = regex_group_probes(r"(?<ts>\S+) \((a)?\)[(]\Q(\E(b*)")
    assert [p.split("(?:(?=")[0] for p in probes] == [
        "(?<ts>",
        r"(?<ts>\S+) \((",
        r"(?<ts>\S+) \((a)?\)[(]\Q(\E(",
    ]
    assert regex_group_probes(r"(a)\1") == [None]  # back references keep their numbers


@pytest.mark.spark
def test_an_optional_group_that_did_not_match_is_null_not_empty(tmp_path):
    from workers.jobs.ingest import run_ingest
    from workers.spark import get_spark

    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "regex_nulls",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page", "tag", "note"]},
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {
                    "type": "inline",
                    "data": "2024-01-01T00:00:00Z A #x note\n2024-01-01T01:00:00Z B \n",
                },
                "inputFormat": {
                    "type": "regex",
                    "pattern": r"(\S+) (\w+) (?:#(\w+) )?(\w*)",
                    "columns": ["ts", "page", "tag", "note"],
                },
            },
        },
    }
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    result = run_ingest(get_spark(), ingestion, work_dir=tmp_path / "work", job_group="regex")
    rows = sorted(
        (r for s in result.segments for r in pq.read_table(s.path).to_pylist()),
        key=lambda r: r["__time"],
    )
    assert [(r["page"], r["tag"], r["note"]) for r in rows] == [("A", "x", "note"), ("B", None, "")]
