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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from metastore.druid_expr import translate
from metastore.intervals import ETERNITY, Granularity, Interval
from metastore.specs import FIRST_LAST_TYPES, IngestionSpec, InputSpec, Metric, SpecError

CORRUPT = "_corrupt_record"
EXTRA = "__extra_column_"  # values past a csv/tsv's named columns
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
# Booleans are longs 1/0 in Druid (druid.expressions.useStrictBooleans, the default).
_DISCOVERED = {t: "long" for t in (*_NUMERIC[:4], "boolean")} | {
    "float": "double",
    "double": "double",
}
# A JSON array of booleans (and nulls) only, as text: stored as Druid's ARRAY<LONG>.
_BOOLEAN_ARRAY = r"^\[\s*(true|false|null)(\s*,\s*(true|false|null))*\s*\]$"


class ParseExceptionsExceeded(Exception):
    """More rows failed to parse than `maxParseExceptions` allows."""

    def __init__(self, message: str, *, row_stats: dict, samples: list[dict]) -> None:
        super().__init__(message)
        self.row_stats = row_stats
        self.samples = samples


@dataclass(frozen=True)
class SourcePiece:
    """Part of an existing segment to re-ingest: its file, the interval its file's
    rows lie in (see `file_extent`), and the part of time where it is visible
    (the rows to keep)."""

    location: str
    segment: Interval
    visible: Interval


def file_extent(interval: Interval, upgraded_from: str) -> Interval:
    """Where a segment's file may hold rows: its interval, except for an upgraded
    copy, which shares its source's file (possibly wider than the copy's own
    chunk), so it is read only by its visible pieces."""
    return ETERNITY if upgraded_from else interval


@dataclass(frozen=True)
class MetricInput:
    """How one metric is fed: the column holding its per-row input and what it is.

    kind: "rows" (count input rows), "count" (a count column of already rolled-up
    rows: summed), "value" (a number), "distinct" (a value to HLL-sketch),
    "sketch" (an HLL sketch to union), "theta" / "theta_union" (a value to
    theta-sketch / theta sketches to union), "kll" / "kll_merge" (a double to
    put in a KLL quantiles sketch / KLL sketches to merge), or "pair" (a
    first/last metric's struct<time: epoch millis, value>).
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

    if dtype in (*_NUMERIC, "boolean"):  # a boolean is a long 1/0, as in Druid
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


def text_col(col, dtype: str):
    """A column as Druid would show it as a string: an integral double without
    `.0` (JSON numbers read as text and multiplied come back as doubles), arrays
    and structs as JSON text."""
    from pyspark.sql import functions as F

    if dtype in ("double", "float"):
        out = F.when(
            (col == F.floor(col)) & (F.abs(col) < F.lit(1e15)),
            col.cast("long").cast("string"),
        ).otherwise(col.cast("string"))
    elif dtype.startswith(("array", "struct", "map")):
        out = F.to_json(col)
    else:
        out = col.cast("string")
    return out


def _filter_dimensions(flt: dict | None) -> set[str]:
    if not flt:
        return set()
    if flt["type"] in ("and", "or"):
        return set().union(*(_filter_dimensions(f) for f in flt["fields"]))
    if flt["type"] == "not":
        return _filter_dimensions(flt["field"])
    return {flt["dimension"]}


# --- reading -----------------------------------------------------------------------


def _input_files(inp: InputSpec, scratch: Path, number: int = 0) -> list[str]:
    if inp.type == "inline":
        target = scratch / "input" / f"inline{number or ''}.{inp.format}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(inp.data if inp.data.endswith("\n") else inp.data + "\n")
        return [str(target)]
    return list(inp.files)


def _csv_header(path: str, delimiter: str = ",") -> list[str]:
    import gzip

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="", encoding="utf-8") as fh:
        first = fh.readline()
    return next(csv.reader(io.StringIO(first), delimiter=delimiter), [])


_PATH_STEP = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")
_PATH_FUNCTION = re.compile(r"\.(length|min|max|sum|avg)\(\)$")


def _path_steps(expr: str) -> tuple[list[str | int], str | None]:
    """JSONPath `$...` as steps (keys and indexes) and a trailing function."""
    function = None
    m = _PATH_FUNCTION.search(expr)
    if m:
        function, expr = m.group(1), expr[: m.start()]
    steps: list[str | int] = []
    for key, index, quoted, dquoted in _PATH_STEP.findall(expr[1:]):
        if index:
            steps.append(int(index))
        else:
            steps.append(key or quoted or dquoted)
    return steps, function


def _wanted_columns(spec: IngestionSpec, inp: InputSpec) -> list[str]:
    """The top-level input fields a spec reads (for a JSON schema)."""
    wanted = [spec.timestamp_column]
    wanted += [d.name for d in spec.dimensions]
    wanted += [m.field_name for m in spec.metrics if m.field_name]
    wanted += sorted(_filter_dimensions(spec.filter))
    for t in spec.transforms:
        wanted += list(t.columns)
    produced = {f.name for f in inp.flatten if f.kind == "path"}
    wanted = [w for w in wanted if w not in produced]
    for f in inp.flatten:
        steps, _ = _path_steps(f.expr) if f.kind == "path" else ([f.expr], None)
        if steps and isinstance(steps[0], str):
            wanted.append(steps[0])
    return list(dict.fromkeys(wanted))


def _discovers(spec: IngestionSpec) -> bool:
    """Whether the input's own fields decide (some of) the dimensions."""
    return spec.schemaless or spec.include_all_dimensions


