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
        "metastore.upgrade_rules",
        "metastore.checkpoint_codec",
        "metastore.timeline_view",
        "metastore.druid.expressions",
        "metastore.sql_guard",
        "metastore.sql_druid",
        "metastore.sql_druid_rules",
        "metastore.sql_druid_syntax",
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


# Every module of the metastore and the console, imported in a fresh, configured Django.
WEB_SIDE_PROBE = """
import importlib, json, pkgutil, sys
import django
django.setup()
import console, metastore
names = [
    info.name
    for package in (metastore, console)
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
]
for name in names:
    importlib.import_module(name)
print(json.dumps({"from": metastore.__file__, "imported": names, "loaded": sorted(sys.modules)}))
"""


def test_the_metastore_and_the_console_never_import_the_workers(tmp_path):
    """The services name the worker's Celery task by string and never import
    `workers` (issue 10: the one import cycle, services -> workers.tasks ->
    services). Nothing on the web side loads the workers, nor Spark with them."""
    result = subprocess.run(
        [sys.executable, "-c", WEB_SIDE_PROBE],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "STRATA_DATA_DIR": str(tmp_path),
        },
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout)
    assert Path(probe["from"]).parent.parent == REPO  # this checkout, not another install
    assert "metastore.services.publish" in probe["imported"]
    assert "console.api" in probe["imported"]
    offending = [
        name
        for name in probe["loaded"]
        if any(name == f or name.startswith(f + ".") for f in ("workers", "pyspark"))
    ]
    assert offending == [], f"importing the metastore and the console loaded {offending}"
