"""A compact byte form of a set of SegmentRefs, for timeline checkpoints.

Pure core: standard library, ``metastore.intervals`` and ``metastore.timeline``.

A checkpoint holds what ``Timeline.build`` needs (never what it derives), so a
timeline rebuilt from one equals a timeline built from the segment rows, and a
change to the timeline engine cannot make a stored checkpoint wrong.

Layout (zlib-compressed after a 4-byte magic): a JSON header with the distinct
intervals (epoch microseconds), versions and partition sets, the ids joined by
NUL (PostgreSQL text cannot hold one), then one column per field as a packed
little-endian array of indexes or integers. Decoding is C-speed except for one
``SegmentRef(...)`` call per segment; no datetime is parsed per segment.
"""

from __future__ import annotations

import json
import struct
import sys
import zlib
from array import array
from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import repeat

from metastore.intervals import Interval
from metastore.timeline import REF_FIELDS, SegmentRef, collector_paused

__all__ = ["decode_refs", "encode_refs"]

_MAGIC = b"STC1"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SWAP = sys.byteorder != "little"
# interval, version, partition, minor_version, roots (0 = None), aug (0 = None), core
_INT_COLUMNS = 7
_PROBE = Interval(_EPOCH, _EPOCH + timedelta(microseconds=1))


def _micros(ts: datetime) -> int:
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def encode_refs(refs: Iterable[SegmentRef]) -> bytes:
    """The checkpoint bytes of ``refs`` (any order; decoded in the same order)."""
    intervals: dict[Interval, int] = {}
    versions: dict[str, int] = {}
    sets: dict[frozenset[int], int] = {}
    ids: list[str] = []
    cols = [array("q") for _ in range(_INT_COLUMNS)]
    tombstones = bytearray()
    for ref in refs:
        if "\0" in ref.id:
            raise ValueError(f"segment id {ref.id!r} holds a NUL character")
        ids.append(ref.id)
        cols[0].append(intervals.setdefault(ref.interval, len(intervals)))
        cols[1].append(versions.setdefault(ref.version, len(versions)))
        cols[2].append(ref.partition)
        cols[3].append(ref.minor_version)
        for col, value in ((cols[4], ref.root_partitions), (cols[5], ref.atomic_update_group)):
            col.append(0 if value is None else sets.setdefault(value, len(sets) + 1))
        cols[6].append(ref.core_partitions)
        tombstones.append(1 if ref.tombstone else 0)
    header = json.dumps(
        {
            "n": len(ids),
            "intervals": [[_micros(iv.start), _micros(iv.end)] for iv in intervals],
            "versions": list(versions),
            "sets": [sorted(s) for s in sets],
        },
        separators=(",", ":"),
    ).encode()
    joined = "\0".join(ids).encode()
    parts = [struct.pack("<II", len(header), len(joined)), header, joined]
    for col in cols:
        if _SWAP:
            col.byteswap()
        parts.append(col.tobytes())
    parts.append(bytes(tombstones))
    return _MAGIC + zlib.compress(b"".join(parts), 1)


def _columns(data: bytes):
    """(header, ids, integer columns, tombstone flags) of a checkpoint's body."""
    data = bytes(data)
    if data[:4] != _MAGIC:
        raise ValueError("not a timeline checkpoint (unknown format)")
    body = zlib.decompress(data[4:])
    header_len, ids_len = struct.unpack_from("<II", body)
    pos = 8
    header = json.loads(body[pos : pos + header_len])
    pos += header_len
    n = header["n"]
    ids = body[pos : pos + ids_len].decode().split("\0") if n else []
    pos += ids_len
    cols = []
    for _ in range(_INT_COLUMNS):
        col = array("q")
        col.frombytes(body[pos : pos + 8 * n])
        if _SWAP:
            col.byteswap()
        cols.append(col)
        pos += 8 * n
    tombstones = body[pos : pos + n]
    if len(ids) != n or len(tombstones) != n:
        raise ValueError("timeline checkpoint is truncated")
    return header, ids, cols, tombstones


def decode_refs(data: bytes) -> list[SegmentRef]:
    """The SegmentRefs that ``encode_refs`` stored in ``data``; ValueError if it is not a checkpoint."""
    with collector_paused():  # hundreds of thousands of objects, no cycles (as a build)
        return _decoded(*_columns(data))


def _decoded(header, ids, cols, tombstones) -> list[SegmentRef]:
    n = len(ids)
    epoch = _EPOCH
    intervals = [
        Interval(epoch + timedelta(microseconds=s), epoch + timedelta(microseconds=e))
        for s, e in header["intervals"]
    ]
    versions = header["versions"]
    # The timeline shares equal partition sets: hand it its own shared copies, so that
    # each segment's lookup of its sets finds them by identity, not by comparing them.
    sets: list[frozenset[int] | None] = [None]
    for values in header["sets"]:
        probe = SegmentRef("", _PROBE, "", 0, root_partitions=frozenset(values))
        sets.append(probe.root_partitions)
    columns = (
        ids,
        map(intervals.__getitem__, cols[0]),
        map(versions.__getitem__, cols[1]),
        cols[2],
        cols[3],
        map(sets.__getitem__, cols[4]),
        map(sets.__getitem__, cols[5]),
        cols[6],
        map(bool, tombstones),
    )
    if n and (min(cols[2]) < 0 or min(cols[3]) < 0 or min(cols[6]) < 0):
        raise ValueError("timeline checkpoint holds a negative partition number")
    if any(not iv.start < iv.end for iv in intervals):
        raise ValueError("timeline checkpoint holds an empty interval")
    if _SETTERS is None:
        return [SegmentRef(*values) for values in zip(*columns, strict=True)]
    return _filled(columns)


def _filled(columns) -> list[SegmentRef]:
    # What SegmentRef.__post_init__ checks was checked above, column by column, and
    # its sets are already the shared ones: fill the slots directly, one column at
    # a time, each in a loop that runs in C (a quarter of the constructor's time).
    n = len(columns[0])
    refs = list(map(object.__new__, repeat(SegmentRef, n)))
    for setter, column in zip(_SETTERS, columns, strict=True):
        deque(map(setter, refs, column), maxlen=0)
    return refs


def _slot_setters():
    """The slot setters of SegmentRef's fields, if it is still the plain slotted
    dataclass this module knows (else None: decode then calls the constructor)."""
    import dataclasses

    names = REF_FIELDS
    try:
        if tuple(f.name for f in dataclasses.fields(SegmentRef)) != names:
            return None
        if tuple(SegmentRef.__slots__) != names or SegmentRef.__new__ is not object.__new__:
            return None
        return tuple(SegmentRef.__dict__[name].__set__ for name in names)
    except (TypeError, AttributeError, KeyError):
        return None


_SETTERS = _slot_setters()
