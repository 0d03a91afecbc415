"""Intervals, timestamps and granularities (SPEC §2)."""

from __future__ import annotations

import os
import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metastore import intervals as iv
from metastore.intervals import (
    ALL,
    DAY,
    ETERNITY,
    GRANULARITY_NAMES,
    HOUR,
    MAX_TS,
    MIN_TS,
    MONTH,
    NONE,
    QUARTER,
    WEEK,
    YEAR,
    Granularity,
    Interval,
    format_ts,
    parse_ts,
)

EXAMPLES = int(os.environ.get("STRATA_HYPOTHESIS_EXAMPLES", "600"))


def ts(text: str) -> datetime:
    return parse_ts(text)


# --- timestamps ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2013-01-01", datetime(2013, 1, 1, tzinfo=UTC)),
        ("2013-01-01T05", datetime(2013, 1, 1, 5, tzinfo=UTC)),
        ("2013-01-01T05:00:00Z", datetime(2013, 1, 1, 5, tzinfo=UTC)),
        ("2013-01-01T05:00:00.000Z", datetime(2013, 1, 1, 5, tzinfo=UTC)),
        ("2013-01-01T05:00:00.250Z", datetime(2013, 1, 1, 5, 0, 0, 250000, tzinfo=UTC)),
        ("2013-01-01T05:00:00+00:00", datetime(2013, 1, 1, 5, tzinfo=UTC)),
        ("2013-01-01T05:00:00+02:00", datetime(2013, 1, 1, 3, tzinfo=UTC)),
        (" 2013-01-01T05:30 ", datetime(2013, 1, 1, 5, 30, tzinfo=UTC)),
        ("2013-01-01T24:00:00Z", datetime(2013, 1, 2, tzinfo=UTC)),
    ],
)
def test_parse_ts_accepts_iso_forms_and_returns_aware_utc(text, expected):
    parsed = parse_ts(text)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize("text", ["", "yesterday", "2013-13-01", "2013-01-01T25", "2013/01/01"])
def test_parse_ts_rejects_bad_input_with_a_message_showing_what_is_accepted(text):
    with pytest.raises(ValueError, match="ISO-8601 timestamp"):
        parse_ts(text)


@pytest.mark.parametrize(
    "text",
    [
        "9999-12-31T23:00-05:00",  # 10000-01-01T04:00 in UTC
        "0001-01-01T00:00+01:00",  # 0000-12-31T23:00 in UTC
        "9999-12-31T24:00",
    ],
)
def test_parse_ts_refuses_times_outside_years_1_to_9999_in_utc_as_a_value_error(text):
    # A ValueError, like any other bad timestamp (not datetime's OverflowError),
    # so that every caller answers a 400 naming the field.
    with pytest.raises(ValueError, match="year"):
        parse_ts(text)


def test_parse_ts_rejects_non_strings():
    with pytest.raises(ValueError, match="string"):
        parse_ts(20130101)  # type: ignore[arg-type]


def test_format_ts_writes_milliseconds_and_z_in_utc():
    assert format_ts(datetime(2013, 1, 1, tzinfo=UTC)) == "2013-01-01T00:00:00.000Z"
    assert (
        format_ts(datetime(2013, 1, 1, 5, 6, 7, 891234, tzinfo=UTC)) == "2013-01-01T05:06:07.891Z"
    )
    plus_two = timezone(timedelta(hours=2))
    assert format_ts(datetime(2013, 1, 1, 2, tzinfo=plus_two)) == "2013-01-01T00:00:00.000Z"
    assert format_ts(MIN_TS) == "0001-01-01T00:00:00.000Z"


