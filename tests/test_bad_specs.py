"""Bad input is refused up front: a 400 that names the offending field, and
nothing created. Also what a valid Druid spec validates to, and the API's 404s."""

from __future__ import annotations

import copy
import os

import pytest

from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, DataSource, Segment, Task, TaskLock
from workers.jobs.input_files import resolve_local_inputs

pytestmark = pytest.mark.django_db


@pytest.fixture
def good_spec(inline_spec) -> dict:
    return inline_spec(
        "wiki",
        intervals=["2024-01-01/2024-01-02"],
        data='{"ts": "2024-01-01T00:10:00Z", "page": "A", "added": 1}\n',
    )


def post_spec(api_client, body, **kwargs):
    kwargs.setdefault("format", "json")
    return api_client.post("/api/v1/tasks", body, **kwargs)


def assert_refused(response, field: str, *words: str) -> dict:
    """A 400 naming `field`, saying `words`, and nothing written to the metastore."""
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field, body
    assert body["error"].startswith(f"{field}: "), body
    for word in words:
        assert word in body["message"], body
    assert not Task.objects.exists()
    assert not TaskLock.objects.exists()
    assert not DataSource.objects.exists()
    assert not Segment.objects.exists()
    assert not CommitLogEntry.objects.exists()
    return body


def test_the_good_spec_is_accepted(api_client, good_spec):
    # The baseline every bad case below differs from by one field.
    response = post_spec(api_client, good_spec)
    assert response.status_code == 201, response.content
    assert Task.objects.filter(id=response.json()["task"], status="PENDING").exists()


# --- one bad field each -------------------------------------------------------------------


def test_unknown_task_type(api_client, good_spec):
    good_spec["type"] = "index_hadoop"
    body = assert_refused(
        post_spec(api_client, good_spec), "type", "index_hadoop", "index_parallel"
    )
    assert "kill" in body["message"]  # lists what is accepted


def test_missing_datasource(api_client, good_spec):
    del good_spec["spec"]["dataSchema"]["dataSource"]
    assert_refused(post_spec(api_client, good_spec), "spec.dataSchema.dataSource", "required")


def test_missing_data_schema(api_client, good_spec):
    del good_spec["spec"]["dataSchema"]
    assert_refused(post_spec(api_client, good_spec), "spec.dataSchema", "required")


@pytest.mark.parametrize(
    "interval",
    ["2024-01-01/garbage", "2024-01-01", "2024-01-02/2024-01-01", "2024-01-01/2024-01-01"],
    ids=["bad-end", "no-slash", "reversed", "empty"],
)
def test_malformed_interval(api_client, good_spec, interval):
    good_spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = [
        "2024-01-01/2024-01-02",
        interval,
    ]
    assert_refused(
        post_spec(api_client, good_spec), "spec.dataSchema.granularitySpec.intervals[1]", interval
    )


def test_intervals_must_be_a_list(api_client, good_spec):
    good_spec["spec"]["dataSchema"]["granularitySpec"]["intervals"] = "2024-01-01/2024-01-02"
    assert_refused(
        post_spec(api_client, good_spec), "spec.dataSchema.granularitySpec.intervals", "list"
    )


@pytest.mark.parametrize("key", ["segmentGranularity", "queryGranularity"])
def test_unknown_granularity(api_client, good_spec, key):
    good_spec["spec"]["dataSchema"]["granularitySpec"][key] = "FORTNIGHT"
    assert_refused(
        post_spec(api_client, good_spec),
        f"spec.dataSchema.granularitySpec.{key}",
        "FORTNIGHT",
        "FIFTEEN_MINUTE",
    )


def test_unknown_metric_type(api_client, good_spec):
    good_spec["spec"]["dataSchema"]["metricsSpec"].append(
        {"type": "longAverage", "name": "avg", "fieldName": "added"}
    )
    assert_refused(
        post_spec(api_client, good_spec),
        "spec.dataSchema.metricsSpec[2].type",
        "longAverage",
        "doubleSum",
    )


# --- local input: only under STRATA_INPUT_ROOTS, never empty ---------------------------------------


