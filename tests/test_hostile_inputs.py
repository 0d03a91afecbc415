"""A corpus of hostile requests (issue 15) against every endpoint that takes input:
the REST API's task submit, cancel, mark-used/unused and its query parameters;
the Druid shim's task submit and shutdown, markUsed/markUnused, taskStatus,
lock filters and list parameters; SQL at `POST /api/v1/query` and Druid's
`POST /druid/v2/sql` (writes, files, several statements, huge or deeply nested
SQL, bad `as_of`, Druid's `resultFormat`/`header`/`context`/`parameters`); the
console's forms, the login form and the Django admin.

Every case must be answered with a clean 4xx (never a 5xx, never a reset), as a
JSON body naming the offending field where the endpoint is the API (Druid SQL
keeps Druid's error body and adds `field`), and must create nothing: no task,
lock, dataSource, segment, commit, user, and no file under intermediary or deep
storage (where a refused COPY, EXPORT or ATTACH would have written).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

from metastore.models import (
    CommitLogEntry,
    DataSource,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
)

pytestmark = pytest.mark.django_db

ROOT = "{root}"  # replaced by the input root of the test session
DEEP = "{deep}"  # replaced by deep storage (where a refused COPY or ATTACH would write)


def base_spec() -> dict:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "hostile",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page"]},
                "metricsSpec": [{"type": "count", "name": "count"}],
                "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "NONE"},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {
                    "type": "inline",
                    "data": '{"ts": "2024-01-01T00:10:00Z", "page": "A"}\n',
                },
                "inputFormat": {"type": "json"},
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
    }


def edit(spec: dict, dotted: str, value) -> dict:
    spec = copy.deepcopy(spec)
    *parents, last = dotted.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return spec


def spec_with(*edits: tuple[str, object]) -> dict:
    spec = base_spec()
    for dotted, value in edits:
        spec = edit(spec, dotted, value)
    return spec


def hashed(**ps) -> dict:
    return spec_with(
        ("spec.dataSchema.granularitySpec.intervals", ["2024-01-01/2024-01-02"]),
        ("spec.tuningConfig.forceGuaranteedRollup", True),
        ("spec.tuningConfig.partitionsSpec", {"type": "hashed", **ps}),
    )


def kill(**fields) -> dict:
    return {"type": "kill", "dataSource": "wiki", "interval": "2024-01-01/2024-01-02", **fields}


def local(**source) -> dict:
    return spec_with(("spec.ioConfig.inputSource", {"type": "local", **source}))


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


def dumps_raw(spec: dict) -> str:
    return json.dumps(spec)


@dataclass
class Case:
    name: str
    path: str = "/api/v1/tasks"
    body: object = None  # a dict/list (sent as JSON) or a raw str/bytes
    content_type: str = "application/json"
    method: str = "post"
    status: tuple[int, ...] = (400,)
    field: str | None = None  # the field the error must name (API cases)


BIG = 10**30
API = "/api/v1/tasks"
MARK = "/api/v1/datasources/wiki/mark-unused"
MARK_USED = "/api/v1/datasources/wiki/mark-used"
DRUID_TASK = "/druid/indexer/v1/task"
DRUID_MARK = "/druid/indexer/v1/datasources/wiki/markUnused"
DRUID_MARK_USED = "/druid/coordinator/v1/datasources/wiki/markUsed"
DRUID_STATUS = "/druid/indexer/v1/taskStatus"
DRUID_LOCKS = "/druid/indexer/v1/activeLocks"
QUERY = "/api/v1/query"
DRUID_SQL = "/druid/v2/sql"
ALL_WIKI = "SELECT count(*) FROM wiki"


def subqueries(depth: int) -> str:
    return "SELECT * FROM (" * depth + "SELECT 1" + ")" * depth


CASES = [
    # --- JSON depth -------------------------------------------------------------------
    Case("arrays 10000 deep", body=nested(10_000)),
    Case("objects 10000 deep", body='{"a":' * 10_000 + "1" + "}" * 10_000),
    Case(
        "filter 200 deep",
        body=spec_with(
            (
                "spec.dataSchema.transformSpec",
                {
                    "filter": json.loads(
                        '{"type":"not","field":' * 200
                        + '{"type":"selector","dimension":"page","value":"A"}'
                        + "}" * 200
                    )
                },
            )
        ),
    ),
    Case("context 100 deep", body=spec_with(("context", json.loads(nested(100))))),
    Case("mark body 10000 deep", path=MARK, body=nested(10_000)),
    Case("mark-used body 10000 deep", path=MARK_USED, body='{"x":' * 5000 + "1" + "}" * 5000),
    # --- body size ----------------------------------------------------------------------
    Case(
        "50 MB body",
        body=b'{"type": "index_parallel", "pad": "' + b"x" * (50 * 2**20) + b'"}',
        status=(413,),
    ),
    Case(
        "11 MB inline data",
        body=spec_with(("spec.ioConfig.inputSource.data", "x" * (11 * 2**20))),
        status=(413,),
    ),
    Case("11 MB mark body", path=MARK, body={"segment_ids": ["a" * 1000] * 11_000}, status=(413,)),
    # --- bounded integers -----------------------------------------------------------------
    Case(
        "priority 2^63", body=spec_with(("context", {"priority": 2**63})), field="context.priority"
    ),
    Case(
        "priority -2^63-1",
        body=spec_with(("context", {"priority": -(2**63) - 1})),
        field="context.priority",
    ),
    Case(
        "priority 10^30", body=spec_with(("context", {"priority": BIG})), field="context.priority"
    ),
    Case(
        "priority 2^31", body=spec_with(("context", {"priority": 2**31})), field="context.priority"
    ),
    Case(
        "priority float", body=spec_with(("context", {"priority": 1.5})), field="context.priority"
    ),
    Case(
        "priority string",
        body=spec_with(("context", {"priority": "high"})),
        field="context.priority",
    ),
    Case(
        "priority true", body=spec_with(("context", {"priority": True})), field="context.priority"
    ),
    Case(
        "taskLockTimeout 10^30",
        body=spec_with(("context", {"taskLockTimeout": BIG})),
        field="context.taskLockTimeout",
    ),
    Case(
        "taskLockTimeout negative",
        body=spec_with(("context", {"taskLockTimeout": -1})),
        field="context.taskLockTimeout",
    ),
    Case(
        "numShards 10^30",
        body=hashed(numShards=BIG),
        field="spec.tuningConfig.partitionsSpec.numShards",
    ),
    Case(
        "numShards 2^31",
        body=hashed(numShards=2**31),
        field="spec.tuningConfig.partitionsSpec.numShards",
    ),
    Case(
        "numShards 0", body=hashed(numShards=0), field="spec.tuningConfig.partitionsSpec.numShards"
    ),
    Case(
        "targetRowsPerSegment 10^30",
        body=hashed(targetRowsPerSegment=BIG),
        field="spec.tuningConfig.partitionsSpec.targetRowsPerSegment",
    ),
    Case(
        "maxRetry 10^30",
        body=spec_with(("spec.tuningConfig.maxRetry", BIG)),
        field="spec.tuningConfig.maxRetry",
    ),
    Case(
        "maxRetry 1000",
        body=spec_with(("spec.tuningConfig.maxRetry", 1000)),
        field="spec.tuningConfig.maxRetry",
    ),
    Case(
        "maxParseExceptions 2^63",
        body=spec_with(("spec.tuningConfig.maxParseExceptions", 2**63)),
        field="spec.tuningConfig.maxParseExceptions",
    ),
    Case(
        "maxSavedParseExceptions 10^30",
        body=spec_with(("spec.tuningConfig.maxSavedParseExceptions", BIG)),
        field="spec.tuningConfig.maxSavedParseExceptions",
    ),
    Case(
        "maxNumConcurrentSubTasks 10^30",
        body=spec_with(("spec.tuningConfig.maxNumConcurrentSubTasks", BIG)),
        field="spec.tuningConfig.maxNumConcurrentSubTasks",
    ),
    Case(
        "totalNumMergeTasks 10^30",
        body=spec_with(("spec.tuningConfig.totalNumMergeTasks", BIG)),
        field="spec.tuningConfig.totalNumMergeTasks",
    ),
    Case(
        "maxRowsPerSegment 10^30",
        body=spec_with(
            ("spec.tuningConfig.partitionsSpec", {"type": "dynamic", "maxRowsPerSegment": BIG})
        ),
        field="spec.tuningConfig.partitionsSpec.maxRowsPerSegment",
    ),
    Case(
        "maxTotalRows 10^30",
        body=spec_with(
            ("spec.tuningConfig.partitionsSpec", {"type": "dynamic", "maxTotalRows": BIG})
        ),
        field="spec.tuningConfig.partitionsSpec.maxTotalRows",
    ),
    Case(
        "skipHeaderRows 10^30",
        body=spec_with(
            (
                "spec.ioConfig.inputFormat",
                {"type": "csv", "columns": ["ts", "page"], "skipHeaderRows": BIG},
            )
        ),
        field="spec.ioConfig.inputFormat.skipHeaderRows",
    ),
    Case(
        "a 5000-digit number",
        body='{"type": "index_parallel", "context": {"priority": ' + "9" * 5000 + "}}",
    ),
    Case("NaN priority", body='{"type": "index_parallel", "context": {"priority": NaN}}'),
    Case("Infinity priority", body='{"type": "index_parallel", "context": {"priority": Infinity}}'),
    Case("limit 10^30", method="get", path=f"/api/v1/tasks?limit={BIG}", field="limit"),
    Case("limit negative", method="get", path="/api/v1/tasks?limit=-1", field="limit"),
    Case(
        "as_of 10^30",
        method="get",
        path=f"/api/v1/datasources/wiki/timeline?as_of={BIG}",
        field="as_of",
    ),
    # --- dates outside years 1-9999 ---------------------------------------------------------
    *[
        Case(
            f"interval {iv}",
            body=spec_with(("spec.dataSchema.granularitySpec.intervals", [iv])),
            field="spec.dataSchema.granularitySpec.intervals[0]",
        )
        for iv in (
            "10000-01-01/10001-01-01",
            "+275760-09-13/2000-01-01",
            "0001-01-01T00:00:00+01:00/2000-01-01",
            "9999-12-31T23:00:00-05:00/9999-12-31T23:30:00-05:00",
            "9999-06-01/9999-07-01",
            "2000-13-01/2000-14-01",
            "2000-01-01/" + "9" * 10_000,
        )
    ],
    Case(
        "missingValue year 10000",
        body=spec_with(
            ("spec.dataSchema.timestampSpec", {"column": "ts", "missingValue": "10000-01-01"})
        ),
        field="spec.dataSchema.timestampSpec.missingValue",
    ),
    Case(
        "kill interval past 9999",
        body=kill(interval="9999-12-31T12:00-13:00/9999-12-31T23:00Z"),
        field="interval",
    ),
    Case(
        "mark-used interval overflow",
        path=MARK_USED,
        body={"interval": "9999-12-31T23:00-05:00/9999-12-31T23:30-05:00"},
        field="interval",
    ),
    Case(
        "segments ?interval overflow",
        method="get",
        path="/api/v1/datasources/wiki/segments?interval=9999-12-31T23:00-05:00/9999-12-31T23:30-05:00",
        field="interval",
    ),
    # --- task ids -----------------------------------------------------------------------------
    *[
        Case(f"task id {tid[:20]!r}", body=spec_with(("id", tid)), field="id")
        for tid in (
            "../../x",
            "/abs/path",
            "a\x00b",
            "x" * 10_000,
            "",
            " ",
            ".hidden",
            "a/b",
            "a\\b",
            "é",
            "line\nbreak",
            "with space",
            "-starts-with-dash",
            "..",
        )
    ],
    Case("task id integer", body=spec_with(("id", 42)), field="id"),
    Case("task id list", body=spec_with(("id", ["x"])), field="id"),
    Case("groupId ../x", body=spec_with(("groupId", "../x")), field="groupId"),
    Case("kill task id traversal", body=kill(id="../../etc"), field="id"),
    # --- dataSource names ----------------------------------------------------------------------
    *[
        Case(
            f"dataSource {name[:20]!r}",
            body=spec_with(("spec.dataSchema.dataSource", name)),
            field="spec.dataSchema.dataSource",
        )
        for name in (
            "ctl\x01char",
            "d" * 800,
            "é" * 150,  # 300 bytes
            "a/b",
            ".hidden",
            "..",
            "",
            "   ",
            "tab\there",
            "new\nline",
            "zero\u200bwidth",
            "rtl\u202eoverride",
            "nul\x00byte",
            "del\x7f",
        )
    ],
    Case(
        "dataSource integer",
        body=spec_with(("spec.dataSchema.dataSource", 5)),
        field="spec.dataSchema.dataSource",
    ),
    Case("kill dataSource slash", body=kill(dataSource="../wiki"), field="dataSource"),
    Case("kill dataSource control", body=kill(dataSource="w\x1bki"), field="dataSource"),
    Case(
        "compact dataSource long",
        body={
            "type": "compact",
            "dataSource": "x" * 1000,
            "ioConfig": {
                "type": "compact",
                "inputSpec": {"type": "interval", "interval": "2024-01-01/2024-01-02"},
            },
        },
        field="dataSource",
    ),
    # --- duplicate keys --------------------------------------------------------------------------
    Case("type twice", body='{"type": "index_parallel", "type": "kill"}', field="type"),
    Case(
        "dataSource twice",
        body=dumps_raw(base_spec()).replace(
            '"dataSource": "hostile"', '"dataSource": "hostile", "dataSource": "other"'
        ),
        field="dataSource",
    ),
    Case(
        "priority twice",
        body='{"type": "kill", "context": {"priority": 1, "priority": 2}}',
        field="priority",
    ),
    Case(
        "mark interval twice",
        path=MARK,
        body='{"interval": "2024-01-01/2024-01-02", "interval": "2024-01-01/2025-01-01"}',
        field="interval",
    ),
    # --- content types ---------------------------------------------------------------------------
    Case(
        "form-encoded spec",
        body="type=index_parallel",
        content_type="application/x-www-form-urlencoded",
        status=(415,),
    ),
    Case(
        "multipart spec",
        body=b'--b\r\nContent-Disposition: form-data; name="type"\r\n\r\nkill\r\n--b--\r\n',
        content_type="multipart/form-data; boundary=b",
        status=(415,),
    ),
    Case("text/plain spec", body=dumps_raw(base_spec()), content_type="text/plain", status=(415,)),
    Case("xml spec", body="<task/>", content_type="application/xml", status=(415,)),
    Case("no content type", body=dumps_raw(base_spec()), content_type="", status=(415,)),
    Case(
        "utf-16 charset",
        body=dumps_raw(base_spec()).encode("utf-16"),
        content_type="application/json; charset=utf-16",
        status=(415,),
    ),
    Case(
        "form-encoded mark",
        path=MARK,
        body="interval=2024-01-01/2024-01-02",
        content_type="application/x-www-form-urlencoded",
        status=(415,),
    ),
    # --- paths: NUL bytes and over-long names, before the filesystem --------------------------------
    Case(
        "files with NUL",
        body=local(files=[ROOT + "/a\x00b.json"]),
        field="spec.ioConfig.inputSource.files[0]",
    ),
    Case(
        "files 10000-char name",
        body=local(files=[ROOT + "/" + "n" * 10_000]),
        field="spec.ioConfig.inputSource.files[0]",
    ),
    Case(
        "files 300-byte component",
        body=local(files=[ROOT + "/" + "n" * 300 + "/x.json"]),
        field="spec.ioConfig.inputSource.files[0]",
    ),
    Case(
        "files path over PATH_MAX",
        body=local(files=[ROOT + "/a" * 3000]),
        field="spec.ioConfig.inputSource.files[0]",
    ),
    Case(
        "baseDir with NUL",
        body=local(baseDir=ROOT + "\x00", filter="*"),
        field="spec.ioConfig.inputSource.baseDir",
    ),
    Case(
        "baseDir 10000 chars",
        body=local(baseDir=ROOT + "/" + "d" * 10_000, filter="*"),
        field="spec.ioConfig.inputSource.baseDir",
    ),
    Case(
        "filter with NUL",
        body=local(baseDir=ROOT, filter="*\x00.json"),
        field="spec.ioConfig.inputSource.filter",
    ),
    Case(
        "filter 10000 chars",
        body=local(baseDir=ROOT, filter="f" * 10_000),
        field="spec.ioConfig.inputSource.filter",
    ),
    Case(
        "files escaping the root",
        body=local(files=[ROOT + "/../../etc/passwd"]),
        field="spec.ioConfig.inputSource.files[0]",
    ),
    Case(
        "files with a newline",
        body=local(files=[ROOT + "/a\nb.json"]),
        field="spec.ioConfig.inputSource.files[0]",
    ),
    # --- strings PostgreSQL cannot store ---------------------------------------------------------
    Case(
        "NUL in a dimension name",
        body=spec_with(("spec.dataSchema.dimensionsSpec", {"dimensions": ["pa\x00ge"]})),
        field="spec.dataSchema.dimensionsSpec.dimensions[0]",
    ),
    Case(
        "NUL in inline data",
        body=spec_with(("spec.ioConfig.inputSource.data", "a\x00b")),
        field="spec.ioConfig.inputSource.data",
    ),
    Case("NUL in a key", body={"type": "kill", "con\x00text": {}}, field="con\x00text"),
    Case(
        "lone surrogate in a dimension",
        body=dumps_raw(base_spec()).replace('"page"]', '"\\ud800"]'),
        field="spec.dataSchema.dimensionsSpec.dimensions[0]",
    ),
    Case(
        "NUL in mark segment id",
        path=MARK,
        body={"segment_ids": ["a\x00b"]},
        field="segment_ids[0]",
    ),
    # --- malformed JSON ------------------------------------------------------------------------------
    Case("truncated JSON", body='{"type": "index_parallel", '),
    Case("trailing garbage", body='{"type": "kill"} xyz'),
    Case("invalid UTF-8", body=b'{"type": "\xff\xfe"}'),
    Case("empty body", body=""),
    Case("JSON null", body="null", field="(body)"),
    Case("JSON string", body='"index_parallel"', field="(body)"),
    Case("mark body a list", path=MARK, body=[1, 2], field="(body)"),
    Case(
        "mark segment_ids not a list", path=MARK, body={"segment_ids": "abc"}, field="segment_ids"
    ),
    Case("mark nothing", path=MARK, body={}, field="(body)"),
    Case("mark interval 10000 chars", path=MARK, body={"interval": "2" * 10_000}, field="interval"),
    # --- URLs and query parameters -----------------------------------------------------------------
    Case("task id %00 in URL", method="get", path="/api/v1/tasks/a%00b", status=(400, 404)),
    Case("cancel %00 in URL", path="/api/v1/tasks/a%00b/cancel", body={}, status=(400, 404)),
    Case(
        "cancel 10000-char id",
        path="/api/v1/tasks/" + "x" * 10_000 + "/cancel",
        body={},
        status=(404,),
    ),
    Case("cancel traversal id", path="/api/v1/tasks/..%2F..%2Fx/cancel", body={}, status=(404,)),
    Case(
        "datasource %00 in URL",
        method="get",
        path="/api/v1/datasources/a%00b/segments",
        status=(400, 404),
    ),
    Case(
        "mark on datasource %01",
        path="/api/v1/datasources/a%01b/mark-unused",
        body={"interval": "2024-01-01/2024-01-02"},
        status=(400, 404),
    ),
    Case("status %00", method="get", path="/api/v1/tasks?status=RUN%00NING", field="status"),
    Case(
        "datasource param %00",
        method="get",
        path="/api/v1/tasks?datasource=a%00b",
        field="datasource",
    ),
    Case(
        "locks datasource %00",
        method="get",
        path="/api/v1/locks?datasource=a%00b",
        field="datasource",
    ),
    Case(
        "used=maybe",
        method="get",
        path="/api/v1/datasources/wiki/segments?used=maybe",
        field="used",
    ),
    Case(
        "as_of not a number",
        method="get",
        path="/api/v1/datasources/wiki/timeline?as_of=x",
        field="as_of",
    ),
    Case("unknown route", method="get", path="/api/v1/nope", status=(404,)),
    Case("DELETE a task", method="delete", path="/api/v1/tasks/x", status=(405, 404)),
    Case("PUT the task list", method="put", path="/api/v1/tasks", body={}, status=(405,)),
    Case("limit superscript one", method="get", path="/api/v1/tasks?limit=%C2%B9", field="limit"),
    Case(
        "as_of superscript one",
        method="get",
        path="/api/v1/datasources/wiki/timeline?as_of=%C2%B9",
        field="as_of",
    ),
    Case(
        "mark 300,000 segment ids",
        path=MARK,
        body={"segment_ids": [f"{i:x}" for i in range(300_000)]},
        field="segment_ids",
    ),
    # --- the Druid shim: task submit and shutdown -------------------------------------------
    Case("druid submit 10000 deep", path=DRUID_TASK, body=nested(10_000), field="(body)"),
    Case(
        "druid submit type twice",
        path=DRUID_TASK,
        body='{"type": "index_parallel", "type": "kill"}',
        field="type",
    ),
    Case(
        "druid submit 50 MB",
        path=DRUID_TASK,
        body=b'{"type": "index_parallel", "pad": "' + b"x" * (50 * 2**20) + b'"}',
        status=(413,),
    ),
    Case(
        "druid submit form-encoded",
        path=DRUID_TASK,
        body="type=kill&dataSource=wiki",
        content_type="application/x-www-form-urlencoded",
        status=(415,),
    ),
    Case(
        "druid submit text/plain",
        path=DRUID_TASK,
        body=dumps_raw(base_spec()),
        content_type="text/plain",
        status=(415,),
    ),
    Case("druid submit a list", path=DRUID_TASK, body=[base_spec()], field="(body)"),
    Case("druid submit null", path=DRUID_TASK, body="null", field="(body)"),
    Case("druid submit a number", path=DRUID_TASK, body="42", field="(body)"),
    Case("druid submit truncated", path=DRUID_TASK, body='{"type": "kill", '),
    Case(
        "druid submit NUL in data",
        path=DRUID_TASK,
        body=spec_with(("spec.ioConfig.inputSource.data", "a\x00b")),
        field="spec.ioConfig.inputSource.data",
    ),
    *[
        Case(f"druid submit task id {tid[:20]!r}", path=DRUID_TASK, body=kill(id=tid), field="id")
        for tid in ("../../x", "/abs/path", "a\x00b", "x" * 10_000, "", "a/b", "line\nbreak")
    ],
    *[
        Case(
            f"druid submit dataSource {name[:20]!r}",
            path=DRUID_TASK,
            body=spec_with(("spec.dataSchema.dataSource", name)),
            field="spec.dataSchema.dataSource",
        )
        for name in ("ctl\x01char", "d" * 800, "a/b", "..", "nul\x00byte", "rtl\u202eoverride")
    ],
    Case(
        "druid submit priority 2^63",
        path=DRUID_TASK,
        body=kill(context={"priority": 2**63}),
        field="context.priority",
    ),
    Case(
        "druid kill interval past 9999",
        path=DRUID_TASK,
        body=kill(interval="9999-12-31T23:00-05:00/9999-12-31T23:30-05:00"),
        field="interval",
    ),
    Case(
        "druid submit local path NUL",
        path=DRUID_TASK,
        body=local(files=[ROOT + "/a\x00b.json"]),
        field="spec.ioConfig.inputSource.files[0]",
    ),
    Case(
        "druid shutdown 10000-char id",
        path="/druid/indexer/v1/task/" + "x" * 10_000 + "/shutdown",
        body={},
        status=(404,),
    ),
    Case(
        "druid shutdown traversal id",
        path="/druid/indexer/v1/task/..%2F..%2Fx/shutdown",
        body={},
        status=(404,),
    ),
    Case("druid shutdown %00 id", path="/druid/indexer/v1/task/a%00b/shutdown", body={}),
    Case("druid payload %01 id", method="get", path="/druid/indexer/v1/task/a%01b"),
    # --- the Druid shim: markUnused / markUsed ----------------------------------------------------
    Case("druid mark 10000 deep", path=DRUID_MARK, body=nested(10_000), field="(body)"),
    Case("druid mark a list", path=DRUID_MARK, body=["2024-01-01/2024-01-02"], field="(body)"),
    Case("druid mark nothing", path=DRUID_MARK, body={}, field="interval"),
    Case(
        "druid mark both interval and ids",
        path=DRUID_MARK,
        body={"interval": "2024-01-01/2024-01-02", "segmentIds": ["x"]},
        field="interval",
    ),
    Case(
        "druid mark interval twice",
        path=DRUID_MARK,
        body='{"interval": "2024-01-01/2024-01-02", "interval": "2000-01-01/2030-01-01"}',
        field="interval",
    ),
    *[
        Case(
            f"druid markUnused interval {iv!r:.30}",
            path=DRUID_MARK,
            body={"interval": iv},
            field="interval",
        )
        for iv in (
            "9999-12-31T23:00-05:00/9999-12-31T23:30-05:00",
            "0001-01-01T00:00+01:00/2000-01-01",
            "9999-12-31T24:00/9999-12-31T24:00",
            "2024-01-02/2024-01-01",
            "2" * 10_000,
            5,
            ["2024-01-01/2024-01-02"],
        )
    ],
    Case(
        "druid markUsed interval past 9999",
        path=DRUID_MARK_USED,
        body={"interval": "9999-12-31T23:00-05:00/9999-12-31T23:30-05:00"},
        field="interval",
    ),
    Case(
        "druid mark versions past 9999",
        path=DRUID_MARK,
        body={"interval": "9999-12-31T23:00-05:00/9999-12-31T23:30-05:00", "versions": ["v"]},
        field="interval",
    ),
    Case(
        "druid mark segmentIds a string",
        path=DRUID_MARK,
        body={"segmentIds": "x"},
        field="segmentIds",
    ),
    Case(
        "druid mark segmentIds numbers",
        path=DRUID_MARK,
        body={"segmentIds": [1, 2]},
        field="segmentIds",
    ),
    Case(
        "druid mark segmentIds objects",
        path=DRUID_MARK,
        body={"segmentIds": [{"id": "x"}]},
        field="segmentIds",
    ),
    Case(
        "druid mark 300,000 segmentIds",
        path=DRUID_MARK,
        body={"segmentIds": [f"{i:x}" for i in range(300_000)]},
        field="segmentIds",
    ),
    Case(
        "druid mark segmentId with NUL",
        path=DRUID_MARK,
        body={"segmentIds": ["a\x00b"]},
        field="segmentIds[0]",
    ),
    Case(
        "druid mark versions with segmentIds",
        path=DRUID_MARK,
        body={"segmentIds": ["x"], "versions": ["v"]},
        field="versions",
    ),
    Case(
        "druid mark versions a string",
        path=DRUID_MARK,
        body={"interval": "2024-01-01/2024-01-02", "versions": "v"},
        field="versions",
    ),
    Case(
        "druid mark 300,000 versions",
        path=DRUID_MARK,
        body={"interval": "2024-01-01/2024-01-02", "versions": [f"{i:x}" for i in range(300_000)]},
        field="versions",
    ),
    Case(
        "druid mark form-encoded",
        path=DRUID_MARK,
        body="interval=2024-01-01/2024-01-02",
        content_type="application/x-www-form-urlencoded",
        status=(415,),
    ),
    Case(
        "druid mark 11 MB",
        path=DRUID_MARK,
        body={"segmentIds": ["a" * 1000] * 11_000},
        status=(413,),
    ),
    Case(
        "druid mark on dataSource %01",
        path="/druid/indexer/v1/datasources/a%01b/markUnused",
        body={"interval": "2024-01-01/2024-01-02"},
    ),
    Case(
        "druid mark on a 10000-char dataSource",
        path="/druid/coordinator/v1/datasources/" + "d" * 10_000 + "/markUnused",
        body={"interval": "2024-01-01/2024-01-02"},
        status=(404,),
    ),
    # --- the Druid shim: reads that take input -------------------------------------------------
    Case("druid taskStatus an object", path=DRUID_STATUS, body={"ids": ["x"]}, field="(body)"),
    Case("druid taskStatus numbers", path=DRUID_STATUS, body=[1, 2], field="(body)"),
    Case(
        "druid taskStatus 300,000 ids",
        path=DRUID_STATUS,
        body=[f"{i:x}" for i in range(300_000)],
        field="(body)",
    ),
    Case("druid taskStatus NUL id", path=DRUID_STATUS, body=["a\x00b"], field="(body)[0]"),
    Case("druid activeLocks empty", path=DRUID_LOCKS, body=[], field="(body)"),
    Case("druid activeLocks not objects", path=DRUID_LOCKS, body=["wiki"], field="[0].datasource"),
    Case(
        "druid activeLocks interval past 9999",
        path=DRUID_LOCKS,
        body=[
            {"datasource": "wiki", "intervals": ["9999-12-31T23:00-05:00/9999-12-31T23:30-05:00"]}
        ],
        field="[0].intervals[0]",
    ),
    Case(
        "druid activeLocks priority a string",
        path=DRUID_LOCKS,
        body=[{"datasource": "wiki", "priority": "high"}],
        field="[0].priority",
    ),
    Case(
        "druid activeLocks 20,000 policies",
        path=DRUID_LOCKS,
        body=[{"datasource": f"d{i}"} for i in range(20_000)],
        field="(body)",
    ),
    Case(
        "druid tasks createdTimeInterval past 9999",
        method="get",
        path="/druid/indexer/v1/tasks?createdTimeInterval=9999-12-31T23:00-05:00_9999-12-31T23:30-05:00",
        field="createdTimeInterval",
    ),
    Case(
        "druid completeTasks max 60 digits",
        method="get",
        path="/druid/indexer/v1/completeTasks?max=" + "9" * 60,
        field="max",
    ),
    Case(
        "druid completeTasks max superscript one",
        method="get",
        path="/druid/indexer/v1/completeTasks?max=%C2%B9",
        field="max",
    ),
    Case(
        "druid tasks state bogus",
        method="get",
        path="/druid/indexer/v1/tasks?state=x",
        field="state",
    ),
    Case(
        "druid metadata full=maybe",
        method="get",
        path="/druid/coordinator/v1/metadata/datasources?full=maybe",
        field="full",
    ),
    # --- SQL: POST /api/v1/query -----------------------------------------------------------
    *[
        Case(f"query sql {value!r:.30}", path=QUERY, body={"sql": value}, field="sql")
        for value in (5, 1.5, True, None, ["SELECT 1"], {"text": "SELECT 1"}, "", "   ", "a\x00b")
    ],
    Case("query without sql", path=QUERY, body={"as_of": 1}, field="sql"),
    *[
        Case(f"query {sql[:40]!r}", path=QUERY, body={"sql": sql}, field="sql")
        for sql in (
            "INSERT INTO wiki VALUES (1)",
            "DELETE FROM wiki",
            "DROP VIEW wiki",
            "CREATE TABLE t AS SELECT 1",
            "COPY (SELECT 1) TO '{deep}/stolen.csv'",
            "EXPORT DATABASE '{deep}/exported'",
            "ATTACH '{deep}/attached.duckdb' AS x",
            "PRAGMA database_list",
            "INSTALL httpfs",
            "LOAD httpfs",
            "SET enable_external_access = true",
            "CALL pragma_version()",
            "SELECT * FROM read_csv('/etc/passwd')",
            "SELECT * FROM read_text('{root}/../../etc/passwd')",
            "SELECT * FROM glob('/*')",
            "SELECT * FROM query('CREATE TABLE t AS SELECT 1')",
            "SELECT 1; SELECT 2",
            "SELECT 1; DROP VIEW wiki",
            "SELEC 1",
            "SELECT ?",
        )
    ],
    # Long SQL takes seconds a megabyte to parse; subqueries nested 100,000 deep
    # crash DuckDB's parser, and the web process with it: refused before parsing.
    *[
        Case(f"{endpoint} {what}", path=path, body={key: sql}, field=key)
        for endpoint, path, key in (("query", QUERY, "sql"), ("druid sql", DRUID_SQL, "query"))
        for what, sql in (
            ("60,000 UNION ALLs", "SELECT 1 " + "UNION ALL SELECT 1 " * 60_000),
            ("subqueries 100,000 deep", subqueries(100_000)),
            ("subqueries 5,000 deep", subqueries(5_000)),
            ("parentheses 3,000 deep", "SELECT " + "(" * 3000 + "1" + ")" * 3000),
        )
    ],
    *[
        Case(
            f"query as_of {value!r:.30}",
            path=QUERY,
            body={"sql": ALL_WIKI, "as_of": value},
            field="as_of",
        )
        for value in ("yesterday", -1, 1.5, True, 2**63, BIG, [1], {"seq": 1})
    ],
    Case("query unknown field", path=QUERY, body={"sql": ALL_WIKI, "asOf": 1}, field="asOf"),
    Case("query a list", path=QUERY, body=[{"sql": "SELECT 1"}], field="(body)"),
    Case("query a string", path=QUERY, body='"SELECT 1"', field="(body)"),
    Case("query 10000 deep", path=QUERY, body=nested(10_000), field="(body)"),
    Case("query sql twice", path=QUERY, body='{"sql": "SELECT 1", "sql": "SELECT 2"}', field="sql"),
    Case(
        "query form-encoded",
        path=QUERY,
        body="sql=SELECT+1",
        content_type="application/x-www-form-urlencoded",
        status=(415,),
    ),
    Case("query text/plain", path=QUERY, body="SELECT 1", content_type="text/plain", status=(415,)),
    Case(
        "query 11 MB", path=QUERY, body={"sql": "SELECT 1 -- " + "x" * (11 * 2**20)}, status=(413,)
    ),
    # --- SQL: Druid's POST /druid/v2/sql ------------------------------------------------------
    *[
        Case(f"druid sql query {value!r:.30}", path=DRUID_SQL, body={"query": value}, field="query")
        for value in (5, None, True, ["SELECT 1"], "", "  ", "a\x00b")
    ],
    Case("druid sql without query", path=DRUID_SQL, body={"sql": "SELECT 1"}, field="query"),
    *[
        Case(f"druid sql {sql[:40]!r}", path=DRUID_SQL, body={"query": sql}, field="query")
        for sql in (
            "INSERT INTO wiki VALUES (1)",
            "DROP VIEW wiki",
            "COPY (SELECT 1) TO '{deep}/stolen.csv'",
            "ATTACH '{deep}/attached.duckdb' AS x",
            "PRAGMA database_list",
            "SELECT * FROM read_csv('/etc/passwd')",
            "SELECT 1; SELECT 2",
        )
    ],
    *[
        Case(
            f"druid sql resultFormat {value!r:.20}",
            path=DRUID_SQL,
            body={"query": "SELECT 1", "resultFormat": value},
            field="resultFormat",
        )
        for value in ("xml", "", [], ["csv"], {"type": "csv"}, 0, False)
    ],
    *[
        Case(
            f"druid sql header {value!r:.20}",
            path=DRUID_SQL,
            body={"query": "SELECT 1", "header": value},
            field="header",
        )
        for value in ("yes", 1, [], {"a": 1})
    ],
    *[
        Case(
            f"druid sql context {value!r:.30}",
            path=DRUID_SQL,
            body={"query": "SELECT 1", "context": value},
            field=field,
        )
        for value, field in (
            ("x", "context"),
            ([], "context"),
            (0, "context"),
            ({"sqlTimeZone": "Mars/Olympus_Mons"}, "context.sqlTimeZone"),
            ({"sqlTimeZone": ["UTC"]}, "context.sqlTimeZone"),
            ({"sqlTimeZone": {"id": "UTC"}}, "context.sqlTimeZone"),
            ({"sqlQueryId": "a\x00b"}, "context.sqlQueryId"),
            ({"junk": json.loads(nested(100))}, "(body)"),
        )
    ],
    *[
        Case(
            f"druid sql parameters {value!r:.30}",
            path=DRUID_SQL,
            body={"query": "SELECT ?", "parameters": value},
            field=field,
        )
        for value, field in (
            (5, "parameters"),
            ("abc", "parameters"),
            ({"type": "VARCHAR", "value": "a"}, "parameters"),
            ([1], "parameters[0]"),
            ([{"type": "VARCHAR"}], "parameters[0]"),
            ([{"type": 5, "value": 1}], "parameters[0].type"),
            ([{"type": "VARCHAR", "value": {"a": 1}}], "parameters[0].value"),
            ([{"type": "VARCHAR", "value": [1, 2]}], "parameters[0].value"),
            ([{"type": "BIGINT", "value": BIG}], "parameters[0].value"),
            ([{"type": "BIGINT", "value": -(2**63) - 1}], "parameters[0].value"),
            ([], "query"),  # one parameter too few
            ([{"type": "BIGINT", "value": 1}] * 2, "query"),  # one too many
        )
    ],
    Case("druid sql a list", path=DRUID_SQL, body=[{"query": "SELECT 1"}], field="(body)"),
    Case("druid sql null", path=DRUID_SQL, body="null", field="(body)"),
    Case("druid sql 10000 deep", path=DRUID_SQL, body=nested(10_000), field="(body)"),
    Case(
        "druid sql query twice",
        path=DRUID_SQL,
        body='{"query": "SELECT 1", "query": "DROP VIEW wiki"}',
        field="query",
    ),
    Case(
        "druid sql form-encoded",
        path=DRUID_SQL,
        body="query=SELECT+1",
        content_type="application/x-www-form-urlencoded",
        status=(415,),
    ),
    Case(
        "druid sql text/plain",
        path=DRUID_SQL,
        body="SELECT 1",
        content_type="text/plain",
        status=(415,),
    ),
    Case(
        "druid sql 11 MB",
        path=DRUID_SQL,
        body={"query": "SELECT 1 -- " + "x" * (11 * 2**20)},
        status=(413,),
    ),
]


def _snapshot(strata_dirs) -> dict:
    files = sorted(
        str(p)
        for root in (strata_dirs.deep, strata_dirs.intermediary)
        if root.exists()
        for p in root.rglob("*")
    )
    return {
        "tasks": Task.objects.count(),
        "locks": TaskLock.objects.count(),
        "datasources": DataSource.objects.count(),
        "segments": list(Segment.objects.order_by("id").values_list("id", "used")),
        "pending": PendingSegment.objects.count(),
        "commits": CommitLogEntry.objects.count(),
        "users": get_user_model().objects.count(),
        "files": files,
    }


@pytest.fixture
def wiki(publish):
    """A dataSource `wiki` with one published segment, for the mark endpoints."""
    cache.clear()  # the anonymous throttle and login counters are per process
    return publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})


def _encode(case: Case, dirs):
    body = case.body
    if isinstance(body, dict | list):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.replace(ROOT, str(dirs.input_root)).replace(DEEP, str(dirs.deep))
    return body


def _refusal_text(payload: dict) -> str:
    """The words of a refusal: `error`, or Druid SQL's `errorMessage` (its `error` is
    the constant "druidException")."""
    if payload.get("error") == "druidException":
        return payload["errorMessage"]
    return payload["error"]


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 100, len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_api_request_is_a_clean_4xx(case, api_client, wiki, strata_dirs, no_enqueue):
    before = _snapshot(strata_dirs)
    body = _encode(case, strata_dirs)
    if case.method == "get":
        response = api_client.get(case.path)
    else:
        data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else (body or b"")
        response = api_client.generic(
            case.method.upper(), case.path, data, content_type=case.content_type
        )
    assert response.status_code in case.status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    payload = response.json()
    if case.field is not None:
        assert case.field in (payload.get("field") or ""), payload
        assert case.field in _refusal_text(payload), payload
    assert "Traceback" not in response.content.decode(errors="replace")
    assert _snapshot(strata_dirs) == before


# --- the console's forms, the login form and the admin -------------------------------------------

CONSOLE_SPECS = [
    ("depth", nested(10_000)),
    ("duplicate type", '{"type": "index_parallel", "type": "kill"}'),
    ("priority 2^63", json.dumps(spec_with(("context", {"priority": 2**63})))),
    ("task id traversal", json.dumps(spec_with(("id", "../../x")))),
    ("dataSource control char", json.dumps(spec_with(("spec.dataSchema.dataSource", "a\x01b")))),
    ("NUL in data", json.dumps(spec_with(("spec.ioConfig.inputSource.data", "a\x00b")))),
    (
        "interval overflow",
        json.dumps(
            spec_with(
                (
                    "spec.dataSchema.granularitySpec.intervals",
                    ["9999-12-31T23:00-05:00/9999-12-31T23:30-05:00"],
                )
            )
        ),
    ),
    ("local path NUL", json.dumps(local(files=["/tmp/a\x00b"]))),
    ("huge number", '{"type": "kill", "context": {"priority": ' + "9" * 5000 + "}}"),
    ("numShards 10^30", json.dumps(hashed(numShards=BIG))),
]


@pytest.mark.parametrize(("name", "text"), CONSOLE_SPECS, ids=[n for n, _ in CONSOLE_SPECS])
def test_hostile_console_submit_is_refused_and_creates_nothing(
    name, text, client, user, wiki, strata_dirs
):
    client.force_login(user)
    before = _snapshot(strata_dirs)
    response = client.post("/tasks/submit", {"spec": text})
    # 400 and the form again, the error at its field (not a redirect and a flash).
    assert response.status_code == 400, response.status_code
    page = response.content.decode()
    assert "Invalid spec" in page or "refused" in page, page[:2000]
    assert 'class="error-box spec-error" data-field="' in page
    assert 'name="csrfmiddlewaretoken"' in page and "<textarea" in page
    assert _snapshot(strata_dirs) == before


CONSOLE_ACTIONS = [
    (
        "unknown action",
        {"action": "drop_everything", "interval": "2024-01-01/2024-01-02"},
        "action",
    ),
    ("no action", {"interval": "2024-01-01/2024-01-02"}, "action"),
    ("bad interval", {"action": "mark_unused", "interval": "last tuesday"}, "interval"),
    ("NUL interval", {"action": "kill", "interval": "2024-01-01/\x002024-01-02"}, "interval"),
    ("long interval", {"action": "mark_used", "interval": "2024-" * 5000}, "interval"),
    ("compact without interval", {"action": "compact"}, "interval"),
    ("kill without interval", {"action": "kill", "confirm": "yes"}, "interval"),
    ("mark nothing", {"action": "mark_unused", "confirm": "yes"}, "interval"),
]


# Interval ends outside the years 1-9999 are valid Joda instants, as Druid's own
# ETERNITY writes them: they are accepted and mean the open-ended interval (clipped
# to the representable years, where no row of Strata can lie), not refused.
OPEN_ENDED = [
    ("kill year 0", "post", DRUID_TASK, kill(interval="0000-01-01/2000-01-01")),
    ("api kill year 0", "post", API, kill(interval="-0001-01-01/2000-01-01")),
    ("mark-unused year 0", "post", MARK, {"interval": "0000-01-01/2000-01-01"}),
    ("druid markUnused year 0", "post", DRUID_MARK, {"interval": "0000-01-01/2000-01-01"}),
    (
        "timeline year 0",
        "get",
        "/api/v1/datasources/wiki/timeline?interval=0000-01-01/2000-01-01",
        None,
    ),
    (
        "lockedIntervals year 0",
        "post",
        "/druid/indexer/v1/lockedIntervals/v2",
        [{"datasource": "wiki", "intervals": ["0000-01-01/2000-01-01"]}],
    ),
    (
        "granularitySpec.intervals to year 99999",
        "post",
        API,
        spec_with(("spec.dataSchema.granularitySpec.intervals", ["2000-01-01/99999-01-01"])),
    ),
]


@pytest.mark.parametrize(
    ("name", "method", "path", "body"), OPEN_ENDED, ids=[c[0] for c in OPEN_ENDED]
)
def test_interval_ends_beyond_the_representable_years_are_druids_open_intervals(
    name, method, path, body, api_client, wiki, strata_dirs, no_enqueue
):
    if method == "get":
        response = api_client.get(path)
    else:
        response = api_client.post(path, body, format="json")
    assert response.status_code in (200, 201), (response.status_code, response.content[:500])
    assert "Traceback" not in response.content.decode(errors="replace")


@pytest.mark.parametrize(
    ("name", "data", "field"), CONSOLE_ACTIONS, ids=[n for n, _, _ in CONSOLE_ACTIONS]
)
def test_hostile_console_actions_are_400_at_their_field(
    name, data, field, client, user, wiki, strata_dirs
):
    client.force_login(user)
    before = _snapshot(strata_dirs)
    response = client.post("/datasources/wiki/actions", data)
    assert response.status_code == 400, (response.status_code, response.get("Location"))
    page = response.content.decode()
    assert f'class="error-box action-error" data-field="{field}"' in page, page[:3000]
    if field == "interval":
        assert 'aria-invalid="true"' in page and 'id="action-error-interval"' in page
    assert 'name="csrfmiddlewaretoken"' in page  # the re-rendered form still posts
    assert _snapshot(strata_dirs) == before


def test_console_forms_need_their_csrf_token(user, wiki, strata_dirs):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    before = _snapshot(strata_dirs)
    response = client.post("/tasks/submit", {"spec": json.dumps(base_spec())})
    assert response.status_code == 403
    response = client.post(f"/tasks/{wiki.task_id}/cancel")
    assert response.status_code == 403
    assert _snapshot(strata_dirs) == before


@pytest.mark.parametrize(
    "path",
    [
        "/tasks/a%00b",
        "/tasks/" + "x" * 10_000,
        "/tasks/..%2F..%2Fx/cancel",
        "/datasources/a%00b",
        "/?status=%00",
        "/locks?datasource=a%00b",
    ],
)
def test_hostile_console_urls_are_4xx(path, client, user, wiki):
    client.force_login(user)
    method = client.post if path.endswith("/cancel") else client.get
    response = method(path)
    assert 400 <= response.status_code < 500, response.status_code


@pytest.mark.parametrize(
    "username",
    ["nul\x00user", "u" * 10_000, "' OR 1=1 --", "ctl\x01"],
)
def test_hostile_login_is_a_clean_refusal(username, client, wiki):
    response = client.post("/accounts/login/", {"username": username, "password": "x"})
    assert response.status_code in (200, 400, 429)
    assert "_auth_user_id" not in client.session


@pytest.mark.parametrize(
    ("username", "password"),
    [("nul\x00user", "pw-pw-pw-1"), ("u" * 10_000, "pw-pw-pw-1"), ("ok-name", "p\x00w")],
)
def test_hostile_admin_user_form_creates_nothing(
    username, password, client, django_user_model, wiki, strata_dirs
):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    before = _snapshot(strata_dirs)
    response = client.post(
        "/admin/auth/user/add/",
        {
            "username": username,
            "password1": password,
            "password2": password,
            "usable_password": "true",
        },
    )
    assert response.status_code in (200, 400)
    assert _snapshot(strata_dirs) == before


@pytest.mark.parametrize(
    "data",
    [
        {"location": "a\x00b"},
        {"shard_spec": nested(10_000)},
        {"shard_spec": '{"a": 1, "a": 2}'},
        {"shard_spec": '{"type": NaN}'},
    ],
    ids=["location NUL", "shard_spec deep", "shard_spec duplicate keys", "shard_spec NaN"],
)
def test_hostile_admin_segment_edit_changes_nothing(
    data, client, django_user_model, wiki, strata_dirs
):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    segment = Segment.objects.get(id=wiki.segment_ids[0])
    before = (segment.location, segment.shard_spec, segment.used)
    form = {
        "used": "on",
        "location": segment.location,
        "shard_spec": json.dumps(segment.shard_spec),
    }
    form.update(data)
    response = client.post(f"/admin/metastore/segment/{segment.pk}/change/", form)
    assert response.status_code in (200, 400)
    segment.refresh_from_db()
    assert (segment.location, segment.shard_spec, segment.used) == before
