"""Druid's Overlord and Coordinator API (console/druid.py), checked against the
request and response examples of Druid's API reference ("Tasks API", "Data
management API", the Overlord's lock filter endpoints), on metastore state built
through the services; and a Druid user's script (post a spec file, poll the
status until it ends, print the report) against a real worker over HTTP."""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from metastore import services
from metastore.intervals import Interval
from metastore.models import Segment, Task, TaskStatus

pytestmark = pytest.mark.django_db

IDX = "/druid/indexer/v1"
COORD = "/druid/coordinator/v1"

# The keys of a task in Druid's documented task lists and `task/{id}/status`
# ("Get an array of tasks" sample response).
DOC_TASK_KEYS = {
    "id",
    "groupId",
    "type",
    "createdTime",
    "queueInsertionTime",
    "statusCode",
    "status",
    "runnerStatusCode",
    "duration",
    "location",
    "dataSource",
    "errorMsg",
}


def druid_time(dt) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + (f"{dt.microsecond // 1000:03d}Z")


def doc_submit_spec(input_dir) -> dict:
    """The "Submit a task" sample request of Druid's Tasks API, with its local input
    pointed at the test's input root and explicit dimensions in place of
    `useSchemaDiscovery` (schema discovery is section 1 of the issue, not this shim)."""
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "wikipedia_auto",
                "timestampSpec": {"column": "time", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["channel", "page"]},
                "metricsSpec": [],
                "granularitySpec": {
                    "type": "uniform",
                    "segmentGranularity": "day",
                    "queryGranularity": "none",
                    "intervals": ["2015-09-12/2015-09-13"],
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(input_dir), "filter": "wiki*.json"},
                "inputFormat": {"type": "json"},
                "appendToExisting": False,
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
    }


WIKI_ROWS = [
    {
        "time": "2015-09-12T00:46:58.771Z",
        "channel": "#en.wikipedia",
        "page": "Talk:Oswald Tilghman",
    },
    {"time": "2015-09-12T00:47:00.496Z", "channel": "#ca.wikipedia", "page": "Rallicula"},
    {"time": "2015-09-12T00:47:05.474Z", "channel": "#en.wikipedia", "page": "Peremptory norm"},
]


@pytest.fixture
def wiki_input(strata_dirs):
    base = strata_dirs.input_root / "quickstart-tutorial"
    base.mkdir(exist_ok=True)
    (base / "wikiticker-sample.json").write_text("\n".join(json.dumps(r) for r in WIKI_ROWS) + "\n")
    return base


# --- tasks ------------------------------------------------------------------------------


def test_submit_a_task_answers_the_task_id(api_client, wiki_input):
    response = api_client.post(f"{IDX}/task", doc_submit_spec(wiki_input), format="json")

    assert response.status_code == 200, response.content
    # Sample response: {"task": "index_parallel_wikipedia_odofhkle_2023-06-23T21:07:28.226Z"}
    [task_id] = response.json().values()
    assert list(response.json()) == ["task"]
    task = Task.objects.get(id=task_id)
    assert (task.type, task.datasource, task.status) == (
        "index_parallel",
        "wikipedia_auto",
        TaskStatus.PENDING,
    )


def test_a_bad_spec_is_a_400_naming_the_field_and_creates_nothing(api_client, wiki_input):
    spec = doc_submit_spec(wiki_input)
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = "fortnight"

    response = api_client.post(f"{IDX}/task", spec, format="json")

    assert response.status_code == 400
    assert response.json()["field"] == "spec.dataSchema.granularitySpec.segmentGranularity"
    assert "error" in response.json()
    assert not Task.objects.exists()
    assert api_client.post(f"{IDX}/task", [1, 2], format="json").status_code == 400


