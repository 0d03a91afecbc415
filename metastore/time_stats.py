"""What a native query needs of a table's `__time` without reading its rows: the
Parquet footers' statistics of each file's least and greatest `__time`.

A granularity-`all` timeseries or topN is stamped as Druid stamps it (`stamp_ms`):
each segment's cursor covers the query interval cut to the segment's visible part
and to [the segment's first row, +∞), and its one bucket is stamped with that
interval's start, whether the filter matches rows or not; the broker keeps the
earliest. That is the segment's least `__time` over all its rows, not the first
row within the intervals, so the footers answer it exactly. Segment files are
immutable, so a file's span is kept by path, in process memory, with a bound. A
file whose footer does not say (no statistics) has its `__time` read instead.

The same spans say when every visible row of a table is within a query's intervals
(`within`): the query's filter by time would keep them all, and costs a read of
`__time` and a comparison per row (more than half of a year's topN on flights).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from metastore.intervals import MAX_TS, MIN_TS, Interval
from metastore.sql_sources import TableSource
from metastore.sql_sources import within as within_span

__all__ = ["cut_to", "rows_within", "stamp_ms", "within"]

_UNITS = {"milliseconds": 1_000, "microseconds": 1, "nanoseconds": None}  # -> per µs
_KEPT_FILES = 100_000
_KEPT_ANSWERS = 256
_lock = threading.Lock()
# path -> (least, greatest) `__time` in epoch µs and whether it may be null; None: unknown
_spans: dict[str, tuple[int, int, bool] | None] = {}
_answers: dict[tuple, tuple[tuple[TableSource, ...], object]] = {}

_NEG_INF, _POS_INF = -(2**63), 2**63
_EPOCH, _MICRO = datetime(1970, 1, 1, tzinfo=UTC), timedelta(microseconds=1)


def _micros(t) -> int:
    return (t - _EPOCH) // _MICRO


def _bounds(iv: Interval) -> tuple[int, int]:
    """An interval in epoch µs; the ends of time are open, as the SQL leaves them."""
    lo = _NEG_INF if iv.start <= MIN_TS else _micros(iv.start)
    hi = _POS_INF if iv.end >= MAX_TS else _micros(iv.end)
    return lo, hi


def _file_span(path: str) -> tuple[int, int, bool] | None:
    """(least, greatest) `__time` of a file in epoch µs, from its footer, and whether
    any may be null; where the footer does not say (no statistics, a type other
    than an INT64 timestamp), from the rows; None if `__time` is not a timestamp."""
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except OSError:
        return None
    paths = [meta.schema.column(i).path for i in range(len(meta.schema))]
    if "__time" not in paths:
        return None
    col = paths.index("__time")
    logical = meta.schema.column(col).logical_type
    unit = _UNITS.get(_unit_of(logical.to_json())) if logical.type == "TIMESTAMP" else None
    lows, highs, nulls = [], [], False
    for g in range(meta.num_row_groups):
        chunk = meta.row_group(g).column(col)
        stats = chunk.statistics
        if chunk.physical_type != "INT64" or stats is None or not stats.has_min_max:
            if meta.row_group(g).num_rows == 0:
                continue
            return _rows_span(path)
        lows.append(stats.min_raw)
        highs.append(stats.max_raw)
        nulls = nulls or not stats.has_null_count or stats.null_count > 0
    if unit is None or not lows:
        return _rows_span(path)
    return min(lows) * unit, max(highs) * unit, nulls


def _rows_span(path: str) -> tuple[int, int, bool] | None:
    """`_file_span` from the file's `__time` values, where its footer does not say."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        times = pq.read_table(path, columns=["__time"]).column("__time")
    except (OSError, KeyError, pa.ArrowException):
        return None
    if not pa.types.is_timestamp(times.type) or len(times) == times.null_count:
        return None
    micros = pc.cast(times, pa.timestamp("us", tz=times.type.tz), safe=False).cast(pa.int64())
    least, greatest = pc.min_max(micros).values()
    return least.as_py(), greatest.as_py(), times.null_count > 0


def _unit_of(logical_json: str) -> str:
    return json.loads(logical_json).get("timeUnit", "")


def _span(path: str) -> tuple[int, int, bool] | None:
    with _lock:
        if path in _spans:
            return _spans[path]
    span = _file_span(path)
    with _lock:
        if len(_spans) >= _KEPT_FILES:
            _spans.clear()
        _spans[path] = span
    return span


