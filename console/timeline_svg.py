"""Server-rendered SVG of a dataSource's timeline: the bucketed overview and the
per-version interval view, drawn by the auto-escaping templates in templates/svg/
from what this module and `console.timeline_layout` compute (positions, styles,
titles; no markup here). Every mark carries data attributes (the tests and the
zoom script read them); the number of shapes is bounded whatever the size."""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta

from django.template.loader import render_to_string
from django.urls import reverse

from console.timeline_layout import (
    LEFT,
    MAX_BY,
    ROW,
    TOP,
    WIDTH,
    ChunkMark,
    LockMark,
    PendingMark,
    SegmentMark,
    UnusedMark,
    interval_layout,
    x_of,
)
from console.timeline_layout import MAX_CHUNK_MARKS as MAX_CHUNK_MARKS
from console.timeline_layout import MAX_SEGMENT_MARKS as MAX_SEGMENT_MARKS
from metastore.intervals import Granularity, Interval, format_ts
from metastore.timeline_view import TimelineState, chunk_counts

MAX_BUCKETS = 1000
_STEPS = (
    timedelta(minutes=1),
    timedelta(minutes=15),
    timedelta(hours=1),
    timedelta(hours=6),
    timedelta(days=1),
    timedelta(days=7),
    timedelta(days=30),
    timedelta(days=91),
    timedelta(days=365),
)


def _ticks(window: Interval, y: float, height: float) -> list[dict]:
    """At most 24 dated lines across the window, at a round step giving <= 10."""
    span = window.end - window.start
    step = next((s for s in _STEPS if span / s <= 10), timedelta(days=3650))
    epoch = datetime(1970, 1, 1, tzinfo=window.start.tzinfo)
    t = epoch + math.ceil((window.start - epoch) / step) * step
    fmt = "%Y-%m-%d" if step >= timedelta(days=1) else "%m-%d %H:%M"
    out = []
    while t < window.end and len(out) < 24:
        x = x_of(t, window)
        out.append(
            {
                "x": f"{x:.1f}",
                "y1": y,
                "y2": y + height,
                "text_x": f"{x + 2:.1f}",
                "text_y": y + 10,
                "label": t.strftime(fmt),
            }
        )
        t += step
    return out


def _svg(template: str, window: Interval, kind: str, height: float, **context) -> str:
    """The SVG `template` renders over `window` (auto-escaped)."""
    return render_to_string(
        f"svg/{template}",
        {
            "kind": kind,
            "svg_width": LEFT + WIDTH + 10,
            "svg_height": f"{height:.0f}",
            "window_start": format_ts(window.start),
            "window_end": format_ts(window.end),
            "left": LEFT,
            "width": WIDTH,
            **context,
        },
    )


# --- windows snap to the segment granularity; badges count the window ----------------------

_SNAP = tuple(
    Granularity.from_name(n)
    for n in (
        "SECOND",
        "MINUTE",
        "FIVE_MINUTE",
        "FIFTEEN_MINUTE",
        "THIRTY_MINUTE",
        "HOUR",
        "SIX_HOUR",
        "DAY",
        "WEEK",
        "MONTH",
        "QUARTER",
        "YEAR",
    )
)
GRANULARITY_SAMPLE = 256  # chunks looked at, evenly spread


