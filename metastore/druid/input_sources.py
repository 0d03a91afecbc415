"""ioConfig.inputSource: local, inline, druid and combining (with what to use
instead for the sources Druid reads from elsewhere).

Validation is pure: a local source's `baseDir`, `filter` and `files` are checked
as text here (syntax, and lexically inside the input roots); which files they
name is found when the task runs (`workers.jobs.input_files`), which refuses
then, naming the same fields.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metastore.druid.errors import SpecError
from metastore.druid.fields import allow, object_at
from metastore.druid.flatten import FlattenField
from metastore.druid.granularity import interval_at
from metastore.druid.input_formats import FILE_FORMATS, input_format
from metastore.druid.names import datasource_name
from metastore.intervals import Interval

INPUT_SOURCES = ("local", "inline", "druid", "combining")
# Input sources that need something outside this product: what to use instead.
OUT_OF_SCOPE_SOURCES = {
    "http": "download the files into an input root (STRATA_INPUT_ROOTS) and use a local input source",
    "s3": "copy the objects into an input root (STRATA_INPUT_ROOTS) and use a local input source",
    "google": "copy the objects into an input root and use a local input source",
    "azure": "copy the blobs into an input root and use a local input source",
    "azureStorage": "copy the blobs into an input root and use a local input source",
    "hdfs": "copy the files into an input root and use a local input source",
    "sql": "export the query result to JSON or CSV in an input root and use a local input source",
    "delta": "export the table to Parquet in an input root and use a local input source",
    "iceberg": "export the table to Parquet in an input root and use a local input source",
    "oss": "copy the objects into an input root and use a local input source",
}
INPUT_SOURCE_FIELDS = {
    "local": {"type", "baseDir", "filter", "files"},
    "inline": {"type", "data"},
    "druid": {
        "type",
        "dataSource",
        "interval",
        "filter",
        "dimensions",
        "metrics",
        "maxInputSegmentBytesPerTask",
    },
    "combining": {"type", "delegates"},
}
SOURCE_PATH = "spec.ioConfig.inputSource"
PATH_MAX_BYTES = 4096  # Linux PATH_MAX
NAME_MAX_BYTES = 255  # Linux NAME_MAX: one path component


@dataclass(frozen=True)
class InputSpec:
    type: str
    format: str | None = None
    # local: what the spec names (checked as text), and the files found when the
    # task runs (resolved absolute paths; () until then).
    base_dir: str | None = None
    file_filter: str | None = None
    listed_files: tuple[str, ...] | None = None
    files: tuple[str, ...] = ()
    field: str = SOURCE_PATH  # where this source is in the spec (errors name it)
    data: str | None = None  # inline
    datasource: str | None = None  # druid
    interval: Interval | None = None  # druid
    csv_columns: tuple[str, ...] | None = None  # None: the first line is the header
    csv_skip_header_rows: int = 0
    delimiter: str = ","  # csv / tsv
    list_delimiter: str | None = None  # csv / tsv / regex multi-value separator
    regex_pattern: str | None = None  # regex: each line must match it whole
    flatten: tuple[FlattenField, ...] = ()  # flattenSpec fields
    avro_schema: str | None = None  # avro_ocf reader schema (JSON text)
    binary_as_string: bool = False  # avro_ocf: bytes as UTF-8 text
    use_field_discovery: bool = True  # json flattenSpec: top-level fields too
    delegates: tuple[InputSpec, ...] = ()  # combining

    @property
    def druid_source(self) -> InputSpec | None:
        """The `druid` input read (itself, or the one druid delegate of a combining source)."""
        if self.type == "druid":
            return self
        return next((d for d in self.delegates if d.type == "druid"), None)

    @property
    def file_sources(self) -> tuple[InputSpec, ...]:
        """The local/inline inputs (itself, or the combining source's delegates)."""
        if self.type in ("local", "inline"):
            return (self,)
        return tuple(d for d in self.delegates if d.type in ("local", "inline"))


def check_path_text(text: str, path: str) -> None:
    """Refuse, before the filesystem sees it, a path it would choke on: NUL or
    other control characters, a name over NAME_MAX bytes, a path over PATH_MAX."""
    if re.search(r"[\x00-\x1f\x7f]", text):
        raise SpecError(path, "contains a NUL or control character")
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        raise SpecError(path, "is not a valid file name") from None
    if len(encoded) > PATH_MAX_BYTES:
        raise SpecError(path, f"a path of {len(encoded)} bytes; at most {PATH_MAX_BYTES}")
    longest = max((len(part) for part in encoded.split(b"/")), default=0)
    if longest > NAME_MAX_BYTES:
        raise SpecError(path, f"has a name of {longest} bytes; at most {NAME_MAX_BYTES}")


def outside_roots_message(name: str, roots: Sequence[Any]) -> str:
    shown = ", ".join(str(r) for r in roots) or "(none configured)"
    return f"{name!r} is outside the allowed input roots (STRATA_INPUT_ROOTS: {shown})"


def _check_inside_roots(name: str, path: str, roots: Sequence[Any]) -> None:
    """Refuse an absolute path that lies, as written, outside every root (`..`
    steps folded). Symbolic links are followed when the task runs, which checks again."""
    if not posixpath.isabs(name):
        return  # relative to the worker's directory: checked when the task runs
    normal = posixpath.normpath(name)
    for root in roots:
        root_text = posixpath.normpath(os.fspath(root))
        if normal == root_text or normal.startswith(root_text.rstrip("/") + "/"):
            return
    raise SpecError(path, outside_roots_message(name, roots))


def _local_source(src: dict, path: str, fmt: dict, input_roots: Sequence[Any]) -> InputSpec:
    allow(src, path, INPUT_SOURCE_FIELDS["local"])
    base_dir, pattern = src.get("baseDir"), src.get("filter")
    if pattern is not None and not isinstance(pattern, str):
        raise SpecError(f"{path}.filter", "must be a glob pattern string")
    if base_dir is not None:
        if not isinstance(base_dir, str) or not base_dir:
            raise SpecError(f"{path}.baseDir", "must be a directory path")
        check_path_text(base_dir, f"{path}.baseDir")
        if isinstance(pattern, str):
            check_path_text(pattern, f"{path}.filter")
        _check_inside_roots(base_dir, f"{path}.baseDir", input_roots)
        pattern = pattern or "*"
        if not isinstance(pattern, str):
            raise SpecError(f"{path}.filter", "must be a glob pattern string")
    listed = src.get("files")
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(f, str) for f in listed):
            raise SpecError(f"{path}.files", "must be a list of file paths")
        for i, name in enumerate(listed):
            check_path_text(name, f"{path}.files[{i}]")
            _check_inside_roots(name, f"{path}.files[{i}]", input_roots)
        listed = tuple(listed)
    if base_dir is None and not listed:
        raise SpecError(path, "a local input source needs baseDir (with filter) or files")
    return InputSpec(
        type="local",
        base_dir=base_dir,
        file_filter=pattern if base_dir is not None else None,
        listed_files=listed,
        field=path,
        **fmt,
    )


