"""The console's timeline, segment, commit, task, lock and action pages against one
dataSource holding every state (tests/console_states.py, built through the
services): each SVG mark is checked per segment through its data attributes,
and each page's query count is bounded whatever the dataSource's size."""

from __future__ import annotations

import re

import pytest

from metastore import selectors, services, timeline_view
from metastore.intervals import Interval
from metastore.models import (
    CommitKind,
    CommitLogEntry,
    Segment,
    Task,
    TaskStatus,
    TimelineCheckpoint,
)
from metastore.selectors import timeline as timeline_reads
from metastore.timeline import Timeline
from tests import console_states
from tests.console_states import DS, commit_adding

pytestmark = pytest.mark.django_db

MARK = re.compile(r"<g ([^>]*\bdata-segment-id=[^>]*)>")
ATTR = re.compile(r'data-([a-z-]+)="([^"]*)"')


def marks(html: str) -> dict[str, dict[str, str]]:
    """segment id -> its mark's data attributes, from the interval view's SVG."""
    out = {}
    for m in MARK.finditer(html):
        attrs = dict(ATTR.findall(m.group(1)))
        out[attrs["segment-id"]] = attrs
    return out


def buckets(html: str) -> list[dict[str, str]]:
    return [dict(ATTR.findall(m)) for m in re.findall(r'<g class="bucket" ([^>]*)>', html)]


@pytest.fixture
def logged_in(client, user):
    from tests.conftest import TEST_PASSWORD

    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


@pytest.fixture
def states(inline_spec, user, no_enqueue):
    return console_states.build(inline_spec, user=user)


def test_every_state_is_marked_per_segment(logged_in, states):
    html = logged_in.get(f"/datasources/{DS}").content.decode()
    m = marks(html)
    ids = states.ids
    (visible,) = ids["visible"]
    assert m[visible]["status"] == "visible" and m[visible]["flags"] == ""
    (partial,) = ids["partial"]
    (hour,) = ids["hour"]
    assert m[partial]["status"] == "partial"
    assert m[partial]["overshadowed-by"] == hour
    assert m[hour]["status"] == "visible"
    # the visible part is drawn solid over the hatched extent
    assert 'data-interval="2024-03-02T06:00:00.000Z/2024-03-03T00:00:00.000Z"' in html
    (old,), (newer,) = ids["overshadowed"], ids["newer"]
    assert m[old]["status"] == "overshadowed" and m[old]["overshadowed-by"] == newer
    (under,), (tomb,) = ids["under_tombstone"], ids["tombstone"]
    assert m[tomb]["status"] == "visible" and "tombstone" in m[tomb]["flags"].split()
    assert m[under]["status"] == "overshadowed" and m[under]["overshadowed-by"] == tomb
    (incomplete,) = ids["incomplete"]
    assert m[incomplete]["status"] == "incomplete" and "incomplete" in m[incomplete]["flags"]
    (aug,) = ids["partial_aug"]
    assert m[aug]["status"] == "overshadowed" and "partial-aug" in m[aug]["flags"].split()
    assert all(m[s]["status"] == "visible" for s in ids["aug_base"])
    upgraded = Segment.objects.exclude(upgraded_from="").get()
    assert "upgraded" in m[upgraded.id]["flags"].split() and m[upgraded.id]["status"] == "visible"
    assert upgraded.upgraded_from in ids["append7"]
    # unused segments only on request
    (unused,) = ids["unused"]
    assert unused not in m
    with_unused = marks(logged_in.get(f"/datasources/{DS}?unused=1").content.decode())
    assert with_unused[unused]["status"] == "unused"
    # the lock and the allocation being written, drawn over day 9
    assert re.search(
        rf'<g class="lock" data-lock-id="{states.lock_id}" data-lock-type="EXCLUSIVE" '
        rf'data-holder="{states.running}" data-priority="\d+" data-revoked="0">',
        html,
    )
    assert f'data-task="{states.running}"' in html and 'class="pending"' in html
    # the overview flags every state somewhere, and each flag where it belongs
    flags = {f for b in buckets(html) for f in b["flags"].split()}
    assert flags == {"overshadowed", "tombstone", "incomplete", "locked", "writing"}
    for b in buckets(html):
        if "locked" in b["flags"] or "writing" in b["flags"]:
            assert b["end"] > "2024-03-09" and b["start"] < "2024-03-10"
        if "incomplete" in b["flags"]:
            assert b["end"] > "2024-03-05" and b["start"] < "2024-03-06"
        if "tombstone" in b["flags"]:
            assert b["end"] > "2024-03-04" and b["start"] < "2024-03-05"
    # a legend explains the marks, by label
    for label in (
        "tombstone",
        "incomplete chunk",
        "partial atomic update group",
        "unused",
        "being written",
        "revoked lock",
        "upgraded copy",
    ):
        assert label in html


