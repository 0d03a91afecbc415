"""Druid's dataSource types in native queries (docs/querying/datasource.md):
`inline`, `query`, `join` and `unnest` beside tables and unions; `lookup` refused
by name (Strata has no lookups). Each is checked against the example of Druid's
docs adapted to the small `wiki` dataSource of test_native_queries, and against
SQL over the same rows (the "SQL twin"):

    2024-01-01T01:00 Main alice  10  1.5
    2024-01-01T05:00 Talk None   20  2.25
    2024-01-01T12:00 Main bob    -3  0.5
    2024-01-03T02:00 Help alice   7  None
    2024-01-03T10:00 Main carol 100  10.0
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from metastore import query
from metastore.druid import native as compiler
from tests.test_native_queries import native, publish_tables, publish_wiki, sql

EVER = ["0000/3000"]
PAGES = {"type": "inline", "columnNames": ["k", "v"], "rows": [["Main", "core"], ["Talk", "chat"]]}


@pytest.fixture
def wiki(db, inline_spec):
    publish_wiki(inline_spec)


def test_inline_scan_doc_example_lists_the_rows_at_time_zero(db, api_client):
    body = {
        "queryType": "scan",
        "dataSource": {
            "type": "inline",
            "columnNames": ["country", "city"],
            "rows": [["United States", "San Francisco"], ["Canada", "Calgary"]],
        },
        "columns": ["country", "city"],
        "intervals": EVER,
    }
    [batch] = native(api_client, body)
    assert batch["columns"] == ["country", "city"]
    assert batch["events"] == [
        {"country": "United States", "city": "San Francisco"},
        {"country": "Canada", "city": "Calgary"},
    ]


def test_inline_with_types_and_time_groups_as_sql_groups_the_same_values(db, api_client):
    body = {
        "queryType": "groupBy",
        "dataSource": {
            "type": "inline",
            "columnNames": ["__time", "k", "n"],
            "columnTypes": ["LONG", "STRING", "LONG"],
            "rows": [[86_400_000, "a", 2], [86_400_000, "b", 5], [0, "a", 1], [0, None, 4]],
        },
        "intervals": ["1970-01-01/1970-01-03"],
        "granularity": "day",
        "dimensions": ["k"],
        "aggregations": [{"type": "longSum", "name": "n", "fieldName": "n"}],
    }
    twin = sql(
        "SELECT epoch_ms(date_trunc('day', make_timestamp(t::BIGINT * 1000))), k, sum(n) "
        "FROM (VALUES (86400000, 'a', 2), (86400000, 'b', 5), (0, 'a', 1), (0, NULL, 4)) v(t, k, n) "
        "GROUP BY ALL ORDER BY 1, 2 NULLS FIRST"
    )
    rows = native(api_client, body)
    assert [[r["timestamp"], r["event"]["k"], r["event"]["n"]] for r in rows] == [
        [datetime.fromtimestamp(t / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"), k, n]
        for t, k, n in twin
    ]
    assert rows[0]["event"] == {"k": None, "n": 4}


def test_query_datasource_doc_example_averages_hits_per_page(wiki, api_client):
    body = {
        "queryType": "timeseries",
        "dataSource": {
            "type": "query",
            "query": {
                "queryType": "groupBy",
                "dataSource": "wiki",
                "intervals": EVER,
                "granularity": "all",
                "dimensions": ["page"],
                "aggregations": [{"type": "count", "name": "hits"}],
            },
        },
        "intervals": EVER,
        "granularity": "all",
        "aggregations": [
            {"type": "longSum", "name": "hits", "fieldName": "hits"},
            {"type": "count", "name": "pages"},
        ],
        "postAggregations": [
            {"type": "expression", "name": "average_hits_per_page", "expression": "hits / pages"}
        ],
    }
    [[hits, pages]] = sql(
        "SELECT sum(hits), count(*) FROM (SELECT page, count(*) AS hits FROM wiki GROUP BY page)"
    )
    [row] = native(api_client, body)
    assert row["result"] == {"hits": hits, "pages": pages, "average_hits_per_page": hits // pages}
    assert (hits, pages) == (5, 3)


def test_groupby_over_a_daily_groupby_sees_each_row_at_its_day(wiki, api_client):
    inner = {
        "queryType": "groupBy",
        "dataSource": "wiki",
        "intervals": ["2024-01-01/2024-01-04"],
        "granularity": "day",
        "dimensions": ["page"],
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
    }
    body = {
        "queryType": "groupBy",
        "dataSource": {"type": "query", "query": inner},
        "intervals": ["2024-01-03/2024-01-04"],  # the outer intervals cut the inner rows
        "granularity": "all",
        "dimensions": [],
        "aggregations": [
            {"type": "count", "name": "groups"},
            {"type": "longMax", "name": "most", "fieldName": "added"},
        ],
    }
    [[groups, most]] = sql(
        "SELECT count(*), max(added) FROM (SELECT page, sum(added) AS added FROM wiki "
        "WHERE __time >= '2024-01-03' GROUP BY date_trunc('day', __time), page)"
    )
    [row] = native(api_client, body)
    assert row["event"] == {"groups": groups, "most": most}
    assert row["timestamp"] == "2024-01-03T00:00:00.000Z"


def _join(join_type: str, right=PAGES, condition='page == "r.k"') -> dict:
    return {
        "queryType": "groupBy",
        "dataSource": {
            "type": "join",
            "left": "wiki",
            "right": right,
            "rightPrefix": "r.",
            "condition": condition,
            "joinType": join_type,
        },
        "intervals": EVER,
        "granularity": "all",
        "dimensions": [{"type": "default", "dimension": "r.v", "outputName": "kind"}],
        "aggregations": [{"type": "longSum", "name": "added", "fieldName": "added"}],
    }


@pytest.mark.parametrize("join_type", ["INNER", "LEFT"])
def test_join_with_inline_rows_doc_example_sums_as_the_sql_join(wiki, api_client, join_type):
    twin = sql(
        f"SELECT r.v, sum(added) FROM wiki {join_type} JOIN "
        "(VALUES ('Main', 'core'), ('Talk', 'chat')) r(k, v) ON wiki.page = r.k "
        "GROUP BY 1 ORDER BY 1 NULLS FIRST"
    )
    rows = native(api_client, _join(join_type))
    assert [[r["event"]["kind"], r["event"]["added"]] for r in rows] == twin
    assert len(twin) == (3 if join_type == "LEFT" else 2)


def test_join_with_a_query_on_the_right_and_an_expression_on_the_left(wiki, api_client):
    right = {
        "type": "query",
        "query": {
            "queryType": "groupBy",
            "dataSource": "wiki",
            "intervals": EVER,
            "granularity": "all",
            "dimensions": ["user"],
            "aggregations": [{"type": "count", "name": "edits"}],
        },
    }
    body = _join("INNER", right, 'concat("user", \'\') == "r.user"')
    body["dimensions"] = ["user"]
    body["aggregations"] = [{"type": "longSum", "name": "edits", "fieldName": "r.edits"}]
    twin = sql(
        "SELECT w.user, sum(r.edits) FROM wiki w JOIN (SELECT user, count(*) AS edits "
        "FROM wiki GROUP BY user) r ON w.user = r.user GROUP BY 1 ORDER BY 1"
    )
    rows = native(api_client, body)
    assert [[r["event"]["user"], r["event"]["edits"]] for r in rows] == twin
    assert ["alice", 4] in twin  # two rows of alice, each joined to her count of 2


@pytest.mark.parametrize(
    ("datasource", "named"),
    [
        ({"type": "lookup", "lookup": "countries"}, "dataSource.type"),
        (
            {**_join("INNER")["dataSource"], "right": {"type": "lookup", "lookup": "l"}},
            "dataSource.right.type",
        ),
        ({**_join("INNER")["dataSource"], "right": "wiki"}, "dataSource.right.type"),
        ({**_join("INNER")["dataSource"], "joinType": "FULL"}, "dataSource.joinType"),
        ({**_join("INNER")["dataSource"], "condition": 'page != "r.k"'}, "dataSource.condition"),
        (
            {"type": "query", "query": {"queryType": "timeBoundary", "dataSource": "wiki"}},
            "dataSource.query.queryType",
        ),
        (
            {"type": "query", "query": {"queryType": "scan", "dataSource": "wiki"}},
            "dataSource.query.intervals",
        ),
        ({"type": "inline", "columnNames": ["a"], "rows": [[1, 2]]}, "dataSource.rows[0]"),
        ({"type": "mystery"}, "dataSource.type"),
    ],
)
def test_what_a_datasource_cannot_do_here_is_refused_naming_the_field(
    wiki, api_client, datasource, named
):
    body = {**_join("INNER"), "dataSource": datasource}
    result = native(api_client, body, status=400)
    assert set(result) == {"error", "errorMessage", "errorClass", "host"}
    assert result["errorMessage"].startswith(named + ":"), result


def test_spark_sql_refuses_the_datasource_types_it_does_not_run_by_name():
    schema = {"__time": "time", "page": "string", "added": "long"}
    for datasource in (PAGES, _join("INNER")["dataSource"]):
        body = {**_join("INNER"), "dataSource": datasource}
        with pytest.raises(compiler.NativeQueryError) as refused:
            compiler.compile_query(body, schema, dialect="spark")
        assert refused.value.field == "dataSource.type" and refused.value.unsupported


@pytest.fixture
def tagged(db, inline_spec):
    """`tagged`: a multi-value string column as Strata stores one (the JSON text of
    its values, or the one value), as in Druid's unnest tutorial."""
    rows = [
        ("2000-01-01", '["a","b"]', 1.0),
        ("2000-01-02", '["c","d"]', 2.0),
        ("2001-01-01", "e", 4.0),
        ("2001-01-02", None, 5.0),
        ("2001-01-03", '["a","d"]', 6.0),
    ]
    table = pa.table(
        {
            "__time": pa.array(
                [datetime.fromisoformat(r[0]).replace(tzinfo=UTC) for r in rows],
                type=pa.timestamp("us", tz="UTC"),
            ),
            "dim3": pa.array([r[1] for r in rows], type=pa.string()),
            "m1": pa.array([r[2] for r in rows], type=pa.float64()),
        }
    )
    publish_tables(inline_spec, "tagged", {"2000-01-01/2002-01-01": [table]})


