"""The Druid spec dialect is a pure package (SPEC §1: metastore/druid/, "No file
I/O"): validating a spec imports neither Django nor Spark, reads no file, and
its functions stay short; the files a local input source names are found when
the task runs (tests/test_bad_specs.py runs those refusals end to end)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec
from workers.jobs.input_files import resolve_local_inputs

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "metastore" / "druid"
# The native-query modules share the package but not this grammar's rules here.
SPEC_MODULES = sorted(p for p in PACKAGE.glob("*.py") if not p.name.startswith("native"))
# Calls that reach the file system, by name or attribute.
FILE_IO = {
    "open",
    "glob",
    "iglob",
    "resolve",
    "is_file",
    "is_dir",
    "exists",
    "read_text",
    "read_bytes",
    "iterdir",
    "stat",
    "lstat",
    "getsize",
    "listdir",
    "scandir",
    "walk",
    "realpath",
    "abspath",
    "getcwd",
}
FILE_MODULES = {"glob", "pathlib", "shutil", "tempfile", "io"}


def test_validating_a_spec_loads_neither_django_nor_pyspark():
    probe = "import json, sys; import metastore.druid.tasks; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    loaded = [
        m for m in json.loads(result.stdout) if m.split(".")[0] in ("django", "pyspark", "workers")
    ]
    assert loaded == []


@pytest.mark.parametrize("module", SPEC_MODULES, ids=lambda p: p.name)
def test_the_spec_modules_read_no_file(module):
    tree = ast.parse(module.read_text())
    offending = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            offending += [n for n in names if n and n.split(".")[0] in FILE_MODULES]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in FILE_IO:
                offending.append(f"{name}() at line {node.lineno}")
    assert offending == [], f"{module.name} touches the file system: {offending}"


@pytest.mark.parametrize("module", SPEC_MODULES, ids=lambda p: p.name)
def test_no_function_of_the_spec_grammar_is_over_60_lines(module):
    tree = ast.parse(module.read_text())
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > 60
    ]
    assert long == []


def _local_spec(source: dict) -> dict:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "files",
                "timestampSpec": {"column": "ts"},
                "dimensionsSpec": {"dimensions": ["page"]},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": source,
                "inputFormat": {"type": "json"},
            },
        },
    }


def test_a_local_source_validates_without_its_files_existing(tmp_path):
    root = tmp_path / "input"  # never created: validation must not look
    spec = _local_spec({"type": "local", "baseDir": str(root / "day1"), "filter": "*.json"})
    source = validate_task_spec(spec, input_roots=[root]).ingestion.input
    assert (source.base_dir, source.file_filter, source.files) == (str(root / "day1"), "*.json", ())
    assert source.field == "spec.ioConfig.inputSource"


@pytest.mark.parametrize(
    ("source", "field"),
    [
        ({"type": "local", "baseDir": "/etc"}, "spec.ioConfig.inputSource.baseDir"),
        ({"type": "local", "baseDir": "{root}/../.."}, "spec.ioConfig.inputSource.baseDir"),
        (
            {"type": "local", "files": ["{root}/a.json", "/etc/passwd"]},
            "spec.ioConfig.inputSource.files[1]",
        ),
    ],
    ids=["other-dir", "dotdot", "listed-file"],
)
def test_a_path_outside_the_roots_as_written_is_refused_at_validation(tmp_path, source, field):
    root = str(tmp_path / "input")
    source = json.loads(json.dumps(source).replace("{root}", root))
    with pytest.raises(SpecError) as refused:
        validate_task_spec(_local_spec(source), input_roots=[root])
    assert refused.value.field == field
    assert "outside the allowed input roots" in refused.value.message


def test_the_files_are_found_when_resolved_each_once_and_in_order(tmp_path):
    root = tmp_path / "input"
    (root / "day1").mkdir(parents=True)
    for name in ("b.json", "a.json", "empty.json"):
        (root / "day1" / name).write_text("" if name == "empty.json" else '{"ts": 1}\n')
    spec = _local_spec(
        {
            "type": "local",
            "baseDir": str(root / "day1"),
            "filter": "*.json",
            "files": [str(root / "day1" / "a.json")],
        }
    )
    ingestion = validate_task_spec(spec, input_roots=[root]).ingestion
    resolved = resolve_local_inputs(ingestion, input_roots=[root])
    assert resolved.input.files == (str(root / "day1" / "a.json"), str(root / "day1" / "b.json"))
    (root / "day1" / "a.json").unlink()
    with pytest.raises(SpecError) as refused:
        resolve_local_inputs(ingestion, input_roots=[root])
    assert refused.value.field == "spec.ioConfig.inputSource.files[0]"
