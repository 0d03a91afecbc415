"""A compact byte form of a set of SegmentRefs, for timeline checkpoints.

Pure core: standard library, ``metastore.intervals`` and ``metastore.timeline``.

A checkpoint holds what ``Timeline.build`` needs (never what it derives), so a
timeline rebuilt from one equals a timeline built from the segment rows, and a
change to the timeline engine cannot make a stored checkpoint wrong.

Layout (zlib-compressed after a 4-byte magic, ``STC2``): the segments grouped
by chunk (interval, version), in the order each chunk first appears. A JSON
header holds the distinct intervals (epoch microseconds), versions and
partition sets, and per chunk its interval, version, segment count and the id
base its segments' ids are built from (Druid's ``<base>`` or ``<base>_<partition>``);
only the ids that do not follow it are stored (their positions, then the ids
joined by NUL, which PostgreSQL text cannot hold). Then one column per integer
field as a packed little-endian array of the narrowest unsigned width that holds
it, and one byte per tombstone flag. Decoding is C-speed except for the filling
of each SegmentRef; no datetime is parsed and no id is stored per segment.
Checkpoints of the first layout (``STC1``: every id, 8-byte columns, in the
given order) still decode.
"""

from __future__ import annotations

import json
import struct
import sys
import zlib
from array import array
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import chain, repeat

from metastore.intervals import Interval
from metastore.timeline import SegmentRef, collector_paused

__all__ = ["decode_refs", "encode_refs"]

_MAGIC = b"STC1"  # the first layout: read, no longer written
_MAGIC_V2 = b"STC2"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SWAP = sys.byteorder != "little"
# interval, version, partition, minor_version, roots (0 = None), aug (0 = None), core
_INT_COLUMNS = 7
# partition, minor_version, roots (0 = None), aug (0 = None), core
_V2_COLUMNS = 5
_WIDTHS = ("B", "H", "I", "Q")
_PROBE = Interval(_EPOCH, _EPOCH + timedelta(microseconds=1))


def _micros(ts: datetime) -> int:
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def encode_refs(refs: Iterable[SegmentRef]) -> bytes:
    """The checkpoint bytes of ``refs``: decoded grouped by chunk, the chunks in
    the order they first appear in ``refs``, each chunk's in their given order."""
    chunks: dict[tuple[Interval, str], list[SegmentRef]] = {}
    for ref in refs:
        if "\0" in ref.id:
            raise ValueError(f"segment id {ref.id!r} holds a NUL character")
        chunks.setdefault((ref.interval, ref.version), []).append(ref)
    intervals: dict[Interval, int] = {}
    versions: dict[str, int] = {}
    sets: dict[frozenset[int], int] = {}
    table, explicit, stored = [], array("Q"), []
    fields: list[list[int]] = [[] for _ in range(_V2_COLUMNS)]
    tombstones = bytearray()
    for (interval, version), members in chunks.items():
        base = _id_base(members[0])
        table.append(
            [
                intervals.setdefault(interval, len(intervals)),
                versions.setdefault(version, len(versions)),
                len(members),
                base,
            ]
        )
        for ref in members:
            if base is None or ref.id != base + _suffix(ref.partition):
                explicit.append(len(tombstones))
                stored.append(ref.id)
            _append_fields(fields, ref, sets)
            tombstones.append(1 if ref.tombstone else 0)
    header = {
        "n": len(tombstones),
        "intervals": [[_micros(iv.start), _micros(iv.end)] for iv in intervals],
        "versions": list(versions),
        "sets": [sorted(s) for s in sets],
        "chunks": table,
    }
    return _packed_v2(header, explicit, stored, fields, tombstones)


def _suffix(partition: int) -> str:
    return f"_{partition}" if partition else ""


def _id_base(ref: SegmentRef) -> str | None:
    """The base of ``ref``'s id if it is ``<base>_<partition>`` (or ``<base>`` for
    partition 0), as Druid's segment ids are; else None."""
    suffix = _suffix(ref.partition)
    return ref.id[: len(ref.id) - len(suffix)] if ref.id.endswith(suffix) else None


def _append_fields(fields: list[list[int]], ref: SegmentRef, sets: dict) -> None:
    fields[0].append(ref.partition)
    fields[1].append(ref.minor_version)
    for col, value in ((fields[2], ref.root_partitions), (fields[3], ref.atomic_update_group)):
        col.append(0 if value is None else sets.setdefault(value, len(sets) + 1))
    fields[4].append(ref.core_partitions)


def _packed_v2(header: dict, explicit: array, stored: list[str], fields, tombstones) -> bytes:
    columns = [explicit] + [array(_width(values), values) for values in fields]
    header["widths"] = [col.typecode for col in columns]
    header["explicit"] = len(explicit)
    head = json.dumps(header, separators=(",", ":")).encode()
    joined = "\0".join(stored).encode()
    parts = [struct.pack("<II", len(head), len(joined)), head, joined]
    for col in columns:
        if _SWAP:
            col.byteswap()
        parts.append(col.tobytes())
    parts.append(bytes(tombstones))
    return _MAGIC_V2 + zlib.compress(b"".join(parts), 1)


def _width(values: list[int]) -> str:
    """The narrowest unsigned array typecode that holds every one of ``values``."""
    top = max(values, default=0)
    for code in _WIDTHS:
        if top < 1 << (8 * array(code).itemsize):
            return code
    raise ValueError(f"checkpoint field value {top} does not fit 64 bits")


