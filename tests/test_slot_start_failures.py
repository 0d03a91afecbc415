"""A task whose Spark driver or application cannot start fails with the cause
(the first error lines of the driver's output), not a bare "Spark driver exited
with code 1": a slot whose driver JVM cannot start (here a master URL that
spark-submit refuses) and, on a standalone cluster, a task's own application
that cannot start (here an event log directory that does not exist, a setting
of the driver's spark-defaults.conf). In the second case the slot process and
its JVM stay: the next task may start."""

from __future__ import annotations

import contextlib

import pytest
from conftest import _await_task
from e2e_driver import slots_worker_process
from test_spark_standalone import cluster  # noqa: F401 - the module's standalone cluster
from test_task_isolation import START_S, big_csv, local_spec, slot_processes, submit

from metastore.models import TaskStatus

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.django_db(transaction=True)]

worker_with = contextlib.contextmanager(slots_worker_process)


def test_a_slot_whose_driver_cannot_start_fails_its_task_with_the_cause(
    django_db_setup, redis_url, strata_dirs, tmp_path_factory
):
    base = big_csv(strata_dirs, "start.csv", 20)
    env = {"STRATA_SLOT_SPARK_MASTER": "nowhere://127.0.0.1:1", "STRATA_TASK_DRIVER_MEMORY": "512m"}
    with worker_with(redis_url, strata_dirs, tmp_path_factory, slots=1, extra_env=env) as worker:
        task = _await_task(
            submit(local_spec("bad_master", base, "start.csv")), worker, timeout=START_S
        )

    assert task.status == TaskStatus.FAILED
    assert task.error.startswith("Spark driver failed to start: "), task.error
    assert "Master must either be yarn or start with spark" in task.error, task.error
    assert "exited with" not in task.error


def test_a_tasks_application_that_cannot_start_fails_it_with_the_cause(
    cluster,  # noqa: F811
    django_db_setup,
    redis_url,
    strata_dirs,
    tmp_path_factory,
):
    base = big_csv(strata_dirs, "start.csv", 20)
    conf = tmp_path_factory.mktemp("spark-conf")
    missing = conf / "no-such-event-log-dir"
    (conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir {missing.as_uri()}\n"
    )
    env = {
        "STRATA_SLOT_SPARK_MASTER": cluster.url,
        "STRATA_TASK_DRIVER_MEMORY": "512m",
        "SPARK_CONF_DIR": str(conf),
    }
    with worker_with(redis_url, strata_dirs, tmp_path_factory, slots=1, extra_env=env) as worker:
        task = _await_task(
            submit(local_spec("bad_app", base, "start.csv")), worker, timeout=START_S
        )
        slots = [p.pid for p in slot_processes(worker)]
        again = _await_task(submit(local_spec("bad_app", base, "start.csv")), worker, timeout=120)
        assert [p.pid for p in slot_processes(worker)] == slots  # the same warm slot

    assert task.status == TaskStatus.FAILED
    assert task.error.startswith("the task's Spark application failed to start: "), task.error
    assert "no-such-event-log-dir" in task.error and "exited with" not in task.error
    assert again.status == TaskStatus.FAILED and again.error == task.error