def test_format_ts_rejects_naive_datetimes():
    with pytest.raises(ValueError, match="time zone"):
        format_ts(datetime(2013, 1, 1))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_format_then_parse_round_trips_at_millisecond_precision(naive):
    dt = naive.replace(microsecond=naive.microsecond // 1000 * 1000, tzinfo=UTC)
    assert parse_ts(format_ts(dt)) == dt


# --- intervals ----------------------------------------------------------------


def test_interval_parse_and_str():
    interval = Interval.parse("2024-01-01/2024-01-02")
    assert interval == Interval(ts("2024-01-01"), ts("2024-01-02"))
    assert str(interval) == "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z"
    assert Interval.parse(str(interval)) == interval
    assert Interval.parse(str(ETERNITY)) == ETERNITY
    assert eval(repr(interval), {"Interval": Interval}) == interval


@pytest.mark.parametrize(
    "text, message",
    [
        ("2024-01-01", "expected 'start/end'"),
        ("2024-01-01/", "expected 'start/end'"),
        ("a/b/c", "expected 'start/end'"),
        ("2024-01-02/2024-01-01", "ends before it starts"),
        ("2024-01-01/tomorrow", "'tomorrow' is not an ISO-8601 timestamp"),
    ],
)
def test_interval_parse_rejects_malformed_input_clearly(text, message):
    with pytest.raises(ValueError, match=message):
        Interval.parse(text)


def test_interval_rejects_end_before_start_and_naive_datetimes():
    with pytest.raises(ValueError, match="before its start"):
        Interval(ts("2024-01-02"), ts("2024-01-01"))
    with pytest.raises(ValueError, match="time zone"):
        Interval(datetime(2024, 1, 1), datetime(2024, 1, 2))
    with pytest.raises(ValueError, match="datetimes"):
        Interval("2024-01-01", "2024-01-02")  # type: ignore[arg-type]


def test_interval_converts_other_time_zones_to_utc():
    plus_two = timezone(timedelta(hours=2))
    interval = Interval(datetime(2024, 1, 1, 2, tzinfo=plus_two), ts("2024-01-02"))
    assert interval.start == ts("2024-01-01") and interval.start.tzinfo is UTC


def test_interval_is_frozen_hashable_and_ordered_by_start_then_end():
    a = Interval.parse("2024-01-01/2024-01-03")
    b = Interval.parse("2024-01-01/2024-01-02")
    c = Interval.parse("2023-12-31/2024-01-05")
    assert sorted([a, b, c]) == [c, b, a]
    assert len({a, Interval.parse("2024-01-01/2024-01-03")}) == 1
    with pytest.raises(AttributeError):
        a.start = ts("2020-01-01")  # type: ignore[misc]


def test_interval_operations_on_touching_and_empty_intervals():
    jan1 = Interval.parse("2024-01-01/2024-01-02")
    jan2 = Interval.parse("2024-01-02/2024-01-03")
    empty = Interval(ts("2024-01-01T12"), ts("2024-01-01T12"))
    assert not jan1.overlaps(jan2)
    assert jan1.intersection(jan2) is None
    assert empty.is_empty and not jan1.is_empty
    assert not empty.overlaps(jan1) and not jan1.overlaps(empty)
    assert jan1.contains(empty)
    assert jan1.contains(ts("2024-01-01")) and not jan1.contains(ts("2024-01-02"))
    assert jan1.difference(jan2) == [jan1]
    assert empty.difference(jan1) == []
    assert jan1.difference(Interval.parse("2024-01-01T06/2024-01-01T18")) == [
        Interval.parse("2024-01-01/2024-01-01T06"),
        Interval.parse("2024-01-01T18/2024-01-02"),
    ]
    assert jan1.duration == timedelta(days=1)


BASE = datetime(2024, 1, 1, tzinfo=UTC)
small = st.integers(0, 12)


def hours(a: int, b: int) -> Interval:
    return Interval(BASE + timedelta(hours=a), BASE + timedelta(hours=b))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.tuples(small, small).map(sorted), st.tuples(small, small).map(sorted))
def test_interval_operations_agree_with_sets_of_hours(x, y):
    a, b = hours(*x), hours(*y)
    hours_a, hours_b = set(range(*x)), set(range(*y))
    assert a.overlaps(b) == bool(hours_a & hours_b)
    inter = a.intersection(b)
    assert (set() if inter is None else set(range(*_span(inter)))) == hours_a & hours_b
    pieces = a.difference(b)
    assert all(not p.is_empty for p in pieces) and pieces == sorted(pieces)
    assert set().union(*(set(range(*_span(p))) for p in pieces)) == hours_a - hours_b
    assert a.contains(b) == (b.start >= a.start and b.end <= a.end)


def _span(interval: Interval) -> tuple[int, int]:
    return (
        int((interval.start - BASE) / timedelta(hours=1)),
        int((interval.end - BASE) / timedelta(hours=1)),
    )