@pytest.fixture
def local_spec(good_spec, strata_dirs):
    """The good spec reading CSV from a directory under the input root, plus a
    secret file just outside the root."""
    base = strata_dirs.input_root / "bad-specs"
    base.mkdir(exist_ok=True)
    (base / "events.csv").write_text("ts,page,added\n2024-01-01T00:00:00Z,A,1\n")
    secret = strata_dirs.input_root.parent / "secret.csv"
    secret.write_text("ts,page,added\n2024-01-01T00:00:00Z,secret,1\n")
    spec = copy.deepcopy(good_spec)
    spec["spec"]["ioConfig"]["inputSource"] = {
        "type": "local",
        "baseDir": str(base),
        "filter": "*.csv",
    }
    spec["spec"]["ioConfig"]["inputFormat"] = {"type": "csv", "findColumnsFromHeader": True}
    yield spec, base, secret
    secret.unlink(missing_ok=True)


def test_local_input_under_the_root_is_accepted(api_client, local_spec):
    spec, _, _ = local_spec
    assert post_spec(api_client, spec).status_code == 201


def test_base_dir_outside_input_roots(api_client, local_spec):
    spec, _, secret = local_spec
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(secret.parent)
    assert_refused(
        post_spec(api_client, spec),
        "spec.ioConfig.inputSource.baseDir",
        "outside the allowed input roots",
        "STRATA_INPUT_ROOTS",
    )


def test_base_dir_escaping_the_root_with_dotdot(api_client, local_spec):
    spec, base, _ = local_spec
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = f"{base}/../.."
    assert_refused(
        post_spec(api_client, spec), "spec.ioConfig.inputSource.baseDir", "outside the allowed"
    )


@pytest.mark.parametrize(
    ("source", "field", "says"),
    [
        # Found by the contract test once files were found at run time: a filter
        # that is not a string was accepted when there was no baseDir.
        ({"files": ["a.csv"], "filter": {}}, "spec.ioConfig.inputSource.filter", "glob"),
        ({"files": [], "filter": "*.csv"}, "spec.ioConfig.inputSource", "baseDir"),
        ({"files": []}, "spec.ioConfig.inputSource", "baseDir"),
    ],
)
def test_a_local_source_naming_no_input_is_refused_at_submit(
    api_client, local_spec, source, field, says
):
    spec, _, _ = local_spec
    spec["spec"]["ioConfig"]["inputSource"] = {"type": "local", **source}
    assert_refused(post_spec(api_client, spec), field, says)


def test_files_with_dotdot_traversal(api_client, local_spec):
    spec, base, secret = local_spec
    spec["spec"]["ioConfig"]["inputSource"] = {
        "type": "local",
        "files": [str(base / "events.csv"), f"{base}/../../{secret.name}"],
    }
    assert_refused(
        post_spec(api_client, spec), "spec.ioConfig.inputSource.files[1]", "outside the allowed"
    )


@pytest.mark.parametrize("data", ["", "   \n\n"], ids=["empty", "blank"])
def test_empty_inline_data(api_client, good_spec, data):
    good_spec["spec"]["ioConfig"]["inputSource"]["data"] = data
    assert_refused(post_spec(api_client, good_spec), "spec.ioConfig.inputSource.data")


# --- local files are found when the task runs (validation reads no file) -------------------------


def assert_fails_at_run(run_spec, spec: dict, field: str, *words: str) -> None:
    """Accepted (validation is pure), then FAILED when the worker looks for the
    files, with the message naming `field`; nothing published."""
    task = run_spec(spec)
    assert task.status == "FAILED", (task.status, task.error)
    assert task.error.startswith(f"invalid spec: {field}: "), task.error
    for word in words:
        assert word in task.error, task.error
    assert not Segment.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_filter_with_dotdot_reads_nothing_outside_the_root(run_spec, local_spec):
    spec, _, secret = local_spec
    spec["spec"]["ioConfig"]["inputSource"]["filter"] = f"../../{secret.name}"
    assert_fails_at_run(run_spec, spec, "spec.ioConfig.inputSource.filter", "empty")


@pytest.mark.django_db(transaction=True)
def test_symlink_out_of_the_root_is_refused(run_spec, local_spec):
    spec, base, secret = local_spec
    link = base / "link.csv"
    os.symlink(secret, link)
    spec["spec"]["ioConfig"]["inputSource"] = {"type": "local", "files": [str(link)]}
    assert_fails_at_run(run_spec, spec, "spec.ioConfig.inputSource.files[0]", "outside the allowed")


