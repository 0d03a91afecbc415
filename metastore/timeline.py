"""Segment visibility (SPEC §3): which segments are visible, at which instants.

Pure core: standard library and ``metastore.intervals`` only.

Vocabulary. A *chunk* is every segment sharing ``(interval, version)``. Inside
a chunk, segments are grouped into *atomic update groups* (AUGs): the
segments whose ``atomic_update_group`` is the same set of partition numbers.
An AUG is *full* when every partition number in that set is present. The
group's minor version is the largest of its members' and its roots are the
union of its members' (SPEC says members carry the same values; these
conventions only make inconsistent input deterministic).

Inside one chunk (SPEC §3 rules 1–4):

1. an AUG is hidden when some *other* full AUG has a higher minor version and
   roots that include all of its roots;
2. the segments of full AUGs that are not hidden are visible;
3. a partial AUG that is not hidden is a *candidate* when none of its roots is
   covered by a segment visible under rule 2; a candidate is visible unless
   another candidate with a higher minor version shares a root with it;
4. the chunk is complete when every core root ``0..N-1`` (N = the largest
   ``core_partitions`` in the chunk) is covered by a visible segment's roots
   and no visible segment comes from a partial AUG.

Across chunks, at every instant the visible chunk is the complete chunk with
the highest ``(version, interval.start, interval.end)`` containing it. Two
chunks of one version should never overlap; if they do, the chunk starting
(then ending) later wins, so the answer is still deterministic.

The timeline is incremental: ``add`` and ``remove`` only record the change;
the affected chunks, and the stretches of time whose visible chunk may have
changed, are recomputed on the next read. The result always equals
``Timeline.build`` over the same segments.

Threads: reads of a timeline that nobody changes are safe (its lazily built
caches are published only once complete, and rebuilding one twice is
harmless); ``add`` and ``remove`` need the caller's lock against every other
call.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import attrgetter
from typing import NamedTuple

from metastore.intervals import MIN_TS, Interval

__all__ = ["SegmentRef", "Timeline", "TimelinePiece", "VISIBLE", "PARTIAL", "OVERSHADOWED"]

VISIBLE = "visible"
PARTIAL = "partial"
OVERSHADOWED = "overshadowed"

_EMPTY: frozenset[int] = frozenset()

# Partition sets repeat a lot (every member of an AUG carries the same roots;
# {p} repeats in every chunk), so SegmentRef shares equal sets. The table is
# bounded by the total number of elements it holds and simply starts over when
# full: sharing is an optimisation, never needed for correctness.
_INTERNED: dict[frozenset[int], frozenset[int]] = {}
_INTERN_LIMIT = 2_000_000
_interned_elements = 0


def _intern(values: Iterable[int]) -> frozenset[int]:
    global _interned_elements
    fs = values if type(values) is frozenset else frozenset(int(v) for v in values)
    found = _INTERNED.get(fs)
    if found is not None:
        return found
    if _interned_elements + len(fs) > _INTERN_LIMIT:
        _INTERNED.clear()
        _interned_elements = 0
    _INTERNED[fs] = fs
    _interned_elements += len(fs)
    return fs


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """What the timeline needs to know about one used segment.

    ``root_partitions`` and ``atomic_update_group`` default (None) to
    ``{partition}``; any iterable of ints is accepted and stored as a shared
    frozenset. The interval must not be empty.
    """

    id: str
    interval: Interval
    version: str
    partition: int
    minor_version: int = 0
    root_partitions: frozenset[int] | None = None  # None -> {partition}
    atomic_update_group: frozenset[int] | None = None  # None -> {partition}
    core_partitions: int = 0
    tombstone: bool = False

    def __post_init__(self) -> None:
        if self.root_partitions is not None:
            object.__setattr__(self, "root_partitions", _intern(self.root_partitions))
        if self.atomic_update_group is not None:
            object.__setattr__(self, "atomic_update_group", _intern(self.atomic_update_group))
        if not self.interval.start < self.interval.end:
            raise ValueError(f"segment {self.id}: interval {self.interval} is empty")
        if self.partition < 0 or self.minor_version < 0 or self.core_partitions < 0:
            raise ValueError(
                f"segment {self.id}: partition, minor_version and core_partitions must be >= 0 "
                f"(got {self.partition}, {self.minor_version}, {self.core_partitions})"
            )

    @property
    def roots(self) -> frozenset[int]:
        """The root partitions, with the default applied."""
        roots = self.root_partitions
        return roots if roots is not None else frozenset((self.partition,))

    @property
    def aug(self) -> frozenset[int]:
        """The atomic update group, with the default applied."""
        aug = self.atomic_update_group
        return aug if aug is not None else frozenset((self.partition,))

    @property
    def chunk_key(self) -> tuple[Interval, str]:
        return (self.interval, self.version)


class TimelinePiece(NamedTuple):
    """One visible piece of a lookup: a segment, the part of time it shows, and its chunk's completeness."""

    interval: Interval
    segment: SegmentRef
    complete: bool


