"""Retention rules (audited), rule drops and history retention: writes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from metastore import selectors
from metastore.duties import history
from metastore.duties.retention import (
    DropPlan,
    Rule,
    RuleError,
    parse_rules,
    plan_drops,
    rules_json,
)
from metastore.intervals import Interval
from metastore.models import CommitLogEntry, RetentionRules, RetentionRulesAudit, Segment
from metastore.selectors import retention as retention_selectors
from metastore.services._common import datasource_for_update
from metastore.services.segments import segments_mark_used


def rules_set(
    *,
    datasource: str,
    rules: object,
    author: str = "",
    comment: str = "",
    ip: str = "",
    user=None,
) -> list[Rule]:
    """Replace a dataSource's (or `_default`'s) rules with `rules` (Druid's JSON
    array) and record who, why and from where. An invalid list raises
    `RuleError` naming the field, and nothing is stored. A dataSource that does
    not exist yet may have rules, as in Druid."""
    _check_text("dataSource", datasource, 255)
    _check_text("author", author, 255)
    _check_text("comment", comment, 10_000)
    _check_text("ip", ip, 64)
    parsed = parse_rules(rules)
    payload = rules_json(parsed)
    person = user if user is not None and getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        RetentionRules.objects.update_or_create(datasource=datasource, defaults={"rules": payload})
        RetentionRulesAudit.objects.create(
            key=datasource,
            payload=payload,
            author=author or (person.get_username() if person else ""),
            comment=comment,
            ip=ip,
            user=person,
        )
    return parsed


def _check_text(field: str, value: str, limit: int) -> None:
    """Text the metastore can store: at most `limit` characters, no NUL."""
    if len(value) > limit:
        raise RuleError(field, f"at most {limit} characters, got {len(value)}")
    if "\x00" in value:
        raise RuleError(field, "must not contain NUL characters")


@dataclass(frozen=True)
class RetentionRun:
    plan: DropPlan
    entry: CommitLogEntry | None


def _drop_note(plan: DropPlan) -> str:
    rules = {d.rule_index: d for d in plan.drops}
    named = "; ".join(
        f"rule {i + 1}{' (_default)' if d.from_default else ''} {d.rule.describe()}"
        for i, d in sorted(rules.items())
    )
    return f"retention rules dropped {len(plan.drops)} segments: {named}"


def retention_apply(*, datasource: str, now: datetime | None = None) -> RetentionRun:
    """Run the dataSource's rules (then the `_default` rules) over its used
    segments at `now` and mark the ones a drop rule matches first unused: one
    commit, under the dataSource's lock (so the rules see exactly what is used)."""
    now = now or timezone.now()
    with transaction.atomic():
        ds = datasource_for_update(datasource)
        rules = retention_selectors.rules_of(datasource=ds.name)
        defaults = retention_selectors.default_rules()
        used = Segment.objects.filter(datasource=ds, used=True).values_list("id", "start", "end")
        plan = plan_drops(
            rules=rules,
            default_rules=defaults,
            now=now,
            segments=((sid, Interval(start, end)) for sid, start, end in used),
        )
        entry = None
        if plan.drops:
            entry = segments_mark_used(
                datasource=ds.name, used=False, segment_ids=plan.segment_ids, note=_drop_note(plan)
            )
        return RetentionRun(plan, entry)


def history_apply(*, datasource: str, now: datetime | None = None) -> CommitLogEntry | None:
    """Mark unused the overshadowed segments no retained commit shows any more
    (history retention, STRATA_HISTORY_RETENTION): one commit, or None.

    The replay is computed without holding the dataSource's lock (publishes
    go on meanwhile); the commit is written only if no commit landed since,
    else the next round decides again."""
    seen = selectors.last_commit_seq(datasource=datasource)
    horizon = retention_selectors.history_horizon(datasource=datasource, now=now)
    if not horizon.seq:
        return None
    base, changes = retention_selectors.retained_states(datasource=datasource, horizon=horizon)
    protected = history.visible_in_any_state(base, changes)
    current = selectors.timeline_for(datasource=datasource)
    doomed = history.overshadowed_to_unuse(current, protected)
    if not doomed:
        return None
    with transaction.atomic():
        ds = datasource_for_update(datasource)
        if selectors.last_commit_seq(datasource=ds.name) != seen:
            return None
        return segments_mark_used(
            datasource=ds.name,
            used=False,
            segment_ids=doomed,
            note=(
                f"history retention ({horizon.retention}): {len(doomed)} overshadowed segments "
                f"no commit since {horizon.seq} shows"
            ),
        )
