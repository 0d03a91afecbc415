"""A slow, obviously-correct reading of SPEC §3, evaluated instant by instant.

Written independently of ``metastore.timeline`` (it shares only the
``SegmentRef`` input type) so that property tests can compare the two. It is
quadratic or worse everywhere on purpose: each rule is a direct transcription.

Time is a grid of instants ``grid[0] < grid[1] < ...``; every segment boundary
must be a grid point, so visibility is constant on each cell
``[grid[k], grid[k+1])`` and evaluating it at the instant ``grid[k]`` is
evaluating it for the whole cell.

Conventions shared with the real timeline (SPEC leaves them open):
- an AUG is the set of segments of a chunk carrying the same
  ``atomic_update_group``; it is full when a segment is present for every
  partition number in that set;
- rule 3's "such partial AUG" means another partial AUG that itself passes
  the first test of rule 3 (not hidden, no root covered by rule 2);
- overlapping chunks of one version (which SPEC rules out) are ordered by
  ``(version, start, end)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from metastore.intervals import Interval
from metastore.timeline import SegmentRef


def roots_of(seg: SegmentRef) -> frozenset[int]:
    return seg.root_partitions if seg.root_partitions is not None else frozenset({seg.partition})


def aug_of(seg: SegmentRef) -> frozenset[int]:
    return (
        seg.atomic_update_group
        if seg.atomic_update_group is not None
        else frozenset({seg.partition})
    )


def chunk_visibility(segments: list[SegmentRef]) -> tuple[set[str], bool]:
    """Rules 1–4 for the segments of one chunk: (ids of visible segments, complete?)."""
    present = {s.partition for s in segments}
    core = max((s.core_partitions for s in segments), default=0)

    def members(seg: SegmentRef) -> list[SegmentRef]:
        return [s for s in segments if aug_of(s) == aug_of(seg)]

    def group_minor(seg: SegmentRef) -> int:
        return max(s.minor_version for s in members(seg))

    def group_roots(seg: SegmentRef) -> frozenset[int]:
        return frozenset().union(*(roots_of(s) for s in members(seg)))

    def is_full(seg: SegmentRef) -> bool:
        return all(
            p in present and any(s.partition == p for s in members(seg)) for p in aug_of(seg)
        )

    # Rule 1: hidden by some full AUG of higher minor whose roots include its roots.
    def is_hidden(seg: SegmentRef) -> bool:
        return any(
            aug_of(other) != aug_of(seg)
            and is_full(other)
            and group_minor(other) > group_minor(seg)
            and group_roots(seg) <= group_roots(other)
            for other in segments
        )

    # Rule 2.
    rule2 = [s for s in segments if is_full(s) and not is_hidden(s)]
    covered_by_rule2 = frozenset().union(*(roots_of(s) for s in rule2))

    # Rule 3.
    def is_candidate(seg: SegmentRef) -> bool:
        return not is_full(seg) and not is_hidden(seg) and not (group_roots(seg) & covered_by_rule2)

    candidates = [s for s in segments if is_candidate(s)]
    rule3 = [
        s
        for s in candidates
        if not any(
            aug_of(other) != aug_of(s)
            and group_minor(other) > group_minor(s)
            and group_roots(other) & group_roots(s)
            for other in candidates
        )
    ]
    visible = rule2 + rule3

    # Rule 4.
    visible_roots = frozenset().union(*(roots_of(s) for s in visible))
    complete = not rule3 and all(r in visible_roots for r in range(core))
    return {s.id for s in visible}, complete


class ReferenceTimeline:
    """SPEC §3 evaluated at every grid instant. Same read API as ``Timeline``."""

    def __init__(self, segments: Iterable[SegmentRef], grid: Sequence[datetime]):
        self.segments = {s.id: s for s in segments}
        self.grid = list(grid)
        for s in self.segments.values():
            assert s.interval.start in self.grid and s.interval.end in self.grid, (
                f"{s.id}: {s.interval} is not on the grid"
            )
        self.chunks: dict[tuple[Interval, str], list[SegmentRef]] = {}
        for s in self.segments.values():
            self.chunks.setdefault((s.interval, s.version), []).append(s)
        self.visible_in_chunk: dict[tuple[Interval, str], set[str]] = {}
        self.complete: dict[tuple[Interval, str], bool] = {}
        for key, members in self.chunks.items():
            self.visible_in_chunk[key], self.complete[key] = chunk_visibility(members)
        cells = range(len(self.grid) - 1)
        self.winner = [self._winner(self.grid[k], complete_only=True) for k in cells]
        self.winner_any = [self._winner(self.grid[k], complete_only=False) for k in cells]

    @staticmethod
    def _rank(key: tuple[Interval, str]) -> tuple[str, datetime, datetime]:
        interval, version = key
        return (version, interval.start, interval.end)

    def _winner(self, instant: datetime, complete_only: bool) -> tuple[Interval, str] | None:
        containing = [
            key
            for key in self.chunks
            if key[0].contains(instant) and (self.complete[key] or not complete_only)
        ]
        return max(containing, key=self._rank, default=None)

    def _cells(self, interval: Interval) -> list[int]:
        return [
            k
            for k in range(len(self.grid) - 1)
            if interval.start <= self.grid[k] and self.grid[k + 1] <= interval.end
        ]

    def shown_at(self, k: int, include_incomplete: bool = False) -> list[SegmentRef]:
        """The visible segments in cell ``k``, by partition."""
        key = (self.winner_any if include_incomplete else self.winner)[k]
        if key is None:
            return []
        shown = [self.segments[i] for i in self.visible_in_chunk[key]]
        return sorted(shown, key=lambda s: s.partition)

    def _runs(self, cells: list[int]) -> list[Interval]:
        runs: list[Interval] = []
        for k in cells:
            if runs and runs[-1].end == self.grid[k]:
                runs[-1] = Interval(runs[-1].start, self.grid[k + 1])
            else:
                runs.append(Interval(self.grid[k], self.grid[k + 1]))
        return runs

    def lookup(
        self, interval: Interval, include_incomplete: bool = False
    ) -> list[tuple[Interval, SegmentRef]]:
        cells = [k for k in self._cells(interval)]
        pieces = []
        for seg in self.segments.values():
            shown = [
                k
                for k in cells
                if any(s.id == seg.id for s in self.shown_at(k, include_incomplete))
            ]
            pieces.extend((run, seg) for run in self._runs(shown))
        return sorted(pieces, key=lambda p: (p[0].start, p[1].partition))

    def visible_intervals(self, seg_id: str) -> list[Interval]:
        seg = self.segments[seg_id]
        cells = [
            k for k in self._cells(seg.interval) if any(s.id == seg_id for s in self.shown_at(k))
        ]
        return self._runs(cells)

    def status(self, seg_id: str) -> str:
        seg = self.segments[seg_id]
        cells = self._cells(seg.interval)
        shown = [k for k in cells if any(s.id == seg_id for s in self.shown_at(k))]
        if not shown:
            return "overshadowed"
        return "visible" if len(shown) == len(cells) else "partial"

    def fully_overshadowed(self) -> set[str]:
        return {i for i in self.segments if self.status(i) == "overshadowed"}

    def overshadowed_by(self, seg_id: str) -> set[str]:
        seg = self.segments[seg_id]
        own = (seg.interval, seg.version)
        out: set[str] = set()
        for k in self._cells(seg.interval):
            shown = self.shown_at(k)
            if any(s.id == seg_id for s in shown):
                continue
            key = self.winner[k]
            if key == own:
                out |= {s.id for s in shown if roots_of(s) & roots_of(seg)}
            elif key is not None and self._rank(key) > self._rank(own):
                out |= {s.id for s in shown}
        return out

    def chunk_complete(self, key: tuple[Interval, str]) -> bool:
        return self.complete.get(key, False)
