"""Small deviations from Druid found by running its specs (issue 27): Druid's
interval forms (start/period, period/end, ETERNITY) wherever an interval is
read, and DimensionsSpec's overlap rule. Pure: the validator, no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from metastore.compaction_state import validate_compaction_config
from metastore.druid.errors import SpecError
from metastore.druid.tasks import validate_task_spec
from metastore.intervals import ETERNITY, MAX_TS, MIN_TS, Interval, is_open_ended

# Druid's Intervals.ETERNITY as it writes it (JodaUtils.MIN_INSTANT/MAX_INSTANT).
DRUID_ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
ROW = '{"ts": "2024-01-01T00:10:00Z", "page": "A", "n": 3}'


def _ingest(granularity: dict | None = None, dimensions_spec: dict | None = None) -> dict:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "dev",
                "timestampSpec": {"column": "ts"},
                "dimensionsSpec": dimensions_spec or {"dimensions": ["page"]},
                "granularitySpec": granularity or {"segmentGranularity": "DAY"},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": ROW},
                "inputFormat": {"type": "json"},
            },
        },
    }


def _compact(interval: str) -> dict:
    return {
        "type": "compact",
        "dataSource": "dev",
        "ioConfig": {"type": "compact", "inputSpec": {"type": "interval", "interval": interval}},
    }


def _refused(spec: dict) -> SpecError:
    with pytest.raises(SpecError) as exc:
        validate_task_spec(spec, input_roots=[])
    return exc.value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-01/P1D", "2024-01-01/2024-01-02"),
        ("P1D/2024-01-02", "2024-01-01/2024-01-02"),
        ("2024-01-31T00:00:00Z/P1M", "2024-01-31/2024-02-29"),
        ("P1Y/2024-03-01", "2023-03-01/2024-03-01"),
        ("2016/2017", "2016-01-01/2017-01-01"),
        ("2016-06/P1M", "2016-06-01/2016-07-01"),
    ],
)
def test_interval_parse_takes_druids_period_and_partial_forms(text, expected):
    assert Interval.parse(text) == Interval.parse(expected)


def test_druids_eternity_parses_as_all_representable_time():
    assert Interval.parse(DRUID_ETERNITY) == ETERNITY
    half = Interval.parse("-146136543-09-08T08:23:32.096Z/2000-01-01T00:00:00.000Z")
    assert (half.start, half.end) == (MIN_TS, datetime(2000, 1, 1, tzinfo=UTC))
    other = Interval.parse("2000-01-01/146140482-04-24T15:36:27.903Z")
    assert (other.start, other.end) == (datetime(2000, 1, 1, tzinfo=UTC), MAX_TS)
    assert is_open_ended(half) and is_open_ended(other) and is_open_ended(ETERNITY)
    assert not is_open_ended(Interval.parse("2000/2001"))


def test_two_periods_are_no_interval():
    with pytest.raises(ValueError, match="not two periods"):
        Interval.parse("P1D/P1D")


def test_eternity_is_accepted_in_granularity_spec_kill_and_compact():
    ingestion = validate_task_spec(
        _ingest({"segmentGranularity": "DAY", "intervals": [DRUID_ETERNITY]}), input_roots=[]
    ).ingestion
    assert ingestion.intervals == (ETERNITY,)
    kill = validate_task_spec(
        {"type": "kill", "dataSource": "dev", "interval": DRUID_ETERNITY}, input_roots=[]
    )
    assert kill.interval == ETERNITY
    assert validate_task_spec(_compact(DRUID_ETERNITY), input_roots=[]).interval == ETERNITY


def test_a_bounded_interval_past_the_representable_buckets_is_still_refused():
    error = _refused(
        _ingest({"segmentGranularity": "YEAR", "intervals": ["9999-02-01/9999-03-01"]})
    )
    assert error.field == "spec.dataSchema.granularitySpec.intervals[0]"


def test_period_forms_in_kill_compact_and_granularity_spec():
    kill = validate_task_spec(
        {"type": "kill", "dataSource": "dev", "interval": "P1D/2024-01-02"}, input_roots=[]
    )
    assert kill.interval == Interval.parse("2024-01-01/2024-01-02")
    compact = validate_task_spec(_compact("2024-01-01/P1M"), input_roots=[])
    assert compact.interval == Interval.parse("2024-01-01/2024-02-01")
    ingestion = validate_task_spec(
        _ingest({"segmentGranularity": "DAY", "intervals": ["2024-01-01/PT24H"]}), input_roots=[]
    ).ingestion
    assert ingestion.intervals == (Interval.parse("2024-01-01/2024-01-02"),)


def test_skip_intervals_take_period_forms_and_eternity_halves():
    config = validate_compaction_config(
        {
            "dataSource": "dev",
            "skipIntervals": ["2024-01-01/P7D", "-146136543-09-08T08:23:32.096Z/2000-01-01"],
        }
    )
    assert config.skip_intervals == (
        Interval.parse("2024-01-01/2024-01-08"),
        Interval(MIN_TS, datetime(2000, 1, 1, tzinfo=UTC)),
    )


def test_dimension_exclusions_overlapping_dimensions_are_refused_as_in_druid():
    # Druid's DimensionsSpec.verify: "dimensions and dimensions exclusions cannot overlap".
    error = _refused(
        _ingest(dimensions_spec={"dimensions": ["page", "n"], "dimensionExclusions": ["n"]})
    )
    assert error.field == "spec.dataSchema.dimensionsSpec.dimensionExclusions"
    assert "cannot overlap" in error.message and "'n'" in error.message
    compact = _compact("2024-01-01/P1D")
    compact["dimensionsSpec"] = {"dimensions": ["page"], "dimensionExclusions": ["page"]}
    assert _refused(compact).field == "dimensionsSpec.dimensionExclusions"


def test_segment_granularity_none_is_accepted_as_in_druid():
    # Druid's NoneGranularity as a segment granularity: one time chunk per millisecond.
    ingestion = validate_task_spec(
        _ingest({"segmentGranularity": "NONE"}), input_roots=[]
    ).ingestion
    assert (ingestion.segment_granularity, ingestion.query_granularity) == ("NONE", "NONE")
    coarse_query = _ingest({"segmentGranularity": "NONE", "queryGranularity": "SECOND"})
    assert _refused(coarse_query).field == "spec.dataSchema.granularitySpec.queryGranularity"
    replace = _ingest({"segmentGranularity": "none", "intervals": ["2024-01-01/PT1S"]})
    replace["spec"]["ioConfig"]["dropExisting"] = True
    assert _refused(replace).field == "spec.ioConfig.dropExisting"
    compact = _compact("2024-01-01/P1D")
    compact["granularitySpec"] = {"segmentGranularity": "NONE"}
    assert validate_task_spec(compact, input_roots=[]).compaction.segment_granularity == "NONE"
