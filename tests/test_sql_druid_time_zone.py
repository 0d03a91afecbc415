"""Druid SQL's time arithmetic under the context's `sqlTimeZone` (issue 26, item 7), as
Druid plans it: TIMESTAMPADD and `+ INTERVAL` shift months, quarters and years on
the zone's wall clock (timestamp_shift with the zone) and shorter units by a fixed
width (millisecond arithmetic); TIMESTAMPDIFF counts whole months between the zone's
wall-clock times (subtract_months) and shorter units by fixed widths; Joda's `Z`
in TIME_FORMAT is the zone's offset. Los Angeles moved to daylight time on
2000-04-02, so each case below differs from the answer on UTC's clock.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

ZONE = "America/Los_Angeles"


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # One day is 24 hours, across the change too: 12:00 PST + 24h is 13:00 PDT.
        ("TIMESTAMPADD(DAY, 1, TIMESTAMP '2000-04-01 12:00:00')", "2000-04-02T13:00:00.000-07:00"),
        ("TIMESTAMP '2000-04-01 12:00:00' + INTERVAL '1' DAY", "2000-04-02T13:00:00.000-07:00"),
        ("TIMESTAMPADD(WEEK, 1, TIMESTAMP '2000-03-31 12:00:00')", "2000-04-07T13:00:00.000-07:00"),
        # A month is a calendar month on the wall clock: noon stays noon.
        (
            "TIMESTAMPADD(MONTH, 1, TIMESTAMP '2000-03-15 12:00:00')",
            "2000-04-15T12:00:00.000-07:00",
        ),
        (
            "TIMESTAMPADD(QUARTER, -1, TIMESTAMP '2000-06-15 12:00:00')",
            "2000-03-15T12:00:00.000-08:00",
        ),
        ("TIMESTAMP '2000-03-15 12:00:00' + INTERVAL '1' MONTH", "2000-04-15T12:00:00.000-07:00"),
        ("TIMESTAMP '2000-10-15 12:00:00' - INTERVAL '1' YEAR", "1999-10-15T12:00:00.000-07:00"),
        ("TIME_SHIFT(TIMESTAMP '2000-03-15 12:00:00', 'P1M', 1)", "2000-04-15T12:00:00.000-07:00"),
        # 47 hours between the two midnights: one whole day.
        ("TIMESTAMPDIFF(DAY, TIMESTAMP '2000-04-01 00:00:00', TIMESTAMP '2000-04-03 00:00:00')", 1),
        (
            "TIMESTAMPDIFF(HOUR, TIMESTAMP '2000-04-01 00:00:00', TIMESTAMP '2000-04-03 00:00:00')",
            47,
        ),
        # 2000-01-01T08:00Z to 2000-07-01T07:00Z: two quarters on the wall clock.
        (
            "TIMESTAMPDIFF(QUARTER, TIMESTAMP '2000-01-01 00:00:00', TIMESTAMP '2000-07-01 00:00:00')",
            2,
        ),
        (
            "TIMESTAMPDIFF(MONTH, TIMESTAMP '2000-01-01 00:00:00', TIMESTAMP '2000-07-01 00:00:00')",
            6,
        ),
        (
            "TIMESTAMPDIFF(YEAR, TIMESTAMP '1999-07-01 00:00:00', TIMESTAMP '2000-07-01 00:00:00')",
            1,
        ),
        ("TIME_FORMAT(MILLIS_TO_TIMESTAMP(0), 'yyyy-MM-dd HH:mm Z')", "1969-12-31 16:00 -0800"),
        ("TIME_FLOOR(TIMESTAMP '2000-04-05 12:00:00', 'P1W')", "2000-04-03T00:00:00.000-07:00"),
        ("FLOOR(TIMESTAMP '2000-04-02 12:00:00' TO DAY)", "2000-04-02T00:00:00.000-08:00"),
        ("TIMESTAMP_TO_MILLIS(TIMESTAMP '1970-01-01 00:00:00')", 28800000),
    ],
)
def test_time_arithmetic_in_the_sql_time_zone(api_client, expression, expected):
    body = {"query": f"SELECT {expression} AS v", "context": {"sqlTimeZone": ZONE}}
    response = api_client.post("/druid/v2/sql", body, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == [{"v": expected}]


def test_in_utc_a_month_is_added_on_utcs_clock(api_client):
    body = {"query": "SELECT TIMESTAMPADD(MONTH, 1, TIMESTAMP '2000-03-15 12:00:00') AS v"}
    response = api_client.post("/druid/v2/sql", body, format="json")
    assert response.json() == [{"v": "2000-04-15T12:00:00.000Z"}]