@pytest.mark.django_db(transaction=True)
def test_local_filter_matching_only_an_empty_file(run_spec, local_spec):
    spec, base, _ = local_spec
    (base / "empty.json").write_text("")
    spec["spec"]["ioConfig"]["inputSource"]["filter"] = "*.json"
    assert_fails_at_run(run_spec, spec, "spec.ioConfig.inputSource.filter", "empty")


@pytest.mark.django_db(transaction=True)
def test_local_filter_matching_nothing(run_spec, local_spec):
    spec, _, _ = local_spec
    spec["spec"]["ioConfig"]["inputSource"]["filter"] = "*.parquet"
    assert_fails_at_run(run_spec, spec, "spec.ioConfig.inputSource.filter", "no non-empty file")


@pytest.mark.django_db(transaction=True)
def test_missing_base_dir_is_accepted_then_fails_naming_it(run_spec, local_spec):
    spec, base, _ = local_spec
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(base / "not-there")
    assert_fails_at_run(run_spec, spec, "spec.ioConfig.inputSource.baseDir", "not a directory")


@pytest.mark.django_db(transaction=True)
def test_a_missing_file_of_a_combining_delegate_is_named_by_its_path(run_spec, local_spec):
    spec, base, _ = local_spec
    spec["spec"]["ioConfig"]["inputSource"] = {
        "type": "combining",
        "delegates": [
            {"type": "local", "files": [str(base / "events.csv")]},
            {"type": "local", "files": [str(base / "events.csv"), str(base / "gone.csv")]},
        ],
    }
    assert_fails_at_run(
        run_spec,
        spec,
        "spec.ioConfig.inputSource.delegates[1].files[1]",
        "does not exist or is not a file",
    )


def test_unknown_field_in_io_config(api_client, good_spec):
    good_spec["spec"]["ioConfig"]["firehose"] = {"type": "local"}
    body = assert_refused(
        post_spec(api_client, good_spec), "spec.ioConfig.firehose", "firehoses are not supported"
    )
    assert "inputSource" in body["message"]  # says what is accepted


def test_hashed_partitioning_without_force_guaranteed_rollup_is_refused_as_druid_does(good_spec):
    # Druid's own docs example (native-batch-simple-task.md) omits it, and Druid
    # refuses that spec ("DynamicPartitionsSpec must be used for best-effort rollup").
    good_spec["spec"]["tuningConfig"]["partitionsSpec"] = {"type": "hashed", "numShards": 2}
    with pytest.raises(SpecError) as caught:
        validate_task_spec(good_spec, input_roots=[])
    assert caught.value.field == "spec.tuningConfig.forceGuaranteedRollup"


def test_non_json_body(api_client):
    response = api_client.post(
        "/api/v1/tasks", data='{"type": "index_parallel", ', content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]
    assert not Task.objects.exists()


def test_json_that_is_not_an_object(api_client):
    assert_refused(post_spec(api_client, ["index_parallel"]), "(body)", "JSON object")


def test_a_form_encoded_body_is_not_a_spec(api_client):
    response = api_client.post("/api/v1/tasks", {"type": "index_parallel"})  # multipart
    assert response.status_code == 415  # only application/json is a spec (issue 15)
    assert not Task.objects.exists()


def test_console_form_with_bad_spec_says_why_and_creates_nothing(client, user):
    client.force_login(user)
    response = client.post("/tasks/submit", {"spec": '{"type": "index_hadoop"}'})
    assert response.status_code == 400  # the form again, the error at the field
    text = response.content.decode()
    assert "Invalid spec" in text and "unknown task type" in text
    response = client.post("/tasks/submit", {"spec": "{not json"})
    assert response.status_code == 400 and "not valid JSON" in response.content.decode()
    assert not Task.objects.exists()


# --- validate_task_spec on valid Druid specs (no database needed) ----------------------------------