_partition_of = attrgetter("partition")


def _is_simple(seg: SegmentRef) -> bool:
    """A segment that is its own full AUG, derives only from itself and has minor version 0.

    Roots and appends are simple: the bulk of every chunk. They can hide
    nothing, so a chunk keeps them apart from the (few) real groups.
    """
    p = seg.partition
    aug, roots = seg.atomic_update_group, seg.root_partitions
    return (
        seg.minor_version == 0
        and (aug is None or (len(aug) == 1 and p in aug))
        and (roots is None or (len(roots) == 1 and p in roots))
    )


class _Group:
    """The present members of one AUG whose segments are not simple (see ``_is_simple``)."""

    __slots__ = ("aug", "members", "present", "minor", "roots", "hidden", "stale")

    def __init__(self, aug: frozenset[int]) -> None:
        self.aug = aug
        self.members: dict[int, SegmentRef] = {}
        self.present = 0  # members whose partition is in aug
        self.minor = 0
        self.roots = _EMPTY
        self.hidden = False
        self.stale = True

    def refresh(self) -> None:
        members = iter(self.members.values())
        first = next(members)
        minor = first.minor_version
        roots = first.root_partitions
        if roots is None:
            roots = frozenset((first.partition,))
        extra = None
        for seg in members:
            if seg.minor_version > minor:
                minor = seg.minor_version
            r = seg.root_partitions
            if r is not roots:
                r = r if r is not None else frozenset((seg.partition,))
                if r != roots:
                    extra = (extra or set()) | r
        self.minor = minor
        self.roots = roots if extra is None else _intern(roots | extra)
        self.stale = False


