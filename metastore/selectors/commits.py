"""The commit log: its entries, and what one commit did to the visible data."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Max, Min, QuerySet

from metastore.intervals import Interval
from metastore.models import CommitLogEntry, Segment
from metastore.selectors.states import TimelineState
from metastore.selectors.visibility import SHOWN, Tally, visibility_counts


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
