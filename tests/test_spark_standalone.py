"""Tasks on a Spark standalone cluster (issue 23): a real master and worker
started from the pyspark wheel's own launcher (`bin/spark-class`), a Strata
worker whose slot processes' drivers connect to it (STRATA_SLOT_SPARK_MASTER).
Each task runs as an application of its own, named by its task id, on its slot's
warm driver JVM: the master's UI (its `/json`) lists it while it runs, and its
executor is released when it ends. A task stuck in the driver's planner is shut
down within 10 s, its slot process killed, and its application is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest
from conftest import REPO, _await_task, _stop_process_group
from e2e_driver import _slot_worker, slots_worker_process  # noqa: F401
from test_task_isolation import (
    START_S,
    assert_stopped_in_time,
    big_csv,
    local_spec,
    planner_spec,
    shutdown,
    slot_processes,
    submit,
    wait_for_phase,
)

from metastore.models import Segment, TaskStatus
from workers.slot_main import app_name

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

HOST = "127.0.0.1"
SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    url: str  # spark://host:port
    ui: str  # the master's web UI

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.ui}/json", timeout=5) as response:
            return json.load(response)

    def active_apps(self) -> dict[str, dict]:
        return {app["name"]: app for app in self.state()["activeapps"]}


def wait_for(condition, what: str, timeout: float = START_S, logs: Path | None = None):
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            value = condition()
            if value:
                return value
        if time.monotonic() > deadline:
            tail = "".join(p.read_text(errors="replace")[-2000:] for p in logs.glob("*.log"))
            pytest.fail(f"timed out waiting for {what}\n{tail if logs else ''}")
        time.sleep(0.3)


def spark_daemon(argv: list[str], log: Path, env: dict) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *argv],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    """A standalone master and one worker (1 core, 2 GiB) on free local ports."""
    logs = tmp_path_factory.mktemp("spark-cluster")
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_WORKER_DIR": str(logs / "work"),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": str(REPO),
        # The daemons only coordinate: a small heap, and a JVM that starts fast.
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    }
    port, ui = free_port(), free_port()
    found = Cluster(url=f"spark://{HOST}:{port}", ui=f"http://{HOST}:{ui}")
    daemons = [
        spark_daemon(
            ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port)]
            + ["--webui-port", str(ui)],
            logs / "master.log",
            env,
        )
    ]
    try:
        wait_for(found.state, "the Spark master's UI", logs=logs)
        worker = ["org.apache.spark.deploy.worker.Worker", found.url, "--host", HOST]
        worker += ["--cores", "1", "--memory", "2g", "--work-dir", str(logs / "work")]
        worker += ["--port", str(free_port()), "--webui-port", str(free_port())]
        daemons.append(spark_daemon(worker, logs / "worker.log", env))
        wait_for(
            lambda: any(w["state"] == "ALIVE" for w in found.state()["workers"]),
            "the Spark worker to register",
            logs=logs,
        )
        yield found
    finally:
        for daemon in reversed(daemons):
            _stop_process_group(daemon, grace_s=10)


@pytest.fixture(scope="module", name="slots_worker")
def _cluster_worker(cluster, django_db_setup, redis_url, strata_dirs, tmp_path_factory):
    yield from slots_worker_process(
        redis_url,
        strata_dirs,
        tmp_path_factory,
        slots=1,
        extra_env={"STRATA_SLOT_SPARK_MASTER": cluster.url, "STRATA_TASK_DRIVER_MEMORY": "1g"},
    )


def apps_named(cluster: Cluster, name: str, key: str = "activeapps") -> list[dict]:
    return [app for app in cluster.state()[key] if app["name"] == name]


def test_an_ingestion_runs_on_the_standalone_cluster_as_its_own_application(
    cluster, slot_worker, strata_dirs
):
    wait_for(lambda: slot_processes(slot_worker), "the slot process")
    assert not cluster.state()["activeapps"]  # an idle slot holds no executors
    base = big_csv(strata_dirs, "cluster.csv", 500)

    task = _await_task(
        submit(local_spec("on_cluster", base, "cluster.csv")), slot_worker, timeout=START_S
    )

    assert task.status == TaskStatus.SUCCESS, task.error
    assert sum(s.num_rows for s in Segment.objects.filter(created_by_id=task.id)) == 500
    (app,) = apps_named(cluster, app_name(task.id), "completedapps")  # ran there, by its id
    assert app["cores"] == 1  # on the worker's executor
    wait_for(lambda: cluster.state()["workers"][0]["coresused"] == 0, "its executor's release")
    assert not cluster.state()["activeapps"]


def test_a_running_task_is_listed_by_its_id_and_a_shutdown_ends_it_within_10_s(
    cluster, slot_worker, strata_dirs, api_client
):
    (proc,) = wait_for(lambda: slot_processes(slot_worker), "the slot process")
    base = big_csv(strata_dirs, "small.csv", 50)  # planner_spec reads small.csv
    task_id = submit(planner_spec("cluster_plan", base))
    wait_for_phase(task_id, ("phase 1",))
    (app,) = wait_for(
        lambda: apps_named(cluster, app_name(task_id)), "the task's application on the master"
    )
    time.sleep(3)  # in Catalyst's planner, which no job cancel reaches

    asked = shutdown(api_client, task_id)
    task = _await_task(task_id, slot_worker, timeout=60)
    ended = time.monotonic()

    assert task.status == TaskStatus.CANCELED, task.error
    assert_stopped_in_time(task, asked, ended)
    assert task.report["stop"]["killed"]
    wait_for(
        lambda: not apps_named(cluster, app_name(task_id)),
        "the killed task's application to leave the master",
        timeout=10,
    )
    assert app["id"] in {a["id"] for a in cluster.state()["completedapps"]}
    wait_for(lambda: cluster.state()["workers"][0]["coresused"] == 0, "its executor's release")
    assert proc.pid not in {p.pid for p in slot_processes(slot_worker)}
