"""Batch ingestion on Spark: read, parse, filter, bucket, roll up, partition, write.

A plain function of (validated spec, input, scratch paths) -> staged segments and
a report. It never touches the ORM; the caller takes locks, allocates versions
and partition numbers, moves the staged files into deep storage and publishes.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from metastore.intervals import Granularity, Interval
from metastore.specs import IngestionSpec

CORRUPT = "_corrupt_record"
_FIXED_SECONDS = {"FIVE_MINUTE": 300, "FIFTEEN_MINUTE": 900, "THIRTY_MINUTE": 1800, "SIX_HOUR": 21600}
_DATE_TRUNC = {
    "SECOND": "second",
    "MINUTE": "minute",
    "HOUR": "hour",
    "DAY": "day",
    "WEEK": "week",
    "MONTH": "month",
    "QUARTER": "quarter",
    "YEAR": "year",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ParseExceptionsExceeded(Exception):
    """More rows failed to parse than `maxParseExceptions` allows."""


@dataclass
class StagedSegment:
    chunk: Interval
    index: int  # 0-based partition index inside the chunk
    path: str  # the Parquet file
    num_rows: int
    size_bytes: int
    shard_spec: dict = field(default_factory=dict)


@dataclass
class IngestResult:
    segments: list[StagedSegment]
    chunks_with_rows: list[Interval]
    report: dict


# --- column expressions ----------------------------------------------------------


def truncate_col(col, granularity: str):
    """Spark expression truncating a timestamp column to a granularity (UTC)."""
    from pyspark.sql import functions as F

    if granularity == "NONE":
        return col
    if granularity == "ALL":
        return F.lit(Granularity.from_name("ALL").truncate(_EPOCH)).cast("timestamp")
    if granularity in _DATE_TRUNC:
        return F.date_trunc(_DATE_TRUNC[granularity], col)
    step = _FIXED_SECONDS[granularity]
    return F.timestamp_seconds(F.floor(F.unix_seconds(col) / step) * step)


_STRFTIME = {
    "%Y": "yyyy",
    "%m": "MM",
    "%d": "dd",
    "%H": "HH",
    "%M": "mm",
    "%S": "ss",
    "%f": "SSSSSS",
    "%y": "yy",
    "%b": "MMM",
    "%B": "MMMM",
    "%j": "DDD",
    "%z": "Z",
    "%p": "a",
    "%I": "hh",
    "%%": "%",
}


def java_pattern(pattern: str) -> str:
    """A Spark (java.time) pattern from a Joda/Java or strftime-style pattern."""
    if "%" not in pattern:
        return pattern
    out, i = [], 0
    while i < len(pattern):
        token = pattern[i : i + 2]
        if token in _STRFTIME:
            out.append(_STRFTIME[token])
            i += 2
        else:
            ch = pattern[i]
            out.append(f"'{ch}'" if ch.isalpha() else ch)
            i += 1
    return "".join(out)


def timestamp_col(raw, fmt: str):
    """Parse a string column to a timestamp; null when it does not parse."""
    from pyspark.sql import functions as F

    text = F.trim(raw.cast("string"))
    if fmt == "iso":
        return text.try_cast("timestamp")
    as_long = text.try_cast("long")
    if fmt == "millis":
        return F.timestamp_millis(as_long)
    if fmt == "posix":
        return F.timestamp_seconds(as_long)
    if fmt == "nano":
        return F.timestamp_micros(F.floor(as_long / 1000))
    if fmt == "auto":
        return F.when(text.rlike(r"^-?\d+$"), F.timestamp_millis(as_long)).otherwise(
            text.try_cast("timestamp")
        )
    return F.try_to_timestamp(text, F.lit(java_pattern(fmt)))


def number_col(raw, kind: str):
    """(parsed value, error flag): 'long' or 'double'; '' and null are null without error."""
    from pyspark.sql import functions as F

    text = F.trim(raw.cast("string"))
    if kind == "long":
        value = F.coalesce(text.try_cast("long"), text.try_cast("double").try_cast("long"))
    else:
        value = text.try_cast("double")
    present = raw.isNotNull() & (text != F.lit(""))
    return value, present & value.isNull()


def filter_col(flt: dict, col_of: Callable):
    """A Druid filter (selector, in, bound, and, or, not) as a Spark boolean column."""
    from pyspark.sql import functions as F

    kind = flt["type"]
    if kind == "and":
        out = F.lit(True)
        for sub in flt["fields"]:
            out = out & filter_col(sub, col_of)
        return out
    if kind == "or":
        out = F.lit(False)
        for sub in flt["fields"]:
            out = out | filter_col(sub, col_of)
        return out
    if kind == "not":
        return ~F.coalesce(filter_col(flt["field"], col_of), F.lit(False))
    value = col_of(flt["dimension"]).cast("string")
    if kind == "selector":
        target = flt.get("value")
        return value.isNull() if target is None else F.coalesce(value == str(target), F.lit(False))
    if kind == "in":
        values = [v for v in flt["values"] if v is not None]
        cond = value.isin([str(v) for v in values])
        if len(values) != len(flt["values"]):
            cond = cond | value.isNull()
        return F.coalesce(cond, F.lit(False))
    # bound
    numeric = flt.get("ordering") == "numeric"
    subject = value.try_cast("double") if numeric else value
    cond = F.lit(True)
    if flt.get("lower") is not None:
        lower = F.lit(float(flt["lower"])) if numeric else F.lit(str(flt["lower"]))
        cond = cond & ((subject > lower) if flt.get("lowerStrict") else (subject >= lower))
    if flt.get("upper") is not None:
        upper = F.lit(float(flt["upper"])) if numeric else F.lit(str(flt["upper"]))
        cond = cond & ((subject < upper) if flt.get("upperStrict") else (subject <= upper))
    return F.coalesce(cond, F.lit(False))


def _filter_dimensions(flt: dict | None) -> set[str]:
    if not flt:
        return set()
    if flt["type"] in ("and", "or"):
        return set().union(*(_filter_dimensions(f) for f in flt["fields"]))
    if flt["type"] == "not":
        return _filter_dimensions(flt["field"])
    return {flt["dimension"]}


# --- reading -----------------------------------------------------------------------


def _input_files(spec: IngestionSpec, scratch: Path) -> list[str]:
    inp = spec.input
    if inp.type == "inline":
        target = scratch / "input" / f"inline.{inp.format}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(inp.data if inp.data.endswith("\n") else inp.data + "\n")
        return [str(target)]
    return list(inp.files)


def _csv_header(path: str) -> list[str]:
    with open(path, newline="", encoding="utf-8") as fh:
        first = fh.readline()
    return next(csv.reader(io.StringIO(first)), [])


def read_input(spark, spec: IngestionSpec, scratch: Path):
    """The raw input as a DataFrame plus the bytes read. Columns are strings
    (parquet keeps its types); a `_corrupt_record` column marks malformed rows."""
    from pyspark.sql import types as T

    files = _input_files(spec, scratch)
    bytes_read = sum(os.path.getsize(f) for f in files)
    fmt = spec.input.format
    wanted = [spec.timestamp_column]
    wanted += [d.name for d in spec.dimensions]
    wanted += [m.field_name for m in spec.metrics if m.field_name]
    wanted += sorted(_filter_dimensions(spec.filter))
    wanted = list(dict.fromkeys(wanted))
    if fmt == "parquet":
        return spark.read.parquet(*files), bytes_read, files
    if fmt == "json":
        reader = spark.read.option("mode", "PERMISSIVE").option(
            "columnNameOfCorruptRecord", CORRUPT
        )
        if spec.schemaless:
            df = reader.option("primitivesAsString", "true").json(files)
        else:
            schema = T.StructType(
                [T.StructField(name, T.StringType()) for name in wanted]
                + [T.StructField(CORRUPT, T.StringType())]
            )
            df = reader.schema(schema).json(files)
        return df, bytes_read, files
    # csv
    if spec.input.csv_columns is not None:
        columns = list(spec.input.csv_columns)
        header = spec.input.csv_skip_header_rows > 0
    else:
        columns = _csv_header(files[0])
        header = True
    schema = T.StructType(
        [T.StructField(name, T.StringType()) for name in columns]
        + [T.StructField(CORRUPT, T.StringType())]
    )
    df = (
        spark.read.option("header", str(header).lower())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("enforceSchema", "true")
        .schema(schema)
        .csv(files)
    )
    return df, bytes_read, files


# --- the job -----------------------------------------------------------------------


def run_ingest(
    spark,
    spec: IngestionSpec,
    *,
    scratch_dir: Path,
    job_group: str,
    on_phase: Callable[[str], None] = lambda phase: None,
) -> IngestResult:
    """Ingest `spec`'s input into staged segment files under `scratch_dir/staged`.

    Raises `ParseExceptionsExceeded` (after removing what it wrote) when more
    rows fail to parse than `maxParseExceptions`.
    """
    from pyspark.sql import Observation, Window
    from pyspark.sql import functions as F

    started = time.monotonic()
    scratch_dir.mkdir(parents=True, exist_ok=True)
    spark.sparkContext.setJobGroup(job_group, f"strata task {job_group}", interruptOnCancel=True)
    spark.sparkContext.addJobTag(job_group)
    on_phase("reading")
    raw, bytes_read, files = read_input(spark, spec, scratch_dir)
    columns = set(raw.columns)

    def col_of(name: str):
        return F.col(f"`{name}`") if name in columns else F.lit(None).cast("string")

    # Timestamp
    ts_raw = col_of(spec.timestamp_column)
    ts = timestamp_col(ts_raw, spec.timestamp_format)
    if spec.timestamp_missing_value is not None:
        missing = F.lit(spec.timestamp_missing_value).try_cast("timestamp")
        ts = F.when(ts_raw.isNull() | (F.trim(ts_raw.cast("string")) == ""), missing).otherwise(ts)
    corrupt = col_of(CORRUPT).isNotNull() if CORRUPT in columns else F.lit(False)

    # Dimensions
    if spec.schemaless:
        reserved = {spec.timestamp_column, CORRUPT, *spec.dimension_exclusions}
        reserved |= {m.field_name for m in spec.metrics if m.field_name}
        reserved |= {m.name for m in spec.metrics}
        dims = [(name, "string") for name in raw.columns if name not in reserved]
    else:
        dims = [(d.name, d.type) for d in spec.dimensions if d.name not in spec.dimension_exclusions]
    dim_exprs, errors = [], []
    for name, dtype in dims:
        if dtype == "string":
            dim_exprs.append(col_of(name).cast("string").alias(name))
        else:
            value, bad = number_col(col_of(name), dtype)
            dim_exprs.append(value.alias(name))
            errors.append(F.when(bad, F.lit(f"{name} is not a {dtype}")))
    metric_inputs = []
    for i, m in enumerate(spec.metrics):
        if m.type == "count":
            continue
        alias = f"__m{i}"
        if m.type == "hyperUnique":
            metric_inputs.append(col_of(m.field_name).cast("string").alias(alias))
            continue
        kind = "long" if m.type.startswith("long") else "double"
        value, bad = number_col(col_of(m.field_name), kind)
        metric_inputs.append(value.alias(alias))
        errors.append(F.when(bad, F.lit(f"{m.field_name} is not a {kind}")))

    unparseable = corrupt | ts.isNull()
    field_error = F.concat_ws("; ", *errors) if errors else F.lit("")
    reason = (
        F.when(corrupt, F.lit("malformed row"))
        .when(ts.isNull(), F.concat(F.lit("unparseable timestamp: "), F.coalesce(ts_raw.cast("string"), F.lit("null"))))
        .when(field_error != "", field_error)
    )
    thrown = F.lit(False)
    if spec.intervals:
        inside = F.lit(False)
        for iv in spec.intervals:
            inside = inside | ((ts >= F.lit(iv.start)) & (ts < F.lit(iv.end)))
        thrown = thrown | ~inside
    if spec.filter:
        thrown = thrown | ~filter_col(spec.filter, col_of)

    parsed = raw.select(
        ts.alias("__ts"),
        unparseable.alias("__unparseable"),
        reason.alias("__reason"),
        thrown.alias("__thrown"),
        *dim_exprs,
        *metric_inputs,
    )
    observation = Observation(f"stats_{job_group}")
    parsed = parsed.observe(
        observation,
        F.count(F.lit(1)).alias("total"),
        F.sum(F.col("__unparseable").cast("long")).alias("unparseable"),
        F.sum((~F.col("__unparseable") & F.col("__thrown")).cast("long")).alias("thrownAway"),
        F.sum(
            (~F.col("__unparseable") & ~F.col("__thrown") & F.col("__reason").isNotNull()).cast("long")
        ).alias("processedWithError"),
    )
    good = parsed.filter(~F.col("__unparseable") & ~F.col("__thrown"))
    dim_names = [name for name, _ in dims]
    good = good.select(
        truncate_col(F.col("__ts"), spec.query_granularity).alias("__time"),
        F.unix_micros(truncate_col(F.col("__ts"), spec.segment_granularity)).alias("__chunk"),
        *[F.col(f"`{n}`") for n in dim_names],
        *[F.col(f"__m{i}") for i, m in enumerate(spec.metrics) if m.type != "count"],
    )
    aggs = []
    for i, m in enumerate(spec.metrics):
        src = F.col(f"__m{i}")
        if m.type == "count":
            aggs.append(F.count(F.lit(1)).alias(m.name))
        elif m.type in ("longSum", "doubleSum"):
            aggs.append(F.coalesce(F.sum(src), F.lit(0).cast(src_type(m))).alias(m.name))
        elif m.type.endswith("Min"):
            aggs.append(F.min(src).alias(m.name))
        elif m.type.endswith("Max"):
            aggs.append(F.max(src).alias(m.name))
        elif m.type == "hyperUnique":
            aggs.append(F.hll_sketch_agg(src).alias(m.name))
    group_cols = ["__chunk", "__time", *dim_names]
    if not spec.rollup:
        good = good.withColumn("__row", F.monotonically_increasing_id())
        group_cols.append("__row")
    rolled = good.groupBy(*[F.col(f"`{c}`") for c in group_cols]).agg(*aggs)
    if "__row" in group_cols:
        rolled = rolled.drop("__row")

    on_phase("partitioning")
    max_rows = spec.partitions.max_rows_per_segment
    window = Window.partitionBy("__chunk").orderBy("__time")
    partitioned = rolled.withColumn(
        "__partition", F.floor((F.row_number().over(window) - 1) / max_rows).cast("int")
    )
    ordered = [F.col("__time"), *[F.col(f"`{n}`") for n in dim_names]]
    ordered += [F.col(f"`{m.name}`") for m in spec.metrics]
    ordered += [F.col("__chunk"), F.col("__partition")]
    staged_dir = scratch_dir / "staged"
    phase1_started = time.monotonic()
    on_phase("writing")
    partitioned.select(*ordered).write.mode("overwrite").partitionBy("__chunk", "__partition").parquet(
        str(staged_dir)
    )
    written_at = time.monotonic()
    stats = observation.get
    total = int(stats.get("total") or 0)
    unparse = int(stats.get("unparseable") or 0)
    thrown_away = int(stats.get("thrownAway") or 0)
    with_error = int(stats.get("processedWithError") or 0)
    samples: list[dict] = []
    if unparse + with_error:
        rows = (
            parsed.filter(F.col("__reason").isNotNull() & (F.col("__unparseable") | ~F.col("__thrown")))
            .select("__reason")
            .limit(max(spec.max_saved_parse_exceptions, 1))
            .collect()
        )
        samples = [{"reason": r["__reason"]} for r in rows][: spec.max_saved_parse_exceptions]
    row_stats = {
        "processed": total - unparse - thrown_away - with_error,
        "processedWithError": with_error,
        "thrownAway": thrown_away,
        "unparseable": unparse,
    }
    if unparse + with_error > spec.max_parse_exceptions:
        shutil.rmtree(staged_dir, ignore_errors=True)
        shown = "; ".join(s["reason"] for s in samples[:5])
        raise ParseExceptionsExceeded(
            f"{unparse + with_error} rows had parse errors ({unparse} unparseable, "
            f"{with_error} with errors), more than maxParseExceptions="
            f"{spec.max_parse_exceptions}. Samples: {shown}"
        )
    segments = collect_staged(staged_dir, spec.segment_granularity)
    chunks = sorted({s.chunk for s in segments}, key=lambda iv: iv.start)
    ended = time.monotonic()
    report = {
        "rowStats": row_stats,
        "parseExceptionSamples": samples,
        "phases": {
            "read_parse_partition_write": round(written_at - phase1_started + (phase1_started - started), 3),
            "collect": round(ended - written_at, 3),
        },
        "ingest/task/bytes/processed": bytes_read,
        "ingest/shuffle/bytes": 0,
        "ingest/shuffle/requests": 0,
        "inputFiles": len(files),
        "partitionsPerChunk": {
            str(c): sum(1 for s in segments if s.chunk == c) for c in chunks[:1000]
        },
        "bytesWritten": sum(s.size_bytes for s in segments),
        "rowsWritten": sum(s.num_rows for s in segments),
    }
    return IngestResult(segments=segments, chunks_with_rows=chunks, report=report)


def src_type(metric) -> str:
    return "long" if metric.type.startswith("long") else "double"


def collect_staged(staged_dir: Path, segment_granularity: str) -> list[StagedSegment]:
    """The staged Parquet files, one per (chunk, partition), with their row counts."""
    import pyarrow.parquet as pq

    gran = Granularity.from_name(segment_granularity)
    out: list[StagedSegment] = []
    if not staged_dir.exists():
        return out
    for chunk_dir in sorted(staged_dir.glob("__chunk=*")):
        micros = int(chunk_dir.name.split("=", 1)[1])
        start = _EPOCH + timedelta(microseconds=micros)
        chunk = gran.bucket(start)
        for part_dir in sorted(chunk_dir.glob("__partition=*"), key=lambda p: int(p.name.split("=")[1])):
            index = int(part_dir.name.split("=", 1)[1])
            files = sorted(p for p in part_dir.glob("*.parquet"))
            if not files:
                continue
            if len(files) > 1:  # one file per segment: merge the rare split
                import pyarrow as pa

                table = pa.concat_tables([pq.read_table(f) for f in files])
                merged = part_dir / "merged.parquet"
                pq.write_table(table, merged)
                for f in files:
                    f.unlink()
                files = [merged]
            meta = pq.read_metadata(files[0])
            out.append(
                StagedSegment(
                    chunk=chunk,
                    index=index,
                    path=str(files[0]),
                    num_rows=meta.num_rows,
                    size_bytes=os.path.getsize(files[0]),
                )
            )
    return out
