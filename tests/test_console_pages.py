"""Console pages render visibility from the timeline engine: per chunk, segments
marked visible, partially overshadowed (with the visible part) or overshadowed
(and by what); HTMX requests get the partial alone."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user):
    from tests.conftest import TEST_PASSWORD

    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


def _rows(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-segment="([^"]+)" data-visibility="([^"]+)"', html))


def test_datasource_page_marks_visible_partial_and_overshadowed(logged_in, publish):
    v1 = publish(
        "wiki", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 1, "2024-01-02/2024-01-03": 1}
    )
    v2 = publish("wiki", "2024-01-01T00/2024-01-01T06", {"2024-01-01T00/2024-01-01T06": 1})
    v3 = publish("wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1})
    page = logged_in.get("/datasources/wiki")
    assert page.status_code == 200
    html = page.content.decode()
    rows = _rows(html)
    day1, day2_old = v1.segment_ids
    assert rows == {
        day1: "partial",
        day2_old: "overshadowed",
        v2.segment_ids[0]: "visible",
        v3.segment_ids[0]: "visible",
    }
    assert "visible 2024-01-01T06:00:00.000Z/2024-01-02T00:00:00.000Z" in html
    assert f"by {v3.segment_ids[0]}" in html
    # The HTMX poll gets only the partial (no page layout around it).
    fragment = logged_in.get("/datasources/wiki", HTTP_HX_REQUEST="true").content.decode()
    assert _rows(fragment) == rows and "<header>" not in fragment and "<header>" in html


def test_unknown_datasource_is_a_404(logged_in):
    assert logged_in.get("/datasources/nope").status_code == 404


def test_pages_require_login(client):
    for path in ("/", "/locks", "/datasources", "/datasources/wiki"):
        response = client.get(path)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize(
    "datasource, segment_id",
    [
        ("wiki", "wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v_3"),
        ("we ird ä%", "a b/c?d#e%f&g=h:@~ü"),
        ("x", "%00"),
    ],
)
def test_segment_links_are_what_reverse_gives(datasource, segment_id):
    from django.urls import reverse

    from console.timeline_svg import segment_hrefs

    expected = reverse("console:segment", args=[datasource, segment_id])
    assert segment_hrefs(datasource)(segment_id) == expected
