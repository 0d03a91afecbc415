"""Specs shaped as real Druid specs are (found by running Druid's own docs, tests
and task payloads through the validator): what Druid accepts is accepted here
with Druid's meaning. Pure: the validator only, no database, no Spark."""

from __future__ import annotations

import copy

import pytest

from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec

ROW = '{"ts": "2024-01-01T00:10:00Z", "page": "A", "n": 3, "nested": {"x": 1}}'


def _spec(**schema) -> dict:
    data_schema = {
        "dataSource": "sweep",
        "timestampSpec": {"column": "ts", "format": "iso", "missingValue": None},
        "dimensionsSpec": {"dimensions": ["page"]},
        "granularitySpec": {"segmentGranularity": "DAY", "rollup": False},
    }
    data_schema.update(schema)
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": data_schema,
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": ROW},
                "inputFormat": {"type": "json"},
            },
            "tuningConfig": {"type": "index_parallel"},
        },
    }


def _payload() -> dict:
    """An index_parallel spec as Druid's GET /druid/indexer/v1/task/{id} returns
    it: every field it knows, defaults and nulls included."""
    spec = _spec(
        dimensionsSpec={
            "dimensions": [
                {"type": "string", "name": "page", "multiValueHandling": "SORTED_ARRAY"},
                {"type": "long", "name": "n", "multiValueHandling": "SORTED_ARRAY"},
                {"type": "json", "name": "nested", "formatVersion": 4},
            ],
            "dimensionExclusions": ["__time", "ts"],
            "includeAllDimensions": False,
            "useSchemaDiscovery": False,
        },
        granularitySpec={
            "type": "uniform",
            "segmentGranularity": "DAY",
            "queryGranularity": {"type": "none"},
            "rollup": False,
            "intervals": [],
        },
        transformSpec={
            "filter": {"type": "selector", "dimension": "page", "value": "A", "extractionFn": None},
            "transforms": [],
        },
        metricsSpec=[],
    )
    spec["spec"]["tuningConfig"].update(
        {"splitHintSpec": None, "segmentWriteOutMediumFactory": None, "maxTotalRows": None}
    )
    return spec


def test_a_druid_task_payload_is_accepted_with_its_meaning():
    validated = validate_task_spec(_payload(), input_roots=[])
    ing = validated.ingestion
    assert ing.intervals is None  # "intervals": [] is none given, as in Druid
    assert [(d.name, d.type) for d in ing.dimensions] == [
        ("page", "string"),
        ("n", "long"),
        ("nested", "json"),
    ]
    assert any("formatVersion" in note for note in ing.ignored)
    # The default multiValueHandling Druid writes on a long dimension is no news.
    assert not any("multiValueHandling" in note for note in ing.ignored)


def test_null_fields_are_defaults_but_unknown_given_ones_are_still_named():
    spec = _payload()
    spec["spec"]["dataSchema"]["transformSpec"]["filter"]["extractionFn"] = {"type": "upper"}
    with pytest.raises(SpecError) as exc:
        validate_task_spec(spec, input_roots=[])
    assert exc.value.field == "spec.dataSchema.transformSpec.filter.extractionFn"


def test_multi_value_handling_other_than_the_default_on_a_number_is_reported():
    spec = _spec(
        dimensionsSpec={
            "dimensions": [{"type": "long", "name": "n", "multiValueHandling": "ARRAY"}]
        }
    )
    ignored = validate_task_spec(spec, input_roots=[]).ingestion.ignored
    assert any("dimensions[0].multiValueHandling" in note for note in ignored)


def test_format_version_is_for_json_dimensions():
    spec = _spec(dimensionsSpec={"dimensions": [{"name": "page", "formatVersion": 4}]})
    with pytest.raises(SpecError) as exc:
        validate_task_spec(spec, input_roots=[])
    assert exc.value.field == "spec.dataSchema.dimensionsSpec.dimensions[0].formatVersion"


def _hashed(spec: dict, *names: str) -> dict:
    spec = copy.deepcopy(spec)
    spec["spec"]["tuningConfig"] = {
        "type": "index_parallel",
        "forceGuaranteedRollup": True,
        "partitionsSpec": {"type": "hashed", "numShards": 1, "partitionDimensions": list(names)},
    }
    return spec


