"""Input formats of Druid's data-formats reference beyond json/csv/tsv/parquet:
`orc` (Spark's own reader) and `avro_ocf` (decoded with fastavro, with or without
a reader schema), each with a flattenSpec path field into a nested record, and
flattenSpec `jq` fields. Real files are written (pyarrow.orc, fastavro), ingested
by the ingestion job a worker runs, and the segments' rows checked.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec
from workers.jobs.input_files import resolve_local_inputs

pytestmark = pytest.mark.spark

EVENTS = [  # (timestamp millis, event type, id, nested subInt)
    (1_577_836_800_000, "click", 1, 10),  # 2020-01-01
    (1_577_923_200_000, "view", 2, 20),  # 2020-01-02
    (1_577_923_260_000, "click", 3, 30),
]


def spec_for(base: Path, pattern: str, input_format: dict, dims=("eventType", "subInt")) -> dict:
    types = {"subInt": "long", "id": "long"}
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "formats",
                "timestampSpec": {"column": "timestamp", "format": "millis"},
                "dimensionsSpec": {
                    "dimensions": [{"type": types.get(d, "string"), "name": d} for d in dims]
                },
                "metricsSpec": [{"type": "longSum", "name": "ids", "fieldName": "id"}],
                "granularitySpec": {
                    "segmentGranularity": "DAY",
                    "queryGranularity": "NONE",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(base), "filter": pattern},
                "inputFormat": input_format,
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
    }


def ingest(spec: dict, input_root: Path, work: Path) -> list[dict]:
    """The rows of the segments the ingestion job wrote, ordered by id sum."""
    from workers.jobs.ingest import run_ingest
    from workers.spark import get_spark

    ingestion = validate_task_spec(spec, input_roots=[input_root]).ingestion
    ingestion = resolve_local_inputs(ingestion, input_roots=[input_root])
    result = run_ingest(get_spark(), ingestion, work_dir=work, job_group=f"formats-{work.name}")
    assert result.report["rowStats"]["processed"] == len(EVENTS), result.report["rowStats"]
    table = pa.concat_tables([pq.read_table(s.path) for s in result.segments])
    return sorted(table.drop_columns(["__time"]).to_pylist(), key=lambda r: r["ids"])


NESTED = {"type": "path", "name": "subInt", "expr": "$.someRecord.subInt"}
EXPECTED = [
    {"eventType": "click", "subInt": 10, "ids": 1},
    {"eventType": "view", "subInt": 20, "ids": 2},
    {"eventType": "click", "subInt": 30, "ids": 3},
]


def test_orc_file_with_a_nested_struct_flattened_by_path(strata_dirs, tmp_path):
    import pyarrow.orc as orc

    base = strata_dirs.input_root / "orc"
    base.mkdir()
    table = pa.table(
        {
            "timestamp": [e[0] for e in EVENTS],
            "eventType": [e[1] for e in EVENTS],
            "id": [e[2] for e in EVENTS],
            "someRecord": [{"subInt": e[3], "subLong": e[3] * 100} for e in EVENTS],
        }
    )
    orc.write_table(table, base / "events.orc")
    fmt = {"type": "orc", "flattenSpec": {"useFieldDiscovery": True, "fields": [NESTED]}}

    rows = ingest(spec_for(base, "*.orc", fmt), strata_dirs.input_root, tmp_path / "orc")

    assert rows == EXPECTED


AVRO_SCHEMA = {
    "namespace": "org.apache.druid.data.input",
    "name": "SomeDatum",
    "type": "record",
    "fields": [
        {"name": "timestamp", "type": "long"},
        {"name": "eventType", "type": "string"},
        {"name": "id", "type": "long"},
        {
            "name": "someRecord",
            "type": {
                "type": "record",
                "name": "MySubRecord",
                "fields": [{"name": "subInt", "type": "int"}, {"name": "subLong", "type": "long"}],
            },
        },
    ],
}


def write_avro(path: Path) -> None:
    import fastavro

    records = [
        {
            "timestamp": ts,
            "eventType": kind,
            "id": ident,
            "someRecord": {"subInt": sub, "subLong": sub * 100},
        }
        for ts, kind, ident, sub in EVENTS
    ]
    with open(path, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(AVRO_SCHEMA), records)


def test_avro_ocf_file_with_the_docs_schema_flattened_by_path(strata_dirs, tmp_path):
    base = strata_dirs.input_root / "avro"
    base.mkdir()
    write_avro(base / "events.avro")
    fmt = {
        "type": "avro_ocf",
        "flattenSpec": {"useFieldDiscovery": True, "fields": [NESTED]},
        "schema": AVRO_SCHEMA,
        "binaryAsString": False,
    }

    rows = ingest(spec_for(base, "*.avro", fmt), strata_dirs.input_root, tmp_path / "avro")

    assert rows == EXPECTED
    # Without a reader schema the files' own writer schema decodes them.
    del fmt["schema"]
    rows = ingest(spec_for(base, "*.avro", fmt), strata_dirs.input_root, tmp_path / "avro2")
    assert rows == EXPECTED


def test_avro_ocf_schema_that_is_not_avro_is_refused_naming_the_field(strata_dirs):
    base = strata_dirs.input_root / "avro-bad"
    base.mkdir()
    write_avro(base / "events.avro")
    fmt = {"type": "avro_ocf", "schema": {"type": "record", "name": "X", "fields": "nope"}}
    with pytest.raises(SpecError) as refused:
        validate_task_spec(spec_for(base, "*.avro", fmt), input_roots=[strata_dirs.input_root])
    assert refused.value.field == "spec.ioConfig.inputFormat.schema"


def test_binary_formats_cannot_be_inline(strata_dirs):
    spec = spec_for(strata_dirs.input_root, "*", {"type": "orc"})
    spec["spec"]["ioConfig"]["inputSource"] = {"type": "inline", "data": json.dumps({"a": 1})}
    with pytest.raises(SpecError) as refused:
        validate_task_spec(spec, input_roots=[strata_dirs.input_root])
    assert refused.value.field == "spec.ioConfig.inputFormat.type"


JQ_LINES = [
    {"timestamp": ts, "e": {"type": kind, "ids": [0, ident]}, "some key": {"n": sub}}
    for ts, kind, ident, sub in EVENTS
]


def test_json_flatten_jq_and_tree_fields_read_nested_values(strata_dirs, tmp_path):
    base = strata_dirs.input_root / "jq"
    base.mkdir()
    (base / "events.json").write_text("\n".join(json.dumps(r) for r in JQ_LINES) + "\n")
    fields = [
        {"type": "jq", "name": "eventType", "expr": ".e.type"},
        {"type": "jq", "name": "id", "expr": ".e.ids[1]"},
        {"type": "jq", "name": "subInt", "expr": '.["some key"].n'},
        {"type": "tree", "name": "subInt2", "nodes": ["some key", "n"]},
        # Beyond keys and indexes: evaluated by the jq library.
        {"type": "jq", "name": "shout", "expr": ".e.type | ascii_upcase"},
        {"type": "jq", "name": "idCount", "expr": ".e.ids | length"},
    ]
    fmt = {"type": "json", "flattenSpec": {"useFieldDiscovery": True, "fields": fields}}
    dims = ("eventType", "subInt", "subInt2", "shout", "idCount")
    spec = spec_for(base, "*.json", fmt, dims=dims)

    rows = ingest(spec, strata_dirs.input_root, tmp_path / "jq")

    assert rows == [
        {**r, "subInt2": str(r["subInt"]), "shout": r["eventType"].upper(), "idCount": "2"}
        for r in EXPECTED
    ]
    assert list(rows[0]) == ["eventType", "subInt", "subInt2", "shout", "idCount", "ids"]


def test_malformed_jq_field_is_refused_naming_it(strata_dirs):
    fields = [{"type": "jq", "name": "x", "expr": ".e["}]
    fmt = {"type": "json", "flattenSpec": {"fields": fields}}
    with pytest.raises(SpecError) as refused:
        validate_task_spec(
            spec_for(strata_dirs.input_root, "*", fmt), input_roots=[strata_dirs.input_root]
        )
    assert refused.value.field == "spec.ioConfig.inputFormat.flattenSpec.fields[0].expr"
    assert "is not a jq expression" in refused.value.message


def test_jq_fields_are_refused_for_orc_as_in_druid(strata_dirs):
    fmt = {"type": "orc", "flattenSpec": {"fields": [{"type": "jq", "name": "x", "expr": ".a"}]}}
    with pytest.raises(SpecError) as refused:
        validate_task_spec(
            spec_for(strata_dirs.input_root, "*", fmt), input_roots=[strata_dirs.input_root]
        )
    assert refused.value.field == "spec.ioConfig.inputFormat.flattenSpec.fields[0].type"
