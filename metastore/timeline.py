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

Threads: reads of a timeline that nobody changes are safe, from any number of
threads: the refresh after changes runs under the timeline's own lock, and
the chunks' lazily built caches are published only once complete (building
one twice is harmless). ``add`` and ``remove`` need the caller's lock against
every other call. To change a timeline others are reading, change a ``copy``:
the copy shares its chunks with the original and clones each one the first
time it changes it, so a copy costs a few flat list and dict copies, and the
original never changes.
"""

from __future__ import annotations

import gc
import json
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from heapq import heappop, heappush
from operator import attrgetter
from types import MappingProxyType
from typing import NamedTuple

from metastore.intervals import MIN_TS, Interval

__all__ = [
    "ChunkVisibility",
    "LogChange",
    "OVERSHADOWED",
    "PARTIAL",
    "REF_COLUMNS",
    "REF_FIELDS",
    "SegmentRef",
    "Timeline",
    "TimelinePiece",
    "VISIBLE",
    "fold_commits",
    "refs_from_rows",
]

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


class _RefFields(NamedTuple):
    id: str
    interval: Interval
    version: str
    partition: int
    minor_version: int = 0
    root_partitions: frozenset[int] | None = None  # None -> {partition}
    atomic_update_group: frozenset[int] | None = None  # None -> {partition}
    core_partitions: int = 0
    tombstone: bool = False


class SegmentRef(_RefFields):
    """What the timeline needs to know about one used segment.

    ``root_partitions`` and ``atomic_update_group`` default (None) to
    ``{partition}``; any iterable of ints is accepted and stored as a shared
    frozenset. The interval must not be empty.

    Immutable, hashable and compared by value. A tuple underneath, so that a
    checkpoint's hundreds of thousands of refs are made in C (``tuple.__new__``
    over checked columns, see ``checkpoint_codec``); nothing else treats it as one.
    """

    __slots__ = ()

    def __new__(
        cls,
        id: str,
        interval: Interval,
        version: str,
        partition: int,
        minor_version: int = 0,
        root_partitions: Iterable[int] | None = None,
        atomic_update_group: Iterable[int] | None = None,
        core_partitions: int = 0,
        tombstone: bool = False,
    ) -> SegmentRef:
        if root_partitions is not None:
            root_partitions = _intern(root_partitions)
        if atomic_update_group is not None:
            atomic_update_group = _intern(atomic_update_group)
        if not interval.start < interval.end:
            raise ValueError(f"segment {id}: interval {interval} is empty")
        if partition < 0 or minor_version < 0 or core_partitions < 0:
            raise ValueError(
                f"segment {id}: partition, minor_version and core_partitions must be >= 0 "
                f"(got {partition}, {minor_version}, {core_partitions})"
            )
        fields = (id, interval, version, partition, minor_version)
        rest = (root_partitions, atomic_update_group, core_partitions, tombstone)
        return tuple.__new__(cls, fields + rest)

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


# SegmentRef's fields, in constructor order, and the Segment columns a ref is read
# from (`refs_from_rows`): the same, with the interval stored as its two ends.
REF_FIELDS: tuple[str, ...] = SegmentRef._fields
REF_COLUMNS = ("id", "start", "end", *REF_FIELDS[2:])


def refs_from_rows(rows: Iterable[Sequence]) -> list[SegmentRef]:
    """SegmentRefs from rows of ``REF_COLUMNS``.

    A partition set is a list of ints, its JSON text, or None (or empty) for the
    default ``{partition}``. Equal intervals and partition sets are built once and
    shared by every ref that has them.
    """
    intervals: dict[tuple, Interval] = {}
    sets: dict[object, frozenset[int] | None] = {}
    out = []
    append = out.append
    for r in rows:
        key = (r[1], r[2])
        interval = intervals.get(key)
        if interval is None:
            interval = intervals[key] = Interval(*key)
        append(
            SegmentRef(
                r[0],
                interval,
                r[3],
                r[4],
                r[5],
                _shared_set(r[6], sets),
                _shared_set(r[7], sets),
                r[8],
                r[9],
            )
        )
    return out


def _shared_set(value, cache: dict) -> frozenset[int] | None:
    if not value:
        return None
    key = value if isinstance(value, str) else tuple(value)
    found = cache.get(key)
    if found is None:
        found = cache[key] = frozenset(json.loads(value) if isinstance(value, str) else value)
    return found


@dataclass(frozen=True, slots=True)
class LogChange:
    """The net change of consecutive commits to the set of used segments."""

    commits: int  # how many commits were folded
    added: dict[str, None]  # ids that came in and stayed, in the order they came
    removed: set[str]  # ids that left and did not come back


def fold_commits(
    entries: Iterable[tuple[Iterable[str] | None, Iterable[str] | None]],
    *,
    limit: int | None = None,
) -> LogChange | None:
    """Fold commits, each ``(ids it made used, ids it made unused or killed)``, in
    commit order, into their net change. Inside one commit the removals come
    first (a kill adds nothing, so its order does not matter). None as soon as
    more than ``limit`` ids changed: the caller then rebuilds instead."""
    added: dict[str, None] = {}
    removed: set[str] = set()
    commits = 0
    for add, rem in entries:
        commits += 1
        for sid in rem or ():
            added.pop(sid, None)
            removed.add(sid)
        for sid in add or ():
            removed.discard(sid)
            added[sid] = None
        if limit is not None and len(added) + len(removed) > limit:
            return None
    return LogChange(commits, added, removed)


class TimelinePiece(NamedTuple):
    """One visible piece of a lookup: a segment, the part of time it shows, and its chunk's completeness."""

    interval: Interval
    segment: SegmentRef
    complete: bool


