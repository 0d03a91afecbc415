"""ioConfig.inputFormat: json, csv, tsv, lines, regex, parquet, orc and avro_ocf, checked into
the keyword arguments of an `InputSpec` (no file is opened here)."""

from __future__ import annotations

import json
import re
from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, bool_at, int_at, object_at, string_at
from metastore.druid.flatten import flatten_spec

INPUT_FORMATS = ("json", "csv", "tsv", "lines", "regex", "parquet", "orc", "avro_ocf")
FILE_FORMATS = ("parquet", "orc", "avro_ocf")  # files with their own schema, never inline
# Input formats Druid documents that Strata does not read: why, and what to use.
UNSUPPORTED_FORMATS = {
    "avro_stream": "is a streaming format (one record per message), outside Strata's "
    "batch scope; write the records as JSON or Parquet files",
    "protobuf": "is a streaming format (one record per message), outside Strata's "
    "batch scope; write the records as JSON or Parquet files",
    "kafka": "is Kafka ingestion's format, outside Strata's batch scope",
    "kinesis": "is Kinesis ingestion's format, outside Strata's batch scope",
    "thrift": "comes from a Druid contrib extension, outside Strata's scope",
}
FORMAT_PATH = "spec.ioConfig.inputFormat"
_DELIMITED_FIELDS = {
    "type",
    "columns",
    "findColumnsFromHeader",
    "skipHeaderRows",
    "listDelimiter",
    "delimiter",
    "hasHeaderRow",
    "tryParseNumbers",
}
_JSON_FIELDS = {
    "type",
    "flattenSpec",
    "featureSpec",
    "keepNullColumns",
    "assumeNewlineDelimited",
    "useJsonNodeReader",
}
_JSON_IGNORED = (
    ("featureSpec", "Jackson parser features; rows are read by Spark's JSON reader"),
    (
        "keepNullColumns",
        "a column that is null in every row is kept when it is a declared dimension",
    ),
    ("assumeNewlineDelimited", "input is read one JSON object per line"),
    ("useJsonNodeReader", "input is read one JSON object per line"),
)


def input_format(io: dict, ignored: list[str]) -> dict:
    """The checked inputFormat as keyword arguments of InputSpec."""
    fmt_path = FORMAT_PATH
    fmt_obj = object_at(io.get("inputFormat"), fmt_path)
    fmt = fmt_obj.get("type")
    if isinstance(fmt, str) and fmt not in INPUT_FORMATS and fmt in UNSUPPORTED_FORMATS:
        raise SpecError(
            f"{fmt_path}.type",
            f"the {fmt} input format {UNSUPPORTED_FORMATS[fmt]}; "
            f"accepted: {', '.join(INPUT_FORMATS)}",
        )
    if fmt not in INPUT_FORMATS:
        raise SpecError(
            f"{fmt_path}.type",
            f"unknown input format {fmt!r}; accepted: {', '.join(INPUT_FORMATS)}",
        )
    if fmt in ("csv", "tsv"):
        return {"format": fmt, **_delimited(fmt_obj, fmt, ignored)}
    if fmt == "json":
        return {"format": fmt, **_json(fmt_obj, ignored)}
    if fmt == "lines":  # each line is one row of one string field, `line`
        allow(fmt_obj, fmt_path, {"type"})
        return {"format": fmt}
    if fmt == "regex":
        return {"format": fmt, **_regex(fmt_obj)}
    return {"format": fmt, **_file_format(fmt_obj, fmt, ignored)}


def _delimiters(fmt_obj: dict, fmt: str) -> dict:
    fmt_path = FORMAT_PATH
    if fmt == "csv" and fmt_obj.get("delimiter") not in (None, ","):
        raise SpecError(f"{fmt_path}.delimiter", "csv is comma-separated; use tsv with a delimiter")
    delimiter = fmt_obj.get("delimiter") or ("\t" if fmt == "tsv" else ",")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise SpecError(f"{fmt_path}.delimiter", "must be a single character")
    list_delimiter = fmt_obj.get("listDelimiter")
    if list_delimiter is not None:
        if not isinstance(list_delimiter, str) or not list_delimiter:
            raise SpecError(f"{fmt_path}.listDelimiter", "must be a non-empty string")
        if list_delimiter == delimiter:
            raise SpecError(f"{fmt_path}.listDelimiter", "must differ from the delimiter")
    # Druid's default list delimiter is \u0001 (Ctrl-A).
    return {"delimiter": delimiter, "list_delimiter": list_delimiter or "\u0001"}


def _delimited(fmt_obj: dict, fmt: str, ignored: list[str]) -> dict:
    """csv / tsv: delimiters, the columns (given, or from the header), skipped rows."""
    fmt_path = FORMAT_PATH
    allow(fmt_obj, fmt_path, _DELIMITED_FIELDS)
    out = _delimiters(fmt_obj, fmt)
    header = bool_at(fmt_obj, "findColumnsFromHeader", fmt_path, None)
    if header is None and "hasHeaderRow" in fmt_obj:  # Druid's legacy name
        header = bool_at(fmt_obj, "hasHeaderRow", fmt_path, False)
    if fmt_obj.get("tryParseNumbers") is not None:
        ignored.append(
            f"{fmt_path}.tryParseNumbers: every column is parsed by the type its "
            "dimension or metric declares"
        )
    if fmt_obj.get("columns") is not None:
        cols = fmt_obj["columns"]
        if not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols):
            raise SpecError(f"{fmt_path}.columns", "must be a non-empty list of names")
        if header is True:
            raise SpecError(
                f"{fmt_path}.findColumnsFromHeader", "cannot be true when columns are given"
            )
        out["csv_columns"] = tuple(cols)
    elif header is False:
        raise SpecError(f"{fmt_path}.columns", "is required when findColumnsFromHeader is false")
    out["csv_skip_header_rows"] = int_at(fmt_obj, "skipHeaderRows", fmt_path, 0)
    return out


