"""transformSpec filters as Druid applies them, on real Spark (`run_ingest`):

- `arrayContainsElement` (docs/querying/filters.md): an array column contains
  the element, typed by `elementMatchValueType`; a scalar column is a
  one-element array; a null element matches arrays holding a null (a null
  row is unknown: matched by neither the filter nor its `not`);
- an `expression` filter or transform naming a column the input lacks reads it
  as null (Druid), instead of failing the task with Spark's AnalysisException.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from metastore.druid.errors import SpecError
from metastore.druid.filters import validate_filter
from metastore.druid.tasks import validate_task_spec

ROWS = [
    {"id": "a", "tags": ["x", "y"], "nums": [1, 2], "tag": "x"},
    {"id": "b", "tags": ["y", None], "nums": [3.5], "tag": "y"},
    {"id": "c", "tags": [], "nums": None, "tag": None},
    {"id": "d", "tags": None, "nums": [2, 7], "tag": "x"},
]


def _ids(tmp_path, flt, transforms=(), data=ROWS, fmt=None) -> list[str]:
    """The ids of the rows a spec with this filter keeps."""
    from workers.jobs.ingest import run_ingest
    from workers.spark import get_spark

    if fmt is None:
        lines = [json.dumps({"ts": "2022-01-01T00:00:00Z", **row}) for row in data]
        fmt = {"type": "json"}
    else:
        lines = data
    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "filters",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["id", *[t["name"] for t in transforms]]},
                "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
                "transformSpec": {"filter": flt, "transforms": list(transforms)},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(lines)},
                "inputFormat": fmt,
            },
        },
    }
    ingestion = validate_task_spec(spec, input_roots=[]).ingestion
    work = tmp_path / str(abs(hash(json.dumps(flt))))
    result = run_ingest(get_spark(), ingestion, work_dir=work, job_group=work.name)
    rows = [r for s in result.segments for r in pq.read_table(s.path).to_pylist()]
    return sorted(rows, key=lambda r: r["id"])


def _contains(column, kind, value) -> dict:
    return {
        "type": "arrayContainsElement",
        "column": column,
        "elementMatchValueType": kind,
        "elementMatchValue": value,
    }


@pytest.mark.spark
def test_array_contains_element_matches_typed_elements_and_scalars(tmp_path):
    flt = {
        "type": "or",
        "fields": [
            _contains("tags", "STRING", "x"),  # a
            _contains("nums", "LONG", 7),  # d
            _contains("nums", "DOUBLE", 3.5),  # b
        ],
    }
    assert [r["id"] for r in _ids(tmp_path, flt)] == ["a", "b", "d"]


@pytest.mark.spark
def test_array_contains_element_on_scalars_nulls_and_negated():
    """The filter's SQL over the same rows as the workers see them (arrays as JSON
    text, `text_col`), without an ingestion per case."""
    from workers.jobs.filter_sql import filter_sql
    from workers.jobs.parsing import sql_name, text_col
    from workers.spark import get_spark

    df = get_spark().createDataFrame(
        [(r["id"], r["tags"], r["tag"]) for r in ROWS], "id string, tags array<string>, tag string"
    )
    types = dict(df.dtypes)

    def ids(flt) -> list[str]:
        cond = filter_sql(flt, lambda name: text_col(sql_name(name), types[name]))
        return sorted(r["id"] for r in df.where(cond).collect())

    # A scalar column is a one-element array.
    assert ids(_contains("tag", "STRING", "y")) == ["b"]
    # A null element matches an array holding a null; a null row holds nothing.
    assert ids(_contains("tags", "STRING", None)) == ["b"]
    # d's null array is UNKNOWN for the filter, and Druid's NotFilter negates the
    # three-valued match (`matches().negate()`, SQL-compatible null handling, the
    # default since Druid 28: docs/querying/filters.md): its `not` keeps no null row.
    assert ids({"type": "not", "field": _contains("tags", "STRING", "x")}) == ["b", "c"]


@pytest.mark.spark
def test_expressions_naming_a_column_the_input_lacks_read_it_as_null(tmp_path):
    csv = ["ts,id,n", "2022-01-01T00:00:00Z,a,1", "2022-01-01T00:00:00Z,b,2"]
    fmt = {"type": "csv", "findColumnsFromHeader": True}
    flt = {"type": "expression", "expression": "isnull(nope) && n > 1"}
    transforms = [{"type": "expression", "name": "t", "expression": "concat(id, nope)"}]
    rows = _ids(tmp_path, flt, transforms, data=csv, fmt=fmt)
    assert [(r["id"], r["t"]) for r in rows] == [("b", None)]  # concat with null is null
    # Naming the missing column only in a positive test keeps nothing.
    flt = {"type": "expression", "expression": "nope == 'x'"}
    assert _ids(tmp_path, flt, data=csv, fmt=fmt) == []


def test_array_contains_element_is_checked_like_druid():
    path = "spec.dataSchema.transformSpec.filter"
    with pytest.raises(SpecError) as info:
        validate_filter({"type": "arrayContainsElement", "column": "c"}, path)
    assert info.value.field == f"{path}.elementMatchValueType"
    flt = {"type": "arrayContainsElement", "column": "c", "elementMatchValueType": "LONG"}
    with pytest.raises(SpecError) as info:
        validate_filter(flt, path)
    assert info.value.field == f"{path}.elementMatchValue"
    with pytest.raises(SpecError, match="array match values are not implemented"):
        validate_filter(
            flt | {"elementMatchValueType": "ARRAY<LONG>", "elementMatchValue": 1}, path
        )
    with pytest.raises(SpecError, match="is not a long"):
        validate_filter(flt | {"elementMatchValue": "seven"}, path)
    assert validate_filter(flt | {"elementMatchValue": None}, path)["elementMatchValue"] is None
