"""Druid SQL means what it means in Druid (issue 26, item 7): each function of
Druid's SQL function reference that Strata supports gives the values Druid's docs
give, through `run_query` and through `POST /druid/v2/sql`; each one it refuses,
and each function only the engine has, gets Druid's error naming it -- never the
engine's error text, never a 500. The cases are a table
(tests/druid_sql_function_cases.py) over a tiny dataSource `fns`, and the table
covers every supported function of docs/druid-sql-function-status.md.
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.conf import settings
from django.db import transaction
from druid_sql_function_cases import QUERIES, SCALAR

from metastore import query, services, sql_druid_rules
from metastore.intervals import Interval
from metastore.models import Task, TaskStatus

pytestmark = pytest.mark.django_db

FNS_ROWS = [
    (
        "2000-01-01T00:00:00",
        "a",
        '["a","b"]',
        1,
        1.5,
        '{"x":{"y":1},"n":5,"arr":[1,2],"s":"t"}',
        "10",
    ),
    ("2000-01-02T03:04:05.678", "b", "c", 2, 2.5, '{"x":2}', "x"),
    ("2000-02-01T12:00:00", None, None, 3, None, None, None),
]


@pytest.fixture
def fns(inline_spec):
    """The `fns` dataSource: one segment of three rows, published through the services."""
    path = settings.STRATA_DEEP_STORAGE / "fns" / uuid.uuid4().hex / "data.parquet"
    path.parent.mkdir(parents=True)
    times = [datetime.fromisoformat(r[0]).replace(tzinfo=UTC) for r in FNS_ROWS]
    table = pa.table(
        {
            "__time": pa.array(times, type=pa.timestamp("us", tz="UTC")),
            "dim": pa.array([r[1] for r in FNS_ROWS], type=pa.string()),
            "tags": pa.array([r[2] for r in FNS_ROWS], type=pa.string()),
            "cnt": pa.array([r[3] for r in FNS_ROWS], type=pa.int64()),
            "val": pa.array([r[4] for r in FNS_ROWS], type=pa.float64()),
            "js": pa.array([r[5] for r in FNS_ROWS], type=pa.string()),
            "code": pa.array([r[6] for r in FNS_ROWS], type=pa.string()),
        }
    )
    pq.write_table(table, path)
    with transaction.atomic():
        task = services.task_submit(spec=inline_spec("fns"))
        assert services.task_claim(task_id=task.id, worker="pytest")
    task = Task.objects.get(id=task.id)
    months = Interval.parse("2000-01-01/2000-03-01")
    services.lock_acquire(task=task, interval=months)
    alloc = services.segments_allocate(task=task, interval=months, count=1, append=False)
    services.segments_publish(
        task=task,
        segments=[
            services.NewSegment(
                interval=months,
                version=alloc.version,
                partition=alloc.partitions[0],
                core_partitions=alloc.core_partitions,
                location=str(path),
                num_rows=3,
                size_bytes=path.stat().st_size,
                schema={"dimensions": [{"name": n} for n in ("dim", "tags", "js", "code")]},
            )
        ],
    )
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)


def _scalar_sql(expression: str, where: str) -> str:
    return f"SELECT {expression} AS v FROM fns {where}".strip()


def _matches(value, expected) -> bool:
    if callable(expected):
        return value is not None and expected(value)
    if isinstance(expected, float) and isinstance(value, int | float):
        return math.isclose(value, expected, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(expected, list) and isinstance(value, list) and len(value) == len(expected):
        return all(_matches(v, e) for v, e in zip(value, expected, strict=True))
    return (
        value == expected
        and type(value) is type(expected)
        or (isinstance(expected, bool) is isinstance(value, bool) and value == expected)
    )


def _describe(expected) -> str:
    return expected.__doc__ if callable(expected) else repr(expected)


def _druid_sql(api_client, sql: str):
    return api_client.post("/druid/v2/sql", {"query": sql}, format="json")


def test_every_function_druid_documents_has_a_status_and_the_doc_says_it():
    rows = sql_druid_rules.status_rows()
    assert [r[0] for r in rows] == sql_druid_rules.REFERENCE_NAMES
    assert len(rows) > 200
    with open(settings.BASE_DIR / "docs" / "druid-sql-function-status.md") as doc:
        assert doc.read() == sql_druid_rules.status_markdown(), (
            "docs/druid-sql-function-status.md is stale: python -m metastore.sql_druid_rules"
        )


def test_the_cases_cover_every_supported_function():
    covered = {case[0] for case in SCALAR} | {case[0] for case in QUERIES}
    supported = {r[0] for r in sql_druid_rules.status_rows() if r[2] == "supported"}
    assert supported - covered == set()


def test_each_function_gives_the_value_druids_docs_give_through_run_query(fns):
    wrong = []
    for function, expression, expected, where in SCALAR:
        sql = _scalar_sql(expression, where)
        try:
            result = query.run_query(sql=sql, druid_sql=True)
        except query.QueryError as exc:
            wrong.append(f"{function}: {sql} -> refused: {exc.message}")
            continue
        value = result.rows[0][0] if result.rows else "(no row)"
        if not _matches(value, expected):
            wrong.append(f"{function}: {sql} -> {value!r}, expected {_describe(expected)}")
    for function, sql, expected in QUERIES:
        try:
            values = [row[0] for row in query.run_query(sql=sql, druid_sql=True).rows]
        except query.QueryError as exc:
            wrong.append(f"{function}: {sql} -> refused: {exc.message}")
            continue
        if not _matches(values, expected):
            wrong.append(f"{function}: {sql} -> {values!r}, expected {expected!r}")
    assert wrong == []


def test_each_function_gives_the_same_value_through_druids_sql_endpoint(fns, api_client):
    # One request per kind of function keeps this quick; each answer as Druid sends it.
    wrong = []
    for function, expression, expected, where in SCALAR[::7] + SCALAR[-12:]:
        response = _druid_sql(api_client, _scalar_sql(expression, where))
        if response.status_code != 200:
            wrong.append(f"{function}: {response.status_code} {response.content[:200]!r}")
            continue
        value = response.json()[0]["v"]
        if not _matches(value, expected):
            wrong.append(f"{function}: {expression} -> {value!r}, expected {_describe(expected)}")
    assert wrong == []


def test_json_results_are_nested_json_and_typed_complex_json(fns, api_client):
    response = api_client.post(
        "/druid/v2/sql",
        {
            "query": "SELECT JSON_QUERY(js, '$.x') AS x FROM fns WHERE cnt = 1",
            "resultFormat": "array",
            "header": True,
            "typesHeader": True,
            "sqlTypesHeader": True,
        },
        format="json",
    )
    assert response.status_code == 200
    assert response.json() == [["x"], ["COMPLEX<json>"], ["COMPLEX<json>"], [{"y": 1}]]


@pytest.mark.parametrize(
    "heading", [r[0] for r in sql_druid_rules.status_rows() if r[2] == "refused"]
)
def test_a_refused_function_gets_druids_error_naming_it(fns, heading):
    name = heading.split()[0]
    with pytest.raises(query.QueryError) as refused:
        query.run_query(sql=f"SELECT {name}(dim) FROM fns", druid_sql=True)
    assert f"Function [{name}] is not supported here" in refused.value.message


def test_refusals_over_http_are_druids_400_naming_the_function(fns, api_client):
    cases = {
        "SELECT DS_TUPLE_DOUBLES(dim) FROM fns": "DS_TUPLE_DOUBLES",
        "SELECT list_value(1) FROM fns": "No match found for function signature LIST_VALUE",
        "SELECT read_csv('/etc/passwd')": "No match found for function signature READ_CSV",
        "SELECT LPAD('a') FROM fns": "Invalid number of arguments to function 'LPAD'",
        "SELECT TIME_FLOOR(__time, 'bad') FROM fns": "TIME_FLOOR: 'bad' is not an ISO 8601",
        "SELECT TIME_FLOOR(__time, dim) FROM fns": "TIME_FLOOR: the period must be a literal",
        "SELECT STRING_AGG(dim, ',', 1) FROM fns": "STRING_AGG: the result is larger than 1",
        "SELECT PARSE_JSON(dim) FROM fns": "PARSE_JSON: the input is not valid JSON",
        "SELECT ABS('x') FROM fns": "Cannot apply 'ABS' to arguments",
        # Calcite's ABS/FLOOR/CEIL take no string, even a numeric one (no implicit cast).
        "SELECT FLOOR(code) FROM fns": "Cannot apply 'FLOOR' to arguments",
        "SELECT nope FROM fns": "Column 'nope' not found in any table",
    }
    for sql, words in cases.items():
        response = _druid_sql(api_client, sql)
        assert response.status_code == 400, (sql, response.content)
        body = response.json()
        assert body["errorCode"] == "invalidInput" and body["category"] == "INVALID_INPUT"
        assert words in body["errorMessage"], (sql, body["errorMessage"])
        for engine_words in ("Binder Error", "Invalid Input Error", "Conversion Error"):
            assert engine_words not in body["errorMessage"]


def test_count_star_is_named_expr_0_on_druids_endpoint(fns, api_client):
    response = _druid_sql(api_client, "SELECT COUNT(*) FROM fns")
    assert response.json() == [{"EXPR$0": 3}]
    response = _druid_sql(api_client, "SELECT FLOOR(__time TO MONTH), COUNT(*) FROM fns GROUP BY 1")
    assert response.json() == [
        {"EXPR$0": "2000-01-01T00:00:00.000Z", "EXPR$1": 2},
        {"EXPR$0": "2000-02-01T00:00:00.000Z", "EXPR$1": 1},
    ] or sorted(response.json(), key=lambda r: r["EXPR$0"]) == [
        {"EXPR$0": "2000-01-01T00:00:00.000Z", "EXPR$1": 2},
        {"EXPR$0": "2000-02-01T00:00:00.000Z", "EXPR$1": 1},
    ]


def test_explain_plan_for_answers_in_druids_shape(fns, api_client):
    sql = "EXPLAIN PLAN FOR SELECT dim, COUNT(*) AS n FROM fns GROUP BY dim"
    response = _druid_sql(api_client, sql)
    assert response.status_code == 200, response.content
    (row,) = response.json()
    assert set(row) == {"PLAN", "RESOURCES", "ATTRIBUTES"}
    (plan,) = json.loads(row["PLAN"])
    assert plan["signature"] == [{"name": "dim", "type": "STRING"}, {"name": "n", "type": "LONG"}]
    assert json.loads(row["RESOURCES"]) == [{"name": "fns", "type": "DATASOURCE"}]
    assert json.loads(row["ATTRIBUTES"]) == {"statementType": "SELECT"}
    # Planned, not run; and what it explains is checked like any query.
    refused = _druid_sql(api_client, "EXPLAIN PLAN FOR SELECT read_csv('/etc/passwd')")
    assert refused.status_code == 400
    assert "READ_CSV" in refused.json()["errorMessage"]


def test_the_engines_dialect_stays_on_strata_own_query_api(fns, api_client):
    # /api/v1/query is Strata's own endpoint: the engine's dialect, as documented.
    response = api_client.post(
        "/api/v1/query", {"sql": "SELECT list_value(1) AS l, count(*) AS n FROM fns"}, format="json"
    )
    assert response.status_code == 200
    assert response.json() == {"columns": ["l", "n"], "rows": [[[1], 3]]}


def test_information_schema_routines_lists_druids_functions_not_the_engines(fns):
    routines = query.run_query(
        sql="SELECT ROUTINE_NAME, IS_AGGREGATOR FROM INFORMATION_SCHEMA.ROUTINES", druid_sql=True
    ).rows
    listed = dict((name, aggregate) for name, aggregate in routines)
    assert listed["TIME_FLOOR"] == "NO" and listed["MV_TO_ARRAY"] == "NO"
    assert listed["EARLIEST"] == "YES" and listed["STRING_AGG"] == "YES"
    assert "LIST_VALUE" not in listed and "READ_CSV" not in listed
    assert "DS_TUPLE_DOUBLES" not in listed  # refused
    assert listed["DS_THETA"] == "YES" and listed["THETA_SKETCH_ESTIMATE"] == "NO"


def test_a_segment_file_missing_from_deep_storage_is_a_clear_error_not_a_500(fns, api_client):
    """Found by the contract test (POST /druid/v2 {"dataSource": ..., "queryType": "scan"}
    over a dataSource whose files are gone): the error says so without the path."""
    from metastore.models import Segment

    (location,) = Segment.objects.filter(datasource__name="fns").values_list("location", flat=True)
    Path(location).unlink()
    answers = [
        api_client.post("/druid/v2", {"dataSource": "fns", "queryType": "scan"}, format="json"),
        _druid_sql(api_client, "SELECT COUNT(*) FROM fns"),
        api_client.post("/api/v1/query", {"sql": "SELECT COUNT(*) FROM fns"}, format="json"),
    ]
    for response in answers:
        assert response.status_code == 400, response.content
        text = response.content.decode()
        assert "missing from deep storage" in text and "fns" in text
        assert str(settings.STRATA_DEEP_STORAGE) not in text


def _zoned(api_client, sql: str, zone: str):
    body = {"query": sql, "context": {"sqlTimeZone": zone}}
    response = api_client.post("/druid/v2/sql", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_sql_time_zone_moves_time_functions_literals_and_results_to_that_zone(fns, api_client):
    """sqlTimeZone (sql-query-context.md, sql-scalar.md's date and time functions):
    row 2 is 2000-01-02T03:04:05.678Z, 2000-01-01T19:04:05.678 in Los Angeles."""
    (row,) = _zoned(
        api_client,
        "SELECT __time, CAST(__time AS DATE) AS d, TIME_FLOOR(__time, 'P1D') AS f, "
        "FLOOR(__time TO MONTH) AS m, CEIL(__time TO DAY) AS c, DATE_TRUNC('day', __time) AS t, "
        "TIME_FORMAT(__time) AS iso, TIME_FORMAT(__time, 'yyyy-MM-dd HH:mm') AS fmt, "
        "TIME_EXTRACT(__time, 'HOUR') AS h, EXTRACT(DAY FROM __time) AS dd, "
        "TIME_SHIFT(__time, 'P1D', 1) AS s, TIME_PARSE('2000-01-01 00:00:00') AS p, "
        "TIME_FLOOR(__time, 'P1D', NULL, 'UTC') AS u FROM fns WHERE cnt = 2",
        "America/Los_Angeles",
    )
    assert row == {
        "__time": "2000-01-01T19:04:05.678-08:00",
        "d": "2000-01-01T00:00:00.000-08:00",  # Druid's own SqlResourceTest shape
        "f": "2000-01-01T00:00:00.000-08:00",
        "m": "2000-01-01T00:00:00.000-08:00",
        "c": "2000-01-02T00:00:00.000-08:00",
        "t": "2000-01-01T00:00:00.000-08:00",
        "iso": "2000-01-01T19:04:05.678-08:00",
        "fmt": "2000-01-01 19:04",
        "h": 19,
        "dd": 1,
        "s": "2000-01-02T19:04:05.678-08:00",
        "p": "2000-01-01T00:00:00.000-08:00",
        "u": "2000-01-01T16:00:00.000-08:00",  # a time zone argument wins
    }
    # A timestamp literal (or text compared with a timestamp) is a wall-clock time of
    # the zone: 20:00 there is 04:00Z, after row 2 (in UTC both rows 2 and 3 would count).
    counts = _zoned(
        api_client,
        "SELECT COUNT(*) FILTER (WHERE __time >= TIMESTAMP '2000-01-01 20:00:00') AS n, "
        "COUNT(*) FILTER (WHERE __time BETWEEN '2000-01-01 20:00:00' AND '2001-01-01') AS b "
        "FROM fns",
        "America/Los_Angeles",
    )
    assert counts == [{"n": 1, "b": 1}]
    (offset,) = _zoned(
        api_client,
        "SELECT CURRENT_DATE AS d, TIMESTAMPDIFF(HOUR, CURRENT_DATE, CURRENT_TIMESTAMP) AS h, "
        "TIME_FLOOR(__time, 'P1D') AS f FROM fns WHERE cnt = 2",
        "+05:00",
    )
    assert offset["d"].endswith("T00:00:00.000+05:00") and 0 <= offset["h"] < 24
    assert offset["f"] == "2000-01-02T00:00:00.000+05:00"
    # In UTC too, a DATE is written as Druid writes it (Druid's SqlResourceTest).
    dated = _zoned(api_client, "SELECT CAST(__time AS DATE) AS d FROM fns WHERE cnt = 2", "UTC")
    assert dated == [{"d": "2000-01-02T00:00:00.000Z"}]
    bad = api_client.post(
        "/druid/v2/sql",
        {"query": "SELECT 1", "context": {"sqlTimeZone": "localtime"}},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "context.sqlTimeZone"