def _regex(fmt_obj: dict) -> dict:
    """Druid's RegexInputFormat: each line must match `pattern` whole (a Java
    regular expression, which Spark runs too); its groups are the fields named
    by `columns` (default column_1, column_2, ...), split at `listDelimiter`."""
    fmt_path = FORMAT_PATH
    allow(fmt_obj, fmt_path, {"type", "pattern", "columns", "listDelimiter"})
    pattern = string_at(fmt_obj, "pattern", fmt_path)
    try:
        groups = re.compile(pattern).groups
    except re.error:
        groups = None  # Java syntax Python lacks (\p{...}); Spark checks it
    cols = fmt_obj.get("columns")
    if cols is None:
        if groups is None:
            raise SpecError(f"{fmt_path}.columns", "name the pattern's groups")
        cols = [f"column_{i}" for i in range(1, groups + 1)]
    if not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols):
        raise SpecError(f"{fmt_path}.columns", "must be a non-empty list of names")
    delimiter = fmt_obj.get("listDelimiter")
    if delimiter is not None and (not isinstance(delimiter, str) or not delimiter):
        raise SpecError(f"{fmt_path}.listDelimiter", "must be a non-empty string")
    return {
        "regex_pattern": pattern,
        "csv_columns": tuple(cols[:groups] if groups is not None else cols),
        "list_delimiter": delimiter or "\u0001",
    }


def _json(fmt_obj: dict, ignored: list[str]) -> dict:
    fmt_path = FORMAT_PATH
    allow(fmt_obj, fmt_path, _JSON_FIELDS)
    flatten, discovery = flatten_spec(fmt_obj, fmt_path)
    for key, reason in _JSON_IGNORED:
        if fmt_obj.get(key) not in (None, False, {}):
            ignored.append(f"{fmt_path}.{key}: {reason}")
    return {"flatten": flatten, "use_field_discovery": discovery}


def _file_format(fmt_obj: dict, fmt: str, ignored: list[str]) -> dict:
    """parquet, orc, avro_ocf: path flatten fields only, as in Druid."""
    fmt_path = FORMAT_PATH
    allowed = {"type", "binaryAsString", "flattenSpec"}
    allow(fmt_obj, fmt_path, allowed | ({"schema"} if fmt == "avro_ocf" else set()))
    flatten, discovery = flatten_spec(fmt_obj, fmt_path, jq=False)
    out: dict = {"flatten": flatten, "use_field_discovery": discovery}
    if fmt == "avro_ocf":
        out["avro_schema"] = avro_schema(fmt_obj.get("schema"), f"{fmt_path}.schema")
        out["binary_as_string"] = bool_at(fmt_obj, "binaryAsString", fmt_path, False)
    elif fmt_obj.get("binaryAsString") is not None:
        ignored.append(
            f"{fmt_path}.binaryAsString: {fmt} binary columns are read as Spark reads them"
        )
    return out


def avro_schema(schema: Any, path: str) -> str | None:
    """An avro_ocf reader schema, checked, as JSON text (None: the files' own)."""
    if schema is None:
        return None
    import fastavro

    try:
        fastavro.parse_schema(schema)
    except Exception as exc:  # noqa: BLE001 - fastavro says what is wrong with it
        raise SpecError(path, f"is not a valid Avro schema: {exc}") from exc
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise SpecError(path, "must be an Avro record schema")
    return json.dumps(schema)


# A zero-width probe put at the start of a capturing group i: it captures one
# character next to the group's position, in its own groups i+1 and i+2,
# whenever the group takes part in the match (the empty third branch keeps an
# empty line matching), so the replacement `probe_replacement(i)` is longer than
# one character exactly when group i took part. (Spark's regexp_replace reads
# numbered group references; named ones come out empty.)
REGEX_PROBE = r"(?:(?=([\s\S]))|(?<=([\s\S]))|)"


def probe_replacement(group: int) -> str:
    """The replacement text that reads group `group`'s probe (see REGEX_PROBE)."""
    return f"x${group + 1}${group + 2}"


def _group_starts(pattern: str) -> list[int]:
    """Where each capturing group's body starts in a Java regular expression
    (after `(` or `(?<name>`), in group order; escapes, \\Q...\\E and character
    classes skipped."""
    starts, i, depth = [], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            end = pattern.find("\\E", i + 2) if pattern.startswith("\\Q", i) else i
            i = (len(pattern) if end < 0 else end) + 2
            continue
        if depth:
            depth += {"[": 1, "]": -1}.get(c, 0)
        elif c == "[":
            depth = 1
            i += 2 if pattern.startswith("[^]", i) else 1
            i += pattern.startswith("]", i) or pattern.startswith("^]", i)
            continue
        elif c == "(" and not pattern.startswith("(?", i):
            starts.append(i + 1)
        elif c == "(" and pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in "=!":
            starts.append(pattern.index(">", i) + 1)
        i += 1
    return starts


def regex_group_probes(pattern: str) -> list[str | None]:
    """For each capturing group of `pattern`, the pattern with `REGEX_PROBE` at
    the group's start: Druid reads a group that did not take part as null (Java's
    `Matcher.group`), where Spark's regexp_extract gives ''. None for every group
    when numbered back references (which the probe would renumber) are used."""
    starts = _group_starts(pattern)
    if re.search(r"\\[1-9]", pattern.replace("\\\\", "")):
        return [None] * len(starts)
    return [pattern[:at] + REGEX_PROBE + pattern[at:] for at in starts]
