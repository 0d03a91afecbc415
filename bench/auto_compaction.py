"""Benchmark: auto-compaction keeps up with a stream of late appends, unattended.
Not a test.

    DATABASE_URL=postgres://root@127.0.0.1:5432/strata_bench REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/auto_compaction.py [--period 20] [--periods 30] [--append-rows 200]

Uses a scratch PostgreSQL database (it migrates it and adds a dataSource
`auto_<n>`), deep storage in a temporary directory, and starts a worker the way
`make run` does (`celery worker -P threads -c 2`, two task slots) and `celery
beat` running the compaction duty every `--period` seconds, on a queue of its
own. Auto-compaction is on for the dataSource (DAY segments,
`skipOffsetFromLatest` PT0S, one compaction slot of the two). For `--periods`
periods, one append at a time (HOUR or DAY granularity in turn, concurrent
locks) lands rows in the three most recent days: today's rows and late rows up
to three days old.

Printed:
- the share of eligibility episodes compacted within two periods: an episode
  starts when the bench first sees an interval awaiting compaction (late data
  made it eligible again) and ends when the first compaction of it submitted
  after that succeeds (it read the rows that made it eligible); goal >= 95 %;
- append lock waits caused by compaction (an append seen WAITING on a compact
  task's lock; goal none);
- rows lost and duplicated (both must be 0), by row id through SQL, after the
  appends stop and the duty compacted everything;
- compaction throughput (rows/s of the duty's compactions) against raw Spark
  rewriting the same rows (read and write the visible Parquet files) in the
  same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DAYS = 3
TODAY = datetime(2024, 3, 10, tzinfo=UTC)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _append_spec(ds: str, rows: list[dict], granularity: str) -> dict:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": ds,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["id"]},
                "metricsSpec": [],
                "granularitySpec": {
                    "segmentGranularity": granularity,
                    "queryGranularity": "NONE",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {
                    "type": "inline",
                    "data": "".join(json.dumps(r) + "\n" for r in rows),
                },
                "inputFormat": {"type": "json"},
                "appendToExisting": True,
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
        "context": {"useConcurrentLocks": True},
    }


def _rows(k: int, n: int, rng: random.Random) -> list[dict]:
    """Rows of the three most recent days (the older two are late data)."""
    out = []
    for i in range(n):
        day = TODAY - timedelta(days=rng.randrange(DAYS))
        ts = day + timedelta(seconds=rng.randrange(86400))
        out.append({"ts": _iso(ts), "id": f"r{k}-{i}"})
    return out


def _start(env: dict, argv: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115 - lives as long as the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


class Episodes:
    """Eligibility episodes per interval: first seen awaiting -> the end of the first
    compaction of it submitted after that (it read the rows that made it eligible)."""

    def __init__(self) -> None:
        self.open: dict[str, datetime] = {}  # interval -> when it was seen eligible
        self.latencies: list[float] = []
        self.unfinished = 0

    def observe(self, ds: str, statuses) -> None:
        from django.utils import timezone

        from metastore.intervals import Interval
        from metastore.selectors import compaction as reads

        now = timezone.now()
        for st in statuses:
            if st.status == "awaiting" and str(st.interval) not in self.open:
                self.open[str(st.interval)] = now
        if not self.open:
            return
        for task in reads.compaction_facts(datasource=ds, now=now).tasks:
            if task.status != "SUCCESS" or not task.by_duty or task.interval is None:
                continue
            created = _created(task.id)
            for key, seen in list(self.open.items()):  # the task's interval, or one it took along
                if task.interval.contains(Interval.parse(key)) and created and created >= seen:
                    self.latencies.append((task.ended_at - seen).total_seconds())
                    del self.open[key]

    def close(self) -> None:
        self.unfinished = len(self.open)


def _created(task_id: str) -> datetime | None:
    from metastore.models import Task

    return Task.objects.filter(id=task_id).values_list("created_at", flat=True).first()


def _sql_ids(ds: str) -> Counter:
    from metastore.query import run_query

    result = run_query(sql=f"SELECT id FROM {ds}")
    return Counter(row[0] for row in result.rows)


def _raw_spark_seconds(ds: str, work: Path) -> tuple[float, int]:
    """Raw Spark reading the visible segments' files and writing them back as one
    file per day: the same rows a compaction rewrites."""
    from metastore import selectors
    from metastore.intervals import ETERNITY
    from metastore.models import Segment
    from workers.spark import get_spark

    refs = [r for _, r in selectors.timeline_for(datasource=ds).lookup(ETERNITY) if not r.tombstone]
    files = list(
        Segment.objects.filter(id__in=[r.id for r in refs]).values_list("location", flat=True)
    )
    spark = get_spark()
    start = time.monotonic()
    frame = spark.read.parquet(*files)
    rows = frame.count()
    frame.repartition(DAYS).write.mode("overwrite").parquet(str(work / "raw"))
    return time.monotonic() - start, rows


def _loop(args, ds: str, rng: random.Random):
    from metastore import services
    from metastore.models import FINAL_STATUSES, Task
    from metastore.selectors.compaction import compaction_plans

    expected: Counter = Counter()
    episodes = Episodes()
    waits: set[str] = set()
    deadline = time.monotonic() + args.period * args.periods
    k = 0
    while time.monotonic() < deadline:
        rows = _rows(k, args.append_rows, rng)
        spec = _append_spec(ds, rows, "HOUR" if k % 2 == 0 else "DAY")
        task_id = services.task_submit(spec=spec).id
        while True:
            task = Task.objects.get(id=task_id)
            if task.status == "WAITING" and any(
                str(w.get("task", "")).startswith("coordinator-issued") for w in task.waiting_on
            ):
                waits.add(task_id)
            episodes.observe(ds, compaction_plans(datasource=ds).statuses.get(ds, []))
            if task.status in FINAL_STATUSES:
                break
            time.sleep(0.5)
        if task.status == "SUCCESS":
            expected.update(r["id"] for r in rows)
        else:
            print(f"append {task.id} ended {task.status}: {task.error}", flush=True)
        k += 1
    return expected, episodes, waits, k


def _settle(ds: str, episodes: Episodes, timeout: float) -> None:
    from metastore.models import ACTIVE_STATUSES, Task
    from metastore.selectors.compaction import compaction_plans

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        statuses = compaction_plans(datasource=ds).statuses.get(ds, [])
        episodes.observe(ds, statuses)
        busy = Task.objects.filter(status__in=ACTIVE_STATUSES).exists()
        if not busy and all(st.status in ("compacted", "skipped") for st in statuses):
            return
        time.sleep(1)
    print("the duty did not settle in time", flush=True)


def _report(args, ds, expected, episodes, waits, appends, work) -> None:
    from metastore.models import Task

    within = sum(1 for lat in episodes.latencies if lat <= 2 * args.period)
    total = len(episodes.latencies) + episodes.unfinished
    visible = _sql_ids(ds)
    lost = sum((expected - visible).values())
    duplicated = sum((visible - expected).values())
    compactions = list(Task.objects.filter(datasource=ds, type="compact", status="SUCCESS"))
    seconds = sum((t.ended_at - t.started_at).total_seconds() for t in compactions)
    rows = sum(int((t.report.get("compaction") or {}).get("rowsRead") or 0) for t in compactions)
    raw_s, raw_rows = _raw_spark_seconds(ds, work)
    print(f"{appends} appends, {sum(expected.values()):,} rows, {len(compactions)} compactions")
    print(
        f"eligible intervals compacted within two periods ({2 * args.period:.0f} s): "
        f"{within} of {total} ({100 * within / max(total, 1):.1f} %)"
    )
    print(f"append lock waits caused by compaction: {len(waits)}")
    print(f"rows lost {lost}; duplicated {duplicated}")
    if seconds and rows:
        print(
            f"compaction throughput {rows / seconds:,.0f} rows/s; raw Spark rewriting the "
            f"{raw_rows:,} visible rows {raw_rows / raw_s:,.0f} rows/s "
            f"({(rows / seconds) / (raw_rows / raw_s):.2f} x raw)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--period", type=float, default=20.0)
    parser.add_argument("--periods", type=int, default=30)
    parser.add_argument("--append-rows", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a scratch PostgreSQL database")
    work = Path(tempfile.mkdtemp(prefix="strata-auto-"))
    queue = f"strata-auto-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "STRATA_DATA_DIR": str(work),
        "STRATA_QUEUE": queue,
        "STRATA_HEARTBEAT_SECONDS": "0.5",
        "STRATA_COMPACTION_PERIOD_SECONDS": str(args.period),
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from console.celery import app
    from metastore import services

    call_command("migrate", interactive=False, verbosity=0)
    ds = f"auto_{uuid.uuid4().hex[:6]}"
    services.compaction_config_set(
        data={
            "dataSource": ds,
            "skipOffsetFromLatest": "PT0S",
            "granularitySpec": {"segmentGranularity": "DAY"},
        },
        author="bench",
    )
    services.compaction_cluster_set(slot_ratio=0.5, max_slots=1)
    nodename = f"{queue}@{socket.gethostname()}"
    celery = [sys.executable, "-m", "celery", "-A", "console"]
    worker = _start(
        env,
        [*celery, "worker", "-P", "threads", "-c", "2", "-Q", queue, "-n", nodename]
        + ["--without-gossip", "--without-mingle"],
        work / "worker.log",
    )
    beat = _start(env, [*celery, "beat", "--schedule", str(work / "beat")], work / "beat.log")
    try:
        deadline = time.monotonic() + 180
        while not app.control.ping(destination=[nodename], timeout=1.0):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the worker did not start; see {work / 'worker.log'}")
        expected, episodes, waits, appends = _loop(args, ds, random.Random(args.seed))
        _settle(ds, episodes, timeout=20 * args.period)
        episodes.close()
        _report(args, ds, expected, episodes, waits, appends, work)
    finally:
        services.compaction_config_delete(datasource=ds, author="bench")
        _stop(beat)
        _stop(worker)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