def read_files(
    spark, spec: IngestionSpec, scratch: Path, inp: InputSpec | None = None, number: int = 0
):
    """(raw DataFrame, bytes read, files) of a local or inline input. Columns are
    strings (parquet keeps its types; so does JSON under useSchemaDiscovery); a
    `_corrupt_record` column marks malformed rows. flattenSpec fields are added."""
    from pyspark.sql import types as T

    inp = inp or spec.input
    files = _input_files(inp, scratch, number)
    bytes_read = sum(os.path.getsize(f) for f in files)
    fmt = inp.format
    if fmt == "parquet":
        return spark.read.parquet(*files), bytes_read, files
    if fmt == "json":
        reader = spark.read.option("mode", "PERMISSIVE").option(
            "columnNameOfCorruptRecord", CORRUPT
        )
        discover = _discovers(spec) or (inp.flatten and inp.use_field_discovery and spec.schemaless)
        if discover:
            if not spec.schema_discovery:
                reader = reader.option("primitivesAsString", "true")
            df = reader.json(files)
        else:
            schema = T.StructType(
                [T.StructField(name, T.StringType()) for name in _wanted_columns(spec, inp)]
                + [T.StructField(CORRUPT, T.StringType())]
            )
            df = reader.schema(schema).json(files)
        return _flatten(df, inp), bytes_read, files
    # csv / tsv
    if inp.csv_columns is not None:
        columns = list(inp.csv_columns)
        header = inp.csv_skip_header_rows > 0
        # Values past the named columns (e.g. TPC-H's trailing '|') are not
        # errors in Druid: give them unnamed columns, never read.
        extra = len(_csv_header(files[0], inp.delimiter)) - len(columns)
        columns += [f"{EXTRA}{i}" for i in range(max(0, extra))]
    else:
        columns = _csv_header(files[0], inp.delimiter)
        header = True
    schema = T.StructType(
        [T.StructField(name, T.StringType()) for name in columns]
        + [T.StructField(CORRUPT, T.StringType())]
    )
    df = (
        spark.read.option("header", str(header).lower())
        .option("sep", inp.delimiter)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("enforceSchema", "true")
        .schema(schema)
        .csv(files)
    )
    return df, bytes_read, files


