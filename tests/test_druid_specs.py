"""The shared corpus of real Druid task specs (../shared/druid_specs, see its
SOURCES.tsv) against Strata, the way its check.py runs them: each spec is
handed to `services.task_submit`, the function the REST API calls, and must be
accepted, or refused with a message naming the field and saying what to use
instead when it needs something outside Strata's scope. Then every accepted
ingestion spec runs on real Spark (the same `run_ingest` the worker calls),
and the few whose results the corpus documents are checked row by row.

The corpus is never copied into the project; a run without it skips."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.db import transaction

from metastore import services
from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec
from metastore.models import DataSource, Task
from workers.jobs.input_files import resolve_local_inputs

CORPUS = Path(__file__).parents[2] / "shared" / "druid_specs"
PLACEHOLDER = "@INPUT_ROOT@"
SPEC_NAMES = sorted(p.stem for p in CORPUS.glob("*.json")) if CORPUS.is_dir() else []

# Refused on purpose: (field, words of the message). Everything else that is not
# a compact task must be accepted.
REFUSED = {
    "it-http-input-source": (
        "spec.ioConfig.inputSource.type",
        ["http input sources are outside Strata's scope", "use a local input source"],
    ),
    # Druid's docs examples omit forceGuaranteedRollup, and Druid itself refuses them.
    "docs-native-batch-example": ("spec.tuningConfig.forceGuaranteedRollup", ["must be true"]),
    "docs-native-batch-simple-task": ("spec.tuningConfig.forceGuaranteedRollup", ["must be true"]),
}
# Compaction specs: validated by the compaction issue's code. Here they must be
# accepted or refused cleanly (a field and a message), never crash.
COMPACT = {
    "qs-compaction-keep-granularity",
    "qs-compaction-day-granularity",
    "it-compaction-task",
    "it-compaction-task-parallel",
    "it-compaction-granularity-spec",
    "it-compaction-segment-granularity",
    "itex-sparse-column-compaction-dims",
}

needs_corpus = pytest.mark.skipif(
    not SPEC_NAMES, reason=f"the shared Druid spec corpus is not at {CORPUS}"
)


class _Rollback(Exception):
    pass


@pytest.fixture(scope="module")
def input_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("druid-corpus") / "input"
    shutil.copytree(CORPUS / "data", root)
    return root


def load(name: str, root: Path) -> dict:
    text = (CORPUS / f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text.replace(PLACEHOLDER, json.dumps(str(root))[1:-1]))


def _druid_sources(src, out: set[str]) -> None:
    if isinstance(src, dict):
        if src.get("type") == "druid":
            out.add(src["dataSource"])
        for delegate in src.get("delegates") or []:
            _druid_sources(delegate, out)


@needs_corpus
@pytest.mark.django_db
@pytest.mark.parametrize("name", SPEC_NAMES)
def test_corpus_spec_is_accepted_or_refused_as_documented(name, input_root, settings, no_enqueue):
    settings.STRATA_INPUT_ROOTS = [input_root]
    spec = load(name, input_root)
    read: set[str] = set()
    _druid_sources(((spec.get("spec") or {}).get("ioConfig") or {}).get("inputSource"), read)
    for datasource in read:  # as if their first ingestion had run (as check.py does)
        DataSource.objects.get_or_create(name=datasource)
    try:
        with transaction.atomic():
            services.task_submit(spec=spec, user=None)
            raise _Rollback
    except _Rollback:
        outcome = None
    except SpecError as exc:
        outcome = exc
    assert not Task.objects.exists()
    if name in COMPACT:
        if outcome is not None:
            assert outcome.field.strip() and outcome.message.strip()
        return
    if name in REFUSED:
        field, words = REFUSED[name]
        assert outcome is not None, f"{name} was accepted"
        assert outcome.field == field, outcome
        for word in words:
            assert word in outcome.message, outcome
        return
    assert outcome is None, f"{name} refused: {outcome}"


# --- every accepted ingestion spec runs -------------------------------------------------

# Produced first: the dataSource that the reindexing specs read.
PRODUCER = "it-wikipedia-index-task"


@pytest.fixture(scope="module")
def corpus_runs(input_root, tmp_path_factory):
    """name -> (validated spec, IngestResult, segment files kept) for every
    accepted index spec, run in order (the producer first; druid inputs read
    what the corpus wrote before them)."""
    from workers.jobs.ingest import SourcePiece, run_ingest
    from workers.spark import get_spark

    spark = get_spark()
    work = tmp_path_factory.mktemp("corpus-runs")
    written: dict[str, list] = {}
    results = {}
    names = [PRODUCER] + [n for n in SPEC_NAMES if n != PRODUCER]
    for name in names:
        if name in COMPACT or name in REFUSED:
            continue
        validated = validate_task_spec(load(name, input_root), input_roots=[input_root])
        if validated.type != "index_parallel":
            continue
        spec = resolve_local_inputs(validated.ingestion, input_roots=[input_root])
        pieces = []
        source = spec.input.druid_source
        if source is not None:
            for chunk, path in written.get(source.datasource, []):
                visible = chunk.intersection(source.interval)
                if visible is not None and not visible.is_empty:
                    pieces.append(SourcePiece(location=path, segment=chunk, visible=visible))
        try:
            result = run_ingest(
                spark,
                spec,
                work_dir=work / "work" / name,
                job_group=f"corpus-{name}",
                source_pieces=pieces,
            )
        except Exception as exc:  # noqa: BLE001 - reported per spec by the test
            results[name] = (validated, exc, [])
            continue
        keep = work / "segments" / name
        keep.mkdir(parents=True)
        files = []
        for i, staged in enumerate(result.segments):
            target = keep / f"{i}.parquet"
            shutil.copy(staged.path, target)
            files.append((staged.chunk, str(target)))
        if spec.append_to_existing:
            written.setdefault(spec.datasource, []).extend(files)
        else:
            written[spec.datasource] = list(files)  # a copy: appends extend it, not `files`
        results[name] = (validated, result, files)
    return results


RUNNABLE = [
    n for n in SPEC_NAMES if n not in COMPACT and n not in REFUSED and n != "qs-deletion-kill"
]


@needs_corpus
@pytest.mark.spark
@pytest.mark.parametrize("name", RUNNABLE)
def test_corpus_spec_runs_on_spark(name, corpus_runs):
    validated, result, files = corpus_runs[name]
    assert not isinstance(result, Exception), f"{name}: {result!r}"
    stats = result.report["rowStats"]
    assert stats["unparseable"] == 0 and stats["processedWithError"] == 0, stats
    # Nothing accepted without effect goes unreported.
    assert result.report["ignored"] == list(validated.ignored)
    total = sum(pq.read_metadata(path).num_rows for _, path in files)
    assert total == result.report["rowsWritten"]
    if validated.ingestion.input.druid_source is None:
        assert total > 0, f"{name} wrote no rows"


def _rows(corpus_runs, name):
    _, _, files = corpus_runs[name]
    return [row for _, path in files for row in pq.read_table(path).to_pylist()]


@needs_corpus
def test_json_path_flatten_spec_functions(corpus_runs):
    # json_path_index_task.json: $.values.length(), min(), max(), sum() of [0,1,2,3,4]
    (row,) = _rows(corpus_runs, "it-json-path-index-task")
    assert (row["len"], row["min"], row["max"], row["sum"]) == (5, 0, 4, 10)


@needs_corpus
def test_tsv_with_a_pipe_delimiter_and_a_trailing_delimiter(corpus_runs):
    rows = _rows(corpus_runs, "qa-tpch-nation-tsv")
    assert len(rows) == 25
    algeria = next(r for r in rows if r["n_nationkey"] == 0)
    assert algeria["n_name"] == "ALGERIA" and algeria["n_regionkey"] == 0


@needs_corpus
def test_first_last_metrics_are_time_value_pairs_that_merge(corpus_runs):
    rows = _rows(corpus_runs, "it-merge-index-task")
    asia = [r for r in rows if r["continent"] == "Asia"]
    assert asia, rows
    for row in asia:
        first, last = row["first_user"], row["last_user"]
        assert first["time"] <= last["time"]
        assert row["long_first_delta"]["time"] == first["time"]
    # Re-ingested through a druid input source, the pairs merge by time.
    merged = _rows(corpus_runs, "it-merge-reindex-druid-input-source")
    assert merged and all(isinstance(r["first_user"], dict) for r in merged)


@needs_corpus
@pytest.mark.spark
def test_sketch_metrics_are_spark_sketches_that_merge(corpus_runs):
    from pyspark.sql import functions as F

    from workers.spark import get_spark

    validated, _, files = corpus_runs["it-wikipedia-index-task"]
    users = set()
    inp = validated.ingestion.input  # its files are found when the task runs
    paths = sorted(Path(inp.base_dir).glob(inp.file_filter or "*")) if inp.base_dir else []
    assert paths or inp.listed_files, inp
    for path in paths or inp.listed_files:  # the input, read here with json
        with open(path, encoding="utf-8") as fh:
            users |= {json.loads(line)["user"] for line in fh if line.strip()}
    df = get_spark().read.parquet(*[path for _, path in files])
    out = df.agg(
        F.theta_sketch_estimate(F.theta_union_agg("thetaSketch")).alias("theta"),
        F.hll_sketch_estimate(F.hll_union_agg("HLLSketchBuild")).alias("hll"),
        F.kll_sketch_get_n_double(F.kll_merge_agg_double("quantilesDoublesSketch")).alias("n"),
    ).collect()[0]
    # Unioned across every segment (two days, four segments): exact at this size.
    assert out["theta"] == len(users) and out["hll"] == len(users)
    assert out["n"] == 10  # one value per input row
