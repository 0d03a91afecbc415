"""A Python client generated from the published schema works: openapi-python-client
(from PyPI) generates one into a tmp dir from the live server's `/api/schema/`;
through it, a typed task spec is submitted, polled, listed and canceled.

The live server runs in this process; tasks are not queued (`no_enqueue`), so
the task stays PENDING until the client cancels it (no worker, no Spark)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from metastore.models import Task, TaskStatus


@pytest.fixture
def generated_client(live_server, tmp_path, monkeypatch):
    with urllib.request.urlopen(f"{live_server.url}/api/schema/?format=json", timeout=60) as r:
        (tmp_path / "schema.json").write_bytes(r.read())
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(
        [
            str(bin_dir / "openapi-python-client"),
            "generate",
            "--path",
            str(tmp_path / "schema.json"),
            "--output-path",
            str(tmp_path / "strata_client"),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Warning" not in run.stdout + run.stderr, run.stdout + run.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "strata_client" or m.startswith("strata_client.")]:
        del sys.modules[name]
    return importlib.import_module("strata_client")


def test_a_generated_client_submits_polls_lists_and_cancels_a_task(
    generated_client, live_server, user, inline_spec, no_enqueue
):
    from metastore.services import api_token_issue

    token = api_token_issue(user=user)[1]
    api = importlib.import_module("strata_client.api.api")
    models = importlib.import_module("strata_client.models")
    submit = importlib.import_module(f"{api.__name__}.api_v1_tasks_create")
    retrieve = importlib.import_module(f"{api.__name__}.api_v1_tasks_retrieve")
    listing = importlib.import_module(f"{api.__name__}.api_v1_tasks_list")
    cancel = importlib.import_module(f"{api.__name__}.api_v1_tasks_cancel_create")
    client = generated_client.AuthenticatedClient(
        base_url=live_server.url, token=token, prefix="Token", raise_on_unexpected_status=True
    )

    spec = models.IndexParallelTask.from_dict(inline_spec("wiki"))
    created = submit.sync(client=client, body=spec)
    assert isinstance(created, models.TaskCreated), created
    task_id = created.task
    assert Task.objects.get(id=task_id).status == TaskStatus.PENDING

    polled = retrieve.sync(task_id, client=client)
    assert isinstance(polled, models.TaskDetailOutput), polled
    assert (polled.id, polled.status.value, polled.datasource) == (task_id, "PENDING", "wiki")
    assert polled.spec["spec"]["dataSchema"]["dataSource"] == "wiki"

    page = listing.sync(client=client, status=models.ApiV1TasksListStatus.PENDING, limit=10)
    assert isinstance(page, models.PaginatedTaskListList), page
    assert [t.id for t in page.results] == [task_id] and page.next_ is None

    canceled = cancel.sync(task_id, client=client)
    assert isinstance(canceled, models.TaskDetailOutput), canceled
    assert canceled.status.value == "CANCELED"
    assert Task.objects.get(id=task_id).status == TaskStatus.CANCELED

    # The documented errors are typed too: canceling again is a 409.
    again = cancel.sync_detailed(task_id, client=client)
    assert again.status_code == 409
    assert isinstance(again.parsed, models.ErrorOutput) and "already ended" in again.parsed.message

    # A bad spec: a 400 naming the field, parsed as the documented error.
    bad = inline_spec("wiki")
    bad["spec"]["dataSchema"]["granularitySpec"]["intervals"] = ["2024-01-02/2024-01-01"]
    refused = submit.sync_detailed(client=client, body=models.IndexParallelTask.from_dict(bad))
    assert refused.status_code == 400
    assert refused.parsed.field == "spec.dataSchema.granularitySpec.intervals[0]"
