"""A slot process on a cluster runs each task as a Spark application of its own
(`workers.slot_main`: `get_spark(app_name=...)`, then `stop_spark()`),
so ingestion's derived session (`workers.jobs.ingest.ingest_session`) must go with
the application it was derived from: kept, it would hold every stopped
application's session, and its JVM objects, for the life of the slot process.

Run in a process of its own (a real driver JVM on local[1]), so that stopping
sessions does not touch the one this test process shares.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.spark

_TASKS = """
import gc, json, weakref
from workers.jobs import ingest
from workers.spark import get_spark, stop_spark

held, refs = [], []
for n in range(3):  # three tasks, each its own application on one driver JVM
    spark = get_spark(master="local[1]", shuffle_partitions=1, driver_memory="512m",
                      scheduler_mode="FIFO", app_name=f"strata task t{n}")
    derived = ingest.ingest_session(spark)
    assert ingest.ingest_session(spark) is derived  # reused within the application
    assert derived.range(5).count() == 5
    refs.append((weakref.ref(spark), weakref.ref(derived)))
    del spark, derived
    stop_spark()
    gc.collect()
    held.append(len(ingest._sessions))
alive = [[ref() is not None for ref in pair] for pair in refs]
print(json.dumps({"held": held, "alive": alive}))
"""


def test_ingest_sessions_are_released_when_each_tasks_application_stops():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", _TASKS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["held"] == [0, 0, 0]  # nothing of a stopped application is kept
    # PySpark's own RDD.toDF holds the session created last (the last derived one)
    # until the next is created; nothing else of the stopped applications lives on
    assert result["alive"][:-1] == [[False, False]] * 2
    assert result["alive"][-1][0] is False
