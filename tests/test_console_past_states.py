"""The timeline state as of a past commit (`selectors.states.past_state`: the
current state with the commits after it undone, only the chunks they touched
redone) equals the state rebuilt from the checkpoint and the log, and the console's
dataSource page `?as_of=<seq>` draws what the page drew when that commit was the
newest. Histories are made through the services, as in test_console_timeline."""

from __future__ import annotations

import random

import pytest

from metastore import selectors, services, timeline_view
from metastore.intervals import Interval
from metastore.models import Segment
from metastore.selectors import states as state_reads
from tests.test_console_timeline import _random_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user):
    from tests.conftest import TEST_PASSWORD

    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


def facts(state) -> dict:
    """Everything the console reads of a state."""
    return {
        "segments": set(state.timeline.segments()),
        "chunks": [
            (
                c.interval,
                c.version,
                c.size,
                c.complete,
                c.n_visible,
                c.n_partial,
                c.n_overshadowed,
                c.n_incomplete,
                c.tombstones,
                c.partial_aug,
                [r.id for r in c.segments],
            )
            for c in state.chunks
        ],
        "status": dict(state.status.items()),
        "starts": state.starts,
        "max_length": state.max_length,
        "extent": state.extent,
        "seq": state.seq,
    }


def rebuilt(datasource: str, seq: int):
    """The reference: the whole state rebuilt as of `seq` (what the page did)."""
    return timeline_view.state_of(selectors.timeline_for(datasource=datasource, as_of=seq), seq)


def rows_of(datasource: str, state) -> dict:
    ids = {r.id for r in state.timeline.segments()}
    return state_reads.chunk_rows(datasource=datasource, ids=ids) if ids else {}


@pytest.mark.parametrize("undo_max", [state_reads.UNDO_MAX, 1])
def test_past_states_equal_rebuilt_ones_over_random_histories(
    publish, user, monkeypatch, django_capture_on_commit_callbacks, undo_max, no_enqueue
):
    """Publishes, marks, unmarks and kills in random order; every past commit's
    state, asked for in random order with the current state cached or not, equals
    the one rebuilt as of it (UNDO_MAX 1: most are rebuilt from the checkpoint)."""
    monkeypatch.setattr(state_reads, "UNDO_MAX", undo_max)
    for h in range(2):
        rng = random.Random(100 + h)
        ds = f"past{h}"
        with django_capture_on_commit_callbacks(execute=True):
            seqs = _random_history(rng, ds, publish, user, 16)
        for seq in rng.sample(seqs, len(seqs)):
            if rng.random() < 0.3:
                selectors.timeline_caches_clear()
            past = selectors.timeline_state(datasource=ds, as_of=seq)
            expected = rebuilt(ds, seq)
            assert facts(past) == facts(expected), (h, seq)
            found = state_reads.state_rows(datasource=ds, state=past)
            assert {k: v for k, v in found.items() if v != (0, 0)} == rows_of(ds, expected)
            assert selectors.timeline_state(datasource=ds, as_of=seq) is past  # kept


def test_a_past_state_follows_a_kill_after_it(publish, user, no_enqueue):
    """A kill after the commit is a new current seq: the state kept as of it is not
    served again, and the killed segments leave it (their files are gone)."""
    first = publish("killed", "2024-05-01/2024-05-03", {"2024-05-01/2024-05-02": 2})
    publish("killed", "2024-05-01/2024-05-03", {"2024-05-02/2024-05-03": 1})
    before = selectors.timeline_state(datasource="killed", as_of=first.commit_seq)
    assert {r.id for r in before.timeline.segments()} >= set(first.segment_ids)
    services.segments_mark_used(datasource="killed", used=False, segment_ids=first.segment_ids)
    from metastore.models import Task, TaskStatus

    day = Interval.parse("2024-05-01/2024-05-02")
    task = services.task_submit(
        spec={"type": "kill", "dataSource": "killed", "interval": str(day)}, user=user
    )
    assert services.task_claim(task_id=task.id, worker="pytest")
    task = Task.objects.get(id=task.id)
    services.lock_acquire(task=task, interval=day)
    services.segments_kill(task=task, interval=day)
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)
    after = selectors.timeline_state(datasource="killed", as_of=first.commit_seq)
    assert after is not before
    assert not ({r.id for r in after.timeline.segments()} & set(first.segment_ids))
    assert facts(after) == facts(rebuilt("killed", first.commit_seq))