def _inline_source(src: dict, path: str, fmt: dict) -> InputSpec:
    allow(src, path, INPUT_SOURCE_FIELDS["inline"])
    data = src.get("data")
    if not isinstance(data, str):
        raise SpecError(f"{path}.data", "is required (a string of rows)")
    if not data.strip():
        raise SpecError(f"{path}.data", "is empty: the input has no rows")
    if fmt["format"] in FILE_FORMATS:
        raise SpecError(
            "spec.ioConfig.inputFormat.type",
            f"{fmt['format']} cannot be given inline; use json or csv",
        )
    return InputSpec(type="inline", data=data, field=path, **fmt)


def _druid_source(src: dict, path: str, io: dict, ignored: list[str], *, nested: bool) -> InputSpec:
    allow(src, path, INPUT_SOURCE_FIELDS["druid"])
    if src.get("filter"):
        raise SpecError(f"{path}.filter", "is not supported; use transformSpec.filter")
    for key in ("dimensions", "metrics"):
        if src.get(key) is not None:
            raise SpecError(
                f"{path}.{key}",
                "is not supported; list the columns to keep in dimensionsSpec and metricsSpec",
            )
    if src.get("maxInputSegmentBytesPerTask") is not None:
        ignored.append(
            f"{path}.maxInputSegmentBytesPerTask: Spark splits the segments it reads by itself"
        )
    if io.get("inputFormat") is not None and not nested:
        ignored.append(
            "spec.ioConfig.inputFormat: a druid input source reads segments, whatever the format says"
        )
    return InputSpec(
        type="druid",
        field=path,
        datasource=datasource_name(src.get("dataSource"), f"{path}.dataSource"),
        interval=interval_at(src.get("interval"), f"{path}.interval"),
    )


@dataclass(frozen=True)
class _Reading:
    """What every source of one ioConfig shares while it is read."""

    io: dict
    input_roots: Sequence[Any]
    ignored: list[str]


def _combining_source(src: dict, path: str, reading: _Reading) -> InputSpec:
    allow(src, path, INPUT_SOURCE_FIELDS["combining"])
    delegates = src.get("delegates")
    if not isinstance(delegates, list) or not delegates:
        raise SpecError(f"{path}.delegates", "must be a non-empty list of input sources")
    parts = tuple(
        _one_source(d, f"{path}.delegates[{i}]", reading, nested=True)
        for i, d in enumerate(delegates)
    )
    druids = [i for i, d in enumerate(parts) if d.type == "druid"]
    if len(druids) > 1:
        raise SpecError(
            f"{path}.delegates[{druids[1]}]",
            "at most one druid delegate; read several dataSources with several tasks",
        )
    fmt = next((d.format for d in parts if d.format), None)
    return InputSpec(type="combining", format=fmt, field=path, delegates=parts)


def _source_type(src: dict, path: str, *, nested: bool) -> str:
    kind = src.get("type")
    if not isinstance(kind, str):
        kind = repr(kind)  # e.g. an object: named in the error, never looked up as a key
    if kind in OUT_OF_SCOPE_SOURCES:
        raise SpecError(
            f"{path}.type",
            f"{kind} input sources are outside Strata's scope: {OUT_OF_SCOPE_SOURCES[kind]}",
        )
    if kind not in INPUT_SOURCES or (nested and kind == "combining"):
        accepted = [k for k in INPUT_SOURCES if not (nested and k == "combining")]
        raise SpecError(
            f"{path}.type",
            f"unknown input source {kind!r}; accepted: {', '.join(accepted)}",
        )
    return kind


def _one_source(src: Any, path: str, reading: _Reading, *, nested: bool) -> InputSpec:
    src = object_at(src, path)
    kind = _source_type(src, path, nested=nested)
    if kind == "combining":
        return _combining_source(src, path, reading)
    if kind == "druid":
        return _druid_source(src, path, reading.io, reading.ignored, nested=nested)
    fmt = input_format(reading.io, reading.ignored)
    if kind == "local":
        return _local_source(src, path, fmt, reading.input_roots)
    return _inline_source(src, path, fmt)


def input_spec(io: dict, input_roots: Sequence[Any], ignored: list[str] | None = None) -> InputSpec:
    """ioConfig's inputSource (with its inputFormat), validated without reading it."""
    reading = _Reading(io, input_roots, [] if ignored is None else ignored)
    return _one_source(io.get("inputSource"), SOURCE_PATH, reading, nested=False)
