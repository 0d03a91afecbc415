"""Druid's own validation rules for task specs, as its reference documents them:
partitionsSpec and forceGuaranteedRollup, extension aggregators outside scope,
and the kill task's fields run through the real kill path."""

from __future__ import annotations

import copy

import pytest

from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec

pytestmark = pytest.mark.django_db

ROLLUP = "spec.tuningConfig.forceGuaranteedRollup"


@pytest.fixture
def spec(inline_spec) -> dict:
    return inline_spec(
        "rules",
        intervals=["2024-01-01/2024-01-02"],
        dimensions=["page", {"type": "long", "name": "ns"}, {"type": "double", "name": "score"}],
        data='{"ts": "2024-01-01T00:10:00Z", "page": "A", "ns": 3, "score": 1.5, "added": 1}\n',
    )


def tuned(spec: dict, **tuning) -> dict:
    out = copy.deepcopy(spec)
    out["spec"]["tuningConfig"] = {"type": "index_parallel", **tuning}
    return out


def refusal(spec: dict) -> SpecError:
    with pytest.raises(SpecError) as caught:
        validate_task_spec(spec, input_roots=[])
    return caught.value


# --- partitionsSpec and forceGuaranteedRollup ------------------------------------------


@pytest.mark.parametrize(
    "partitions",
    [
        {"type": "hashed", "numShards": 2},
        {"type": "range", "partitionDimensions": ["page"], "targetRowsPerSegment": 10},
        {"type": "single_dim", "partitionDimension": "page", "targetRowsPerSegment": 10},
    ],
    ids=["hashed", "range", "single_dim"],
)
@pytest.mark.parametrize("rollup", [None, False, "false"], ids=["absent", "false", "str-false"])
def test_secondary_partitioning_without_force_guaranteed_rollup_is_refused(
    spec, partitions, rollup
):
    tuning = {"partitionsSpec": partitions}
    if rollup is not None:
        tuning["forceGuaranteedRollup"] = rollup
    error = refusal(tuned(spec, **tuning))
    assert error.field == ROLLUP
    assert "must be true" in error.message and partitions["type"] in error.message