class ChunkVisibility(NamedTuple):
    """One chunk (all segments of one interval and version) as ``Timeline.chunk_visibility``
    sees it: what the console draws, without a pass over the chunk's segments."""

    interval: Interval
    version: str
    size: int  # how many segments it holds
    complete: bool  # rule 4
    visible: list[SegmentRef]  # the segments it shows (rules 1–3), by partition; [] if incomplete
    shown: timedelta  # for how long of its interval it shows them (zero: outranked everywhere)
    tombstones: int | None  # how many of its segments are tombstones (None: not counted)
    segments: Callable[[], Iterator[SegmentRef]]  # its segments, in no particular order


_partition_of = attrgetter("partition")
_start_of = attrgetter("start")
_NO_GROUPS: dict = MappingProxyType({})  # type: ignore[assignment]
_NO_OWNERS: dict = MappingProxyType({})  # type: ignore[assignment]
_UNSET = object()  # a slot not set yet


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

    def clone(self) -> _Group:
        group = _Group(self.aug)
        group.members = dict(self.members)
        group.present, group.minor, group.roots = self.present, self.minor, self.roots
        group.hidden, group.stale = self.hidden, self.stale
        return group

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


def _shown_partial(groups, is_covered) -> list:
    """Rule 3: the partial groups shown, those over roots nothing else covers and
    not overlapped by a partial group of a higher minor version."""
    candidates = [
        g
        for g in groups
        if not g.hidden and g.present != len(g.aug) and not any(is_covered(r) for r in g.roots)
    ]
    return [
        g
        for g in candidates
        if not any(
            q is not g and q.minor > g.minor and not q.roots.isdisjoint(g.roots) for q in candidates
        )
    ]


def _roots_of(groups: list[_Group]) -> frozenset[int]:
    """The union of the groups' roots."""
    if not groups:
        return _EMPTY
    if len(groups) == 1:
        return groups[0].roots
    return frozenset().union(*(g.roots for g in groups))


def _hide_groups(groups) -> frozenset[int]:
    """Rule 1: mark each group hidden by a full group of a higher minor version
    over a superset of its roots; return the roots hidden for minor-0 segments
    (every simple segment)."""
    full_above_zero = [g for g in groups if g.minor > 0 and g.present == len(g.aug)]
    hidden_roots = _roots_of(full_above_zero)
    for group in groups:
        minor, roots = group.minor, group.roots
        group.hidden = any(
            h is not group and h.minor > minor and roots <= h.roots for h in full_above_zero
        )
    return hidden_roots