def test_task_payload_and_status_have_druids_shapes(api_client, wiki_input):
    task_id = api_client.post(f"{IDX}/task", doc_submit_spec(wiki_input), format="json").json()[
        "task"
    ]
    task = Task.objects.get(id=task_id)

    payload = api_client.get(f"{IDX}/task/{task_id}").json()
    # "Get task payload": {"task": id, "payload": {type, id, groupId, spec, context, dataSource}}
    assert payload["task"] == task_id
    assert payload["payload"]["type"] == "index_parallel"
    assert payload["payload"]["id"] == task_id
    assert payload["payload"]["groupId"] == task_id
    assert payload["payload"]["dataSource"] == "wikipedia_auto"
    assert payload["payload"]["spec"] == doc_submit_spec(wiki_input)["spec"]
    assert payload["payload"]["context"] == {}

    status = api_client.get(f"{IDX}/task/{task_id}/status").json()
    # "Get task status" sample: {"task": id, "status": {id, groupId, type, createdTime, ...}}
    assert set(status) == {"task", "status"}
    assert set(status["status"]) == DOC_TASK_KEYS
    assert status["status"] == {
        "id": task_id,
        "groupId": task_id,
        "type": "index_parallel",
        "createdTime": druid_time(task.created_at),
        "queueInsertionTime": druid_time(task.created_at),
        "statusCode": "RUNNING",
        "status": "RUNNING",
        "runnerStatusCode": "PENDING",
        "duration": -1,
        "location": {"host": None, "port": -1, "tlsPort": -1},
        "dataSource": "wikipedia_auto",
        "errorMsg": None,
    }

    missing = api_client.get(f"{IDX}/task/no-such-task/status")
    assert missing.status_code == 404
    assert missing.json() == {"task": "no-such-task", "status": None}
    assert api_client.get(f"{IDX}/task/no-such-task").status_code == 404
    assert api_client.get(f"{IDX}/task/no-such-task/reports").status_code == 404


@pytest.fixture
def four_tasks(claimed_task, inline_spec):
    """One task in each of Druid's states: pending, waiting, running, complete (x2)."""
    pending = services.task_submit(spec=inline_spec("wikipedia_api"))
    running = claimed_task("wikipedia_api")
    waiting = claimed_task("wikipedia_auto")
    Task.objects.filter(id=waiting.id).update(status=TaskStatus.WAITING)
    done = claimed_task("wikipedia_api")
    services.task_finish(task_id=done.id, status=TaskStatus.SUCCESS)
    failed = claimed_task("wikipedia_api")
    services.task_finish(task_id=failed.id, status=TaskStatus.FAILED, error="boom")
    return {
        "pending": Task.objects.get(id=pending.id),
        "running": Task.objects.get(id=running.id),
        "waiting": Task.objects.get(id=waiting.id),
        "done": Task.objects.get(id=done.id),
        "failed": Task.objects.get(id=failed.id),
    }