class _Chunk:
    """All segments of one (interval, version), with their visibility cached."""

    __slots__ = (
        "interval",
        "start",
        "end",
        "version",
        "rank",
        "simple",
        "groups",
        "owner",
        "core",
        "core_count",
        "core_stale",
        "clean",
        "visible",
        "complete",
        "has_partial",
        "hidden_roots",
        "covered",
        "_pieces",
        "_visible_ids",
    )

    def __init__(self, interval: Interval, version: str) -> None:
        self.interval = interval
        self.start = interval.start
        self.end = interval.end
        self.version = version
        self.rank = (version, interval.start, interval.end)
        self.simple: dict[int, SegmentRef] = {}  # partition -> simple segment
        self.groups: dict[frozenset[int], _Group] = {}
        # partition -> group key, for the segments in groups
        self.owner: dict[int, frozenset[int]] = {}
        self.core = 0  # N: the largest core_partitions of the chunk's segments
        self.core_count = 0  # how many segments carry that N
        self.core_stale = False
        # The cached results of recompute(); valid while clean.
        self.clean = False
        self.visible: list[SegmentRef] = []  # sorted by partition
        self.complete = False
        self.has_partial = False
        self.hidden_roots = _EMPTY  # roots hidden for minor-0 segments by rule 1
        self.covered = _EMPTY  # roots covered by non-simple segments visible under rule 2
        self._pieces: list[tuple[Interval, SegmentRef]] | None = None
        self._visible_ids: set[str] | None = None

    def __len__(self) -> int:
        return len(self.simple) + len(self.owner)

    def segments(self) -> Iterator[SegmentRef]:
        yield from self.simple.values()
        for group in self.groups.values():
            yield from group.members.values()

    def holder(self, partition: int) -> SegmentRef | None:
        found = self.simple.get(partition)
        if found is None and partition in self.owner:
            found = self.groups[self.owner[partition]].members[partition]
        return found

    def insert(self, seg: SegmentRef) -> None:
        p = seg.partition
        if p in self.simple or p in self.owner:
            other = self.holder(p)
            assert other is not None
            raise ValueError(
                f"segments {other.id} and {seg.id} both claim partition {p} "
                f"of {seg.interval} version {seg.version}"
            )
        if seg.core_partitions > self.core:
            self.core = seg.core_partitions
            self.core_count = 1
        elif seg.core_partitions == self.core:
            self.core_count += 1
        aug = seg.atomic_update_group
        roots = seg.root_partitions
        if (  # _is_simple(seg), inlined: build() calls this once per segment
            seg.minor_version == 0
            and (aug is None or (len(aug) == 1 and p in aug))
            and (roots is None or (len(roots) == 1 and p in roots))
        ):
            self.simple[p] = seg
            return
        key = aug if aug is not None else frozenset((p,))
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(key)
        group.members[p] = seg
        if p in key:
            group.present += 1
        group.stale = True
        self.owner[p] = key

    def delete(self, seg: SegmentRef) -> None:
        p = seg.partition
        if self.simple.get(p) is seg:
            del self.simple[p]
        else:
            key = self.owner.pop(p)
            group = self.groups[key]
            del group.members[p]
            if not group.members:
                del self.groups[key]
            else:
                if p in key:
                    group.present -= 1
                group.stale = True
        if seg.core_partitions == self.core:
            self.core_count -= 1
            if self.core_count == 0:
                self.core_stale = True

    def recompute(self) -> None:
        """Apply rules 1–4 to the chunk's segments."""
        self._pieces = None
        self._visible_ids = None
        if self.core_stale:
            cores = [s.core_partitions for s in self.segments()]
            self.core = max(cores, default=0)
            self.core_count = cores.count(self.core)
            self.core_stale = False
        simple = self.simple
        groups = list(self.groups.values())
        for group in groups:
            if group.stale:
                group.refresh()
        full_above_zero = [g for g in groups if g.minor > 0 and g.present == len(g.aug)]
        # Roots hidden for minor-0 segments (every simple segment): rule 1.
        if not full_above_zero:
            hidden_roots = _EMPTY
        elif len(full_above_zero) == 1:
            hidden_roots = full_above_zero[0].roots
        else:
            hidden_roots = frozenset().union(*(g.roots for g in full_above_zero))
        for group in groups:
            minor, roots = group.minor, group.roots
            group.hidden = any(
                h is not group and h.minor > minor and roots <= h.roots for h in full_above_zero
            )

        # Rule 2.
        shown = [g for g in groups if not g.hidden and g.present == len(g.aug)]
        if not shown:
            covered = _EMPTY
        elif len(shown) == 1:
            covered = shown[0].roots
        else:
            covered = frozenset().union(*(g.roots for g in shown))
        if hidden_roots:
            visible = [s for p, s in simple.items() if p not in hidden_roots]
        else:
            visible = list(simple.values())

        def is_covered(root: int) -> bool:
            return root in covered or (root in simple and root not in hidden_roots)

        # Rule 3.
        candidates = [
            g
            for g in groups
            if not g.hidden and g.present != len(g.aug) and not any(is_covered(r) for r in g.roots)
        ]
        shown_partial = [
            g
            for g in candidates
            if not any(
                q is not g and q.minor > g.minor and not q.roots.isdisjoint(g.roots)
                for q in candidates
            )
        ]
        for group in shown:
            visible.extend(group.members.values())
        for group in shown_partial:
            visible.extend(group.members.values())
        visible.sort(key=_partition_of)
        self.visible = visible

        self.hidden_roots = hidden_roots
        self.covered = covered
        self.has_partial = any(g.present != len(g.aug) for g in groups)
        self.clean = True

        # Rule 4.
        core = self.core
        if shown_partial:
            self.complete = False
        elif core == 0 or covered.issuperset(range(core)):
            self.complete = True
        else:
            self.complete = all(is_covered(r) for r in range(core))

    # Fast paths: adding or removing a simple segment (a root or an append) in a
    # chunk without partial AUGs changes nothing but that segment's own
    # visibility, unless it moves N or may complete or break the core set.

    def can_absorb_add(self, seg: SegmentRef) -> bool:
        """Whether ``show_added`` may replace a recompute once ``seg`` is inserted (checked before)."""
        p = seg.partition
        if not self.clean or self.has_partial or seg.core_partitions > self.core:
            return False
        if p in self.simple or p in self.owner or not _is_simple(seg):
            return False
        return p >= self.core or self.complete or p in self.hidden_roots

    def show_added(self, seg: SegmentRef) -> None:
        if seg.partition in self.hidden_roots:
            return
        i = bisect_left(self.visible, seg.partition, key=_partition_of)
        self.visible.insert(i, seg)
        if self._pieces is not None:
            self._pieces.insert(i, (self.interval, seg))
        if self._visible_ids is not None:
            self._visible_ids.add(seg.id)

    def can_absorb_remove(self, seg: SegmentRef) -> bool:
        """Whether ``hide_removed`` may replace a recompute once ``seg`` is deleted (checked before)."""
        p = seg.partition
        if not self.clean or self.has_partial or self.simple.get(p) is not seg:
            return False
        if seg.core_partitions == self.core and self.core_count == 1 and self.core > 0:
            return False
        return p in self.hidden_roots or p >= self.core or p in self.covered

    def hide_removed(self, seg: SegmentRef) -> None:
        if seg.partition in self.hidden_roots:
            return
        i = bisect_left(self.visible, seg.partition, key=_partition_of)
        del self.visible[i]
        if self._pieces is not None:
            del self._pieces[i]
        if self._visible_ids is not None:
            self._visible_ids.discard(seg.id)

    def pieces(self) -> list[tuple[Interval, SegmentRef]]:
        pieces = self._pieces
        if pieces is None:
            interval = self.interval
            pieces = self._pieces = [(interval, s) for s in self.visible]
        return pieces

    def shows(self, seg: SegmentRef) -> bool:
        """True when ``seg`` is among the chunk's visible segments (rules 1–3)."""
        visible = self.visible
        i = bisect_left(visible, seg.partition, key=_partition_of)
        return i < len(visible) and visible[i] is seg

    def visible_ids(self) -> set[str]:
        ids = self._visible_ids
        if ids is None:
            ids = self._visible_ids = {s.id for s in self.visible}
        return ids


