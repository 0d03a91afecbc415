"""Timeline checkpoints: the used segments of a dataSource right after one commit,
stored so that a process without the timeline (and time travel) replays only the
log after the newest one (`selectors.timeline`). A checkpoint is a derived cache:
failing to write one loses nothing, so the failure is ignored; one whose bytes
do not decode counts for nothing (reads skip it) and is replaced by the next.

Written after a publish commits (`checkpoint_after_commit`), never by a read.
"""

from __future__ import annotations

from django.db import DatabaseError, transaction

from metastore.checkpoint_codec import encode_refs
from metastore.models import TimelineCheckpoint
from metastore.selectors import timeline as timeline_reads
from metastore.timeline import SegmentRef

# A checkpoint is due once more commits than this were logged after the newest one.
CHECKPOINT_AFTER = 32
# Checkpoints kept per dataSource: past this the older ones are thinned out (every
# other one goes), so time travel far back replays more, up to a bounded stretch.
CHECKPOINTS_KEPT = 48
CHECKPOINTS_NEWEST = 8  # never thinned


def timeline_checkpoint_save(*, datasource: str) -> int | None:
    """Store a checkpoint at the dataSource's last commit if one is due (there is
    none yet, or more than `CHECKPOINT_AFTER` commits were logged since the newest)
    and thin out the old ones; its seq, or None when none was due or written."""
    try:
        seq = timeline_reads.last_commit_seq(datasource=datasource)
        if not seq or not timeline_reads.checkpoint_due(
            datasource=datasource, seq=seq, after=CHECKPOINT_AFTER
        ):
            return None
        refs = timeline_reads.refs_at(datasource=datasource, seq=seq)
        # The refs are the state at `seq` only if no commit landed while reading them.
        if timeline_reads.last_commit_seq(datasource=datasource) != seq:
            return None
        _save(datasource, seq, refs)
    except (DatabaseError, ValueError):
        return None
    return seq


def _save(datasource: str, seq: int, refs: list[SegmentRef]) -> None:
    unreadable = timeline_reads.unreadable_checkpoints(datasource=datasource)
    with transaction.atomic():
        if unreadable:  # never read from again; one at `seq` makes room for the new one
            TimelineCheckpoint.objects.filter(datasource=datasource, seq__in=unreadable).delete()
        TimelineCheckpoint.objects.bulk_create(
            [
                TimelineCheckpoint(
                    datasource=datasource, seq=seq, segments=len(refs), refs=encode_refs(refs)
                )
            ],
            ignore_conflicts=True,
        )
        seqs = list(
            TimelineCheckpoint.objects.filter(datasource=datasource)
            .order_by("-seq")
            .values_list("seq", flat=True)
        )
        if len(seqs) > CHECKPOINTS_KEPT:
            older = seqs[CHECKPOINTS_NEWEST:]
            TimelineCheckpoint.objects.filter(datasource=datasource, seq__in=older[1::2]).delete()
    timeline_reads.checkpoint_written(datasource=datasource, seq=seq)


def checkpoint_after_commit(datasource: str) -> None:
    """Have `timeline_checkpoint_save` run once the current transaction commits
    (nothing runs if it rolls back; an error in it never reaches the caller)."""
    transaction.on_commit(lambda: timeline_checkpoint_save(datasource=datasource), robust=True)
