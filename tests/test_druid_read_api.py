"""The read endpoints Druid's query clients call (console/druid_read.py), checked
against the shapes of Druid's "Legacy metadata API" and "Service status API"
pages, on segments published through the services with the schemas ingestion
records (metastore.schema)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from metastore import services
from metastore.intervals import Interval
from metastore.models import TaskStatus

pytestmark = pytest.mark.django_db

BROKER = "/druid/v2/datasources"
COORD = "/druid/coordinator/v1"


def schema(dims: list[str], metrics: list[str]) -> dict:
    return {
        "dimensions": [{"name": d, "type": "string"} for d in dims],
        "metrics": [{"name": m, "type": "longSum"} for m in metrics],
    }


@pytest.fixture
def publish_columns(claimed_task):
    """`publish_columns(ds, chunk, partitions, dims, metrics, size=100)`: one task
    publishes `partitions` segments of `chunk` recording those columns."""

    def make(ds, chunk, partitions, dims, metrics, size=100) -> list[str]:
        task = claimed_task(ds)
        interval = Interval.parse(chunk)
        services.lock_acquire(task=task, interval=interval)
        alloc = services.segments_allocate(
            task=task, interval=interval, count=partitions, append=False
        )
        new = [
            services.NewSegment(
                interval=interval,
                version=alloc.version,
                partition=p,
                core_partitions=alloc.core_partitions,
                location=f"/deep/{ds}/{chunk.replace('/', '_')}/{alloc.version}/{p}",
                num_rows=5,
                size_bytes=size,
                schema=schema(dims, metrics),
            )
            for p in alloc.partitions
        ]
        entry = services.segments_publish(task=task, segments=new)
        services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
        return list(entry.added)

    return make


@pytest.fixture
def wiki(publish_columns):
    """wiki: 2015-09-12 (two segments: page, user / count, added) and 2015-09-13,
    first with (page, country / count), then rewritten with (page / count, deleted),
    which overshadows the first version. `gone` once had a segment, now unused."""
    day12 = publish_columns(
        "wiki", "2015-09-12/2015-09-13", 2, ["page", "user"], ["count", "added"]
    )
    old13 = publish_columns("wiki", "2015-09-13/2015-09-14", 1, ["page", "country"], ["count"])
    new13 = publish_columns(
        "wiki", "2015-09-13/2015-09-14", 1, ["page"], ["count", "deleted"], size=50
    )
    gone = publish_columns("gone", "2015-09-12/2015-09-13", 1, ["x"], ["y"])
    services.segments_mark_used(datasource="gone", used=False, segment_ids=gone)
    return {"day12": day12, "old13": old13, "new13": new13}


WIKI_DAYS = "interval=2015-09-12_2015-09-14"


def test_the_broker_lists_queryable_datasources(api_client, wiki):
    assert api_client.get(BROKER).json() == ["wiki"]


def test_the_broker_reports_the_columns_of_the_visible_segments(api_client, wiki):
    response = api_client.get(f"{BROKER}/wiki?{WIKI_DAYS}")
    # The overshadowed first version of the 13th (with `country`) is not served.
    assert response.json() == {
        "dimensions": ["page", "user"],
        "metrics": ["count", "added", "deleted"],
    }
    assert api_client.get(f"{BROKER}/wiki/dimensions?{WIKI_DAYS}").json() == ["page", "user"]
    assert api_client.get(f"{BROKER}/wiki/metrics?{WIKI_DAYS}").json() == [
        "count",
        "added",
        "deleted",
    ]
    # The interval may also be written with a slash; it narrows what is read.
    one_day = api_client.get(f"{BROKER}/wiki?interval=2015-09-13/2015-09-14").json()
    assert one_day == {"dimensions": ["page"], "metrics": ["count", "deleted"]}


def test_the_broker_full_answer_is_per_interval(api_client, wiki):
    full = api_client.get(f"{BROKER}/wiki?{WIKI_DAYS}&full").json()
    assert full == {
        "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z": {
            "dimensions": ["page", "user"],
            "metrics": ["count", "added"],
        },
        "2015-09-13T00:00:00.000Z/2015-09-14T00:00:00.000Z": {
            "dimensions": ["page"],
            "metrics": ["count", "deleted"],
        },
    }


def test_without_an_interval_the_broker_reads_the_last_week_as_druid_does(
    api_client, wiki, publish_columns
):
    assert api_client.get(f"{BROKER}/wiki").json() == {"dimensions": [], "metrics": []}
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    chunk = f"{yesterday}/{yesterday + timedelta(days=1)}"
    publish_columns("wiki", chunk, 1, ["recent"], ["count"])
    assert api_client.get(f"{BROKER}/wiki").json() == {
        "dimensions": ["recent"],
        "metrics": ["count"],
    }


def test_an_unknown_datasource_has_no_columns_and_a_bad_interval_is_a_400(api_client, wiki):
    assert api_client.get(f"{BROKER}/nope?{WIKI_DAYS}").json() == {"dimensions": [], "metrics": []}
    response = api_client.get(f"{BROKER}/wiki?interval=yesterday")
    assert response.status_code == 400
    assert response.json()["field"] == "interval"


def test_coordinator_datasources_names_simple_and_full(api_client, wiki):
    assert api_client.get(f"{COORD}/datasources").json() == ["wiki"]
    simple = api_client.get(f"{COORD}/datasources?simple").json()
    # Every used segment counts, the overshadowed one too (Druid's Coordinator
    # counts what is loaded until it is marked unused); one tier, one replica.
    properties = {
        "tiers": {"_default_tier": {"size": 350, "segmentCount": 4, "replicatedSize": 350}},
        "segments": {
            "maxTime": "2015-09-14T00:00:00.000Z",
            "size": 350,
            "minTime": "2015-09-12T00:00:00.000Z",
            "count": 4,
            "replicatedSize": 350,
        },
    }
    assert simple == [{"name": "wiki", "properties": properties}]
    (full,) = api_client.get(f"{COORD}/datasources?full").json()
    assert full["name"] == "wiki" and set(full["properties"]) == {"created"}
    assert sorted(s["id"] for s in full["segments"]) == sorted(
        wiki["day12"] + wiki["old13"] + wiki["new13"]
    )
    assert full["segments"][0]["dimensions"] == "page,user"
    # One dataSource: its simple properties, or its full metadata.
    assert api_client.get(f"{COORD}/datasources/wiki").json() == properties
    assert api_client.get(f"{COORD}/datasources/wiki?full").json() == full


def test_the_coordinator_answers_204_for_a_datasource_it_does_not_serve(api_client, wiki):
    for name in ("gone", "never-heard-of"):
        for query in ("", "?full"):
            response = api_client.get(f"{COORD}/datasources/{name}{query}")
            assert response.status_code == 204, (name, query)
            assert response.content == b""


def test_load_status_every_published_segment_is_served(api_client, wiki, publish_columns):
    publish_columns("other", "2015-09-12/2015-09-13", 1, ["a"], ["b"])
    assert api_client.get(f"{COORD}/loadstatus").json() == {"other": 100.0, "wiki": 100.0}
    assert api_client.get(f"{COORD}/loadstatus?simple").json() == {"other": 0, "wiki": 0}
    assert api_client.get(f"{COORD}/loadstatus?full").json() == {
        "_default_tier": {"other": 0, "wiki": 0}
    }
    assert api_client.get(f"{COORD}/loadstatus?full&computeUsingClusterView").status_code == 200
    refused = api_client.get(f"{COORD}/loadstatus?computeUsingClusterView=AAA")
    assert (refused.status_code, refused.json()["field"]) == (400, "computeUsingClusterView")


def test_read_endpoints_take_a_bounded_number_of_queries(
    api_client, wiki, publish_columns, django_assert_max_num_queries
):
    for day in range(14, 20):
        publish_columns("wiki", f"2015-09-{day}/2015-09-{day + 1}", 2, ["page"], ["count"])
    publish_columns("other", "2015-09-12/2015-09-13", 1, ["a"], ["b"])
    for path in (
        f"{COORD}/datasources?simple",
        f"{COORD}/loadstatus",
        f"{BROKER}/wiki?interval=2015-09-01_2015-10-01",
        f"{BROKER}/wiki?interval=2015-09-01_2015-10-01&full",
    ):
        api_client.get(path)  # the timeline cache warms up
        with django_assert_max_num_queries(8):
            assert api_client.get(path).status_code == 200, path


def test_status_and_health(api_client, client):
    status = api_client.get("/status").json()
    assert set(status) == {"version", "modules", "memory"}
    assert status["version"] and status["modules"] == []
    memory = status["memory"]
    assert set(memory) == {"maxMemory", "totalMemory", "freeMemory", "usedMemory", "directMemory"}
    assert 0 < memory["usedMemory"] <= memory["maxMemory"]
    # Health needs no credentials (load balancers poll it); status does.
    health = client.get("/status/health")
    assert (health.status_code, health.json()) == (200, True)
    assert client.get("/status").status_code in (401, 403)


@pytest.mark.parametrize(
    "path",
    [
        BROKER,
        f"{BROKER}/wiki",
        f"{BROKER}/wiki/dimensions",
        f"{COORD}/datasources",
        f"{COORD}/datasources/wiki",
        f"{COORD}/loadstatus",
    ],
)
def test_the_read_endpoints_refuse_anonymous_requests(client, path):
    assert client.get(path).status_code in (401, 403)


def test_the_read_endpoints_are_in_the_openapi_schema(api_client):
    paths = api_client.get("/api/schema/?format=json").json()["paths"]
    for path in (
        "/druid/v2/datasources",
        "/druid/v2/datasources/{datasource}",
        "/druid/v2/datasources/{datasource}/dimensions",
        "/druid/v2/datasources/{datasource}/metrics",
        "/druid/coordinator/v1/datasources",
        "/druid/coordinator/v1/datasources/{datasource}",
        "/druid/coordinator/v1/loadstatus",
        "/status",
        "/status/health",
    ):
        assert "get" in paths[path], path
    assert paths["/status/health"]["get"].get("security") == [{}] or not paths["/status/health"][
        "get"
    ].get("security")
    assert "204" in paths["/druid/coordinator/v1/datasources/{datasource}"]["get"]["responses"]


# --- Druid SQL request options (POST /druid/v2/sql) -----------------------------------------

SQL = "/druid/v2/sql"
ROWS_SQL = "SELECT __time, page, added FROM wiki_sql ORDER BY __time"


@pytest.fixture
def wiki_sql(inline_spec):
    """Three rows in one day's segment file; pages with a comma and with quotes."""
    from test_query import commit

    day = [("2024-01-01T01:00", "a", 1), ("2024-01-01T05:00", "b,c", 2)]
    day.append(("2024-01-01T12:00", 'say "hi"', 4))
    commit(inline_spec, "wiki_sql", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": [day]})


def sql(api_client, **body):
    return api_client.post(SQL, {"query": ROWS_SQL, **body}, format="json")


FIRST = {"__time": "2024-01-01T01:00:00.000Z", "page": "a", "added": 1}
NAMES = ["__time", "page", "added"]
NATIVE = ["LONG", "STRING", "LONG"]
SQL_TYPES = ["TIMESTAMP", "VARCHAR", "BIGINT"]


def test_result_formats_are_read_in_any_case(api_client, wiki_sql):
    for fmt in ("OBJECT", "Object", "object"):
        assert sql(api_client, resultFormat=fmt).json()[0] == FIRST
    assert sql(api_client, resultFormat="ARRAY").json()[0] == list(FIRST.values())
    assert sql(api_client, resultFormat="ARRAYLINES").content.decode().splitlines()[0] == (
        '["2024-01-01T01:00:00.000Z", "a", 1]'
    )
    assert sql(api_client, resultFormat="objectlines")["Content-Type"].startswith("text/plain")
    assert sql(api_client, resultFormat="Csv")["Content-Type"].startswith("text/csv")


def test_headers_with_types_as_druids_query_output_format_table(api_client, wiki_sql):
    """Druid's "Query output format" table, for each format and header option."""
    both = {"header": True, "typesHeader": True, "sqlTypesHeader": True}
    objects = sql(api_client, resultFormat="object", **both).json()
    assert objects[0] == {
        "__time": {"type": "LONG", "sqlType": "TIMESTAMP"},
        "page": {"type": "STRING", "sqlType": "VARCHAR"},
        "added": {"type": "LONG", "sqlType": "BIGINT"},
    }
    assert objects[1] == FIRST
    only_types = sql(api_client, header=True, typesHeader=True).json()[0]
    assert only_types["page"] == {"type": "STRING"}
    only_sql = sql(api_client, header=True, sqlTypesHeader=True).json()[0]
    assert only_sql["page"] == {"sqlType": "VARCHAR"}
    assert sql(api_client, header=True).json()[0] == dict.fromkeys(NAMES)

    arrays = sql(api_client, resultFormat="array", **both).json()
    assert arrays[:4] == [NAMES, NATIVE, SQL_TYPES, list(FIRST.values())]
    assert sql(api_client, resultFormat="array", header=True, sqlTypesHeader=True).json()[:2] == [
        NAMES,
        SQL_TYPES,
    ]
    lines = sql(api_client, resultFormat="arrayLines", **both).content.decode().split("\n")
    assert lines[:3] == [json.dumps(NAMES), json.dumps(NATIVE), json.dumps(SQL_TYPES)]
    object_lines = sql(api_client, resultFormat="objectLines", header=True).content.decode()
    assert object_lines.split("\n")[0] == json.dumps(dict.fromkeys(NAMES))

    csv_text = sql(api_client, resultFormat="csv", **both).content.decode()
    assert csv_text.split("\n")[:3] == [",".join(NAMES), ",".join(NATIVE), ",".join(SQL_TYPES)]
    # typesHeader without header adds nothing, as in Druid.
    assert sql(api_client, resultFormat="array", typesHeader=True).json()[0] == list(FIRST.values())


def test_csv_quotes_as_druid_documents_and_ends_with_a_blank_line(api_client, wiki_sql):
    text = sql(api_client, resultFormat="csv").content.decode()
    assert text == (
        "2024-01-01T01:00:00.000Z,a,1\n"
        '2024-01-01T05:00:00.000Z,"b,c",2\n'
        '2024-01-01T12:00:00.000Z,"say ""hi""",4\n'
        "\n"
    )


def test_druids_response_headers(api_client, wiki_sql):
    with_header = sql(api_client, header=True, context={"sqlQueryId": "request01"})
    assert with_header["X-Druid-SQL-Query-Id"] == "request01"
    assert with_header["X-Druid-SQL-Header-Included"] == "yes"
    plain = sql(api_client)
    assert "X-Druid-SQL-Header-Included" not in plain
    assert len(plain["X-Druid-SQL-Query-Id"]) == 36  # a new UUID


def test_types_of_aggregates_in_the_types_header(api_client, wiki_sql):
    response = api_client.post(
        SQL,
        {
            "query": "SELECT COUNT(*) AS n, SUM(added) AS total, AVG(added) AS mean FROM wiki_sql",
            "resultFormat": "array",
            "header": True,
            "typesHeader": True,
            "sqlTypesHeader": True,
        },
        format="json",
    )
    names, native, sql_types, row = response.json()
    assert names == ["n", "total", "mean"]
    assert native == ["LONG", "LONG", "DOUBLE"] and sql_types == ["BIGINT", "BIGINT", "DOUBLE"]
    assert row == [3, 7, pytest.approx(7 / 3)]


def count_where(api_client, where: str, *parameters) -> object:
    response = api_client.post(
        SQL,
        {
            "query": f"SELECT COUNT(*) AS n FROM wiki_sql WHERE {where}",
            "parameters": [{"type": kind, "value": value} for kind, value in parameters],
        },
        format="json",
    )
    return response.json()[0]["n"] if response.status_code == 200 else response


def test_parameters_are_bound_by_their_sql_type(api_client, wiki_sql):
    assert count_where(api_client, "page = ?", ("VARCHAR", "b,c")) == 1
    assert count_where(api_client, "added >= ?", ("BIGINT", 2)) == 2
    assert count_where(api_client, "added >= ?", ("integer", "2")) == 2  # any case, text
    assert count_where(api_client, "added > ?", ("DOUBLE", 1.5)) == 2
    assert count_where(api_client, "__time >= ?", ("TIMESTAMP", "2024-01-01 05:00:00")) == 2
    assert count_where(api_client, "__time >= ?", ("TIMESTAMP", "2024-01-01T05:00:00Z")) == 2
    epoch_ms = int(datetime(2024, 1, 1, 5, tzinfo=UTC).timestamp() * 1000)
    assert count_where(api_client, "__time >= ?", ("TIMESTAMP", epoch_ms)) == 2
    assert count_where(api_client, "(added > ?) = ?", ("BIGINT", 1), ("BOOLEAN", True)) == 2
    assert count_where(api_client, "page = ? AND added = ?", ("VARCHAR", "a"), ("BIGINT", 1)) == 1


@pytest.mark.parametrize(
    ("parameter", "field"),
    [
        ({"type": "GEOMETRY", "value": 1}, "parameters[0].type"),
        ({"type": "BIGINT", "value": "two"}, "parameters[0].value"),
        ({"type": "BIGINT", "value": 2.5}, "parameters[0].value"),
        ({"type": "TIMESTAMP", "value": "yesterday"}, "parameters[0].value"),
        ({"type": "BOOLEAN", "value": "maybe"}, "parameters[0].value"),
        ({"type": "VARCHAR", "value": {"a": 1}}, "parameters[0].value"),
        ({"type": "VARCHAR"}, "parameters[0]"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(api_client, wiki_sql, parameter, field):
    response = api_client.post(
        SQL, {"query": "SELECT ? AS x", "parameters": [parameter]}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["error"] == "druidException"


def test_bad_options_are_400s_naming_the_field(api_client, wiki_sql):
    for body, field in (
        ({"resultFormat": "xml"}, "resultFormat"),
        ({"header": "yes"}, "header"),
        ({"typesHeader": 1}, "typesHeader"),
        ({"sqlTypesHeader": "true"}, "sqlTypesHeader"),
        ({"context": []}, "context"),
        ({"context": {"sqlTimeZone": "Europe/Nowhere"}}, "context.sqlTimeZone"),
        ({"context": {"sqlQueryId": ""}}, "context.sqlQueryId"),
        ({"parameters": {"type": "VARCHAR"}}, "parameters"),
    ):
        response = sql(api_client, **body)
        assert response.status_code == 400, body
        assert response.json()["field"] == field, body
    # A placeholder without its parameter is refused, never run with a NULL.
    missing = api_client.post(SQL, {"query": "SELECT ? AS x"}, format="json")
    assert missing.status_code == 400


# --- cluster endpoints (console/druid_cluster.py) -------------------------------------------


def test_leadership_answers_as_a_single_leader(api_client):
    for service in ("indexer", "coordinator"):
        leader = api_client.get(f"/druid/{service}/v1/leader")
        assert leader.status_code == 200 and leader["Content-Type"].startswith("text/plain")
        assert leader.content.decode() == "http://testserver"
        assert api_client.get(f"/druid/{service}/v1/isLeader").json() == {"leader": True}


def test_intervals_and_segments_of_a_datasource_newest_first(api_client, wiki):
    base = "/druid/coordinator/v1/datasources/wiki"
    assert api_client.get(f"{base}/intervals").json() == [
        "2015-09-13T00:00:00.000Z/2015-09-14T00:00:00.000Z",
        "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
    ]
    simple = api_client.get(f"{base}/intervals?simple").json()
    assert simple["2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"] == {"size": 200, "count": 2}
    full = api_client.get(f"{base}/intervals?full").json()
    day12 = full["2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"]
    assert sorted(day12) == sorted(wiki["day12"])
    assert day12[wiki["day12"][0]]["servers"] == ["strata"]

    ids = api_client.get(f"{base}/segments").json()
    assert set(ids) == {*wiki["day12"], *wiki["old13"], *wiki["new13"]}
    one = api_client.get(f"{base}/segments/{wiki['new13'][0]}").json()
    assert one["metadata"]["id"] == wiki["new13"][0] and one["metadata"]["size"] == 50
    assert api_client.get(f"{base}/segments/nosuch").status_code == 404
    assert api_client.get("/druid/coordinator/v1/datasources/gone/intervals").json() == []


def test_workers_list_the_live_workers(api_client, db):
    from django.utils import timezone

    from metastore.models import Worker

    Worker.objects.create(name="host-a:12", capacity=2, heartbeat_at=timezone.now())
    Worker.objects.create(
        name="host-b:13", capacity=2, heartbeat_at=timezone.now() - timedelta(days=1)
    )
    [worker] = api_client.get("/druid/indexer/v1/workers").json()
    assert worker["worker"]["host"] == "host-a:12" and worker["worker"]["capacity"] == 2
    assert worker["currCapacityUsed"] == 0 and worker["runningTasks"] == []


def test_self_discovered_needs_no_credentials(client):
    assert client.get("/status/selfDiscovered/status").json() == {"selfDiscovered": True}


@pytest.mark.parametrize("fmt", ["object", "array", "objectLines", "arrayLines", "csv"])
def test_sql_writes_nan_and_infinity_as_druids_jackson_does_not_a_500(api_client, wiki_sql, fmt):
    # Jackson writes a non-finite double as the string "NaN" / "Infinity"; strict JSON
    # has no bare NaN, so the result used to fail in the renderer (a 500).
    query = (
        "SELECT CAST('NaN' AS DOUBLE) AS n, CAST('Infinity' AS DOUBLE) AS i, "
        "-CAST('Infinity' AS DOUBLE) AS m, 1.5 AS f"
    )
    response = api_client.post(SQL, {"query": query, "resultFormat": fmt}, format="json")
    assert response.status_code == 200, response.content
    text = response.content.decode()
    assert "NaN" in text and "-Infinity" in text
    if fmt == "object":
        assert response.json() == [{"n": "NaN", "i": "Infinity", "m": "-Infinity", "f": 1.5}]
    if fmt == "array":
        assert response.json() == [["NaN", "Infinity", "-Infinity", 1.5]]


def test_the_query_api_writes_nan_as_a_string(api_client, wiki_sql):
    response = api_client.post(
        "/api/v1/query", {"sql": "SELECT CAST('NaN' AS DOUBLE) AS n"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["rows"] == [["NaN"]]
