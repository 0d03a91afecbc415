"""A `float` dimension is Druid's 32-bit FLOAT column, not a double (issue 27: a spec
ingested here and in Druid holds the same rows, column types and rolled-up values).

Ingested on real Spark by the runner (`run_spec`), then read as the Broker surface
reads it: INFORMATION_SCHEMA and segmentMetadata type it FLOAT, rollup groups rows
by the float value (0.1 and 0.100000001 are both 0.1f: one row), Druid SQL prints it
as Java prints a float (`0.1`) and SUM reads the float widened to double
(0.10000000149011612), a native scan returns `0.1`. A `double` dimension stays DOUBLE.
Compaction (which reads the segment's columns back) keeps the FLOAT column.
"""

from __future__ import annotations

import pytest
from float_columns import column_types, compact, druid, ingest, sql

pytestmark = pytest.mark.spark

ROWS = [
    {"ts": "2024-01-01T01:00:00Z", "f": 0.1, "d": 0.5},
    {"ts": "2024-01-01T02:00:00Z", "f": 0.100000001, "d": 0.5},
]


def _float_type_and_values() -> tuple[list, list]:
    return column_types("floats", ("f", "d")), sql('SELECT f, d, "count" FROM floats')


def test_float_dimensions_are_druids_float_columns(run_spec, inline_spec, api_client):
    ingest(
        run_spec,
        inline_spec,
        "floats",
        ROWS,
        dimensions=[{"type": "float", "name": "f"}, {"type": "double", "name": "d"}],
        metrics=[{"type": "count", "name": "count"}],
    )

    stored = ([["d", "DOUBLE"], ["f", "FLOAT"]], [[0.1, 0.5, 2]])
    assert _float_type_and_values() == stored
    assert sql("SELECT SUM(f) FROM floats") == [[0.10000000149011612]]

    body = {"queryType": "segmentMetadata", "dataSource": "floats", "merge": True}
    columns = druid(api_client, body)[0]["columns"]
    assert (columns["f"]["type"], columns["d"]["type"]) == ("FLOAT", "DOUBLE")

    body = {"queryType": "scan", "dataSource": "floats", "intervals": ["2024/2025"]}
    body["columns"] = ["f", "d"]
    assert druid(api_client, body)[0]["events"] == [{"f": 0.1, "d": 0.5}]

    compact(run_spec, "floats")
    assert _float_type_and_values() == stored


@pytest.mark.django_db(False)
def test_compaction_merges_a_float_dimension_with_an_older_double_one_as_double():
    from workers.jobs.compact import merged_input_schema

    old = {"dimensions": [{"name": "f", "type": "double"}, {"name": "s", "type": "string"}]}
    new = {"dimensions": [{"name": "f", "type": "float"}, {"name": "s", "type": "long"}]}
    for schemas in ([old, new], [new, old]):
        dims = merged_input_schema(schemas)[0]
        assert [(d.name, d.type) for d in dims] == [("f", "double"), ("s", "string")]
