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
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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
