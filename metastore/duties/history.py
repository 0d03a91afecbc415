"""History retention (pure core: no Django, no Spark).

Time travel (`as_of`) shows the timeline right after a commit. Overshadowed
segments stay used while a retained commit (one within the history retention,
default 7 days) may still show them; after that the duty marks them unused, and
only then may kill delete them. "Shows" is decided by replaying the retained
commits over the timeline of the oldest one: a segment is protected if it is
visible, wholly or partly, right after any of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from metastore.intervals import ETERNITY
from metastore.timeline import SegmentRef, Timeline

__all__ = ["Change", "visible_in_any_state", "overshadowed_to_unuse"]


@dataclass(frozen=True)
class Change:
    """One commit: the segments it made used and the ids it made unused (or killed)."""

    added: Sequence[SegmentRef]
    removed: Sequence[str]


def visible_in_any_state(base: Iterable[SegmentRef], changes: Iterable[Change]) -> set[str]:
    """Ids of the segments visible right after the base commit (whose used
    segments are `base`) or right after any of the commits `changes` that follow
    it, in commit order."""
    timeline = Timeline.build(base)
    seen = {ref.id for _, ref in timeline.lookup(ETERNITY)}
    for change in changes:
        touched = []
        for seg_id in change.removed:
            ref = timeline.get(seg_id)
            if ref is not None:
                timeline.remove(seg_id)
                touched.append(ref.interval)
        for ref in change.added:
            if ref.id not in timeline:
                timeline.add(ref)
                touched.append(ref.interval)
        # Only where a commit changed something can what is visible have changed.
        for interval in touched:
            seen.update(ref.id for _, ref in timeline.lookup(interval))
    return seen


def overshadowed_to_unuse(current: Timeline, protected: set[str]) -> list[str]:
    """The used segments that newer data overshadows everywhere now (Druid's
    MarkOvershadowedSegmentsAsUnused) and that no retained commit shows. A segment
    hidden only because its own chunk is incomplete is left alone: nothing
    replaces it, and marking its chunk's missing partition used again shows it."""
    out = []
    for seg_id in sorted(current.fully_overshadowed()):
        if seg_id not in protected and current.overshadowed_by(seg_id):
            out.append(seg_id)
    return out