@pytest.mark.parametrize("flag", ["useSchemaDiscovery", "includeAllDimensions"])
def test_partitioning_on_a_discovered_dimension_is_accepted(flag):
    # Druid's qaJsonCols specs: auto dimensions listed, range/hashed on input fields
    # that schema discovery adds.
    spec = _spec(dimensionsSpec={"dimensions": [{"name": "page", "type": "auto"}], flag: True})
    partitions = validate_task_spec(_hashed(spec, "n"), input_roots=[]).ingestion.partitions
    assert partitions.partition_dimensions == ("n",)


def test_partitioning_on_an_unlisted_field_without_discovery_is_still_refused():
    with pytest.raises(SpecError) as exc:
        validate_task_spec(_hashed(_spec(), "n"), input_roots=[])
    assert exc.value.field == "spec.tuningConfig.partitionsSpec.partitionDimensions[0]"


def test_a_compaction_payload_with_no_projections_is_accepted():
    spec = {
        "type": "compact",
        "dataSource": "sweep",
        "ioConfig": {
            "type": "compact",
            "inputSpec": {"type": "interval", "interval": "2024-01-01/2024-01-02"},
            "dropExisting": False,
        },
        "dimensionsSpec": None,
        "metricsSpec": None,
        "projections": [],
        "granularitySpec": {"segmentGranularity": None, "queryGranularity": None, "rollup": None},
    }
    assert validate_task_spec(spec, input_roots=[]).type == "compact"


def _flatten_field(expr: str):
    spec = _spec()
    spec["spec"]["ioConfig"]["inputFormat"] = {
        "type": "json",
        "flattenSpec": {"fields": [{"type": "path", "name": "f", "expr": expr}]},
    }
    (field,) = validate_task_spec(spec, input_roots=[]).ingestion.input.flatten
    return field


@pytest.mark.parametrize(
    "expr, values",
    [
        ("$.items[*].name", ["a", "b"]),  # a missing key below a wildcard is skipped
        ("$.items.*['p']", [1]),
        ("$..name", ["a", "b", "top", "deep"]),  # a deep scan, in document order
        ("$.arr[*][0]", [1, 3]),
    ],
)
def test_json_path_wildcards_read_every_match_as_druids_json_path_does(expr, values):
    import jq

    row = {
        "items": [{"name": "a", "p": 1}, {"name": "b"}, {"x": 1}],
        "o": {"name": "top", "k": {"name": "deep"}},
        "arr": [[1, 2], [3]],
    }
    field = _flatten_field(expr)
    assert field.kind == "jq"  # run line by line by the jq library, as jq fields are
    assert jq.compile(field.expr).input_value(row).all() == values


def test_plain_json_paths_stay_native_and_filters_are_refused():
    assert _flatten_field("$.items[0]['name']").kind == "path"
    with pytest.raises(SpecError) as exc:
        _flatten_field("$.items[?(@.p > 0)].name")
    assert exc.value.field.endswith("flattenSpec.fields[0].expr")


def test_regex_input_format_names_its_groups_as_druid_does():
    spec = _spec()
    spec["spec"]["ioConfig"]["inputFormat"] = {"type": "regex", "pattern": r"(\d+)-(\w+)"}
    inp = validate_task_spec(spec, input_roots=[]).ingestion.input
    assert (inp.regex_pattern, inp.csv_columns) == (r"(\d+)-(\w+)", ("column_1", "column_2"))
    spec["spec"]["ioConfig"]["inputFormat"]["pattern"] = None
    with pytest.raises(SpecError) as exc:
        validate_task_spec(spec, input_roots=[])
    assert exc.value.field == "spec.ioConfig.inputFormat.pattern"


def test_projections_are_refused_unless_there_are_none():
    assert validate_task_spec(_spec(projections=[]), input_roots=[]).type == "index_parallel"
    with pytest.raises(SpecError) as exc:
        validate_task_spec(_spec(projections=[{"type": "aggregate"}]), input_roots=[])
    assert exc.value.field == "spec.dataSchema.projections"
