"""Retention rules, pure (metastore/duties/retention.py): the cases of Druid's own
rule tests (PeriodLoadRuleTest, PeriodDropRuleTest, PeriodDropBeforeRuleTest,
IntervalLoadRuleTest) and of its documentation, as tables; first match wins;
validation names the field."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from metastore.duties.periods import Period, PeriodError
from metastore.duties.retention import (
    DEFAULT_RULES,
    RuleError,
    parse_rules,
    plan_drops,
    rules_json,
)
from metastore.intervals import Interval

NOW = datetime(2012, 12, 31, 1, tzinfo=UTC)
DAY = timedelta(days=1)
WEEK = timedelta(weeks=1)


def rule(**fields):
    (parsed,) = parse_rules([fields])
    return parsed


def iv(start, end) -> Interval:
    return Interval(start, end)


def months(n: int) -> datetime:
    return Period.parse(f"P{abs(n)}M").add_to(NOW, 1 if n > 0 else -1)


# (rule, segment interval, applies) -- Druid's tests, reference time 2012-12-31T01:00.
CASES = [
    # PeriodLoadRuleTest.testAppliesToAll (reference 2013-01-01 there; any works for P5000Y)
    (
        {"type": "loadByPeriod", "period": "P5000Y", "includeFuture": False},
        Interval.parse("2012-01-01/2012-12-31"),
        True,
    ),
    (
        {"type": "loadByPeriod", "period": "P5000Y", "includeFuture": False},
        Interval.parse("1000-01-01/2012-12-31"),
        True,
    ),
    # testAppliesToPeriod
    ({"type": "loadByPeriod", "period": "P1M", "includeFuture": False}, iv(NOW - WEEK, NOW), True),
    (
        {"type": "loadByPeriod", "period": "P1M", "includeFuture": False},
        iv(NOW - DAY, NOW + DAY),
        True,
    ),
    (
        {"type": "loadByPeriod", "period": "P1M", "includeFuture": False},
        iv(NOW + DAY, NOW + 2 * DAY),
        False,
    ),
    # testAppliesToPartialOverlap
    (
        {"type": "loadByPeriod", "period": "P1M", "includeFuture": False},
        iv(NOW - WEEK, NOW + WEEK),
        True,
    ),
    (
        {"type": "loadByPeriod", "period": "P1M", "includeFuture": False},
        iv(months(-1) - WEEK, months(-1) + WEEK),
        True,
    ),
    # testIncludeFuture
    (
        {"type": "loadByPeriod", "period": "P2D", "includeFuture": True},
        iv(NOW + DAY, NOW + 2 * DAY),
        True,
    ),
    (
        {"type": "loadByPeriod", "period": "P2D", "includeFuture": False},
        iv(NOW + DAY, NOW + 2 * DAY),
        False,
    ),
    # includeFuture is true by default
    ({"type": "loadByPeriod", "period": "P2D"}, iv(NOW + DAY, NOW + 2 * DAY), True),
    # PeriodDropRuleTest.testAppliesToAll
    (
        {"type": "dropByPeriod", "period": "P5000Y", "includeFuture": False},
        iv(NOW - 2 * DAY, NOW - DAY),
        True,
    ),
    (
        {"type": "dropByPeriod", "period": "P5000Y", "includeFuture": False},
        iv(NOW.replace(year=1912), NOW - DAY),
        True,
    ),
    # testAppliesToPeriod
    (
        {"type": "dropByPeriod", "period": "P1M", "includeFuture": False},
        iv(NOW - WEEK, NOW - DAY),
        True,
    ),
    ({"type": "dropByPeriod", "period": "P1M", "includeFuture": False}, iv(NOW - DAY, NOW), True),
    (
        {"type": "dropByPeriod", "period": "P1M", "includeFuture": False},
        iv(NOW.replace(year=2011), NOW - DAY),
        False,
    ),
    (
        {"type": "dropByPeriod", "period": "P1M", "includeFuture": False},
        iv(months(-2), NOW - DAY),
        False,
    ),
    # testIncludeFuture
    (
        {"type": "dropByPeriod", "period": "P2D", "includeFuture": True},
        iv(NOW + DAY, NOW + 2 * DAY),
        True,
    ),
    (
        {"type": "dropByPeriod", "period": "P2D", "includeFuture": False},
        iv(NOW + DAY, NOW + 2 * DAY),
        False,
    ),
    # PeriodDropBeforeRuleTest.testDropBefore
    ({"type": "dropBeforeByPeriod", "period": "P1D"}, iv(NOW - 3 * DAY, NOW - 2 * DAY), True),
    ({"type": "dropBeforeByPeriod", "period": "P1D"}, iv(NOW - 2 * DAY, NOW - DAY), True),
    ({"type": "dropBeforeByPeriod", "period": "P1D"}, iv(NOW - DAY, NOW), False),
    ({"type": "dropBeforeByPeriod", "period": "P1D"}, iv(NOW, NOW + DAY), False),
    # Interval rules: a load rule applies on overlap, a drop rule only if it contains the segment
    (
        {"type": "loadByInterval", "interval": "2012-01-01/2013-01-01"},
        Interval.parse("2012-12-31/2013-01-02"),
        True,
    ),
    (
        {"type": "loadByInterval", "interval": "2012-01-01/2013-01-01"},
        Interval.parse("2013-01-01/2013-01-02"),
        False,
    ),
    (
        {"type": "dropByInterval", "interval": "2012-01-01/2013-01-01"},
        Interval.parse("2012-03-01/2012-03-02"),
        True,
    ),
    (
        {"type": "dropByInterval", "interval": "2012-01-01/2013-01-01"},
        Interval.parse("2012-12-31/2013-01-02"),
        False,
    ),
    # Forever rules apply to everything
    ({"type": "loadForever"}, Interval.parse("1000-01-01/3000-01-01"), True),
    ({"type": "dropForever"}, Interval.parse("2012-01-01/2012-01-02"), True),
    ({"type": "broadcastForever"}, Interval.parse("2012-01-01/2012-01-02"), True),
    (
        {"type": "broadcastByInterval", "interval": "1993/2070"},
        Interval.parse("2012-01-01/2012-01-02"),
        True,
    ),
    (
        {"type": "broadcastByPeriod", "period": "P1M", "includeFuture": False},
        iv(NOW + DAY, NOW + 2 * DAY),
        False,
    ),
]


@pytest.mark.parametrize(("fields", "interval", "applies"), CASES)
def test_rule_applies_as_druids_rule_tests_say(fields, interval, applies):
    assert rule(**fields).applies_to(interval, NOW) is applies


def plan(rules, segments, defaults=DEFAULT_RULES, now=NOW):
    return plan_drops(
        rules=parse_rules(rules), default_rules=defaults, now=now, segments=segments.items()
    )


SEGMENTS = {
    "old": Interval.parse("2011-01-01/2011-01-02"),
    "last_month": iv(NOW - 20 * DAY, NOW - 19 * DAY),
    "recent": iv(NOW - DAY, NOW),
    "future": iv(NOW + DAY, NOW + 2 * DAY),
}


def test_first_match_wins_load_by_period_then_drop_forever():
    # The documented way to keep one month: loadByPeriod P1M + dropForever.
    result = plan([{"type": "loadByPeriod", "period": "P1M"}, {"type": "dropForever"}], SEGMENTS)
    assert result.segment_ids == ["old"]
    (drop,) = result.drops
    assert (drop.rule.type, drop.rule_index, drop.from_default) == ("dropForever", 1, False)


def test_drop_before_by_period_plus_load_forever_equals_load_by_period_plus_drop_forever():
    # The equivalence Druid's docs state, checked on the same segments at several times.
    for now in (NOW, NOW + 40 * DAY, NOW - 400 * DAY):
        a = plan(
            [{"type": "dropBeforeByPeriod", "period": "P1M"}, {"type": "loadForever"}],
            SEGMENTS,
            now=now,
        )
        b = plan(
            [
                {"type": "loadByPeriod", "period": "P1M", "includeFuture": True},
                {"type": "dropForever"},
            ],
            SEGMENTS,
            now=now,
        )
        assert a.segment_ids == b.segment_ids


def test_load_rule_alone_never_drops_the_default_loads_the_rest():
    # Druid #13080: without a trailing drop rule, the default loadForever keeps all.
    assert plan([{"type": "loadByPeriod", "period": "P1M"}], SEGMENTS).segment_ids == []


def test_default_rules_follow_the_datasource_rules():
    result = plan(
        [{"type": "loadByPeriod", "period": "P1M"}],
        SEGMENTS,
        defaults=parse_rules([{"type": "dropForever"}]),
    )
    assert result.segment_ids == ["old"]
    assert result.drops[0].from_default and result.drops[0].rule_index == 1


def test_a_segment_no_rule_matches_is_left_alone_and_counted():
    result = plan([{"type": "dropByInterval", "interval": "2011/2012"}], SEGMENTS, defaults=())
    assert result.segment_ids == ["old"]
    assert sorted(result.unmatched) == ["future", "last_month", "recent"]


def test_drop_by_period_drops_recent_data():
    result = plan([{"type": "dropByPeriod", "period": "P1M", "includeFuture": False}], SEGMENTS)
    assert result.segment_ids == ["last_month", "recent"]


def test_rules_echo_in_druids_shape_with_defaults_filled():
    rules = parse_rules(
        [
            {"type": "loadByPeriod", "period": "P1M"},
            {"type": "dropByInterval", "interval": "2023-01-01/2023-02-01"},
            {"type": "loadForever", "tieredReplicants": {"hot": 1, "_default_tier": 1}},
            {"type": "loadForever", "useDefaultTierForNull": False},
            {"type": "broadcastForever", "colocatedDataSources": ["a"]},
        ]
    )
    assert rules_json(rules) == [
        {
            "type": "loadByPeriod",
            "period": "P1M",
            "includeFuture": True,
            "tieredReplicants": {"_default_tier": 2},
        },
        {"type": "dropByInterval", "interval": "2023-01-01T00:00:00.000Z/2023-02-01T00:00:00.000Z"},
        {"type": "loadForever", "tieredReplicants": {"hot": 1, "_default_tier": 1}},
        {"type": "loadForever", "tieredReplicants": {}, "useDefaultTierForNull": False},
        {"type": "broadcastForever", "colocatedDataSources": ["a"]},
    ]
    assert rules_json(DEFAULT_RULES) == [
        {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}
    ]


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ({"type": "loadByPeriod"}, "(body)"),
        ([{"type": "loadByPeriod"}], "[0].period"),
        ([{"type": "keepForever"}], "[0].type"),
        ([{"period": "P1M"}], "[0].type"),
        ([{"type": "loadForever"}, {"type": "dropByPeriod", "period": "1 month"}], "[1].period"),
        ([{"type": "dropByPeriod", "period": "-P1M"}], "[0].period"),
        ([{"type": "dropByPeriod"}], "[0].period"),
        ([{"type": "dropByInterval", "interval": "2012-01-01"}], "[0].interval"),
        ([{"type": "loadByInterval", "interval": "2013-01-01/2012-01-01"}], "[0].interval"),
        ([{"type": "loadByPeriod", "period": "P1M", "includeFuture": "yes"}], "[0].includeFuture"),
        ([{"type": "loadForever", "tieredReplicants": {"hot": -1}}], "[0].tieredReplicants.hot"),
        ([{"type": "loadForever", "tieredReplicants": {"hot": None}}], "[0].tieredReplicants.hot"),
        ([{"type": "dropForever", "period": "P1M"}], "[0].period"),
        (["dropForever"], "[0]"),
    ],
)
def test_invalid_rules_name_the_field(rules, field):
    with pytest.raises(RuleError) as caught:
        parse_rules(rules)
    assert caught.value.field == field


def test_periods_read_as_joda_reads_them():
    march_end = datetime(2012, 3, 31, tzinfo=UTC)
    assert Period.parse("P1M").before(march_end) == datetime(2012, 2, 29, tzinfo=UTC)
    assert Period.parse("P1Y2M3DT4H").before(march_end) == datetime(2011, 1, 27, 20, tzinfo=UTC)
    assert Period.parse("P-1D").is_negative() and Period.parse("-P1D").is_negative()
    assert Period.parse("-P1D").before(march_end) == datetime(2012, 4, 1, tzinfo=UTC)
    assert Period.parse("P5000Y").before(march_end) == datetime.min.replace(tzinfo=UTC)
    for bad in ("P", "PT", "1D", "P1.5D", "P1DT", 30):
        with pytest.raises(PeriodError):
            Period.parse(bad)


def test_the_duty_decisions_import_no_django():
    code = (
        "import sys; import metastore.duties.retention, metastore.duties.periods; "
        "assert 'django' not in sys.modules and 'pyspark' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- properties, against obviously-correct references ---------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from metastore.duties.history import Change, visible_in_any_state  # noqa: E402
from metastore.intervals import ETERNITY  # noqa: E402
from metastore.timeline import Timeline  # noqa: E402
from tests.test_timeline_property import histories  # noqa: E402

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(history=histories())
def test_visible_in_any_state_equals_a_fresh_timeline_per_commit(history):
    pool, initial, steps = history
    used = {pool[i].id: pool[i] for i in initial}
    expected = {ref.id for _, ref in Timeline.build(used.values()).lookup(ETERNITY)}
    changes = []
    for index, add in steps:
        ref = pool[index]
        if add:
            used[ref.id] = ref
            changes.append(Change([ref], []))
        else:
            used.pop(ref.id, None)
            changes.append(Change([], [ref.id]))
        expected |= {r.id for _, r in Timeline.build(used.values()).lookup(ETERNITY)}
    assert visible_in_any_state([pool[i] for i in initial], changes) == expected


hours = st.integers(-24 * 400, 24 * 400)


@PROPERTY
@given(
    spans=st.lists(st.tuples(hours, st.integers(1, 24 * 60)), min_size=1, max_size=20),
    period=st.sampled_from(["PT6H", "P1D", "P7D", "P1M", "P3M", "P1Y"]),
    offset=hours,
)
def test_drop_before_plus_load_forever_equals_load_by_period_plus_drop_forever(
    spans, period, offset
):
    now = NOW + timedelta(hours=offset)
    segments = {
        f"s{i}": iv(NOW + timedelta(hours=a), NOW + timedelta(hours=a + n))
        for i, (a, n) in enumerate(spans)
    }
    a = plan(
        [{"type": "dropBeforeByPeriod", "period": period}, {"type": "loadForever"}],
        segments,
        now=now,
    )
    b = plan(
        [
            {"type": "loadByPeriod", "period": period, "includeFuture": True},
            {"type": "dropForever"},
        ],
        segments,
        now=now,
    )
    assert a.segment_ids == b.segment_ids
