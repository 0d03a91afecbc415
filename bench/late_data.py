"""Benchmark: a compaction finishes under a stream of late appends into its interval,
and every appended row stays visible (CONC mode: APPEND and REPLACE locks). Not a test.

    DATABASE_URL=postgres://root@127.0.0.1:5432/strata_bench REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/late_data.py [--rows 200000] [--append-every 1] [--append-rows 20]

Needs the `compact` task. Uses a scratch PostgreSQL database (it migrates it and
adds a dataSource `late_data_<n>`), deep storage in a temporary directory, and
starts its own worker the way `make run` does (`celery worker -P threads -c 2`,
two task slots) on its own queue. It ingests the same `--rows` rows with ids into
one DAY of two dataSources, as 8 segments each, then:

1. baseline: compacts the first one's DAY with nothing else running;
2. late data: compacts the second one's DAY while, on the other slot, an append
   of `--append-rows` rows into that DAY is submitted every `--append-every`
   seconds (each after the previous one ended), until the compaction ends.

Printed: the compaction's duration under appends as a ratio to the baseline's,
appends per second sustained while it ran, and rows lost and duplicated (both
must be 0): every row id visible through the timeline, read back from the
Parquet files, against the base rows plus every row of every successful append.
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
DAY_START = datetime(2013, 1, 1, tzinfo=UTC)
DAY = "2013-01-01/2013-01-02"
CONC = {"useConcurrentLocks": True}


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _rows(prefix: str, n: int, rng: random.Random) -> list[dict]:
    return [
        {"ts": _iso(DAY_START + timedelta(seconds=rng.randrange(86400))), "id": f"{prefix}-{i}"}
        for i in range(n)
    ]


def _schema(datasource: str) -> dict:
    return {
        "dataSource": datasource,
        "timestampSpec": {"column": "ts", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["id"]},
        "metricsSpec": [],
        "granularitySpec": {
            "segmentGranularity": "DAY",
            "queryGranularity": "NONE",
            "rollup": False,
            "intervals": [DAY],
        },
    }


def _ingest_spec(
    datasource: str, source: dict, *, append: bool, max_rows: int | None = None
) -> dict:
    partitions = {"type": "dynamic"} | ({"maxRowsPerSegment": max_rows} if max_rows else {})
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": _schema(datasource),
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": source,
                "inputFormat": {"type": "json"},
                "appendToExisting": append,
            },
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": partitions,
                "maxParseExceptions": 0,
            },
        },
        "context": CONC,
    }


def _compact_spec(datasource: str) -> dict:
    return {
        "type": "compact",
        "dataSource": datasource,
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": DAY}},
        "context": CONC,
    }


def _wait(task_id: str, timeout: float = 1800):
    from metastore.models import FINAL_STATUSES, Task

    deadline = time.monotonic() + timeout
    while True:
        task = Task.objects.get(id=task_id)
        if task.status in FINAL_STATUSES:
            return task
        if time.monotonic() > deadline:
            raise SystemExit(f"task {task_id} did not end in {timeout} s ({task.status})")
        time.sleep(0.1)


def _run(spec: dict):
    from metastore import services

    task = _wait(services.task_submit(spec=spec).id)
    if task.status != "SUCCESS":
        raise SystemExit(f"{task.id} ended {task.status}: {task.error}")
    return task


def _visible_ids(datasource: str) -> Counter:
    """Row ids visible through the timeline (partially overshadowed segments read
    only where visible)."""
    import pyarrow.parquet as pq

    from metastore import selectors
    from metastore.intervals import Interval
    from metastore.models import Segment

    pieces = [
        (p, ref)
        for p, ref in selectors.timeline_for(datasource=datasource).lookup(Interval.parse(DAY))
        if not ref.tombstone
    ]
    where = dict(
        Segment.objects.filter(id__in={r.id for _, r in pieces}).values_list("id", "location")
    )
    seen: Counter = Counter()
    for piece, ref in pieces:
        for row in pq.read_table(where[ref.id], columns=["__time", "id"]).to_pylist():
            t = row["__time"]
            t = t if t.tzinfo else t.replace(tzinfo=UTC)
            if piece.start <= t < piece.end:
                seen[row["id"]] += 1
    return seen


def _start_worker(env: dict, queue: str, log: Path) -> subprocess.Popen:
    from console.celery import app
    from console.management.commands.strata_run import worker_argv

    argv = worker_argv(sys.executable, queue=queue, slots=2)
    nodename = f"{queue}@{socket.gethostname()}"
    argv[argv.index("-n") + 1] = nodename
    proc = subprocess.Popen(
        [*argv, "--without-gossip", "--without-mingle"],
        cwd=ROOT,
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115 - lives as long as the worker
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not app.control.ping(destination=[nodename], timeout=1.0):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the worker did not start; see {log}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--append-every", type=float, default=1.0)
    parser.add_argument("--append-rows", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("set DATABASE_URL to a scratch PostgreSQL database")

    work = Path(tempfile.mkdtemp(prefix="strata-late-"))
    queue = f"strata-late-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "STRATA_DATA_DIR": str(work),
        "STRATA_INPUT_ROOTS": str(work / "input"),
        "STRATA_QUEUE": queue,
        "STRATA_HEARTBEAT_SECONDS": "0.5",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    from metastore import services
    from metastore.models import FINAL_STATUSES, Task

    if "compact" not in services.tasks.SUPPORTED_TASK_TYPES:
        raise SystemExit("the compact task is not available on this branch (issue 11)")
    call_command("migrate", interactive=False, verbosity=0)

    rng = random.Random(args.seed)
    datasource = f"late_data_{uuid.uuid4().hex[:6]}"
    (work / "input").mkdir(parents=True)
    base = _rows("base", args.rows, rng)
    with open(work / "input" / "base.json", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in base)
    expected = Counter(r["id"] for r in base)

    worker = _start_worker(env, queue, work / "worker.log")
    try:
        # The same base in two dataSources, as 8 segments each: the baseline compacts
        # one alone, the other is compacted under late data.
        source = {"type": "local", "baseDir": str(work / "input"), "filter": "base.json"}
        alone = f"{datasource}_alone"
        for name in (alone, datasource):
            spec = _ingest_spec(name, source, append=False, max_rows=-(-args.rows // 8))
            _run(spec)
        print(f"{args.rows:,} rows in {DAY} of {alone} and of {datasource}", flush=True)

        base_task = _run(_compact_spec(alone))
        baseline = (base_task.ended_at - base_task.started_at).total_seconds()
        print(
            f"baseline: compaction alone {baseline:.1f} s "
            f"({base_task.report.get('segmentsPublished')} segments published)",
            flush=True,
        )

        compaction = services.task_submit(spec=_compact_spec(datasource)).id
        started = time.monotonic()
        appends = failed = 0
        during = 0
        k = 0
        while True:
            task = Task.objects.get(id=compaction)
            if task.status in FINAL_STATUSES:
                if task.status != "SUCCESS":
                    raise SystemExit(f"the compaction ended {task.status}: {task.error}")
                compaction_s = (task.ended_at - task.started_at).total_seconds()
                published = task.report.get("segmentsPublished")
                break
            rows = _rows(f"late{k}", args.append_rows, rng)
            k += 1
            tick = time.monotonic()
            data = "".join(json.dumps(r) + "\n" for r in rows)
            done = _wait(
                services.task_submit(
                    spec=_ingest_spec(datasource, {"type": "inline", "data": data}, append=True)
                ).id
            )
            if done.status == "SUCCESS":
                appends += 1
                expected.update(r["id"] for r in rows)
                if Task.objects.get(id=compaction).status not in FINAL_STATUSES:
                    during += 1
            else:
                failed += 1
                print(f"append {done.id} ended {done.status}: {done.error}")
            time.sleep(max(0.0, args.append_every - (time.monotonic() - tick)))
        wall = time.monotonic() - started

        visible = _visible_ids(datasource)
        lost = sum((expected - visible).values())
        duplicated = sum((visible - expected).values())
        print(
            f"under late data: compaction {compaction_s:.1f} s "
            f"({compaction_s / baseline:.2f} x alone, {published} segments published), "
            f"while it ran {during} appends "
            f"of {args.append_rows} rows committed ({during / wall:.2f} appends/s, "
            f"{appends} in all, {failed} failed)"
        )
        print(f"rows visible {sum(visible.values()):,}; lost {lost}; duplicated {duplicated}")
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
