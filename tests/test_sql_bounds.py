"""Every SQL query is bounded (metastore/query.py): a time limit (Druid's
`context.timeout`, a default and a maximum from the settings), a result-size
limit and a number of queries running at once; over any, Druid's error shape
(`Query timeout` 504, `Resource limit exceeded` 400, `Query capacity exceeded`
429) and the engine's work is interrupted, not left running. Hostile SQL is
refused because only what the allow-lists name can be parsed into a query.

Nothing here asserts on wall-clock time: a slow query is one DuckDB cannot
finish (ten trillion rows), and the tests wait for events, not for durations.
"""

from __future__ import annotations

import threading
import time

import pytest
import test_query
from django.db import connection

from metastore import query

pytestmark = pytest.mark.django_db
history = test_query.history  # the shared metastore history fixture

ENDLESS = "SELECT count(*) FROM range(10000000000000)"  # ten trillion rows
DRUID_SQL = "/druid/v2/sql"


def post(api_client, body: dict):
    return api_client.post(DRUID_SQL, body, format="json")


# --- time ---------------------------------------------------------------------------------


def test_a_query_over_its_context_timeout_gets_druids_timeout_error(api_client):
    response = post(api_client, {"query": ENDLESS, "context": {"timeout": 500}})

    assert response.status_code == 504
    body = response.json()
    assert body["error"] == "Query timeout"
    assert body["errorClass"] == "org.apache.druid.query.QueryTimeoutException"
    assert "500 ms" in body["errorMessage"]
    assert "host" in body
    # Druid reads context numbers sent as strings too.
    as_text = post(api_client, {"query": ENDLESS, "context": {"timeout": "300"}})
    assert as_text.status_code == 504 and "300 ms" in as_text.json()["errorMessage"]
    # The engine's work was interrupted before the answer came: nothing of it runs on.
    assert query.queries_in_engine() == 0
    assert post(api_client, {"query": "SELECT 1 AS one"}).json() == [{"one": 1}]


def test_the_default_timeout_and_its_maximum_come_from_the_settings(api_client, settings):
    settings.STRATA_QUERY_TIMEOUT_MS = 300
    settings.STRATA_QUERY_MAX_TIMEOUT_MS = 1000

    default = post(api_client, {"query": ENDLESS})
    assert default.status_code == 504 and default.json()["error"] == "Query timeout"
    over = post(api_client, {"query": "SELECT 1", "context": {"timeout": 5000}})
    assert over.status_code == 400
    assert "context.timeout" in over.json()["errorMessage"]
    assert "1000" in over.json()["errorMessage"]
    with pytest.raises(query.QueryTimeout):
        query.run_query(sql=ENDLESS)


@pytest.mark.parametrize("value", [-1, "soon", "-5", 1.5, True, [500]])
def test_a_timeout_that_is_not_a_number_of_milliseconds_is_refused(api_client, value):
    response = post(api_client, {"query": "SELECT 1", "context": {"timeout": value}})

    assert response.status_code == 400
    assert response.json()["field"] == "context.timeout"


def test_the_api_query_endpoint_is_bounded_too(api_client, settings):
    settings.STRATA_QUERY_TIMEOUT_MS = 300

    response = api_client.post("/api/v1/query", {"sql": ENDLESS}, format="json")

    assert response.status_code == 504
    assert "timed out" in response.json()["error"]


# --- size ---------------------------------------------------------------------------------


def test_a_result_over_the_row_limit_is_refused_as_a_resource_limit(api_client, settings):
    settings.STRATA_QUERY_MAX_ROWS = 10

    response = post(api_client, {"query": "SELECT * FROM range(11)"})

    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "Resource limit exceeded"
    assert body["errorClass"] == "org.apache.druid.query.ResourceLimitExceededException"
    assert "10 rows" in body["errorMessage"]
    assert post(api_client, {"query": "SELECT * FROM range(10)"}).status_code == 200


def test_a_result_over_the_byte_limit_is_refused(settings):
    settings.STRATA_QUERY_MAX_BYTES = 100_000

    with pytest.raises(query.ResourceLimitExceeded) as err:
        query.run_query(sql="SELECT repeat('x', 1000) FROM range(1000)")
    assert "bytes" in str(err.value)


# --- concurrency ----------------------------------------------------------------------------