def druid_wikipedia_spec(base_dir: str, fmt: dict, ts_format: str = "iso") -> dict:
    """Druid's quickstart `wikipedia-index.json`, unchanged but for paths."""
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "wikipedia",
                "timestampSpec": {"column": "time", "format": ts_format},
                "dimensionsSpec": {
                    "dimensions": [
                        "channel",
                        "cityName",
                        "comment",
                        "countryIsoCode",
                        "countryName",
                        "isAnonymous",
                        "isMinor",
                        "isNew",
                        "isRobot",
                        "isUnpatrolled",
                        "metroCode",
                        "namespace",
                        "page",
                        "regionIsoCode",
                        "regionName",
                        "user",
                        {"name": "added", "type": "long"},
                        {"name": "deleted", "type": "long"},
                        {"name": "delta", "type": "long"},
                    ]
                },
                "metricsSpec": [],
                "granularitySpec": {
                    "type": "uniform",
                    "segmentGranularity": "day",
                    "queryGranularity": "none",
                    "intervals": ["2015-09-12/2015-09-13"],
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {
                    "type": "local",
                    "baseDir": base_dir,
                    "filter": "wikiticker-2015-09-12-sampled.*",
                },
                "inputFormat": fmt,
                "appendToExisting": False,
            },
            "tuningConfig": {
                "type": "index_parallel",
                "partitionsSpec": {"type": "dynamic"},
                "maxRowsInMemory": 25000,
            },
        },
    }


@pytest.fixture
def wiki_dir(tmp_path):
    base = tmp_path / "quickstart"
    base.mkdir()
    (base / "wikiticker-2015-09-12-sampled.json").write_text('{"time": "2015-09-12T00:46:58Z"}\n')
    return base


@pytest.mark.django_db(False)
@pytest.mark.parametrize(
    "fmt",
    [{"type": "json"}, {"type": "csv", "findColumnsFromHeader": True}],
    ids=["json", "csv"],
)
def test_druid_quickstart_spec_validates_unchanged(wiki_dir, fmt):
    validated = validate_task_spec(druid_wikipedia_spec(str(wiki_dir), fmt), input_roots=[wiki_dir])

    assert validated.type == "index_parallel"
    assert validated.datasource == "wikipedia"
    ingestion = validated.ingestion
    assert ingestion.timestamp_column == "time" and ingestion.timestamp_format == "iso"
    assert ingestion.dimensions[0].name == "channel" and ingestion.dimensions[0].type == "string"
    assert [(d.name, d.type) for d in ingestion.dimensions[-3:]] == [
        ("added", "long"),
        ("deleted", "long"),
        ("delta", "long"),
    ]
    assert ingestion.metrics == ()
    assert ingestion.segment_granularity == "DAY" and ingestion.query_granularity == "NONE"
    assert ingestion.rollup is False
    assert ingestion.intervals == (Interval.parse("2015-09-12/2015-09-13"),)
    assert ingestion.input.type == "local" and ingestion.input.format == fmt["type"]
    # Validation reads no file: the source is kept as written, its files found when it runs.
    assert ingestion.input.files == ()
    assert ingestion.input.base_dir == str(wiki_dir) and ingestion.input.file_filter is not None
    resolved = resolve_local_inputs(ingestion, input_roots=[wiki_dir])
    assert resolved.input.files == (str(wiki_dir / "wikiticker-2015-09-12-sampled.json"),)
    assert ingestion.input.csv_columns is None
    assert ingestion.append_to_existing is False and ingestion.drop_existing is False
    assert ingestion.partitions.type == "dynamic"
    assert ingestion.two_phase is False
    assert validated.context.force_time_chunk_lock is True
    assert validated.context.use_concurrent_locks is False


@pytest.mark.django_db(False)
@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("iso", "iso"),
        ("ISO", "iso"),
        ("auto", "auto"),
        ("millis", "millis"),
        ("posix", "posix"),
        ("nano", "nano"),
        ("yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm:ss"),
        ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M"),
    ],
)
def test_timestamp_formats(wiki_dir, given, canonical):
    spec = druid_wikipedia_spec(str(wiki_dir), {"type": "json"}, ts_format=given)
    assert validate_task_spec(spec, input_roots=[wiki_dir]).ingestion.timestamp_format == canonical


@pytest.mark.django_db(False)
def test_timestamp_format_without_letters_is_refused(wiki_dir):
    spec = druid_wikipedia_spec(str(wiki_dir), {"type": "json"}, ts_format="12345")
    with pytest.raises(SpecError) as err:
        validate_task_spec(spec, input_roots=[wiki_dir])
    assert err.value.field == "spec.dataSchema.timestampSpec.format"


