"""Druid SQL's metadata tables (metastore/sql_catalog.py): INFORMATION_SCHEMA and sys,
with the columns Druid's "SQL metadata tables" page lists, answered from the
metastore and never from the engine's own catalog.

The metastore states are built through the services with real Parquet files, as
in test_query.py (its `history` fixture: `wiki`, partly overshadowed, with a
tombstone), plus a rolled-up `sketchy` dataSource whose segment schema names a
theta sketch, a float and a first/last pair.
"""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import test_query
from django.conf import settings
from django.db import transaction

from metastore import query, services
from metastore.intervals import Interval
from metastore.models import Task, TaskStatus

pytestmark = pytest.mark.django_db
history = test_query.history  # the shared metastore history fixture
t = test_query.t

COLUMNS_COLUMNS = [
    "TABLE_CATALOG",
    "TABLE_SCHEMA",
    "TABLE_NAME",
    "COLUMN_NAME",
    "ORDINAL_POSITION",
    "COLUMN_DEFAULT",
    "IS_NULLABLE",
    "DATA_TYPE",
    "CHARACTER_MAXIMUM_LENGTH",
    "CHARACTER_OCTET_LENGTH",
    "NUMERIC_PRECISION",
    "NUMERIC_PRECISION_RADIX",
    "NUMERIC_SCALE",
    "DATETIME_PRECISION",
    "CHARACTER_SET_NAME",
    "COLLATION_NAME",
    "JDBC_TYPE",
]


def rows(sql: str) -> list[list]:
    return query.run_query(sql=sql).rows


@pytest.fixture
def sketchy(inline_spec):
    """One rolled-up segment: a dimension, a long count, a float sum, a theta sketch
    (bytes) and a stringFirst pair, with the schema the ingestion job records."""
    path = settings.STRATA_DEEP_STORAGE / "sketchy" / uuid.uuid4().hex / "data.parquet"
    path.parent.mkdir(parents=True)
    pair = pa.struct([("time", pa.int64()), ("value", pa.string())])
    table = pa.table(
        {
            "__time": pa.array([t("2024-02-01T00:00")], type=pa.timestamp("us", tz="UTC")),
            "country": pa.array(["fr"]),
            "count": pa.array([3], type=pa.int64()),
            "price": pa.array([1.5], type=pa.float32()),
            "users": pa.array([b"\x01\x02"], type=pa.binary()),
            "first_page": pa.array([{"time": 1, "value": "a"}], type=pair),
        }
    )
    pq.write_table(table, path)
    schema = {
        "dimensions": [{"name": "country", "type": "string"}],
        "metrics": [
            {"name": "count", "type": "count"},
            {"name": "price", "type": "floatSum"},
            {"name": "users", "type": "thetaSketch"},
            {"name": "first_page", "type": "stringFirst"},
        ],
    }
    with transaction.atomic():
        task = services.task_submit(spec=inline_spec("sketchy"))
        assert services.task_claim(task_id=task.id, worker="pytest")
    task = Task.objects.get(id=task.id)
    day = Interval.parse("2024-02-01/2024-02-02")
    services.lock_acquire(task=task, interval=day)
    alloc = services.segments_allocate(task=task, interval=day, count=1, append=False)
    services.segments_publish(
        task=task,
        segments=[
            services.NewSegment(
                interval=day,
                version=alloc.version,
                partition=alloc.partitions[0],
                core_partitions=alloc.core_partitions,
                location=str(path),
                num_rows=1,
                size_bytes=path.stat().st_size,
                schema=schema,
            )
        ],
    )
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)


def test_information_schema_tables_lists_the_datasources_as_pydruid_asks(history):
    # pydruid's SQLAlchemy dialect: get_table_names / has_table / get_schema_names.
    assert rows(
        "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'"
    ) == [["wiki"]]
    assert rows(
        "SELECT COUNT(*) > 0 AS exists_ FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_NAME = 'wiki'"
    ) == [[True]]
    assert rows('SELECT SCHEMA_NAME FROM "INFORMATION_SCHEMA"."SCHEMATA" ORDER BY 1') == [
        ["INFORMATION_SCHEMA"],
        ["druid"],
        ["lookup"],
        ["sys"],
    ]

    everything = query.run_query(sql="SELECT * FROM INFORMATION_SCHEMA.TABLES")
    assert everything.columns == [
        "TABLE_CATALOG",
        "TABLE_SCHEMA",
        "TABLE_NAME",
        "TABLE_TYPE",
        "IS_JOINABLE",
        "IS_BROADCAST",
    ]
    assert ["druid", "druid", "wiki", "TABLE", "NO", "NO"] in everything.rows
    assert ["druid", "sys", "segments", "SYSTEM_TABLE", "NO", "NO"] in everything.rows
    assert ["druid", "INFORMATION_SCHEMA", "COLUMNS", "SYSTEM_TABLE", "NO", "NO"] in (
        everything.rows
    )
    system = {(r[1], r[2]) for r in everything.rows if r[3] == "SYSTEM_TABLE"}
    assert system == {
        ("INFORMATION_SCHEMA", name) for name in ("SCHEMATA", "TABLES", "COLUMNS", "ROUTINES")
    } | {
        ("sys", name) for name in ("segments", "servers", "server_segments", "tasks", "supervisors")
    }