class _Runs:
    """The visible chunk over time: maximal, time-ordered, non-overlapping runs."""

    __slots__ = ("starts", "ends", "chunks")

    def __init__(self) -> None:
        self.starts: list[datetime] = []
        self.ends: list[datetime] = []
        self.chunks: list[_Chunk] = []

    def span(self, start: datetime, end: datetime) -> tuple[int, int]:
        """Indexes ``[i, j)`` of the runs overlapping ``[start, end)``."""
        starts = self.starts
        i = bisect_right(starts, start) - 1
        if i < 0 or self.ends[i] <= start:
            i += 1
        return i, bisect_left(starts, end, i)

    def repaint(self, start: datetime, end: datetime, candidates: list[_Chunk]) -> None:
        """Recompute the runs inside ``[start, end)`` from ``candidates`` (the eligible chunks overlapping it)."""
        starts, ends, chunks = self.starts, self.ends, self.chunks
        i, j = self.span(start, end)
        new_starts: list[datetime] = []
        new_ends: list[datetime] = []
        new_chunks: list[_Chunk] = []
        if i < j and starts[i] < start:  # keep the part of a run sticking out on the left
            new_starts.append(starts[i])
            new_ends.append(start)
            new_chunks.append(chunks[i])
        painted = _paint(start, end, candidates)
        for s, e, c in painted:
            if new_chunks and new_chunks[-1] is c and new_ends[-1] == s:
                new_ends[-1] = e
            else:
                new_starts.append(s)
                new_ends.append(e)
                new_chunks.append(c)
        if i < j and ends[j - 1] > end:  # and on the right
            c = chunks[j - 1]
            if new_chunks and new_chunks[-1] is c and new_ends[-1] == end:
                new_ends[-1] = ends[j - 1]
            else:
                new_starts.append(end)
                new_ends.append(ends[j - 1])
                new_chunks.append(c)
        # Merge with untouched neighbours that belong to the same chunk.
        if (
            new_chunks
            and j < len(chunks)
            and chunks[j] is new_chunks[-1]
            and starts[j] == new_ends[-1]
        ):
            new_ends[-1] = ends[j]
            j += 1
        if new_chunks and i > 0 and chunks[i - 1] is new_chunks[0] and ends[i - 1] == new_starts[0]:
            new_starts[0] = starts[i - 1]
            i -= 1
        starts[i:j] = new_starts
        ends[i:j] = new_ends
        chunks[i:j] = new_chunks


