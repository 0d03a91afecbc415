"""The timeline's SVG is drawn by auto-escaping templates: a dataSource whose name
holds markup and quotes shows as text in the page, in every mark's attributes and
titles, and the drawing stays well-formed XML; in a browser no script of it runs."""

from __future__ import annotations

import re
from urllib.parse import quote
from xml.etree import ElementTree

import pytest
from django.utils.html import escape

from metastore import services

pytestmark = pytest.mark.django_db

HOSTILE = "q\"><script>alert('ds') & b"  # (no slash: a dataSource name refuses it)
ESCAPED = "q&quot;&gt;&lt;script&gt;alert(&#x27;ds&#x27;) &amp; b"


@pytest.fixture
def hostile(publish, claimed_task, no_enqueue):
    """Two chunks of the hostile dataSource (one overshadowed), and a lock held on it."""
    publish(HOSTILE, "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 2})
    publish(HOSTILE, "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    from metastore.intervals import Interval

    task = claimed_task(HOSTILE)
    services.lock_acquire(task=task, interval=Interval.parse("2024-01-02/2024-01-03"))
    return task


def _svgs(html: str) -> list[str]:
    return re.findall(r'<svg class="timeline[^"]*".*?</svg>', html, re.S)


def test_a_hostile_name_is_text_in_the_timeline_and_its_svg_is_well_formed(client, user, hostile):
    from tests.conftest import TEST_PASSWORD

    assert client.login(username=user.username, password=TEST_PASSWORD)
    for query in ("", "?interval=2024-01-01/2024-01-03&unused=1"):
        response = client.get(f"/datasources/{quote(HOSTILE, safe='')}{query}")
        assert response.status_code == 200
        html = response.content.decode()
        assert "<script>alert" not in html
        assert ESCAPED in html  # the name, shown as text
        svgs = _svgs(html)
        assert len(svgs) == 2
        for svg in svgs:
            ElementTree.fromstring(svg)  # well-formed: no attribute broken by a quote
        interval = svgs[1]
        ids = re.findall(r'data-segment-id="([^"]*)"', interval)
        assert len(ids) == 3 and all(i.startswith(ESCAPED) for i in ids)
        assert f'data-holder="{escape(hostile.id)}"' in interval  # the lock's holder
        for title in re.findall(r"<title>(.*?)</title>", interval, re.S):
            assert "<" not in title and '"' not in title


def test_no_script_of_a_hostile_name_runs_in_the_browser(console_page, hostile):
    page = console_page
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(page.console_url(f"/datasources/{quote(HOSTILE, safe='')}"))
    page.wait_for_selector("svg.timeline-interval g.seg")
    assert page.locator("svg.timeline-interval g.seg").count() == 3
    first = page.locator("svg.timeline-interval g.seg").first.get_attribute("data-segment-id")
    assert first.startswith(HOSTILE)
    assert dialogs == [] and page.problems == []