class _Chunk:
    """All segments of one (interval, version), with their visibility cached."""

    __slots__ = (
        "interval",
        "start",
        "end",
        "version",
        "simple",
        "groups",
        "owner",
        "core",
        "core_count",
        "core_stale",
        "clean",
        "_visible",
        "complete",
        "has_partial",
        "hidden_roots",
        "covered",
        "_visible_ids",
        "_pieces",
    )

    def __init__(self, interval: Interval, version: str) -> None:
        self.interval = interval
        self.start = interval.start
        self.end = interval.end
        self.version = version
        self.simple: dict[int, SegmentRef] = {}  # partition -> simple segment
        # Most chunks hold simple segments only: they share one empty, read-only
        # mapping until their first group arrives.
        self.groups: dict[frozenset[int], _Group] = _NO_GROUPS
        # partition -> group key, for the segments in groups
        self.owner: dict[int, frozenset[int]] = _NO_OWNERS
        self.core = 0  # N: the largest core_partitions of the chunk's segments
        self.core_count = 0  # how many segments carry that N
        self.core_stale = False
        # The results of recompute(), valid while clean: complete, and the
        # slots that recompute() alone sets (so they are read only after it):
        # _visible (sorted by partition; None for "every simple segment"),
        # has_partial, hidden_roots (roots hidden for minor-0 segments by rule
        # 1), covered (roots covered by non-simple segments visible under rule
        # 2), and the lazily built _visible_ids and _pieces.
        self.clean = False
        self.complete = False

    def __len__(self) -> int:
        return len(self.simple) + len(self.owner)

    def clone(self) -> _Chunk:
        """A chunk equal to this one that can change without changing it."""
        chunk = object.__new__(_Chunk)
        for name in _Chunk.__slots__:
            value = getattr(self, name, _UNSET)
            if value is not _UNSET:
                setattr(chunk, name, value)
        chunk.simple = dict(self.simple)
        if self.groups is not _NO_GROUPS:
            chunk.groups = {key: group.clone() for key, group in self.groups.items()}
            chunk.owner = dict(self.owner)
        # The caches that show_added and hide_removed change in place.
        for name in ("_visible", "_pieces", "_visible_ids"):
            value = getattr(self, name, None)
            if value is not None:
                setattr(chunk, name, value.copy())
        return chunk

    @property
    def rank(self) -> tuple[str, datetime, datetime]:
        """The order of chunks at an instant both contain: the highest wins."""
        return (self.version, self.start, self.end)

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
        if self.groups is _NO_GROUPS:
            self.groups, self.owner = {}, {}
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
        self._visible_ids = None
        self._pieces = None
        if self.core_stale:
            cores = [s.core_partitions for s in self.simple.values()]
            if self.groups:
                for group in self.groups.values():
                    cores += [s.core_partitions for s in group.members.values()]
            self.core = max(cores, default=0)
            self.core_count = cores.count(self.core)
            self.core_stale = False
        if not self.groups:
            self._recompute_simple()
            return
        groups = list(self.groups.values())
        for group in groups:
            if group.stale:
                group.refresh()
        hidden_roots = _hide_groups(groups)
        # Rule 2.
        shown = [g for g in groups if not g.hidden and g.present == len(g.aug)]
        covered = _roots_of(shown)
        simple = self.simple

        def is_covered(root: int) -> bool:
            return root in covered or (root in simple and root not in hidden_roots)

        shown_partial = _shown_partial(groups, is_covered)
        self._visible = self._visible_with(hidden_roots, shown + shown_partial)
        self.hidden_roots = hidden_roots
        self.covered = covered
        self.has_partial = any(g.present != len(g.aug) for g in groups)
        self.clean = True
        # Rule 4.
        core = self.core
        self.complete = not shown_partial and (
            core == 0 or covered.issuperset(range(core)) or all(map(is_covered, range(core)))
        )

    def _visible_with(self, hidden_roots: frozenset[int], shown: list[_Group]) -> list[SegmentRef]:
        """The simple segments not hidden by rule 1 and the members of ``shown``, by partition."""
        simple = self.simple
        if hidden_roots:
            visible = [s for p, s in simple.items() if p not in hidden_roots]
        else:
            visible = list(simple.values())
        for group in shown:
            visible.extend(group.members.values())
        visible.sort(key=_partition_of)
        return visible

    def _recompute_simple(self) -> None:
        """Simple segments only (the bulk of chunks): each is its own full AUG of
        minor 0 and root {p}, so rules 1-3 show them all; the list of them is made
        on the first read that needs it."""
        simple = self.simple
        self._visible = None
        self.hidden_roots = self.covered = _EMPTY
        self.has_partial = False
        self.clean = True
        core = self.core
        self.complete = core == 0 or (len(simple) >= core and all(r in simple for r in range(core)))

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
        visible = self._visible
        if visible is None:  # "every simple segment" still holds; drop what was made of it
            self._visible_ids = self._pieces = None
            return
        i = bisect_left(visible, seg.partition, key=_partition_of)
        visible.insert(i, seg)
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
        visible = self._visible
        if visible is None:
            self._visible_ids = self._pieces = None
            return
        i = bisect_left(visible, seg.partition, key=_partition_of)
        del visible[i]
        if self._pieces is not None:
            del self._pieces[i]
        if self._visible_ids is not None:
            self._visible_ids.discard(seg.id)

    @property
    def visible(self) -> list[SegmentRef]:
        """The chunk's visible segments (rules 1–3), by partition (after recompute)."""
        visible = self._visible
        if visible is None:
            visible = list(self.simple.values())
            if len(visible) > 1:
                visible.sort(key=_partition_of)
            self._visible = visible  # published once complete: see the module docstring
        return visible

    def pieces(self) -> list[tuple[Interval, SegmentRef]]:
        """``(interval, segment)`` for each visible segment: a whole chunk's part of a lookup."""
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


# Ordered sequences are kept in blocks of about BLOCK items (the layout of
# the sortedcontainers package): finding an instant is two bisections, and an
# insertion or a splice moves O(BLOCK + n / BLOCK) references rather than n,
# so a chunk added in the middle of a minute-grain year (525,600 chunks) costs
# what it costs at the end.
BLOCK = 512


def _blocked(items: list) -> list[list]:
    return [items[i : i + BLOCK] for i in range(0, len(items), BLOCK)]