# --- granularities ------------------------------------------------------------


def test_granularity_names_follow_the_spec():
    assert GRANULARITY_NAMES == (
        "SECOND",
        "MINUTE",
        "FIVE_MINUTE",
        "FIFTEEN_MINUTE",
        "THIRTY_MINUTE",
        "HOUR",
        "SIX_HOUR",
        "DAY",
        "WEEK",
        "MONTH",
        "QUARTER",
        "YEAR",
        "ALL",
        "NONE",
    )
    for name in GRANULARITY_NAMES:
        g = Granularity.from_name(name)
        assert g.name == name and getattr(iv, name) is g and getattr(Granularity, name) is g
        assert pickle.loads(pickle.dumps(g)) is g


def test_from_name_is_case_insensitive_and_lists_accepted_names_on_error():
    assert Granularity.from_name("day") is DAY
    assert Granularity.from_name("Five_Minute") is iv.FIVE_MINUTE
    with pytest.raises(ValueError, match="accepted.*SECOND.*FIVE_MINUTE.*NONE"):
        Granularity.from_name("fortnight")


@pytest.mark.parametrize(
    "granularity, instant, start, end",
    [
        (iv.SECOND, "2024-05-17T13:47:12.345Z", "2024-05-17T13:47:12", "2024-05-17T13:47:13"),
        (iv.MINUTE, "2024-05-17T13:47:12.345Z", "2024-05-17T13:47", "2024-05-17T13:48"),
        (iv.FIVE_MINUTE, "2024-05-17T13:47:12Z", "2024-05-17T13:45", "2024-05-17T13:50"),
        (iv.FIFTEEN_MINUTE, "2024-05-17T13:47:12Z", "2024-05-17T13:45", "2024-05-17T14:00"),
        (iv.THIRTY_MINUTE, "2024-05-17T13:47:12Z", "2024-05-17T13:30", "2024-05-17T14:00"),
        (HOUR, "2024-05-17T13:47:12Z", "2024-05-17T13", "2024-05-17T14"),
        (iv.SIX_HOUR, "2024-05-17T13:47:12Z", "2024-05-17T12", "2024-05-17T18"),
        (iv.SIX_HOUR, "2024-05-17T23:59:59Z", "2024-05-17T18", "2024-05-18T00"),
        (DAY, "2024-05-17T13:47:12Z", "2024-05-17", "2024-05-18"),
        (DAY, "2024-12-31T23:00Z", "2024-12-31", "2025-01-01"),
        (WEEK, "2024-05-17T13:47:12Z", "2024-05-13", "2024-05-20"),  # a Friday -> Monday
        (WEEK, "2024-05-13T00:00Z", "2024-05-13", "2024-05-20"),
        (WEEK, "2024-12-31T10:00Z", "2024-12-30", "2025-01-06"),
        (MONTH, "2024-02-29T13:00Z", "2024-02-01", "2024-03-01"),
        (MONTH, "2024-12-15T00:00Z", "2024-12-01", "2025-01-01"),
        (QUARTER, "2024-05-17T13:00Z", "2024-04-01", "2024-07-01"),
        (QUARTER, "2024-12-17T13:00Z", "2024-10-01", "2025-01-01"),
        (YEAR, "2024-05-17T13:00Z", "2024-01-01", "2025-01-01"),
    ],
)
def test_truncate_bucket_and_next(granularity, instant, start, end):
    t = ts(instant)
    assert granularity.truncate(t) == ts(start)
    assert granularity.next(t) == ts(end)
    assert granularity.bucket(t) == Interval(ts(start), ts(end))


def test_truncate_converts_other_time_zones_and_rejects_naive():
    plus_two = timezone(timedelta(hours=2))
    assert DAY.truncate(datetime(2024, 1, 2, 1, tzinfo=plus_two)) == ts("2024-01-01")
    with pytest.raises(ValueError, match="time zone"):
        DAY.truncate(datetime(2024, 1, 1))


