"""The REST contract of SPEC §7, on metastore state built through the services.

No Spark and no worker here: tasks are submitted (and stay queued, the test
transaction never commits) or claimed by the test itself."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from conftest import all_pages
from django.db import connection
from django.test.utils import CaptureQueriesContext

from metastore import selectors, services
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, Segment, Task, TaskLock, TaskStatus

pytestmark = pytest.mark.django_db


def api_time(dt: datetime | None) -> str | None:
    """How DRF writes a datetime (UTC, ISO-8601, 'Z')."""
    return None if dt is None else dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def iv(text: str) -> str:
    """The canonical text of an interval: `2024-01-01T00:00:00.000Z/...`."""
    start, end = text.split("/")

    def ts(value: str) -> str:
        value = value if "T" in value else f"{value}T00"
        date, hour = value.split("T")
        hour = hour if ":" in hour else f"{hour}:00"
        return f"{date}T{hour}:00.000Z"

    return f"{ts(start)}/{ts(end)}"


def seg_id(ds: str, interval: str, version: str, partition: int) -> str:
    start, end = iv(interval).split("/")
    base = f"{ds}_{start}_{end}_{version}"
    return base if partition == 0 else f"{base}_{partition}"


# --- authentication ---------------------------------------------------------------------


def test_token_auth_works(api_client):
    response = api_client.get("/api/v1/tasks")
    assert response.status_code == 200
    assert response.json() == {"next": None, "previous": None, "results": []}


def test_session_auth_works(client, user):
    client.force_login(user)
    assert client.get("/api/v1/datasources").status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/tasks"),
        ("post", "/api/v1/tasks"),
        ("get", "/api/v1/locks"),
        ("get", "/api/v1/datasources"),
        ("post", "/api/v1/datasources/wiki/mark-unused"),
    ],
)
def test_unauthenticated_requests_are_refused(client, inline_spec, method, path):
    response = (
        getattr(client, method)(path, inline_spec(), content_type="application/json")
        if method == "post"
        else client.get(path)
    )
    assert response.status_code in (401, 403)
    assert "credentials were not provided" in response.json()["detail"]
    assert not Task.objects.exists()


def test_a_wrong_token_is_refused(client):
    response = client.get("/api/v1/tasks", HTTP_AUTHORIZATION="Token not-a-token")
    assert response.status_code in (401, 403)
    assert response.json() == {
        "error": "Invalid token.",
        "field": None,
        "message": "Invalid token.",
        "detail": "Invalid token.",
    }


# --- tasks -------------------------------------------------------------------------------


@pytest.fixture
def four_tasks(inline_spec, claimed_task, user):
    pending = services.task_submit(spec=inline_spec("wiki"), user=user)
    running = claimed_task("wiki")
    other = services.task_submit(spec=inline_spec("other"), user=user)
    canceled = services.task_submit(spec=inline_spec("wiki"), user=user)
    services.task_cancel(task_id=canceled.id, user=user)
    return {
        "pending": pending.id,
        "running": running.id,
        "other": other.id,
        "canceled": canceled.id,
    }


def ids(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {t["id"] for t in response.json()["results"]}


def test_tasks_list_and_filters(api_client, four_tasks):
    t = four_tasks
    everything = api_client.get("/api/v1/tasks").json()["results"]
    assert {x["id"] for x in everything} == set(t.values())
    created = [x["created_at"] for x in everything]
    assert created == sorted(created, reverse=True)  # newest first

    assert ids(api_client.get("/api/v1/tasks?status=RUNNING")) == {t["running"]}
    assert ids(api_client.get("/api/v1/tasks?status=pending")) == {t["pending"], t["other"]}
    assert ids(api_client.get("/api/v1/tasks?status=CANCELED")) == {t["canceled"]}
    assert ids(api_client.get("/api/v1/tasks?status=SUCCESS")) == set()
    assert ids(api_client.get("/api/v1/tasks?datasource=other")) == {t["other"]}
    assert ids(api_client.get("/api/v1/tasks?datasource=wiki&status=PENDING")) == {t["pending"]}
    assert ids(api_client.get("/api/v1/tasks?type=index_parallel")) == set(t.values())
    assert ids(api_client.get("/api/v1/tasks?type=kill")) == set()

    bad = api_client.get("/api/v1/tasks?status=DONE")
    assert bad.status_code == 400 and bad.json()["field"] == "status"
    assert "RUNNING" in bad.json()["message"]


def test_task_list_pages_by_cursor_newest_first(api_client, four_tasks):
    first = api_client.get("/api/v1/tasks?limit=2").json()
    assert len(first["results"]) == 2 and first["next"]
    second = api_client.get(first["next"]).json()
    assert len(second["results"]) == 2 and second["next"] is None
    pages = first["results"] + second["results"]
    assert {t["id"] for t in pages} == set(four_tasks.values())
    created = [t["created_at"] for t in pages]
    assert created == sorted(created, reverse=True)
    assert [t["id"] for t in all_pages(api_client, "/api/v1/tasks?limit=3")] == [
        t["id"] for t in pages
    ]


LISTS = ["/api/v1/tasks", "/api/v1/locks", "/api/v1/datasources"]


@pytest.mark.parametrize("path", LISTS)
def test_a_bad_cursor_is_a_404_naming_it(api_client, four_tasks, path):
    response = api_client.get(f"{path}?cursor=not-a-cursor")
    assert response.status_code == 404 and response.json()["field"] == "cursor"


@pytest.mark.parametrize(
    "path", ["/api/v1/tasks", "/api/v1/locks", "/api/v1/datasources/wiki/commits"]
)
@pytest.mark.parametrize("position", ["yesterday", "2024-13-45", "1e3", "9" * 30])
def test_a_forged_cursor_position_is_a_404_or_a_page(api_client, claimed_task, path, position):
    """A cursor that decodes but whose position is no value of the ordering field
    (a time, a commit sequence) is a 404 naming it, not a 500; a value however
    far off gives a page."""
    services.lock_acquire(
        task=claimed_task("wiki"), interval=Interval.parse("2024-01-01/2024-01-02")
    )
    cursor = base64.b64encode(urlencode({"p": position}).encode()).decode()
    response = api_client.get(f"{path}?{urlencode({'cursor': cursor})}")
    assert response.status_code in (200, 404), response.content
    if response.status_code == 404:
        assert response.json()["field"] == "cursor"


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("limit", ["abc", "-1", "0", "9999"])
def test_a_bad_list_limit_is_a_400(api_client, path, limit):
    response = api_client.get(f"{path}?limit={limit}")
    assert response.status_code == 400 and response.json()["field"] == "limit"


def test_task_list_item_shape(api_client, four_tasks):
    task = Task.objects.get(id=four_tasks["running"])
    [item] = api_client.get("/api/v1/tasks?status=RUNNING").json()["results"]
    assert item == {
        "id": task.id,
        "type": "index_parallel",
        "datasource": "wiki",
        "status": "RUNNING",
        "priority": 50,
        "group_id": task.id,
        "created_at": api_time(task.created_at),
        "started_at": api_time(task.started_at),
        "ended_at": None,
        "phase": "starting",
        "progress": 0.0,
        "error": "",
    }


def test_task_detail(api_client, inline_spec):
    spec = inline_spec("wiki", context={"priority": 60})
    created = api_client.post("/api/v1/tasks", spec, format="json")
    assert created.status_code == 201
    task_id = created.json()["task"]
    assert created.json() == {"task": task_id}
    assert task_id.startswith("index_parallel_wiki_")
    task = Task.objects.get(id=task_id)

    assert api_client.get(f"/api/v1/tasks/{task_id}").json() == {
        "id": task_id,
        "type": "index_parallel",
        "datasource": "wiki",
        "status": "PENDING",
        "priority": 60,
        "group_id": task_id,
        "created_at": api_time(task.created_at),
        "started_at": None,
        "ended_at": None,
        "phase": "",
        "progress": 0.0,
        "error": "",
        "spec": spec,
        "report": {},
        "waiting_on": [],
        "heartbeat_at": None,
        "worker": "",
        "cancel_requested": False,
        "stopping": "",
    }
    assert task.submitted_by.get_username() == "alice"


def test_cancel_of_a_pending_task(api_client, inline_spec):
    task_id = api_client.post("/api/v1/tasks", inline_spec("wiki"), format="json").json()["task"]

    response = api_client.post(f"/api/v1/tasks/{task_id}/cancel")

    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "CANCELED"
    assert body["error"] == "canceled by alice before it started"
    assert body["cancel_requested"] is True and body["ended_at"] is not None
    assert Task.objects.get(id=task_id).status == TaskStatus.CANCELED
    again = api_client.post(f"/api/v1/tasks/{task_id}/cancel")
    assert again.status_code == 409
    message = f"task {task_id} already ended (CANCELED)"
    assert again.json() == {"error": message, "field": None, "message": message}


def test_cancel_of_a_running_task_only_asks_it_to_stop(api_client, claimed_task):
    task = claimed_task("wiki")
    body = api_client.post(f"/api/v1/tasks/{task.id}/cancel").json()
    assert body["status"] == "RUNNING" and body["cancel_requested"] is True
    assert services.task_heartbeat(task_id=task.id).cancel_requested is True


# --- locks -------------------------------------------------------------------------------


def test_locks_list(api_client, claimed_task):
    day = Interval.parse("2024-01-01/2024-01-02")
    low = claimed_task("wiki", context={"priority": 10})
    low_lock = services.lock_acquire(task=low, interval=day)
    high = claimed_task("wiki")
    high_lock = services.lock_acquire(task=high, interval=day)  # 50 > 10: revokes low's lock
    other = claimed_task("other")
    other_lock = services.lock_acquire(
        task=other, interval=Interval.parse("2024-02-01/2024-02-02"), lock_type="SHARED"
    )

    def expected(lock, task, **changes):
        lock.refresh_from_db()
        out = {
            "id": lock.id,
            "datasource": task.datasource,
            "interval": str(lock.interval),
            "type": lock.type,
            "granularity": "TIME_CHUNK",
            "version": lock.version,
            "priority": task.priority,
            "partition": None,
            "group_id": task.id,
            "task": task.id,
            "task_status": "RUNNING",
            "revoked": False,
            "revoked_by": None,
            "created_at": api_time(lock.created_at),
        }
        out.update(changes)
        return out

    page = api_client.get("/api/v1/locks").json()
    assert (page["next"], page["previous"]) == (None, None)
    everything = page["results"]
    assert everything == [  # in the order they were granted
        expected(low_lock, low, revoked=True, revoked_by=high.id, priority=10),
        expected(high_lock, high),
        expected(
            other_lock,
            other,
            type="SHARED",
            interval="2024-02-01T00:00:00.000Z/2024-02-02T00:00:00.000Z",
        ),
    ]
    assert high_lock.version > low_lock.version
    assert all_pages(api_client, "/api/v1/locks?limit=1") == everything
    assert api_client.get("/api/v1/locks?datasource=other").json()["results"] == [everything[2]]
    assert api_client.get("/api/v1/locks?datasource=nothing").json()["results"] == []


def test_locks_granted_at_the_same_instant_page_by_id(api_client, claimed_task):
    task = claimed_task("wiki", context={"priority": 10})
    for day in range(1, 6):
        services.lock_acquire(
            task=task, interval=Interval.parse(f"2024-01-0{day}/2024-01-0{day + 1}")
        )
    TaskLock.objects.update(created_at=datetime(2024, 1, 1, tzinfo=UTC))

    first = api_client.get("/api/v1/locks?limit=2").json()
    assert len(first["results"]) == 2 and first["next"]
    assert [x["id"] for x in all_pages(api_client, "/api/v1/locks?limit=2")] == sorted(
        TaskLock.objects.values_list("id", flat=True)
    )


# --- dataSources, segments, timeline, commits ----------------------------------------------


@pytest.fixture
def wiki(publish):
    """Two days at v1 (2 + 1 partitions); v2 rewrites the first 6 hours of day 1
    (day 1's v1 segments become partially overshadowed); v3 rewrites day 2
    (day 2's v1 segment becomes fully overshadowed)."""
    p1 = publish(
        "wiki", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 2, "2024-01-02/2024-01-03": 1}
    )
    p2 = publish(
        "wiki", "2024-01-01T00/2024-01-01T06", {"2024-01-01T00/2024-01-01T06": 1}, rows=3, size=300
    )
    p3 = publish("wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1}, rows=7, size=700)
    assert p1.version < p2.version < p3.version
    s = {
        "day1_p0": seg_id("wiki", "2024-01-01/2024-01-02", p1.version, 0),
        "day1_p1": seg_id("wiki", "2024-01-01/2024-01-02", p1.version, 1),
        "day2_v1": seg_id("wiki", "2024-01-02/2024-01-03", p1.version, 0),
        "hours_v2": seg_id("wiki", "2024-01-01T00/2024-01-01T06", p2.version, 0),
        "day2_v3": seg_id("wiki", "2024-01-02/2024-01-03", p3.version, 0),
    }
    assert p1.segment_ids == [s["day1_p0"], s["day1_p1"], s["day2_v1"]]
    assert p2.segment_ids == [s["hours_v2"]] and p3.segment_ids == [s["day2_v3"]]
    return {"p": (p1, p2, p3), "s": s}


def segment_json(
    ds,
    interval,
    published,
    partition,
    *,
    core,
    rows,
    size,
    status,
    visible,
    overshadowed_by=(),
    used=True,
    complete=True,
):
    return {
        "id": seg_id(ds, interval, published.version, partition),
        "interval": iv(interval),
        "version": published.version,
        "partition": partition,
        "minor_version": 0,
        "root_partitions": [partition],
        "atomic_update_group": [partition],
        "core_partitions": core,
        "tombstone": False,
        "shard_spec": {"type": "numbered", "partitionNum": partition, "partitions": core},
        "size_bytes": size,
        "num_rows": rows,
        "location": f"/deep/{ds}/{interval.replace('/', '_')}/{partition}",
        "used": used,
        "created_by": published.task_id,
        "upgraded_from": "",
        "schema": {},
        "compaction_state": None,
        "status": status,
        "complete": complete,
        "visible_intervals": [iv(v) for v in visible],
        "overshadowed_by": list(overshadowed_by),
    }


def test_segments_show_visible_partial_and_overshadowed(api_client, wiki):
    p1, p2, p3 = wiki["p"]
    s = wiki["s"]
    day1, day2, hours = (
        "2024-01-01/2024-01-02",
        "2024-01-02/2024-01-03",
        "2024-01-01T00/2024-01-01T06",
    )
    expected = [
        segment_json(
            "wiki", hours, p2, 0, core=1, rows=3, size=300, status="visible", visible=[hours]
        ),
        segment_json(
            "wiki",
            day1,
            p1,
            0,
            core=2,
            rows=10,
            size=1000,
            status="partial",
            visible=["2024-01-01T06/2024-01-02"],
            overshadowed_by=[s["hours_v2"]],
        ),
        segment_json(
            "wiki",
            day1,
            p1,
            1,
            core=2,
            rows=10,
            size=1000,
            status="partial",
            visible=["2024-01-01T06/2024-01-02"],
            overshadowed_by=[s["hours_v2"]],
        ),
        segment_json(
            "wiki",
            day2,
            p1,
            0,
            core=1,
            rows=10,
            size=1000,
            status="overshadowed",
            visible=[],
            overshadowed_by=[s["day2_v3"]],
        ),
        segment_json(
            "wiki", day2, p3, 0, core=1, rows=7, size=700, status="visible", visible=[day2]
        ),
    ]

    assert api_client.get("/api/v1/datasources/wiki/segments").json()["results"] == expected
    assert api_client.get("/api/v1/datasources/wiki/segments?status=visible").json()["results"] == [
        expected[0],
        expected[4],
    ]
    assert (
        api_client.get("/api/v1/datasources/wiki/segments?status=partial").json()["results"]
        == expected[1:3]
    )
    assert api_client.get("/api/v1/datasources/wiki/segments?status=overshadowed").json()[
        "results"
    ] == [expected[3]]
    assert (
        api_client.get(f"/api/v1/datasources/wiki/segments?interval={day2}").json()["results"]
        == expected[3:]
    )
    assert api_client.get("/api/v1/datasources/wiki/segments?used=false").json()["results"] == []
    assert (
        api_client.get("/api/v1/datasources/wiki/segments?used=all").json()["results"] == expected
    )
    # Pages of two, by cursor, in the same order.
    first = api_client.get("/api/v1/datasources/wiki/segments?limit=2").json()
    assert first["results"] == expected[:2] and first["next"]
    assert all_pages(api_client, "/api/v1/datasources/wiki/segments?limit=2") == expected

    for query, field in [
        ("status=hidden", "status"),
        ("used=maybe", "used"),
        ("interval=2024-01-01", "interval"),
    ]:
        bad = api_client.get(f"/api/v1/datasources/wiki/segments?{query}")
        assert bad.status_code == 400 and bad.json()["field"] == field


def piece(interval: str, segment: str, version: str, partition: int = 0) -> dict:
    return {
        "interval": iv(interval),
        "segment": segment,
        "version": version,
        "partition": partition,
        "tombstone": False,
    }


def test_timeline_now_in_an_interval_and_as_of_a_commit(api_client, wiki):
    p1, p2, p3 = wiki["p"]
    s = wiki["s"]

    now = api_client.get("/api/v1/datasources/wiki/timeline").json()
    assert now == {
        "datasource": "wiki",
        "as_of": None,
        "pieces": [
            piece("2024-01-01T00/2024-01-01T06", s["hours_v2"], p2.version),
            piece("2024-01-01T06/2024-01-02", s["day1_p0"], p1.version, 0),
            piece("2024-01-01T06/2024-01-02", s["day1_p1"], p1.version, 1),
            piece("2024-01-02/2024-01-03", s["day2_v3"], p3.version),
        ],
    }
    clipped = api_client.get(
        "/api/v1/datasources/wiki/timeline?interval=2024-01-01T03/2024-01-01T12"
    ).json()
    assert clipped["pieces"] == [
        piece("2024-01-01T03/2024-01-01T06", s["hours_v2"], p2.version),
        piece("2024-01-01T06/2024-01-01T12", s["day1_p0"], p1.version, 0),
        piece("2024-01-01T06/2024-01-01T12", s["day1_p1"], p1.version, 1),
    ]
    first = api_client.get(f"/api/v1/datasources/wiki/timeline?as_of={p1.commit_seq}").json()
    assert first == {
        "datasource": "wiki",
        "as_of": p1.commit_seq,
        "pieces": [
            piece("2024-01-01/2024-01-02", s["day1_p0"], p1.version, 0),
            piece("2024-01-01/2024-01-02", s["day1_p1"], p1.version, 1),
            piece("2024-01-02/2024-01-03", s["day2_v1"], p1.version),
        ],
    }
    second = api_client.get(f"/api/v1/datasources/wiki/timeline?as_of={p2.commit_seq}").json()
    assert second["pieces"] == [
        piece("2024-01-01T00/2024-01-01T06", s["hours_v2"], p2.version),
        piece("2024-01-01T06/2024-01-02", s["day1_p0"], p1.version, 0),
        piece("2024-01-01T06/2024-01-02", s["day1_p1"], p1.version, 1),
        piece("2024-01-02/2024-01-03", s["day2_v1"], p1.version),
    ]
    before_anything = api_client.get(
        f"/api/v1/datasources/wiki/timeline?as_of={p1.commit_seq - 1}"
    ).json()
    assert before_anything["pieces"] == []

    for query, field in [("as_of=yesterday", "as_of"), ("interval=soon", "interval")]:
        bad = api_client.get(f"/api/v1/datasources/wiki/timeline?{query}")
        assert bad.status_code == 400 and bad.json()["field"] == field


def test_commits(api_client, wiki):
    p1, p2, p3 = wiki["p"]
    entries = {e.seq: e for e in CommitLogEntry.objects.all()}

    def commit(published):
        return {
            "seq": published.commit_seq,
            "datasource": "wiki",
            "created_at": api_time(entries[published.commit_seq].created_at),
            "kind": "publish",
            "actor": published.task_id,
            "task": published.task_id,
            "added": published.segment_ids,
            "removed": [],
            "note": "",
        }

    assert api_client.get("/api/v1/datasources/wiki/commits").json()["results"] == [
        commit(p3),
        commit(p2),
        commit(p1),
    ]
    assert all_pages(api_client, "/api/v1/datasources/wiki/commits?limit=1") == [
        commit(p3),
        commit(p2),
        commit(p1),
    ]


def test_datasources(api_client, wiki, claimed_task):
    claimed_task("wiki")  # an active task of wiki
    assert api_client.get("/api/v1/datasources").json() == {
        "next": None,
        "previous": None,
        "results": [
            {
                "name": "wiki",
                "segments": 5,  # used segments, overshadowed ones included
                "rows": 10 + 10 + 10 + 3 + 7,
                "size_bytes": 1000 * 3 + 300 + 700,
                "interval": "2024-01-01T00:00:00.000Z/2024-01-03T00:00:00.000Z",
                "active_tasks": 1,
            }
        ],
    }


def test_datasources_page_by_name_in_code_point_order(api_client, claimed_task):
    # Names a collation such as PostgreSQL's en_US (case and punctuation count
    # last) orders otherwise: pages follow code point order, as the cursor does.
    names = ["wikia", "wiki_a", "Wiki", "wiki-b"]
    for name in names:
        services.lock_acquire(
            task=claimed_task(name), interval=Interval.parse("2024-01-01/2024-01-02")
        )

    first = api_client.get("/api/v1/datasources?limit=3").json()
    assert [x["name"] for x in first["results"]] == ["Wiki", "wiki-b", "wiki_a"]
    assert [x["name"] for x in all_pages(api_client, first["next"])] == ["wikia"]
    assert [x["name"] for x in all_pages(api_client, "/api/v1/datasources?limit=1")] == sorted(
        names
    )
    assert all(x["segments"] == 0 and x["interval"] is None for x in first["results"])


def test_mark_unused_and_used(api_client, wiki):
    p1, p2, p3 = wiki["p"]
    s = wiki["s"]
    base = "/api/v1/datasources/wiki"

    response = api_client.post(
        f"{base}/mark-unused", {"segment_ids": [s["hours_v2"]]}, format="json"
    )

    assert response.status_code == 200
    seq = response.json()["commit"]
    assert response.json() == {"changed": 1, "commit": seq}
    assert seq > p3.commit_seq
    statuses = {x["id"]: x["status"] for x in api_client.get(f"{base}/segments").json()["results"]}
    assert statuses == {
        s["day1_p0"]: "visible",
        s["day1_p1"]: "visible",
        s["day2_v1"]: "overshadowed",
        s["day2_v3"]: "visible",
    }
    [unused] = api_client.get(f"{base}/segments?used=false").json()["results"]
    assert (unused["id"], unused["used"], unused["status"], unused["complete"]) == (
        s["hours_v2"],
        False,
        "unused",
        False,
    )
    assert unused["visible_intervals"] == [] and unused["overshadowed_by"] == []
    latest = api_client.get(f"{base}/commits").json()["results"][0]
    assert {k: latest[k] for k in ("seq", "kind", "actor", "task", "added", "removed")} == {
        "seq": seq,
        "kind": "mark_unused",
        "actor": "alice",
        "task": None,
        "added": [],
        "removed": [s["hours_v2"]],
    }
    # Time travel still sees the segment as it was.
    assert s["hours_v2"] in {
        p["segment"]
        for p in api_client.get(f"{base}/timeline?as_of={p3.commit_seq}").json()["pieces"]
    }
    assert s["hours_v2"] not in {
        p["segment"] for p in api_client.get(f"{base}/timeline").json()["pieces"]
    }

    response = api_client.post(
        f"{base}/mark-used", {"interval": "2024-01-01T00/2024-01-01T06"}, format="json"
    )
    assert response.json()["changed"] == 1
    assert Segment.objects.get(id=s["hours_v2"]).used is True
    assert api_client.get(f"{base}/commits").json()["results"][0]["added"] == [s["hours_v2"]]

    # An interval marks the segments it contains: day 1's three, not day 2's.
    response = api_client.post(
        f"{base}/mark-unused", {"interval": "2024-01-01/2024-01-02"}, format="json"
    )
    assert response.json()["changed"] == 3
    assert set(Segment.objects.filter(used=False).values_list("id", flat=True)) == {
        s["hours_v2"],
        s["day1_p0"],
        s["day1_p1"],
    }
    commits_before = CommitLogEntry.objects.count()
    again = api_client.post(
        f"{base}/mark-unused", {"interval": "2024-01-01/2024-01-02"}, format="json"
    )
    assert again.json() == {"changed": 0, "commit": None}
    assert CommitLogEntry.objects.count() == commits_before

    for body in ({}, {"segment_ids": []}, {"interval": "last week"}):
        bad = api_client.post(f"{base}/mark-unused", body, format="json")
        assert bad.status_code == 400, body
    assert CommitLogEntry.objects.count() == commits_before


# --- bounded query counts ------------------------------------------------------------------


@pytest.fixture
def two_sized_datasources(publish):
    """`small` (5 days) and `big` (50 days), each with a partially overshadowed
    day (an HOUR rewrite) and two fully overshadowed days."""
    from datetime import date, timedelta

    def build(name: str, days: int) -> int:
        first = date(2024, 1, 1)
        chunks = {f"{first + timedelta(d)}/{first + timedelta(d + 1)}": 1 for d in range(days)}
        publish(name, f"{first}/{first + timedelta(days)}", chunks)
        publish(name, "2024-01-02T00/2024-01-02T01", {"2024-01-02T00/2024-01-02T01": 1})
        publish(
            name, "2024-01-03/2024-01-05", {"2024-01-03/2024-01-04": 1, "2024-01-04/2024-01-05": 1}
        )
        return days + 3

    return {"small": build("small", 5), "big": build("big", 50)}


@pytest.mark.parametrize("endpoint", ["segments", "timeline", "segments?status=partial", "commits"])
def test_query_counts_do_not_grow_with_segments(
    api_client, two_sized_datasources, endpoint, django_assert_max_num_queries
):
    counts = {}
    for name, segments in two_sized_datasources.items():
        selectors.timeline_caches_clear()  # count the timeline build too
        with CaptureQueriesContext(connection) as ctx:
            response = api_client.get(f"/api/v1/datasources/{name}/{endpoint}")
        assert response.status_code == 200
        if endpoint == "segments":
            assert len(response.json()["results"]) == segments
            assert {x["status"] for x in response.json()["results"]} == {
                "visible",
                "partial",
                "overshadowed",
            }
        counts[name] = len(ctx.captured_queries)
    assert counts["big"] == counts["small"], counts

    selectors.timeline_caches_clear()
    with django_assert_max_num_queries(6):
        api_client.get(f"/api/v1/datasources/big/{endpoint}")


# --- OpenAPI -------------------------------------------------------------------------------


def test_openapi_schema(api_client):
    response = api_client.get("/api/schema/?format=json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.")
    assert doc["info"]["title"] == "Strata API"
    paths = {p.rstrip("/") for p in doc["paths"]}
    assert paths >= {
        "/api/v1/tasks",
        "/api/v1/tasks/{id}",
        "/api/v1/tasks/{id}/cancel",
        "/api/v1/locks",
        "/api/v1/datasources",
        "/api/v1/datasources/{name}/segments",
        "/api/v1/datasources/{name}/timeline",
        "/api/v1/datasources/{name}/commits",
        "/api/v1/datasources/{name}/mark-unused",
        "/api/v1/datasources/{name}/mark-used",
    }
    tasks = next(v for k, v in doc["paths"].items() if k.rstrip("/") == "/api/v1/tasks")
    assert {"get", "post"} <= set(tasks)
    params = {p["name"] for p in tasks["get"].get("parameters", [])}
    assert {"status", "datasource", "type"} <= params


def test_every_api_list_is_documented_as_a_cursor_page(api_client):
    doc = api_client.get("/api/schema/?format=json").json()
    pages = set()
    for path, item in doc["paths"].items():
        if not path.startswith("/api/v1/") or "get" not in item:
            continue
        get = item["get"]
        ok = get["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok.get("type") != "array", f"{path} is a bare list"
        if ok.get("$ref", "").split("/")[-1].startswith("Paginated"):
            pages.add(path)
            assert {"cursor", "limit"} <= {p["name"] for p in get["parameters"]}, path
            assert {"400", "404"} <= set(get["responses"]), path
    assert pages == {
        "/api/v1/tasks",
        "/api/v1/locks",
        "/api/v1/segments",
        "/api/v1/datasources",
        "/api/v1/datasources/{name}/segments",
        "/api/v1/datasources/{name}/commits",
    }
