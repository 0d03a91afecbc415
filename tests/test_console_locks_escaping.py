"""The locks page's waits-for graph is drawn by an auto-escaping template: tasks of
a dataSource whose name holds markup and quotes (their ids carry the name) show as
text in every box, arrow, attribute and title, the drawing stays well-formed XML,
and in a browser no script of it runs."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest
from django.utils.html import escape

from metastore import services
from metastore.intervals import Interval

pytestmark = pytest.mark.django_db

HOSTILE = "q\"><script>alert('ds') & b"  # (no slash: a dataSource name refuses it)
ESCAPED = "q&quot;&gt;&lt;script&gt;alert(&#x27;ds&#x27;) &amp; b"
DAY = "2024-01-02/2024-01-03"


@pytest.fixture
def waiting(claimed_task, no_enqueue):
    """(holder, waiter): the holder locks a day of the hostile dataSource, the waiter waits for it."""
    holder = claimed_task(HOSTILE)
    services.lock_acquire(task=holder, interval=Interval.parse(DAY))
    waiter = claimed_task(HOSTILE)
    assert services.lock_try_acquire(task=waiter, interval=Interval.parse(DAY)) is None
    assert ESCAPED in escape(holder.id) and ESCAPED in escape(waiter.id)
    return holder, waiter


def _waits_for(html: str) -> str:
    (svg,) = re.findall(r'<svg class="waits-for".*?</svg>', html, re.S)
    return svg


def test_hostile_task_ids_are_text_in_the_waits_for_graph_and_it_is_well_formed(
    client, user, waiting
):
    holder, waiter = waiting
    client.force_login(user)
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):  # the page and its polled fragment
        response = client.get("/locks", **headers)
        assert response.status_code == 200
        html = response.content.decode()
        assert "<script>alert" not in html
        svg = _waits_for(html)
        root = ElementTree.fromstring(svg)  # well-formed: no attribute broken by a quote
        ns = {"s": "http://www.w3.org/2000/svg"}
        (edge,) = root.findall("s:g[@class='wait-edge']", ns)
        assert (edge.get("data-waiter"), edge.get("data-blocker")) == (waiter.id, holder.id)
        assert edge.find("s:title", ns).text.startswith(f"{waiter.id} waits for {holder.id}: ")
        boxes = {
            g.get("class"): g for g in root.findall("s:g", ns) if "wait-node" in g.get("class")
        }
        assert boxes["wait-node waiter"].get("data-task") == waiter.id
        assert boxes["wait-node holder"].get("data-task") == holder.id
        for side, task in (("waiter", waiter), ("holder", holder)):
            link = boxes[f"wait-node {side}"].find("s:a", ns)
            assert link.find("s:text", ns).text.endswith(task.id[:48])  # the clipped id
            assert link.get("href").startswith("/tasks/index_parallel_q%22%3E%3Cscript%3E")
        assert f'data-waiter="{escape(waiter.id)}" data-blocker="{escape(holder.id)}"' in svg
        for title in re.findall(r"<title>(.*?)</title>", svg, re.S):
            assert "<" not in title and '"' not in title


def test_no_script_of_a_hostile_task_id_runs_in_the_browser(console_page, waiting):
    holder, waiter = waiting
    page = console_page
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(page.console_url("/locks"))
    page.wait_for_selector("svg.waits-for g.wait-edge", state="attached")  # (a flat line)
    edge = page.locator("svg.waits-for g.wait-edge")
    assert edge.count() == 1
    assert edge.get_attribute("data-waiter") == waiter.id
    assert edge.get_attribute("data-blocker") == holder.id
    assert page.locator("svg.waits-for g.wait-node").count() == 2
    assert dialogs == [] and page.problems == []
