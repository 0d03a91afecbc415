"""The pure core imports neither Django nor Spark (SPEC §1, STYLE "Pure core")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FORBIDDEN = ("django", "pyspark")

PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    "module",
    [
        "metastore.intervals",
        "metastore.timeline",
        "metastore.locking",
        "metastore.allocation_rules",
        "metastore.checkpoint_codec",
    ],
)
def test_importing_a_core_module_loads_neither_django_nor_pyspark(module):
    # A fresh interpreter: this test process may well have Django loaded already.
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    offending = [
        name for name in loaded if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert offending == [], f"importing {module} loaded {offending}"