def ids(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {t["id"] for t in response.json()}


def test_task_lists_by_state_and_the_shortcut_endpoints(api_client, four_tasks):
    t = four_tasks
    complete = {t["done"].id, t["failed"].id}

    assert ids(api_client.get(f"{IDX}/tasks")) == {x.id for x in t.values()}
    # The documented sample request, trailing slash included.
    today = timezone.now().date()
    query = (
        f"state=complete&datasource=wikipedia_api&createdTimeInterval={today}_"
        f"{today + timedelta(days=1)}&max=10&type=index_parallel"
    )
    assert ids(api_client.get(f"{IDX}/tasks/?{query}")) == complete
    assert len(api_client.get(f"{IDX}/tasks?state=complete&max=1").json()) == 1
    assert ids(api_client.get(f"{IDX}/tasks?state=running")) == {t["running"].id}
    assert ids(api_client.get(f"{IDX}/runningTasks")) == {t["running"].id}
    assert ids(api_client.get(f"{IDX}/pendingTasks")) == {t["pending"].id}
    assert ids(api_client.get(f"{IDX}/waitingTasks")) == {t["waiting"].id}
    assert ids(api_client.get(f"{IDX}/completeTasks")) == complete
    assert ids(api_client.get(f"{IDX}/completeTasks?datasource=wikipedia_auto")) == set()
    yesterday = today - timedelta(days=1)
    assert ids(api_client.get(f"{IDX}/tasks?createdTimeInterval={yesterday}_{today}")) == set()

    by_id = {x["id"]: x for x in api_client.get(f"{IDX}/tasks").json()}
    assert all(set(x) == DOC_TASK_KEYS for x in by_id.values())
    # Druid's waiting sample: statusCode RUNNING, runnerStatusCode WAITING.
    assert (by_id[t["waiting"].id]["statusCode"], by_id[t["waiting"].id]["runnerStatusCode"]) == (
        "RUNNING",
        "WAITING",
    )
    failed = by_id[t["failed"].id]
    assert (failed["status"], failed["runnerStatusCode"], failed["errorMsg"]) == (
        "FAILED",
        "NONE",
        "boom",
    )
    assert failed["duration"] >= 0

    bad = api_client.get(f"{IDX}/tasks?state=finished")
    assert bad.status_code == 400 and bad.json()["field"] == "state"
    bad = api_client.get(f"{IDX}/tasks?createdTimeInterval=yesterday")
    assert bad.status_code == 400 and bad.json()["field"] == "createdTimeInterval"


def test_bulk_task_status(api_client, four_tasks):
    t = four_tasks
    body = [t["done"].id, t["running"].id, "index_parallel_unknown"]

    response = api_client.post(f"{IDX}/taskStatus", body, format="json")

    # Sample response: {id: {"id", "status", "duration", "errorMsg", "location"}}; unknown ids left out.
    assert response.status_code == 200
    got = response.json()
    assert set(got) == {t["done"].id, t["running"].id}
    assert set(got[t["done"].id]) == {"id", "status", "duration", "errorMsg", "location"}
    assert got[t["done"].id]["status"] == "SUCCESS"
    assert got[t["running"].id]["status"] == "RUNNING"
    assert got[t["running"].id]["duration"] == -1
    assert got[t["running"].id]["location"] == {"host": "pytest", "port": -1, "tlsPort": -1}
    assert api_client.post(f"{IDX}/taskStatus", {"ids": []}, format="json").status_code == 400


def test_reports_have_the_ingestion_stats_and_errors_shape(api_client, four_tasks):
    done = four_tasks["done"]
    report = {
        "rowStats": {
            "processed": 39244,
            "processedWithError": 0,
            "thrownAway": 0,
            "unparseable": 0,
        },
        "ingest/task/bytes/processed": 17106256,
        "parseExceptionSamples": [],
        "segmentsPublished": 1,
    }
    services.task_report_update(task_id=done.id, report=report)

    got = api_client.get(f"{IDX}/task/{done.id}/reports").json()

    # The "Get task completion report" sample response.
    assert got == {
        "ingestionStatsAndErrors": {
            "type": "ingestionStatsAndErrors",
            "taskId": done.id,
            "payload": {
                "ingestionState": "COMPLETED",
                "unparseableEvents": {},
                "rowStats": {
                    "determinePartitions": {
                        "processed": 0,
                        "processedBytes": 0,
                        "processedWithError": 0,
                        "thrownAway": 0,
                        "unparseable": 0,
                    },
                    "buildSegments": {
                        "processed": 39244,
                        "processedBytes": 17106256,
                        "processedWithError": 0,
                        "thrownAway": 0,
                        "unparseable": 0,
                    },
                },
                "errorMsg": None,
                "segmentAvailabilityConfirmed": False,
                "segmentAvailabilityWaitTimeMs": 0,
                "phase": done.phase,
                "progress": 1.0,
                "segmentsPublished": 1,
            },
        }
    }
    # Live while running: the state and the heartbeat's phase and progress.
    running = four_tasks["running"]
    services.task_heartbeat(task_id=running.id, phase="phase 1", progress=0.25)
    live = api_client.get(f"{IDX}/task/{running.id}/reports").json()
    payload = live["ingestionStatsAndErrors"]["payload"]
    assert (payload["ingestionState"], payload["phase"], payload["progress"]) == (
        "BUILD_SEGMENTS",
        "phase 1",
        0.25,
    )
    pending = four_tasks["pending"]
    payload = api_client.get(f"{IDX}/task/{pending.id}/reports").json()["ingestionStatsAndErrors"]
    assert payload["payload"]["ingestionState"] == "NOT_STARTED"


def test_shutdown(api_client, four_tasks):
    running, pending, done = four_tasks["running"], four_tasks["pending"], four_tasks["done"]

    response = api_client.post(f"{IDX}/task/{running.id}/shutdown")
    assert response.status_code == 200
    assert response.json() == {"task": running.id}  # the documented sample response
    assert Task.objects.get(id=running.id).cancel_requested

    assert api_client.post(f"{IDX}/task/{pending.id}/shutdown").json() == {"task": pending.id}
    gone = api_client.get(f"{IDX}/task/{pending.id}/status").json()["status"]
    assert gone["status"] == "FAILED" and gone["errorMsg"].startswith("canceled")

    # "Cannot find task with ID or task is no longer running"
    assert api_client.post(f"{IDX}/task/{done.id}/shutdown").status_code == 404
    assert api_client.post(f"{IDX}/task/nope/shutdown").status_code == 404


# --- locks ------------------------------------------------------------------------------


@pytest.fixture
def locks(claimed_task):
    """An EXCLUSIVE lock at priority 50 and a compaction-priority SHARED lock on
    `wikipedia_api`; an APPEND lock (concurrent) on `wikipedia_auto`."""
    index = claimed_task("wikipedia_api")
    l1 = services.lock_acquire(task=index, interval=Interval.parse("2015-09-12/2015-09-13"))
    low = claimed_task("wikipedia_api", context={"priority": 25})
    l2 = services.lock_acquire(
        task=low, interval=Interval.parse("2015-09-14/2015-09-15"), lock_type="SHARED"
    )
    appender = claimed_task("wikipedia_auto", context={"useConcurrentLocks": True})
    l3 = services.lock_acquire(
        task=appender, interval=Interval.parse("2015-09-12/2015-09-13"), lock_type="APPEND"
    )
    return index, l1, low, l2, appender, l3


def test_active_locks_by_lock_filter_policy(api_client, locks):
    index, l1, low, l2, appender, l3 = locks
    body = [{"datasource": "wikipedia_api", "priority": 0}, {"datasource": "wikipedia_auto"}]

    response = api_client.post(f"{IDX}/activeLocks", body, format="json")

    assert response.status_code == 200
    got = response.json()["datasourceToLocks"]
    assert got["wikipedia_api"] == [
        {
            "granularity": "timeChunk",
            "type": "EXCLUSIVE",
            "groupId": index.id,
            "dataSource": "wikipedia_api",
            "interval": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
            "version": l1.version,
            "priority": 50,
            "revoked": False,
        },
        {
            "granularity": "timeChunk",
            "type": "SHARED",
            "groupId": low.id,
            "dataSource": "wikipedia_api",
            "interval": "2015-09-14T00:00:00.000Z/2015-09-15T00:00:00.000Z",
            "version": l2.version,
            "priority": 25,
            "revoked": False,
        },
    ]
    assert [lk["type"] for lk in got["wikipedia_auto"]] == ["APPEND"]

    # Priority and interval filters.
    only_high = api_client.post(
        f"{IDX}/activeLocks", [{"datasource": "wikipedia_api", "priority": 30}], format="json"
    ).json()["datasourceToLocks"]
    assert [lk["groupId"] for lk in only_high["wikipedia_api"]] == [index.id]
    in_interval = api_client.post(
        f"{IDX}/activeLocks",
        [{"datasource": "wikipedia_api", "intervals": ["2015-09-14/2015-09-20"]}],
        format="json",
    ).json()["datasourceToLocks"]
    assert [lk["groupId"] for lk in in_interval["wikipedia_api"]] == [low.id]

    # Druid answers an empty or missing body with a 400.
    assert api_client.post(f"{IDX}/activeLocks", [], format="json").status_code == 400
    bad = api_client.post(f"{IDX}/activeLocks", [{"priority": 1}], format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "[0].datasource"


def test_locked_intervals_v2(api_client, locks):
    body = [
        {"datasource": "wikipedia_api", "priority": 25},
        {"datasource": "wikipedia_auto", "priority": 0},
    ]

    got = api_client.post(f"{IDX}/lockedIntervals/v2", body, format="json").json()

    assert got == {
        "wikipedia_api": [
            "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z",
            "2015-09-14T00:00:00.000Z/2015-09-15T00:00:00.000Z",
        ],
        "wikipedia_auto": ["2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"],
    }
    # A compaction with concurrent locks is not blocked by APPEND locks.
    concurrent = [{"datasource": "wikipedia_auto", "context": {"useConcurrentLocks": True}}]
    assert api_client.post(f"{IDX}/lockedIntervals/v2", concurrent, format="json").json() == {}
    assert (
        api_client.post(
            f"{IDX}/lockedIntervals/v2",
            [{"datasource": "wikipedia_api", "priority": 51}],
            format="json",
        ).json()
        == {}
    )


# --- segments: mark used / unused, Coordinator metadata -----------------------------------


@pytest.fixture
def hour(publish):
    """wikipedia_hour: three HOUR segments at v1, then the 14:00 hour rewritten at v2
    (its v1 segment becomes fully overshadowed)."""
    hours = {f"2015-09-12T{h:02d}/2015-09-12T{h + 1:02d}": 1 for h in (4, 14, 16)}
    v1 = publish("wikipedia_hour", "2015-09-12/2015-09-13", hours)
    v2 = publish(
        "wikipedia_hour", "2015-09-12T14/2015-09-12T15", {"2015-09-12T14/2015-09-12T15": 1}
    )
    return v1, v2


def test_mark_unused_and_used_by_segment_ids_interval_and_versions(api_client, hour):
    v1, v2 = hour
    base = f"{IDX}/datasources/wikipedia_hour"

    # The documented sample: two segment ids -> {"numChangedSegments": 2}.
    body = {"segmentIds": [v1.segment_ids[2], v1.segment_ids[0]]}
    response = api_client.post(f"{base}/markUnused", body, format="json")
    assert response.status_code == 200
    assert response.json() == {"numChangedSegments": 2}
    assert set(Segment.objects.filter(used=False).values_list("id", flat=True)) == set(
        body["segmentIds"]
    )

    response = api_client.post(f"{base}/markUsed", body, format="json")
    assert response.json() == {"numChangedSegments": 2}

    # An interval with versions: only v1's segments wholly inside it.
    by_version = {
        "interval": "2015-09-12T03:00:00.000Z/2015-09-12T15:00:00.000Z",
        "versions": [v1.version],
    }
    assert api_client.post(f"{base}/markUnused", by_version, format="json").json() == {
        "numChangedSegments": 2
    }
    assert Segment.objects.get(id=v2.segment_ids[0]).used
    # The Coordinator's older path answers the same.
    response = api_client.post(
        f"{COORD}/datasources/wikipedia_hour/markUsed",
        {"interval": "2015-09-12/2015-09-13"},
        format="json",
    )
    assert response.json() == {"numChangedSegments": 2}
    assert not Segment.objects.filter(used=False).exists()

    for bad, field in [
        ({}, "interval"),
        ({"interval": "2015-09-12/2015-09-13", "segmentIds": ["x"]}, "interval"),
        ({"segmentIds": ["x"], "versions": ["v"]}, "versions"),
        ({"interval": "2015-09-12"}, "interval"),
        ({"segmentIds": "x"}, "segmentIds"),
    ]:
        response = api_client.post(f"{base}/markUnused", bad, format="json")
        assert response.status_code == 400, bad
        assert response.json()["field"] == field
    assert (
        api_client.post(f"{IDX}/datasources/nope/markUnused", body, format="json").status_code
        == 404
    )
    assert not Segment.objects.filter(used=False).exists()


def test_coordinator_metadata(api_client, hour, publish):
    v1, v2 = hour
    publish("wikipedia_api", "2015-09-12/2015-09-13", {"2015-09-12/2015-09-13": 1})
    overshadowed = v1.segment_ids[1]  # the 14:00 hour at v1

    assert api_client.get(f"{COORD}/metadata/datasources").json() == [
        "wikipedia_api",
        "wikipedia_hour",
    ]
    ids_ = api_client.get(f"{COORD}/metadata/datasources/wikipedia_hour/segments").json()
    assert ids_ == [v1.segment_ids[0], v1.segment_ids[1], v2.segment_ids[0], v1.segment_ids[2]]

    full = api_client.get(f"{COORD}/metadata/datasources/wikipedia_hour/segments?full").json()
    seg = Segment.objects.get(id=v1.segment_ids[0])
    assert full[0] == {
        "dataSource": "wikipedia_hour",
        "interval": "2015-09-12T04:00:00.000Z/2015-09-12T05:00:00.000Z",
        "version": v1.version,
        "loadSpec": {"type": "local", "path": seg.location},
        "dimensions": "",
        "metrics": "",
        "shardSpec": seg.shard_spec,
        "binaryVersion": 9,
        "size": 1000,
        "identifier": seg.id,
        "id": seg.id,
    }

    with_status = api_client.get(
        f"{COORD}/metadata/segments?includeOvershadowedStatus&datasources=wikipedia_hour"
    ).json()
    assert {s["dataSegment"]["id"]: s["overshadowed"] for s in with_status} == {
        v1.segment_ids[0]: False,
        overshadowed: True,
        v2.segment_ids[0]: False,
        v1.segment_ids[2]: False,
    }
    everything = api_client.get(f"{COORD}/metadata/segments").json()
    assert {s["dataSource"] for s in everything} == {"wikipedia_api", "wikipedia_hour"}
    assert len(everything) == 5
    with_full = api_client.get(f"{COORD}/metadata/datasources?full").json()
    assert [d["name"] for d in with_full] == ["wikipedia_api", "wikipedia_hour"]
    assert len(with_full[1]["segments"]) == 4
    assert api_client.get(f"{COORD}/metadata/datasources/nope/segments").status_code == 404


# --- authentication -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"{IDX}/tasks"),
        ("post", f"{IDX}/task"),
        ("post", f"{IDX}/taskStatus"),
        ("post", f"{IDX}/activeLocks"),
        ("get", f"{COORD}/metadata/datasources"),
        ("post", f"{IDX}/datasources/x/markUnused"),
    ],
)
def test_the_shim_refuses_anonymous_requests(client, method, path):
    response = getattr(client, method)(path, data={}, content_type="application/json")
    assert response.status_code in (401, 403)