def test_information_schema_columns_has_druids_columns_types_and_jdbc_codes(history):
    result = query.run_query(
        sql="SELECT * FROM INFORMATION_SCHEMA.COLUMNS "
        "WHERE TABLE_SCHEMA = 'druid' AND TABLE_NAME = 'wiki' ORDER BY ORDINAL_POSITION"
    )

    assert result.columns == COLUMNS_COLUMNS
    varchar = ["UTF-16LE", "UTF-16LE$en_US$primary"]
    assert result.rows == [
        ["druid", "druid", "wiki", "__time", 1, None, "NO", "TIMESTAMP", None, None]
        + [None, None, None, 3, None, None, 93],
        ["druid", "druid", "wiki", "page", 2, None, "YES", "VARCHAR", None, None]
        + [None, None, None, None, *varchar, 12],
        ["druid", "druid", "wiki", "added", 3, None, "YES", "BIGINT", None, None]
        + [19, 10, 0, None, None, None, -5],
        ["druid", "druid", "wiki", "count", 4, None, "YES", "BIGINT", None, None]
        + [19, 10, 0, None, None, None, -5],
    ]
    # pydruid's get_columns, through Druid's SQL endpoint.
    described = rows(
        "SELECT COLUMN_NAME, DATA_TYPE, IS_NULLABLE, COLUMN_DEFAULT "
        "FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_NAME = 'wiki' AND TABLE_SCHEMA = 'druid'"
    )
    assert [r[:2] for r in described] == [
        ["__time", "TIMESTAMP"],
        ["page", "VARCHAR"],
        ["added", "BIGINT"],
        ["count", "BIGINT"],
    ]


def test_sketches_floats_and_pairs_have_druids_complex_types(sketchy):
    typed = rows(
        "SELECT COLUMN_NAME, DATA_TYPE, JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
        "WHERE TABLE_NAME = 'sketchy' ORDER BY ORDINAL_POSITION"
    )
    assert typed == [
        ["__time", "TIMESTAMP", 93],
        ["country", "VARCHAR", 12],
        ["count", "BIGINT", -5],
        ["price", "FLOAT", 6],
        ["users", "COMPLEX<thetaSketch>", 1111],
        ["first_page", "COMPLEX<serializablePairLongString>", 1111],
    ]


def test_the_metadata_tables_describe_themselves(history):
    own = rows(
        "SELECT COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
        "WHERE TABLE_SCHEMA = 'INFORMATION_SCHEMA' AND TABLE_NAME = 'COLUMNS' "
        "ORDER BY ORDINAL_POSITION"
    )
    assert [r[0] for r in own] == COLUMNS_COLUMNS
    assert [r[1] for r in own] == list(range(1, 18))
    assert own[4][2] == "BIGINT" and own[7][2] == "VARCHAR"
    segments = rows(
        "SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS "
        "WHERE TABLE_SCHEMA = 'sys' AND TABLE_NAME = 'segments' ORDER BY ORDINAL_POSITION"
    )
    assert [r[0] for r in segments][-2:] == ["last_compaction_state", "replication_factor"]
    aggregators = rows(
        "SELECT ROUTINE_NAME FROM INFORMATION_SCHEMA.ROUTINES WHERE IS_AGGREGATOR = 'YES'"
    )
    assert ["SUM"] in aggregators and ["COUNT"] in aggregators


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT * FROM duckdb_tables()", "table function duckdb_tables is not supported"),
        ("SELECT * FROM duckdb_settings", "table duckdb_settings not found"),
        ("SELECT * FROM information_schema.schemata_x", "not found"),
        ("SELECT * FROM pg_catalog.pg_class", "table pg_catalog.pg_class not found"),
        ("SELECT * FROM main.wiki", "table main.wiki not found"),
        ("SELECT * FROM memory.main.wiki", "not found"),
        ("SELECT * FROM temp.main.wiki", "not found"),
        ("SELECT * FROM lookup.countries", "table lookup.countries not found"),
        ("SHOW TABLES", "show ref is not supported"),
        ("DESCRIBE wiki", "show ref is not supported"),
        # A CTE's name counts only inside the query that defines it.
        (
            "SELECT * FROM (WITH duckdb_settings AS (SELECT 1 AS a) "
            "SELECT a FROM duckdb_settings), duckdb_settings",
            "table duckdb_settings not found",
        ),
    ],
)
def test_the_engines_own_catalog_never_answers(history, sql, says):
    with pytest.raises(query.QueryError) as err:
        query.run_query(sql=sql)
    assert says in str(err.value)


