"""The task spec as JSON Schema (OpenAPI 3.0 dialect), built from the validator's
own definitions in `metastore.specs`: the task types, the fields each part of a
spec accepts, and the enums (granularities, input sources and formats,
partitionsSpec, dimension and metric types). The OpenAPI schema of the task
endpoints publishes it, so a generated client knows what a spec is, and the two
cannot drift: a test checks the enums and field sets against the validator's.

The schema states what the validator always enforces (shapes, types, enums,
unknown fields refused) and leaves to the validator what JSON Schema cannot say
(an interval's start before its end, a local input under STRATA_INPUT_ROOTS, a
dataSource to read that exists, granularities that divide): a spec valid here
may still get a 400 naming the field. Every optional field may be null, which
the validator (as Druid's Jackson) reads as absent.
"""

from __future__ import annotations

from metastore import locking
from metastore.druid.compaction import COMPACT_TOP_LEVEL
from metastore.druid.dimensions import DIMENSION_TYPES, MULTI_VALUE_HANDLING
from metastore.druid.fields import INT_MAXIMUM, INT_MAXIMUMS
from metastore.druid.filters import FILTER_TYPES
from metastore.druid.granularity import GRANULARITY_SPEC_FIELDS, GRANULARITY_SPEC_TYPES
from metastore.druid.input_formats import INPUT_FORMATS
from metastore.druid.input_sources import INPUT_SOURCE_FIELDS, INPUT_SOURCES
from metastore.druid.metrics import METRIC_TYPES
from metastore.druid.names import DATASOURCE_MAX_BYTES, TASK_ID_MAX_LENGTH
from metastore.druid.partitions import LEGACY_TUNING, PARTITION_TYPES
from metastore.druid.tasks import INDEX_TOP_LEVEL, KILL_TOP_LEVEL, KILL_UNSUPPORTED, TASK_TYPES
from metastore.druid.timestamps import TIMESTAMP_FORMATS
from metastore.druid.tuning import IGNORED_TUNING, INDEX_TUNING_FIELDS
from metastore.intervals import GRANULARITY_NAMES

# OpenAPI component names.
TASK_SPEC = "TaskSpec"
INDEX_SPEC = "IndexParallelTaskSpec"
COMPACT_SPEC = "CompactTaskSpec"
KILL_SPEC = "KillTaskSpec"

INDEX_TYPES = (locking.INDEX_TASK, locking.INDEX_ALIAS)
# The component of each task type a spec may name.
_COMPONENT_OF = {
    locking.INDEX_TASK: INDEX_SPEC,
    locking.INDEX_ALIAS: INDEX_SPEC,
    locking.COMPACT_TASK: COMPACT_SPEC,
    locking.KILL_TASK: KILL_SPEC,
}
INTERVAL_PATTERN = r"^[^/]+/[^/]+$"  # start/end, start/period or period/end (ISO 8601)
INTERVAL_MAX_LENGTH = 100


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict) -> dict:
    if "$ref" in schema:
        return {"allOf": [schema], "nullable": True}
    return {**schema, "nullable": True}


def _object(
    properties: dict, *, required: tuple[str, ...] = (), closed: bool = True, **extra
) -> dict:
    """An object; optional properties may be null; `closed`: unknown fields refused."""
    out: dict = {
        "type": "object",
        "properties": {
            name: (schema if name in required else _nullable(schema))
            for name, schema in properties.items()
        },
        **extra,
    }
    if required:
        out["required"] = list(required)
    if closed:
        out["additionalProperties"] = False
    return out


def _enum(values, **extra) -> dict:
    return {"type": "string", "enum": list(values), **extra}


STRING = {"type": "string"}
BOOLEAN = {"type": "boolean"}
ANY: dict = {}  # a field the validator reads but only reports as ignored


def _int(name: str, *, minimum: int | None = None) -> dict:
    out: dict = {"type": "integer", "maximum": INT_MAXIMUMS.get(name, INT_MAXIMUM)}
    if minimum is not None:
        out["minimum"] = minimum
    return out


def interval_schema(**extra) -> dict:
    return {
        "type": "string",
        "pattern": INTERVAL_PATTERN,
        "maxLength": INTERVAL_MAX_LENGTH,
        "example": "2024-01-01/2024-01-02",
        **extra,
    }


