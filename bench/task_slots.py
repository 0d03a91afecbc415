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
process. Every layout's drivers start together and stay up; their rounds then
alternate (a round of each layout in turn, --repeat times), so that the other
work on the machine weighs on every layout alike. Printed per layout: each
round's wall time, the best as a ratio to twice the baseline (below 1: the pair
overlaps usefully) and to the shared session's pair, and the peak resident
memory of the JVMs and of the whole process tree (sampled every 0.1 s); the
fresh sessions start together, so their times are those of a busy machine.
`--warmups` ingestions run in each driver before the rounds; a layout name
`slots+c2` runs the slot layout with JVM options added (`VARIANTS`).
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


def _session(role: str, slot_java: str | None = None):
    from workers.spark import get_spark

    if role.startswith("slot"):  # what a worker's slot process starts (workers.slots)
        from workers.slots import SLOT_JAVA_OPTIONS

        return get_spark(
            master="local[2]" if role == "slot2" else "local[1]",
            shuffle_partitions=SHUFFLE_PARTITIONS,
            driver_memory=SLOT_DRIVER_MEMORY,
            java_options=SLOT_JAVA_OPTIONS if slot_java is None else slot_java,
            scheduler_mode="FIFO",  # one task per driver, as in a slot process
        )
    return get_spark(
        master="local[2]", shuffle_partitions=SHUFFLE_PARTITIONS, driver_memory=DRIVER_MEMORY
    )


def driver(role: str, base: str, month: int, work: str, rounds: int, barrier, out, opts) -> None:
    """One worker process: warm up, then `rounds` timed rounds behind the barrier.

    role "alone": one ingestion per round; "process": one per round (a sibling
    process runs the other); "threads": two threads per round on one session."""
    if role == "threads":
        os.environ["PYSPARK_SUBMIT_ARGS"] = "--conf spark.scheduler.mode=FAIR pyspark-shell"
    started = time.monotonic()
    spark = _session(role, opts.get("slot_java"))
    spark.range(1).count()  # the JVM is up and has run a job
    out.put(("start", time.monotonic() - started))
    ingestion = _spec(Path(base), month)
    w = Path(work)
    for i in range(opts.get("warmups", 1)):  # the JIT compiles the hot paths
        _ingest(spark, ingestion, w, f"warm{i}-{os.getpid()}")
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