def test_ctes_and_dataSource_names_bind_as_before(history):
    assert rows(
        "WITH w AS (SELECT page FROM druid.wiki) SELECT count(*) FROM w JOIN wiki USING (page)"
    ) == [[6]]
    assert rows('SELECT wiki.page FROM "WIKI" WHERE wiki.added = 4') == [["a"]]
    assert rows("SELECT druid.wiki.page FROM druid.wiki WHERE druid.wiki.added = 4") == [["a"]]
    assert rows(
        "SELECT count(sys.segments.segment_id) FROM sys.segments WHERE datasource = 'wiki'"
    ) == [[5]]


def test_druid_sql_endpoint_answers_the_inspector(api_client, history):
    response = api_client.post(
        "/druid/v2/sql",
        {"query": "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid'"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json() == [{"TABLE_NAME": "wiki"}]
    body = json.dumps({"query": "SELECT JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS LIMIT 1"})
    one = api_client.post("/druid/v2/sql", body, content_type="application/json")
    assert one.status_code == 200 and isinstance(one.json()[0]["JDBC_TYPE"], int)


def test_druid_sql_names_unnamed_columns_as_druid_does(api_client, history):
    """Druid SQL (Calcite) names a computed column without an alias EXPR$<position>;
    column references and aliases keep their names. Strata's own API is unchanged."""
    body = {"query": "SELECT page, COUNT(*), 1 + 1 AS two, MAX(added) FROM wiki GROUP BY page"}
    response = api_client.post("/druid/v2/sql", {**body, "header": True}, format="json")
    assert response.status_code == 200, response.content
    assert list(response.json()[0]) == ["page", "EXPR$1", "two", "EXPR$3"]
    union = {"query": "SELECT COUNT(*) FROM wiki UNION ALL SELECT 1", "resultFormat": "array"}
    response = api_client.post("/druid/v2/sql", {**union, "header": True}, format="json")
    assert response.json()[0] == ["EXPR$0"]
    own = api_client.post("/api/v1/query", {"sql": "SELECT COUNT(*) FROM wiki"}, format="json")
    assert own.json()["columns"] != ["EXPR$0"]


# --- sys --------------------------------------------------------------------------------

SEGMENT_COLUMNS = [
    "segment_id",
    "datasource",
    "start",
    "end",
    "size",
    "version",
    "partition_num",
    "num_replicas",
    "num_rows",
    "is_active",
    "is_published",
    "is_available",
    "is_realtime",
    "is_overshadowed",
    "shard_spec",
    "dimensions",
    "metrics",
    "last_compaction_state",
    "replication_factor",
]


def sys_rows(sql: str) -> list[dict]:
    result = query.run_query(sql=sql)
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


def test_sys_segments_agrees_row_for_row_with_the_coordinator_api(api_client, history, sketchy):
    api = api_client.get("/druid/coordinator/v1/metadata/segments?includeOvershadowedStatus")
    assert api.status_code == 200
    result = query.run_query(sql="SELECT * FROM sys.segments ORDER BY segment_id")
    assert result.columns == SEGMENT_COLUMNS

    expected = []
    for entry in sorted(api.json(), key=lambda e: e["dataSegment"]["id"]):
        seg, overshadowed = entry["dataSegment"], entry["overshadowed"]
        start, end = seg["interval"].split("/")
        names = (
            [n for n in seg["dimensions"].split(",") if n],
            [n for n in seg["metrics"].split(",") if n],
        )
        expected.append(
            {
                "segment_id": seg["id"],
                "datasource": seg["dataSource"],
                "start": start,
                "end": end,
                "size": seg["size"],
                "version": seg["version"],
                "partition_num": seg["shardSpec"].get("partitionNum", 0),
                "is_overshadowed": int(overshadowed),
                "is_active": int(not overshadowed),
                "is_published": 1,
                "is_realtime": 0,
                "shard_spec": seg["shardSpec"],
                "dimensions": names[0],
                "metrics": names[1],
                "last_compaction_state": seg.get("lastCompactionState"),
            }
        )
    got = []
    for row in (dict(zip(result.columns, r, strict=True)) for r in result.rows):
        row["shard_spec"] = json.loads(row["shard_spec"])
        row["dimensions"], row["metrics"] = (
            json.loads(row["dimensions"]),
            json.loads(row["metrics"]),
        )
        got.append({k: row[k] for k in expected[0]})
    assert got == expected
    # The history: day 2's v1 segment is hidden by the tombstone, everything else shows.
    hidden = sys_rows(
        "SELECT datasource, start, is_available, num_replicas FROM sys.segments "
        "WHERE is_overshadowed = 1"
    )
    assert hidden == [
        {
            "datasource": "wiki",
            "start": "2024-01-02T00:00:00.000Z",
            "is_available": 0,
            "num_replicas": 0,
        }
    ]
    assert sys_rows("SELECT count(*) AS n FROM sys.segments WHERE is_available = 1") == [
        {"n": len(expected) - 1}
    ]


def test_sys_segments_follows_the_timeline_after_a_mark_unused(history):
    v2 = services.segments_mark_used(
        datasource="wiki", used=False, interval=Interval.parse("2024-01-01T00/2024-01-01T06")
    )
    [removed] = v2.removed

    ids = {r["segment_id"] for r in sys_rows("SELECT segment_id FROM sys.segments")}
    assert removed not in ids and len(ids) == 4


def test_sys_segments_as_of_each_commit_is_that_commits_timeline(history):
    seq1, seq2, seq3 = history
    sql = (
        'SELECT start, "end", is_overshadowed FROM sys.segments '
        "WHERE datasource = 'wiki' ORDER BY start, \"end\", version, partition_num"
    )

    def at(seq):
        return query.run_query(sql=sql, as_of=seq).rows

    day1 = ["2024-01-01T00:00:00.000Z", "2024-01-02T00:00:00.000Z"]
    day2 = ["2024-01-02T00:00:00.000Z", "2024-01-03T00:00:00.000Z"]
    hours = ["2024-01-01T00:00:00.000Z", "2024-01-01T06:00:00.000Z"]
    assert at(seq1) == [[*day1, 0], [*day1, 0], [*day2, 0]]
    assert at(seq2) == [[*hours, 0], [*day1, 0], [*day1, 0], [*day2, 0]]
    # The tombstone (v3) fully overshadows day 2's v1 segment.
    assert at(seq3) == [[*hours, 0], [*day1, 0], [*day1, 0], [*day2, 1], [*day2, 0]]
    assert at(seq3) == query.run_query(sql=sql).rows
    assert at(seq1 - 1) == []


def test_druids_documented_sys_segments_summary_runs(history, sketchy):
    summary = sys_rows(
        """SELECT
            datasource,
            SUM("size") AS total_size,
            CASE WHEN SUM("size") = 0 THEN 0 ELSE SUM("size") / (COUNT(*) FILTER(WHERE "size" > 0)) END AS avg_size,
            CASE WHEN SUM(num_rows) = 0 THEN 0 ELSE SUM("num_rows") / (COUNT(*) FILTER(WHERE num_rows > 0)) END AS avg_num_rows,
            COUNT(*) AS num_segments
        FROM sys.segments
        WHERE is_active = 1
        GROUP BY 1
        ORDER BY 1"""  # noqa: E501 - Druid's example as its page prints it
    )
    assert [(r["datasource"], r["num_segments"]) for r in summary] == [
        ("sketchy", 1),
        ("wiki", 4),  # day 1 v1 (two partitions), v2's hours, day 2's tombstone
    ]
    assert summary[1]["avg_num_rows"] == (3 + 2 + 2) / 3


def test_sys_tasks_agrees_with_the_overlord_api(api_client, history):
    api = api_client.get("/druid/indexer/v1/tasks").json()
    tasks = sys_rows("SELECT * FROM sys.tasks")
    assert list(tasks[0]) == [
        "task_id",
        "group_id",
        "type",
        "datasource",
        "created_time",
        "queue_insertion_time",
        "status",
        "runner_status",
        "duration",
        "location",
        "host",
        "plaintext_port",
        "tls_port",
        "error_msg",
    ]
    by_id = {t["task_id"]: t for t in tasks}
    assert len(by_id) == len(api) == 3
    for task in api:
        row = by_id[task["id"]]
        assert (row["group_id"], row["type"], row["datasource"]) == (
            task["groupId"],
            task["type"],
            task["dataSource"],
        )
        assert (row["status"], row["runner_status"]) == ("SUCCESS", "NONE")
        assert row["created_time"] == task["createdTime"]
        assert row["duration"] == task["duration"]
        assert row["error_msg"] is None and row["location"] is None
    assert sys_rows("SELECT count(*) AS n FROM sys.tasks WHERE status = 'FAILED'") == [{"n": 0}]


def test_sys_servers_maps_strata_processes_to_druid_roles(history, sketchy, settings):
    settings.STRATA_ADVERTISED_ADDRESS = "strata.example:8000"
    services.worker_heartbeat(name="worker-1:4242", capacity=2)

    servers = sys_rows("SELECT * FROM sys.servers ORDER BY server_type")
    assert [(s["server"], s["server_type"], s["is_leader"]) for s in servers] == [
        ("strata.example:8000", "BROKER", None),
        ("strata.example:8000", "COORDINATOR", 1),
        ("strata.example:8000", "HISTORICAL", None),
        ("worker-1:4242", "MIDDLE_MANAGER", None),
        ("strata.example:8000", "OVERLORD", 1),
    ]
    historical = servers[2]
    assert (historical["host"], historical["plaintext_port"], historical["tier"]) == (
        "strata.example",
        8000,
        "_default_tier",
    )
    served = sys_rows("SELECT sum(size) AS n FROM sys.segments WHERE is_available = 1")
    assert historical["current_size"] == served[0]["n"] > 0
    # Druid's documented join, restricted to the HISTORICAL (which shares its address).
    per_server = sys_rows(
        """SELECT servers.server, count(segments.segment_id) AS num_segments
        FROM sys.segments AS segments
        INNER JOIN sys.server_segments AS server_segments
          ON segments.segment_id = server_segments.segment_id
        INNER JOIN sys.servers AS servers ON servers.server = server_segments.server
        WHERE segments.datasource = 'wiki' AND servers.server_type = 'HISTORICAL'
        GROUP BY servers.server"""
    )
    assert per_server == [{"server": "strata.example:8000", "num_segments": 4}]


def test_sys_supervisors_is_present_and_empty(history):
    result = query.run_query(sql="SELECT * FROM sys.supervisors")
    assert result.columns == (
        [
            "supervisor_id",
            "state",
            "detailed_state",
            "healthy",
            "type",
            "source",
            "suspended",
            "spec",
        ]
    )
    assert result.rows == []


def test_json_dimensions_are_complex_json_as_druid_types_them(api_client, inline_spec):
    """A `json` dimension is stored as JSON text in a string column; its segments
    record it as json, and Druid types such a column COMPLEX<json> (JDBC OTHER), in
    INFORMATION_SCHEMA and in segmentMetadata."""
    from druid_test_data import publish_nested

    publish_nested(inline_spec)
    sql = (
        "SELECT COLUMN_NAME, DATA_TYPE, JDBC_TYPE FROM INFORMATION_SCHEMA.COLUMNS "
        "WHERE TABLE_NAME = 'nested' AND COLUMN_NAME IN ('string', 'nest', 'nester') "
        "ORDER BY COLUMN_NAME"
    )
    response = api_client.post("/druid/v2/sql", {"query": sql}, format="json")
    assert response.status_code == 200, response.content
    assert [list(r.values()) for r in response.json()] == [
        ["nest", "COMPLEX<json>", 1111],
        ["nester", "COMPLEX<json>", 1111],
        ["string", "VARCHAR", 12],
    ]
    body = {"queryType": "segmentMetadata", "dataSource": "nested", "merge": True}
    response = api_client.post("/druid/v2", body, format="json")
    assert response.status_code == 200, response.content
    columns = response.json()[0]["columns"]
    assert [columns[c]["type"] for c in ("nest", "nester", "string")] == [
        "COMPLEX<json>",
        "COMPLEX<json>",
        "STRING",
    ]
    assert columns["nest"]["typeSignature"] == "COMPLEX<json>"