# What the page draws of its timeline (not the banner, links or commit list).
DRAWN = ("window", "extent", "overview_svg", "n_buckets", "interval_svg", "table", "counts")


def _history(rng, publish, datasource: str, steps: int) -> list[int]:
    """Publishes (day chunks, or a coarser one over two days: partly overshadowed
    segments), marks unused and used again, through the services."""
    seqs = []
    for _ in range(steps):
        op = rng.choice(["publish", "publish", "unmark", "mark"])
        if op == "publish":
            d = rng.randint(1, 6)
            days = f"2024-05-{d:02d}/2024-05-{d + 2:02d}"
            chunks = {f"2024-05-{x:02d}/2024-05-{x + 1:02d}": rng.randint(1, 3) for x in (d, d + 1)}
            if rng.random() < 0.3:
                chunks = {days: rng.randint(1, 2)}
            seqs.append(publish(datasource, days, chunks).commit_seq)
            continue
        pool = sorted(
            Segment.objects.filter(datasource__name=datasource, used=op == "unmark").values_list(
                "id", flat=True
            )
        )
        if pool:
            chosen = rng.sample(pool, rng.randint(1, min(3, len(pool))))
            entry = services.segments_mark_used(
                datasource=datasource, used=op == "mark", segment_ids=chosen
            )
            if entry is not None:
                seqs.append(entry.seq)
    return seqs


def test_the_page_as_of_a_commit_draws_what_it_drew_when_that_commit_was_the_newest(
    logged_in, publish, monkeypatch, no_enqueue
):
    rng = random.Random(7)
    ds = "travel"
    pages = ["", "&interval=2024-05-02/2024-05-04"]  # (unused=1 shows the unused of now)
    then: dict[tuple[int, str], dict] = {}
    for _ in range(12):
        for seq in _history(rng, publish, ds, 1):
            for extra in pages:  # the page as it was rendered then (the newest commit)
                response = logged_in.get(f"/datasources/{ds}?x=1{extra}")
                assert response.status_code == 200
                then[(seq, extra)] = {k: response.context[k] for k in DRAWN}
    newest = selectors.last_commit_seq(datasource=ds)
    checked = 0
    for (seq, extra), drawn in rng.sample(sorted(then.items()), len(then)):
        if seq == newest:
            continue
        if rng.random() < 0.3:
            selectors.timeline_caches_clear()
        response = logged_in.get(f"/datasources/{ds}?as_of={seq}{extra}")
        assert response.status_code == 200 and response.context["as_of"] == seq
        assert {k: response.context[k] for k in DRAWN} == drawn, (seq, extra)
        checked += 1
    assert checked >= 16


def test_the_page_as_of_a_commit_is_the_page_from_the_state_rebuilt_as_of_it(
    logged_in, publish, monkeypatch, no_enqueue
):
    """Every page as of every commit, with unused segments shown or not, against the
    page drawn from the whole state rebuilt as of it (what the page did before)."""
    rng = random.Random(11)
    ds = "travel"
    seqs = _history(rng, publish, ds, 12)
    pages = [
        f"/datasources/{ds}?as_of={seq}{extra}"
        for seq in seqs[:-1]
        for extra in ("", "&unused=1", "&interval=2024-05-03/2024-05-05&unused=1")
    ]
    drawn = {}
    for path in pages:
        response = logged_in.get(path)
        assert response.status_code == 200
        drawn[path] = {k: response.context[k] for k in DRAWN}
    monkeypatch.setattr(state_reads, "past_state", lambda *, datasource, as_of: rebuilt(ds, as_of))
    for path in pages:
        selectors.timeline_caches_clear()
        response = logged_in.get(path)
        assert {k: response.context[k] for k in DRAWN} == drawn[path], path
