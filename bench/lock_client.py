"""One client process of bench/locks.py.

    python bench/lock_client.py <client> <operations> <phase>

It sets up Django, prints "ready", waits for "go" on stdin, runs its operations
and prints one JSON line: per-operation latencies and its start/end times.

Phases (each client works on its own ten days of one shared dataSource, so
every decision still serializes on that dataSource's row):
- floor: one trivial transaction (BEGIN; SELECT 1; COMMIT): the baseline.
- lock: acquire an EXCLUSIVE time-chunk lock on a day, release it.
- handoff: every client acquires (waiting) and releases the same day: a release
  must wake the next waiter (LISTEN/NOTIFY on PostgreSQL, else polling).
- alloc: hold an EXCLUSIVE lock on the ten days; allocate one appended segment
  per call, each under a new sequence name.
- alloc_batch: the same, fifty chunk allocations per `segments_allocate_many`.
- lifecycle: a task's whole life: create and claim it, lock a day, allocate a
  segment, end it (which releases its locks).
- contended: all clients fight over the same five days with random lock types
  and priorities (one task per priority); a granted lock is released at once,
  a waiting or preempted task is replaced (untimed).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
import django  # noqa: E402

django.setup()

from django.db import connection, transaction  # noqa: E402

from metastore import locking, services  # noqa: E402
from metastore.intervals import Interval  # noqa: E402
from metastore.models import TaskStatus  # noqa: E402

DS = "bench"
BASE = Interval.parse("2024-01-01/2024-01-02")
BATCH = 50


def day(n: int) -> Interval:
    return Interval(BASE.start + timedelta(days=n), BASE.start + timedelta(days=n + 1))


def new_task(priority: int = 50):
    """A task as a worker runs it: created, then claimed (only a RUNNING or
    WAITING task may lock, allocate or publish, SPEC §5)."""
    task = services.task_create(
        spec={"context": {"priority": priority}},
        task_type="index_parallel",
        datasource=DS,
        enqueue=False,
    )
    assert services.task_claim(task_id=task.id, worker=f"bench-{os.getpid()}")
    return task


def main() -> int:
    client, operations, phase = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = random.Random(client)
    first = client * 10
    own = Interval(day(first).start, day(first + 9).end)
    task = new_task()
    if phase in ("alloc", "alloc_batch"):
        assert services.lock_try_acquire(task=task, interval=own, lock_type=locking.EXCLUSIVE)
    # Warm up the connection and Python's caches outside the measurement.
    services.lock_release(
        lock_id=services.lock_try_acquire(task=new_task(), interval=day(900 + client)).id
    )
    contenders = [new_task(p) for p in (0, 10, 25, 50, 75)] if phase == "contended" else []
    print("ready", flush=True)
    sys.stdin.readline()
    latencies, granted, count = [], 0, 0
    started = time.time()
    for i in range(operations):
        t0 = time.perf_counter()
        if phase == "floor":
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            count += 1
        elif phase == "lock":
            lock = services.lock_try_acquire(task=task, interval=day(first + i % 10))
            services.lock_release(lock_id=lock.id)
            count += 1
        elif phase == "handoff":
            # Every client wants the same day: each acquire waits for the others'
            # releases (first come, first served), the path of a waiting task.
            lock = services.lock_acquire(task=task, interval=day(950))
            services.lock_release(lock_id=lock.id)
            count += 1
        elif phase == "alloc":
            services.segments_allocate(
                task=task, interval=day(first + i % 10), count=1, append=True, sequence_name=f"s{i}"
            )
            count += 1
        elif phase == "alloc_batch":
            allocations = services.segments_allocate_many(
                task=task,
                requests=[
                    services.AllocationRequest(day(first + j % 10), 1, f"b{i}-{j}")
                    for j in range(BATCH)
                ],
                append=True,
            )
            count += len(allocations)
        elif phase == "lifecycle":
            t = new_task()
            services.lock_try_acquire(task=t, interval=day(first + i % 10))
            services.segments_allocate(task=t, interval=day(first + i % 10), count=1, append=True)
            services.task_finish(task_id=t.id, status=TaskStatus.SUCCESS)
            count += 1
        elif phase == "contended":
            t = contenders[rng.randrange(len(contenders))]
            start = rng.randrange(5)
            interval = Interval(day(start).start, day(start + rng.randint(0, 2)).end)
            try:
                lock = services.lock_try_acquire(
                    task=t, interval=interval, lock_type=rng.choice(locking.LOCK_TYPES)
                )
            except services.LockRevoked:
                lock, revoked = None, True
            else:
                revoked = False
            if lock is not None:
                granted += 1
                services.lock_release(lock_id=lock.id)
            count += 1
            latencies.append(time.perf_counter() - t0)
            if lock is None:  # waiting or preempted: end it (not timed), so no queue goes stale
                services.task_finish(
                    task_id=t.id, status=TaskStatus.FAILED if revoked else TaskStatus.SUCCESS
                )
                contenders[contenders.index(t)] = new_task(t.priority)
            continue
        else:
            raise SystemExit(f"unknown phase {phase!r}")
        latencies.append(time.perf_counter() - t0)
    ended = time.time()
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    print(
        json.dumps(
            {
                "latencies": latencies,
                "count": count,
                "granted": granted,
                "started": started,
                "ended": ended,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