def decode_refs(data: bytes) -> list[SegmentRef]:
    """The SegmentRefs that ``encode_refs`` stored in ``data``; ValueError if it is not a checkpoint."""
    data = bytes(data)
    with collector_paused():  # hundreds of thousands of objects, no cycles (as a build)
        if data[:4] == _MAGIC_V2:
            return _decoded_v2(*_columns_v2(data))
        if data[:4] == _MAGIC:
            return _decoded(*_columns(data))
    raise ValueError("not a timeline checkpoint (unknown format)")


def _body(data: bytes):
    """(header, the stored ids, the position after them, the body) of a checkpoint."""
    body = zlib.decompress(data[4:])
    header_len, ids_len = struct.unpack_from("<II", body)
    pos = 8
    header = json.loads(body[pos : pos + header_len])
    pos += header_len
    raw = body[pos : pos + ids_len]
    ids = raw.decode().split("\0") if raw else []
    return header, ids, pos + ids_len, body


def _column(body: bytes, pos: int, code: str, count: int) -> array:
    if code not in _WIDTHS and code != "q":
        raise ValueError(f"timeline checkpoint column of unknown width {code!r}")
    col = array(code)
    col.frombytes(body[pos : pos + col.itemsize * count])
    if _SWAP:
        col.byteswap()
    if len(col) != count:
        raise ValueError("timeline checkpoint is truncated")
    return col


def _columns(data: bytes):
    """(header, ids, integer columns, tombstone flags) of a first-layout body."""
    header, ids, pos, body = _body(data)
    n = header["n"]
    cols = []
    for _ in range(_INT_COLUMNS):
        cols.append(_column(body, pos, "q", n))
        pos += 8 * n
    tombstones = body[pos : pos + n]
    if len(ids) != n or len(tombstones) != n:
        raise ValueError("timeline checkpoint is truncated")
    return header, ids, cols, tombstones


def _columns_v2(data: bytes):
    """(header, the ids that do not follow their chunk's base, integer columns,
    tombstone flags) of an ``STC2`` body."""
    header, stored, pos, body = _body(data)
    n, widths = header["n"], header["widths"]
    counts = [header["explicit"]] + [n] * _V2_COLUMNS
    if len(widths) != len(counts) or len(stored) != header["explicit"]:
        raise ValueError("timeline checkpoint is truncated")
    cols = []
    for code, count in zip(widths, counts, strict=True):
        cols.append(_column(body, pos, code, count))
        pos += cols[-1].itemsize * count
    tombstones = body[pos : pos + n]
    if len(tombstones) != n or sum(chunk[2] for chunk in header["chunks"]) != n:
        raise ValueError("timeline checkpoint is truncated")
    return header, stored, cols, tombstones


def _intervals(header) -> list[Interval]:
    epoch = _EPOCH
    intervals = [
        Interval(epoch + timedelta(microseconds=s), epoch + timedelta(microseconds=e))
        for s, e in header["intervals"]
    ]
    if any(not iv.start < iv.end for iv in intervals):
        raise ValueError("timeline checkpoint holds an empty interval")
    return intervals


def _shared_sets(header) -> list[frozenset[int] | None]:
    """None, then the header's partition sets as the timeline shares them: its
    own shared copies, so that each segment's lookup of its sets finds them by
    identity, not by comparing them."""
    sets: list[frozenset[int] | None] = [None]
    for values in header["sets"]:
        probe = SegmentRef("", _PROBE, "", 0, root_partitions=frozenset(values))
        sets.append(probe.root_partitions)
    return sets


def _decoded(header, ids, cols, tombstones) -> list[SegmentRef]:
    n = len(ids)
    intervals = _intervals(header)
    versions = header["versions"]
    sets = _shared_sets(header)
    if n and (min(cols[2]) < 0 or min(cols[3]) < 0 or min(cols[6]) < 0):
        raise ValueError("timeline checkpoint holds a negative partition number")
    return _made(
        (
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
    )


def _decoded_v2(header, stored, cols, tombstones) -> list[SegmentRef]:
    explicit, partitions, minors, roots, augs, cores = cols
    intervals = _intervals(header)
    versions = header["versions"]
    sets = _shared_sets(header)
    table = header["chunks"]
    return _made(
        (
            _ids(table, partitions, explicit, stored),
            chain.from_iterable(repeat(intervals[i], k) for i, _, k, _ in table),
            chain.from_iterable(repeat(versions[v], k) for _, v, k, _ in table),
            partitions,
            minors,
            map(sets.__getitem__, roots),
            map(sets.__getitem__, augs),
            cores,
            map(bool, tombstones),
        )
    )


def _ids(table, partitions: array, explicit: array, stored: list[str]) -> list[str]:
    """Every segment's id: its chunk's base and its partition's suffix, but where
    one was stored (in C but for the few stored ones and the distinct partitions)."""
    suffixes = {p: _suffix(p) for p in set(partitions)}
    bases = chain.from_iterable(repeat(base or "", k) for _, _, k, base in table)
    ids = list(map(str.__add__, bases, map(suffixes.__getitem__, partitions)))
    for pos, sid in zip(explicit, stored, strict=True):
        ids[pos] = sid
    return ids


def _made(columns) -> list[SegmentRef]:
    """The SegmentRefs of the field columns (in REF_FIELDS order). What the
    constructor checks was checked above, column by column, and the sets are
    already the shared ones: each ref is made in C from its fields."""
    return list(map(tuple.__new__, repeat(SegmentRef), zip(*columns, strict=True)))