def test_basic_auth_as_druid_clients_send_it(client, user):
    from conftest import TEST_PASSWORD

    token = base64.b64encode(f"{user.get_username()}:{TEST_PASSWORD}".encode()).decode()
    response = client.get(f"{IDX}/tasks", HTTP_AUTHORIZATION=f"Basic {token}")
    assert response.status_code == 200 and response.json() == []
    wrong = base64.b64encode(b"alice:wrong").decode()
    assert client.get(f"{IDX}/tasks", HTTP_AUTHORIZATION=f"Basic {wrong}").status_code in (401, 403)


def test_read_only_posts_are_marked_for_viewers():
    from console import druid

    for view in (druid.TaskStatusBulk, druid.ActiveLocks, druid.LockedIntervals):
        assert view.strata_role == "viewer"
    for view in (druid.TaskSubmit, druid.TaskShutdown, druid.MarkSegments):
        assert getattr(view, "strata_role", None) is None  # operators: the default rule


# --- a Druid user's script against a real worker --------------------------------------------


def druid_user_script(base_url: str, auth: str, spec_file, out: list[str], timeout_s=300) -> dict:
    """What a Druid user runs: post the spec file, poll the status until it is no
    longer RUNNING, print the report. Plain urllib, nothing of Strata's."""

    def call(method: str, path: str, body: bytes | None = None):
        req = urllib.request.Request(base_url + path, data=body, method=method)
        req.add_header("Authorization", auth)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    task_id = call("POST", "/druid/indexer/v1/task", spec_file.read_bytes())["task"]
    out.append(f"submitted {task_id}")
    deadline = time.monotonic() + timeout_s
    while True:
        status = call("GET", f"/druid/indexer/v1/task/{task_id}/status")["status"]
        if status["status"] != "RUNNING":
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{task_id} still {status}")
        time.sleep(0.5)
    out.append(f"{task_id} {status['status']} in {status['duration']} ms")
    report = call("GET", f"/druid/indexer/v1/task/{task_id}/reports")
    out.append(json.dumps(report, indent=2))
    return {"task": task_id, "status": status, "report": report}


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_druid_users_script_runs_a_spec_file_to_the_end(
    worker, live_server, user, wiki_input, tmp_path
):
    from conftest import TEST_PASSWORD

    spec_file = tmp_path / "wikipedia-index.json"
    spec_file.write_text(json.dumps(doc_submit_spec(wiki_input), indent=2))
    auth = "Basic " + base64.b64encode(f"{user.get_username()}:{TEST_PASSWORD}".encode()).decode()
    printed: list[str] = []

    result = druid_user_script(live_server.url, auth, spec_file, printed)

    print("\n".join(printed))
    assert result["status"]["status"] == "SUCCESS", result
    assert result["status"]["duration"] > 0
    payload = result["report"]["ingestionStatsAndErrors"]["payload"]
    assert payload["ingestionState"] == "COMPLETED"
    assert payload["rowStats"]["buildSegments"]["processed"] == len(WIKI_ROWS)
    assert payload["rowStats"]["buildSegments"]["unparseable"] == 0
    assert payload["errorMsg"] is None
    segments = Segment.objects.filter(datasource__name="wikipedia_auto", used=True)
    assert sum(s.num_rows for s in segments) == len(WIKI_ROWS)
