"""Benchmark: two task slots as two Spark drivers, or as one shared SparkSession.

Two small ingestions (the demo's flights spec on one month of departures, a
few tens of thousands of rows, DAY segments) run at the same time, after one
warm-up ingestion, in each layout a worker could use for STRATA_TASK_SLOTS=2:

- processes: two processes (Celery prefork, concurrency 2), each with its own
  SparkSession and JVM (Spark `local[2]` each);
- threads: one process with one SparkSession (`local[2]`, FAIR scheduler),
  each ingestion in its own thread and scheduler pool (the shared driver);
- slots: two processes each with its own warm SparkSession, sized as the
  worker's slot processes are (`workers.slots`: `local[1]` each, the serial
  collector, STRATA_TASK_DRIVER_MEMORY of heap): a process per slot whose
  driver can be killed without touching the other slot; slots2: the same with
  `local[2]` each.

The baseline, measured in the same run, is one ingestion alone in one warm
process. Printed per layout: the wall time of the pair (best of --repeat) as a
ratio to twice the baseline (below 1: the pair overlaps usefully), and the peak
resident memory of the JVMs and of the whole process tree (sampled every 0.1 s).
Not a test: it prints figures, asserts nothing.

    .venv/bin/python bench/task_slots.py [--repeat 3] [--month 1] [--layouts alone,slots]
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psutil  # noqa: E402

from metastore.demo import extract_flights, flights_spec  # noqa: E402

SHUFFLE_PARTITIONS = 4  # the product's default SPARK_SHUFFLE_PARTITIONS
DRIVER_MEMORY = "2g"  # the product's default SPARK_DRIVER_MEMORY
SLOT_DRIVER_MEMORY = "1g"  # the product's default STRATA_TASK_DRIVER_MEMORY


def build_input(work: Path, month: int) -> tuple[Path, int]:
    source = extract_flights(work / "source")
    base = work / "input"
    base.mkdir(parents=True, exist_ok=True)
    rows = 0
    with open(source, newline="") as fh, open(base / "flights.csv", "w", newline="") as out:
        reader = csv.DictReader(fh)
        writer = csv.DictWriter(out, fieldnames=reader.fieldnames)
        writer.writeheader()
        for row in reader:
            if row["month"] == str(month):
                writer.writerow(row)
                rows += 1
    return base, rows


def _spec(base: Path, month: int):
    from metastore.druid.tasks import validate_task_spec
    from workers.jobs.input_files import resolve_local_inputs

    spec = flights_spec(str(base))
    end = f"2013-{month + 1:02d}-01" if month < 12 else "2014-01-01"
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [f"2013-{month:02d}-01/{end}"]
    ingestion = validate_task_spec(spec, input_roots=[base.parent]).ingestion
    return resolve_local_inputs(ingestion, input_roots=[base.parent])


def _ingest(spark, ingestion, work: Path, name: str, pool: str | None = None) -> None:
    from workers.jobs.ingest import run_ingest

    if pool is not None:
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", pool)
    run_ingest(spark, ingestion, work_dir=work / name, job_group=name)


def _session(role: str):
    from workers.spark import get_spark

    if role.startswith("slot"):  # what a worker's slot process starts (workers.slots)
        from workers.slots import SLOT_JAVA_OPTIONS

        return get_spark(
            master="local[2]" if role == "slot2" else "local[1]",
            shuffle_partitions=SHUFFLE_PARTITIONS,
            driver_memory=SLOT_DRIVER_MEMORY,
            java_options=SLOT_JAVA_OPTIONS,
        )
    return get_spark(
        master="local[2]", shuffle_partitions=SHUFFLE_PARTITIONS, driver_memory=DRIVER_MEMORY
    )


def driver(role: str, base: str, month: int, work: str, rounds: int, barrier, out) -> None:
    """One worker process: warm up, then `rounds` timed rounds behind the barrier.

    role "alone": one ingestion per round; "process": one per round (a sibling
    process runs the other); "threads": two threads per round on one session."""
    if role == "threads":
        os.environ["PYSPARK_SUBMIT_ARGS"] = "--conf spark.scheduler.mode=FAIR pyspark-shell"
    started = time.monotonic()
    spark = _session(role)
    spark.range(1).count()  # the JVM is up and has run a job
    out.put(("start", time.monotonic() - started))
    ingestion = _spec(Path(base), month)
    w = Path(work)
    _ingest(spark, ingestion, w, f"warm-{os.getpid()}")
    for r in range(rounds):
        barrier.wait()
        t = time.monotonic()
        if role == "threads":
            threads = [
                threading.Thread(
                    target=_ingest, args=(spark, ingestion, w, f"t{i}-{r}", f"slot{i}")
                )
                for i in range(2)
            ]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        else:
            _ingest(spark, ingestion, w, f"p{os.getpid()}-{r}")
        out.put((r, time.monotonic() - t))
        barrier.wait()
    spark.stop()


def _tree_rss(root: psutil.Process) -> tuple[int, int]:
    """(RSS of the java processes, RSS of the whole tree) under `root`, in bytes."""
    java = total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            rss = proc.memory_info().rss
            name = proc.name()
        except psutil.Error:
            continue
        total += rss
        if name == "java":
            java += rss
    return java, total


def run_layout(layout: str, args, base: Path, work: Path) -> dict:
    ctx = mp.get_context("spawn")
    procs = {
        "alone": ["alone"],
        "processes": ["process", "process"],
        "threads": ["threads"],
        "slots": ["slot", "slot"],
        "slots2": ["slot2", "slot2"],
    }
    roles = procs[layout]
    barrier = ctx.Barrier(len(roles) + 1)
    out = ctx.Queue()
    children = [
        ctx.Process(
            target=driver,
            args=(role, str(base), args.month, str(work / layout), args.repeat, barrier, out),
        )
        for role in roles
    ]
    for c in children:
        c.start()
    starts = [out.get()[1] for _ in roles]  # each driver's fresh SparkSession
    me = psutil.Process()
    peak_java = peak_total = 0
    walls = []
    for _ in range(args.repeat):
        barrier.wait()  # every driver is warm
        t = time.monotonic()
        done = 0
        while done < len(roles):
            while out.empty():
                java, total = _tree_rss(me)
                peak_java, peak_total = max(peak_java, java), max(peak_total, total)
                time.sleep(0.1)
            out.get()
            done += 1
        walls.append(time.monotonic() - t)
        barrier.wait()
    for c in children:
        c.join()
    return {"wall": min(walls), "java": peak_java, "total": peak_total, "start": max(starts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--month", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--layouts", default="alone,processes,threads,slots")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    work = args.work or Path(tempfile.mkdtemp(prefix="strata-slots-"))
    base, rows = build_input(work, args.month)
    print(f"{rows:,} rows per ingestion; {os.cpu_count()} cores; {args.repeat} rounds", flush=True)
    results = {}
    for layout in args.layouts.split(","):
        results[layout] = run_layout(layout, args, base, work)
        r = results[layout]
        print(
            f"{layout:10s} wall {r['wall']:6.2f} s   JVM RSS {r['java'] / 2**20:6.0f} MiB   "
            f"tree RSS {r['total'] / 2**20:6.0f} MiB   fresh session {r['start']:5.1f} s",
            flush=True,
        )
    one = results["alone"]["wall"]
    for layout in [name for name in results if name != "alone"]:
        r = results[layout]
        shared = results.get("threads", {}).get("wall")
        vs_shared = f"; / shared session's pair = {r['wall'] / shared:.2f}" if shared else ""
        print(
            f"{layout}: pair / (2 x alone) = {r['wall'] / (2 * one):.2f}{vs_shared}; "
            f"JVM RSS / alone's = {r['java'] / results['alone']['java']:.2f}"
        )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
