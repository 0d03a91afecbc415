"""The publish-time rules that keep concurrent appends and replaces from losing
rows (SPEC §5), free of Django and Spark.

Two publishes copy appended segments onto a replace's version:

- a REPLACE publish *upgrades* every segment appended into its intervals after
  its lock was granted (:func:`replace_upgrades`);
- an APPEND publish *carries* its own new segments onto every newer chunk a
  replace committed over them meanwhile (:func:`append_carry_overs`).

A copy shares its source's file and takes the target chunk's interval; reads
filter a copy's rows to its visible part, so a copy shows exactly the file's
rows inside its interval, and that is what it must claim (:func:`copy_figures`).
The services read the facts inside the dataSource's critical section, ask these
functions what to copy where, then number and write the copies;
tests/test_upgrade_reference.py checks the publish service against them on
random histories.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from metastore.intervals import Interval


@dataclass(frozen=True)
class Source:
    """A used, non-tombstone segment that may be copied onto a replace's version."""

    id: str
    interval: Interval
    version: str
    original: str  # the segment whose file it reads: itself, or what it was upgraded from
    committed_seq: int = 0  # the commit that added it
    num_rows: int = 0
    size_bytes: int = 0

    @property
    def is_copy(self) -> bool:
        return self.original != self.id


@dataclass(frozen=True)
class ReplaceLock:
    """One of the publishing task's REPLACE locks."""

    interval: Interval
    version: str
    granted_seq: int


@dataclass(frozen=True)
class Chunk:
    """A chunk `(interval, version)` of the publish or of the timeline."""

    interval: Interval
    version: str


@dataclass(frozen=True)
class Copy:
    """Copy `source` onto the chunk `(interval, version)`."""

    source: Source
    interval: Interval
    version: str


def replace_upgrades(
    *,
    locks: Sequence[ReplaceLock],
    committed: Iterable[Source],
    published: Iterable[Chunk],
) -> list[Copy]:
    """What a REPLACE publish copies onto its version (SPEC §5).

    `committed`: the used, non-tombstone segments other tasks' publishes added
    after the earliest of `locks` was granted (copies included); `published`:
    the chunks this publish writes. An append and the copies made of it are
    one set of rows: each original is upgraded once, by its copy of the highest
    version. It is upgraded by the first lock that contains it, was granted
    before it committed and has a higher version. If the publish has a chunk of
    the source's interval at that version, the copy goes there; else it goes
    onto each chunk of the publish at that version overlapping the source (the
    replace's chunks cut across the append's: another granularity).
    """
    newest: dict[str, Source] = {}
    for source in sorted(committed, key=lambda s: (s.version, s.id)):
        newest[source.original] = source
    published = set(published)
    out: list[Copy] = []
    for source in sorted(newest.values(), key=lambda s: (s.interval.start, s.id)):
        lock = next(
            (
                lk
                for lk in locks
                if lk.interval.contains(source.interval) and lk.granted_seq < source.committed_seq
            ),
            None,
        )
        if lock is None or source.version >= lock.version:
            continue
        if Chunk(source.interval, lock.version) in published:
            out.append(Copy(source, source.interval, lock.version))
            continue
        targets = sorted(
            {
                c.interval
                for c in published
                if c.version == lock.version and c.interval.overlaps(source.interval)
            },
            key=lambda iv: (iv.start, iv.end),
        )
        out += [Copy(source, interval, lock.version) for interval in targets]
    return out


def append_carry_overs(
    *, published: Iterable[Source], visible: Mapping[str, Iterable[Chunk]]
) -> list[Copy]:
    """What an APPEND publish copies onto newer chunks (SPEC §5): each of its new
    root segments (no tombstone, minor version 0) onto every chunk visible over
    it now whose version is higher than its own (a replace committed there while
    it ran). `visible[segment id]`: the chunks visible over that segment's
    interval, before this publish."""
    out = []
    for source in published:
        newer = sorted(
            {c for c in visible.get(source.id, ()) if c.version > source.version},
            key=lambda c: (c.interval.start, c.version),
        )
        out += [Copy(source, c.interval, c.version) for c in newer]
    return out


@dataclass(frozen=True)
class FileFacts:
    """A segment file: its rows, its bytes, and its rows inside given intervals."""

    rows: int
    size_bytes: int
    rows_in: Mapping[Interval, int]


def needs_count(copy: Copy) -> bool:
    """Whether a copy's row count must be read from its file: unless its source
    is an original (its file holds exactly its rows, all inside its interval)
    and the copy's interval contains the source's, the copy shows only part of
    the file (or, copying a copy, more than its source showed)."""
    return copy.source.is_copy or not copy.interval.contains(copy.source.interval)


def copy_figures(copy: Copy, file: FileFacts | None) -> tuple[int, int]:
    """The `(num_rows, size_bytes)` a copy claims: the rows of its file inside
    its interval, and that share of the file's bytes. Without the file's facts
    (a file that cannot be read) the source's own figures are kept."""
    if not needs_count(copy) or file is None:
        return copy.source.num_rows, copy.source.size_bytes
    rows = file.rows_in[copy.interval]
    size = round(file.size_bytes * rows / file.rows) if file.rows else 0
    return rows, size


def shows_rows(copy: Copy, file: FileFacts | None) -> bool:
    """A copy that shows no row of its file is not made (a DAY append carried
    onto a replace's HOUR chunks lands only in the hours it has rows in)."""
    return not needs_count(copy) or file is None or file.rows_in[copy.interval] > 0