def test_secondary_partitioning_refusal_is_a_400_naming_the_field(api_client, spec):
    body = tuned(spec, partitionsSpec={"type": "hashed", "numShards": 2})
    response = api_client.post("/api/v1/tasks", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == ROLLUP


def test_dynamic_partitioning_with_force_guaranteed_rollup_is_refused(spec):
    error = refusal(tuned(spec, partitionsSpec={"type": "dynamic"}, forceGuaranteedRollup=True))
    assert error.field == "spec.tuningConfig.partitionsSpec.type"
    assert "perfect rollup" in error.message


def test_force_guaranteed_rollup_without_partitions_spec_means_hashed(spec):
    # Druid's default partitionsSpec with forceGuaranteedRollup is hashed.
    ingestion = validate_task_spec(
        tuned(spec, forceGuaranteedRollup=True), input_roots=[]
    ).ingestion
    assert ingestion.partitions.type == "hashed" and ingestion.force_guaranteed_rollup


def test_legacy_num_shards_makes_hashed_only_with_force_guaranteed_rollup(spec):
    best_effort = validate_task_spec(
        tuned(spec, numShards=3, maxRowsPerSegment=100), input_roots=[]
    )
    assert best_effort.ingestion.partitions.type == "dynamic"
    assert best_effort.ingestion.partitions.max_rows_per_segment == 100
    assert any(i.startswith("spec.tuningConfig.numShards:") for i in best_effort.ignored)

    perfect = validate_task_spec(
        tuned(spec, numShards=3, forceGuaranteedRollup=True), input_roots=[]
    ).ingestion
    assert perfect.partitions.type == "hashed" and perfect.partitions.num_shards == 3


@pytest.mark.parametrize("dimension", ["ns", "score"], ids=["long", "double"])
def test_range_partitioning_on_a_numeric_dimension_is_accepted(spec, dimension):
    # Druid's range partitioning takes any single-valued dimension (it compares
    # their values as strings); numeric dimensions are not refused.
    ingestion = validate_task_spec(
        tuned(
            spec,
            partitionsSpec={"type": "range", "partitionDimensions": [dimension, "page"]},
            forceGuaranteedRollup=True,
        ),
        input_roots=[],
    ).ingestion
    assert ingestion.partitions.type == "range"
    assert ingestion.partitions.partition_dimensions == (dimension, "page")


def test_range_partitioning_on_a_count_metric_is_accepted_and_splits_nothing(spec):
    # Druid's qaArray range test partitions on its count metric `cnt`: Druid reads
    # it from the input row, where it is null: one range per time chunk.
    body = tuned(
        spec,
        partitionsSpec={"type": "range", "partitionDimensions": ["count"], "maxRowsPerSegment": 9},
        forceGuaranteedRollup=True,
    )
    validated = validate_task_spec(body, input_roots=[])
    assert validated.ingestion.partitions.type == "range"
    assert validated.ingestion.partitions.partition_dimensions == ()
    assert any("is a count metric" in i for i in validated.ignored), validated.ignored


def test_range_partitioning_on_another_metric_names_it(spec):
    error = refusal(
        tuned(
            spec,
            partitionsSpec={"type": "range", "partitionDimensions": ["added"]},
            forceGuaranteedRollup=True,
        )
    )
    assert error.field == "spec.tuningConfig.partitionsSpec.partitionDimensions[0]"
    assert "'added' is a metric" in error.message
    assert "at least one dimension" not in error.message


# --- run on Spark: the runner, as the worker calls it ----------------------------------


@pytest.fixture
def run_spec(transactional_db, settings, no_enqueue):
    """`run_spec(spec)` -> the Task after the runner ran it here (Spark for ingestion)."""
    from metastore import services
    from metastore.models import Task
    from workers import runner

    settings.STRATA_HEARTBEAT_SECONDS = 0.2

    def run(body: dict) -> Task:
        task = services.task_submit(spec=body)
        assert services.task_claim(task_id=task.id, worker="pytest")
        runner.run_task(task.id)
        return Task.objects.get(id=task.id)

    return run


def _events(day: str, n: int) -> str:
    return "\n".join(
        f'{{"ts": "{day}T{i % 24:02d}:00:00Z", "page": "p{i}", "ns": {i}, "added": 1}}'
        for i in range(n)
    )


@pytest.mark.spark
def test_range_on_a_count_metric_ingests_one_range_per_chunk(run_spec, inline_spec):
    import pyarrow.parquet as pq

    from metastore.models import Segment, TaskStatus

    body = inline_spec(
        "range_cnt",
        intervals=["2024-01-01/2024-01-03"],
        dimensions=["page", {"type": "long", "name": "ns"}],
        metrics=[{"type": "count", "name": "cnt"}],
        data=_events("2024-01-01", 12) + "\n" + _events("2024-01-02", 5),
        tuning={
            "type": "index_parallel",
            "partitionsSpec": {
                "type": "range",
                "partitionDimensions": ["cnt"],
                "maxRowsPerSegment": 3,
            },
            "forceGuaranteedRollup": True,
        },
    )
    task = run_spec(body)

    assert task.status == TaskStatus.SUCCESS, task.error
    segments = list(Segment.objects.filter(created_by=task).order_by("start"))
    # A null key cannot be split: each day is one range, whatever maxRowsPerSegment says.
    assert [s.num_rows for s in segments] == [12, 5]
    for seg in segments:
        assert seg.shard_spec["type"] == "range"
        assert seg.shard_spec["start"] is None and seg.shard_spec["end"] is None
    rows = pq.read_table(segments[0].location).to_pandas()
    assert sorted(rows["ns"]) == list(range(12)) and set(rows["cnt"]) == {1}


@pytest.mark.spark
def test_range_on_a_long_dimension_splits_by_its_values(run_spec, inline_spec):
    import pyarrow.parquet as pq

    from metastore.models import Segment, TaskStatus

    body = inline_spec(
        "range_long",
        intervals=["2024-01-01/2024-01-02"],
        dimensions=["page", {"type": "long", "name": "ns"}],
        data=_events("2024-01-01", 12),
        tuning={
            "type": "index_parallel",
            "partitionsSpec": {
                "type": "range",
                "partitionDimensions": ["ns"],
                "targetRowsPerSegment": 4,
            },
            "forceGuaranteedRollup": True,
        },
    )
    task = run_spec(body)

    assert task.status == TaskStatus.SUCCESS, task.error
    segments = list(Segment.objects.filter(created_by=task).order_by("partition"))
    assert len(segments) >= 2 and sum(s.num_rows for s in segments) == 12
    seen = []
    for seg in segments:
        values = sorted(pq.read_table(seg.location).to_pandas()["ns"])
        start, end = seg.shard_spec["start"], seg.shard_spec["end"]
        assert start is None or values[0] >= start[0]
        assert end is None or values[-1] < end[0]
        seen += values
    assert sorted(seen) == list(range(12))


# --- aggregators from extensions ----------------------------------------------------------


@pytest.mark.parametrize(
    ("aggregator", "words"),
    [
        ({"type": "compressedBigDecimalSum", "scale": 9, "size": 3}, "druid-compressed-bigdecimal"),
        ({"type": "Bitmap64ExactCountBuild"}, "druid-exact-count-bitmap"),
        ({"type": "spectatorHistogram"}, "druid-spectator-histogram"),
        ({"type": "momentSketch", "k": 10}, "druid-momentsketch"),
        ({"type": "tDigestSketch", "compression": 200}, "druid-tdigestsketch"),
    ],
    ids=lambda v: v["type"] if isinstance(v, dict) else v,
)
def test_contrib_extension_aggregators_are_refused_as_out_of_scope(
    api_client, spec, aggregator, words
):
    spec["spec"]["dataSchema"]["metricsSpec"].append(
        {**aggregator, "name": "m", "fieldName": "added"}
    )
    response = api_client.post("/api/v1/tasks", spec, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "spec.dataSchema.metricsSpec[2].type"
    assert words in body["message"] and "outside Strata's scope" in body["message"]
    # ... and says what is supported
    assert "Supported aggregators: count, longSum" in body["message"]
    assert "HLLSketchBuild" in body["message"]


@pytest.mark.parametrize("kind", ["arrayOfDoublesSketch", "longAny"])
def test_core_aggregators_not_implemented_are_refused_with_the_reason(spec, kind):
    spec["spec"]["dataSchema"]["metricsSpec"].append({"type": kind, "name": "m", "fieldName": "x"})
    error = refusal(spec)
    assert error.field == "spec.dataSchema.metricsSpec[2].type"
    assert "not implemented here" in error.message


def test_core_and_bundled_extension_aggregators_stay_supported(spec):
    supported = [
        {"type": "count", "name": "cnt"},
        *[
            {"type": t, "name": f"m_{t}", "fieldName": "added"}
            for t in ("longSum", "doubleSum", "floatSum", "longMin", "longMax", "doubleMin")
            + ("doubleMax", "floatMin", "floatMax", "longFirst", "longLast", "doubleFirst")
            + ("doubleLast", "floatFirst", "floatLast", "stringFirst", "stringLast")
        ],
        {"type": "hyperUnique", "name": "hu", "fieldName": "page"},
        {"type": "thetaSketch", "name": "theta", "fieldName": "page"},
        {"type": "HLLSketchBuild", "name": "hll", "fieldName": "page"},
        {"type": "HLLSketchMerge", "name": "hllm", "fieldName": "hll_in"},
        {"type": "quantilesDoublesSketch", "name": "q", "fieldName": "score_in"},
    ]
    spec["spec"]["dataSchema"]["metricsSpec"] = supported
    metrics = validate_task_spec(spec, input_roots=[]).ingestion.metrics
    assert [m.name for m in metrics] == [m["name"] for m in supported]


# --- kill: versions, limit, maxUsedStatusLastUpdatedTime, through the runner ---------------

KILL_DS = "killme"
DAYS = [f"2024-03-0{d}/2024-03-0{d + 1}" for d in (1, 2, 3)]


def _kill(run_spec, **fields):
    return run_spec(
        {"type": "kill", "dataSource": KILL_DS, "interval": "2024-03-01/2024-03-04", **fields}
    )


def _remaining() -> list[tuple[str, str, int]]:
    from metastore.models import Segment

    return sorted(
        (str(s.start.date()), s.version, s.partition)
        for s in Segment.objects.filter(datasource__name=KILL_DS)
    )


def _unused(*days: str) -> None:
    from metastore import services
    from metastore.intervals import Interval

    for day in days:
        services.segments_mark_used(datasource=KILL_DS, used=False, interval=Interval.parse(day))


def test_kill_with_versions_deletes_only_those_versions(run_spec, publish):
    from metastore.models import TaskStatus

    old = publish(KILL_DS, DAYS[0], {DAYS[0]: 2})
    new = publish(KILL_DS, DAYS[0], {DAYS[0]: 1})  # overwrites: a newer version
    _unused(DAYS[0])

    task = _kill(run_spec, versions=[old.version])

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["segmentsKilled"] == 2
    assert _remaining() == [("2024-03-01", new.version, 0)]


def test_kill_with_limit_deletes_that_many_oldest_first(run_spec, publish):
    from metastore.models import TaskStatus

    versions = [publish(KILL_DS, day, {day: 1}).version for day in DAYS]
    _unused(*DAYS)

    task = _kill(run_spec, limit=2, batchSize=1)

    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["segmentsKilled"] == 2
    assert _remaining() == [("2024-03-03", versions[2], 0)]


def test_kill_with_max_used_status_last_updated_time_spares_later_ones(run_spec, publish):
    import time

    from metastore.models import Segment, TaskStatus

    for day in DAYS:
        publish(KILL_DS, day, {day: 1})
    _unused(DAYS[0], DAYS[1])
    cutoff = max(
        Segment.objects.filter(used=False).values_list("used_status_updated_at", flat=True)
    )
    time.sleep(0.01)  # the next mark gets a later timestamp than the cutoff
    _unused(DAYS[2])

    task = _kill(run_spec, maxUsedStatusLastUpdatedTime=cutoff.isoformat())

    assert task.status == TaskStatus.SUCCESS, task.error
    assert [day for day, _, _ in _remaining()] == ["2024-03-03"]


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"versions": []}, "versions"),
        ({"versions": ["v", 3]}, "versions[1]"),
        ({"limit": 0}, "limit"),
        ({"batchSize": 0}, "batchSize"),
        ({"maxUsedStatusLastUpdatedTime": "yesterday"}, "maxUsedStatusLastUpdatedTime"),
        ({"markAsUnused": True, "versions": ["v"]}, "markAsUnused"),
        # Under a REPLACE lock, appends commit beside the kill: marked unused, they
        # would be deleted (Druid removed markAsUnused with apache/druid#16362).
        ({"markAsUnused": True, "context": {"useConcurrentLocks": True}}, "markAsUnused"),
        ({"markAsUnused": True, "context": {"taskLockType": "REPLACE"}}, "markAsUnused"),
    ],
)
def test_bad_kill_fields_are_named(fields, field):
    body = {"type": "kill", "dataSource": KILL_DS, "interval": "2024-03-01/P1D", **fields}
    assert refusal(body).field == field


