"""floatSum, floatMin and floatMax are Druid's 32-bit FLOAT metric columns, not
doubles (issue 27: a spec ingested here and in Druid holds the same rows, column
types and rolled-up values).

Druid's FloatSumAggregator keeps a `float` running sum of `getFloat()` values and
its factory's intermediate and result types are FLOAT; floatMin/floatMax likewise.
Ingested on real Spark by the runner with rollup: 0.1 and 0.100000001 are both
0.1f, so floatSum stores 0.2f (SQL prints 0.2, not 0.200000001), floatMin and
floatMax 0.1f. INFORMATION_SCHEMA and segmentMetadata type the columns FLOAT,
SQL SUM widens the float to double as Druid does, a native floatSum over the
column reads 0.2. A floatLast keeps a (time, float) pair, Druid's
COMPLEX<serializablePairLongFloat>. Compaction re-aggregates the stored metrics and keeps FLOAT.
"""

from __future__ import annotations

import json

import pytest
from float_columns import column_types, compact, druid, ingest, sql

pytestmark = pytest.mark.spark

ROWS = [
    {"ts": "2024-01-01T01:00:00Z", "v": 0.1},
    {"ts": "2024-01-01T02:00:00Z", "v": 0.100000001},
]
METRICS = ("fsum", "fmin", "fmax", "dsum")


def _types_and_values() -> tuple[list, list]:
    return column_types("fmetrics", METRICS), sql("SELECT fsum, fmin, fmax, dsum FROM fmetrics")


def test_float_metrics_are_druids_float_columns(run_spec, inline_spec, api_client):
    metrics = [
        {"type": kind, "name": name, "fieldName": "v"}
        for kind, name in zip(
            ("floatSum", "floatMin", "floatMax", "doubleSum"), METRICS, strict=True
        )
    ]
    metrics.append({"type": "floatLast", "name": "flast", "fieldName": "v"})
    ingest(run_spec, inline_spec, "fmetrics", ROWS, metrics=metrics)

    types = [["dsum", "DOUBLE"], ["fmax", "FLOAT"], ["fmin", "FLOAT"], ["fsum", "FLOAT"]]
    stored = (types, [[0.2, 0.1, 0.1, 0.200000001]])
    assert _types_and_values() == stored
    assert sql("SELECT SUM(fsum) FROM fmetrics") == [[0.20000000298023224]]

    body = {"queryType": "segmentMetadata", "dataSource": "fmetrics", "merge": True}
    columns = druid(api_client, body)[0]["columns"]
    assert [columns[n]["type"] for n in METRICS] == ["FLOAT", "FLOAT", "FLOAT", "DOUBLE"]

    body = {"queryType": "timeseries", "dataSource": "fmetrics", "intervals": ["2024/2025"]}
    body["granularity"] = "all"
    body["aggregations"] = [
        {"type": "floatSum", "name": "s", "fieldName": "fsum"},
        {"type": "floatLast", "name": "last", "fieldName": "flast"},
    ]
    assert druid(api_client, body)[0]["result"] == {"s": 0.2, "last": 0.1}
    pair = sql(
        "SELECT DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
        "WHERE TABLE_NAME = 'fmetrics' AND COLUMN_NAME = 'flast'"
    )
    assert pair == [["COMPLEX<serializablePairLongFloat>"]]

    compact(run_spec, "fmetrics")
    assert _types_and_values() == stored


@pytest.mark.django_db(False)
def test_compaction_merges_an_older_double_metric_with_a_float_one_as_double():
    from metastore.schema import metric_entry
    from workers.jobs.compact import merged_input_schema

    old = {"metrics": [metric_entry("doubleSum", "fsum", "v")]}  # before FLOAT metrics
    new = {"metrics": [metric_entry("floatSum", "fsum", "v")]}
    for schemas in ([old, new], [new, old]):
        metrics = merged_input_schema(schemas)[1]
        assert [(m.type, m.name, m.field_name) for m in metrics] == [("doubleSum", "fsum", "fsum")]
    assert [m.type for m in merged_input_schema([new, new])[1]] == ["floatSum"]


def test_compaction_of_a_double_segment_and_a_float_one_writes_a_double(run_spec, inline_spec):
    """Segments written before float metrics were FLOAT columns hold doubles: compacting
    them with FLOAT ones reads the floats widened and writes doubles, as Druid merges."""
    for kind, ts in (("double", "2024-01-01T01:00:00Z"), ("float", "2024-01-02T01:00:00Z")):
        data = json.dumps({"ts": ts, "v": 0.1})
        metrics = [
            {"type": f"{kind}Sum", "name": "fsum", "fieldName": "v"},
            {"type": f"{kind}Last", "name": "flast", "fieldName": "v"},
        ]
        assert run_spec(inline_spec("mixed", data=data, metrics=metrics)).status == "SUCCESS"
    assert sql("SELECT fsum FROM mixed ORDER BY __time") == [[0.1], [0.10000000149011612]]
    compact(run_spec, "mixed", granularitySpec={"segmentGranularity": "YEAR"})
    assert sql("SELECT fsum FROM mixed ORDER BY __time") == [[0.1], [0.10000000149011612]]
    assert column_types("mixed", ("fsum", "flast")) == [
        ["flast", "COMPLEX<serializablePairLongDouble>"],
        ["fsum", "DOUBLE"],
    ]