def test_zoomed_window_draws_only_its_segments(logged_in, states):
    html = logged_in.get(f"/datasources/{DS}?interval=2024-03-02/2024-03-03").content.decode()
    assert set(marks(html)) == set(states.ids["partial"] + states.ids["hour"])
    assert 'data-window-start="2024-03-02T00:00:00.000Z"' in html
    # extreme windows draw, within bounds
    for window in ("0001-01-01/9999-01-01", "2024-03-02T00:00:00.000Z/2024-03-02T00:00:00.001Z"):
        html = logged_in.get(
            f"/datasources/{DS}?interval={window}&buckets=5000", follow=True
        ).content.decode()
        assert len(buckets(html)) <= 1000 and "svg" in html
    # a bad interval is reported, not a 500
    bad = logged_in.get(f"/datasources/{DS}?interval=nope", follow=True)
    assert bad.status_code == 200 and "not an ISO interval" in bad.content.decode()


def test_time_travel_shows_the_timeline_as_of_a_commit(logged_in, states):
    first = CommitLogEntry.objects.filter(datasource=DS).order_by("seq").first()
    html = logged_in.get(f"/datasources/{DS}?as_of={first.seq}").content.decode()
    m = marks(html)
    assert set(m) == set(first.added)
    assert {a["status"] for a in m.values()} == {"visible"}  # before any overwrite
    assert f"As of commit #{first.seq}" in html
    # the commit page draws what it added on its interval
    hour_commit = commit_adding(DS, states.ids["hour"])
    page = logged_in.get(f"/datasources/{DS}/commits/{hour_commit.seq}").content.decode()
    after = page.split('class="svg-wrap commit-after"')[1].split("</svg>")[0]
    (hour,) = states.ids["hour"]
    assert 'data-commit="added"' in after and marks(after)[hour]["commit"] == "added"
    assert marks(after)[states.ids["partial"][0]]["status"] == "partial"
    before = page.split('class="svg-wrap commit-before"')[1].split("</svg>")[0]
    assert hour not in marks(before)
    assert marks(before)[states.ids["partial"][0]]["status"] == "visible"


def test_commit_history_is_paginated(logged_in, states):
    for _ in range(30):
        services.segments_mark_used(datasource=DS, used=True, segment_ids=states.ids["unused"])
        services.segments_mark_used(datasource=DS, used=False, segment_ids=states.ids["unused"])
    n = CommitLogEntry.objects.filter(datasource=DS).count()
    first = logged_in.get(f"/datasources/{DS}").content.decode()
    seqs = re.findall(r'<tr data-seq="(\d+)">', first)
    assert len(seqs) == 25
    last_page = logged_in.get(f"/datasources/{DS}?page=100").content.decode()
    older = re.findall(r'<tr data-seq="(\d+)">', last_page)
    assert len(seqs) + len(older) <= n and min(map(int, older)) == min(
        CommitLogEntry.objects.filter(datasource=DS).values_list("seq", flat=True)
    )


def test_segment_page_names_who_overshadows_whom_and_its_commit(logged_in, states):
    (old,), (newer,) = states.ids["overshadowed"], states.ids["newer"]
    page = logged_in.get(f"/datasources/{DS}/segments/{old}").content.decode()
    assert 'data-status="overshadowed"' in page
    assert newer in page.split('class="overshadowed-by"')[1].split("</ul>")[0]
    page = logged_in.get(f"/datasources/{DS}/segments/{newer}").content.decode()
    assert old in page.split('class="overshadows"')[1].split("</ul>")[0]
    commit = commit_adding(DS, [newer])
    assert f"#{commit.seq}" in page.split('class="added-by"')[1].split("</td>")[0]
    for field in ("location", "size_bytes", "num_rows", "root_partitions", "atomic_update_group"):
        assert f'data-field="{field}"' in page
    upgraded = Segment.objects.exclude(upgraded_from="").get()
    page = logged_in.get(f"/datasources/{DS}/segments/{upgraded.id}").content.decode()
    assert f"/segments/{upgraded.upgraded_from}" in page
    assert logged_in.get(f"/datasources/{DS}/segments/nope").status_code == 404