@pytest.mark.django_db(False)
def test_csv_with_explicit_columns_and_perfect_rollup(wiki_dir):
    spec = druid_wikipedia_spec(
        str(wiki_dir), {"type": "csv", "columns": ["time", "page", "added"], "skipHeaderRows": 1}
    )
    spec["spec"]["dataSchema"]["dimensionsSpec"]["dimensions"] = ["page"]
    spec["spec"]["dataSchema"]["metricsSpec"] = [
        {"type": "count", "name": "count"},
        {"type": "floatSum", "name": "added", "fieldName": "added"},
    ]
    spec["spec"]["tuningConfig"] = {
        "type": "index_parallel",
        "forceGuaranteedRollup": True,
        "partitionsSpec": {"type": "hashed", "numShards": 3, "partitionDimensions": ["page"]},
    }
    ingestion = validate_task_spec(spec, input_roots=[wiki_dir]).ingestion
    assert ingestion.input.csv_columns == ("time", "page", "added")
    assert ingestion.input.csv_skip_header_rows == 1
    assert [(m.type, m.name, m.field_name) for m in ingestion.metrics] == [
        ("count", "count", None),
        ("floatSum", "added", "added"),  # Druid's FLOAT column (tests/test_float_metrics.py)
    ]
    assert ingestion.partitions.type == "hashed" and ingestion.partitions.num_shards == 3
    assert ingestion.partitions.partition_dimensions == ("page",)
    assert ingestion.two_phase is True


@pytest.mark.django_db(False)
def test_input_roots_are_what_the_validator_is_given(wiki_dir, tmp_path):
    spec = druid_wikipedia_spec(str(wiki_dir), {"type": "json"})
    with pytest.raises(SpecError) as err:
        validate_task_spec(spec, input_roots=[tmp_path / "elsewhere"])
    assert err.value.field == "spec.ioConfig.inputSource.baseDir"


# --- 404s ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/api/v1/tasks/no_such_task"),
        ("post", "/api/v1/tasks/no_such_task/cancel"),
        ("get", "/api/v1/datasources/nope/segments"),
        ("get", "/api/v1/datasources/nope/timeline"),
        ("get", "/api/v1/datasources/nope/commits"),
        ("post", "/api/v1/datasources/nope/mark-unused"),
        ("post", "/api/v1/datasources/nope/mark-used"),
    ],
)
def test_api_404s(api_client, method, path):
    response = (
        getattr(api_client, method)(path, {"interval": "2024-01-01/2024-01-02"}, format="json")
        if method == "post"
        else api_client.get(path)
    )
    assert response.status_code == 404, response.content
    assert not CommitLogEntry.objects.exists()
    assert not DataSource.objects.exists()


# --- shapes Druid's own specs use, once refused here ------------------------------------


def test_perfect_rollup_without_intervals_finds_them_in_the_data(good_spec):
    # wikipedia_parallel_reindex_task.json: hashed + forceGuaranteedRollup, no intervals.
    good_spec["spec"]["dataSchema"]["granularitySpec"].pop("intervals")
    good_spec["spec"]["tuningConfig"]["forceGuaranteedRollup"] = "true"  # a string, as Druid takes
    good_spec["spec"]["tuningConfig"]["partitionsSpec"] = {"type": "hashed", "numShards": 2}
    ingestion = validate_task_spec(good_spec, input_roots=[]).ingestion
    assert ingestion.intervals is None and ingestion.force_guaranteed_rollup


def test_range_partitioning_on_time_and_a_count_metric(good_spec):
    # qaArray ingest_range_rollup_true.json: partitionDimensions [__time, cnt], cnt a count.
    schema = good_spec["spec"]["dataSchema"]
    schema["metricsSpec"] = [{"type": "count", "name": "cnt"}]
    good_spec["spec"]["tuningConfig"]["forceGuaranteedRollup"] = True
    good_spec["spec"]["tuningConfig"]["partitionsSpec"] = {
        "type": "range",
        "partitionDimensions": ["__time", "cnt"],
        "maxRowsPerSegment": 100,
        "maxTotalRows": 100,
    }
    validated = validate_task_spec(good_spec, input_roots=[])
    assert validated.ingestion.partitions.partition_dimensions == ("__time",)
    ignored = "\n".join(validated.ignored)
    assert "partitionDimensions[1]: 'cnt' is a count metric" in ignored
    assert "partitionsSpec.maxTotalRows: a dynamic partitioning field" in ignored