def _unnest(**more) -> dict:
    return {
        "type": "unnest",
        "base": "tagged",
        "virtualColumn": {"type": "expression", "name": "unnest-dim3", "expression": '"dim3"'},
        **more,
    }


def test_unnest_groupby_doc_example_counts_each_value_as_sql_unnest_does(tagged, api_client):
    body = {
        "queryType": "groupBy",
        "dataSource": _unnest(),
        "intervals": ["-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"],
        "granularity": "all",
        "dimensions": ["unnest-dim3"],
        "aggregations": [{"type": "count", "name": "n"}],
        "limitSpec": {
            "type": "default",
            "columns": [{"dimension": "unnest-dim3", "direction": "descending"}],
            "limit": 1001,
        },
    }
    twin = query.run_query(
        sql="SELECT d3, COUNT(*) FROM tagged, UNNEST(MV_TO_ARRAY(dim3)) AS t(d3) "
        "GROUP BY d3 ORDER BY d3 DESC",
        druid_sql=True,
    ).rows
    rows = native(api_client, body)
    assert [[r["event"]["unnest-dim3"], r["event"]["n"]] for r in rows] == twin
    # the row without values unnests to one null row, as in Druid (apache/druid#13764)
    assert [v for v, _ in twin] == ["e", "d", "c", "b", "a", None]