def _file_stamp(
    least: int, shown: list[tuple[int, int]], query: list[tuple[int, int]]
) -> int | None:
    """Druid's timestamp of one segment file's granularity-`all` bucket, or None if
    it has none. Each query interval cut to each visible part of the segment is a
    cursor over `[that start, that end) ∩ [least row, +∞)` (`CursorGranularizer`:
    the cursor interval is clipped to [minTime, bucketEnd(maxTime)), +∞ for ALL),
    its bucket stamped with that overlap's start, rows matched or not."""
    stamps = []
    for a, b in shown:
        for lo, hi in query:
            start, end = max(a, lo), min(b, hi)
            if start < end and least < end:
                stamps.append(max(start, least))
    return min(stamps, default=None)


def _stamp_of(sources: Sequence[TableSource], intervals: list[Interval]) -> tuple | None:
    if any(len(s.whole_intervals) != len(s.whole) for s in sources):
        return None  # a whole file's segment interval is unknown
    query = [_bounds(iv) for iv in intervals]
    files = [
        (f, [_bounds(iv)])
        for s in sources
        for f, iv in zip(s.whole, s.whole_intervals, strict=True)
    ]
    files += [(f, [_bounds(iv) for iv in ivs]) for s in sources for f, ivs in s.partial]
    best = None
    for path, shown in files:
        span = _span(path)
        if span is None:
            return None
        stamp = _file_stamp(span[0], shown, query)
        if stamp is not None and (best is None or stamp < best):
            best = stamp
    return (None,) if best is None else (best // 1000,)  # Druid's times are millis


def _inside(span: tuple, shown: list[tuple[int, int]], query: list[tuple[int, int]]) -> bool:
    """Whether every row of a file's span that `shown` keeps is within `query`."""
    least, greatest, nulls = span
    if nulls:
        return False  # a null `__time` is within no interval
    for lo, hi in shown:
        first, last = max(least, lo), min(greatest, hi - 1)
        if first <= last and not any(a <= first and last < b for a, b in query):
            return False
    return True


def cut_to(source: TableSource, intervals: list[Interval]) -> TableSource:
    """`source` without the files whose segments hold no time of `intervals`' span,
    as metastore.query's binder cuts a table that a query reads only within them."""
    if not intervals:
        return source
    start, end = min(iv.start for iv in intervals), max(iv.end for iv in intervals)
    return within_span(
        source,
        None if start <= MIN_TS else start.replace(tzinfo=None),
        None if end >= MAX_TS else end.replace(tzinfo=None),
        end_included=False,
    )


def _within(sources: Sequence[TableSource], intervals: list[Interval]) -> bool:
    if not intervals:
        return False
    return _rows_within([cut_to(s, intervals) for s in sources], intervals)


def _rows_within(sources: Sequence[TableSource], intervals: list[Interval]) -> bool:
    query = [_bounds(iv) for iv in intervals]
    everything = [(_NEG_INF, _POS_INF)]
    files = [(f, everything) for s in sources for f in s.whole]
    files += [(f, [_bounds(iv) for iv in ivs]) for s in sources for f, ivs in s.partial]
    for path, shown in files:
        span = _span(path)
        if span is None or not _inside(span, shown, query):
            return False
    return True


def _memo(kind: str, sources: Sequence[TableSource], intervals: list[Interval], compute):
    """`compute(sources, intervals)`, kept while the same sources (kept per commit by
    metastore.sql_sources) are asked about the same intervals."""
    key = (kind, tuple(id(s) for s in sources), tuple(intervals))
    with _lock:
        kept = _answers.get(key)
    if kept is not None and all(a is b for a, b in zip(kept[0], sources, strict=True)):
        return kept[1]
    answer = compute(sources, intervals)
    with _lock:
        if len(_answers) >= _KEPT_ANSWERS:
            _answers.clear()
        _answers[key] = (tuple(sources), answer)
    return answer


def stamp_ms(sources: Sequence[TableSource], intervals: list[Interval]) -> tuple | None:
    """The timestamp (epoch millis) Druid gives a granularity-`all` timeseries or
    topN of `sources` within `intervals`: the earliest of its segments' buckets
    (`_file_stamp`; the broker merges them in time order and keeps the first's),
    `(ms,)`; `(None,)` if no segment has one; None if a file's `__time` is unknown."""
    return _memo("stamp", sources, intervals, _stamp_of)


def within(sources: Sequence[TableSource], intervals: list[Interval]) -> bool:
    """Whether every visible row of `sources` cut to `intervals` (`cut_to`) is within
    them (False if the footers' statistics cannot tell): a filter by time on the cut
    tables keeps every row."""
    return _memo("within", sources, intervals, _within)


def rows_within(sources: Sequence[TableSource], intervals: list[Interval]) -> bool:
    """Whether every visible row of `sources`, as they are (not cut), is within
    `intervals` (False if the footers' statistics cannot tell): a filter by time
    on exactly these files keeps every row (metastore.query, for SQL)."""
    return _memo("rows", sources, intervals, _rows_within)
