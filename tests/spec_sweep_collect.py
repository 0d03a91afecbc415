"""Collect real Druid task specs from a Druid checkout (a git directory) into a
directory `check.py --specs` reads (issue 27's sweep; not a test).

Usage: python tests/spec_sweep_collect.py GIT_DIR OUT_DIR [--skip DIR ...] [--rev REV]

Takes ingestion (index_parallel, index), compact and kill task specs from
docs/**/*.md (```json blocks), examples/quickstart/tutorial/, integration-tests*
and every module's src/test/resources (at REV, default HEAD). Template placeholders are
filled (`"%%X%%"` -> a name, a bare `%%X%%` -> null), local baseDirs and files
rewritten under @INPUT_ROOT@, and specs already in a --skip directory (the
visible corpus) left out by content. Writes OUT_DIR/<name>.json and SOURCES.tsv."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

TASK_TYPES = {"index_parallel", "index", "compact", "kill"}
PATHS = re.compile(
    r"^(examples/quickstart/tutorial/.*\.json|(.*/)?src/test/resources/.*\.json"
    r"|(.*/)?docs/.*\.md|web-console/.*\.json)$"
)
JSON_BLOCK = re.compile(r"```json\s*\n(.*?)```", re.S)


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True
    ).stdout


# What Druid's integration tests put in their templates' placeholders (the
# defaults of ITIndexerTest and friends; cloud tests read s3).
FILL = {
    "FORCE_GUARANTEED_ROLLUP": "false",
    "APPEND_TO_EXISTING": "false",
    "DROP_EXISTING": "false",
    "INPUT_FORMAT_TYPE": '"json"',
    "INPUT_SOURCE_TYPE": '"s3"',
    "INPUT_SOURCE_PROPERTY_KEY": '"uris"',
    "INPUT_SOURCE_PROPERTY_VALUE": '["s3://bucket/wikipedia.json"]',
    "INPUT_SOURCE_BASE_DIR": '"@INPUT_ROOT@"',
    "INPUT_SOURCE_FILTER": '"*.json"',
    "SEGMENT_GRANULARITY": '"DAY"',
    "PARTITIONS_SPEC": '{"type": "dynamic"}',
    "SEGMENT_AVAIL_TIMEOUT_MILLIS": "0",
    "INPUT_FORMAT": '{"type": "json"}',
    "GRANULARITYSPEC": '{"segmentGranularity": "DAY", "queryGranularity": "SECOND"}',
    "GRANULARITY_SPEC": '{"segmentGranularity": "DAY", "queryGranularity": "SECOND"}',
    "INPUT_SOURCE_CONFIG": '{"type": "local", "baseDir": "@INPUT_ROOT@", "filter": "*.json"}',
    "SQL_QUERY": '["SELECT * FROM wikipedia"]',
}


def _fill(text: str) -> str:
    def value(m: re.Match) -> str:
        name = m.group(1)
        if name in FILL:
            return FILL[name]
        return json.dumps(name.lower()) if m.group(0).startswith('"') else "null"

    text = re.sub(r'"?%%([A-Z0-9_]+)%%"?', value, text)
    return re.sub(r"\$\{[A-Za-z0-9_.]+\}", "x", text)


def _is_task(spec: dict) -> bool:
    """A whole task spec, not a fragment a doc builds step by step or a status."""
    if "statusCode" in spec:
        return False
    if spec["type"] in ("compact", "kill"):
        return isinstance(spec.get("dataSource"), str)
    inner = spec.get("spec")
    return isinstance(inner, dict) and "ioConfig" in inner and "dataSchema" in inner


def _local(source) -> None:
    if not isinstance(source, dict):
        return
    if source.get("type") == "local":
        if "baseDir" in source:
            source["baseDir"] = "@INPUT_ROOT@"
        if isinstance(source.get("files"), list):
            source["files"] = [f"@INPUT_ROOT@/{Path(str(f)).name}" for f in source["files"]]
    for delegate in source.get("delegates") or []:
        _local(delegate)


def _tasks(obj) -> list[dict]:
    """Task specs in a parsed document (the document itself, or a list of them)."""
    if isinstance(obj, list):
        return [t for item in obj for t in _tasks(item)]
    if isinstance(obj, dict) and isinstance(obj.get("type"), str) and obj["type"] in TASK_TYPES:
        return [obj]
    return []


def _documents(path: str, text: str) -> list[str]:
    return JSON_BLOCK.findall(text) if path.endswith(".md") else [text]


def _key(spec: dict) -> str:
    return hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def collect(git_dir: str, out: Path, skip: list[Path], rev: str = "HEAD") -> int:
    seen = {_key(json.loads(p.read_text())) for d in skip for p in d.glob("*.json")}
    out.mkdir(parents=True, exist_ok=True)
    rows = ["name\tdruid_path"]
    for path in _git(git_dir, "ls-tree", "-r", "--name-only", rev).splitlines():
        if not PATHS.match(path):
            continue
        try:
            text = _git(git_dir, "show", f"{rev}:{path}")
        except subprocess.CalledProcessError:
            continue
        for i, doc in enumerate(_documents(path, text)):
            try:
                parsed = json.loads(_fill(doc))
            except json.JSONDecodeError:
                continue
            for j, spec in enumerate(t for t in _tasks(parsed) if _is_task(t)):
                io = (spec.get("spec") or {}).get("ioConfig") or {}
                _local(io.get("inputSource"))
                key = _key(spec)
                if key in seen:
                    continue
                seen.add(key)
                stem = re.sub(r"[^A-Za-z0-9]+", "-", Path(path).stem)[:60]
                name = f"{stem}-{i}-{j}-{key[:6]}"
                (out / f"{name}.json").write_text(json.dumps(spec, indent=1))
                rows.append(f"{name}\t{path}")
    with (out / "SOURCES.tsv").open("a") as sources:
        sources.write("\n".join(rows[1:] if sources.tell() else rows) + "\n")
    return len(rows) - 1


if __name__ == "__main__":
    args = sys.argv[1:]
    options = dict(zip(args[2::2], args[3::2], strict=False))
    skips = [Path(v) for k, v in zip(args[2::2], args[3::2], strict=False) if k == "--skip"]
    print(collect(args[0], Path(args[1]), skips, options.get("--rev", "HEAD")), "specs")
