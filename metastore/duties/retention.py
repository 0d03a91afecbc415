"""Druid's retention rules (pure core: no Django, no Spark).

A dataSource's rules, followed by the `_default` rules, are read in order; each
used segment matches the first rule that applies to its interval at the
reference time (`now`), and a segment that matches a drop rule is dropped
(marked unused: a commit). A segment no rule matches is left alone, as Druid
leaves it (with an alert there; a count here).

How each rule type applies to a segment interval, as Druid's rule classes
decide it (`Rules.eligibleForLoad`, `PeriodDropRule`, `PeriodDropBeforeRule`,
`IntervalDropRule`), `window` being `[now - period, now)`:

| type | applies when |
|---|---|
| loadForever, dropForever, broadcastForever | always |
| loadByInterval, broadcastByInterval | the rule's interval overlaps the segment's |
| dropByInterval | the rule's interval contains the segment's |
| loadByPeriod, broadcastByPeriod | includeFuture: the segment ends after the window starts; else it overlaps the window |
| dropByPeriod | includeFuture: the segment starts at or after the window start; else the window contains it |
| dropBeforeByPeriod | the segment ends at or before the window start |

Strata has no historicals, tiers or brokers to load onto: `tieredReplicants`,
`useDefaultTierForNull` and `colocatedDataSources` are accepted, validated as
Druid validates them, and echoed back, but mean nothing here; a load or
broadcast rule only means "keep".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from metastore.duties.periods import Period, PeriodError
from metastore.intervals import Interval

__all__ = [
    "DEFAULT_KEY",
    "DEFAULT_RULES",
    "RULE_TYPES",
    "Rule",
    "RuleError",
    "Drop",
    "parse_rules",
    "rules_json",
    "first_match",
    "plan_drops",
]

DEFAULT_KEY = "_default"  # Druid's druid.manager.rules.defaultRule
DEFAULT_TIER = "_default_tier"
DEFAULT_REPLICANTS = 2

_LOAD = ("loadForever", "loadByInterval", "loadByPeriod")
_DROP = ("dropForever", "dropByInterval", "dropByPeriod", "dropBeforeByPeriod")
_BROADCAST = ("broadcastForever", "broadcastByInterval", "broadcastByPeriod")
RULE_TYPES = (*_LOAD, *_DROP, *_BROADCAST)

_WITH_INTERVAL = ("loadByInterval", "dropByInterval", "broadcastByInterval")
_WITH_PERIOD = ("loadByPeriod", "dropByPeriod", "dropBeforeByPeriod", "broadcastByPeriod")
_WITH_FUTURE = ("loadByPeriod", "dropByPeriod", "broadcastByPeriod")
# Fields each rule may carry besides `type` (anything else is refused, by name).
_LOAD_FIELDS = ("tieredReplicants", "useDefaultTierForNull", "allowEmptyTieredReplicants")
_FIELDS = {
    "loadForever": _LOAD_FIELDS,
    "loadByInterval": ("interval", *_LOAD_FIELDS),
    "loadByPeriod": ("period", "includeFuture", *_LOAD_FIELDS),
    "dropForever": (),
    "dropByInterval": ("interval",),
    "dropByPeriod": ("period", "includeFuture"),
    "dropBeforeByPeriod": ("period",),
    "broadcastForever": ("colocatedDataSources",),
    "broadcastByInterval": ("interval", "colocatedDataSources"),
    "broadcastByPeriod": ("period", "includeFuture", "colocatedDataSources"),
}


class RuleError(ValueError):
    """A rule list is invalid; `field` names the offending field, e.g. `[1].period`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Rule:
    """One validated rule; `extra` keeps the tier fields Druid would echo."""

    type: str
    interval: Interval | None = None
    period: Period | None = None
    include_future: bool = True
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def is_drop(self) -> bool:
        return self.type in _DROP

    def window_start(self, now: datetime) -> datetime:
        assert self.period is not None
        return self.period.before(now)

    def applies_to(self, interval: Interval, now: datetime) -> bool:
        """Whether the rule applies to a segment of `interval` at reference time `now`."""
        kind = self.type
        if kind.endswith("Forever"):
            return True
        if kind in _WITH_INTERVAL:
            assert self.interval is not None
            if kind == "dropByInterval":
                return _contains(self.interval, interval)
            return _overlaps(self.interval, interval)
        start = self.window_start(now)
        if kind == "dropBeforeByPeriod":
            return interval.end <= start
        if kind == "dropByPeriod":
            if self.include_future:
                return start <= interval.start
            return _contains(Interval(start, now), interval)
        # loadByPeriod, broadcastByPeriod: Joda's overlap of [start, now) with the segment.
        if self.include_future:
            return start < interval.end
        return _overlaps(Interval(start, now), interval)

    def to_json(self) -> dict:
        """The rule as Druid serializes it (`GET /druid/coordinator/v1/rules`)."""
        out: dict = {"type": self.type}
        if self.interval is not None:
            out["interval"] = str(self.interval)
        if self.period is not None:
            out["period"] = str(self.period)
        if self.type in _WITH_FUTURE:
            out["includeFuture"] = self.include_future
        out.update(self.extra)
        return out

    def describe(self) -> str:
        """Short text for people: `dropByPeriod P1M (includeFuture)`."""
        parts = [self.type]
        if self.interval is not None:
            parts.append(str(self.interval))
        if self.period is not None:
            parts.append(str(self.period))
        if self.type in _WITH_FUTURE:
            parts.append("(includeFuture)" if self.include_future else "(excluding future)")
        return " ".join(parts)


