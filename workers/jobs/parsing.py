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
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from metastore.druid.errors import SpecError
from metastore.druid.expressions import translate
from metastore.druid.filters import filter_columns
from metastore.druid.ingestion import IngestionSpec
from metastore.druid.input_formats import probe_replacement, regex_group_probes
from metastore.druid.input_sources import InputSpec
from metastore.druid.metrics import (
    FIRST_LAST_TYPES,
    STORED_INPUT_KINDS,
    Metric,
    input_kind,
    input_number_type,
)
from metastore.intervals import ETERNITY, Granularity, Interval
from workers.jobs import json_paths
from workers.jobs.filter_sql import filter_sql, sql_str

CORRUPT = "_corrupt_record"
EXTRA = "__extra_column_"  # values past a csv/tsv's named columns
PARSED = "__parsed_"  # a field parsed once for the path fields into it
JQ = "__jq_"  # a jq flatten field's value, computed before Spark reads the rows
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
    put in a KLL quantiles sketch / KLL sketches to merge), "kll_float" /
    "kll_float_merge" (the same with floats), "variance" / "variance_merge" and
    "histogram" / "histogram_merge" (a number / stored states of druid-stats'
    variance and druid-histogram's fixedBucketsHistogram), or "pair" (a
    first/last metric's struct<time: epoch millis, value>). See
    `metastore.druid.metrics.input_kind`.
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


def sql_name(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


_NULL = "CAST(NULL AS STRING)"
_DIGITS = sql_str(r"^-?\d+$")


def _sql_type(kind: str) -> str:
    return {"long": "BIGINT", "double": "DOUBLE", "float": "FLOAT"}[kind]


# The parse expressions below are Spark SQL text, not Column objects: a Column is
# built by several py4j round trips per function, which for hundreds of columns
# took longer than reading the data; the whole projection is handed over at once.


def timestamp_col(raw: str, fmt: str, dtype: str = "string") -> str:
    """SQL parsing a column to a timestamp; null when it does not parse."""
    if dtype in ("timestamp", "timestamp_ntz", "date"):
        return f"CAST({raw} AS TIMESTAMP)"
    text = f"trim(CAST({raw} AS STRING))"
    if fmt == "iso":
        return f"try_cast({text} AS TIMESTAMP)"
    as_long = f"try_cast({text} AS BIGINT)"
    if fmt == "millis":
        return f"timestamp_millis({as_long})"
    if fmt == "posix":
        return f"timestamp_seconds({as_long})"
    # As Druid's TimestampParser: micro and nano are whole milliseconds, divided
    # toward zero (Java's TimeUnit.toMillis; Spark's `div` truncates the same way);
    # ruby is seconds with a fraction.
    if fmt == "micro":
        return f"timestamp_millis({as_long} div 1000)"
    if fmt == "nano":
        return f"timestamp_millis({as_long} div 1000000)"
    if fmt == "ruby":
        return f"timestamp_millis(try_cast(try_cast({text} AS DOUBLE) * 1000 AS BIGINT))"
    if fmt == "auto":
        return (
            f"CASE WHEN {text} RLIKE {_DIGITS} THEN timestamp_millis({as_long}) "
            f"ELSE try_cast({text} AS TIMESTAMP) END"
        )
    return f"try_to_timestamp({text}, {sql_str(java_pattern(fmt))})"


def number_col(raw: str, kind: str, dtype: str = "string") -> tuple[str, str]:
    """SQL (parsed value, error flag): kind 'long', 'double' or 'float'; '' and
    null are null without error."""
    if dtype in (*_NUMERIC, "boolean"):  # a boolean is a long 1/0, as in Druid
        return f"CAST({raw} AS {_sql_type(kind)})", "false"
    text = f"trim(CAST({raw} AS STRING))"
    if kind == "long":
        value = (
            f"coalesce(try_cast({text} AS BIGINT), try_cast(try_cast({text} AS DOUBLE) AS BIGINT))"
        )
    else:  # a float is parsed as Java's Float.parseFloat (Spark's cast), not via a double
        value = f"try_cast({text} AS {_sql_type(kind)})"
    return value, f"({raw} IS NOT NULL AND {text} != '' AND {value} IS NULL)"


def text_col(col: str, dtype: str) -> str:
    """SQL of a column as Druid would show it as a string: an integral double
    without `.0` (JSON numbers read as text and multiplied come back as doubles),
    arrays and structs as JSON text."""
    if dtype in ("double", "float"):
        return (
            f"CASE WHEN {col} = floor({col}) AND abs({col}) < 1e15D "
            f"THEN CAST(CAST({col} AS BIGINT) AS STRING) ELSE CAST({col} AS STRING) END"
        )
    if dtype.startswith(("array", "struct", "map")):
        return f"to_json({col})"
    return f"CAST({col} AS STRING)"


# --- reading -----------------------------------------------------------------------


def _input_files(inp: InputSpec, scratch: Path, number: int = 0) -> list[str]:
    if inp.type == "inline":
        target = scratch / "input" / f"inline{number or ''}.{inp.format}"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(inp.data if inp.data.endswith("\n") else inp.data + "\n")
        return [str(target)]
    if not inp.files:  # a programming error: the runner resolves them before the job
        raise ValueError(
            f"{inp.field}: local input files not resolved; call "
            "workers.jobs.input_files.resolve_local_inputs before running the job"
        )
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
    wanted += sorted(filter_columns(spec.filter) - {"__time"})
    for t in spec.transforms:
        wanted += list(t.columns)
    produced = {f.name for f in inp.flatten if f.kind in ("path", "jq")}
    wanted = [w for w in wanted if w not in produced]
    for f in inp.flatten:
        if f.kind == "jq":
            wanted.append(JQ + f.name)
            continue
        steps, _ = _path_steps(f.expr) if f.kind == "path" else ([f.expr], None)
        if steps and isinstance(steps[0], str):
            wanted.append(steps[0])
    return list(dict.fromkeys(wanted))


def _discovers(spec: IngestionSpec) -> bool:
    """Whether the input's own fields decide (some of) the dimensions: as Druid's
    MapInputRowParser.findDimensions, useSchemaDiscovery adds every input field
    to the listed dimensions, as includeAllDimensions does."""
    return spec.schemaless or spec.include_all_dimensions or spec.schema_discovery


def _auto_scalar_types(reader, spec: IngestionSpec, files) -> dict:
    """The JSON types of listed `auto` dimensions whose every value is a boolean or
    a number (one inference pass, only when there are some): Druid types those
    columns long (booleans 1/0) or double; read as strings they would be text."""
    from pyspark.sql import types as T

    auto = {d.name for d in spec.dimensions if d.type == "auto"}
    if not auto:
        return {}
    scalar = (T.BooleanType, T.LongType, T.DoubleType)
    inferred = reader.json(files).schema.fields
    return {
        f.name: f.dataType for f in inferred if f.name in auto and isinstance(f.dataType, scalar)
    }


def _read_json(spark, spec: IngestionSpec, inp: InputSpec, files):
    """JSON lines: inferred types when the input decides the dimensions, else the
    wanted fields as strings (typed `auto` scalars excepted)."""
    from pyspark.sql import types as T

    reader = spark.read.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
    discover = _discovers(spec) or (inp.flatten and inp.use_field_discovery and spec.schemaless)
    if discover:
        if not spec.schema_discovery:
            reader = reader.option("primitivesAsString", "true")
        return reader.json(files)
    typed = _auto_scalar_types(reader, spec, files)
    schema = T.StructType(
        [
            T.StructField(name, typed.get(name, T.StringType()))
            for name in _wanted_columns(spec, inp)
        ]
        + [T.StructField(CORRUPT, T.StringType())]
    )
    return reader.schema(schema).json(files)


def read_files(
    spark, spec: IngestionSpec, scratch: Path, inp: InputSpec | None = None, number: int = 0
):
    """(raw DataFrame, bytes read, files) of a local or inline input. Columns are
    strings (parquet keeps its types; so does JSON under useSchemaDiscovery); a
    `_corrupt_record` column marks malformed rows. flattenSpec fields are added."""

    inp = inp or spec.input
    files = _input_files(inp, scratch, number)
    bytes_read = sum(os.path.getsize(f) for f in files)
    fmt = inp.format
    if fmt in ("parquet", "orc"):  # Spark's own readers, types kept
        df = spark.read.parquet(*files) if fmt == "parquet" else spark.read.orc(*files)
        return _flatten(df, inp), bytes_read, files
    if fmt == "lines":  # Druid's LinesReader: each line is the string field `line`
        return spark.read.text(files).withColumnRenamed("value", "line"), bytes_read, files
    if fmt == "regex":
        return _read_regex(spark, files, inp), bytes_read, files
    if fmt == "avro_ocf":
        files = avro_as_json(files, scratch / "input" / f"avro{number}", inp)
    if any(f.kind == "jq" for f in inp.flatten):
        files = with_jq_fields(files, scratch / "input" / f"jq{number}", inp)
    if fmt in ("json", "avro_ocf"):
        df = _read_json(spark, spec, inp, files)
        return _flatten(df, inp), bytes_read, files
    target = scratch / "input" / f"skipped{number}"
    return _read_delimited(spark, files, inp, target), bytes_read, files


def _read_delimited(spark, files: list[str], inp: InputSpec, scratch: Path):
    """csv / tsv rows, every column a string, malformed rows marked. As Druid's
    reader, `skipHeaderRows` lines are skipped first, then each file's own header
    names its columns (files with different headers are read apart, by name)."""
    skip = inp.csv_skip_header_rows
    if skip and (inp.csv_columns is None or skip > 1):
        files, skip = _without_leading_rows(files, skip, scratch), 0
    if inp.csv_columns is None:
        groups: dict[tuple, list[str]] = {}
        for f in files:
            groups.setdefault(tuple(_csv_header(f, inp.delimiter)), []).append(f)
        frames = [_csv_frame(spark, list(cols), True, group, inp) for cols, group in groups.items()]
        df = frames[0]
        for other in frames[1:]:
            df = df.unionByName(other, allowMissingColumns=True)
        return df
    columns = list(inp.csv_columns)
    # Values past the named columns (e.g. TPC-H's trailing '|') are not
    # errors in Druid: give them unnamed columns, never read.
    extra = len(_csv_header(files[0], inp.delimiter)) - len(columns)
    columns += [f"{EXTRA}{i}" for i in range(max(0, extra))]
    return _csv_frame(spark, columns, skip > 0, files, inp)


def _read_regex(spark, files: list[str], inp: InputSpec):
    """Druid's RegexReader: a line that does not match the whole pattern is
    malformed; group i is the i-th column (Spark's regexp_extract, Java's regex),
    null when the group took no part in the match."""
    whole = sql_str(f"^(?:{inp.regex_pattern})$")
    matches = f"value RLIKE {whole}"
    probes = regex_group_probes(inp.regex_pattern)
    columns = []
    for i, name in enumerate(inp.csv_columns or (), start=1):
        value = f"regexp_extract(value, {whole}, {i})"
        probe = probes[i - 1] if i <= len(probes) else None
        if probe is not None:  # a group that took no part is null, as in Druid
            took_part = (
                f"value = '' OR length(regexp_replace(value, {sql_str(f'^(?:{probe})$')}, "
                f"{sql_str(probe_replacement(i))})) > 1"
            )
            value = f"CASE WHEN {took_part} THEN {value} END"
        columns.append(f"CASE WHEN {matches} THEN {value} END AS {sql_name(name)}")
    corrupt = f"CASE WHEN NOT {matches} THEN value END AS {sql_name(CORRUPT)}"
    return spark.read.text(files).selectExpr(*columns, corrupt)


def _csv_frame(spark, columns: list[str], header: bool, files: list[str], inp: InputSpec):
    from pyspark.sql import types as T

    schema = T.StructType(
        [T.StructField(name, T.StringType()) for name in columns]
        + [T.StructField(CORRUPT, T.StringType())]
    )
    return (
        spark.read.option("header", str(header).lower())
        .option("sep", inp.delimiter)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("enforceSchema", "true")
        .schema(schema)
        .csv(files)
    )


def _without_leading_rows(files: list[str], rows: int, target: Path) -> list[str]:
    """Copies of `files` without their first `rows` lines, streamed (bounded memory)."""
    import gzip
    import shutil

    target.mkdir(parents=True, exist_ok=True)
    out = []
    for path in files:
        copy = target / f"skipped{len(out)}.txt"
        opener = gzip.open if path.endswith(".gz") else open
        with (
            opener(path, "rt", encoding="utf-8", newline="") as src,
            open(copy, "w", encoding="utf-8", newline="") as dst,
        ):
            for _ in range(rows):
                src.readline()
            shutil.copyfileobj(src, dst)
        out.append(str(copy))
    return out


def avro_as_json(files: Sequence[str], target: Path, inp: InputSpec) -> list[str]:
    """Avro object container files as JSON lines, one file each, for Spark's JSON reader.

    The pyspark wheel has no Avro data source (spark-avro is a separate package
    fetched from Maven), so the records are decoded with fastavro, under the
    spec's reader `schema` when it gives one. They then take the JSON input's path
    (schema, flattenSpec, discovery, parse errors), as Druid's Avro reader hands
    nested records to the same flattening as JSON. Decoding runs here, record by
    record, in bounded memory: in the executors it would need fastavro in Spark's
    Python workers, whose interpreter the session does not choose.
    """
    import fastavro

    reader_schema = fastavro.parse_schema(json.loads(inp.avro_schema)) if inp.avro_schema else None
    target.mkdir(parents=True, exist_ok=True)
    out = []
    for number, path in enumerate(files):
        lines = target / f"{number}.json"
        with open(path, "rb") as src, open(lines, "w", encoding="utf-8") as dst:
            for record in fastavro.reader(src, reader_schema=reader_schema):
                dst.write(json.dumps(_avro_value(record, inp.binary_as_string)) + "\n")
        out.append(str(lines))
    return out


def with_jq_fields(files: Sequence[str], target: Path, inp: InputSpec) -> list[str]:
    """JSON lines with each jq flatten field's value added as `__jq_<name>`.

    Druid's jq paths (keys and indexes) become JSONPath fields at validation and
    run natively in Spark; the rest of jq (pipes, functions) runs here with the
    jq library, line by line in bounded memory (in Spark's Python workers it would
    need the jq bindings in an interpreter the session does not choose). One
    output is the value, several a list (multi-value), none null. A line that is
    not JSON is copied as is: Spark's reader marks it malformed."""
    import gzip

    import jq

    programs = {JQ + f.name: jq.compile(f.expr) for f in inp.flatten if f.kind == "jq"}
    target.mkdir(parents=True, exist_ok=True)
    out = []
    for number, path in enumerate(files):
        lines = target / f"{number}.json"
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as src, open(lines, "w", encoding="utf-8") as dst:
            for line in src:
                dst.write(_with_jq(line, programs) + "\n")
        out.append(str(lines))
    return out


def _with_jq(line: str, programs: dict) -> str:
    try:
        row = json.loads(line)
    except ValueError:
        return line.rstrip("\n")
    if not isinstance(row, dict):
        return line.rstrip("\n")
    for name, program in programs.items():
        try:
            values = program.input_value(row).all()
        except ValueError:  # a jq runtime error: no value, as a missing path
            values = []
        row[name] = values[0] if len(values) == 1 else (values or None)
    return json.dumps(row)


def _avro_value(value, binary_as_string: bool):
    """A decoded Avro value as JSON: bytes as base64 (or UTF-8 text with
    binaryAsString), timestamps as epoch millis, decimals as numbers."""
    import base64
    from datetime import date
    from decimal import Decimal

    if isinstance(value, dict):
        return {k: _avro_value(v, binary_as_string) for k, v in value.items()}
    if isinstance(value, list):
        return [_avro_value(v, binary_as_string) for v in value]
    if isinstance(value, bytes):
        if binary_as_string:
            return value.decode("utf-8", errors="replace")
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return (value - _EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)  # UUID and other logical types


def _flatten(df, inp: InputSpec):
    """Add flattenSpec fields, in one projection: a root field is a top-level
    field, a path field walks into a top-level field's JSON (read as text). Paths
    that share a top-level field parse it once (`json_paths`), over a projection
    of its own that the optimizer keeps; the others use get_json_object."""
    if not inp.flatten:
        return df
    types = dict(df.dtypes)
    parsed, shared = _shared_parses(inp, types)
    if parsed:
        df = df.selectExpr("*", *[f"{v} AS {sql_name(n)}" for n, v in parsed.items()])
    exprs: dict[str, str] = {}
    for flat in inp.flatten:
        if flat.kind in ("root", "jq"):
            column = flat.expr if flat.kind == "root" else JQ + flat.name
            exprs[flat.name] = sql_name(column) if column in types else _NULL
        else:
            exprs[flat.name] = shared.get(flat.name) or _path_value(flat.expr, types)
    keep = [
        sql_name(c)
        for c in df.columns
        if c not in exprs and not c.startswith(JQ) and c not in parsed
    ]
    return df.selectExpr(*keep, *[f"{v} AS {sql_name(n)}" for n, v in exprs.items()])


def _shared_parses(inp: InputSpec, types: dict[str, str]):
    """({parsed column: from_json SQL}, {field name: SQL reading it}) for the plain
    path fields that walk into the same text field, two or more of them."""
    groups: dict[str, dict[str, list]] = {}
    for flat in inp.flatten:
        if flat.kind != "path":
            continue
        steps, function = _path_steps(flat.expr)
        top = steps[0] if steps else None
        if function or len(steps) < 2 or not isinstance(top, str) or types.get(top) != "string":
            continue
        groups.setdefault(top, {})[flat.name] = steps[1:]
    parsed: dict[str, str] = {}
    shared: dict[str, str] = {}
    for number, (top, paths) in enumerate(groups.items()):
        schema = json_paths.shared_schema(list(paths.values())) if len(paths) > 1 else None
        if schema is None:
            continue
        column = f"{PARSED}{number}"
        parsed[column] = f"from_json({sql_name(top)}, {sql_str(schema)})"
        for name, steps in paths.items():
            shared[name] = json_paths.accessor(sql_name(column), steps)
    return parsed, shared


def _path_value(expr: str, types: dict[str, str]) -> str:
    """SQL of a JSONPath flatten field's value (text)."""
    steps, function = _path_steps(expr)
    if not steps or not isinstance(steps[0], str) or steps[0] not in types:
        return _NULL
    value = sql_name(steps[0])
    if types[steps[0]] != "string":
        value = text_col(value, types[steps[0]])
    if len(steps) > 1:
        rest = "".join(f"[{s}]" if isinstance(s, int) else f"['{s}']" for s in steps[1:])
        value = f"get_json_object({value}, {sql_str('$' + rest)})"
    if function == "length":
        return f"CAST(json_array_length({value}) AS STRING)"
    if function:
        numbers = f"from_json({value}, 'array<double>')"
        total = f"aggregate({numbers}, 0D, (acc, x) -> acc + x)"
        agg = {
            "min": f"array_min({numbers})",
            "max": f"array_max({numbers})",
            "sum": total,
            "avg": f"{total} / size({numbers})",
        }[function]
        return f"CAST({agg} AS STRING)"
    return value


def _kind_of(dtype: str) -> str:
    if dtype in ("tinyint", "smallint", "int", "bigint"):
        return "long"
    if dtype in ("float", "double") or dtype.startswith("decimal"):
        return "double"
    if dtype.startswith(("struct", "array", "map")):
        return "complex"  # expressions read it as JSON (schema discovery's nested fields)
    return "string"


_BOOLEAN_KEPT = "__boolean_"


def _booleans_as_longs(raw, read: set[str]):
    """(raw with the boolean columns that expressions read as longs 1/0, as Druid's
    expressions read a boolean input value, and SQL restoring each one's own value
    for the rows). Schema discovery reads JSON booleans as booleans."""
    bools = [c for c, dtype in raw.dtypes if dtype == "boolean" and c in read]
    if not bools:
        return raw, {}
    columns = [
        f"CAST({sql_name(c)} AS BIGINT) AS {sql_name(c)}" if c in bools else sql_name(c)
        for c in raw.columns
    ]
    kept = [f"{sql_name(c)} AS {sql_name(_BOOLEAN_KEPT + c)}" for c in bools]
    restore = {c: f"{sql_name(_BOOLEAN_KEPT + c)} AS {sql_name(c)}" for c in bools}
    return raw.selectExpr(*columns, *kept), restore


def apply_transforms(raw, spec: IngestionSpec):
    """Druid expression transforms, in one projection: every transform reads the
    input row as read (not another transform's output) and its result replaces a
    field of its name."""
    if not spec.transforms:
        return raw
    time_column = None
    if any("__time" in t.columns for t in spec.transforms):
        raw, time_column = _with_row_time(raw, spec), _ROW_TIME
    missing = [
        c for t in spec.transforms for c in t.columns if c not in raw.columns and c != "__time"
    ]
    if missing:  # a field the input lacks reads as null
        raw = raw.selectExpr("*", *[f"{_NULL} AS {sql_name(c)}" for c in dict.fromkeys(missing)])
    raw, restore = _booleans_as_longs(raw, {c for t in spec.transforms for c in t.columns})
    kinds = {name: _kind_of(dtype) for name, dtype in raw.dtypes}
    exprs = {}
    for i, t in enumerate(spec.transforms):
        try:
            exprs[t.name] = translate(t.expression, kinds, time_column=time_column).sql
        except Exception as exc:  # noqa: BLE001 - surfaced as a spec error naming the field
            raise SpecError(
                f"spec.dataSchema.transformSpec.transforms[{i}].expression",
                str(exc).splitlines()[0],
            ) from exc
    keep = [
        restore.get(c, sql_name(c))
        for c in raw.columns
        if c not in exprs and c != _ROW_TIME and not c.startswith(_BOOLEAN_KEPT)
    ]
    try:
        return raw.selectExpr(*keep, *[f"{e} AS {sql_name(n)}" for n, e in exprs.items()])
    except Exception as exc:  # noqa: BLE001 - which transform Spark refused, by name
        for i, t in enumerate(spec.transforms):
            try:
                raw.selectExpr(exprs[t.name])
            except Exception as refused:  # noqa: BLE001
                raise SpecError(
                    f"spec.dataSchema.transformSpec.transforms[{i}].expression",
                    str(refused).splitlines()[0],
                ) from exc
        raise


_ROW_TIME = "__transform_row_time"


def _with_row_time(raw, spec: IngestionSpec):
    """`raw` with the row's timestamp in epoch millis, which transforms read as
    `__time`: a druid input's own `__time`, or the parsed timestampSpec column."""
    types = dict(raw.dtypes)
    if types.get("__time") in ("timestamp", "timestamp_ntz"):
        ts = sql_name("__time")
    else:
        name = spec.timestamp_column
        column = sql_name(name) if name in types else _NULL
        ts = timestamp_col(column, spec.timestamp_format, types.get(name, "string"))
    return raw.selectExpr("*", f"unix_millis({ts}) AS {sql_name(_ROW_TIME)}")


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

    schemas = [pq.read_schema(f) for f in files]
    try:
        try:
            unified = pa.unify_schemas(schemas)
        except pa.ArrowException:  # a FLOAT column here, a DOUBLE one there: read as double
            unified = pa.unify_schemas([_float_widened(s) for s in schemas])
        spark_schema = from_arrow_schema(unified, prefer_timestamp_ntz=False)
    except Exception:  # noqa: BLE001 - any type Spark's own merge may still read
        return None
    return StructType([StructField(f.name, f.dataType, True) for f in spark_schema.fields])


def _float_widened(schema):
    """`schema` with its 32-bit float columns (and struct fields) as doubles, as Druid
    merges a FLOAT column with a DOUBLE one (segments written before float dimensions
    and metrics were FLOAT columns)."""
    import pyarrow as pa

    def widen(t):
        if pa.types.is_float32(t):
            return pa.float64()
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(widen(f.type)) for f in t])
        return t

    return pa.schema([f.with_type(widen(f.type)) for f in schema], metadata=schema.metadata)


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

    @property
    def input_columns(self) -> list[str]:
        """The metric input columns (metrics reading a field alike share one)."""
        return list(dict.fromkeys(m.column for m in self.metric_inputs if m.column))

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
            *[F.col(c) for c in self.input_columns],
        )

    def error_samples(self, limit: int) -> list[dict]:
        """Up to `limit` rows that failed to parse or parsed with errors (an extra pass)."""
        from pyspark.sql import functions as F

        if limit <= 0:
            return []
        # Every column, not __reason alone: when no input column decides the reason
        # (a csv without the timestamp column), Spark refuses a read of the
        # corrupt-record column alone.
        rows = (
            self.parsed.filter(
                F.col("__reason").isNotNull() & (F.col("__unparseable") | ~F.col("__thrown"))
            )
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


def _listed_kind(dtype: str, input_type: str) -> str:
    """A listed dimension's kind; an `auto` one takes its input's scalar type as
    Druid's does (booleans and integers long, floating point double), else JSON."""
    if dtype != "auto":
        return dtype
    return _DISCOVERED.get(input_type, "json")


def _dimension_list(spec: IngestionSpec, raw, ts_name: str) -> list[tuple[str, str]]:
    types = dict(raw.dtypes)
    listed = [
        (d.name, _listed_kind(d.type, types.get(d.name, "string")))
        for d in spec.dimensions
        if d.name not in spec.dimension_exclusions
    ]
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


def _string_dim(col: str, dtype: str, handling: str, list_delimiter: str | None) -> str:
    """SQL of a string dimension: a list value (a JSON array, an array column, or
    text holding the list delimiter) is multi-value, ordered by multiValueHandling
    and stored as JSON array text; one value is stored as itself, an empty list as null."""
    if dtype.startswith("array"):
        values = f"CAST({col} AS ARRAY<STRING>)"
    else:
        text = text_col(col, dtype)
        values = f"CASE WHEN startswith(ltrim({text}), '[') THEN from_json({text}, 'array<string>')"
        if list_delimiter:
            values += (
                f" WHEN instr({text}, {sql_str(list_delimiter)}) > 0 "
                f"THEN split({text}, {sql_str(re.escape(list_delimiter))})"
            )
        values += " END"
    if handling == "SORTED_SET":
        values = f"array_sort(array_distinct({values}))"
    elif handling == "SORTED_ARRAY":
        values = f"array_sort({values})"
    single = f"CASE WHEN size({values}) = 1 THEN element_at({values}, 1) END"
    listed = f"CASE WHEN size({values}) > 1 THEN to_json({values}) END"
    if dtype.startswith("array"):
        return f"coalesce({listed}, {single})"
    return f"CASE WHEN {values} IS NULL THEN {text} ELSE coalesce({listed}, {single}) END"


class _RawColumns:
    """SQL of one raw input's columns by name (null when absent), as read or as text."""

    def __init__(self, raw) -> None:
        self.types = dict(raw.dtypes)

    def col(self, name: str) -> str:
        return sql_name(name) if name in self.types else _NULL

    def text(self, name: str) -> str:
        return text_col(self.col(name), self.types.get(name, "string"))

    def type(self, name: str | None) -> str:
        return self.types.get(name or "", "string")


@dataclass
class _Typed:
    """The typed columns of one raw input (alias -> SQL) and, per column that can
    fail to parse, its error: (flag SQL, message)."""

    columns: dict[str, str] = field(default_factory=dict)
    errors: list[tuple[str, str]] = field(default_factory=list)

    def number(self, raw: _RawColumns, name: str, kind: str, alias: str) -> None:
        value, bad = number_col(raw.col(name), kind, raw.type(name))
        self.columns[alias] = value
        self.errors.append((bad, f"{name} is not a {kind}"))


def _auto_dim(col: str, dtype: str) -> str:
    """SQL of an auto/json dimension, stored as JSON text; booleans are Druid's
    longs (useStrictBooleans): a boolean is 1/0, an array of booleans [1,0,null]."""
    if dtype == "boolean":
        return f"CAST(CAST({col} AS BIGINT) AS STRING)"
    text = text_col(col, dtype)
    longs = f"regexp_replace(regexp_replace({text}, 'true', '1'), 'false', '0')"
    return f"CASE WHEN {text} RLIKE {sql_str(_BOOLEAN_ARRAY)} THEN {longs} ELSE {text} END"


def _parse_one(spec: IngestionSpec, raw, from_druid: bool):
    """(parsed DataFrame, dimensions, metric inputs) of one raw input, in ONE
    projection handed to Spark as SQL text.

    Every aliased expression comes after the aliases whose expressions it holds
    (the row status holds every column's value): for each alias of a projection
    in turn, Catalyst's constraint propagation adds a copy of every constraint
    that holds the alias's expression. Had the status come first, each later
    column would have doubled the constraints, 2^columns of them for PruneFilters
    to walk (a 59-column TSV planned for more than 12 minutes).
    """
    cols = _RawColumns(raw)
    ts_name = "__time" if from_druid else spec.timestamp_column
    ts = _timestamp(spec, cols, ts_name)
    dims = _dimension_list(spec, raw, ts_name)
    typed = _Typed()
    _dimension_columns(spec, dims, cols, typed, from_druid)
    inputs = _metric_columns(spec, cols, ts, typed, from_druid)
    status = {"__ts": ts, **_row_status(spec, cols, ts_name, ts, typed.errors)}
    columns = {**typed.columns, **status}
    parsed = raw.selectExpr(*[f"{sql} AS {sql_name(alias)}" for alias, sql in columns.items()])
    return parsed, dims, inputs


def _timestamp(spec: IngestionSpec, cols: _RawColumns, ts_name: str) -> str:
    ts_raw = cols.col(ts_name)
    ts = timestamp_col(ts_raw, spec.timestamp_format, cols.type(ts_name))
    if spec.timestamp_missing_value is not None:
        missing = f"try_cast({sql_str(spec.timestamp_missing_value)} AS TIMESTAMP)"
        blank = f"{ts_raw} IS NULL OR trim(CAST({ts_raw} AS STRING)) = ''"
        ts = f"CASE WHEN {blank} THEN {missing} ELSE {ts} END"
    if any(t.name == "__time" for t in spec.transforms):
        # A __time transform's value (epoch millis) replaces the timestamp that
        # timestampSpec parsed: a row whose own timestamp does not parse stays
        # unparseable, as in Druid, where the timestamp is parsed first.
        replaced = f"timestamp_millis(CAST({sql_name('__time')} AS BIGINT))"
        ts = replaced if ts_name == "__time" else f"CASE WHEN {ts} IS NOT NULL THEN {replaced} END"
    return ts


def _dimension_columns(spec, dims, cols: _RawColumns, typed: _Typed, from_druid: bool) -> None:
    handling = {d.name: d.multi_value_handling for d in spec.dimensions}
    list_delimiter = (
        None
        if from_druid
        else (spec.input.file_sources[0].list_delimiter if spec.input.file_sources else None)
    )
    for name, dtype in dims:
        if dtype == "string":
            typed.columns[name] = _string_dim(
                cols.col(name), cols.type(name), handling.get(name, "SORTED_ARRAY"), list_delimiter
            )
        elif dtype == "json":
            typed.columns[name] = _auto_dim(cols.col(name), cols.type(name))
        else:
            typed.number(cols, name, dtype, name)


def _metric_columns(spec, cols: _RawColumns, ts: str, typed: _Typed, from_druid: bool):
    """One MetricInput per metric; metrics reading the same field the same way
    share one input column (one expression, computed once)."""
    inputs: list[MetricInput] = []
    shared: dict[tuple, MetricInput] = {}
    for i, m in enumerate(spec.metrics):
        alias, field_type = f"__m{i}", cols.type(m.field_name)
        if m.type == "count":
            # Re-ingesting rolled-up rows: a count sums the existing count column.
            if from_druid and cols.type(m.name) in _NUMERIC:
                typed.columns[alias] = f"CAST({cols.col(m.name)} AS BIGINT)"
                inputs.append(MetricInput(m, alias, "count"))
            else:
                inputs.append(MetricInput(m, None, "rows"))
            continue
        kind = input_kind(m, field_type)
        key = (kind, m.field_name, _value_type(m) if kind in ("pair", "value", "variance") else "")
        if key in shared:
            inputs.append(MetricInput(m, shared[key].column, kind))
            continue
        if kind in STORED_INPUT_KINDS or (
            kind == "pair" and field_type.startswith("struct")  # already (time, value) pairs
        ):
            typed.columns[alias] = cols.col(m.field_name)
        elif kind in ("distinct", "theta"):
            typed.columns[alias] = cols.text(m.field_name)
        elif kind == "pair":
            value = _first_last_value(m, cols, typed)
            pair = f"named_struct('time', unix_millis({ts}), 'value', {value})"
            typed.columns[alias] = f"CASE WHEN {value} IS NOT NULL THEN {pair} END"
        else:  # value, variance, kll, histogram: a number
            typed.number(cols, m.field_name, input_number_type(m, kind), alias)
        shared[key] = MetricInput(m, alias, kind)
        inputs.append(shared[key])
    return inputs


def _value_type(m: Metric) -> str:
    """What a value or first/last metric reads its field as (metrics alike share it)."""
    if m.type == "variance":
        return input_number_type(m, "variance")
    if m.type in FIRST_LAST_TYPES:
        return f"{m.type.removesuffix('First').removesuffix('Last')}:{m.size or 1024}"
    return input_number_type(m, "value")


def _first_last_value(m: Metric, cols: _RawColumns, typed: _Typed) -> str:
    """SQL of the value of a first/last metric's (time, value) pair."""
    kind = m.type[: -len("First") if m.type.endswith("First") else -len("Last")]
    if kind == "string":  # Druid's maxStringBytes
        return f"substring({cols.text(m.field_name)}, 1, {int(m.size or 1024)})"
    value, bad = number_col(cols.col(m.field_name), kind, cols.type(m.field_name))
    typed.errors.append((bad, f"{m.field_name} is not a {kind}"))
    return value


def _row_status(spec, cols: _RawColumns, ts_name: str, ts: str, errors: list) -> dict[str, str]:
    """SQL of __unparseable, __reason, __thrown. The field errors are one flat
    concat_ws over each column's flag (a message or null), each message once."""
    corrupt = f"{sql_name(CORRUPT)} IS NOT NULL" if CORRUPT in cols.types else "false"
    messages: dict[str, str] = {}
    for bad, message in errors:
        messages.setdefault(message, bad)
    ts_text = f"coalesce(CAST({cols.col(ts_name)} AS STRING), 'null')"
    reason = (
        f"CASE WHEN {corrupt} THEN 'malformed row' "
        f"WHEN {ts} IS NULL THEN concat('unparseable timestamp: ', {ts_text})"
    )
    if messages:
        flags = ", ".join(
            f"CASE WHEN {bad} THEN {sql_str(msg)} END" for msg, bad in messages.items()
        )
        reason += f" ELSE nullif(concat_ws('; ', {flags}), '')"
    thrown = "false"
    if spec.intervals:
        inside = " OR ".join(
            f"({ts} >= timestamp_micros({_micros(iv.start)}) "
            f"AND {ts} < timestamp_micros({_micros(iv.end)}))"
            for iv in spec.intervals
        )
        thrown = f"NOT coalesce({inside}, false)"
    if spec.filter:
        row_millis = f"CAST(unix_millis({ts}) AS STRING)"

        def col_of(name: str) -> str:  # filters read __time as the row's epoch millis
            return row_millis if name == "__time" else cols.text(name)

        kinds = {name: _kind_of(dtype) for name, dtype in cols.types.items()}
        thrown = f"{thrown} OR NOT {filter_sql(spec.filter, col_of, kinds)}"
    return {
        "__unparseable": f"{corrupt} OR {ts} IS NULL",
        "__reason": reason + " END",
        "__thrown": thrown,
    }


def _micros(instant: datetime) -> int:
    delta = instant - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