def _paint(
    start: datetime, end: datetime, candidates: list[_Chunk]
) -> list[tuple[datetime, datetime, _Chunk]]:
    """Fill ``[start, end)`` with the highest-ranked candidate at each instant: time-ordered pieces."""
    piece_starts: list[datetime] = []
    pieces: list[tuple[datetime, datetime, _Chunk]] = []
    for chunk in sorted(candidates, key=attrgetter("rank"), reverse=True):
        a = chunk.start if chunk.start > start else start
        b = chunk.end if chunk.end < end else end
        if a >= b:
            continue
        k = bisect_right(piece_starts, a) - 1
        cursor = a
        if k >= 0 and pieces[k][1] > a:
            cursor = pieces[k][1]
        k += 1
        gaps: list[tuple[int, datetime, datetime]] = []
        while cursor < b:
            if k < len(pieces) and piece_starts[k] < b:
                if cursor < piece_starts[k]:
                    gaps.append((k, cursor, piece_starts[k]))
                if pieces[k][1] > cursor:
                    cursor = pieces[k][1]
                k += 1
            else:
                gaps.append((k, cursor, b))
                break
        for k, s, e in reversed(gaps):
            piece_starts.insert(k, s)
            pieces.insert(k, (s, e, chunk))
    # Neighbouring pieces of one chunk are one run.
    merged: list[tuple[datetime, datetime, _Chunk]] = []
    for piece in pieces:
        if merged and merged[-1][2] is piece[2] and merged[-1][1] == piece[0]:
            merged[-1] = (merged[-1][0], piece[1], piece[2])
        else:
            merged.append(piece)
    return merged


