"""The first `__time` of a table's visible rows within intervals, from the Parquet
footers' statistics instead of the rows.

A native query of granularity `all` (topN, timeseries) is stamped with the first
row of its intervals (`metastore.druid.native`). Reading `__time` for that costs a
pass over every file (~30 ms of CPU over a year of DAY segments); each file's
footer already holds its least and greatest `__time`. Segment files are immutable,
so a file's span is kept by path, in process memory, with a bound.

A file's span proves its first row within the intervals when its least `__time` is
inside them. When it is not (an interval starts inside the file's span), the file's
first row within them is only bounded below by the next interval's start; if that
bound could be the answer, the statistics cannot tell, and `first_time_ms` says so
(None): the query then reads the rows as before.

The same spans say when every visible row of a table is within a query's intervals
(`within`): the query's filter by time would keep them all, and costs a read of
`__time` and a comparison per row (more than half of a year's topN on flights).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta

from metastore.intervals import MAX_TS, MIN_TS, Interval
from metastore.sql_sources import TableSource
from metastore.sql_sources import within as within_span

__all__ = ["cut_to", "first_time_ms", "within"]

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
    any may be null; None if the footer does not say (no statistics, a type other
    than an INT64 timestamp)."""
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
            return None
        lows.append(stats.min_raw)
        highs.append(stats.max_raw)
        nulls = nulls or not stats.has_null_count or stats.null_count > 0
    if unit is None or not lows:
        return None
    return min(lows) * unit, max(highs) * unit, nulls


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


def _clip(allowed: list[tuple[int, int]], within: Iterable[Interval]) -> list[tuple[int, int]]:
    out = []
    for lo, hi in (_bounds(iv) for iv in within):
        out += [(max(lo, a), min(hi, b)) for a, b in allowed if max(lo, a) < min(hi, b)]
    return out


def _file_first(span: tuple, allowed: list[tuple[int, int]]) -> tuple[int | None, bool]:
    """(the file's first row within `allowed`, or a lower bound of it; whether exact).
    (None, True): the file has no row within `allowed`."""
    least, greatest, _ = span
    if any(lo <= least < hi for lo, hi in allowed):
        return least, True
    later = [lo for lo, hi in allowed if least < lo <= greatest]
    return (min(later), False) if later else (None, True)


def _first_of(sources: Sequence[TableSource], intervals: list[Interval]) -> tuple | None:
    query = [_bounds(iv) for iv in intervals]
    files = [(f, query) for s in sources for f in s.whole]
    files += [(f, _clip(query, ivs)) for s in sources for f, ivs in s.partial]
    best, bound = None, None
    for path, allowed in files:
        span = _span(path)
        if span is None:
            return None
        first, exact = _file_first(span, allowed)
        if first is None:
            continue
        if exact:
            best = first if best is None else min(best, first)
        else:
            bound = first if bound is None else min(bound, first)
    if bound is not None and (best is None or bound < best):
        return None  # a file's first row within the intervals may come first: unknown
    if best is None:
        return (None,)
    if best % 1000 and best < 0:  # epoch_ms truncates toward zero there: leave it to SQL
        return None
    return (best // 1000,)


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
    sources = [cut_to(s, intervals) for s in sources]
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


def first_time_ms(sources: Sequence[TableSource], intervals: list[Interval]) -> tuple | None:
    """The first `__time` (epoch millis, as `epoch_ms(min(__time))`) of the visible
    rows of `sources` within `intervals`: `(ms,)`, `(None,)` if there is none, or
    None if the footers' statistics cannot tell."""
    return _memo("first", sources, intervals, _first_of)


def within(sources: Sequence[TableSource], intervals: list[Interval]) -> bool:
    """Whether every visible row of `sources` cut to `intervals` (`cut_to`) is within
    them (False if the footers' statistics cannot tell): a filter by time on the cut
    tables keeps every row."""
    return _memo("within", sources, intervals, _within)
