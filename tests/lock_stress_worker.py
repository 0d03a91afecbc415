"""One client of the lock-box stress test (run as a subprocess; the benchmark's
client is bench/lock_client.py).

Usage: python -m tests.lock_stress_worker <client> <requests> <seed> check
After every grant it verifies that no two incompatible unrevoked locks exist.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import sys
from datetime import timedelta

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
import django  # noqa: E402

django.setup()

from metastore import locking, services  # noqa: E402
from metastore.intervals import Interval  # noqa: E402
from metastore.models import TaskLock, TaskStatus  # noqa: E402

DS = "stress"
BASE = Interval.parse("2024-01-01/2024-01-02")
TYPES = [locking.EXCLUSIVE, locking.SHARED, locking.APPEND, locking.REPLACE]


def violations() -> list[str]:
    locks = [
        services.lock_spec_of(lock)
        for lock in TaskLock.objects.filter(datasource=DS, revoked=False)
    ]
    bad = []
    for a, b in itertools.combinations(locks, 2):
        if not locking.compatible(a, b):
            bad.append(f"{a.type}{a.interval}/{a.group_id} vs {b.type}{b.interval}/{b.group_id}")
    return bad


def main() -> int:
    client, requests, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    problems, granted = [], 0
    live = []
    for _ in range(requests):
        day = rng.randrange(5)
        span = rng.randint(1, 3)
        start = BASE.start + timedelta(days=day)
        interval = Interval(start, start + timedelta(days=span))
        task = services.task_create(
            spec={"context": {"priority": rng.choice([0, 10, 25, 50, 75])}},
            task_type="index_parallel",
            datasource=DS,
            enqueue=False,
        )
        # Only a claimed (RUNNING or WAITING) task may lock (SPEC §5).
        assert services.task_claim(task_id=task.id, worker=f"stress-{client}")
        lock_type = rng.choice(TYPES)
        lock = services.lock_try_acquire(task=task, interval=interval, lock_type=lock_type)
        if lock is not None:
            granted += 1
            problems += violations()
        live.append(task)
        # End some tasks (releasing their locks) to keep churn going.
        while live and (len(live) > 3 or rng.random() < 0.5):
            victim = live.pop(rng.randrange(len(live)))
            services.task_finish(task_id=victim.id, status=TaskStatus.SUCCESS)
    for task in live:
        services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    print(
        json.dumps(
            {
                "client": client,
                "granted": granted,
                "problems": problems[:10],
                "n_problems": len(problems),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