def _merge_regions(regions: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    regions.sort()
    merged: list[tuple[datetime, datetime]] = []
    for s, e in regions:
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


class Timeline:
    """The visibility of one dataSource's used segments (SPEC §3).

    Build it with ``Timeline.build(segments)``, keep it current with ``add``
    and ``remove``, and ask ``lookup``, ``status``, ``visible_intervals``,
    ``overshadowed_by``, ``fully_overshadowed`` and ``chunk_complete``.
    """

    __slots__ = (
        "_by_id",
        "_chunks",
        "_chunk_starts",
        "_chunk_list",
        "_max_length",
        "_complete_runs",
        "_all_runs",
        "_dirty_chunks",
        "_dirty_complete",
        "_dirty_all",
    )

    def __init__(self) -> None:
        self._by_id: dict[str, SegmentRef] = {}
        self._chunks: dict[tuple[datetime, datetime, str], _Chunk] = {}
        # Chunks sorted by start, to find those overlapping a stretch of time.
        self._chunk_starts: list[datetime] = []
        self._chunk_list: list[_Chunk] = []
        self._max_length = timedelta(0)
        self._complete_runs = _Runs()
        self._all_runs: _Runs | None = None  # built on the first include_incomplete lookup
        self._dirty_chunks: dict[_Chunk, None] = {}
        self._dirty_complete: list[tuple[datetime, datetime]] = []
        self._dirty_all: list[tuple[datetime, datetime]] = []

    # ----------------------------------------------------------------- changes

    @classmethod
    def build(cls, segments: Iterable[SegmentRef]) -> Timeline:
        """A timeline of ``segments``; raises ValueError on a repeated id or partition."""
        timeline = cls()
        by_id = timeline._by_id
        chunks = timeline._chunks
        chunk: _Chunk | None = None
        last_interval: Interval | None = None
        last_version: str | None = None
        for seg in segments:
            sid = seg.id
            if sid in by_id:
                raise ValueError(f"segment id {sid} appears twice")
            interval, version = seg.interval, seg.version
            # Segments usually arrive chunk by chunk, sharing these objects.
            if interval is not last_interval or version is not last_version or chunk is None:
                key = (interval.start, interval.end, version)
                chunk = chunks.get(key)
                if chunk is None:
                    chunk = chunks[key] = _Chunk(interval, version)
                last_interval, last_version = interval, version
            chunk.insert(seg)
            by_id[sid] = seg
        ordered = sorted(chunks.values(), key=attrgetter("start"))
        timeline._chunk_list = ordered
        timeline._chunk_starts = [c.start for c in ordered]
        longest = timedelta(0)
        for chunk in ordered:
            chunk.recompute()
            if chunk.end - chunk.start > longest:
                longest = chunk.end - chunk.start
        timeline._max_length = longest
        if ordered:
            runs = timeline._complete_runs
            for s, e, c in _paint(
                ordered[0].start, max(c.end for c in ordered), [c for c in ordered if c.complete]
            ):
                runs.starts.append(s)
                runs.ends.append(e)
                runs.chunks.append(c)
        return timeline

    def add(self, seg: SegmentRef) -> None:
        """Add a used segment. Re-adding an identical segment does nothing; a changed one replaces it."""
        old = self._by_id.get(seg.id)
        if old is not None and old == seg:
            return
        interval = seg.interval
        key = (interval.start, interval.end, seg.version)
        chunk = self._chunks.get(key)
        if chunk is not None:
            holder = chunk.holder(seg.partition)
            if holder is not None and holder is not old:
                raise ValueError(
                    f"segments {holder.id} and {seg.id} both claim partition {seg.partition} "
                    f"of {interval} version {seg.version}"
                )
        if old is not None:
            self.remove(seg.id)
            chunk = self._chunks.get(key)
        if chunk is None:
            chunk = self._chunks[key] = _Chunk(interval, seg.version)
            self._index_chunk(chunk)
        fast = chunk.can_absorb_add(seg)
        chunk.insert(seg)
        self._by_id[seg.id] = seg
        if fast:
            chunk.show_added(seg)
        else:
            chunk.clean = False
            self._dirty_chunks[chunk] = None

    def remove(self, seg_id: str) -> None:
        """Remove a segment (it became unused); KeyError if it is not in the timeline."""
        seg = self._by_id.pop(seg_id, None)
        if seg is None:
            raise KeyError(f"segment {seg_id} is not in the timeline")
        interval = seg.interval
        key = (interval.start, interval.end, seg.version)
        chunk = self._chunks[key]
        fast = chunk.can_absorb_remove(seg)
        chunk.delete(seg)
        if len(chunk):
            if fast:
                chunk.hide_removed(seg)
            else:
                chunk.clean = False
                self._dirty_chunks[chunk] = None
            return
        del self._chunks[key]
        self._dirty_chunks.pop(chunk, None)
        self._unindex_chunk(chunk)
        if chunk.complete:
            self._dirty_complete.append((chunk.start, chunk.end))

    def _index_chunk(self, chunk: _Chunk) -> None:
        i = bisect_right(self._chunk_starts, chunk.start)
        self._chunk_starts.insert(i, chunk.start)
        self._chunk_list.insert(i, chunk)
        if chunk.end - chunk.start > self._max_length:
            self._max_length = chunk.end - chunk.start
        if self._all_runs is not None:
            self._dirty_all.append((chunk.start, chunk.end))

    def _unindex_chunk(self, chunk: _Chunk) -> None:
        i = bisect_left(self._chunk_starts, chunk.start)
        while self._chunk_list[i] is not chunk:
            i += 1
        del self._chunk_starts[i]
        del self._chunk_list[i]
        if self._all_runs is not None:
            self._dirty_all.append((chunk.start, chunk.end))

    def _overlapping_chunks(self, start: datetime, end: datetime) -> list[_Chunk]:
        try:
            lowest = start - self._max_length
        except OverflowError:
            lowest = MIN_TS
        i = bisect_right(self._chunk_starts, lowest)
        j = bisect_left(self._chunk_starts, end, i)
        return [c for c in self._chunk_list[max(i - 1, 0) : j] if c.end > start]

    def _refresh(self) -> None:
        """Bring cached visibility up to date after add/remove."""
        if self._dirty_chunks:
            for chunk in self._dirty_chunks:
                was_complete = chunk.complete
                chunk.recompute()
                if chunk.complete != was_complete:
                    self._dirty_complete.append((chunk.start, chunk.end))
            self._dirty_chunks.clear()
        if self._dirty_complete:
            for s, e in _merge_regions(self._dirty_complete):
                self._complete_runs.repaint(
                    s, e, [c for c in self._overlapping_chunks(s, e) if c.complete]
                )
            self._dirty_complete.clear()
        if self._dirty_all and self._all_runs is not None:
            for s, e in _merge_regions(self._dirty_all):
                self._all_runs.repaint(s, e, self._overlapping_chunks(s, e))
            self._dirty_all.clear()

    def _runs(self, include_incomplete: bool) -> _Runs:
        self._refresh()
        if not include_incomplete:
            return self._complete_runs
        runs = self._all_runs
        if runs is None:
            runs = _Runs()
            ordered = self._chunk_list
            if ordered:
                for s, e, c in _paint(ordered[0].start, max(c.end for c in ordered), ordered):
                    runs.starts.append(s)
                    runs.ends.append(e)
                    runs.chunks.append(c)
            self._dirty_all.clear()
            self._all_runs = runs  # published once complete: see the module docstring
        return runs

    # ------------------------------------------------------------------- reads

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, seg_id: object) -> bool:
        return seg_id in self._by_id

    def __repr__(self) -> str:
        return f"<Timeline: {len(self._by_id)} segments in {len(self._chunks)} chunks>"

    def segments(self) -> Iterator[SegmentRef]:
        """Every segment in the timeline, visible or not (no particular order)."""
        return iter(self._by_id.values())

    def get(self, seg_id: str) -> SegmentRef | None:
        return self._by_id.get(seg_id)

    def lookup(
        self, interval: Interval, include_incomplete: bool = False
    ) -> list[tuple[Interval, SegmentRef]]:
        """The visible pieces overlapping ``interval``: ``(part of time, segment)``, time-ordered.

        Each piece is clipped to ``interval``; pieces of one stretch of time
        are ordered by partition number. Tombstones are included (they hold no
        rows). With ``include_incomplete``, at each instant the chunk of the
        highest version is used even if it is incomplete; use
        ``lookup_pieces`` (or ``chunk_complete``) to tell which pieces come
        from incomplete chunks.
        """
        runs = self._runs(include_incomplete)
        qs, qe = interval.start, interval.end
        out: list[tuple[Interval, SegmentRef]] = []
        if not qs < qe:
            return out
        starts, ends, chunks = runs.starts, runs.ends, runs.chunks
        i, j = runs.span(qs, qe)
        for k in range(i, j):
            s, e, chunk = starts[k], ends[k], chunks[k]
            if s == chunk.start and e == chunk.end and qs <= s and e <= qe:
                out.extend(chunk.pieces())  # the common case: a whole chunk, cached
            else:
                piece = Interval(s if s > qs else qs, e if e < qe else qe)
                out.extend([(piece, seg) for seg in chunk.visible])
        return out

    def lookup_pieces(
        self, interval: Interval, include_incomplete: bool = True
    ) -> list[TimelinePiece]:
        """Like ``lookup``, each piece marked with whether its chunk is complete."""
        return [
            TimelinePiece(piece, seg, self._chunk_of(seg).complete)
            for piece, seg in self.lookup(interval, include_incomplete)
        ]

    def _chunk_of(self, seg: SegmentRef) -> _Chunk:
        interval = seg.interval
        return self._chunks[(interval.start, interval.end, seg.version)]

    def _segment(self, seg_id: str) -> tuple[SegmentRef, _Chunk]:
        seg = self._by_id.get(seg_id)
        if seg is None:
            raise KeyError(f"segment {seg_id} is not in the timeline")
        self._refresh()
        interval = seg.interval
        return seg, self._chunks[(interval.start, interval.end, seg.version)]

    def _own_runs(self, chunk: _Chunk) -> list[tuple[datetime, datetime]]:
        runs = self._complete_runs
        i, j = runs.span(chunk.start, chunk.end)
        return [(runs.starts[k], runs.ends[k]) for k in range(i, j) if runs.chunks[k] is chunk]

    def status(self, seg_id: str) -> str:
        """``"visible"``, ``"partial"`` (visible for part of its interval) or ``"overshadowed"``."""
        seg, chunk = self._segment(seg_id)
        if not chunk.complete or not chunk.shows(seg):
            return OVERSHADOWED
        own = self._own_runs(chunk)
        if not own:
            return OVERSHADOWED
        if len(own) == 1 and own[0] == (chunk.start, chunk.end):
            return VISIBLE
        return PARTIAL

    def visible_intervals(self, seg_id: str) -> list[Interval]:
        """The maximal parts of the segment's interval where it is visible, time-ordered."""
        seg, chunk = self._segment(seg_id)
        if not chunk.complete or not chunk.shows(seg):
            return []
        return [
            chunk.interval if (s == chunk.start and e == chunk.end) else Interval(s, e)
            for s, e in self._own_runs(chunk)
        ]

    def overshadowed_by(self, seg_id: str) -> set[str]:
        """Ids of the visible segments that hide ``seg_id`` somewhere in its interval.

        Those are the visible segments, at the instants where ``seg_id`` is
        not visible, that come either from a chunk outranking its own (higher
        version) or from its own chunk and share a root partition with it.
        Empty for a visible segment, and for one that is invisible only
        because its chunk is incomplete (see ``chunk_complete``).
        """
        seg, chunk = self._segment(seg_id)
        shown_here = chunk.complete and chunk.shows(seg)
        runs = self._complete_runs
        i, j = runs.span(chunk.start, chunk.end)
        out: set[str] = set()
        roots = seg.roots
        for k in range(i, j):
            other = runs.chunks[k]
            if other is chunk:
                if not shown_here:
                    out.update(s.id for s in other.visible if not s.roots.isdisjoint(roots))
            elif other.rank > chunk.rank:
                out.update(other.visible_ids())
        return out

    def fully_overshadowed(self) -> set[str]:
        """Ids of the segments visible at no instant of their interval (SPEC §3).

        This includes the segments of an incomplete chunk that nothing newer
        covers: they are not visible anywhere either. ``overshadowed_by`` is
        empty for those, and non-empty for segments that newer data replaces.
        """
        runs = self._runs(False)
        on_view = set(runs.chunks)
        out: set[str] = set()
        for chunk in self._chunks.values():
            if chunk in on_view:
                shown = chunk.visible_ids()
                out.update(s.id for s in chunk.segments() if s.id not in shown)
            else:
                out.update(s.id for s in chunk.segments())
        return out

    def chunk_complete(self, key: tuple[Interval, str]) -> bool:
        """Whether the chunk ``(interval, version)`` is complete (rule 4); False if it has no segments."""
        interval, version = key
        chunk = self._chunks.get((interval.start, interval.end, version))
        if chunk is None:
            return False
        self._refresh()
        return chunk.complete