class _Blocks:
    """Items with a ``start`` attribute, ordered by it, in non-empty blocks.

    Each block has the list of its items' starts beside it: a bisection of
    plain datetimes touches half the memory of one through the items (on a
    large timeline a lookup waits on memory more than it computes).
    """

    __slots__ = ("blocks", "starts", "firsts")

    def __init__(self, items: list | None = None) -> None:
        self.blocks: list[list] = _blocked(items) if items else []
        self.starts: list[list[datetime]] = [[x.start for x in b] for b in self.blocks]
        self.firsts: list[datetime] = [b[0] for b in self.starts]  # each block's first start

    def __iter__(self) -> Iterator:
        for block in self.blocks:
            yield from block

    def copy(self):
        new = object.__new__(type(self))
        new.blocks = [block[:] for block in self.blocks]
        new.starts = [starts[:] for starts in self.starts]
        new.firsts = self.firsts[:]
        return new

    def replace(self, item, by) -> None:
        """Put ``by`` where ``item`` (by identity, present) is; both start at the same instant."""
        blocks = self.blocks
        b, k = self.at_or_after(item.start)
        while True:
            if k == len(blocks[b]):
                b, k = b + 1, 0
            if blocks[b][k] is item:
                blocks[b][k] = by
                return
            k += 1

    def after(self, t: datetime) -> tuple[int, int]:
        """The position ``(block, index)`` of the first item starting after ``t``."""
        b = bisect_right(self.firsts, t) - 1
        if b < 0:
            return 0, 0
        return b, bisect_right(self.starts[b], t)

    def at_or_after(self, t: datetime) -> tuple[int, int]:
        """The position of the first item starting at or after ``t``."""
        b = bisect_left(self.firsts, t) - 1
        if b < 0:
            return 0, 0
        return b, bisect_left(self.starts[b], t)

    def items_from(self, b: int, k: int, end: datetime) -> Iterator:
        """The items from position ``(b, k)`` on that start before ``end``."""
        blocks = self.blocks
        while b < len(blocks):
            block = blocks[b]
            while k < len(block):
                item = block[k]
                if not item.start < end:
                    return
                yield item
                k += 1
            b, k = b + 1, 0

    def splice(self, b0: int, k0: int, b1: int, k1: int, new: list) -> None:
        """Replace the items from position ``(b0, k0)`` up to ``(b1, k1)`` with ``new`` (ordered, fitting there)."""
        blocks, starts, firsts = self.blocks, self.starts, self.firsts
        if not blocks:
            self.__init__(new)  # type: ignore[misc]
            return
        if b0 == b1:
            merged = blocks[b0]
            merged[k0:k1] = new
            if 0 < len(merged) <= 2 * BLOCK and (len(merged) >= BLOCK // 4 or len(blocks) == 1):
                block_starts = starts[b0]
                block_starts[k0:k1] = [x.start for x in new]
                if k0 == 0:
                    firsts[b0] = block_starts[0]
                return
        else:
            merged = blocks[b0][:k0] + new + blocks[b1][k1:]
        if len(merged) < BLOCK // 4 and b1 + 1 < len(blocks):  # too small: join the next block
            b1 += 1
            merged = merged + blocks[b1]
        pieces = _blocked(merged)
        piece_starts = [[x.start for x in piece] for piece in pieces]
        blocks[b0 : b1 + 1] = pieces
        starts[b0 : b1 + 1] = piece_starts
        firsts[b0 : b1 + 1] = [b[0] for b in piece_starts]

    def insert(self, item) -> None:
        b, k = self.after(item.start)
        self.splice(b, k, b, k, [item])

    def delete(self, item) -> None:
        """Remove ``item`` (by identity); it must be present."""
        blocks = self.blocks
        b, k = self.at_or_after(item.start)
        while True:
            if k == len(blocks[b]):
                b, k = b + 1, 0
            if blocks[b][k] is item:
                break
            k += 1
        self.splice(b, k, b, k + 1, [])


class _Run:
    """A stretch of time where a chunk is visible that is not the chunk's whole interval."""

    __slots__ = ("start", "end", "chunk")

    def __init__(self, start: datetime, end: datetime, chunk: _Chunk) -> None:
        self.start = start
        self.end = end
        self.chunk = chunk


def _chunk_of(run: _Chunk | _Run) -> _Chunk:
    return run if type(run) is _Chunk else run.chunk  # type: ignore[return-value]


def _run(start: datetime, end: datetime, chunk: _Chunk) -> _Chunk | _Run:
    # A run over its chunk's whole interval (the usual case) is the chunk itself.
    return chunk if start == chunk.start and end == chunk.end else _Run(start, end, chunk)


class _Runs(_Blocks):
    """The visible chunk over time: maximal, time-ordered, non-overlapping runs.

    Each item is a ``_Chunk`` (visible over its whole interval) or a ``_Run``.
    """

    __slots__ = ()

    def first_overlapping(self, t: datetime) -> tuple[int, int]:
        """The position of the first run ending after ``t``."""
        b, k = self.after(t)
        if k > 0 and self.blocks[b][k - 1].end > t:
            k -= 1
        return b, k

    def overlapping(self, start: datetime, end: datetime) -> Iterator[_Chunk | _Run]:
        b, k = self.first_overlapping(start)
        return self.items_from(b, k, end)

    def replace_chunk(self, chunk: _Chunk, by: _Chunk) -> None:
        """Show ``by`` wherever ``chunk`` is shown (the same interval, version and visibility)."""
        blocks = self.blocks
        b, k = self.first_overlapping(chunk.start)
        while b < len(blocks):
            block = blocks[b]
            while k < len(block):
                item = block[k]
                if not item.start < chunk.end:
                    return
                if item is chunk:
                    block[k] = by
                elif type(item) is _Run and item.chunk is chunk:
                    block[k] = _Run(item.start, item.end, by)
                k += 1
            b, k = b + 1, 0

    def repaint(self, start: datetime, end: datetime, candidates: list[_Chunk]) -> None:
        """Recompute the runs inside ``[start, end)`` from ``candidates`` (the eligible chunks overlapping it)."""
        blocks = self.blocks
        b0, k0 = self.first_overlapping(start)
        b1, k1 = self.at_or_after(end)
        old = list(self.items_from(b0, k0, end))
        new: list[tuple[datetime, datetime, _Chunk]] = []
        if old and old[0].start < start:  # keep the part of a run sticking out on the left
            new.append((old[0].start, start, _chunk_of(old[0])))
        for s, e, c in _paint(start, end, candidates):
            if new and new[-1][2] is c and new[-1][1] == s:
                new[-1] = (new[-1][0], e, c)
            else:
                new.append((s, e, c))
        if old and old[-1].end > end:  # and on the right
            c = _chunk_of(old[-1])
            if new and new[-1][2] is c and new[-1][1] == end:
                new[-1] = (new[-1][0], old[-1].end, c)
            else:
                new.append((end, old[-1].end, c))
        if new and blocks:
            # Merge with untouched neighbours that belong to the same chunk.
            nb, nk = (b1 + 1, 0) if k1 == len(blocks[b1]) else (b1, k1)
            if nb < len(blocks):
                after = blocks[nb][nk]
                if _chunk_of(after) is new[-1][2] and after.start == new[-1][1]:
                    new[-1] = (new[-1][0], after.end, new[-1][2])
                    b1, k1 = nb, nk + 1
            pb, pk = (b0 - 1, len(blocks[b0 - 1])) if k0 == 0 and b0 > 0 else (b0, k0)
            if pk > 0:
                before = blocks[pb][pk - 1]
                if _chunk_of(before) is new[0][2] and before.end == new[0][0]:
                    new[0] = (before.start, new[0][1], new[0][2])
                    b0, k0 = pb, pk - 1
        self.splice(b0, k0, b1, k1, [_run(s, e, c) for s, e, c in new])


def _paint(
    start: datetime, end: datetime, candidates: list[_Chunk]
) -> list[tuple[datetime, datetime, _Chunk]]:
    """Fill ``[start, end)`` with the highest-ranked candidate at each instant: time-ordered pieces.

    The candidates must overlap ``[start, end)``. Pieces of one chunk that
    meet are one piece.
    """
    if len(candidates) == 1:  # a chunk added where no other is (the next minute's, say)
        chunk = candidates[0]
        return [
            (
                chunk.start if chunk.start > start else start,
                chunk.end if chunk.end < end else end,
                chunk,
            )
        ]
    candidates = sorted(candidates, key=_start_of)
    reach = None
    for chunk in candidates:
        if reach is not None and chunk.start < reach:
            break
        reach = chunk.end
    else:  # no two candidates overlap: each shows where it is
        return [
            (
                chunk.start if chunk.start > start else start,
                chunk.end if chunk.end < end else end,
                chunk,
            )
            for chunk in candidates
        ]
    # A sweep over the boundaries, with the candidates present at the current
    # instant in a heap by rank (those that have ended leave it lazily).
    rank = {
        c: r for r, c in enumerate(sorted(candidates, key=attrgetter("version", "start", "end")))
    }
    points = sorted(
        {start, end}
        | {c.start for c in candidates if c.start > start}
        | {c.end for c in candidates if c.end < end}
    )
    heap: list[tuple[int, int]] = []
    pieces: list[tuple[datetime, datetime, _Chunk]] = []
    i, n = 0, len(candidates)
    for p in range(len(points) - 1):
        a = points[p]
        while i < n and candidates[i].start <= a:
            heappush(heap, (-rank[candidates[i]], i))
            i += 1
        while heap and candidates[heap[0][1]].end <= a:
            heappop(heap)
        if heap:
            chunk = candidates[heap[0][1]]
            b = points[p + 1]
            if pieces and pieces[-1][2] is chunk and pieces[-1][1] == a:
                pieces[-1] = (pieces[-1][0], b, chunk)
            else:
                pieces.append((a, b, chunk))
    return pieces


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


_MICROSECOND = timedelta(microseconds=1)
# _SPANS[c]: 2**c microseconds, longer than every chunk of length class c
# (capped at timedelta's maximum, which no chunk between MIN_TS and MAX_TS reaches).
_SPANS = [timedelta(microseconds=min(1 << c, 86_400_000_000 * 999_999_999)) for c in range(64)]


def _length_class(chunk: _Chunk) -> int:
    """``c`` such that the chunk lasts at least 2**(c-1) and less than 2**c microseconds."""
    return ((chunk.end - chunk.start) // _MICROSECOND).bit_length()


class _ChunkIndex:
    """Every chunk, by start, in classes of similar length, to find those overlapping a stretch of time.

    A chunk of class ``c`` that overlaps ``[s, e)`` starts after
    ``s - 2**c`` microseconds; within a class that window holds few chunks
    that end before ``s``, so a search costs O(log n + k) per class, however
    long the longest chunk is (a YEAR chunk over minute chunks included).
    """

    __slots__ = ("classes",)

    def __init__(self, ordered: list[_Chunk] | None = None) -> None:
        self.classes: dict[int, _Blocks] = {}
        if ordered:
            by_class: dict[int, list[_Chunk]] = {}
            for chunk in ordered:
                c = _length_class(chunk)
                found = by_class.get(c)
                if found is None:
                    by_class[c] = [chunk]
                else:
                    found.append(chunk)
            self.classes = {c: _Blocks(chunks) for c, chunks in by_class.items()}

    def add(self, chunk: _Chunk) -> None:
        c = _length_class(chunk)
        seq = self.classes.get(c)
        if seq is None:
            self.classes[c] = _Blocks([chunk])
        else:
            seq.insert(chunk)

    def copy(self) -> _ChunkIndex:
        new = _ChunkIndex()
        new.classes = {c: seq.copy() for c, seq in self.classes.items()}
        return new

    def replace(self, chunk: _Chunk, by: _Chunk) -> None:
        self.classes[_length_class(chunk)].replace(chunk, by)

    def remove(self, chunk: _Chunk) -> None:
        c = _length_class(chunk)
        seq = self.classes[c]
        seq.delete(chunk)
        if not seq.blocks:
            del self.classes[c]

    def overlapping(self, start: datetime, end: datetime) -> list[_Chunk]:
        out: list[_Chunk] = []
        for c, seq in self.classes.items():
            try:
                lowest = start - _SPANS[c]
            except OverflowError:
                lowest = MIN_TS
            b, k = seq.after(lowest)
            out.extend(chunk for chunk in seq.items_from(b, k, end) if chunk.end > start)
        return out


_gc_lock = threading.Lock()
_gc_pauses = 0  # builds under way that paused the collector
_gc_resume = False  # whether the collector was on when the first of them paused it


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a build (or a decode) allocates.

    A build makes a few long-lived objects per chunk and no garbage cycles,
    but the collector, triggered by every 700 allocations, walks the growing
    heap again and again: at 525,600 chunks that was half of the build's
    time. Concurrent builds nest; the collector is switched back on (if it
    was on) when the last one ends, even if it fails.

    What the pause made then goes straight to the oldest generation
    (`_promoted`), else the collector's next two young collections walk all of
    it (0.37 s after a 584,000-segment build) to find no garbage.
    """
    global _gc_pauses, _gc_resume
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_resume:
                _promoted()
                gc.enable()


def _promoted() -> None:
    """Every object the collector tracks moved to its oldest generation, without a
    walk: `gc.freeze` moves them all to the permanent generation and `gc.unfreeze`
    at once to the oldest. Nothing stays frozen, so nothing leaks: a cycle made
    meanwhile is found by the next full collection. Skipped if the process keeps
    objects frozen itself (unfreezing would undo that)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


class Timeline:
    """The visibility of one dataSource's used segments (SPEC §3).

    Build it with ``Timeline.build(segments)``, keep it current with ``add``
    and ``remove``, and ask ``lookup``, ``status``, ``visible_intervals``,
    ``overshadowed_by``, ``fully_overshadowed`` and ``chunk_complete``.

    Costs, for n chunks: ``build`` O(n log n) (O(n) when the segments come
    in time order); ``add`` and ``remove`` O(log n) plus the size of the
    chunk; ``lookup`` O(log n + k) for k pieces, after the refresh of what
    changed since the last read.
    """

    __slots__ = (
        "_by_id",
        "_built",
        "_chunks",
        "_index",
        "_complete_runs",
        "_all_runs",
        "_dirty",
        "_dirty_chunks",
        "_dirty_complete",
        "_dirty_all",
        "_lock",
        "_owned",
        "_tombstones",
    )

    def __init__(self) -> None:
        # Segments by id; after a build, None until first needed (a cold read that
        # only looks up time never needs it, and at 584,000 segments it costs as
        # much as the rest of the build): ``_built`` holds the segments till then.
        self._by_id: dict[str, SegmentRef] | None = {}
        self._built: list[SegmentRef] | None = None  # the build's, while nothing changed
        self._chunks: dict[tuple[datetime, datetime, str], _Chunk] = {}
        self._index = _ChunkIndex()
        self._complete_runs = _Runs()
        self._all_runs: _Runs | None = None  # built on the first include_incomplete lookup
        self._dirty = False  # whether any of the three below holds something
        self._dirty_chunks: dict[_Chunk, None] = {}
        self._dirty_complete: list[tuple[datetime, datetime]] = []
        self._dirty_all: list[tuple[datetime, datetime]] = []
        self._lock = threading.Lock()  # held by the refresh that a read may run
        # The chunks this timeline may change in place: None for all of them,
        # else (after ``copy``) only those it made or cloned; the others are
        # shared with another timeline.
        self._owned: set[_Chunk] | None = None
        # Whether a tombstone may be among the segments (None: not looked yet).
        self._tombstones: bool | None = None

    # ----------------------------------------------------------------- changes

    def copy(self) -> Timeline:
        """A timeline equal to this one; changing either never changes the other."""
        with self._lock:
            if self._dirty:
                self._refresh_locked()  # not _refresh: it would wait on this lock
            new = Timeline()
            new._by_id = dict(self._ids_locked())
            new._chunks = dict(self._chunks)
            new._index = self._index.copy()
            new._complete_runs = self._complete_runs.copy()
            if self._all_runs is not None:
                new._all_runs = self._all_runs.copy()
            # From now on both share every chunk: each clones one before changing it.
            self._owned = set()
            new._owned = set()
            new._tombstones = self._tombstones
        return new

    def _writable(self, chunk: _Chunk) -> _Chunk:
        """``chunk``, or a clone put in its place if it is shared with another timeline."""
        owned = self._owned
        if owned is None or chunk in owned:
            return chunk
        clone = chunk.clone()
        self._chunks[(chunk.start, chunk.end, chunk.version)] = clone
        self._index.replace(chunk, clone)
        self._complete_runs.replace_chunk(chunk, clone)
        if self._all_runs is not None:
            self._all_runs.replace_chunk(chunk, clone)
        owned.add(clone)
        return clone

    @classmethod
    def build(cls, segments: Iterable[SegmentRef]) -> Timeline:
        """A timeline of ``segments``; raises ValueError on a repeated id or partition."""
        with collector_paused():
            return cls._build(segments)

    @classmethod
    def _build(cls, segments: Iterable[SegmentRef]) -> Timeline:
        timeline = cls()
        segments = list(segments)
        if len(set(map(_id_of, segments))) != len(segments):
            _raise_repeated_id(segments)
        timeline._by_id, timeline._built = None, segments
        chunks = _chunks_of(segments)
        timeline._chunks = chunks
        ordered = sorted(chunks.values(), key=_start_of)
        for chunk in ordered:
            chunk.recompute()
        timeline._index = _ChunkIndex(ordered)
        complete = [c for c in ordered if c.complete]
        if complete:
            timeline._complete_runs = _Runs(_runs_of(complete))
        return timeline

    def add(self, seg: SegmentRef) -> None:
        """Add a used segment. Re-adding an identical segment does nothing; a changed one replaces it."""
        by_id = self._ids()
        self._built = None
        if seg.tombstone and self._tombstones is False:
            self._tombstones = True
        old = by_id.get(seg.id)
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
            if self._owned is not None:
                self._owned.add(chunk)
            self._index_chunk(chunk)
        else:
            chunk = self._writable(chunk)
        fast = chunk.can_absorb_add(seg)
        chunk.insert(seg)
        by_id[seg.id] = seg
        if fast:
            chunk.show_added(seg)
        else:
            chunk.clean = False
            self._dirty_chunks[chunk] = None
            self._dirty = True

    def remove(self, seg_id: str) -> None:
        """Remove a segment (it became unused); KeyError if it is not in the timeline."""
        seg = self._ids().pop(seg_id, None)
        self._built = None
        if seg is None:
            raise KeyError(f"segment {seg_id} is not in the timeline")
        interval = seg.interval
        key = (interval.start, interval.end, seg.version)
        chunk = self._writable(self._chunks[key])
        fast = chunk.can_absorb_remove(seg)
        chunk.delete(seg)
        if len(chunk):
            if fast:
                chunk.hide_removed(seg)
            else:
                chunk.clean = False
                self._dirty_chunks[chunk] = None
                self._dirty = True
            return
        del self._chunks[key]
        self._dirty_chunks.pop(chunk, None)
        if self._owned is not None:
            self._owned.discard(chunk)
        self._unindex_chunk(chunk)
        if chunk.complete:
            self._dirty_complete.append((chunk.start, chunk.end))
            self._dirty = True

    def _index_chunk(self, chunk: _Chunk) -> None:
        self._index.add(chunk)
        if self._all_runs is not None:
            self._dirty_all.append((chunk.start, chunk.end))
            self._dirty = True

    def _unindex_chunk(self, chunk: _Chunk) -> None:
        self._index.remove(chunk)
        if self._all_runs is not None:
            self._dirty_all.append((chunk.start, chunk.end))
            self._dirty = True

    def _refresh(self) -> None:
        """Bring cached visibility up to date after add/remove (readers may call it at once)."""
        if not self._dirty:
            return
        with self._lock:
            if self._dirty:  # another reader may have done it while this one waited
                self._refresh_locked()

    def _refresh_locked(self) -> None:
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
                    s, e, [c for c in self._index.overlapping(s, e) if c.complete]
                )
            self._dirty_complete.clear()
        if self._dirty_all and self._all_runs is not None:
            for s, e in _merge_regions(self._dirty_all):
                self._all_runs.repaint(s, e, self._index.overlapping(s, e))
            self._dirty_all.clear()
        self._dirty = False

    def _runs(self, include_incomplete: bool) -> _Runs:
        if self._dirty:
            self._refresh()
        if not include_incomplete:
            return self._complete_runs
        runs = self._all_runs
        if runs is None:
            with self._lock:
                runs = self._all_runs
                if runs is None:
                    ordered = sorted(self._chunks.values(), key=_start_of)
                    runs = _Runs(_runs_of(ordered))
                    self._dirty_all.clear()
                    self._all_runs = runs  # published once complete
        return runs

    # ------------------------------------------------------------------- reads

    def _ids(self) -> dict[str, SegmentRef]:
        by_id = self._by_id
        if by_id is None:
            with self._lock:
                by_id = self._ids_locked()
        return by_id

    def _ids_locked(self) -> dict[str, SegmentRef]:
        by_id = self._by_id
        if by_id is None:
            built = self._built
            assert built is not None
            by_id = dict(zip(map(_id_of, built), built, strict=True))
            self._by_id = by_id  # published once complete
        return by_id

    def __len__(self) -> int:
        by_id = self._by_id
        return len(by_id) if by_id is not None else len(self._built)  # type: ignore[arg-type]

    def __contains__(self, seg_id: object) -> bool:
        return seg_id in self._ids()

    def __repr__(self) -> str:
        return f"<Timeline: {len(self)} segments in {len(self._chunks)} chunks>"

    def segments(self) -> Iterator[SegmentRef]:
        """Every segment in the timeline, visible or not (no particular order)."""
        by_id = self._by_id
        if by_id is None:  # then nothing changed since the build: ``_built`` holds them
            return iter(self._built)  # type: ignore[arg-type]
        return iter(by_id.values())

    def get(self, seg_id: str) -> SegmentRef | None:
        return self._ids().get(seg_id)

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
        if self._dirty or include_incomplete:
            runs = self._runs(include_incomplete)
        else:
            runs = self._complete_runs
        qs, qe = interval.start, interval.end
        out: list[tuple[Interval, SegmentRef]] = []
        if not qs < qe:
            return out
        # runs.first_overlapping(qs) and items_from(), inlined: this is the hot path.
        blocks = runs.blocks
        b = bisect_right(runs.firsts, qs) - 1
        if b < 0:
            b = k = 0
        else:
            k = bisect_right(runs.starts[b], qs)
            if blocks[b][k - 1].end > qs:
                k -= 1
        while b < len(blocks):
            block = blocks[b]
            for i in range(k, len(block)):
                run = block[i]
                s = run.start
                if not s < qe:
                    return out
                e = run.end
                if type(run) is _Chunk and qs <= s and e <= qe:
                    # The common case: a whole chunk. Its pieces are cached,
                    # unless it shows one simple segment: a minute-grain
                    # timeline would keep a list per minute for no gain.
                    pieces = run._pieces
                    if pieces is None:
                        simple = run.simple
                        if len(simple) == 1 and run._visible is None:
                            out.append((run.interval, *simple.values()))
                            continue
                        pieces = run.pieces()
                    out.extend(pieces)
                    continue
                chunk = run if type(run) is _Chunk else run.chunk
                piece = Interval(s if s > qs else qs, e if e < qe else qe)
                out.extend([(piece, seg) for seg in chunk.visible])
            b, k = b + 1, 0
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
        seg = self._ids().get(seg_id)
        if seg is None:
            raise KeyError(f"segment {seg_id} is not in the timeline")
        self._refresh()
        interval = seg.interval
        return seg, self._chunks[(interval.start, interval.end, seg.version)]

    def _own_runs(self, chunk: _Chunk) -> list[tuple[datetime, datetime]]:
        return [
            (run.start, run.end)
            for run in self._complete_runs.overlapping(chunk.start, chunk.end)
            if _chunk_of(run) is chunk
        ]

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
        out: set[str] = set()
        roots = seg.roots
        rank = chunk.rank
        for run in self._complete_runs.overlapping(chunk.start, chunk.end):
            other = _chunk_of(run)
            if other is chunk:
                if not shown_here:
                    out.update(s.id for s in other.visible if not s.roots.isdisjoint(roots))
            elif other.rank > rank:
                out.update(other.visible_ids())
        return out

    def fully_overshadowed(self) -> set[str]:
        """Ids of the segments visible at no instant of their interval (SPEC §3).

        This includes the segments of an incomplete chunk that nothing newer
        covers: they are not visible anywhere either. ``overshadowed_by`` is
        empty for those, and non-empty for segments that newer data replaces.
        """
        runs = self._runs(False)
        on_view = {_chunk_of(run) for run in runs}
        out: set[str] = set()
        for chunk in self._chunks.values():
            if chunk in on_view:
                shown = chunk.visible_ids()
                out.update(s.id for s in chunk.segments() if s.id not in shown)
            else:
                out.update(s.id for s in chunk.segments())
        return out

    def chunk_visibility(
        self, start: datetime | None = None, end: datetime | None = None
    ) -> list[ChunkVisibility]:
        """Every chunk (those overlapping [start, end) if given), no particular order:
        its visible segments and for how long it shows them. A segment of a complete
        chunk is visible when the chunk shows it for the whole interval, partial when
        for part of it, else overshadowed; all of an incomplete chunk's are neither.
        O(chunks + runs): no segment is looked at."""
        runs = self._runs(False)
        zero = timedelta(0)
        tombstones = self._tombstones
        if tombstones is None:  # one pass in C, then none per chunk when there are none
            tombstones = self._tombstones = any(map(_tombstone_of, self.segments()))
        if start is None or end is None:
            chunks: Iterable[_Chunk] = self._chunks.values()
            shown: dict[_Chunk, timedelta] = {}
            for run in runs:
                chunk = _chunk_of(run)
                shown[chunk] = shown.get(chunk, zero) + (run.end - run.start)
        else:
            chunks = self._index.overlapping(start, end)
            shown = {
                chunk: sum((e - s for s, e in self._own_runs(chunk)), zero)
                for chunk in chunks
                if chunk.complete
            }
        return [
            ChunkVisibility(
                chunk.interval,
                chunk.version,
                len(chunk),
                chunk.complete,
                chunk.visible if chunk.complete else [],
                shown.get(chunk, zero),
                None if tombstones else 0,
                chunk.segments,
            )
            for chunk in chunks
        ]

    def chunk_complete(self, key: tuple[Interval, str]) -> bool:
        """Whether the chunk ``(interval, version)`` is complete (rule 4); False if it has no segments."""
        interval, version = key
        chunk = self._chunks.get((interval.start, interval.end, version))
        if chunk is None:
            return False
        self._refresh()
        return chunk.complete


_id_of = attrgetter("id")
_tombstone_of = attrgetter("tombstone")


def _raise_repeated_id(segments: list[SegmentRef]) -> None:
    seen: set[str] = set()
    for seg in segments:
        if seg.id in seen:
            raise ValueError(f"segment id {seg.id} appears twice")
        seen.add(seg.id)


def _chunks_of(segments: list[SegmentRef]) -> dict[tuple[datetime, datetime, str], _Chunk]:
    """The chunks of ``segments`` (ids known distinct), by (start, end, version),
    not recomputed yet; ValueError if two claim one partition of a chunk.

    The hot loop of a build: the bulk of the segments are simple (``_is_simple``)
    with default partition sets and go straight into their chunk's ``simple``
    map; the largest core set of each chunk is counted once at its recompute."""
    chunks: dict[tuple[datetime, datetime, str], _Chunk] = {}
    chunk: _Chunk | None = None
    simple: dict[int, SegmentRef] = {}
    last_interval: Interval | None = None
    last_version: str | None = None
    for seg in segments:
        interval, version = seg.interval, seg.version
        # Segments usually arrive chunk by chunk, sharing these objects.
        if interval is not last_interval or version is not last_version:
            key = (interval.start, interval.end, version)
            chunk = chunks.get(key)
            if chunk is None:
                chunk = chunks[key] = _Chunk(interval, version)
                chunk.core_stale = True
            simple = chunk.simple
            last_interval, last_version = interval, version
        p = seg.partition
        if (
            seg.root_partitions is None
            and seg.atomic_update_group is None
            and seg.minor_version == 0
            and p not in simple
            and (chunk.owner is _NO_OWNERS or p not in chunk.owner)  # type: ignore[union-attr]
        ):
            simple[p] = seg
            continue
        chunk.insert(seg)  # type: ignore[union-attr]
    return chunks


def _runs_of(ordered: list[_Chunk]) -> list[_Chunk | _Run]:
    """The runs of ``ordered`` (chunks sorted by start, all eligible) over all time."""
    reach = None
    for chunk in ordered:
        if reach is not None and chunk.start < reach:
            break
        reach = chunk.end
    else:  # no two overlap (the usual case): each chunk is its own run
        return ordered
    pieces = _paint(ordered[0].start, max(c.end for c in ordered), ordered)
    return [_run(s, e, c) for s, e, c in pieces]