def test_queries_over_the_concurrency_limit_wait_then_are_refused(api_client, settings):
    settings.STRATA_QUERY_CONCURRENCY = 1
    settings.STRATA_QUERY_QUEUE_MS = 50
    outcome = {}

    def slow():
        try:
            query.run_query(sql=ENDLESS, timeout_ms=30_000)
        except query.QueryError as exc:
            outcome["slow"] = exc
        finally:
            connection.close()

    runner = threading.Thread(target=slow)
    runner.start()
    try:
        while query.queries_in_engine() == 0 and runner.is_alive():
            time.sleep(0.01)  # until the slow query holds the one slot
        refused = post(api_client, {"query": "SELECT 1"})
        assert refused.status_code == 429
        assert refused.json()["error"] == "Query capacity exceeded"
        assert refused.json()["errorClass"] == (
            "org.apache.druid.query.QueryCapacityExceededException"
        )
    finally:
        query.interrupt_all()
        runner.join(30)
    assert isinstance(outcome["slow"], query.QueryError)
    assert query.queries_in_engine() == 0
    assert post(api_client, {"query": "SELECT 1 AS one"}).json() == [{"one": 1}]


# --- hostile SQL ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        ("SELECT current_setting('allowed_directories')", "function current_setting"),
        ("SELECT * FROM read_csv('/etc/passwd')", "table function read_csv"),
        ("SELECT * FROM '/etc/passwd'", "table /etc/passwd not found"),
        ("SELECT * FROM read_parquet('{deep}/*/*/*.parquet')", "table function read_parquet"),
        ("SELECT * FROM glob('/*')", "table function glob"),
        ("SELECT * FROM query('SELECT 1')", "table function query"),
        ("SELECT * FROM duckdb_settings()", "table function duckdb_settings"),
        ("SELECT * FROM duckdb_extensions()", "table function duckdb_extensions"),
        ("SELECT getvariable('x')", "function getvariable"),
        ("SELECT version()", "function version"),
        ("SELECT system.main.version()", "system.main.version is not available"),
        ("SELECT json_serialize_plan('SELECT 1')", "function json_serialize_plan"),
        ("SELECT sleep_ms(100000)", "function sleep_ms"),
        ("ATTACH '{deep}/x.duckdb' AS x", "ATTACH"),
        ("PRAGMA database_list", "PRAGMA"),
        ("COPY (SELECT 1) TO '{deep}/stolen.csv'", "COPY"),
        ("INSTALL httpfs", "LOAD"),
        ("LOAD httpfs", "LOAD"),
        ("SET enable_external_access = true", "SET"),
        ("SET VARIABLE x = 1", "SET"),
        ("SELECT * FROM wiki AT (VERSION => 1)", "AT (time travel"),
        ("SELECT " + "+".join(["1"] * 600), "nested too deeply"),
        ("SELECT " + "+".join(["1"] * 5000), "depth"),
    ],
)
def test_hostile_sql_is_refused_by_construction(settings, sql, says):
    sql = sql.replace("{deep}", str(settings.STRATA_DEEP_STORAGE))
    with pytest.raises(query.QueryError) as err:
        query.run_query(sql=sql)
    assert says in str(err.value)
    assert str(settings.STRATA_DEEP_STORAGE) not in str(err.value)


def test_druids_sql_functions_and_the_engines_value_functions_still_run(history):
    result = query.run_query(
        sql="SELECT TIME_FLOOR(__time, 'P1D') AS day, upper(page) AS p, "
        "COALESCE(NULLIF(page, 'a'), '-') AS q, CAST(added AS DOUBLE) / 2 AS half, "
        "row_number() OVER (ORDER BY __time) AS n, CASE WHEN added > 100 THEN 'big' END AS big "
        "FROM wiki WHERE page LIKE '%' AND __time BETWEEN TIMESTAMP '2024-01-01' AND "
        "TIMESTAMP '2024-01-02' ORDER BY __time LIMIT 2"
    )
    assert result.rows == [
        ["2024-01-01T00:00:00.000Z", "Z", "z", 64.0, 1, "big"],
        ["2024-01-01T00:00:00.000Z", "A", "-", 128.0, 2, "big"],
    ]


def test_sql_run_over_given_tables_is_checked_and_bounded_the_same(history, settings):
    # duckdb_query: the entry point for SQL built elsewhere (native queries, the tests).
    root = str(settings.STRATA_DEEP_STORAGE)
    sources = query.sources_for("SELECT * FROM wiki")
    assert query.duckdb_query("SELECT count(*) AS n FROM druid.wiki", sources, root=root).rows == [
        [4]
    ]
    for sql, says in (
        ("SELECT current_setting('allowed_directories')", "function current_setting"),
        ("SELECT * FROM read_csv('/etc/passwd')", "table function read_csv"),
        ("SELECT * FROM sys.segments", "table sys.segments not found"),
    ):
        with pytest.raises(query.QueryError) as err:
            query.duckdb_query(sql, sources, root=root)
        assert says in str(err.value)
    with pytest.raises(query.QueryTimeout):
        query.duckdb_query(ENDLESS, sources, root=root, timeout_ms=200)
