"""The files a local input source names, found when the task runs.

Validation (`metastore.druid.input_sources`) checks `baseDir`, `filter` and
`files` only as text; here they meet the file system: symbolic links are
followed, every file must lie inside an input root (STRATA_INPUT_ROOTS), and
the input must not be empty. A refusal is the same `SpecError`, naming the
field, so the task fails with the message a submit-time check would have given.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from metastore.druid.errors import SpecError
from metastore.druid.ingestion import IngestionSpec
from metastore.druid.input_sources import InputSpec, outside_roots_message


def resolve_local_inputs(spec: IngestionSpec, *, input_roots: Sequence) -> IngestionSpec:
    """`spec` with the files of each local input source found (InputSpec.files)."""
    return replace(spec, input=_resolved(spec.input, input_roots))


def _resolved(inp: InputSpec, input_roots: Sequence) -> InputSpec:
    if inp.type == "combining":
        return replace(inp, delegates=tuple(_resolved(d, input_roots) for d in inp.delegates))
    if inp.type != "local":
        return inp
    return replace(inp, files=local_files(inp, input_roots))


def _glob(inp: InputSpec, roots: list[Path], inside) -> list[Path]:
    path = inp.field
    base = Path(inp.base_dir).resolve()
    if not inside(base):
        raise SpecError(f"{path}.baseDir", outside_roots_message(inp.base_dir, roots))
    if not base.is_dir():
        raise SpecError(f"{path}.baseDir", f"{inp.base_dir!r} is not a directory")
    files = []
    for name in sorted(glob.glob(inp.file_filter or "*", root_dir=base, recursive=True)):
        candidate = (base / name).resolve()
        if candidate.is_file() and inside(candidate):
            files.append(candidate)
    return files


def _listed(inp: InputSpec, roots: list[Path], inside) -> list[Path]:
    files = []
    for i, name in enumerate(inp.listed_files or ()):
        candidate = Path(name).resolve()
        if not inside(candidate):
            raise SpecError(f"{inp.field}.files[{i}]", outside_roots_message(name, roots))
        if not candidate.is_file():
            raise SpecError(f"{inp.field}.files[{i}]", f"{name!r} does not exist or is not a file")
        files.append(candidate)
    return files


def local_files(inp: InputSpec, input_roots: Sequence) -> tuple[str, ...]:
    """The non-empty files `inp` reads (absolute, resolved, each once, in order),
    or a SpecError naming its baseDir, filter or files[i]."""
    roots = [Path(r).resolve() for r in input_roots]

    def inside(p: Path) -> bool:
        return any(p == r or r in p.parents for r in roots)

    files = _glob(inp, roots, inside) if inp.base_dir is not None else []
    files += _listed(inp, roots, inside)
    files = [f for f in dict.fromkeys(files) if os.path.getsize(f) > 0]
    if not files:
        raise SpecError(
            f"{inp.field}.filter" if inp.base_dir is not None else f"{inp.field}.files",
            "matches no non-empty file: the input is empty",
        )
    return tuple(str(f) for f in files)