def test_all_has_one_bucket_from_min_to_max_and_none_buckets_by_millisecond():
    t = ts("2024-05-17T13:47:12.345678Z")
    assert ALL.truncate(t) == MIN_TS and ALL.next(t) == MAX_TS and ALL.bucket(t) == ETERNITY
    assert list(ALL.iter_buckets(Interval.parse("2024-01-01/2025-01-01"))) == [ETERNITY]
    # Druid's NoneGranularity: one bucket per millisecond, Druid's unit of time.
    ms = ts("2024-05-17T13:47:12.345Z")
    assert NONE.truncate(t) == ms and NONE.truncate(ms) is ms
    assert NONE.bucket(t) == Interval(ms, ms + timedelta(milliseconds=1))
    two = Interval(ms, ms + timedelta(milliseconds=2))
    assert len(list(NONE.iter_buckets(two))) == 2


def test_iter_buckets_yields_the_buckets_overlapping_the_interval():
    interval = Interval.parse("2024-01-01T10/2024-01-03T01")
    assert [str(b) for b in DAY.iter_buckets(interval)] == [
        "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z",
        "2024-01-02T00:00:00.000Z/2024-01-03T00:00:00.000Z",
        "2024-01-03T00:00:00.000Z/2024-01-04T00:00:00.000Z",
    ]
    assert list(DAY.iter_buckets(Interval.parse("2024-01-01/2024-01-02"))) == [
        Interval.parse("2024-01-01/2024-01-02")
    ]
    assert list(DAY.iter_buckets(Interval(ts("2024-01-01T10"), ts("2024-01-01T10")))) == []
    assert len(list(MONTH.iter_buckets(Interval.parse("2024-01-01/2025-01-01")))) == 12


def test_buckets_near_the_end_of_time_are_clamped():
    last_day = ts("9999-12-31T05:00Z")
    assert DAY.next(last_day) == MAX_TS
    assert YEAR.next(last_day) == MAX_TS
    assert list(YEAR.iter_buckets(Interval(last_day, MAX_TS))) == [
        Interval(ts("9999-01-01"), MAX_TS)
    ]


def test_is_aligned():
    assert DAY.is_aligned(Interval.parse("2024-01-01/2024-01-03"))
    assert not DAY.is_aligned(Interval.parse("2024-01-01T01/2024-01-03"))
    assert HOUR.is_aligned(Interval.parse("2024-01-01T01/2024-01-03"))
    assert ALL.is_aligned(ETERNITY)


bucketed = [Granularity.from_name(n) for n in GRANULARITY_NAMES if n not in ("ALL", "NONE")]


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.sampled_from(bucketed),
    st.datetimes(min_value=datetime(1, 1, 8), max_value=datetime(9998, 12, 1)),
)
def test_every_instant_lies_in_its_bucket_and_buckets_tile_time(granularity, naive):
    t = naive.replace(tzinfo=UTC)
    start = granularity.truncate(t)
    end = granularity.next(t)
    assert start <= t < end
    assert granularity.truncate(start) == start
    assert granularity.truncate(end) == end
    assert granularity.next(start) == end
    assert granularity.truncate(end - timedelta(microseconds=1)) == start
    if granularity is WEEK:
        assert start.weekday() == 0


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.sampled_from([g for g in bucketed if g not in (iv.SECOND, iv.MINUTE)]),
    st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 1, 1)),
    st.integers(0, 100 * 24 * 3600),
)
def test_iter_buckets_covers_the_interval_contiguously(granularity, naive, seconds):
    start = naive.replace(tzinfo=UTC)
    interval = Interval(start, start + timedelta(seconds=seconds))
    buckets = list(granularity.iter_buckets(interval))
    if interval.is_empty:
        assert buckets == []
        return
    assert buckets[0].start <= interval.start and buckets[-1].end >= interval.end
    assert all(b.overlaps(interval) for b in buckets)
    assert all(x.end == y.start for x, y in zip(buckets, buckets[1:], strict=False))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2013-10-04/pt1h", "2013-10-04T00:00:00.000Z/2013-10-04T01:00:00.000Z"),
        ("2013-01-31/p1m", "2013-01-31T00:00:00.000Z/2013-02-28T00:00:00.000Z"),
        ("p1y/2014-01-01", "2013-01-01T00:00:00.000Z/2014-01-01T00:00:00.000Z"),
    ],
)
def test_interval_parse_reads_a_period_in_any_case_as_joda_does(text, expected):
    assert str(Interval.parse(text)) == expected