def _flatten(df, inp: InputSpec):
    """Add flattenSpec fields: a root field is a top-level field, a path field
    walks into a top-level field's JSON (read as text) with get_json_object."""
    from pyspark.sql import functions as F

    if not inp.flatten:
        return df
    types = dict(df.dtypes)
    exprs = {}
    for field in inp.flatten:
        if field.kind == "root":
            exprs[field.name] = (
                F.col(f"`{field.expr}`") if field.expr in types else F.lit(None).cast("string")
            )
            continue
        steps, function = _path_steps(field.expr)
        if not steps or not isinstance(steps[0], str) or steps[0] not in types:
            value = F.lit(None).cast("string")
        else:
            top = F.col(f"`{steps[0]}`")
            if types[steps[0]] != "string":
                top = text_col(top, types[steps[0]])
            if len(steps) > 1:
                rest = "".join(f"[{s}]" if isinstance(s, int) else f"['{s}']" for s in steps[1:])
                value = F.get_json_object(top, "$" + rest)
            else:
                value = top
        if function == "length":
            value = F.json_array_length(value).cast("string")
        elif function:
            numbers = F.from_json(value, "array<double>")
            agg = {
                "min": F.array_min(numbers),
                "max": F.array_max(numbers),
                "sum": F.aggregate(numbers, F.lit(0.0), lambda acc, x: acc + x),
            }.get(function)
            if function == "avg":
                agg = F.aggregate(numbers, F.lit(0.0), lambda acc, x: acc + x) / F.size(numbers)
            value = agg.cast("string")
        exprs[field.name] = value
    keep = [F.col(f"`{c}`") for c in df.columns if c not in exprs]
    return df.select(*keep, *[v.alias(n) for n, v in exprs.items()])


def _kind_of(dtype: str) -> str:
    if dtype in ("tinyint", "smallint", "int", "bigint"):
        return "long"
    if dtype in ("float", "double") or dtype.startswith("decimal"):
        return "double"
    if dtype.startswith(("struct", "array", "map")):
        return "complex"  # expressions read it as JSON (schema discovery's nested fields)
    return "string"


def apply_transforms(raw, spec: IngestionSpec):
    """Druid expression transforms: every transform reads the input row as read
    (not another transform's output) and its result replaces a field of its name."""
    from pyspark.sql import functions as F

    if not spec.transforms:
        return raw
    time_column = None
    if any("__time" in t.columns for t in spec.transforms):
        raw, time_column = _with_row_time(raw, spec), _ROW_TIME
    for t in spec.transforms:
        for c in t.columns:
            if c not in raw.columns and c != "__time":
                raw = raw.withColumn(c, F.lit(None).cast("string"))
    kinds = {name: _kind_of(dtype) for name, dtype in raw.dtypes}
    exprs = {}
    for i, t in enumerate(spec.transforms):
        try:
            exprs[t.name] = F.expr(translate(t.expression, kinds, time_column=time_column).sql)
        except Exception as exc:  # noqa: BLE001 - surfaced as a spec error naming the field
            raise SpecError(
                f"spec.dataSchema.transformSpec.transforms[{i}].expression",
                str(exc).splitlines()[0],
            ) from exc
    keep = [F.col(f"`{c}`") for c in raw.columns if c not in exprs and c != _ROW_TIME]
    return raw.select(*keep, *[e.alias(n) for n, e in exprs.items()])


_ROW_TIME = "__transform_row_time"


def _with_row_time(raw, spec: IngestionSpec):
    """`raw` with the row's timestamp in epoch millis, which transforms read as
    `__time`: a druid input's own `__time`, or the parsed timestampSpec column."""
    from pyspark.sql import functions as F

    types = dict(raw.dtypes)
    if types.get("__time") in ("timestamp", "timestamp_ntz"):
        ts = F.col("__time")
    else:
        name = spec.timestamp_column
        column = F.col(f"`{name}`") if name in types else F.lit(None).cast("string")
        ts = timestamp_col(column, spec.timestamp_format, types.get(name, "string"))
    return raw.withColumn(_ROW_TIME, F.unix_millis(ts))


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
    schema = _files_schema(files)
    reader = spark.read.schema(schema) if schema is not None else spark.read
    reader = reader.option("mergeSchema", str(schema is None).lower())
    frames = [
        reader.parquet(*locations).filter(within(key)) for key, locations in sorted(groups.items())
    ]
    df = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    return df, bytes_read, files