def _tree_rss(roots: list[psutil.Process]) -> tuple[int, int]:
    """(RSS of the java processes, RSS of the whole trees) under `roots`, in bytes."""
    java = total = 0
    procs = []
    for root in roots:
        try:
            procs += [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
    for proc in procs:
        try:
            rss = proc.memory_info().rss
            name = proc.name()
        except psutil.Error:
            continue
        total += rss
        if name == "java":
            java += rss
    return java, total


ROLES = {
    "alone": ["alone"],
    "processes": ["process", "process"],
    "threads": ["threads"],
    "slots": ["slot", "slot"],
    "slots2": ["slot2", "slot2"],
}


# JVM option variants of the slot layouts (`--layouts slots,slots+c2`), added to
# the slot drivers' options: what a slot process's JVM flags would change.
VARIANTS = {
    "": "",
    "c1": "-XX:TieredStopAtLevel=1",  # the quick C1 JIT only: less compiling per JVM
    "c2": "-XX:TieredStopAtLevel=4",  # both JIT compilers (the JVM's default)
}


def _slot_java(options: str | None, variant: str) -> str | None:
    if not variant:
        return options
    from workers.slots import SLOT_JAVA_OPTIONS

    return f"{SLOT_JAVA_OPTIONS if options is None else options} {VARIANTS[variant]}"


class Layout:
    """One layout's driver processes, warm and waiting at their barrier for the
    next round; the rounds of all layouts alternate (`main`), so that a load
    changing during the run weighs on every layout alike."""

    def __init__(self, name: str, args, base: Path, work: Path) -> None:
        ctx = mp.get_context("spawn")
        base_name, _, variant = name.partition("+")  # slots+c2: slots, both JITs
        self.name, self.roles = name, ROLES[base_name]
        self.barrier = ctx.Barrier(len(self.roles) + 1)
        self.out = ctx.Queue()
        opts = {"warmups": args.warmups, "slot_java": _slot_java(args.slot_java, variant)}
        self.children = [
            ctx.Process(
                target=driver,
                args=(role, str(base), args.month, str(work / name), args.repeat)
                + (self.barrier, self.out, opts),
            )
            for role in self.roles
        ]
        for c in self.children:
            c.start()
        self.walls: list[float] = []
        self.peak_java = self.peak_total = 0
        self.start = 0.0

    def ready(self) -> None:
        """Wait for every driver's fresh SparkSession (the slowest is the start)."""
        self.start = max(self.out.get()[1] for _ in self.roles)

    def round(self) -> None:
        roots = [psutil.Process(c.pid) for c in self.children]
        self.barrier.wait()  # every driver is warm
        t = time.monotonic()
        done = 0
        while done < len(self.roles):
            while self.out.empty():
                java, total = _tree_rss(roots)
                self.peak_java, self.peak_total = (
                    max(self.peak_java, java),
                    max(self.peak_total, total),
                )
                time.sleep(0.1)
            self.out.get()
            done += 1
        self.walls.append(time.monotonic() - t)
        self.barrier.wait()

    def result(self) -> dict:
        for c in self.children:
            c.join()
        return {
            "wall": min(self.walls),
            "java": self.peak_java,
            "total": self.peak_total,
            "start": self.start,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--month", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--layouts", default="alone,processes,threads,slots")
    parser.add_argument("--warmups", type=int, default=1, help="ingestions before the rounds")
    parser.add_argument(
        "--slot-java", default=None, help="the slot drivers' JVM options (default: the product's)"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    work = args.work or Path(tempfile.mkdtemp(prefix="strata-slots-"))
    base, rows = build_input(work, args.month)
    print(f"{rows:,} rows per ingestion; {os.cpu_count()} cores; {args.repeat} rounds", flush=True)
    layouts = [Layout(name, args, base, work) for name in args.layouts.split(",")]
    for layout in layouts:
        layout.ready()
    print(f"load average {os.getloadavg()[0]:.1f} at the first round", flush=True)
    for _ in range(args.repeat):
        for layout in layouts:
            layout.round()
    print(f"load average {os.getloadavg()[0]:.1f} after the last round", flush=True)
    results = {}
    for layout in layouts:
        results[layout.name] = r = layout.result()
        print(
            f"{layout.name:10s} wall {r['wall']:6.2f} s   rounds "
            + " ".join(f"{w:.2f}" for w in layout.walls)
            + "   ",
            end="",
        )
        print(
            f"JVM RSS {r['java'] / 2**20:6.0f} MiB   "
            f"tree RSS {r['total'] / 2**20:6.0f} MiB   fresh session {r['start']:5.1f} s",
            flush=True,
        )
    _ratios(results)
    shutil.rmtree(work, ignore_errors=True)


def _ratios(results: dict[str, dict]) -> None:
    """Each pair against twice one alone and against the shared session's pair,
    where those layouts were measured."""
    alone = results.get("alone")
    shared = results.get("threads", {}).get("wall")
    for layout in [name for name in results if name != "alone"]:
        r = results[layout]
        parts = []
        if alone:
            parts.append(f"pair / (2 x alone) = {r['wall'] / (2 * alone['wall']):.2f}")
        if shared:
            parts.append(f"/ shared session's pair = {r['wall'] / shared:.2f}")
        if alone:
            parts.append(f"JVM RSS / alone's = {r['java'] / alone['java']:.2f}")
        print(f"{layout}: {'; '.join(parts) or 'no baseline measured'}")


if __name__ == "__main__":
    main()