def test_pages_query_counts_do_not_grow_with_the_data(
    logged_in, states, publish, django_assert_max_num_queries
):
    paths = [
        f"/datasources/{DS}",
        f"/datasources/{DS}?unused=1&interval=2024-03-01/2024-03-10",
        f"/datasources/{DS}/segments/{states.ids['newer'][0]}",
        f"/datasources/{DS}/commits/{CommitLogEntry.objects.filter(datasource=DS).order_by('seq').first().seq}",
        "/",
        "/locks",
        f"/tasks/{states.running}",
        f"/tasks/{states.waiter}",
    ]
    counts = {}
    for path in paths:
        # a fresh process with no checkpoint: the most queries a page takes
        selectors.timeline_caches_clear()
        TimelineCheckpoint.objects.all().delete()
        with django_assert_max_num_queries(25) as ctx:
            assert logged_in.get(path).status_code == 200, path
        counts[path] = len(ctx.captured_queries)
    # ten times the chunks, more tasks: the same number of queries per page
    publish(
        DS,
        "2024-04-01/2024-04-21",
        {f"2024-04-{d:02d}/2024-04-{d + 1:02d}": 3 for d in range(1, 21)},
    )
    for _ in range(5):
        publish(
            DS, "2024-04-01/2024-04-03", {"2024-04-01/2024-04-02": 2, "2024-04-02/2024-04-03": 2}
        )
    for path in paths:
        selectors.timeline_caches_clear()
        TimelineCheckpoint.objects.all().delete()
        with django_assert_max_num_queries(counts[path]):
            assert logged_in.get(path).status_code == 200, path


