"""Wide schemas: the Spark plan of an ingestion grows linearly with its columns.

A 59-column TSV (typed dimensions, `MM/dd/yyyy` timestamps, YEAR segments,
dynamic partitioning) once spent more than 12 minutes in Catalyst's optimizer:
the row status (holding every column's value) was aliased before the columns,
and constraint propagation doubled its constraints at each later column. The
spec now runs through the runner, as a worker runs it, and its rows are checked;
500-column CSV and JSON (flattenSpec) inputs plan with one projection whose
expressions grow linearly. pytest-timeout is the guard against a plan explosion:
nothing here measures wall-clock time.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from metastore.druid.tasks import validate_task_spec
from metastore.models import Segment, TaskStatus
from workers.jobs.input_files import resolve_local_inputs

pytestmark = pytest.mark.spark

TYPES = ("string", "long", "double", "float")


def wide_rows(columns: int, rows: int, seed: int = 7) -> tuple[list[str], list[list[str]]]:
    """A header (`ts`, then c0.. typed round-robin by TYPES) and rows of text values,
    timestamps `MM/dd/yyyy` over 2019-2021."""
    rnd = random.Random(seed)
    header = ["ts", *[f"c{i}" for i in range(columns)]]
    out = []
    for _ in range(rows):
        row = [
            f"{rnd.randint(1, 12):02d}/{rnd.randint(1, 28):02d}/{rnd.choice((2019, 2020, 2021))}"
        ]
        for i in range(columns):
            kind = TYPES[i % 4]
            if kind == "string":
                row.append(f"s{rnd.randint(0, 40)}")
            elif kind == "long":
                row.append(str(rnd.randint(-1000, 1000)))
            else:
                row.append(f"{rnd.randint(0, 100000) / 8}")  # exact in binary
        out.append(row)
    return header, out


def wide_spec(columns: int, source: dict, input_format: dict, **schema) -> dict:
    dims = [{"type": TYPES[i % 4], "name": f"c{i}"} for i in range(columns)]
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "wide",
                "timestampSpec": {"column": "ts", "format": "MM/dd/yyyy"},
                "dimensionsSpec": {"dimensions": dims},
                "granularitySpec": {
                    "segmentGranularity": "YEAR",
                    "queryGranularity": "NONE",
                    "rollup": False,
                },
                **schema,
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": source,
                "inputFormat": input_format,
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
    }


def test_59_column_tsv_with_us_dates_and_year_segments_ingests_through_the_runner(
    run_spec, strata_dirs
):
    header, rows = wide_rows(59, 6001)
    rows[17][2] = "not-a-number"  # c1 is a long: the row is kept, with c1 null
    base = strata_dirs.input_root / "wide59"
    base.mkdir()
    (base / "data.tsv").write_text("\n".join("\t".join(r) for r in [header, *rows]) + "\n")
    spec = wide_spec(
        59,
        {"type": "local", "baseDir": str(base), "filter": "*.tsv"},
        {"type": "tsv", "findColumnsFromHeader": True},
    )

    task = run_spec(spec)

    assert task.status == TaskStatus.SUCCESS, task.error
    stats = task.report["rowStats"]
    assert stats == {"processed": 6000, "processedWithError": 1, "thrownAway": 0, "unparseable": 0}
    segments = list(Segment.objects.filter(created_by=task).order_by("start"))
    assert [s.start.year for s in segments] == [2019, 2020, 2021]
    tables = [pq.read_table(s.location) for s in segments]
    got = {name: [] for name in ["__time", *header[1:]]}
    for table, segment in zip(tables, segments, strict=True):
        assert table.schema.field("c1").type == "int64"
        assert table.schema.field("c2").type == "double"
        for name in got:
            got[name] += table.column(name).to_pylist()
        assert all(t.year == segment.start.year for t in table.column("__time").to_pylist())
    assert len(got["__time"]) == 6001

    def parsed(i: int, text: str):
        kind = TYPES[(i - 1) % 4]
        if kind == "string":
            return text
        if kind == "long":
            return int(text) if text.lstrip("-").isdigit() else None
        return float(text)

    # The same rows, column by column, as multisets of (time, value).
    for i, name in enumerate(header[1:], start=1):
        expected = sorted(
            ((_us_date(r[0]), parsed(i, r[i])) for r in rows), key=lambda p: (p[0], repr(p[1]))
        )
        actual = sorted(
            zip((t.replace(tzinfo=UTC) for t in got["__time"]), got[name], strict=True),
            key=lambda p: (p[0], repr(p[1])),
        )
        assert actual == expected, name


def _us_date(text: str) -> datetime:
    return datetime.strptime(text, "%m/%d/%Y").replace(tzinfo=UTC)


def _parse(spec: dict, input_root: Path, scratch: Path):
    """The parsed input of `spec`, in the session ingestion plans in."""
    from workers.jobs.ingest import ingest_session
    from workers.jobs.parsing import parse_input
    from workers.spark import get_spark

    ingestion = validate_task_spec(spec, input_roots=[input_root]).ingestion
    ingestion = resolve_local_inputs(ingestion, input_roots=[input_root])
    return parse_input(ingest_session(get_spark()), ingestion, scratch_dir=scratch)


# Characters of SQL per column of the parse projection: a string dimension, the
# largest, is ~1,000; one that nests or repeats other columns' trees is far more.
CHARS_PER_COLUMN = 2500


def _assert_one_linear_projection(parsed, columns: int) -> None:
    """The rows a run reads plan (the guard is the test's timeout), and the parse
    is one projection over the read, its text linear in the columns."""
    rows, _ = parsed.observed(f"wide{columns}")
    rows._jdf.queryExecution().optimizedPlan()
    plan = parsed.parsed._jdf.queryExecution().optimizedPlan()
    assert plan.nodeName() == "Project", plan.nodeName()
    assert plan.expressions().size() == columns + 4  # the dimensions, __ts and the row status
    assert len(plan.expressions().mkString("\n")) < CHARS_PER_COLUMN * columns


@pytest.mark.timeout(300)
def test_500_column_csv_plans_one_linear_projection(strata_dirs, tmp_path):
    base = strata_dirs.input_root / "wide500csv"
    base.mkdir()
    header, rows = wide_rows(500, 3)
    (base / "w.csv").write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    source = {"type": "local", "baseDir": str(base), "filter": "w.csv"}
    spec = wide_spec(500, source, {"type": "csv", "findColumnsFromHeader": True})

    parsed = _parse(spec, strata_dirs.input_root, tmp_path)

    _assert_one_linear_projection(parsed, 500)
    got = parsed.parsed.select("c497", "c498").collect()
    assert sorted(r["c497"] for r in got) == sorted(int(r[498]) for r in rows)
    assert sorted(r["c498"] for r in got) == sorted(float(r[499]) for r in rows)


@pytest.mark.timeout(300)
def test_500_field_json_with_flatten_spec_plans_one_linear_projection(strata_dirs, tmp_path):
    base = strata_dirs.input_root / "wide500json"
    base.mkdir()
    header, rows = wide_rows(500, 3)
    # Every value one level down: {"ts": .., "v": {"c0": .., ...}}
    lines = [json.dumps({"ts": r[0], "v": dict(zip(header[1:], r[1:], strict=True))}) for r in rows]
    (base / "w.json").write_text("\n".join(lines) + "\n")
    fields = [{"type": "path", "name": f"c{i}", "expr": f"$.v.c{i}"} for i in range(500)]
    fmt = {"type": "json", "flattenSpec": {"useFieldDiscovery": False, "fields": fields}}
    source = {"type": "local", "baseDir": str(base), "filter": "w.json"}

    parsed = _parse(wide_spec(500, source, fmt), strata_dirs.input_root, tmp_path)

    _assert_one_linear_projection(parsed, 500)
    got = parsed.parsed.select("c496", "c498").collect()
    assert sorted(r["c496"] for r in got) == sorted(r[497] for r in rows)
    assert sorted(r["c498"] for r in got) == sorted(float(r[499]) for r in rows)
