"""The task spec's JSON Schema (metastore/spec_schema.py) says what the validator
(metastore/druid/) accepts: the same enums and field sets, and the schema is
what the API publishes."""

from __future__ import annotations

import pytest

from metastore import spec_schema
from metastore.druid.compaction import COMPACT_TOP_LEVEL
from metastore.druid.dimensions import DIMENSION_TYPES
from metastore.druid.filters import FILTER_TYPES
from metastore.druid.granularity import GRANULARITY_SPEC_FIELDS, GRANULARITY_SPEC_TYPES
from metastore.druid.ingestion import DATA_SCHEMA_FIELDS, INGESTION_SPEC_FIELDS, IO_CONFIG_FIELDS
from metastore.druid.input_formats import INPUT_FORMATS
from metastore.druid.input_sources import INPUT_SOURCE_FIELDS, INPUT_SOURCES
from metastore.druid.metrics import METRIC_TYPES
from metastore.druid.partitions import PARTITION_TYPES
from metastore.druid.tasks import INDEX_TOP_LEVEL, KILL_TOP_LEVEL, KILL_UNSUPPORTED, TASK_TYPES
from metastore.druid.timestamps import TIMESTAMP_SPEC_FIELDS
from metastore.intervals import GRANULARITY_NAMES

COMPONENTS = spec_schema.task_spec_components()
INDEX = COMPONENTS[spec_schema.INDEX_SPEC]
KILL = COMPONENTS[spec_schema.KILL_SPEC]
COMPACT = COMPONENTS[spec_schema.COMPACT_SPEC]


def props(schema: dict) -> dict:
    return {
        k: v.get("allOf", [v])[0] if "allOf" in v else v for k, v in schema["properties"].items()
    }


def enum_of(schema: dict) -> set:
    return set(schema["enum"])


def test_the_type_discriminator_covers_every_task_type():
    mapping = COMPONENTS[spec_schema.TASK_SPEC]["discriminator"]["mapping"]
    assert set(mapping) == set(TASK_TYPES)
    assert enum_of(props(INDEX)["type"]) | enum_of(props(KILL)["type"]) | enum_of(
        props(COMPACT)["type"]
    ) == set(TASK_TYPES)


def test_field_sets_are_the_validators():
    assert set(INDEX["properties"]) == INDEX_TOP_LEVEL
    assert set(KILL["properties"]) == KILL_TOP_LEVEL - set(KILL_UNSUPPORTED)
    assert set(COMPACT["properties"]) == COMPACT_TOP_LEVEL
    spec = props(INDEX)["spec"]
    assert set(spec["properties"]) == INGESTION_SPEC_FIELDS
    data_schema = props(spec)["dataSchema"]
    assert set(data_schema["properties"]) == DATA_SCHEMA_FIELDS
    assert set(props(data_schema)["timestampSpec"]["properties"]) == TIMESTAMP_SPEC_FIELDS
    assert set(props(data_schema)["granularitySpec"]["properties"]) == (GRANULARITY_SPEC_FIELDS)
    io = props(spec)["ioConfig"]
    assert set(io["properties"]) == IO_CONFIG_FIELDS
    for source in props(io)["inputSource"]["oneOf"]:
        kind = source["properties"]["type"]["enum"][0]
        assert set(source["properties"]) <= INPUT_SOURCE_FIELDS[kind]


def test_enums_are_the_validators():
    spec = props(INDEX)["spec"]
    data_schema = props(spec)["dataSchema"]
    io = props(spec)["ioConfig"]
    sources = {s["properties"]["type"]["enum"][0] for s in props(io)["inputSource"]["oneOf"]}
    assert sources == set(INPUT_SOURCES)
    assert enum_of(props(io)["inputFormat"]["properties"]["type"]) == set(INPUT_FORMATS)
    granularity = props(data_schema)["granularitySpec"]
    for name in ("segmentGranularity", "queryGranularity"):
        [as_name, as_object, as_period, as_duration] = props(granularity)[name]["oneOf"]
        assert enum_of(as_name) == set(GRANULARITY_NAMES)
        assert enum_of(as_object["properties"]["type"]) == set(GRANULARITY_NAMES)
        assert enum_of(as_period["properties"]["type"]) == {"period"}
        assert enum_of(as_duration["properties"]["type"]) == {"duration"}
    assert enum_of(props(granularity)["type"]) == set(GRANULARITY_SPEC_TYPES)
    tuning = props(spec)["tuningConfig"]
    partitions = props(tuning)["partitionsSpec"]
    assert enum_of(props(partitions)["type"]) == set(PARTITION_TYPES)
    metric = props(data_schema)["metricsSpec"]["items"]
    assert enum_of(metric["properties"]["type"]) == set(METRIC_TYPES)
    dimension = props(props(data_schema)["dimensionsSpec"])["dimensions"]["items"]["oneOf"][1]
    assert enum_of(props(dimension)["type"]) == set(DIMENSION_TYPES)
    flt = props(props(data_schema)["transformSpec"])["filter"]
    assert enum_of(flt["properties"]["type"]) == set(FILTER_TYPES)


@pytest.mark.django_db
def test_the_api_publishes_the_spec_schema_for_task_submission(api_client):
    doc = api_client.get("/api/schema/?format=json").json()
    for name, schema in COMPONENTS.items():
        assert doc["components"]["schemas"][name] == schema
    ref = {"$ref": f"#/components/schemas/{spec_schema.TASK_SPEC}"}
    for path in ("/api/v1/tasks", "/druid/indexer/v1/task"):
        body = doc["paths"][path]["post"]["requestBody"]["content"]
        assert body == {"application/json": {"schema": ref}}, path


@pytest.mark.django_db
def test_closed_query_parameters_are_enums(api_client):
    doc = api_client.get("/api/schema/?format=json").json()
    params = {p["name"]: p["schema"] for p in doc["paths"]["/api/v1/tasks"]["get"]["parameters"]}
    assert set(params["status"]["enum"]) == {
        "PENDING",
        "WAITING",
        "RUNNING",
        "SUCCESS",
        "FAILED",
        "CANCELED",
    }
    assert set(params["type"]["enum"]) == set(TASK_TYPES)
    segs = doc["paths"]["/api/v1/datasources/{name}/segments"]["get"]["parameters"]
    segs = {p["name"]: p["schema"] for p in segs}
    assert set(segs["used"]["enum"]) == {"true", "false", "all"}
    assert set(segs["status"]["enum"]) == {"visible", "partial", "overshadowed"}
