"""Reads for retention rules, history retention and kill (shared by the Druid API,
the console, the duties and the services)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Min
from django.utils import timezone

from metastore.duties.history import Change
from metastore.duties.kill import UnusedSegment
from metastore.duties.periods import Period
from metastore.duties.retention import (
    DEFAULT_KEY,
    DEFAULT_RULES,
    Rule,
    parse_rules,
    plan_drops,
    rules_json,
)
from metastore.intervals import Interval, format_ts
from metastore.models import (
    ACTIVE_STATUSES,
    CommitKind,
    CommitLogEntry,
    RetentionRules,
    RetentionRulesAudit,
    Segment,
    TaskLock,
)
from metastore.selectors.timeline import last_commit_seq, segment_refs, timeline_for
from metastore.timeline import SegmentRef

# --- rules ---------------------------------------------------------------------------


def rules_stored(*, datasource: str) -> list[dict] | None:
    """The rules stored for a dataSource (or `_default`), None if never set."""
    row = RetentionRules.objects.filter(datasource=datasource).values_list("rules").first()
    return row[0] if row else None


def default_rules() -> list[Rule]:
    """The `_default` rules: what was set, or Druid's own default (loadForever)."""
    stored = rules_stored(datasource=DEFAULT_KEY)
    return list(DEFAULT_RULES) if stored is None else parse_rules(stored)


def rules_of(*, datasource: str) -> list[Rule]:
    stored = rules_stored(datasource=datasource)
    return parse_rules(stored) if stored else []


def rules_map() -> dict[str, list[dict]]:
    """Every dataSource's rules by name, `_default` included (Druid's GET /rules)."""
    out = {DEFAULT_KEY: rules_json(DEFAULT_RULES)}
    out.update(RetentionRules.objects.order_by("datasource").values_list("datasource", "rules"))
    return out


def rules_history(
    *, key: str | None = None, interval: Interval | None = None, count: int | None = None
):
    """Audit entries of rule changes, oldest first: of one key or all; within
    `interval`, or the newest `count`."""
    qs = RetentionRulesAudit.objects.all()
    if key is not None:
        qs = qs.filter(key=key)
    if count is not None:
        return list(reversed(qs.order_by("-created_at", "-id")[:count]))
    if interval is not None:
        qs = qs.filter(created_at__gte=interval.start, created_at__lt=interval.end)
    return list(qs.order_by("created_at", "id"))


# --- history retention -------------------------------------------------------------------


def history_retention() -> Period:
    """STRATA_HISTORY_RETENTION (an ISO-8601 period; default P7D)."""
    return Period.parse(settings.STRATA_HISTORY_RETENTION)


@dataclass(frozen=True)
class Horizon:
    """The oldest retained commit of a dataSource: time travel to it and later
    works; to an older commit of that dataSource is refused."""

    seq: int
    at: datetime | None
    retention: Period


def history_horizon(*, datasource: str, now: datetime | None = None) -> Horizon:
    """The oldest of: the first commit within the retention, the latest commit
    (the present is always kept), and every commit a running task reads as of
    (its locks' grant points)."""
    retention = history_retention()
    now = now or timezone.now()
    cutoff = retention.before(now)
    commits = CommitLogEntry.objects.filter(datasource=datasource)
    in_window = commits.filter(created_at__gte=cutoff).aggregate(s=Min("seq"))["s"]
    seq = in_window or last_commit_seq(datasource=datasource)
    read_points = TaskLock.objects.filter(
        datasource=datasource, task__status__in=ACTIVE_STATUSES, granted_seq__gt=0
    ).aggregate(s=Min("granted_seq"))["s"]
    if read_points is not None and read_points < seq:
        seq = read_points
    at = commits.filter(seq=seq).values_list("created_at", flat=True).first()
    return Horizon(seq, at, retention)


def killed_floor(*, datasource: str, after: int) -> tuple[int, int] | None:
    """(U, K): the newest commit U after `after` that made unused a segment a
    later kill K deleted (a kill task submitted by hand: the kill duty deletes
    nothing a retained commit shows). Time travel before U would show that
    segment, and its file is gone; None when no such kill happened."""
    kills = list(
        CommitLogEntry.objects.filter(
            datasource=datasource, kind=CommitKind.KILL, seq__gt=after
        ).values_list("seq", "removed")
    )
    if not kills:
        return None
    killed = {sid: seq for seq, removed in kills for sid in removed or ()}
    unmarks = CommitLogEntry.objects.filter(
        datasource=datasource, seq__gt=after, seq__lt=max(seq for seq, _ in kills)
    ).exclude(kind=CommitKind.KILL)
    if connection.vendor == "postgresql":  # only entries naming a killed id
        unmarks = unmarks.filter(removed__has_any_keys=list(killed))
    for seq, removed in unmarks.order_by("-seq").values_list("seq", "removed"):
        hit = next((sid for sid in removed or () if killed.get(sid, 0) > seq), None)
        if hit is not None:
            return seq, killed[hit]
    return None


