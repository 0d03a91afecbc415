"""Eight processes race for locks on overlapping intervals of one dataSource on
PostgreSQL: after every grant no two incompatible unrevoked locks exist, nothing
deadlocks, and every client finishes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dj_database_url
import pytest
from django.db import connection

from metastore.models import TaskLock

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.mark.django_db(transaction=True)
def test_eight_processes_never_hold_incompatible_locks():
    if connection.vendor != "postgresql":
        pytest.skip("the multi-process lock test needs PostgreSQL (set DATABASE_URL)")
    env = {**os.environ, "DATABASE_URL": database_url(), "PYTHONPATH": str(ROOT)}
    assert dj_database_url.parse(env["DATABASE_URL"])["NAME"] == connection.settings_dict["NAME"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.lock_stress_worker", str(i), "200", str(i), "check"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    problems = [p for r in results for p in r["problems"]]
    assert sum(r["n_problems"] for r in results) == 0, problems
    assert sum(r["granted"] for r in results) > 100  # real contention, real grants
    assert TaskLock.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_decision_waits_while_another_transaction_holds_the_datasource():
    """The critical section is real: while one transaction holds the dataSource
    (as a publish does), a lock decision in another connection cannot proceed."""
    import threading
    import time

    from django.db import connections, transaction

    from metastore import services
    from metastore.intervals import Interval

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (set DATABASE_URL)")
    day = Interval.parse("2024-01-01/2024-01-02")
    task = services.task_create(
        spec={}, task_type="index_parallel", datasource="held", enqueue=False
    )
    assert services.task_claim(task_id=task.id, worker="pytest")  # only a claimed task locks
    services.datasource_for_update("held")  # the dataSource's row exists
    granted_at: list[float] = []

    def decide() -> None:
        try:
            services.lock_try_acquire(task=task, interval=day)
            granted_at.append(time.monotonic())
        finally:
            connections.close_all()

    with transaction.atomic():
        services.datasource_for_update("held")
        other = threading.Thread(target=decide)
        other.start()
        time.sleep(1.0)
        assert not granted_at  # still waiting for the dataSource
        released_at = time.monotonic()
    other.join(timeout=30)
    assert granted_at and granted_at[0] >= released_at
    assert TaskLock.objects.filter(task=task).count() == 1