@pytest.mark.parametrize("context", [{}, {"taskLockType": "EXCLUSIVE"}])
def test_mark_as_unused_kills_under_an_exclusive_lock(context):
    body = {"type": "kill", "dataSource": KILL_DS, "interval": "2024-03-01/P1D"}
    spec = validate_task_spec({**body, "markAsUnused": True, "context": context}, input_roots=[])
    assert spec.mark_as_unused


# --- the rest of the reference: supported when cheap, else refused with the reason ----------


@pytest.mark.parametrize(
    ("granularity", "named"),
    [
        ({"type": "period", "period": "P1D"}, "DAY"),
        ({"type": "period", "period": "PT1H", "timeZone": "UTC"}, "HOUR"),
        ({"type": "duration", "duration": 3600000}, "HOUR"),
        ({"type": "month"}, "MONTH"),
    ],
)
def test_period_and_duration_granularities_equal_to_a_named_one_are_accepted(
    spec, granularity, named
):
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = granularity
    assert validate_task_spec(spec, input_roots=[]).ingestion.segment_granularity == named


@pytest.mark.parametrize(
    "granularity",
    [
        {"type": "period", "period": "PT2H"},
        {"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"},
        {"type": "duration", "duration": 7200000},
        # found by the contract fuzzer: a 500 (unhashable dict) before
        {"type": "duration", "duration": {}, "origin": ""},
        {"type": "duration", "duration": True},
        {"type": "period", "period": {}},
    ],
)
def test_other_period_granularities_are_refused_naming_the_field(spec, granularity):
    spec["spec"]["dataSchema"]["granularitySpec"]["segmentGranularity"] = granularity
    error = refusal(spec)
    assert error.field == "spec.dataSchema.granularitySpec.segmentGranularity"
    assert "not supported here" in error.message