def as_of_refusal(*, datasource: str, as_of: int, now: datetime | None = None) -> str | None:
    """Why time travel to `as_of` is refused for this dataSource, or None: its
    commits up to there are older than the history retained, or a kill since
    deleted segments that time would show."""
    horizon = history_horizon(datasource=datasource, now=now)
    if as_of >= horizon.seq:
        floor = killed_floor(datasource=datasource, after=as_of)
        if floor is None:
            return None
        return (
            f"as_of {as_of} would show segments of {datasource} that kill commit {floor[1]} "
            f"deleted: the oldest commit time travel can show is {floor[0]}"
        )
    if not CommitLogEntry.objects.filter(datasource=datasource, seq__lte=as_of).exists():
        return None  # before the dataSource's first commit: nothing was there
    when = f" ({format_ts(horizon.at)})" if horizon.at else ""
    return (
        f"as_of {as_of} is older than the history kept for {datasource} "
        f"(STRATA_HISTORY_RETENTION {horizon.retention}): the oldest retained commit "
        f"is {horizon.seq}{when}"
    )


def retained_states(*, datasource: str, horizon: Horizon) -> tuple[list[SegmentRef], list[Change]]:
    """The used segments right after the horizon commit, and every commit of the
    dataSource after it (for `metastore.duties.history.visible_in_any_state`)."""
    base = list(timeline_for(datasource=datasource, as_of=horizon.seq).segments())
    entries = list(
        CommitLogEntry.objects.filter(datasource=datasource, seq__gt=horizon.seq)
        .order_by("seq")
        .values_list("added", "removed")
    )
    refs = segment_refs(
        datasource=datasource, ids={sid for added, _ in entries for sid in added or ()}
    )
    changes = [
        Change([refs[sid] for sid in added or () if sid in refs], list(removed or ()))
        for added, removed in entries
    ]
    return base, changes


# --- kill ---------------------------------------------------------------------------------


def unused_segments(*, datasource: str, ended_by: datetime | None = None) -> list[UnusedSegment]:
    qs = Segment.objects.filter(datasource__name=datasource, used=False)
    if ended_by is not None:
        qs = qs.filter(end__lte=ended_by)
    return [
        UnusedSegment(sid, Interval(start, end), since)
        for sid, start, end, since in qs.values_list("id", "start", "end", "used_status_updated_at")
    ]


def locked_intervals(*, datasource: str) -> list[Interval]:
    """Intervals that tasks not yet ended hold locks on."""
    return [
        Interval(start, end)
        for start, end in TaskLock.objects.filter(
            datasource=datasource, task__status__in=ACTIVE_STATUSES
        ).values_list("start", "end")
    ]


# --- the console's preview -------------------------------------------------------------


@dataclass(frozen=True)
class DropPreview:
    """What a rule list would drop now: segments, rows, bytes, merged intervals,
    and per rule how many segments it matched first; plus what no rule matches."""

    segments: int
    rows: int
    size_bytes: int
    intervals: list[Interval]
    by_rule: list[tuple[str, int]]
    unmatched: int


def drop_preview(*, datasource: str, rules: list[Rule], now: datetime | None = None) -> DropPreview:
    used = list(
        Segment.objects.filter(datasource__name=datasource, used=True).values_list(
            "id", "start", "end", "num_rows", "size_bytes"
        )
    )
    facts = {sid: (rows, size) for sid, _, _, rows, size in used}
    plan = plan_drops(
        rules=rules,
        default_rules=default_rules(),
        now=now or timezone.now(),
        segments=((sid, Interval(start, end)) for sid, start, end, _, _ in used),
    )
    counts: dict[int, tuple[str, int]] = {}
    for drop in plan.drops:
        label = f"{drop.rule_index + 1}. {drop.rule.describe()}" + (
            " (_default)" if drop.from_default else ""
        )
        counts[drop.rule_index] = (label, counts.get(drop.rule_index, (label, 0))[1] + 1)
    return DropPreview(
        segments=len(plan.drops),
        rows=sum(facts[d.segment_id][0] for d in plan.drops),
        size_bytes=sum(facts[d.segment_id][1] for d in plan.drops),
        intervals=_merged(sorted(d.interval for d in plan.drops)),
        by_rule=[counts[i] for i in sorted(counts)],
        unmatched=len(plan.unmatched),
    )


def _merged(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for interval in intervals:
        if out and interval.start <= out[-1].end:
            if interval.end > out[-1].end:
                out[-1] = Interval(out[-1].start, interval.end)
        else:
            out.append(interval)
    return out