def test_unnest_scan_with_a_filter_on_the_values_and_on_the_rows(tagged, api_client):
    body = {
        "queryType": "scan",
        "dataSource": _unnest(
            unnestFilter={"type": "in", "dimension": "unnest-dim3", "values": ["a", "d"]}
        ),
        "intervals": ["2000/2002"],
        "filter": {"type": "range", "column": "m1", "matchValueType": "DOUBLE", "upper": 5.5},
        "columns": ["__time", "unnest-dim3", "m1"],
        "resultFormat": "compactedList",
        "order": "ascending",
    }
    [batch] = native(api_client, body)
    assert batch["events"] == [[946684800000, "a", 1.0], [946771200000, "d", 2.0]]


def test_scans_nested_twenty_deep_give_the_rows_of_the_table(wiki, api_client):
    plain = {"queryType": "scan", "dataSource": "wiki", "intervals": EVER, "order": "ascending"}
    body = plain
    for _ in range(20):
        body = {**plain, "dataSource": {"type": "query", "query": body}}
    [expected] = native(api_client, plain)
    [batch] = native(api_client, body)
    assert batch["events"] == expected["events"]
    assert len(expected["events"]) == 5


def test_inline_without_rows_or_without_columns(db, api_client):
    empty = {"type": "inline", "columnNames": ["a", "b"], "rows": []}
    body = {"queryType": "scan", "dataSource": empty, "intervals": EVER}
    assert native(api_client, body) == []
    bare = {"type": "inline", "columnNames": [], "rows": [[], []]}
    body = {
        "queryType": "timeseries",
        "dataSource": bare,
        "intervals": EVER,
        "granularity": "all",
        "aggregations": [{"type": "count", "name": "n"}],
    }
    assert native(api_client, body) == [
        {"timestamp": "1970-01-01T00:00:00.000Z", "result": {"n": 2}}
    ]