def segment_granularity(state: TimelineState) -> Granularity | None:
    """The dataSource's segment granularity as its chunks show it: the granularity
    whose single bucket most (sampled) chunks are, the finer one on a tie; None
    when no chunk is one bucket of any (or there are none)."""
    chunks = state.chunks
    votes: Counter = Counter()
    for c in chunks[:: max(1, len(chunks) // GRANULARITY_SAMPLE)]:
        for g in _SNAP:
            if g.truncate(c.interval.start) == c.interval.start and g.next(c.interval.start) == (
                c.interval.end
            ):
                votes[g] += 1
                break
    if not votes:
        return None
    most = max(votes.values())
    return next(g for g in _SNAP if votes.get(g) == most)


def snap_window(window: Interval, granularity: Granularity | None) -> Interval:
    """`window` widened to whole buckets of `granularity` (unchanged without one)."""
    if granularity is None:
        return window
    start = granularity.truncate(window.start)
    end = granularity.truncate(window.end)
    if end < window.end:
        end = granularity.next(window.end)
    if end <= start:
        end = granularity.next(start)
    return Interval(start, end)


def window_counts(state: TimelineState, window: Interval) -> dict[str, int]:
    """Segments by visibility in the chunks overlapping `window` (the badges)."""
    extent = state.extent
    if extent is None or (window.start <= extent.start and extent.end <= window.end):
        return dict(state.counts)
    return chunk_counts(state.chunks_overlapping(window))


# --- overview ---------------------------------------------------------------------------------

FLAG_ROWS = [  # (flag, label, fill, stroke, dash)
    ("overshadowed", "overshadowed data", "url(#p-hatch)", "#6b7385", ""),
    ("tombstone", "tombstones", "url(#p-tomb)", "#555", ""),
    ("incomplete", "incomplete chunks", "#fff", "#c0392b", "2 1"),
    ("locked", "locked", "#f5c26b", "#8a5a00", ""),
    ("writing", "being written", "#fff", "#1b4aa6", "3 2"),
]


def overview(
    state: TimelineState,
    window: Interval,
    rows: dict[tuple, tuple[int, int]],
    locks,
    pendings,
    buckets: int = 400,
) -> tuple[str, int]:
    """The window cut into at most MAX_BUCKETS buckets: rows, segments and flags per bucket."""
    span_us = (window.end - window.start) // timedelta(microseconds=1)
    n = max(1, min(buckets, MAX_BUCKETS, span_us))
    step = (window.end - window.start) / n
    segs, nrows, flags = bucket_facts(state, window, rows, locks, pendings, n)
    return _draw_overview(window, step, segs, nrows, flags), n


def bucket_facts(state, window: Interval, rows, locks, pendings, n: int):
    """Per bucket of the window: segments, visible rows (a chunk's rows spread
    evenly over its time) and flags (overshadowed, tombstone, incomplete, locked,
    writing)."""
    step = (window.end - window.start) / n
    segs = [0] * n
    nrows = [0.0] * n
    flags: list[set[str]] = [set() for _ in range(n)]

    def index_range(iv_start: datetime, iv_end: datetime) -> range:
        s = max(iv_start, window.start)
        e = min(iv_end, window.end)
        if not s < e:
            return range(0)
        i0 = int((s - window.start) / step)
        i1 = math.ceil((e - window.start) / step)
        return range(max(i0, 0), min(i1, n))

    for chunk in state.chunks_overlapping(window):
        iv = chunk.interval
        length = (iv.end - iv.start).total_seconds()
        chunk_rows = rows.get((iv.start, iv.end, chunk.version), (0, 0))[0]
        shown = chunk.n_visible + chunk.n_partial > 0
        for i in index_range(iv.start, iv.end):
            b0 = window.start + i * step
            b1 = b0 + step
            overlap = (min(b1, iv.end) - max(b0, iv.start)).total_seconds()
            segs[i] += chunk.size
            if shown:
                nrows[i] += chunk_rows * overlap / length
            f = flags[i]
            if chunk.n_overshadowed or chunk.n_partial:
                f.add("overshadowed")
            if chunk.tombstones:
                f.add("tombstone")
            if not chunk.complete:
                f.add("incomplete")
    for lock in locks:
        for i in index_range(lock.start, lock.end):
            flags[i].add("locked")
    for p in pendings:
        for i in index_range(p.start, p.end):
            flags[i].add("writing")
    return segs, nrows, flags


def _draw_overview(window: Interval, step, segs, nrows, flags) -> str:
    n = len(segs)
    top, bar_h = 22, 90
    peak = max(nrows) or 1
    width = WIDTH / n
    runs = []
    # Neighbouring buckets that look the same are drawn as one run (a day inside
    # one chunk is a single shape, not hundreds).
    i = 0
    while i < n:
        key = (segs[i], int(nrows[i]), frozenset(flags[i]))
        j = i + 1
        while j < n and (segs[j], int(nrows[j]), frozenset(flags[j])) == key:
            j += 1
        if segs[i] or flags[i]:
            runs.append(
                _bucket_run(
                    window, step, (i, j), segs[i], nrows[i], flags[i], peak, top, bar_h, width
                )
            )
        i = j
    return _svg(
        "timeline_overview.svg",
        window,
        "overview",
        top + bar_h + 14 * len(FLAG_ROWS) + 8,
        ticks=_ticks(window, 0, top + bar_h + 14 * len(FLAG_ROWS) + 6),
        buckets=n,
        top=top,
        bar_h=bar_h,
        rows_label_y=top + bar_h - 4,
        flag_rows=[
            {"label": label, "label_y": top + bar_h + 14 * k + 13}
            for k, (_f, label, *_style) in enumerate(FLAG_ROWS)
        ],
        runs=runs,
    )


def _bucket_run(window, step, run, segs, nrows, flags, peak, top, bar_h, width) -> dict:
    """What the overview draws for buckets run[0]..run[1] (alike): a bar of the
    visible rows, a row per flag, the title."""
    i, j = run
    b0 = window.start + i * step
    b1 = window.start + j * step
    x = LEFT + i * width
    w = (j - i) * width
    h = max(2.0, nrows / peak * bar_h) if segs else 0
    names = " ".join(sorted(flags))
    title = (
        f"{format_ts(b0)} / {format_ts(b1)}: {segs} segments, {int(nrows):,} rows"
        f"{' per bucket' if j - i > 1 else ''}{'; ' + names if names else ''}"
    )
    return {
        "start": format_ts(b0),
        "end": format_ts(b1),
        "buckets": j - i,
        "segments": segs,
        "rows": int(nrows),
        "flags": names,
        "title": title,
        "x": f"{x:.1f}",
        "hit_w": f"{max(w, 0.8):.1f}",
        "bar_y": f"{top + bar_h - h:.1f}",
        "bar_w": f"{max(w - 0.3, 0.6):.1f}",
        "bar_h": f"{h:.1f}",
        "flag_w": f"{max(w - 0.3, 0.8):.1f}",
        "flag_marks": [
            {"flag": f, "y": top + bar_h + 14 * k + 3, "fill": fill, "stroke": stroke, "dash": dash}
            for k, (f, _, fill, stroke, dash) in enumerate(FLAG_ROWS)
            if f in flags
        ],
    }


# --- interval view ----------------------------------------------------------------------------


def segment_hrefs(datasource: str):
    """id -> the URL of that segment's page: `reverse` once, not per segment (it is
    the slowest part of drawing hundreds of marks). Quotes as `reverse` does."""
    from urllib.parse import quote

    from django.utils.http import RFC3986_SUBDELIMS

    head, tail = reverse("console:segment", args=[datasource, "\0"]).rsplit("%00", 1)
    safe = RFC3986_SUBDELIMS + "/~:@"

    def href(segment_id: str) -> str:
        return head + quote(segment_id, safe=safe) + tail

    return href


def interval_view(
    *,
    datasource: str,
    state: TimelineState,
    window: Interval,
    details: dict[str, tuple],
    locks,
    pendings,
    unused,
    highlight: dict[str, str] | None = None,
) -> tuple[str, dict]:
    """One lane per version (newest on top), laid out by `timeline_layout`.
    Returns the SVG and what it drew."""
    layout = interval_layout(
        state=state,
        window=window,
        details=details,
        locks=locks,
        pendings=pendings,
        unused=unused,
        highlight=highlight,
    )
    if layout.mode == "zoom":
        return "", layout.info
    href = segment_hrefs(datasource)
    of = {kind: [] for kind in _SHOWN}
    for mark in layout.marks:
        of[type(mark)].append(_SHOWN[type(mark)](mark, href))
    svg = _svg(
        "timeline_interval.svg",
        window,
        "interval",
        layout.height,
        ticks=_ticks(window, 0, layout.height),
        mode=layout.mode,
        mark_h=ROW - 2,
        lanes=[
            {
                "version": ln.version,
                "box_y": ln.y - 2,
                "box_h": ln.rows * ROW + 4,
                "text_y": ln.y + 9,
            }
            for ln in layout.lanes
        ],
        chunks=of[ChunkMark],
        segments=of[SegmentMark],
        unused=of[UnusedMark],
        pendings=of[PendingMark],
        locks=of[LockMark],
        lock_rows=layout.lock_rows,
        locks_label_y=TOP + 10,
    )
    return svg, layout.info


def _chunk(m: ChunkMark, href) -> dict:
    incomplete = m.status == "incomplete"
    shown = m.shown_share if m.status != "visible" else 0
    return {
        **m.__dict__,
        "fill": "#3d74e0" if m.status == "visible" else "url(#p-hatch)",
        "stroke": "#c0392b" if incomplete else "#1d2330",
        "stroke_width": 1 if incomplete else 0.3,
        "dash": "3 2" if incomplete else "",
        "shown_y": f"{m.y + (ROW - 2) * (1 - shown):.1f}",
        "shown_h": f"{(ROW - 2) * shown:.1f}" if shown else "",
    }


# The marks reach the templates as dicts (their fields, then what is drawn from
# them): a template reads a dict's key directly, an object's attribute only after a
# failed key lookup, and the interval view reads a dozen per mark.


def _segment_style(m: SegmentMark) -> tuple[str, tuple[str, float, str]]:
    """(fill, (stroke, width, dash)) of a segment mark: what it is, then what is
    wrong with it."""
    if "tombstone" in m.flags:
        fill = "url(#p-tomb)"
    elif m.status == "visible":
        fill = "#3d74e0"
    else:
        fill = "url(#p-hatch)"
    stroke = ("#1d2330", 0.4, "")
    if "incomplete" in m.flags:
        stroke = ("#c0392b", 1.2, "3 2")
    elif "partial-aug" in m.flags:
        stroke = ("#8e44ad", 1.4, "1 1.5")
    if m.highlight:
        stroke = ("#e67e22", 2.2, "")
    return fill, stroke


def _segment(m: SegmentMark, href) -> dict:
    fill, (stroke, stroke_width, dash) = _segment_style(m)
    return {
        **m.__dict__,
        "href": href(m.id),
        "flags": " ".join(m.flags),
        "by": " ".join(m.overshadowed_by[:MAX_BY]),
        "by_count": len(m.overshadowed_by),
        "fill": fill,
        "stroke": stroke,
        "stroke_width": stroke_width,
        "dash": dash,
        "label": " · ".join(m.label) if m.label and m.w > 40 else "",
        "text_x": m.x + 2,
        "text_y": m.y + ROW - 4,
    }


def _unused(m: UnusedMark, href) -> dict:
    return {
        **m.__dict__,
        "href": href(m.id),
        "labelled": m.w > 40,
        "text_x": m.x + 2,
        "text_y": m.y + ROW - 4,
    }


def _pending(m: PendingMark, href) -> dict:
    return dict(m.__dict__)


def _lock(m: LockMark, href) -> dict:
    return {
        **m.__dict__,
        "guide_h": f"{m.guide_height:.0f}",
        "labelled": m.w > 60,
        "text_x": m.x + 2,
        "text_y": m.y + 9,
    }


_SHOWN = {
    ChunkMark: _chunk,
    SegmentMark: _segment,
    UnusedMark: _unused,
    PendingMark: _pending,
    LockMark: _lock,
}
