"""Reading an ingestion spec's input and parsing it into typed rows (Spark).

`parse_input` turns the input (local files, inline data, or the visible rows of
an existing dataSource) into one DataFrame of rows ready to bucket and roll up:
`__time` (truncated to the query granularity), `__chunk` (start of the segment
granularity bucket, in epoch microseconds), the typed dimensions and one input
column per metric. Rows that fail to parse or are thrown away (outside the
intervals, or rejected by the filter) are counted by an `Observation` attached
to each action, so counting costs no extra pass.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from metastore.intervals import Granularity, Interval
from metastore.specs import IngestionSpec, Metric

CORRUPT = "_corrupt_record"
_FIXED_SECONDS = {
    "FIVE_MINUTE": 300,
    "FIFTEEN_MINUTE": 900,
    "THIRTY_MINUTE": 1800,
    "SIX_HOUR": 21600,
}
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
_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double")
_DISCOVERED = {t: "long" for t in _NUMERIC[:4]} | {"float": "double", "double": "double"}


class ParseExceptionsExceeded(Exception):
    """More rows failed to parse than `maxParseExceptions` allows."""

    def __init__(self, message: str, *, row_stats: dict, samples: list[dict]) -> None:
        super().__init__(message)
        self.row_stats = row_stats
        self.samples = samples


@dataclass(frozen=True)
class SourcePiece:
    """Part of an existing segment to re-ingest: its file, its interval, and the
    part of time where it is visible (the rows to keep)."""

    location: str
    segment: Interval
    visible: Interval


@dataclass(frozen=True)
class MetricInput:
    """How one metric is fed: the column holding its per-row input and what it is.

    kind: "rows" (count input rows), "count" (a count column of already rolled-up
    rows: summed), "value" (a number), "distinct" (a value to sketch) or
    "sketch" (an HLL sketch to union).
    """

    metric: Metric
    column: str | None
    kind: str


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


def chunk_of(micros: int, segment_granularity: str) -> Interval:
    """The segment-granularity bucket whose start is `micros` (epoch microseconds)."""
    from datetime import timedelta

    return Granularity.from_name(segment_granularity).bucket(
        _EPOCH + timedelta(microseconds=micros)
    )


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


def timestamp_col(raw, fmt: str, dtype: str = "string"):
    """Parse a column to a timestamp; null when it does not parse."""
    from pyspark.sql import functions as F

    if dtype in ("timestamp", "timestamp_ntz", "date"):
        return raw.cast("timestamp")
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


def number_col(raw, kind: str, dtype: str = "string"):
    """(parsed value, error flag): 'long' or 'double'; '' and null are null without error."""
    from pyspark.sql import functions as F

    if dtype in _NUMERIC:
        return raw.cast(kind), F.lit(False)
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


def read_files(spark, spec: IngestionSpec, scratch: Path):
    """(raw DataFrame, bytes read, files) of a local or inline input. Columns are
    strings (parquet keeps its types); a `_corrupt_record` column marks malformed rows."""
    from pyspark.sql import types as T

    files = _input_files(spec, scratch)
    bytes_read = sum(os.path.getsize(f) for f in files)
    fmt = spec.input.format
    if fmt == "parquet":
        return spark.read.parquet(*files), bytes_read, files
    if fmt == "json":
        reader = spark.read.option("mode", "PERMISSIVE").option(
            "columnNameOfCorruptRecord", CORRUPT
        )
        if spec.schemaless:
            df = reader.option("primitivesAsString", "true").json(files)
        else:
            wanted = [spec.timestamp_column]
            wanted += [d.name for d in spec.dimensions]
            wanted += [m.field_name for m in spec.metrics if m.field_name]
            wanted += sorted(_filter_dimensions(spec.filter))
            schema = T.StructType(
                [T.StructField(name, T.StringType()) for name in dict.fromkeys(wanted)]
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


def read_segments(spark, pieces: Sequence[SourcePiece], interval: Interval):
    """(raw DataFrame, bytes read, files) of the visible rows of existing segments.

    `pieces` come from the timeline: a file may be visible for only parts of its
    interval (partial overshadowing), so each file is read with a filter on
    `__time` to its visible parts (and the druid input's interval). Files visible
    over all of their part of `interval` share one scan.
    """
    from functools import reduce

    from pyspark.sql import functions as F

    visible: dict[str, list[Interval]] = {}
    segment_of: dict[str, Interval] = {}
    for piece in pieces:
        visible.setdefault(piece.location, []).append(piece.visible)
        segment_of[piece.location] = piece.segment
    files = sorted(visible)
    if not files:
        return None, 0, []
    bytes_read = sum(os.path.getsize(f) for f in files)

    def within(intervals: Sequence[Interval]):
        cond = F.lit(False)
        for iv in intervals:
            cond = cond | ((F.col("__time") >= F.lit(iv.start)) & (F.col("__time") < F.lit(iv.end)))
        return cond

    groups: dict[tuple[Interval, ...], list[str]] = {}
    for location in files:
        whole = segment_of[location].intersection(interval)
        shown = sorted(visible[location])
        key = (interval,) if shown == [whole] else tuple(shown)
        groups.setdefault(key, []).append(location)
    frames = [
        spark.read.option("mergeSchema", "true").parquet(*locations).filter(within(key))
        for key, locations in sorted(groups.items())
    ]
    df = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    return df, bytes_read, files


# --- parsing -----------------------------------------------------------------------


@dataclass
class ParsedInput:
    """The parsed input. `rows` holds the good rows; `observed(name)` gives the same
    rows with an Observation counting row stats over one action."""

    parsed: object  # DataFrame with __ts, __unparseable, __reason, __thrown, dims, inputs
    dimensions: list[tuple[str, str]]  # (name, type)
    metric_inputs: list[MetricInput]
    bytes_read: int
    input_files: int
    spec: IngestionSpec

    @property
    def dimension_names(self) -> list[str]:
        return [name for name, _ in self.dimensions]

    def observed(self, name: str):
        """(good rows, Observation with total/unparseable/thrownAway/processedWithError)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        observation = Observation(name)
        parsed = self.parsed.observe(
            observation,
            F.count(F.lit(1)).alias("total"),
            F.sum(F.col("__unparseable").cast("long")).alias("unparseable"),
            F.sum((~F.col("__unparseable") & F.col("__thrown")).cast("long")).alias("thrownAway"),
            F.sum(
                (~F.col("__unparseable") & ~F.col("__thrown") & F.col("__reason").isNotNull()).cast(
                    "long"
                )
            ).alias("processedWithError"),
        )
        return self._good(parsed), observation

    def _good(self, parsed):
        from pyspark.sql import functions as F

        spec = self.spec
        good = parsed.filter(~F.col("__unparseable") & ~F.col("__thrown"))
        return good.select(
            truncate_col(F.col("__ts"), spec.query_granularity).alias("__time"),
            F.unix_micros(truncate_col(F.col("__ts"), spec.segment_granularity)).alias("__chunk"),
            *[F.col(f"`{n}`") for n in self.dimension_names],
            *[F.col(m.column) for m in self.metric_inputs if m.column],
        )

    def error_samples(self, limit: int) -> list[dict]:
        """Up to `limit` rows that failed to parse or parsed with errors (an extra pass)."""
        from pyspark.sql import functions as F

        if limit <= 0:
            return []
        rows = (
            self.parsed.filter(
                F.col("__reason").isNotNull() & (F.col("__unparseable") | ~F.col("__thrown"))
            )
            .select("__reason")
            .limit(limit)
            .collect()
        )
        return [{"reason": r["__reason"]} for r in rows]


def row_stats(observation) -> dict:
    stats = observation.get
    total = int(stats.get("total") or 0)
    unparseable = int(stats.get("unparseable") or 0)
    thrown = int(stats.get("thrownAway") or 0)
    with_error = int(stats.get("processedWithError") or 0)
    return {
        "processed": total - unparseable - thrown - with_error,
        "processedWithError": with_error,
        "thrownAway": thrown,
        "unparseable": unparseable,
    }


def check_parse_exceptions(spec: IngestionSpec, stats: dict, parsed: ParsedInput) -> list[dict]:
    """Samples of the parse errors; raises `ParseExceptionsExceeded` past the limit."""
    errors = stats["unparseable"] + stats["processedWithError"]
    if not errors:
        return []
    samples = parsed.error_samples(spec.max_saved_parse_exceptions)
    if errors > spec.max_parse_exceptions:
        shown = "; ".join(s["reason"] for s in samples[:5]) or "(none saved)"
        raise ParseExceptionsExceeded(
            f"{errors} rows had parse errors ({stats['unparseable']} unparseable, "
            f"{stats['processedWithError']} with errors), more than maxParseExceptions="
            f"{spec.max_parse_exceptions}. Samples: {shown}",
            row_stats=stats,
            samples=samples,
        )
    return samples


def parse_input(
    spark,
    spec: IngestionSpec,
    *,
    scratch_dir: Path,
    source_pieces: Sequence[SourcePiece] = (),
) -> ParsedInput | None:
    """Read and parse the input; None when a druid input has no visible rows."""
    from pyspark.sql import functions as F

    if spec.input.type == "druid":
        raw, bytes_read, files = read_segments(spark, source_pieces, spec.input.interval)
        if raw is None:
            return None
    else:
        raw, bytes_read, files = read_files(spark, spec, scratch_dir)
    types = dict(raw.dtypes)

    def col_of(name: str):
        return F.col(f"`{name}`") if name in types else F.lit(None).cast("string")

    # Timestamp
    ts_name = "__time" if spec.input.type == "druid" else spec.timestamp_column
    ts_raw = col_of(ts_name)
    ts = timestamp_col(ts_raw, spec.timestamp_format, types.get(ts_name, "string"))
    if spec.timestamp_missing_value is not None:
        missing = F.lit(spec.timestamp_missing_value).try_cast("timestamp")
        ts = F.when(ts_raw.isNull() | (F.trim(ts_raw.cast("string")) == ""), missing).otherwise(ts)
    corrupt = col_of(CORRUPT).isNotNull() if CORRUPT in types else F.lit(False)

    # Dimensions
    if spec.schemaless:
        reserved = {ts_name, "__time", CORRUPT, *spec.dimension_exclusions}
        reserved |= {m.field_name for m in spec.metrics if m.field_name}
        reserved |= {m.name for m in spec.metrics}
        # Discovered dimensions keep a numeric type (re-ingested segments, parquet).
        dims = [
            (name, _DISCOVERED.get(types[name], "string"))
            for name in raw.columns
            if name not in reserved
        ]
    else:
        dims = [
            (d.name, d.type) for d in spec.dimensions if d.name not in spec.dimension_exclusions
        ]
    dim_exprs, errors = [], []
    for name, dtype in dims:
        if dtype == "string":
            dim_exprs.append(col_of(name).cast("string").alias(name))
        else:
            value, bad = number_col(col_of(name), dtype, types.get(name, "string"))
            dim_exprs.append(value.alias(name))
            errors.append(F.when(bad, F.lit(f"{name} is not a {dtype}")))

    # Metric inputs
    inputs: list[MetricInput] = []
    input_exprs = []
    for i, m in enumerate(spec.metrics):
        alias = f"__m{i}"
        if m.type == "count":
            # Re-ingesting rolled-up rows: a count sums the existing count column.
            if spec.input.type == "druid" and types.get(m.name) in _NUMERIC:
                input_exprs.append(col_of(m.name).cast("long").alias(alias))
                inputs.append(MetricInput(m, alias, "count"))
            else:
                inputs.append(MetricInput(m, None, "rows"))
            continue
        if m.type == "hyperUnique":
            if types.get(m.field_name) == "binary":  # already a sketch: union it
                input_exprs.append(col_of(m.field_name).alias(alias))
                inputs.append(MetricInput(m, alias, "sketch"))
            else:
                input_exprs.append(col_of(m.field_name).cast("string").alias(alias))
                inputs.append(MetricInput(m, alias, "distinct"))
            continue
        kind = "long" if m.type.startswith("long") else "double"
        value, bad = number_col(col_of(m.field_name), kind, types.get(m.field_name, "string"))
        input_exprs.append(value.alias(alias))
        inputs.append(MetricInput(m, alias, "value"))
        errors.append(F.when(bad, F.lit(f"{m.field_name} is not a {kind}")))

    unparseable = corrupt | ts.isNull()
    field_error = F.concat_ws("; ", *errors) if errors else F.lit("")
    reason = (
        F.when(corrupt, F.lit("malformed row"))
        .when(
            ts.isNull(),
            F.concat(
                F.lit("unparseable timestamp: "), F.coalesce(ts_raw.cast("string"), F.lit("null"))
            ),
        )
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
        *input_exprs,
    )
    return ParsedInput(
        parsed=parsed,
        dimensions=dims,
        metric_inputs=inputs,
        bytes_read=bytes_read,
        input_files=len(files),
        spec=spec,
    )
