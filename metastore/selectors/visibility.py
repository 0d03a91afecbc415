"""Reads for the console's lists and summaries: counts taken from the timeline, so
that a page's numbers agree with what the timeline draws and what SQL returns.

A segment is counted by what the timeline makes of it: `visible` (all its
interval is served), `partial` (part of it is: SQL reads some of its rows),
`overshadowed` (none is), `incomplete` (its chunk lacks core partitions, so
none is served either). Rows and bytes are the segments' own; for a partial
segment only SQL knows how many of its rows show, so partial ones are kept apart."""

from __future__ import annotations

from dataclasses import dataclass, field

from metastore.intervals import Interval
from metastore.models import Segment
from metastore.selectors.segments import segment_facts
from metastore.selectors.states import state_rows
from metastore.timeline_view import TimelineState

STATES = ("visible", "partial", "overshadowed", "incomplete")
SHOWN = ("visible", "partial")  # what a query reads from


@dataclass
class Tally:
    segments: int = 0
    rows: int = 0
    bytes: int = 0

    def add(self, segments: int, rows: int, size: int) -> None:
        self.segments += segments
        self.rows += rows
        self.bytes += size


@dataclass
class VisibilityCounts:
    """Segments, rows and bytes by visibility (see the module's docstring)."""

    visible: Tally = field(default_factory=Tally)
    partial: Tally = field(default_factory=Tally)
    overshadowed: Tally = field(default_factory=Tally)
    incomplete: Tally = field(default_factory=Tally)

    def of(self, state: str) -> Tally:
        return getattr(self, state)

    def total(self, states: tuple[str, ...]) -> Tally:
        out = Tally()
        for s in states:
            t = self.of(s)
            out.add(t.segments, t.rows, t.bytes)
        return out

    @property
    def shown(self) -> Tally:
        """Visible and partial together: the segments a query reads from."""
        return self.total(SHOWN)

    @property
    def hidden(self) -> Tally:
        """Overshadowed and incomplete together: used, but no query reads them."""
        return self.total(("overshadowed", "incomplete"))


def visibility_counts(
    *, datasource: str, state: TimelineState, interval: Interval | None = None
) -> VisibilityCounts:
    """Counts of the used segments of `state` (of the chunks overlapping `interval`,
    if given). Rows and bytes per chunk come from the state's per-chunk sums; only
    chunks whose segments differ in visibility are read segment by segment."""
    if interval is None:
        # The whole dataSource's counts are kept with the state (one per commit): a
        # dataSource whose chunks mix visible and overshadowed segments would
        # otherwise read every segment's rows again on every page.
        cached = getattr(state, "_strata_visibility_counts", None)
        if cached is None:
            cached = _visibility_counts(datasource=datasource, state=state, interval=None)
            state._strata_visibility_counts = cached
        return cached
    return _visibility_counts(datasource=datasource, state=state, interval=interval)


def _visibility_counts(
    *, datasource: str, state: TimelineState, interval: Interval | None
) -> VisibilityCounts:
    counts = VisibilityCounts()
    chunks = state.chunks if interval is None else state.chunks_overlapping(interval)
    per_chunk = state_rows(datasource=datasource, state=state, interval=interval)
    mixed: dict[str, str] = {}
    for c in chunks:
        uniform = c.uniform_status
        if uniform is not None:
            rows, size = per_chunk.get((c.interval.start, c.interval.end, c.version), (0, 0))
            counts.of(uniform).add(c.size, rows, size)
        else:
            mixed.update({r.id: c.status_of(r) for r in c.segments})
    if len(mixed) <= MIXED_BY_ID_MAX:
        facts = {sid: (rows, size) for sid, (rows, size, _) in segment_facts(ids=mixed).items()}
    else:  # most chunks mixed (compacted with appends): one pass over the used rows
        facts = used_segment_facts(datasource, interval)
        missing = [sid for sid in mixed if sid not in facts]  # unused since (a past state)
        for sid, (rows, size, _) in segment_facts(ids=missing).items():
            facts[sid] = (rows, size)
    for sid, state_of in mixed.items():
        if sid in facts:
            counts.of(state_of).add(1, *facts[sid])
    return counts


# Above this many segments in mixed chunks, their rows and bytes are read in one
# sequential pass over the dataSource's used segments rather than by id.
MIXED_BY_ID_MAX = 5_000


def used_segment_facts(datasource: str, interval: Interval | None) -> dict[str, tuple[int, int]]:
    """Rows and bytes of the used segments (those overlapping `interval`), by id, in
    one pass over the rows: what visibility counts read when most chunks are mixed."""
    qs = Segment.objects.filter(datasource__name=datasource, used=True)
    if interval is not None:
        qs = qs.filter(start__lt=interval.end, end__gt=interval.start)
    return {sid: (rows, size) for sid, rows, size in qs.values_list("id", "num_rows", "size_bytes")}