def _contains(outer: Interval, inner: Interval) -> bool:
    """Joda's `Interval.contains`: `inner` starts inside `outer` and ends by its end."""
    return outer.start <= inner.start < outer.end and inner.end <= outer.end


def _overlaps(a: Interval, b: Interval) -> bool:
    """Joda's `Interval.overlaps`: a zero-length interval overlaps nothing, except
    one inside the other (abuts do not overlap)."""
    if a.start == a.end or b.start == b.end:
        if a.start == a.end and b.start == b.end:
            return False
        point, other = (a, b) if a.start == a.end else (b, a)
        return other.start < point.start < other.end
    return a.start < b.end and b.start < a.end


# --- parsing -------------------------------------------------------------------------


def parse_rules(data: object) -> list[Rule]:
    """A JSON array of rule objects -> validated rules; RuleError naming the field."""
    if not isinstance(data, list):
        raise RuleError("(body)", "give a JSON array of rule objects (it may be empty)")
    return [_parse_rule(item, f"[{i}]") for i, item in enumerate(data)]


def _parse_rule(item: object, where: str) -> Rule:
    if not isinstance(item, dict):
        raise RuleError(where, "each rule must be a JSON object with a `type`")
    kind = item.get("type")
    if kind not in RULE_TYPES:
        raise RuleError(
            f"{where}.type",
            f"unknown rule type {kind!r}; known types: {', '.join(RULE_TYPES)}",
        )
    allowed = _FIELDS[kind]
    unknown = sorted(set(item) - {"type", *allowed})
    if unknown:
        shown = ", ".join(allowed) if allowed else "none besides type"
        raise RuleError(f"{where}.{unknown[0]}", f"is not a field of {kind} (fields: {shown})")
    interval = _interval(item, where) if kind in _WITH_INTERVAL else None
    period = _period(item, where) if kind in _WITH_PERIOD else None
    future = _include_future(item, where) if kind in _WITH_FUTURE else True
    extra = _tier_fields(item, where) if kind in _LOAD else _broadcast_fields(item, where)
    return Rule(kind, interval, period, future, extra)


def _interval(item: dict, where: str) -> Interval:
    value = item.get("interval")
    if value is None:
        raise RuleError(
            f"{where}.interval", f"{item['type']} needs an interval, e.g. 2012-01-01/2013-01-01"
        )
    try:
        if not isinstance(value, str) or value.count("/") != 1:
            return Interval.parse(value)
        return Interval.parse("/".join(_instant(part.strip()) for part in value.split("/")))
    except ValueError as exc:
        raise RuleError(f"{where}.interval", f"malformed interval: {exc}") from None


def _instant(text: str) -> str:
    """Joda's partial instants as Druid reads them: `2012` and `2012-03` start that year or month."""
    if len(text) == 4 and text.isdigit():
        return f"{text}-01-01"
    if len(text) == 7 and text[:4].isdigit() and text[4] == "-" and text[5:].isdigit():
        return f"{text}-01"
    return text


