"""The OpenAPI description of the Druid-compatible endpoints (console/druid.py and
Druid's SQL endpoint): Druid's own request and response shapes, documented so a
contract test can hold the shim to them. Lists stay plain lists, as Druid's
clients expect."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from console.openapi import JSON_TEXT, TEXT, DruidSqlErrorOutput, json_object, responses
from console.security import MAX_LIST_ITEMS
from metastore import spec_schema
from metastore.query import MAX_SQL_CHARS

_TASK_ID = OpenApiParameter("task_id", str, OpenApiParameter.PATH, pattern=r"^[^/\x00-\x1f\x7f]+$")
_DATASOURCE = OpenApiParameter(
    "datasource", str, OpenApiParameter.PATH, pattern=r"^[^/\x00-\x1f\x7f]+$"
)


class DruidLocation(serializers.Serializer):
    host = serializers.CharField(allow_null=True)
    port = serializers.IntegerField()
    tlsPort = serializers.IntegerField()  # noqa: N815


class DruidTaskStatus(serializers.Serializer):
    id = serializers.CharField()
    groupId = serializers.CharField()  # noqa: N815
    type = serializers.CharField()
    createdTime = serializers.CharField()  # noqa: N815
    queueInsertionTime = serializers.CharField()  # noqa: N815
    statusCode = serializers.ChoiceField(["RUNNING", "SUCCESS", "FAILED"])  # noqa: N815
    status = serializers.ChoiceField(["RUNNING", "SUCCESS", "FAILED"])
    runnerStatusCode = serializers.ChoiceField(  # noqa: N815
        ["PENDING", "WAITING", "RUNNING", "NONE"]
    )
    duration = serializers.IntegerField()
    location = DruidLocation()
    dataSource = serializers.CharField()  # noqa: N815
    errorMsg = serializers.CharField(allow_null=True)  # noqa: N815


class DruidTaskId(serializers.Serializer):
    task = serializers.CharField()


class DruidTaskStatusResponse(serializers.Serializer):
    task = serializers.CharField()
    status = DruidTaskStatus(allow_null=True, help_text="null when there is no such task (404)")


class DruidTaskPayload(serializers.Serializer):
    task = serializers.CharField()
    payload = serializers.DictField(help_text="the task's spec, with id, groupId, dataSource")


class DruidLock(serializers.Serializer):
    granularity = serializers.ChoiceField(["timeChunk", "segment"])
    type = serializers.CharField()
    groupId = serializers.CharField()  # noqa: N815
    dataSource = serializers.CharField()  # noqa: N815
    interval = serializers.CharField()
    version = serializers.CharField()
    priority = serializers.IntegerField()
    revoked = serializers.BooleanField()
    partitionId = serializers.IntegerField(required=False)  # noqa: N815


class DruidActiveLocks(serializers.Serializer):
    datasourceToLocks = serializers.DictField(child=DruidLock(many=True))  # noqa: N815


class DruidChanged(serializers.Serializer):
    numChangedSegments = serializers.IntegerField()  # noqa: N815


_STR = {"type": "string"}
_INT = {"type": "integer"}
SEGMENT = {
    "type": "object",
    "description": "A segment as Druid's DataSegment serializes",
    "properties": {
        "dataSource": _STR,
        "interval": _STR,
        "version": _STR,
        "loadSpec": {"type": "object"},
        "dimensions": {**_STR, "description": "comma-separated"},
        "metrics": {**_STR, "description": "comma-separated"},
        "shardSpec": {"type": "object"},
        "binaryVersion": _INT,
        "size": _INT,
        "identifier": _STR,
        "id": _STR,
        "lastCompactionState": {"type": "object"},
    },
    "required": [
        "dataSource",
        "interval",
        "version",
        "loadSpec",
        "dimensions",
        "metrics",
        "shardSpec",
        "binaryVersion",
        "size",
        "identifier",
        "id",
    ],
}
SEGMENT_STATUS = {
    "type": "object",
    "properties": {"dataSegment": SEGMENT, "overshadowed": {"type": "boolean"}},
    "required": ["dataSegment", "overshadowed"],
}
DATASOURCE_FULL = {
    "type": "object",
    "properties": {
        "name": _STR,
        "properties": {"type": "object"},
        "segments": {"type": "array", "items": SEGMENT},
    },
    "required": ["name", "properties", "segments"],
}
NAMES = {"type": "array", "items": _STR}
_LOCATION = {
    "type": "object",
    "properties": {"host": {**_STR, "nullable": True}, "port": _INT, "tlsPort": _INT},
    "required": ["host", "port", "tlsPort"],
}
BULK_STATUS = {
    "type": "object",
    "description": "task id -> status (unknown ids are left out)",
    "additionalProperties": {
        "type": "object",
        "properties": {
            "id": _STR,
            "status": {"type": "string", "enum": ["RUNNING", "SUCCESS", "FAILED"]},
            "duration": _INT,
            "errorMsg": {**_STR, "nullable": True},
            "location": _LOCATION,
        },
        "required": ["id", "status", "duration", "errorMsg", "location"],
    },
}


def druid_responses(ok: dict, *codes: int) -> dict:
    return responses(ok, *codes, druid=True)


LOCK_FILTERS = {
    "application/json": {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_LIST_ITEMS,
        "description": "Druid's LockFilterPolicy list",
        "items": {
            "type": "object",
            "properties": {
                # Druid matches the name as given: an unknown or odd name only
                # matches no lock, so the filter does not constrain its form.
                "datasource": JSON_TEXT,
                "priority": {"type": "integer", "nullable": True},
                "intervals": {
                    "type": "array",
                    "nullable": True,
                    "items": spec_schema.interval_schema(),
                },
                "context": {"type": "object", "nullable": True},
            },
            "required": ["datasource"],
        },
    }
}

MARK_REQUEST = {
    "application/json": {
        "type": "object",
        "description": "exactly one of interval (optionally with versions) or segmentIds; "
        "a null field is an absent one, as Jackson reads Druid's payload",
        "properties": {
            "interval": spec_schema.interval_schema(nullable=True),
            "versions": {
                "type": "array",
                "items": JSON_TEXT,
                "maxItems": MAX_LIST_ITEMS,
                "nullable": True,
            },
            "segmentIds": {
                "type": "array",
                "items": JSON_TEXT,
                "maxItems": MAX_LIST_ITEMS,
                "nullable": True,
            },
        },
    }
}

TASK_IDS = {"application/json": {"type": "array", "items": JSON_TEXT, "maxItems": MAX_LIST_ITEMS}}

SQL_REQUEST = {
    "application/json": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_SQL_CHARS,
                "description": "one SQL query",
            },
            "resultFormat": {
                "type": "string",
                "enum": ["object", "array", "objectLines", "arrayLines", "csv"],
                "nullable": True,
                "description": "read in any case (OBJECT, arraylines, ...), as Druid does",
            },
            "header": {"type": "boolean", "nullable": True},
            "typesHeader": {
                "type": "boolean",
                "nullable": True,
                "description": "with header: Druid's native type of each column",
            },
            "sqlTypesHeader": {
                "type": "boolean",
                "nullable": True,
                "description": "with header: the SQL type of each column",
            },
            "parameters": {
                "type": "array",
                "nullable": True,
                "description": "values for the query's ? placeholders, in order",
                "items": {
                    "type": "object",
                    "properties": {
                        "type": {
                            "type": "string",
                            "nullable": True,
                            "description": "VARCHAR, CHAR, BIGINT, INTEGER, SMALLINT, TINYINT, "
                            "DOUBLE, FLOAT, REAL, DECIMAL, BOOLEAN, TIMESTAMP (ISO text or "
                            "epoch milliseconds), DATE or ARRAY, in any case",
                        },
                        "value": {
                            "anyOf": [
                                {"type": "string"},
                                {"type": "number"},
                                {"type": "boolean"},
                                {"type": "array", "items": {}},
                            ],
                            "nullable": True,
                        },
                    },
                    "required": ["value"],
                },
            },
            "context": {
                "type": "object",
                "nullable": True,
                "properties": {
                    "sqlTimeZone": {
                        "nullable": True,
                        "anyOf": [
                            # an IANA zone name (an unknown one is a 400 naming it); not
                            # an enum: generated clients cannot name GMT0 and GMT-0 apart
                            {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_+/-]*$"},
                            {
                                "type": "string",
                                "pattern": "^([+](0[0-9]|1[0-4])|-(0[0-9]|1[0-2])):?00$",
                            },
                        ],
                    },
                    "timeout": {
                        "anyOf": [
                            {"type": "integer", "minimum": 0},
                            {"type": "string", "pattern": "^\\s*[0-9]+\\s*$"},
                        ],
                        "nullable": True,
                        "description": "ms; at most STRATA_QUERY_MAX_TIMEOUT_MS (0: that)",
                    },
                    "sqlQueryId": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": 256,
                        "nullable": True,
                        "description": "sent back in X-Druid-SQL-Query-Id (else a new UUID)",
                    },
                },
            },
        },
        "required": ["query"],
    }
}

SQL_RESPONSES = {
    (200, "application/json"): OpenApiResponse(
        {"type": "array", "items": {}},
        description="resultFormat object (rows as objects) or array (rows as arrays)",
    ),
    (200, "text/csv"): OpenApiResponse({"type": "string"}, description="resultFormat csv"),
    (200, "text/plain"): OpenApiResponse(
        {"type": "string"}, description="objectLines / arrayLines: one JSON value a line"
    ),
    **{key: value for key, value in responses({}, 413, 415).items()},
    400: OpenApiResponse(
        DruidSqlErrorOutput,
        description="Druid's error for a refused query, or a result over the size limit",
    ),
    504: OpenApiResponse(DruidSqlErrorOutput, description="Query timeout"),
}

TASK_LIST_PARAMS = [
    OpenApiParameter(
        "state", str, enum=["running", "waiting", "pending", "complete"], description="any case"
    ),
    OpenApiParameter("datasource", TEXT),
    OpenApiParameter("type", TEXT),
    OpenApiParameter(
        "max", {"type": "integer", "minimum": 0}, description="at most this many complete tasks"
    ),
    OpenApiParameter(
        "createdTimeInterval",
        str,
        description="created in this interval (start_end or start/end)",
        pattern=r"^$|^[^/_]+[/_][^/_]+$",
    ),
]

# Druid's flags: present (`?full`, an empty value) or =true / =false.
FLAG = {"type": "string", "enum": ["", "true", "false", "1", "0"]}
FULL = OpenApiParameter("full", FLAG, description="each with its segments")

PATH_TASK_ID = _TASK_ID
PATH_DATASOURCE = _DATASOURCE
TASK_SPEC_REQUEST = {"application/json": spec_schema.task_spec_ref()}
REPORT = json_object("Druid's ingestionStatsAndErrors report, with Strata's phase and progress")

# POST /druid/v2: Druid's native query language (Druid's "Native queries" pages
# document each query type); what Strata runs of it: metastore.druid.native.
NATIVE_QUERY_TYPES = [
    "timeseries",
    "topN",
    "groupBy",
    "scan",
    "timeBoundary",
    "segmentMetadata",
    "dataSourceMetadata",
    "search",
]
NATIVE_REQUEST = {
    "application/json": {
        "type": "object",
        "description": "A Druid native query: its fields as Druid documents them for its "
        "queryType; a field Strata does not run is refused (400) naming it.",
        "required": ["queryType", "dataSource"],
        "properties": {
            "queryType": {"type": "string", "enum": NATIVE_QUERY_TYPES},
            "dataSource": {
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    json_object(
                        "a dataSource object: table, union, inline, query, join or unnest "
                        "(lookup refused: Strata has no lookups)"
                    ),
                ]
            },
            "context": json_object("timeout (ms), priority (accepted, unused), ..."),
        },
        "additionalProperties": True,
    }
}
NATIVE_RESPONSES = druid_responses(
    {
        200: OpenApiResponse(
            {"type": "array", "items": {}},
            description="the results, in Druid's shape for the query type "
            "(an unknown dataSource has none)",
        )
    },
    413,
    415,
    504,
)
