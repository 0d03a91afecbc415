"""The published OpenAPI contract is true: schemathesis (the CLI, from PyPI) runs
every phase (examples, coverage, fuzzing, stateful) with all of its checks over
the whole schema of a live server (REST API, Druid-compatible endpoints, SQL),
authenticated as an operator, and the test fails on any failure it reports.

The server is pytest-django's live server, in this process, on the test
PostgreSQL database. Tasks that generated specs submit are recorded PENDING but
never queued (the `no_enqueue` fixture), so no Spark work
starts and nothing outlives the test.

The database holds one dataSource in every state the console draws
(tests/console_states.py: visible, overshadowed, partial, tombstoned, unused
segments; finished, running and waiting tasks; held locks), published through
the services, and every `{name}` / `{datasource}` path parameter is that
dataSource's name: otherwise the per-dataSource operations (segments, timeline,
commits, markUsed / markUnused, the Coordinator's metadata) only ever answer 404
and their shapes go unchecked. About half of the generated task ids, segment ids
and intervals are its own (schemathesis dictionaries), so cancel, shutdown,
reports and marking reach real objects too. The run's requests change that
dataSource and its tasks as they go, as a client's would.

STRATA_CONTRACT_EXAMPLES (default 5) bounds the examples per operation; raise it
by hand for a longer run, e.g. STRATA_CONTRACT_EXAMPLES=100. The coverage phase
(boundary values of every field) of `POST /druid/indexer/v1/task` repeats that of
`POST /api/v1/tasks` (the same spec schema and validator) and is the slowest
part, so CI skips it there; STRATA_CONTRACT_FULL=1 runs it too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from metastore import services
from tests import console_states

EXAMPLES = int(os.environ.get("STRATA_CONTRACT_EXAMPLES", "5"))
FULL = os.environ.get("STRATA_CONTRACT_FULL", "") not in ("", "0")
SEED = os.environ.get("STRATA_CONTRACT_SEED", "20261123")

# Where a request that fits the schema can still be refused (400, naming the
# field) for what JSON Schema cannot say, a 400 to a schema-valid request is
# expected; everywhere else it is a failure. Each operation with its reason
# ("an interval": a date that exists, its start not after its end):
_MARK = "an interval; one of interval and segment_ids"
_DRUID_MARK = "an interval; exactly one of interval and segmentIds"
SEMANTIC_400 = {
    "api_v1_tasks_create": "a task spec: intervals, input roots, dataSources to read, "
    "granularities that divide",
    "druid_indexer_v1_task_create": "a task spec, as api_v1_tasks_create",
    "api_v1_query_create": "SQL text that parses, reads and names known tables",
    "druid_v2_sql_create": "SQL text, as api_v1_query_create",
    "druid_v2_create": "a native query: each field as Druid documents it for its queryType",
    "api_v1_datasources_mark_unused_create": _MARK,
    "api_v1_datasources_mark_used_create": _MARK,
    "druid_indexer_v1_datasources_markUnused_create": _DRUID_MARK,
    "druid_indexer_v1_datasources_markUsed_create": _DRUID_MARK,
    "druid_coordinator_v1_datasources_markUnused_create": _DRUID_MARK,
    "druid_coordinator_v1_datasources_markUsed_create": _DRUID_MARK,
    "druid_indexer_v1_activeLocks_create": "each policy's intervals",
    "druid_indexer_v1_lockedIntervals_v2_create": "each policy's intervals",
    "api_v1_datasources_segments_retrieve": "?interval=",
    "api_v1_datasources_timeline_retrieve": "?interval=",
    "druid_v2_datasource_retrieve": "?interval=",
    "druid_v2_datasources_dimensions_retrieve": "?interval=",
    "druid_v2_datasources_metrics_retrieve": "?interval=",
    "druid_indexer_v1_tasks_list": "?createdTimeInterval=",
    "druid_indexer_v1_completeTasks_list": "?createdTimeInterval=",
    "druid_indexer_v1_runningTasks_list": "?createdTimeInterval=",
    "druid_indexer_v1_pendingTasks_list": "?createdTimeInterval=",
    "druid_indexer_v1_waitingTasks_list": "?createdTimeInterval=",
    # Auto-compaction configs are checked as the compact task they give (granularities,
    # aggregators, filters, partitionsSpec rules, ISO periods).
    "druid_coordinator_v1_config_compaction_create": "a compaction config",
    "api_v1_compaction_configs_create": "a compaction config",
    "druid_indexer_v1_supervisor_create": "an autocompact supervisor's config",
    "druid_coordinator_v1_config_compaction_taskslots_create": "a ratio from 0 to 1, max >= 1",
    "druid_coordinator_v1_config_compaction_cluster_create": "a ratio from 0 to 1, max >= 1",
    "druid_indexer_v1_compaction_config_cluster_create": "a ratio from 0 to 1, max >= 1",
    "druid_coordinator_v1_config_compaction_history_retrieve": "?dataSource=, ?interval=, ?count=",
    "druid_coordinator_v1_config_compaction_datasource_history_retrieve": "?interval=, ?count=",
    "druid_coordinator_v1_compaction_progress_retrieve": "?dataSource= is required",
    "druid_coordinator_v1_config_create": "none: kill settings come from the environment; "
    "it names the first field given",
    "druid_coordinator_v1_rules_create": "rules: periods and intervals that parse",
    "druid_coordinator_v1_rules_history_retrieve": "?interval=; interval and count not both",
    "druid_coordinator_v1_rules_datasource_history_retrieve": "?interval=; not with count",
}


def _toml_list(values) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def _config(token: str, seeded: Seeded) -> str:
    lines = [
        "[auth.openapi.tokenAuth]",
        f'api_key = "Token {token}"',
        "",
        # What the seeded database holds, for generated requests to name: the
        # dataSource in every path that names one; its segments, tasks and days
        # in about half of the requests that may name them.
        "[dictionaries.segments]",
        f"values = {_toml_list(seeded.segment_ids)}",
        "[dictionaries.tasks]",
        f"values = {_toml_list(seeded.task_ids)}",
        "[dictionaries.intervals]",
        f"values = {_toml_list(seeded.intervals)}",
        "",
        "[parameters]",
        f'"path.name" = "{seeded.datasource}"',
        f'"path.datasource" = "{seeded.datasource}"',
        *(
            f'"{key}" = {{ dictionary = "{name}", probability = 0.5 }}'
            for key, name in (
                ("path.id", "tasks"),
                ("path.task_id", "tasks"),
                ("query.interval", "intervals"),
                ("body.interval", "intervals"),
                ("body.segment_ids[*]", "segments"),
                ("body.segmentIds[*]", "segments"),
            )
        ),
        "",
    ]
    # One entry per setting: an entry's filters are alternatives (any matches).
    lines += [
        "[[operations]]",
        f"include-operation-id = {_toml_list(SEMANTIC_400)}",
        "[operations.checks.positive_data_acceptance]",
        'expected-statuses = ["2XX", "400", "403", "404", "409"]',
        "",
    ]
    if not FULL:
        lines += [
            "[[operations]]",
            'include-operation-id = "druid_indexer_v1_task_create"',
            "[operations.phases.coverage]",
            "enabled = false",
            "",
        ]
    return "\n".join(lines)


@pytest.fixture
def operator_token(user) -> str:
    from metastore.services import api_token_issue

    return api_token_issue(user=user)[1]


@dataclass
class Seeded:
    datasource: str
    segment_ids: list[str]
    task_ids: list[str]
    intervals: list[str]


@pytest.fixture
def seeded(user, inline_spec, no_enqueue) -> Seeded:
    from metastore.models import Task

    states = console_states.build(inline_spec, user=user)
    # Auto-compaction on for it: its config endpoints answer with a config, not 404.
    services.compaction_config_set(data={"dataSource": console_states.DS})
    return Seeded(
        datasource=console_states.DS,
        segment_ids=sorted({sid for ids in states.ids.values() for sid in ids}),
        task_ids=sorted(
            Task.objects.filter(datasource=console_states.DS).values_list("id", flat=True)
        ),
        intervals=["2024-03-01/2024-04-01", "2024-03-03/2024-03-04", "2024-03-08/2024-03-09"],
    )


# Over 100 operations at EXAMPLES each: minutes on a quiet machine, near a quarter
# of an hour on a loaded one; the limits leave room for that, never a verdict on speed.
@pytest.mark.timeout(2400)
def test_schemathesis_finds_no_failure_over_the_whole_schema(
    live_server, operator_token, seeded, tmp_path
):
    config = tmp_path / "schemathesis.toml"
    with urllib.request.urlopen(f"{live_server.url}/api/schema/?format=json", timeout=60) as r:
        paths = json.load(r)["paths"].values()
    operations = {op["operationId"] for item in paths for op in item.values()}
    stale = {*SEMANTIC_400, "druid_indexer_v1_task_create"} - operations
    assert not stale, f"exemptions for operations the schema no longer has: {stale}"
    config.write_text(_config(operator_token, seeded))
    binary = Path(sys.executable).parent / "schemathesis"
    argv = [
        str(binary),
        "--config-file",
        str(config),
        "--no-color",
        "run",
        f"{live_server.url}/api/schema/",
        "--checks",
        "all",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        SEED,
        "--workers",
        "1",
        "--request-timeout",
        "60",
        "--report",
        "junit",
        "--report-dir",
        str(tmp_path / "report"),
    ]
    started = time.monotonic()
    run = subprocess.run(
        argv, capture_output=True, text=True, timeout=2100, cwd=tmp_path, check=False
    )
    took = time.monotonic() - started
    output = run.stdout + run.stderr
    print(output[-4000:])
    print(f"schemathesis took {took:.1f} s")
    assert "Operations:" in output, output[-4000:]
    assert run.returncode == 0, f"schemathesis reported failures:\n{output[-20000:]}"
    # The seeded dataSource is what the per-dataSource operations find. Deleting
    # its compaction config succeeds once; every later request gets the 404 Druid
    # documents, which schemathesis reports as missing test data.
    missing = re.search(r"Missing test data:[^\n]*\n\s*\n(.*?)\n\s*\n", output, re.S)
    listed = {line.strip(" -") for line in missing.group(1).splitlines()} if missing else set()
    assert listed <= {"DELETE /druid/coordinator/v1/config/compaction/{datasource}"}, output[-4000:]


def test_a_spec_whose_input_source_type_is_an_object_is_a_400(api_client, inline_spec):
    """Found by the contract test: an object as a combining delegate's `type` was
    looked up as a dict key and answered 500."""
    spec = inline_spec("wiki")
    spec["spec"]["ioConfig"]["inputSource"] = {
        "type": "combining",
        "delegates": [{"type": {}, "dataSource": "x", "interval": "2024-01-01/2024-01-02"}],
    }
    for url in ("/api/v1/tasks", "/druid/indexer/v1/task"):
        response = api_client.post(url, spec, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["field"] == "spec.ioConfig.inputSource.delegates[0].type"


def test_a_taken_task_id_is_a_409(api_client, inline_spec, no_enqueue):
    spec = {**inline_spec("wiki"), "id": "my-task"}
    assert api_client.post("/api/v1/tasks", spec, format="json").status_code == 201
    again = api_client.post("/api/v1/tasks", spec, format="json")
    assert again.status_code == 409
    assert again.json()["field"] == "id" and "taken" in again.json()["message"]


def test_every_request_body_is_required_and_a_post_without_one_is_a_400(
    api_client, publish, no_enqueue
):
    """Found by the contract test: the schema left request bodies optional, while
    every view refuses a POST without one."""
    publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    schema = api_client.get("/api/schema/?format=json").json()
    bodies = {
        path.replace("{name}", "wiki").replace("{datasource}", "wiki"): operation["requestBody"]
        for path, item in schema["paths"].items()
        for operation in item.values()
        if "requestBody" in operation
    }
    assert len(bodies) >= 10
    for path, body in bodies.items():
        assert body.get("required") is True, path
        response = api_client.post(path)
        assert response.status_code == 400, (path, response.content)


def test_segment_ids_that_are_not_strings_are_a_400(api_client, publish):
    """Found by the contract test: DRF's CharField took the number 5 as "5"."""
    published = publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    for body in ({"segment_ids": [5]}, {"segment_ids": [published.segment_ids[0], True]}):
        response = api_client.post("/api/v1/datasources/wiki/mark-unused", body, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["field"].startswith("segment_ids")
    assert (
        api_client.post(
            "/api/v1/datasources/wiki/mark-unused", {"interval": 20240101}, format="json"
        ).json()["field"]
        == "interval"
    )


def test_druid_mark_reads_a_null_field_as_an_absent_one(api_client, publish):
    """Found by the contract test: the schema did not allow the nulls that Druid's
    payload (read by Jackson) and Strata both take as absent."""
    published = publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    url = "/druid/indexer/v1/datasources/wiki/markUnused"
    body = {"interval": None, "versions": None, "segmentIds": published.segment_ids}
    response = api_client.post(url, body, format="json")
    assert response.json() == {"numChangedSegments": 1}
    schema = api_client.get("/api/schema/?format=json").json()
    fields = schema["paths"][url.replace("wiki", "{datasource}")]["post"]["requestBody"]["content"][
        "application/json"
    ]["schema"]["properties"]
    assert all(field.get("nullable") for field in fields.values())


def test_an_empty_interval_parameter_is_all_time_as_the_schema_says(api_client, publish):
    """Found by the contract test: `?interval=` was read as absent while the
    schema's pattern refused it."""
    publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    schema = api_client.get("/api/schema/?format=json").json()
    for endpoint in ("segments", "timeline"):
        url = f"/api/v1/datasources/wiki/{endpoint}"
        (param,) = [
            p
            for p in schema["paths"][url.replace("wiki", "{name}")]["get"]["parameters"]
            if p["name"] == "interval"
        ]
        assert re.search(param["schema"]["pattern"], "")
        assert api_client.get(f"{url}?interval=").json() == api_client.get(url).json()


def test_a_druid_task_status_id_with_a_nul_is_a_400_as_the_schema_says(api_client):
    """Found by the contract test: the schema allowed any string, but no JSON body
    may hold a NUL (PostgreSQL cannot store it)."""
    schema = api_client.get("/api/schema/?format=json").json()
    body = schema["paths"]["/druid/indexer/v1/taskStatus"]["post"]["requestBody"]
    pattern = body["content"]["application/json"]["schema"]["items"]["pattern"]
    assert re.search(pattern, "a task") and not re.search(pattern, "a\x00task")
    response = api_client.post("/druid/indexer/v1/taskStatus", ["a\x00task"], format="json")
    assert response.status_code == 400
    assert api_client.post("/druid/indexer/v1/taskStatus", ["a task"], format="json").json() == {}