def _period(item: dict, where: str) -> Period:
    value = item.get("period")
    if value is None:
        raise RuleError(f"{where}.period", f"{item['type']} needs a period, e.g. P1M")
    try:
        period = Period.parse(value)
    except PeriodError as exc:
        raise RuleError(f"{where}.period", f"malformed period: {exc}") from None
    if period.is_negative():
        raise RuleError(f"{where}.period", f"{value!r} is negative; give a period such as P1M")
    return period


def _boolean(item: dict, key: str, where: str, default: bool) -> bool:
    value = item.get(key)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"  # Jackson reads "true" as true
    if not isinstance(value, bool):
        raise RuleError(f"{where}.{key}", "must be true or false")
    return value


def _include_future(item: dict, where: str) -> bool:
    return _boolean(item, "includeFuture", where, True)


def _tier_fields(item: dict, where: str) -> dict:
    """Druid's LoadRule: `tieredReplicants` (tier -> replicas, each 0 or more),
    defaulting to {"_default_tier": 2} unless `useDefaultTierForNull` is false
    (`allowEmptyTieredReplicants: true` is its older spelling)."""
    use_default = _boolean(item, "useDefaultTierForNull", where, True)
    if _boolean(item, "allowEmptyTieredReplicants", where, False):
        use_default = False
    tiers = item.get("tieredReplicants")
    if tiers is None:
        tiers = {DEFAULT_TIER: DEFAULT_REPLICANTS} if use_default else {}
    if not isinstance(tiers, dict):
        raise RuleError(f"{where}.tieredReplicants", "must be an object of tier name -> replicas")
    for tier, count in tiers.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise RuleError(
                f"{where}.tieredReplicants.{tier}",
                f"replicas must be 0 or a positive integer, got {count!r}",
            )
    out: dict = {"tieredReplicants": dict(tiers)}
    if not use_default:
        out["useDefaultTierForNull"] = False
    return out


def _broadcast_fields(item: dict, where: str) -> dict:
    value = item.get("colocatedDataSources")
    if value is None:
        return {}
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RuleError(f"{where}.colocatedDataSources", "must be an array of dataSource names")
    return {"colocatedDataSources": list(value)}


def rules_json(rules: Iterable[Rule]) -> list[dict]:
    return [rule.to_json() for rule in rules]


# The rules Druid applies when none are configured: keep everything.
DEFAULT_RULES = (
    Rule("loadForever", extra={"tieredReplicants": {DEFAULT_TIER: DEFAULT_REPLICANTS}}),
)


# --- evaluation ---------------------------------------------------------------------------


def first_match(rules: Sequence[Rule], interval: Interval, now: datetime) -> int | None:
    """The index of the first rule that applies to `interval` at `now`, or None."""
    for index, rule in enumerate(rules):
        if rule.applies_to(interval, now):
            return index
    return None


@dataclass(frozen=True)
class Drop:
    """A segment a drop rule matches: its id, interval, and the rule (with its
    position in the effective list: the dataSource's rules, then the defaults)."""

    segment_id: str
    interval: Interval
    rule: Rule
    rule_index: int
    from_default: bool


@dataclass(frozen=True)
class DropPlan:
    drops: tuple[Drop, ...]
    unmatched: tuple[str, ...]  # ids no rule matched (left alone, as Druid leaves them)

    @property
    def segment_ids(self) -> list[str]:
        return [d.segment_id for d in self.drops]


def plan_drops(
    *,
    rules: Sequence[Rule],
    default_rules: Sequence[Rule],
    now: datetime,
    segments: Iterable[tuple[str, Interval]],
) -> DropPlan:
    """Which of the used `segments` ((id, interval) pairs) the effective rules
    (`rules`, then `default_rules`) drop at `now`, each with the rule that
    matched first; and the ids no rule matched."""
    effective = [*rules, *default_rules]
    drops, unmatched = [], []
    for seg_id, interval in segments:
        index = first_match(effective, interval, now)
        if index is None:
            unmatched.append(seg_id)
        elif effective[index].is_drop:
            rule = effective[index]
            drops.append(Drop(seg_id, interval, rule, index, index >= len(rules)))
    return DropPlan(tuple(drops), tuple(unmatched))