def test_a_summed_metric_is_still_not_a_partition_dimension(api_client, good_spec):
    good_spec["spec"]["dataSchema"]["metricsSpec"] = [
        {"type": "longSum", "name": "added", "fieldName": "added"}
    ]
    good_spec["spec"]["tuningConfig"]["partitionsSpec"] = {
        "type": "hashed",
        "partitionDimensions": ["added"],
    }
    good_spec["spec"]["tuningConfig"]["forceGuaranteedRollup"] = True
    assert_refused(
        post_spec(api_client, good_spec),
        "spec.tuningConfig.partitionsSpec.partitionDimensions[0]",
        "not a dimension",
    )


def test_a_druid_input_reads_time_whatever_the_timestamp_spec_says(good_spec):
    # wikipedia_reindex_task.json keeps {"column": "timestamp", "format": "iso"}.
    good_spec["spec"]["dataSchema"]["timestampSpec"] = {"column": "timestamp", "format": "iso"}
    good_spec["spec"]["ioConfig"]["inputSource"] = {
        "type": "druid",
        "dataSource": "wiki",
        "interval": "2024-01-01/P1D",
    }
    validated = validate_task_spec(good_spec, input_roots=[])
    assert validated.ingestion.timestamp_column == "__time"
    assert validated.ingestion.input.interval == Interval.parse("2024-01-01/2024-01-02")
    assert any("always reads each row's __time" in i for i in validated.ignored)
    assert any(i.startswith("spec.ioConfig.inputFormat:") for i in validated.ignored)


def test_an_unsupported_expression_function_is_refused_by_name(api_client, good_spec):
    good_spec["spec"]["dataSchema"]["transformSpec"] = {
        "transforms": [
            {"type": "expression", "name": "ok", "expression": "concat('a-', page)"},
            {"type": "expression", "name": "x", "expression": "lookup(page, 'pages')"},
        ]
    }
    body = assert_refused(
        post_spec(api_client, good_spec),
        "spec.dataSchema.transformSpec.transforms[1].expression",
        "function lookup() is not supported",
    )
    assert "lookups are not loaded" in body["message"]  # says why


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ({"type": "http", "uris": ["https://example.com/a.json"]}, "use a local input source"),
        ({"type": "s3", "uris": ["s3://bucket/a.json"]}, "use a local input source"),
    ],
    ids=["http", "s3"],
)
def test_input_sources_outside_scope_say_what_to_use(api_client, good_spec, source, words):
    good_spec["spec"]["ioConfig"]["inputSource"] = source
    assert_refused(
        post_spec(api_client, good_spec),
        "spec.ioConfig.inputSource.type",
        "outside Strata's scope",
        words,
    )


def test_kill_mark_as_unused_is_honoured_not_ignored():
    validated = validate_task_spec(
        {
            "type": "kill",
            "dataSource": "wiki",
            "interval": "2024-01/P1M",
            "markAsUnused": "true",
            "batchSize": 10,
        },
        input_roots=[],
    )
    assert validated.mark_as_unused is True
    assert validated.interval == Interval.parse("2024-01-01/2024-02-01")
    assert validated.ignored == (
        "batchSize: a kill task deletes the segments it selects in one commit "
        "(the lock box is not held by the deletion)",
    )


def test_fields_without_effect_are_listed_as_ignored(good_spec):
    spec = good_spec["spec"]
    spec["dataSchema"]["dimensionsSpec"] = {
        "dimensions": [{"type": "string", "name": "page", "createBitmapIndex": False}]
    }
    spec["dataSchema"]["metricsSpec"] = [
        {
            "type": "hyperUnique",
            "name": "u",
            "fieldName": "page",
            "isInputHyperUnique": False,
            "round": True,
        }
    ]
    spec["tuningConfig"].update(
        {
            "maxRowsInMemory": 1000,
            "maxBytesInMemory": 0,
            "indexSpec": {},
            "splitHintSpec": {"type": "maxSize"},
        }
    )
    ignored = "\n".join(validate_task_spec(good_spec, input_roots=[]).ignored)
    for field in (
        "spec.dataSchema.dimensionsSpec.dimensions[0].createBitmapIndex",
        "spec.dataSchema.metricsSpec[0].isInputHyperUnique",
        "spec.dataSchema.metricsSpec[0].round",
        "spec.tuningConfig.maxRowsInMemory",
        "spec.tuningConfig.maxBytesInMemory",
        "spec.tuningConfig.indexSpec",
        "spec.tuningConfig.splitHintSpec",
    ):
        assert f"{field}: " in ignored, (field, ignored)
