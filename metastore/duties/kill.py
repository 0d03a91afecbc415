"""The kill duty's decisions (pure core): Druid's `druid.coordinator.kill.*`.

Each run, per dataSource, the oldest unused segments that are eligible form one
kill task (at most `maxSegments`, over their umbrella interval), as Druid's
KillUnusedSegments does. A segment is eligible when:

- its interval ends at or before `now - durationToRetain` (unless
  `ignoreDurationToRetain`; the period may be negative, as in Druid);
- it was marked unused at or before `now - bufferPeriod` (Druid #5305: an
  accidental disable does not wipe data at once), and before the oldest
  retained commit, so no retained `as_of` shows it (history retention);
- its interval overlaps no interval a running task holds a lock on (a task may
  still read it, or carry it onto a new version: Druid #19737).

A kill task's umbrella interval spans at most `maxInterval` (P30D; P0D: no
limit) from its first segment's start (a single longer segment goes alone);
only dataSources in `killDataSourceWhitelist` are killed (empty: all), and
the duty's kill tasks together take at most `killTaskSlotRatio` of the task
slots, at most `maxKillTaskSlots`, at least one (`kill_slot_budget`).

The kill task gets the same cutoff as `maxUsedStatusLastUpdatedTime`, so a
segment marked unused after the decision is never deleted by it (Druid #15710).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from metastore.duties.periods import Period
from metastore.intervals import Interval

__all__ = ["KillConfig", "UnusedSegment", "KillPlan", "kill_slot_budget", "plan_kill"]


@dataclass(frozen=True)
class KillConfig:
    """Druid's defaults: off, P90D retained, P30D buffer, 100 segments a task."""

    on: bool = False
    duration_to_retain: Period = Period(days=90, text="P90D")
    ignore_duration_to_retain: bool = False
    buffer_period: Period = Period(days=30, text="P30D")
    max_segments: int = 100
    max_interval: Period | None = Period(days=30, text="P30D")  # None: P0D, no limit
    datasources: tuple[str, ...] = ()  # killDataSourceWhitelist; empty: every dataSource
    task_slot_ratio: float = 0.1
    max_task_slots: int = 2_147_483_647

    def __post_init__(self) -> None:
        if self.max_segments < 1:
            raise ValueError(f"kill maxSegments must be 1 or more, not {self.max_segments}")
        if not 0.0 <= self.task_slot_ratio <= 1.0:
            raise ValueError(f"killTaskSlotRatio must be from 0 to 1, not {self.task_slot_ratio}")
        if self.max_task_slots < 1:
            raise ValueError(f"maxKillTaskSlots must be 1 or more, not {self.max_task_slots}")

    def kills(self, datasource: str) -> bool:
        """`killDataSourceWhitelist`: an empty list means every dataSource."""
        return not self.datasources or datasource in self.datasources


def kill_slot_budget(config: KillConfig, total_slots: int) -> int:
    """How many duty kill tasks may be active at once (Druid's kill task capacity,
    but at least one, so that a small cluster's kill duty is not silently idle)."""
    return max(1, min(int(total_slots * config.task_slot_ratio), config.max_task_slots))


@dataclass(frozen=True)
class UnusedSegment:
    id: str
    interval: Interval
    unused_since: datetime  # used_status_updated_at


@dataclass(frozen=True)
class KillPlan:
    interval: Interval  # the umbrella interval of the chosen segments
    segment_ids: tuple[str, ...]
    max_used_status_last_updated: datetime  # the kill task's cutoff
    limit: int


def plan_kill(
    *,
    config: KillConfig,
    now: datetime,
    unused: Iterable[UnusedSegment],
    history_starts: datetime,
    locked: Sequence[Interval] = (),
) -> KillPlan | None:
    """The next kill task for one dataSource, or None. `history_starts` is the
    time of the oldest retained commit: segments marked unused later may still be
    shown by time travel."""
    cutoff = min(config.buffer_period.before(now), history_starts)
    retain_end = None if config.ignore_duration_to_retain else config.duration_to_retain.before(now)
    eligible = sorted(
        (
            seg
            for seg in unused
            if seg.unused_since <= cutoff and (retain_end is None or seg.interval.end <= retain_end)
        ),
        key=lambda seg: (seg.interval.start, seg.interval.end, seg.id),
    )
    chosen: list[UnusedSegment] = []
    umbrella: Interval | None = None
    for seg in eligible:
        wider = seg.interval if umbrella is None else _span(umbrella, seg.interval)
        if umbrella is not None and _too_wide(config, wider):
            break  # maxInterval: the rest waits for the next kill task
        if any(wider.overlaps(lock) for lock in locked):
            if umbrella is None:
                continue  # this one is locked: try the next
            break  # the kill task's lock would wait on a running task
        chosen.append(seg)
        umbrella = wider
        if len(chosen) >= config.max_segments:
            break
    if umbrella is None:
        return None
    return KillPlan(umbrella, tuple(s.id for s in chosen), cutoff, config.max_segments)


def _too_wide(config: KillConfig, umbrella: Interval) -> bool:
    limit = config.max_interval
    return limit is not None and umbrella.end > limit.add_to(umbrella.start)


def _span(a: Interval, b: Interval) -> Interval:
    return Interval(min(a.start, b.start), max(a.end, b.end))
