"""Benchmark: wide schemas. Strata's ingestion of 50 to 500 typed columns against
raw Spark reading the same file and writing Parquet, in the same SparkSession.

For each width and format (CSV; JSON whose values sit one level down, read with
a flattenSpec path field per column) it measures:

- planning: from the spec to the optimized plan of the rows the job runs
  (Strata: validate + `parse_input` + the observed rows; raw Spark: the typed
  read and its casts);
- total: Strata's ingestion job (`workers.jobs.ingest.run_ingest`, what a
  worker runs, without locking and publishing; dynamic partitioning, YEAR
  segments, no rollup) against raw Spark's read, casts and Parquet write
  partitioned by year.

Columns are typed round-robin string / long / double / float, timestamps
`MM/dd/yyyy`. A small run first warms the JVM up. Not a test: it prints
figures, asserts nothing.

    .venv/bin/python bench/wide.py [--rows 100000] [--widths 50,100,200,500] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metastore.druid.tasks import validate_task_spec  # noqa: E402
from workers.jobs.ingest import WRITE_OPTIONS, ingest_session, run_ingest  # noqa: E402
from workers.jobs.input_files import resolve_local_inputs  # noqa: E402
from workers.jobs.parsing import parse_input  # noqa: E402

TYPES = ("string", "long", "double", "float")
SPARK_TYPES = {"string": "string", "long": "bigint", "double": "double", "float": "float"}


def write_input(path: Path, fmt: str, columns: int, rows: int) -> None:
    rnd = random.Random(columns)
    names = [f"c{i}" for i in range(columns)]
    pools = {
        "string": [f"s{k}" for k in range(50)],
        "long": [str(k) for k in range(-500, 500)],
        "double": [f"{k / 8}" for k in range(1000)],
        "float": [f"{k / 4}" for k in range(1000)],
    }
    dates = [
        f"{m:02d}/{d:02d}/{y}" for y in (2019, 2020, 2021) for m in (1, 6, 11) for d in (3, 17)
    ]
    with open(path, "w") as out:
        if fmt == "csv":
            out.write(",".join(["ts", *names]) + "\n")
        for _ in range(rows):
            values = [rnd.choice(pools[TYPES[i % 4]]) for i in range(columns)]
            ts = rnd.choice(dates)
            if fmt == "csv":
                out.write(",".join([ts, *values]) + "\n")
            else:
                out.write(json.dumps({"ts": ts, "v": dict(zip(names, values, strict=True))}) + "\n")


def strata_spec(path: Path, fmt: str, columns: int) -> dict:
    if fmt == "csv":
        input_format = {"type": "csv", "findColumnsFromHeader": True}
    else:
        fields = [{"type": "path", "name": f"c{i}", "expr": f"$.v.c{i}"} for i in range(columns)]
        input_format = {
            "type": "json",
            "flattenSpec": {"useFieldDiscovery": False, "fields": fields},
        }
    dims = [{"type": TYPES[i % 4], "name": f"c{i}"} for i in range(columns)]
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": f"wide_{fmt}_{columns}",
                "timestampSpec": {"column": "ts", "format": "MM/dd/yyyy"},
                "dimensionsSpec": {"dimensions": dims},
                "granularitySpec": {
                    "segmentGranularity": "YEAR",
                    "queryGranularity": "NONE",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(path.parent), "filter": path.name},
                "inputFormat": input_format,
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
    }


def raw_frame(spark, path: Path, fmt: str, columns: int):
    """Raw Spark's typed read of the same file (what a hand-written job would do)."""
    from pyspark.sql import functions as F

    typed = ", ".join(f"c{i} {SPARK_TYPES[TYPES[i % 4]]}" for i in range(columns))
    if fmt == "csv":
        df = spark.read.schema(f"ts string, {typed}").option("header", "true").csv(str(path))
    else:
        df = spark.read.schema(f"ts string, v struct<{typed}>").json(str(path)).select("ts", "v.*")
    ts = F.to_timestamp("ts", "MM/dd/yyyy")
    return df.select(ts.alias("__time"), F.year(ts).alias("__year"), *df.columns[1:])


def strata_planning(spark, spec: dict, root: Path, work: Path) -> float:
    started = time.monotonic()
    ingestion = validate_task_spec(spec, input_roots=[root]).ingestion
    ingestion = resolve_local_inputs(ingestion, input_roots=[root])
    parsed = parse_input(ingest_session(spark), ingestion, scratch_dir=work)
    rows, _ = parsed.observed(f"plan-{time.monotonic_ns()}")
    rows._jdf.queryExecution().optimizedPlan()
    return time.monotonic() - started


def run_one(spark, work: Path, fmt: str, columns: int, rows: int) -> dict:
    data = work / f"{fmt}{columns}" / f"data.{fmt}"
    data.parent.mkdir(parents=True, exist_ok=True)
    write_input(data, fmt, columns, rows)
    spec = strata_spec(data, fmt, columns)
    out = {"strata_plan": strata_planning(spark, spec, work, work / "scratch")}
    started = time.monotonic()
    raw_frame(spark, data, fmt, columns)._jdf.queryExecution().optimizedPlan()
    out["raw_plan"] = time.monotonic() - started
    started = time.monotonic()
    raw = raw_frame(spark, data, fmt, columns)
    raw.write.mode("overwrite").options(**WRITE_OPTIONS).partitionBy("__year").parquet(
        str(work / "raw-out")
    )
    out["raw_total"] = time.monotonic() - started
    ingestion = validate_task_spec(spec, input_roots=[work]).ingestion
    ingestion = resolve_local_inputs(ingestion, input_roots=[work])
    started = time.monotonic()
    result = run_ingest(spark, ingestion, work_dir=work / "strata-out", job_group="bench-wide")
    out["strata_total"] = time.monotonic() - started
    assert result.report["rowsWritten"] == rows, result.report["rowStats"]
    shutil.rmtree(data.parent, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--widths", default="50,100,200,500")
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    from workers.spark import get_spark

    spark = get_spark()
    work = args.work or Path(tempfile.mkdtemp(prefix="strata-bench-wide-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"warming up under {work} ...", flush=True)
    run_one(spark, work, "csv", 20, 1000)
    run_one(spark, work, "json", 20, 1000)
    print(
        f"\n{args.rows:,} rows; seconds; ratio = Strata / raw Spark\n"
        f"{'format':<6} {'cols':>5} {'plan':>7} {'raw plan':>9} {'ratio':>6}"
        f" {'total':>8} {'raw total':>10} {'ratio':>6}",
        flush=True,
    )
    for fmt in ("csv", "json"):
        for columns in (int(w) for w in args.widths.split(",")):
            r = run_one(spark, work, fmt, columns, args.rows)
            print(
                f"{fmt:<6} {columns:>5} {r['strata_plan']:7.2f} {r['raw_plan']:9.2f}"
                f" {r['strata_plan'] / r['raw_plan']:6.1f} {r['strata_total']:8.1f}"
                f" {r['raw_total']:10.1f} {r['strata_total'] / r['raw_total']:6.2f}",
                flush=True,
            )
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