def test_reads_write_nothing_even_cold_after_a_long_log(logged_in, states, publish):
    """No read writes (issue 24): a fresh process with no checkpoint and a log tail
    long enough that reads used to store one sends only SELECTs, for the pages,
    the current timeline and time travel alike."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from metastore.services import checkpoints

    TimelineCheckpoint.objects.all().delete()
    first = CommitLogEntry.objects.filter(datasource=DS).order_by("seq").first().seq
    for _ in range(checkpoints.CHECKPOINT_AFTER + 1):
        publish(DS, "2024-04-01/2024-04-02", {"2024-04-01/2024-04-02": 1})
    reads = [
        lambda: logged_in.get(f"/datasources/{DS}"),
        lambda: logged_in.get(f"/datasources/{DS}?interval=2024-03-01/2024-03-10"),
        lambda: selectors.timeline_for(datasource=DS),
        lambda: selectors.timeline_for(datasource=DS, as_of=first),
        lambda: selectors.used_ids_as_of(datasource=DS, as_of=first),
    ]
    for read in reads:
        selectors.timeline_caches_clear()
        with CaptureQueriesContext(connection) as ctx:
            read()
        writes = [
            q["sql"] for q in ctx.captured_queries if not q["sql"].lstrip().startswith("SELECT")
        ]
        assert writes == []
    assert not TimelineCheckpoint.objects.exists()


def test_a_publish_stores_a_checkpoint_once_it_commits_when_one_is_due(
    states, publish, django_capture_on_commit_callbacks
):
    from metastore.services import checkpoints

    TimelineCheckpoint.objects.all().delete()
    with django_capture_on_commit_callbacks(execute=True):
        first = publish(DS, "2024-04-01/2024-04-02", {"2024-04-01/2024-04-02": 1})
    (checkpoint,) = TimelineCheckpoint.objects.filter(datasource=DS)
    assert checkpoint.seq == first.commit_seq
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(checkpoints.CHECKPOINT_AFTER):
            publish(DS, "2024-04-01/2024-04-02", {"2024-04-01/2024-04-02": 1})
    assert TimelineCheckpoint.objects.filter(datasource=DS).count() == 1  # not due yet
    with django_capture_on_commit_callbacks(execute=True):
        last = publish(DS, "2024-04-01/2024-04-02", {"2024-04-01/2024-04-02": 1})
    newest = TimelineCheckpoint.objects.filter(datasource=DS).order_by("-seq").first()
    assert newest.seq == last.commit_seq
    selectors.timeline_caches_clear()
    assert set(selectors.timeline_for(datasource=DS).segments()) == set(
        timeline_reads.segment_row_refs(DS)
    )


def test_mark_used_unused_and_admin_edits_store_a_checkpoint_when_one_is_due(
    states, django_capture_on_commit_callbacks
):
    """Every kind of commit, not only a publish, keeps the log tail after the newest
    checkpoint short: flipping segments unused and used again past the threshold
    stores one at the last commit."""
    from metastore.services import checkpoints

    TimelineCheckpoint.objects.all().delete()
    ids = states.ids["unused"]
    with django_capture_on_commit_callbacks(execute=True):
        entry = services.segments_mark_used(datasource=DS, used=True, segment_ids=ids)
    (checkpoint,) = TimelineCheckpoint.objects.filter(datasource=DS)
    assert checkpoint.seq == entry.seq
    with django_capture_on_commit_callbacks(execute=True):
        for n in range(checkpoints.CHECKPOINT_AFTER + 1):
            entry = services.segments_mark_used(datasource=DS, used=n % 2 == 1, segment_ids=ids)
    newest = TimelineCheckpoint.objects.filter(datasource=DS).order_by("-seq").first()
    assert newest.seq == entry.seq
    selectors.timeline_caches_clear()
    assert set(selectors.timeline_for(datasource=DS).segments()) == set(
        timeline_reads.segment_row_refs(DS)
    )


def test_cold_timeline_read_takes_the_same_queries_whatever_the_log_tail(
    states, publish, django_assert_max_num_queries
):
    selectors.timeline_caches_clear()
    assert services.timeline_checkpoint_save(datasource=DS)
    assert TimelineCheckpoint.objects.filter(datasource=DS).exists()
    for _ in range(3):
        publish(DS, "2024-04-01/2024-04-02", {"2024-04-01/2024-04-02": 2})
    services.segments_mark_used(datasource=DS, used=True, segment_ids=states.ids["unused"])
    selectors.timeline_caches_clear()
    # last seq, checkpoint, the log after it, the rows of the segments it added
    with django_assert_max_num_queries(4):
        timeline = selectors.timeline_for(datasource=DS)
    assert set(timeline.segments()) == set(timeline_reads.segment_row_refs(DS))


def test_shapes_are_bounded_whatever_the_size(logged_in, publish):
    from console import timeline_svg

    publish(
        "big",
        "2024-01-01/2024-03-01",
        {f"2024-01-{d:02d}/2024-01-{d + 1:02d}": 25 for d in range(1, 31)},
    )
    html = logged_in.get("/datasources/big").content.decode()
    assert len(marks(html)) == 0  # 750 segments: one mark per chunk
    assert len(re.findall(r'<g class="chunk"', html)) == 30
    assert len(buckets(html)) <= timeline_svg.MAX_BUCKETS
    assert len(buckets(logged_in.get("/datasources/big?buckets=99999").content.decode())) <= 1000
    zoomed = logged_in.get("/datasources/big?interval=2024-01-03/2024-01-05").content.decode()
    assert len(marks(zoomed)) == 50


def test_task_page_shows_who_blocks_and_stops_polling_once_ended(logged_in, states):
    page = logged_in.get(f"/tasks/{states.waiter}").content.decode()
    assert f'data-blocker="{states.running}"' in page and 'hx-trigger="every 2s"' in page
    holder = logged_in.get(f"/tasks/{states.running}").content.decode()
    assert states.waiter in holder.split('class="blocking"')[1]
    locks = logged_in.get("/locks").content.decode()
    assert f'data-waiter="{states.waiter}" data-blocker="{states.running}"' in locks
    services.task_finish(task_id=states.waiter, status=TaskStatus.FAILED, error="test")
    ended = logged_in.get(f"/tasks/{states.waiter}", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-active="0"' in ended and "hx-trigger" not in ended


def test_tasks_list_filters_and_pages(logged_in, states):
    n = Task.objects.count()
    html = logged_in.get("/tasks?status=success").content.decode()
    rows = re.findall(r'<tr data-task="([^"]+)">', html)
    assert rows and set(rows) == set(
        Task.objects.filter(status=TaskStatus.SUCCESS).values_list("id", flat=True)[:50]
    )
    html = logged_in.get(
        "/tasks?status=RUNNING&type=index_parallel&datasource=states"
    ).content.decode()
    assert re.findall(r'<tr data-task="([^"]+)">', html) == [states.running]
    assert f"({n} tasks)" in logged_in.get("/tasks").content.decode()


def test_submit_form_prefills_templates_and_shows_errors_at_the_field(logged_in, states):
    import json

    for kind in ("ingest", "append", "replace", "compact", "kill"):
        page = logged_in.get(
            f"/tasks/new?template={kind}&datasource={DS}&interval=2024-03-01/2024-03-02"
        )
        assert page.status_code == 200 and DS in page.content.decode()
    replace = logged_in.get(f"/tasks/new?template=replace&datasource={DS}").content.decode()
    assert "&quot;dropExisting&quot;: true" in replace
    spec = console_states.day  # noqa: F841 - keep the import used
    bad = {
        "type": "kill",
        "dataSource": DS,
        "interval": "not an interval",
    }
    text = json.dumps(bad, indent=2)
    response = logged_in.post("/tasks/submit", {"spec": text})
    assert response.status_code == 400  # refused input: the form again, not a redirect
    html = response.content.decode()
    assert 'data-field="interval"' in html
    line = re.search(
        r'<div class="error-field" id="error-line"><span class="ln">(\d+)</span>', html
    )
    assert line and '"interval"' in text.splitlines()[int(line.group(1)) - 1]
    assert Task.objects.filter(type="kill").count() == 0
    response = logged_in.post("/tasks/submit", {"spec": "{not json"})
    assert "JSON line 1" in response.content.decode()
    assert "not valid JSON" in response.content.decode()


def test_mark_unused_asks_first_and_records_the_user(logged_in, states, user):
    (visible,) = states.ids["visible"]
    before = CommitLogEntry.objects.count()
    ask = logged_in.post(
        f"/datasources/{DS}/actions", {"action": "mark_unused", "segment": visible}
    )
    assert ask.status_code == 200 and "Confirm" in ask.content.decode()
    assert CommitLogEntry.objects.count() == before and Segment.objects.get(id=visible).used
    done = logged_in.post(
        f"/datasources/{DS}/actions",
        {"action": "mark_unused", "segment": visible, "confirm": "yes"},
    )
    assert done.status_code == 302
    entry = CommitLogEntry.objects.order_by("-seq").first()
    assert (
        entry.kind == CommitKind.MARK_UNUSED and entry.removed == [visible] and entry.user == user
    )
    assert not Segment.objects.get(id=visible).used
    # by interval, back to used
    logged_in.post(
        f"/datasources/{DS}/actions",
        {"action": "mark_used", "interval": "2024-03-01/2024-03-02", "confirm": "yes"},
    )
    assert Segment.objects.get(id=visible).used
    # kill submits a kill task (after confirmation), compact opens the prefilled form
    logged_in.post(
        f"/datasources/{DS}/actions",
        {"action": "kill", "interval": "2024-03-08/2024-03-09", "confirm": "yes"},
    )
    kill = Task.objects.get(type="kill")
    assert kill.submitted_by == user and kill.spec["interval"] == "2024-03-08/2024-03-09"
    compact = logged_in.post(
        f"/datasources/{DS}/actions", {"action": "compact", "interval": "2024-03-01/2024-03-03"}
    )
    assert compact.status_code == 302 and "template=compact" in compact["Location"]


def test_timeline_follows_the_commit_log_incrementally(states, publish):
    cached = selectors.timeline_for(datasource=DS)
    state = selectors.timeline_state(datasource=DS)
    assert selectors.state_rows(datasource=DS, state=state) == selectors.chunk_rows(datasource=DS)
    assert sum(state.counts.values()) == len(state.status)  # counted now, followed later
    added = publish(DS, "2024-03-01/2024-03-02", {"2024-03-01/2024-03-02": 2})
    services.segments_mark_used(datasource=DS, used=True, segment_ids=states.ids["unused"])
    before = len(cached)
    now = selectors.timeline_for(datasource=DS)
    # A copy of the cached timeline with the commits applied, not a rebuild: the
    # chunks no commit touched are shared; the cached one, in readers' hands, stays.
    assert now is not cached and len(cached) == before
    assert len(set(map(id, now._chunks.values())) & set(map(id, cached._chunks.values()))) > 0
    fresh = Timeline.build(timeline_reads.segment_row_refs(DS))
    assert {s.id for s in now.segments()} == {s.id for s in fresh.segments()}
    assert all(now.status(s) == fresh.status(s) for s in added.segment_ids + states.ids["visible"])
    assert now.status(states.ids["visible"][0]) == "overshadowed"
    # the console's state followed too, redoing only the touched chunks
    moved = selectors.timeline_state(datasource=DS)
    assert moved is not state and moved.timeline is now
    full = timeline_view.state_of(fresh, moved.seq)
    assert moved.status == full.status and moved.extent == full.extent
    assert moved.counts == full.counts
    assert [
        (c.interval, c.version, [r.id for r in c.segments], c.complete, c.partial_aug)
        for c in moved.chunks
    ] == [
        (c.interval, c.version, [r.id for r in c.segments], c.complete, c.partial_aug)
        for c in full.chunks
    ]
    assert selectors.state_rows(datasource=DS, state=moved) == selectors.chunk_rows(datasource=DS)
    untouched = next(c for c in state.chunks if c.interval == console_states.day(3))
    assert any(c is untouched for c in moved.chunks)  # day 3 was not redone


def test_task_page_draws_phases_row_stats_and_parse_errors(logged_in, states):
    report = {
        "phases": {"lock": 0.5, "phase 1": 3.0, "publish": 0.5},
        "rowStats": {"processed": 90, "processedWithError": 0, "thrownAway": 4, "unparseable": 6},
        "parseExceptionSamples": ["line 3: cannot parse timestamp 'yesterday'"],
        "segmentsPublished": 2,
    }
    services.task_finish(
        task_id=states.running,
        status=TaskStatus.FAILED,
        error="too many parse errors",
        report=report,
    )
    html = logged_in.get(f"/tasks/{states.running}").content.decode()
    assert re.findall(r'<tr data-phase="([^"]+)">', html) == ["lock", "phase 1", "publish"]
    chart = html.split('<svg class="phase-chart"')[1].split("</svg>")[0]
    widths = [int(w) for w in re.findall(r'<rect x="\d+" y="2" width="(\d+)"', chart)]
    assert widths == [75, 450, 75]  # 600 px shared by duration
    assert "<td>90</td>" in html and "<td>6</td>" in html
    assert "cannot parse timestamp" in html.split('class="parse-errors"')[1]
    assert (
        'data-active="0"' in html
        and "hx-trigger" not in html.split('id="task-detail"')[1].split(">")[0]
    )


def test_kill_commit_names_the_user_who_submitted_it(logged_in, states, user):
    from metastore.models import TaskLock

    kill = services.task_submit(
        spec={"type": "kill", "dataSource": DS, "interval": "2024-03-08/2024-03-09"}, user=user
    )
    assert services.task_claim(task_id=kill.id, worker="pytest")
    services.lock_acquire(task=Task.objects.get(id=kill.id), interval=console_states.day(8))
    entry, _ = services.segments_kill(
        task=Task.objects.get(id=kill.id), interval=console_states.day(8)
    )
    assert not TaskLock.objects.filter(task_id=kill.id).exists()
    page = logged_in.get(f"/datasources/{DS}/commits/{entry.seq}").content.decode()
    assert f'<span class="submitted-by">{user.username}</span>' in page
    assert states.ids["unused"][0] in page.split('class="removed"')[1]


# --- timeline checkpoints -------------------------------------------------------------------
# STRATA_CHECKPOINT_HISTORIES random commit histories (default 3) of
# STRATA_CHECKPOINT_STEPS commits each (default 14) are checked in CI; more by hand.


def _replayed_ids(datasource: str, as_of: int) -> set[str]:
    """The reference: replay the whole log from its start (what used_ids_as_of was)."""
    used: set[str] = set()
    for kind, added, removed in CommitLogEntry.objects.filter(
        datasource=datasource, seq__lte=as_of
    ).values_list("kind", "added", "removed"):
        used.difference_update(removed or [])
        used.update(added or [])
        if kind == CommitKind.KILL:
            used.difference_update(removed or [])
    return used


def _random_history(rng, datasource, publish, user, steps: int) -> list[int]:
    """Publishes, marks unused / used and kills in random order, all through the
    services; returns the seq of every commit."""
    from metastore.intervals import Interval

    seqs = []
    for _ in range(steps):
        op = rng.choice(["publish", "publish", "unmark", "unmark", "mark", "kill"])
        if op == "publish":
            d = rng.randint(1, 6)
            days = f"2024-05-{d:02d}/2024-05-{d + 2:02d}"
            chunks = {f"2024-05-{x:02d}/2024-05-{x + 1:02d}": rng.randint(1, 3) for x in (d, d + 1)}
            if rng.random() < 0.3:  # a coarser chunk over both days
                chunks = {days: rng.randint(1, 2)}
            seqs.append(publish(datasource, days, chunks).commit_seq)
            continue
        used = op != "mark"
        pool = list(
            Segment.objects.filter(datasource__name=datasource, used=used).values_list(
                "id", flat=True
            )
        )
        if op == "kill":
            d = rng.randint(1, 7)
            interval = Interval.parse(f"2024-05-{d:02d}/2024-05-{d + 1:02d}")
            task = services.task_submit(
                spec={"type": "kill", "dataSource": datasource, "interval": str(interval)},
                user=user,
            )
            assert services.task_claim(task_id=task.id, worker="pytest")
            task = Task.objects.get(id=task.id)
            services.lock_acquire(task=task, interval=interval)
            entry, _ = services.segments_kill(task=task, interval=interval)
            services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
            if entry is not None:
                seqs.append(entry.seq)
            continue
        if not pool:
            continue
        chosen = rng.sample(sorted(pool), rng.randint(1, min(3, len(pool))))
        entry = services.segments_mark_used(
            datasource=datasource, used=not used, segment_ids=chosen, user=user
        )
        if entry is not None:
            seqs.append(entry.seq)
    return seqs


def test_checkpointed_timelines_equal_rebuilds_over_random_histories(
    publish, user, monkeypatch, django_capture_on_commit_callbacks, no_enqueue
):
    import os
    import random

    from metastore.services import checkpoints
    from metastore.timeline import Timeline

    # checkpoint often and keep few, so replays, checkpoints and thinning all happen
    monkeypatch.setattr(checkpoints, "CHECKPOINT_AFTER", 2)
    monkeypatch.setattr(checkpoints, "CHECKPOINTS_KEPT", 4)
    monkeypatch.setattr(checkpoints, "CHECKPOINTS_NEWEST", 2)
    histories = int(os.environ.get("STRATA_CHECKPOINT_HISTORIES", "3"))
    steps = int(os.environ.get("STRATA_CHECKPOINT_STEPS", "14"))
    everything = Interval.parse("2024-01-01/2025-01-01")
    for h in range(histories):
        rng = random.Random(h)
        ds = f"history{h}"
        seqs = []
        for _ in range(steps // 2):
            # each publish writes a checkpoint once its transaction commits, when one is due
            with django_capture_on_commit_callbacks(execute=True):
                seqs += _random_history(rng, ds, publish, user, 2)
            # a fresh process reads the timeline now ...
            selectors.timeline_caches_clear()
            current = selectors.timeline_for(datasource=ds)
            rebuilt = Timeline.build(timeline_reads.segment_row_refs(ds))
            assert set(current.segments()) == set(rebuilt.segments()), (h, seqs)
            assert current.lookup(everything) == rebuilt.lookup(everything)
        assert TimelineCheckpoint.objects.filter(datasource=ds).count() <= 4 + 1
        # ... and every past commit, in random order, equals a replay of the whole log
        for seq in rng.sample(seqs, len(seqs)):
            expected_ids = _replayed_ids(ds, seq)
            assert selectors.used_ids_as_of(datasource=ds, as_of=seq) == expected_ids, (h, seq)
            past = selectors.timeline_for(datasource=ds, as_of=seq)
            # killed segments are gone from the table, so from time travel too
            expected = Timeline.build(timeline_reads.segment_row_refs(ds, expected_ids))
            assert set(past.segments()) == set(expected.segments()), (h, seq)
            assert past.lookup(everything) == expected.lookup(everything)


def test_a_checkpoint_is_never_served_past_a_commit_from_another_process(states, publish):
    selectors.timeline_caches_clear()
    services.timeline_checkpoint_save(datasource=DS)
    before = selectors.timeline_for(datasource=DS)
    (checkpoint,) = TimelineCheckpoint.objects.filter(datasource=DS)
    # another process commits: this one's cache is gone, the checkpoint stays behind
    added = publish(DS, "2024-03-01/2024-03-02", {"2024-03-01/2024-03-02": 2})
    services.segments_mark_used(datasource=DS, used=False, segment_ids=states.ids["visible"])
    selectors.timeline_caches_clear()
    now = selectors.timeline_for(datasource=DS)
    assert TimelineCheckpoint.objects.get(datasource=DS).seq == checkpoint.seq
    assert set(now.segments()) == set(timeline_reads.segment_row_refs(DS)) != set(before.segments())
    assert all(sid in now for sid in added.segment_ids)
    assert states.ids["visible"][0] not in now


def test_reads_start_from_the_checkpoint_and_ignore_an_unreadable_one(states):
    from metastore.checkpoint_codec import encode_refs

    selectors.timeline_caches_clear()
    services.timeline_checkpoint_save(datasource=DS)
    full = selectors.timeline_for(datasource=DS)
    checkpoint = TimelineCheckpoint.objects.get(datasource=DS)
    # a checkpoint that lacks a segment: the read trusts it (it is where reads start) ...
    dropped = states.ids["visible"][0]
    checkpoint.refs = encode_refs([r for r in full.segments() if r.id != dropped])
    checkpoint.save()
    selectors.timeline_caches_clear()
    assert dropped not in selectors.timeline_for(datasource=DS)
    # ... one it cannot decode is ignored: the rows are read again
    checkpoint.refs = b"not a checkpoint"
    checkpoint.save()
    selectors.timeline_caches_clear()
    assert set(selectors.timeline_for(datasource=DS).segments()) == set(full.segments())


def test_checkpoint_bytes_round_trip_every_field():
    from datetime import UTC, datetime

    from metastore.checkpoint_codec import decode_refs, encode_refs
    from metastore.intervals import MIN_TS, Interval
    from metastore.timeline import SegmentRef

    far = Interval(MIN_TS, datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))
    odd = Interval(
        datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)
    )
    refs = [
        SegmentRef("a", far, "v1", 0),
        SegmentRef("b é", odd, "v2", 3, 2, {0, 1, 2}, {3, 4}, 5, True),
        SegmentRef("c", odd, "v2", 4, 2, {0, 1, 2}, {3, 4}, 5, False),
        SegmentRef("d", far, "v1", 2**40, 0, None, {2**40}, 0, False),
    ]
    back = decode_refs(encode_refs(refs))
    assert back == [refs[0], refs[3], refs[1], refs[2]]  # grouped by chunk
    assert [type(r.tombstone) for r in back] == [bool] * 4
    assert decode_refs(encode_refs([])) == []


def test_checkpoint_ids_are_built_from_their_chunk_and_partition():
    """Druid-style ids (`<base>` for partition 0, `<base>_<partition>`) are not
    stored per segment; any other id is, and each comes back as it was."""
    import zlib

    from metastore.checkpoint_codec import decode_refs, encode_refs
    from metastore.intervals import Interval
    from metastore.timeline import SegmentRef

    day = Interval.parse("2024-01-01/2024-01-02")
    base = "wiki_2024-01-01T00:00:00.000Z_2024-01-02T00:00:00.000Z_v1"
    druid = [SegmentRef(base if p == 0 else f"{base}_{p}", day, "v1", p) for p in range(300)]
    odd = [
        SegmentRef(f"{base}_7_copy", day, "v2", 7),
        SegmentRef("x_3", day, "v3", 3),  # a base of its own: "x"
        SegmentRef("x_4", day, "v3", 4),
        SegmentRef("y", day, "v3", 5),
    ]
    blob = encode_refs(druid + odd)
    assert decode_refs(blob) == druid + odd
    # 304 ids of ~60 characters are not stored: only the 2 that follow no base are
    assert len(zlib.decompress(blob[4:])) < 3_000


def test_checkpoints_of_the_first_layout_still_decode():
    """A checkpoint stored before the second layout (STC1, every id and 8-byte
    columns, built here as it was written) reads back the same refs."""
    import json
    import struct
    import zlib
    from array import array

    from metastore.checkpoint_codec import decode_refs
    from metastore.intervals import Interval
    from metastore.timeline import SegmentRef

    day = Interval.parse("2024-01-01/2024-01-02")
    header = {"n": 2, "intervals": [[1704067200000000, 1704153600000000]], "versions": ["v1"]}
    header["sets"] = [[0, 1]]
    head = json.dumps(header).encode()
    ids = b"a\0b"
    # interval, version, partition, minor_version, roots, aug, core
    cols = [[0, 0], [0, 0], [0, 1], [0, 1], [0, 1], [0, 0], [2, 2]]
    body = struct.pack("<II", len(head), len(ids)) + head + ids
    body += b"".join(array("q", col).tobytes() for col in cols) + bytes([0, 1])
    assert decode_refs(b"STC1" + zlib.compress(body)) == [
        SegmentRef("a", day, "v1", 0, 0, None, None, 2, False),
        SegmentRef("b", day, "v1", 1, 1, {0, 1}, None, 2, True),
    ]


def test_time_travel_from_a_checkpoint_leaves_out_segments_killed_since(states, user, no_enqueue):
    selectors.timeline_caches_clear()
    seq = services.timeline_checkpoint_save(datasource=DS)  # a checkpoint at the last commit
    assert seq == TimelineCheckpoint.objects.get(datasource=DS).seq
    (visible,) = states.ids["visible"]
    services.segments_mark_used(datasource=DS, used=False, segment_ids=[visible])
    kill = services.task_submit(
        spec={"type": "kill", "dataSource": DS, "interval": str(console_states.day(1))}, user=user
    )
    assert services.task_claim(task_id=kill.id, worker="pytest")
    services.lock_acquire(task=Task.objects.get(id=kill.id), interval=console_states.day(1))
    services.segments_kill(task=Task.objects.get(id=kill.id), interval=console_states.day(1))
    assert not Segment.objects.filter(id=visible).exists()
    # used then, by the log; gone now, so not in the timeline of then (its file is gone)
    assert visible in selectors.used_ids_as_of(datasource=DS, as_of=seq)
    assert visible not in selectors.timeline_for(datasource=DS, as_of=seq)