def _files_schema(files: Sequence[str]):
    """The union of the Parquet files' schemas as a Spark schema, from their footers
    read here (a fraction of a second for hundreds of segment files), sparing Spark's
    `mergeSchema` job; None when they do not unify (Spark's merge then decides)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructField, StructType

    try:
        unified = pa.unify_schemas([pq.read_schema(f) for f in files])
        spark_schema = from_arrow_schema(unified, prefer_timestamp_ntz=False)
    except Exception:  # noqa: BLE001 - any type Spark's own merge may still read
        return None
    return StructType([StructField(f.name, f.dataType, True) for f in spark_schema.fields])


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

        observation = Observation(name)
        parsed = self.parsed.observe(observation, *_stat_columns())
        return self._good(parsed), observation

    def counted(self) -> dict:
        """The row stats of `observed`, by a pass of their own."""
        return self.parsed.agg(*_stat_columns()).collect()[0].asDict()

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


def _stat_columns() -> list:
    from pyspark.sql import functions as F

    return [
        F.count(F.lit(1)).alias("total"),
        F.sum(F.col("__unparseable").cast("long")).alias("unparseable"),
        F.sum((~F.col("__unparseable") & F.col("__thrown")).cast("long")).alias("thrownAway"),
        F.sum(
            (~F.col("__unparseable") & ~F.col("__thrown") & F.col("__reason").isNotNull()).cast(
                "long"
            )
        ).alias("processedWithError"),
    ]


def row_stats(observation, parsed: ParsedInput | None = None) -> dict:
    """The row stats an `observed` run collected. When the filter threw every row
    away, Spark's adaptive execution drops the observed plan and the observation
    cannot be read (an assertion in PySpark's toPyRow): then they are counted by
    a pass over `parsed` of their own."""
    try:
        stats = observation.get
    except Exception:
        if parsed is None:
            raise
        stats = parsed.counted()
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
    """Read and parse the input; None when it has no rows to read (a druid input
    with nothing visible). A combining input's delegates are parsed one by one and
    their rows put together."""
    from functools import reduce

    raws = []  # (raw DataFrame, is a druid source)
    bytes_read, input_files = 0, 0
    druid = spec.input.druid_source
    if druid is not None:
        raw, size, files = read_segments(spark, source_pieces, druid.interval)
        if raw is not None:
            raws.append((raw, True))
            bytes_read, input_files = bytes_read + size, input_files + len(files)
    for number, inp in enumerate(spec.input.file_sources):
        raw, size, files = read_files(spark, spec, scratch_dir, inp, number)
        raws.append((raw, False))
        bytes_read, input_files = bytes_read + size, input_files + len(files)
    if not raws:
        return None
    parts = [_parse_one(spec, apply_transforms(raw, spec), from_druid) for raw, from_druid in raws]
    dims = parts[0][1]
    inputs = _reconcile_inputs([p[2] for p in parts])
    frames = []
    for frame, _, part_inputs in parts:
        for mine, common in zip(part_inputs, inputs, strict=True):
            if mine.kind == "rows" and common.kind == "count":
                from pyspark.sql import functions as F

                frame = frame.withColumn(common.column, F.lit(1).cast("long"))
        frames.append(frame)
    parsed = reduce(lambda x, y: x.unionByName(y), frames)
    return ParsedInput(
        parsed=parsed,
        dimensions=dims,
        metric_inputs=inputs,
        bytes_read=bytes_read,
        input_files=input_files,
        spec=spec,
    )


def _reconcile_inputs(per_source: list[list[MetricInput]]) -> list[MetricInput]:
    """One MetricInput per metric for all sources: rows and count columns mix (a
    raw row counts 1); sketches and raw values of one metric cannot."""
    out = []
    for options in zip(*per_source, strict=True):
        kinds = {o.kind for o in options}
        if len(kinds) == 1:
            out.append(options[0])
        elif kinds == {"rows", "count"}:
            out.append(next(o for o in options if o.kind == "count"))
        else:
            m = options[0].metric
            raise SpecError(
                "spec.ioConfig.inputSource.delegates",
                f"metric {m.name!r} reads sketches from the druid delegate and raw values from "
                "another: ingest them with separate tasks",
            )
    return out


def _dimension_list(spec: IngestionSpec, raw, ts_name: str) -> list[tuple[str, str]]:
    types = dict(raw.dtypes)
    listed = [(d.name, d.type) for d in spec.dimensions if d.name not in spec.dimension_exclusions]
    if not _discovers(spec):
        return listed
    reserved = {ts_name, "__time", CORRUPT, *spec.dimension_exclusions}
    reserved |= {c for c in raw.columns if c.startswith(EXTRA)}
    reserved |= {m.field_name for m in spec.metrics if m.field_name}
    reserved |= {m.name for m in spec.metrics}
    reserved |= {name for name, _ in listed}
    discovered = []
    for name in raw.columns:
        if name in reserved:
            continue
        dtype = types[name]
        if dtype.startswith(("struct", "array", "map")):
            kind = "json"
        else:
            # Discovered dimensions keep a numeric type (re-ingested segments,
            # parquet, JSON under useSchemaDiscovery).
            kind = _DISCOVERED.get(dtype, "string")
        discovered.append((name, kind))
    return listed + discovered


def _string_dim(col, dtype: str, handling: str, list_delimiter: str | None):
    """A string dimension: a list value (a JSON array, an array column, or text
    holding the list delimiter) is multi-value, ordered by multiValueHandling and
    stored as JSON array text; one value is stored as itself, an empty list as null."""
    from pyspark.sql import functions as F

    if dtype.startswith("array"):
        values = col.cast("array<string>")
    else:
        text = text_col(col, dtype)
        values = F.when(F.startswith(F.ltrim(text), F.lit("[")), F.from_json(text, "array<string>"))
        if list_delimiter:
            values = values.when(
                F.instr(text, list_delimiter) > 0, F.split(text, re.escape(list_delimiter))
            )
    if handling == "SORTED_SET":
        values = F.array_sort(F.array_distinct(values))
    elif handling == "SORTED_ARRAY":
        values = F.array_sort(values)
    single = F.when(F.size(values) == 1, F.element_at(values, 1))
    listed = F.when(F.size(values) > 1, F.to_json(values))
    if dtype.startswith("array"):
        return F.coalesce(listed, single)
    return F.when(values.isNull(), text).otherwise(F.coalesce(listed, single))


def _auto_dim(col, dtype: str):
    """An auto/json dimension, stored as JSON text; booleans are Druid's longs
    (useStrictBooleans): a boolean is 1/0, an array of booleans [1,0,null]."""
    from pyspark.sql import functions as F

    if dtype == "boolean":
        return col.cast("long").cast("string")
    text = text_col(col, dtype)
    longs = F.regexp_replace(F.regexp_replace(text, "true", "1"), "false", "0")
    return F.when(text.rlike(_BOOLEAN_ARRAY), longs).otherwise(text)


def _parse_one(spec: IngestionSpec, raw, from_druid: bool):
    """(parsed DataFrame, dimensions, metric inputs) of one raw input."""
    from pyspark.sql import functions as F

    types = dict(raw.dtypes)

    def col_of(name: str):
        return F.col(f"`{name}`") if name in types else F.lit(None).cast("string")

    def text_of(name: str):
        return text_col(col_of(name), types.get(name, "string"))

    # Timestamp
    ts_name = "__time" if from_druid else spec.timestamp_column
    ts_raw = col_of(ts_name)
    ts = timestamp_col(ts_raw, spec.timestamp_format, types.get(ts_name, "string"))
    if spec.timestamp_missing_value is not None:
        missing = F.lit(spec.timestamp_missing_value).try_cast("timestamp")
        ts = F.when(ts_raw.isNull() | (F.trim(ts_raw.cast("string")) == ""), missing).otherwise(ts)
    corrupt = col_of(CORRUPT).isNotNull() if CORRUPT in types else F.lit(False)

    # Dimensions
    dims = _dimension_list(spec, raw, ts_name)
    handling = {d.name: d.multi_value_handling for d in spec.dimensions}
    list_delimiter = (
        None
        if from_druid
        else (spec.input.file_sources[0].list_delimiter if spec.input.file_sources else None)
    )
    dim_exprs, errors = [], []
    for name, dtype in dims:
        source_type = types.get(name, "string")
        if dtype == "string":
            value = _string_dim(
                col_of(name), source_type, handling.get(name, "SORTED_ARRAY"), list_delimiter
            )
            dim_exprs.append(value.alias(name))
        elif dtype == "json":
            dim_exprs.append(_auto_dim(col_of(name), source_type).alias(name))
        else:
            value, bad = number_col(col_of(name), dtype, source_type)
            dim_exprs.append(value.alias(name))
            errors.append(F.when(bad, F.lit(f"{name} is not a {dtype}")))

    # Metric inputs
    inputs: list[MetricInput] = []
    input_exprs = []
    for i, m in enumerate(spec.metrics):
        alias = f"__m{i}"
        field_type = types.get(m.field_name or "", "string")
        if m.type == "count":
            # Re-ingesting rolled-up rows: a count sums the existing count column.
            if from_druid and types.get(m.name) in _NUMERIC:
                input_exprs.append(col_of(m.name).cast("long").alias(alias))
                inputs.append(MetricInput(m, alias, "count"))
            else:
                inputs.append(MetricInput(m, None, "rows"))
            continue
        if m.type in ("hyperUnique", "HLLSketchBuild", "HLLSketchMerge", "thetaSketch"):
            union, build = {
                "thetaSketch": ("theta_union", "theta"),
            }.get(m.type, ("sketch", "distinct"))
            if field_type == "binary":  # already sketches: union them
                input_exprs.append(col_of(m.field_name).alias(alias))
                inputs.append(MetricInput(m, alias, union))
            else:
                input_exprs.append(text_of(m.field_name).alias(alias))
                inputs.append(MetricInput(m, alias, build))
            continue
        if m.type == "quantilesDoublesSketch":
            if field_type == "binary":
                input_exprs.append(col_of(m.field_name).alias(alias))
                inputs.append(MetricInput(m, alias, "kll_merge"))
                continue
            value, bad = number_col(col_of(m.field_name), "double", field_type)
            input_exprs.append(value.alias(alias))
            inputs.append(MetricInput(m, alias, "kll"))
            errors.append(F.when(bad, F.lit(f"{m.field_name} is not a double")))
            continue
        if m.type in FIRST_LAST_TYPES:
            if field_type.startswith("struct"):  # already (time, value) pairs
                input_exprs.append(col_of(m.field_name).alias(alias))
                inputs.append(MetricInput(m, alias, "pair"))
                continue
            kind = m.type[: -len("First") if m.type.endswith("First") else -len("Last")]
            if kind == "string":
                value = text_of(m.field_name)
                value = F.substring(value, 1, m.size or 1024)  # Druid's maxStringBytes
            else:
                value, bad = number_col(
                    col_of(m.field_name), "long" if kind == "long" else "double", field_type
                )
                errors.append(F.when(bad, F.lit(f"{m.field_name} is not a {kind}")))
            pair = F.struct(F.unix_millis(ts).alias("time"), value.alias("value"))
            input_exprs.append(F.when(value.isNotNull(), pair).alias(alias))
            inputs.append(MetricInput(m, alias, "pair"))
            continue
        kind = "long" if m.type.startswith("long") else "double"
        value, bad = number_col(col_of(m.field_name), kind, field_type)
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
        thrown = thrown | ~filter_col(spec.filter, text_of)

    parsed = raw.select(
        ts.alias("__ts"),
        unparseable.alias("__unparseable"),
        reason.alias("__reason"),
        thrown.alias("__thrown"),
        *dim_exprs,
        *input_exprs,
    )
    return parsed, dims, inputs
