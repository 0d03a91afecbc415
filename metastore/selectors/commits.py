"""The commit log: its entries, and what one commit did to the visible data."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Max, Min, QuerySet

from metastore.intervals import Interval
from metastore.models import CommitLogEntry, Segment
from metastore.selectors.segments import overlapping
from metastore.selectors.timeline import used_ids_as_of
from metastore.selectors.visibility import SHOWN, Tally, visibility_counts
from metastore.timeline import REF_COLUMNS, SegmentRef, Timeline, refs_from_rows
from metastore.timeline_view import TimelineState, state_of


def commits_for(*, datasource: str) -> QuerySet[CommitLogEntry]:
    return (
        CommitLogEntry.objects.filter(datasource=datasource).select_related("user").order_by("-seq")
    )


def commit_neighbours(*, datasource: str) -> tuple[int, int]:
    agg = CommitLogEntry.objects.filter(datasource=datasource).aggregate(
        lo=Min("seq"), hi=Max("seq")
    )
    return agg["lo"] or 0, agg["hi"] or 0


@dataclass(frozen=True)
class CommitChange:
    """What one commit did to the visible data: segments it overshadowed (wholly
    or in part), and the change in rows and bytes a query reads from."""

    overshadowed: list[dict]  # {id, interval, rows, bytes, now}: "overshadowed" | "partial"
    n_overshadowed: int
    shown_before: Tally
    shown_after: Tally

    @property
    def rows_delta(self) -> int:
        return self.shown_after.rows - self.shown_before.rows

    @property
    def bytes_delta(self) -> int:
        return self.shown_after.bytes - self.shown_before.bytes

    @property
    def segments_delta(self) -> int:
        return self.shown_after.segments - self.shown_before.segments


def commit_change(
    *,
    datasource: str,
    before: TimelineState | None,
    after: TimelineState,
    window: Interval,
    limit: int = 200,
) -> CommitChange:
    """Compare the timeline before and after a commit over `window` (the span of
    the segments it added and removed): a commit changes nothing outside it."""
    after_counts = visibility_counts(datasource=datasource, state=after, interval=window)
    shown_after = after_counts.shown
    if before is None:
        return CommitChange([], 0, Tally(), shown_after)
    shown_before = visibility_counts(datasource=datasource, state=before, interval=window).shown
    hidden_now: dict[str, str] = {}
    for c in before.chunks_overlapping(window):
        for r in c.segments:
            was = before.status.get(r.id)
            now = after.status.get(r.id)
            if was in SHOWN and now is not None and now not in SHOWN:
                hidden_now[r.id] = "overshadowed"
            elif was == "visible" and now == "partial":
                hidden_now[r.id] = "partial"
    ids = sorted(hidden_now)[:limit]
    facts = {
        s.id: s
        for s in Segment.objects.filter(id__in=ids).only(
            "id", "start", "end", "num_rows", "size_bytes"
        )
    }
    listed = [
        {
            "id": sid,
            "interval": facts[sid].interval if sid in facts else "",
            "rows": facts[sid].num_rows if sid in facts else 0,
            "bytes": facts[sid].size_bytes if sid in facts else 0,
            "now": hidden_now[sid],
        }
        for sid in ids
    ]
    return CommitChange(listed, len(hidden_now), shown_before, shown_after)


def commit_entry(*, datasource: str, seq: int) -> CommitLogEntry | None:
    """One commit with its user and its task's submitter, or None."""
    return (
        CommitLogEntry.objects.select_related("user", "task__submitted_by")
        .filter(datasource=datasource, seq=seq)
        .first()
    )


def commit_before(*, datasource: str, seq: int) -> int | None:
    """The seq of the dataSource's commit just before `seq`, or None."""
    return (
        CommitLogEntry.objects.filter(datasource=datasource, seq__lt=seq)
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )


def commit_after(*, datasource: str, seq: int) -> int | None:
    """The seq of the dataSource's commit just after `seq`, or None."""
    return (
        CommitLogEntry.objects.filter(datasource=datasource, seq__gt=seq)
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )


# Past this many commits after the one wanted, which segments were used then is
# read from the checkpoint before it instead of undoing those commits.
UNDO_MAX = 2_000


def state_around(*, datasource: str, as_of: int, interval: Interval) -> TimelineState:
    """The timeline state as of commit `as_of` of the segments that decide what
    shows in `interval`: those overlapping it, and those overlapping them. The
    visibility of the chunks overlapping `interval` is the whole timeline's (a
    segment's depends only on the segments overlapping it); chunks further out
    may lack their neighbours and are not to be read. Its cost grows with the
    segments there, not with the dataSource's history."""
    undo = _commits_after(datasource, as_of)
    near = _used_as_of(datasource, as_of, _rows_overlapping(datasource, interval), undo)
    if near:
        hull = Interval(
            min(interval.start, *(r.interval.start for r in near)),
            max(interval.end, *(r.interval.end for r in near)),
        )
        if hull != interval:
            near = _used_as_of(datasource, as_of, _rows_overlapping(datasource, hull), undo)
    return state_of(Timeline.build(near), as_of)


def _rows_overlapping(datasource: str, interval: Interval) -> dict[str, tuple[SegmentRef, bool]]:
    """id -> (ref, used now) of every segment row overlapping `interval`."""
    qs = overlapping(Segment.objects.filter(datasource__name=datasource), interval)
    rows = list(qs.order_by().values_list(*REF_COLUMNS, "used"))
    refs = refs_from_rows(r[:-1] for r in rows)
    return {ref.id: (ref, r[-1]) for ref, r in zip(refs, rows, strict=True)}


def _commits_after(datasource: str, seq: int) -> list[tuple[list, list]] | None:
    """(added, removed) of the commits after `seq`, newest first; None past UNDO_MAX."""
    entries = list(
        CommitLogEntry.objects.filter(datasource=datasource, seq__gt=seq)
        .order_by("-seq")
        .values_list("added", "removed")[: UNDO_MAX + 1]
    )
    return None if len(entries) > UNDO_MAX else entries


def _used_as_of(
    datasource: str, as_of: int, rows: dict[str, tuple[SegmentRef, bool]], undo
) -> list[SegmentRef]:
    """The refs of `rows` used right after commit `as_of`: those used now with the
    commits after it undone, newest first (or, past UNDO_MAX of them, as the
    checkpoint before it and the log after that say). A killed segment has no row."""
    if undo is None:
        used = used_ids_as_of(datasource=datasource, as_of=as_of)
        return [ref for sid, (ref, _) in rows.items() if sid in used]
    now = {sid for sid, (_, is_used) in rows.items() if is_used}
    for added, removed in undo:
        now.difference_update(added or ())
        now.update(sid for sid in removed or () if sid in rows)
    return [ref for sid, (ref, _) in rows.items() if sid in now]