@pytest.mark.parametrize(
    ("where", "value", "field", "words"),
    [
        ("ioConfig.inputSource", {"type": "oss"}, "spec.ioConfig.inputSource.type", "scope"),
        ("ioConfig.inputFormat", {"type": "thrift"}, "spec.ioConfig.inputFormat.type", "scope"),
        ("ioConfig.inputFormat", {"type": "protobuf"}, "spec.ioConfig.inputFormat.type", "scope"),
        (
            "dataSchema.transformSpec",
            {"filter": {"type": "extraction", "dimension": "page", "value": "a"}},
            "spec.dataSchema.transformSpec.filter.type",
            "not implemented here",
        ),
        ("dataSchema.parser", {"type": "string"}, "spec.dataSchema.parser", "inputFormat"),
        (
            "dataSchema.dimensionsSpec",
            {"dimensions": [{"type": "spatial", "name": "coord"}]},
            "spec.dataSchema.dimensionsSpec.dimensions[0].type",
            "outside Strata's scope",
        ),
    ],
)
def test_documented_items_outside_scope_are_refused_with_the_reason(
    spec, where, value, field, words
):
    node = spec["spec"]
    *parents, last = where.split(".")
    for key in parents:
        node = node[key]
    node[last] = value
    error = refusal(spec)
    assert error.field == field and words in error.message, error