def granularity_schema(description: str) -> dict:
    return {
        "description": f'{description}; any case, or Druid\'s {{"type": name}}',
        "oneOf": [
            _enum(GRANULARITY_NAMES),
            {
                "type": "object",
                "properties": {"type": _enum(GRANULARITY_NAMES)},
                "required": ["type"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "description": "a period equal to a named granularity (UTC, no origin)",
                "properties": {
                    "type": _enum(["period"]),
                    "period": STRING,
                    "timeZone": STRING,
                    "origin": STRING,
                },
                "required": ["type", "period"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "description": "a duration in ms equal to a named granularity, no origin",
                "properties": {
                    "type": _enum(["duration"]),
                    "duration": {"type": "integer"},
                    "origin": STRING,
                },
                "required": ["type", "duration"],
                "additionalProperties": False,
            },
        ],
    }


def datasource_schema() -> dict:
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": DATASOURCE_MAX_BYTES,
        "pattern": r"^[^./\\\s][^/\\\u0000-\u001f\u007f-\u009f]*$",
        "description": (
            "not starting with '.', no '/' or '\\', no control characters or whitespace "
            f"but the space, at most {DATASOURCE_MAX_BYTES} bytes of UTF-8"
        ),
    }


def task_id_schema(description: str) -> dict:
    return {
        "type": "string",
        "maxLength": TASK_ID_MAX_LENGTH,
        "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.:+\-]*$",
        "description": description,
    }


def _context() -> dict:
    return _object(
        {
            "priority": {
                "type": "integer",
                "minimum": -INT_MAXIMUM - 1,
                "maximum": INT_MAXIMUM,
            },
            "taskLockTimeout": _int("taskLockTimeout", minimum=0),
            "forceTimeChunkLock": BOOLEAN,
            "useConcurrentLocks": BOOLEAN,
        },
        closed=False,
        description="Task context; other Druid context keys are accepted and ignored.",
    )


def _filter() -> dict:
    return {
        "type": "object",
        # No required `type`: an empty filter is no filter, as in Druid.
        "description": "A Druid filter (an empty object: none)",
        "properties": {"type": _enum(FILTER_TYPES)},
    }


def _input_source(kind: str) -> dict:
    fields = INPUT_SOURCE_FIELDS[kind]
    props: dict = {"type": _enum([kind])}
    if kind == "local":
        props |= {
            "baseDir": {**STRING, "description": "a directory under STRATA_INPUT_ROOTS"},
            "filter": {**STRING, "description": "a glob, e.g. *.json"},
            "files": {"type": "array", "items": STRING},
        }
    elif kind == "inline":
        props |= {"data": {**STRING, "minLength": 1, "description": "the rows, as text"}}
    elif kind == "druid":
        props |= {"dataSource": datasource_schema(), "interval": interval_schema()}
        props |= {"maxInputSegmentBytesPerTask": ANY}
    else:
        props |= {
            "delegates": {
                "type": "array",
                "minItems": 1,
                "items": {"oneOf": [_input_source(k) for k in ("local", "inline", "druid")]},
            }
        }
    assert set(props) <= fields, sorted(set(props) - fields)
    required = ("type", "data") if kind == "inline" else ("type",)
    if kind == "druid":
        required = ("type", "dataSource", "interval")
    if kind == "combining":
        required = ("type", "delegates")
    return _object(props, required=required, title=f"{kind} input source")


def _input_format() -> dict:
    return {
        "type": "object",
        "description": "json, csv, tsv or parquet, with Druid's options for each",
        "properties": {
            "type": _enum(INPUT_FORMATS),
            "columns": _nullable({"type": "array", "items": STRING}),
            "findColumnsFromHeader": _nullable(BOOLEAN),
            "skipHeaderRows": _nullable(_int("skipHeaderRows", minimum=0)),
            "delimiter": _nullable(STRING),
            "listDelimiter": _nullable(STRING),
            "flattenSpec": _nullable({"type": "object"}),
        },
        "required": ["type"],
    }


def _dimension() -> dict:
    return {
        "oneOf": [
            {**STRING, "description": "a string dimension"},
            {
                "type": "object",
                "properties": {
                    "type": _nullable(_enum(DIMENSION_TYPES)),
                    "name": STRING,
                    "multiValueHandling": _nullable(_enum(MULTI_VALUE_HANDLING)),
                },
                "required": ["name"],
            },
        ]
    }


def _metric() -> dict:
    return {
        "type": "object",
        "properties": {
            "type": _enum(METRIC_TYPES),
            "name": STRING,
            "fieldName": _nullable(STRING),
        },
        "required": ["type", "name"],
    }


def _partitions_spec() -> dict:
    return {
        "type": "object",
        "description": (
            "dynamic {maxRowsPerSegment, maxTotalRows} | hashed {numShards or "
            "targetRowsPerSegment, partitionDimensions} | range / single_dim "
            "{partitionDimensions, targetRowsPerSegment or maxRowsPerSegment}"
        ),
        "properties": {
            "type": _nullable(_enum(PARTITION_TYPES)),
            "maxRowsPerSegment": _nullable(_int("maxRowsPerSegment", minimum=1)),
            "maxTotalRows": _nullable(_int("maxTotalRows", minimum=1)),
            "numShards": _nullable(_int("numShards", minimum=1)),
            "targetRowsPerSegment": _nullable(_int("targetRowsPerSegment", minimum=1)),
            "partitionDimensions": _nullable({"type": "array", "items": STRING}),
        },
    }


def _data_schema() -> dict:
    granularity = _object(
        {
            "type": _enum(GRANULARITY_SPEC_TYPES),
            "segmentGranularity": granularity_schema(
                "time chunk of a segment (NONE: one per millisecond, as in Druid)"
            ),
            "queryGranularity": granularity_schema("timestamps are truncated to it"),
            "rollup": BOOLEAN,
            "intervals": {"type": "array", "minItems": 1, "items": interval_schema()},
        }
    )
    assert set(granularity["properties"]) == GRANULARITY_SPEC_FIELDS
    timestamp = _object(
        {
            "column": STRING,
            "format": {
                **STRING,
                "description": f"{', '.join(TIMESTAMP_FORMATS)} or a pattern "
                "such as yyyy-MM-dd HH:mm:ss",
            },
            "missingValue": STRING,
        }
    )
    data_schema = _object(
        {
            "dataSource": datasource_schema(),
            "timestampSpec": timestamp,
            "dimensionsSpec": {
                "type": "object",
                "properties": {
                    "dimensions": _nullable({"type": "array", "items": _dimension()}),
                    "dimensionExclusions": _nullable({"type": "array", "items": STRING}),
                },
            },
            "metricsSpec": {"type": "array", "items": _metric()},
            "granularitySpec": granularity,
            "transformSpec": _object(
                {"filter": _filter(), "transforms": {"type": "array", "items": {"type": "object"}}}
            ),
        },
        description="dataSource here or at the top level",
    )
    return data_schema


def _io_config() -> dict:
    io_config = _object(
        {
            "type": {"description": "index_parallel (not checked)"},
            "inputSource": {
                "oneOf": [_input_source(kind) for kind in INPUT_SOURCES],
                "discriminator": {"propertyName": "type"},
            },
            "inputFormat": _input_format(),
            "appendToExisting": BOOLEAN,
            "dropExisting": BOOLEAN,
        },
        required=("inputSource",),
    )
    return io_config


def _tuning_config() -> dict:
    tuning_props: dict = {
        "type": {"description": "index_parallel (not checked)"},
        "partitionsSpec": _partitions_spec(),
        "forceGuaranteedRollup": BOOLEAN,
        "maxParseExceptions": _int("maxParseExceptions"),
        "maxSavedParseExceptions": _int("maxSavedParseExceptions"),
        "logParseExceptions": BOOLEAN,
        "maxRetry": _int("maxRetry"),
        "maxNumConcurrentSubTasks": _int("maxNumConcurrentSubTasks"),
        "totalNumMergeTasks": _int("totalNumMergeTasks"),
    }
    assert set(tuning_props) == INDEX_TUNING_FIELDS
    # Druid's legacy partitioning fields, and those that have no effect here.
    tuning_props |= {name: ANY for name in (*LEGACY_TUNING, *IGNORED_TUNING)}
    return _object(tuning_props)


def _index_spec() -> dict:
    spec = _object(
        {
            "dataSchema": _data_schema(),
            "ioConfig": _io_config(),
            "tuningConfig": _tuning_config(),
        },
        required=("dataSchema", "ioConfig"),
    )
    out = _object(
        {
            "type": _enum(INDEX_TYPES, description="index is an alias of index_parallel"),
            "id": task_id_schema("the task id to use (default: generated)"),
            "groupId": task_id_schema("the task's group (default: its id)"),
            "dataSource": datasource_schema(),
            "resource": ANY,
            "spec": spec,
            "context": _context(),
        },
        required=("type", "spec"),
        title="index_parallel task",
        description="Native batch ingestion (Druid's index_parallel spec).",
    )
    assert set(out["properties"]) == INDEX_TOP_LEVEL
    return out


def _kill_spec() -> dict:
    out = _object(
        {
            "type": _enum([locking.KILL_TASK]),
            "id": task_id_schema("the task id to use (default: generated)"),
            "dataSource": datasource_schema(),
            "interval": interval_schema(),
            "context": _context(),
            "markAsUnused": {**BOOLEAN, "description": "deprecated in Druid"},
            "versions": {
                "type": "array",
                "minItems": 1,
                "items": STRING,
                "description": "only unused segments of these versions (default: all)",
            },
            "batchSize": _int("batchSize", minimum=1),
            "limit": {**_int("limit", minimum=1), "description": "at most this many segments"},
            "maxUsedStatusLastUpdatedTime": {
                **STRING,
                "description": "only segments marked unused no later than this ISO timestamp",
            },
        },
        required=("type", "dataSource", "interval"),
        title="kill task",
        description="Deletes the unused segments of an interval (files and rows).",
    )
    assert set(out["properties"]) == KILL_TOP_LEVEL - set(KILL_UNSUPPORTED)
    return out


def _compact_spec() -> dict:
    input_spec = {
        "oneOf": [
            _object(
                {"type": _enum(["interval"]), "interval": interval_schema()},
                required=("type", "interval"),
            ),
            _object(
                {
                    "type": _enum(["segments"]),
                    "segments": {"type": "array", "minItems": 1, "items": STRING},
                },
                required=("type", "segments"),
            ),
        ],
        "discriminator": {"propertyName": "type"},
    }
    props = {
        "type": _enum([locking.COMPACT_TASK]),
        "id": task_id_schema("the task id to use (default: generated)"),
        "groupId": task_id_schema("the task's group (default: its id)"),
        "resource": ANY,
        "dataSource": datasource_schema(),
        "ioConfig": _object(
            {
                "type": _enum(["compact"]),
                "inputSpec": input_spec,
                "allowNonAlignedInterval": BOOLEAN,
                "dropExisting": BOOLEAN,
            },
            required=("inputSpec",),
        ),
        "interval": interval_schema(description="Druid's legacy form of ioConfig.inputSpec"),
        "segments": {"type": "array", "items": STRING, "description": "legacy inputSpec"},
        "segmentGranularity": granularity_schema("legacy granularitySpec.segmentGranularity"),
        "granularitySpec": {
            "type": "object",
            "properties": {
                "segmentGranularity": _nullable(granularity_schema("output time chunks")),
                "queryGranularity": _nullable(granularity_schema("timestamps truncated to it")),
                "rollup": _nullable(BOOLEAN),
            },
        },
        "dimensionsSpec": {"type": "object"},
        "metricsSpec": {"type": "array", "items": _metric()},
        "transformSpec": {"type": "object"},
        "tuningConfig": {
            "type": "object",
            "properties": {"partitionsSpec": _nullable(_partitions_spec())},
        },
        "context": _context(),
    }
    assert set(props) == COMPACT_TOP_LEVEL, set(props) ^ COMPACT_TOP_LEVEL
    return _object(
        props,
        required=("type", "dataSource"),
        title="compact task",
        description="Rewrites the visible rows of an interval, or of given segments.",
    )


def task_spec_components() -> dict[str, dict]:
    """The OpenAPI components of a task spec: one per type, and `TaskSpec`, the
    union discriminated by `type`."""
    return {
        INDEX_SPEC: _index_spec(),
        COMPACT_SPEC: _compact_spec(),
        KILL_SPEC: _kill_spec(),
        TASK_SPEC: {
            "oneOf": [_ref(INDEX_SPEC), _ref(COMPACT_SPEC), _ref(KILL_SPEC)],
            "discriminator": {
                "propertyName": "type",
                "mapping": {
                    task_type: f"#/components/schemas/{_COMPONENT_OF[task_type]}"
                    for task_type in TASK_TYPES
                },
            },
            "description": "A Druid native task spec (SPEC §6).",
        },
    }


def task_spec_ref() -> dict:
    return _ref(TASK_SPEC)
