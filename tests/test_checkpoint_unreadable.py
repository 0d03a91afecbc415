"""An unreadable timeline checkpoint (its stored bytes do not decode) is never
where a read starts: reads skip it, with a warning, for the newest readable one
before it (or the whole log), and the checkpoint service no longer counts it as
the newest one, so it stores a fresh checkpoint when one is due, even at the very
commit of the unreadable one."""

from __future__ import annotations

import logging
import zlib

import pytest

from metastore import selectors, services
from metastore.checkpoint_codec import decode_refs
from metastore.intervals import Interval
from metastore.models import CommitKind, CommitLogEntry, TimelineCheckpoint
from metastore.selectors import timeline as timeline_reads
from metastore.services import checkpoints
from metastore.timeline import Timeline

pytestmark = pytest.mark.django_db

DS = "ckpt_unreadable"
EVERYTHING = Interval.parse("2024-01-01/2025-01-01")
# Bytes that are not a checkpoint: garbage, and the right magic over a valid
# zlib stream too short for the layout (a struct error while decoding).
UNREADABLE = {
    "garbage": b"\x00not a checkpoint\xff",
    "short body": b"STC1" + zlib.compress(b"\x01"),
    "short body, second layout": b"STC2" + zlib.compress(b"\x01"),
}


def _replayed_ids(as_of: int) -> set[str]:
    """The reference: the whole log replayed from its start."""
    used: set[str] = set()
    for kind, added, removed in CommitLogEntry.objects.filter(
        datasource=DS, seq__lte=as_of
    ).values_list("kind", "added", "removed"):
        used.difference_update(removed or [])
        used.update(added or [])
        if kind == CommitKind.KILL:
            used.difference_update(removed or [])
    return used


def _history(publish, django_capture_on_commit_callbacks, commits: int) -> list[int]:
    seqs = []
    for n in range(commits):
        day = f"2024-05-{1 + n % 5:02d}/2024-05-{2 + n % 5:02d}"
        with django_capture_on_commit_callbacks(execute=True):  # a checkpoint when due
            seqs.append(publish(DS, day, {day: 1 + n % 2}).commit_seq)
    return seqs


def _corrupt(seq: int, data: bytes) -> None:
    assert TimelineCheckpoint.objects.filter(datasource=DS, seq=seq).update(refs=data) == 1


def _assert_reads_equal_a_full_replay(seq: int) -> None:
    selectors.timeline_caches_clear()
    expected_ids = _replayed_ids(seq)
    assert selectors.used_ids_as_of(datasource=DS, as_of=seq) == expected_ids
    expected = Timeline.build(timeline_reads.segment_row_refs(DS, expected_ids))
    for timeline in (
        selectors.timeline_for(datasource=DS, as_of=seq),
        selectors.timeline_for(datasource=DS),
    ):
        assert set(timeline.segments()) == set(expected.segments())
        assert timeline.lookup(EVERYTHING) == expected.lookup(EVERYTHING)


@pytest.mark.parametrize("bad", list(UNREADABLE), ids=list(UNREADABLE))
def test_reads_skip_an_unreadable_newest_checkpoint_and_a_fresh_one_is_stored(
    bad, publish, monkeypatch, caplog, django_capture_on_commit_callbacks, no_enqueue
):
    monkeypatch.setattr(checkpoints, "CHECKPOINT_AFTER", 2)
    _history(publish, django_capture_on_commit_callbacks, 5)
    stored = list(
        TimelineCheckpoint.objects.filter(datasource=DS)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert len(stored) == 2  # at the 1st and the 4th commit
    previous, newest = stored
    last = _history(publish, django_capture_on_commit_callbacks, 1)[-1]  # a log tail after it
    _corrupt(newest, UNREADABLE[bad])

    with caplog.at_level(logging.WARNING, logger="metastore.selectors.timeline"):
        _assert_reads_equal_a_full_replay(last)
        # it starts from the readable checkpoint before the unreadable one
        assert timeline_reads.checkpoint_at(DS, last)[0] == previous
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"#{newest}" in m and DS in m for m in warned), warned

    # the service does not count it as the newest: a checkpoint is due, and stored
    assert services.timeline_checkpoint_save(datasource=DS) == last
    assert decode_refs(TimelineCheckpoint.objects.get(datasource=DS, seq=last).refs)
    assert timeline_reads.checkpoint_at(DS, last)[0] == last
    _assert_reads_equal_a_full_replay(last)


def test_an_unreadable_checkpoint_at_the_last_commit_is_replaced(
    publish, monkeypatch, caplog, django_capture_on_commit_callbacks, no_enqueue
):
    """In a process that never read it, too: the service checks what it counts on."""
    monkeypatch.setattr(checkpoints, "CHECKPOINT_AFTER", 2)
    seqs = _history(publish, django_capture_on_commit_callbacks, 4)
    newest = TimelineCheckpoint.objects.filter(datasource=DS).order_by("-seq").first().seq
    assert newest == seqs[-1]
    _corrupt(newest, UNREADABLE["garbage"])
    selectors.timeline_caches_clear()

    with caplog.at_level(logging.WARNING, logger="metastore.selectors.timeline"):
        assert services.timeline_checkpoint_save(datasource=DS) == newest
    assert decode_refs(TimelineCheckpoint.objects.get(datasource=DS, seq=newest).refs)
    _assert_reads_equal_a_full_replay(newest)


def test_only_unreadable_checkpoints_means_the_whole_log(
    publish, monkeypatch, django_capture_on_commit_callbacks, no_enqueue
):
    monkeypatch.setattr(checkpoints, "CHECKPOINT_AFTER", 2)
    seqs = _history(publish, django_capture_on_commit_callbacks, 5)
    for seq in TimelineCheckpoint.objects.filter(datasource=DS).values_list("seq", flat=True):
        _corrupt(seq, UNREADABLE["short body"])
    _assert_reads_equal_a_full_replay(seqs[-1])
    for seq in seqs:
        assert selectors.used_ids_as_of(datasource=DS, as_of=seq) == _replayed_ids(seq)
    assert timeline_reads.checkpoint_at(DS, seqs[-1]) == (0, None)