@pytest.mark.parametrize("fmt", ["micro", "MICRO", "ruby", "nano"])
def test_druids_named_timestamp_formats_are_not_taken_for_patterns(spec, fmt):
    spec["spec"]["dataSchema"]["timestampSpec"]["format"] = fmt
    assert validate_task_spec(spec, input_roots=[]).ingestion.timestamp_format == fmt.lower()


def test_compaction_takes_index_parallels_tuning_knobs_and_reports_them():
    body = {
        "type": "compact",
        "dataSource": "rules",
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": "2024/2025"}},
        "tuningConfig": {"type": "index_parallel", "indexSpec": {}, "pushTimeout": 0},
    }
    ignored = validate_task_spec(body, input_roots=[]).ignored
    assert [i.split(":")[0] for i in ignored] == [
        "tuningConfig.indexSpec",
        "tuningConfig.pushTimeout",
    ]


def test_the_status_page_lists_every_name_the_validator_knows():
    """docs/druid-spec-status.md cannot silently miss an item the code accepts or refuses."""
    import re
    from pathlib import Path

    from metastore.druid.filters import FILTER_TYPES, UNSUPPORTED_FILTERS
    from metastore.druid.input_formats import INPUT_FORMATS, UNSUPPORTED_FORMATS
    from metastore.druid.input_sources import INPUT_SOURCES, OUT_OF_SCOPE_SOURCES
    from metastore.druid.metrics import METRIC_TYPES, UNSUPPORTED_AGGREGATORS
    from metastore.druid.partitions import PARTITION_TYPES
    from metastore.druid.tasks import KILL_TOP_LEVEL
    from metastore.druid.timestamps import TIMESTAMP_FORMATS
    from metastore.druid.tuning import IGNORED_TUNING

    text = (Path(__file__).parents[1] / "docs" / "druid-spec-status.md").read_text()
    names = set(re.findall(r"`([^`]+)`", text))
    prefixes = [n[:-1] for n in names if n.endswith("*")]
    known = [
        *METRIC_TYPES,
        *UNSUPPORTED_AGGREGATORS,
        *INPUT_SOURCES,
        *OUT_OF_SCOPE_SOURCES,
        *INPUT_FORMATS,
        *UNSUPPORTED_FORMATS,
        *FILTER_TYPES,
        *UNSUPPORTED_FILTERS,
        *PARTITION_TYPES,
        *TIMESTAMP_FORMATS,
        *KILL_TOP_LEVEL,
        *IGNORED_TUNING,
    ]
    missing = [n for n in known if n not in names and not any(n.startswith(p) for p in prefixes)]
    assert not missing, f"not in docs/druid-spec-status.md: {missing}"
