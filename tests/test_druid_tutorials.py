"""Druid's quickstart tutorials, end to end: the tutorial specs from the shared
corpus (../shared/druid_specs, unchanged but for the input root), submitted
through the REST API and run by a real Celery worker on real Spark. The rows
each tutorial page shows (Druid docs: tutorial-rollup.md,
tutorial-transform-spec.md, tutorial-update-data.md) are written here
literally, and compared with the visible rows Strata publishes."""

from __future__ import annotations

import json
import shutil
from datetime import UTC
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from metastore import selectors
from metastore.intervals import Interval, format_ts
from metastore.models import Segment, Task, TaskStatus

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CORPUS = Path(__file__).parents[2] / "shared" / "druid_specs"
PLACEHOLDER = "@INPUT_ROOT@"


@pytest.fixture
def tutorial(strata_dirs):
    """load(name) -> the corpus spec `name`, reading the tutorial data copied
    under this run's input root."""
    if not (CORPUS / "data" / "quickstart" / "tutorial").is_dir():
        pytest.skip(f"the shared Druid spec corpus is not at {CORPUS}")
    root = strata_dirs.input_root / "druid-corpus"
    if not root.exists():
        shutil.copytree(CORPUS / "data" / "quickstart", root / "quickstart")

    def load(name: str) -> dict:
        text = (CORPUS / f"{name}.json").read_text(encoding="utf-8")
        return json.loads(text.replace(PLACEHOLDER, json.dumps(str(root))[1:-1]))

    return load


def run(api_client, wait_for_task, spec: dict) -> Task:
    response = api_client.post("/api/v1/tasks", spec, format="json")
    assert response.status_code == 201, response.content
    task = wait_for_task(response.json()["task"])
    assert task.status == TaskStatus.SUCCESS, (task.error, task.report)
    return task


def visible_rows(datasource: str, columns: list[str]) -> list[tuple]:
    """Every visible row (as the timeline resolves overshadowing), `__time` as
    Druid prints it, sorted as the tutorial tables are not: callers sort too."""
    everything = Interval.parse("2000-01-01/2100-01-01")
    out = []
    for piece, ref in selectors.timeline_for(datasource=datasource).lookup(everything):
        if ref.tombstone:
            continue
        location = Segment.objects.get(id=ref.id).location
        for row in pq.read_table(location).to_pylist():
            t = row["__time"]
            t = t.astimezone(UTC) if t.tzinfo else t.replace(tzinfo=UTC)
            if piece.start <= t < piece.end:
                row["__time"] = format_ts(t)
                out.append(tuple(row[c] for c in columns))
    return out


def test_rollup_tutorial_rows(api_client, wait_for_task, tutorial):
    task = run(api_client, wait_for_task, tutorial("qs-rollup-index"))

    # tutorial-rollup.md: select * from "rollup-tutorial";
    columns = ["__time", "bytes", "count", "dstIP", "packets", "srcIP"]
    assert sorted(visible_rows("rollup-tutorial", columns)) == [
        ("2018-01-01T01:01:00.000Z", 35937, 3, "2.2.2.2", 286, "1.1.1.1"),
        ("2018-01-01T01:02:00.000Z", 366260, 2, "2.2.2.2", 415, "1.1.1.1"),
        ("2018-01-01T01:03:00.000Z", 10204, 1, "2.2.2.2", 49, "1.1.1.1"),
        ("2018-01-02T21:33:00.000Z", 100288, 2, "8.8.8.8", 161, "7.7.7.7"),
        ("2018-01-02T21:35:00.000Z", 2818, 1, "8.8.8.8", 12, "7.7.7.7"),
    ]
    # The legacy tuningConfig.maxRowsPerSegment is honoured; maxRowsInMemory
    # has no meaning here and the report says so.
    assert task.report["rowStats"]["processed"] == 9
    assert any(i.startswith("spec.tuningConfig.maxRowsInMemory:") for i in task.report["ignored"])


def test_transform_tutorial_rows(api_client, wait_for_task, tutorial):
    task = run(api_client, wait_for_task, tutorial("qs-transform-index"))

    # tutorial-transform-spec.md: select * from "transform-tutorial";
    columns = ["__time", "animal", "count", "location", "number", "triple-number"]
    assert sorted(visible_rows("transform-tutorial", columns)) == [
        ("2018-01-01T05:01:00.000Z", "super-mongoose", 1, 2, 200, 600),
        ("2018-01-01T06:01:00.000Z", "super-snake", 1, 3, 300, 900),
        ("2018-01-01T07:01:00.000Z", "super-octopus", 1, 1, 100, 300),
    ]
    # "The lion row has been discarded" by the filter, after the transforms.
    assert task.report["rowStats"]["thrownAway"] == 1


def test_updates_tutorial_init_overwrite_combine_append(api_client, wait_for_task, tutorial):
    columns = ["__time", "animal", "count", "number"]

    # tutorial-update-data.md, "Load initial data"
    run(api_client, wait_for_task, tutorial("qs-updates-init-index"))
    assert sorted(visible_rows("updates-tutorial", columns)) == sorted(
        [
            ("2018-01-01T01:01:00.000Z", "tiger", 1, 100),
            ("2018-01-01T03:01:00.000Z", "aardvark", 1, 42),
            ("2018-01-01T03:01:00.000Z", "giraffe", 1, 14124),
        ]
    )

    # "Overwrite the initial data"
    run(api_client, wait_for_task, tutorial("qs-updates-overwrite-index"))
    assert sorted(visible_rows("updates-tutorial", columns)) == sorted(
        [
            ("2018-01-01T01:01:00.000Z", "lion", 1, 100),
            ("2018-01-01T03:01:00.000Z", "aardvark", 1, 9999),
            ("2018-01-01T04:01:00.000Z", "bear", 1, 111),
        ]
    )

    # "Combine old data with new data and overwrite": a combining input source
    # reads the dataSource itself and a file, and rolls the lion rows up.
    task = run(api_client, wait_for_task, tutorial("qs-updates-append-index"))
    assert task.report["sourceSegments"] == 1
    assert sorted(visible_rows("updates-tutorial", columns)) == sorted(
        [
            ("2018-01-01T01:01:00.000Z", "lion", 2, 400),
            ("2018-01-01T03:01:00.000Z", "aardvark", 1, 9999),
            ("2018-01-01T04:01:00.000Z", "bear", 1, 111),
            ("2018-01-01T05:01:00.000Z", "mongoose", 1, 737),
            ("2018-01-01T06:01:00.000Z", "snake", 1, 1234),
            ("2018-01-01T07:01:00.000Z", "octopus", 1, 115),
        ]
    )

    # "Append to the data": the new bear row is not rolled up with the old one,
    # because it is in a separate segment.
    run(api_client, wait_for_task, tutorial("qs-updates-append-index2"))
    assert sorted(visible_rows("updates-tutorial", columns)) == sorted(
        [
            ("2018-01-01T01:01:00.000Z", "lion", 2, 400),
            ("2018-01-01T03:01:00.000Z", "aardvark", 1, 9999),
            ("2018-01-01T04:01:00.000Z", "bear", 1, 111),
            ("2018-01-01T05:01:00.000Z", "mongoose", 1, 737),
            ("2018-01-01T06:01:00.000Z", "snake", 1, 1234),
            ("2018-01-01T07:01:00.000Z", "octopus", 1, 115),
            ("2018-01-01T04:01:00.000Z", "bear", 1, 222),
            ("2018-01-01T09:01:00.000Z", "falcon", 1, 1241),
        ]
    )
