"""The Segments list in the REST API (issue 25): `GET /api/v1/segments` with the
console view's filters, sorts and keyset pages, in the OpenAPI schema; and the
indexes that keep its size and rows orders one index walk per page."""

from __future__ import annotations

import pytest
from django.db import connection

from metastore.models import Segment
from tests.test_console_segments import build_cluster

pytestmark = pytest.mark.django_db

URL = "/api/v1/segments"


@pytest.fixture
def cluster(publish):
    """wiki: two days, the second replaced (its first segment overshadowed), one
    day-1 partition unused; Flights_US: three days of two partitions each."""
    return build_cluster(publish)


def _all_pages(api_client, params: dict) -> list[dict]:
    rows, url, pages = [], URL, 0
    while url:
        response = api_client.get(url, params if url == URL else None)
        assert response.status_code == 200, response.content[:500]
        body = response.json()
        assert set(body) == {"next", "previous", "results"}
        rows += body["results"]
        url, pages = body["next"], pages + 1
        assert pages < 50
    return rows


def test_lists_every_segment_of_every_datasource_with_its_timeline_state(api_client, cluster):
    rows = _all_pages(api_client, {"limit": 3})
    by_id = {r["id"]: r for r in rows}
    assert len(rows) == len(by_id) == 10  # pages neither overlap nor skip
    assert by_id[cluster["old_day2"]]["state"] == "overshadowed"
    assert by_id[cluster["unused"]]["state"] == "unused"
    assert by_id[cluster["second"].segment_ids[0]]["state"] == "visible"
    flight = by_id[cluster["flights"].segment_ids[0]]
    assert flight["datasource"] == "Flights_US" and flight["num_rows"] == 100
    assert flight["size_bytes"] == 5000 and flight["shard_type"] == "numbered"
    assert flight["interval"].endswith("Z") and "/" in flight["interval"]
    starts = [Segment.objects.get(id=r["id"]).start for r in rows]
    assert starts == sorted(starts, reverse=True)  # newest first, as the console


def test_filters_and_sorts_are_the_console_views(api_client, cluster):
    flights = _all_pages(api_client, {"datasource": "flights", "sort": "-size", "limit": 4})
    assert {r["id"] for r in flights} == set(cluster["flights"].segment_ids)
    wiki = _all_pages(api_client, {"datasource": "=wiki", "sort": "rows", "limit": 2})
    assert [r["num_rows"] for r in wiki] == sorted(r["num_rows"] for r in wiki)
    assert {r["datasource"] for r in wiki} == {"wiki"}
    overshadowed = _all_pages(api_client, {"state": "overshadowed"})
    assert [r["id"] for r in overshadowed] == [cluster["old_day2"]]
    feb2 = _all_pages(api_client, {"interval": "2024-02-02/2024-02-03"})
    assert len(feb2) == 2 and all("2024-02-02" in r["interval"] for r in feb2)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"state": "gone"}, "state"),
        ({"sort": "colour"}, "sort"),
        ({"interval": "2024-02-03/2024-02-01"}, "interval"),
        ({"shard": "round"}, "shard"),
        ({"limit": "0"}, "limit"),
    ],
)
def test_a_bad_parameter_is_a_400_naming_it(api_client, cluster, params, field):
    response = api_client.get(URL, params)
    assert response.status_code == 400 and response.json()["field"] == field


@pytest.mark.parametrize(
    ("sort", "after"),
    [("size", "not-a-cursor"), ("size", [10**30, "x"]), ("start", ["9999999-01-01", "x"])],
)
def test_a_forged_cursor_is_refused(api_client, cluster, sort, after):
    from console.segment_views import encode_cursor

    cursor = after if isinstance(after, str) else encode_cursor(after)
    response = api_client.get(URL, {"sort": sort, "cursor": cursor})
    assert response.status_code == 404 and response.json()["field"] == "cursor"


def test_the_endpoint_and_its_parameters_are_in_the_openapi_schema(api_client):
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema = response.json()
    operation = schema["paths"]["/api/v1/segments"]["get"]
    names = {p["name"] for p in operation["parameters"]}
    assert {"datasource", "interval", "version", "state", "shard", "sort"} <= names
    assert {"cursor", "limit"} <= names


@pytest.mark.parametrize(
    ("order", "index"),
    [("size_bytes DESC, id DESC", "segment_size_id"), ("num_rows, id", "segment_rows_id")],
)
def test_the_size_and_rows_orders_walk_an_index(order, index):
    if connection.vendor != "postgresql":
        pytest.skip("the plan is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN SELECT id FROM metastore_segment ORDER BY {order} LIMIT 51")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert index in plan, plan


def test_a_page_costs_a_bounded_number_of_queries(
    api_client, cluster, publish, django_assert_max_num_queries
):
    """Once the dataSources' timeline states are cached (one per commit), a page is
    the token, the rows, and one probe of the commit log per dataSource on it."""
    more = {f"2024-03-{d:02d}/2024-03-{d + 1:02d}": 3 for d in range(1, 10)}
    publish("more", "2024-03-01/2024-03-11", more)
    params = {"limit": 40, "sort": "-rows"}
    api_client.get(URL, params)  # builds the three timeline states
    with django_assert_max_num_queries(2 + 3):
        response = api_client.get(URL, params)
    assert response.status_code == 200 and len(response.json()["results"]) == 37
