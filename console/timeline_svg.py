"""Server-rendered SVG of a dataSource's timeline: the bucketed overview and the
per-version interval view. Every mark carries data attributes (the tests and the
zoom script read them); the number of shapes is bounded whatever the size."""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta

from django.urls import reverse
from django.utils.html import escape

from console.timeline_layout import (
    LEFT,
    MAX_BY,
    ROW,
    TOP,
    WIDTH,
    ChunkMark,
    Lane,
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
from metastore.selectors.states import TimelineState

MAX_BUCKETS = 1000

DEFS = """<defs>
<pattern id="p-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#eceff4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#8a94a8" stroke-width="2"/></pattern>
<pattern id="p-tomb" width="8" height="8" patternUnits="userSpaceOnUse"><rect width="8" height="8" fill="#fff"/><path d="M0 0L8 8M8 0L0 8" stroke="#555" stroke-width="1"/></pattern>
<pattern id="p-unused" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#fafafa"/><circle cx="3" cy="3" r="1" fill="#aaa"/></pattern>
</defs>"""


def _ticks(window: Interval, y: float, height: float) -> list[str]:
    span = window.end - window.start
    steps = [
        timedelta(minutes=1),
        timedelta(minutes=15),
        timedelta(hours=1),
        timedelta(hours=6),
        timedelta(days=1),
        timedelta(days=7),
        timedelta(days=30),
        timedelta(days=91),
        timedelta(days=365),
    ]
    step = next((s for s in steps if span / s <= 10), timedelta(days=3650))
    epoch = datetime(1970, 1, 1, tzinfo=window.start.tzinfo)
    n = math.ceil((window.start - epoch) / step)
    out = []
    t = epoch + n * step
    fmt = "%Y-%m-%d" if step >= timedelta(days=1) else "%m-%d %H:%M"
    while t < window.end and len(out) < 24:
        x = x_of(t, window)
        out.append(
            f'<line class="tick" x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + height}" stroke="#d5dae3"/>'
            f'<text x="{x + 2:.1f}" y="{y + 10}" font-size="10" fill="#7a8294">{t.strftime(fmt)}</text>'
        )
        t += step
    return out


def _svg(body: list[str], height: float, window: Interval, kind: str, extra: str = "") -> str:
    return (
        f'<svg class="timeline timeline-{kind}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{LEFT + WIDTH + 10}" height="{height:.0f}" viewBox="0 0 {LEFT + WIDTH + 10} {height:.0f}" '
        f'data-window-start="{format_ts(window.start)}" data-window-end="{format_ts(window.end)}" '
        f'data-left="{LEFT}" data-width="{WIDTH}" {extra}>' + DEFS + "".join(body) + "</svg>"
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
    counts = dict.fromkeys(("visible", "partial", "overshadowed", "incomplete"), 0)
    for c in state.chunks_overlapping(window):
        for r in c.segments:
            counts[state.status.get(r.id, "overshadowed")] += 1
    return counts


# --- overview ---------------------------------------------------------------------------------

FLAG_ROWS = [
    ("overshadowed", "overshadowed data", 'fill="url(#p-hatch)" stroke="#6b7385"'),
    ("tombstone", "tombstones", 'fill="url(#p-tomb)" stroke="#555"'),
    ("incomplete", "incomplete chunks", 'fill="#fff" stroke="#c0392b" stroke-dasharray="2 1"'),
    ("locked", "locked", 'fill="#f5c26b" stroke="#8a5a00"'),
    ("writing", "being written", 'fill="#fff" stroke="#1b4aa6" stroke-dasharray="3 2"'),
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
            segs[i] += len(chunk.segments)
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
    top = 22
    bar_h = 90
    peak = max(nrows) or 1
    width = WIDTH / n
    body = _ticks(window, 0, top + bar_h + 14 * len(FLAG_ROWS) + 6)
    body.append(f'<text x="4" y="{top + bar_h - 4}" font-size="11">rows (visible)</text>')
    for i, (_f, label, _style) in enumerate(FLAG_ROWS):
        body.append(f'<text x="4" y="{top + bar_h + 14 * i + 13}" font-size="11">{label}</text>')
    # Neighbouring buckets that look the same are drawn as one run (a day inside
    # one chunk is a single shape, not hundreds).
    i = 0
    while i < n:
        key = (segs[i], int(nrows[i]), frozenset(flags[i]))
        j = i + 1
        while j < n and (segs[j], int(nrows[j]), frozenset(flags[j])) == key:
            j += 1
        if segs[i] or flags[i]:
            body.append(
                _bucket_run(
                    window, step, i, j, segs[i], nrows[i], flags[i], peak, top, bar_h, width
                )
            )
        i = j
    height = top + bar_h + 14 * len(FLAG_ROWS) + 8
    return _svg(body, height, window, "overview", f'data-buckets="{n}"')


def _bucket_run(window, step, i, j, segs, nrows, flags, peak, top, bar_h, width) -> str:
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
    out = [
        f'<g class="bucket" data-start="{format_ts(b0)}" data-end="{format_ts(b1)}" '
        f'data-buckets="{j - i}" data-segments="{segs}" data-rows="{int(nrows)}" data-flags="{names}">'
        f"<title>{escape(title)}</title>"
        f'<rect x="{x:.1f}" y="{top}" width="{max(w, 0.8):.1f}" height="{bar_h}" fill="transparent"/>'
        f'<rect class="bar" x="{x:.1f}" y="{top + bar_h - h:.1f}" width="{max(w - 0.3, 0.6):.1f}" '
        f'height="{h:.1f}" fill="#3d74e0"/>'
    ]
    for k, (f, _, style) in enumerate(FLAG_ROWS):
        if f in flags:
            out.append(
                f'<rect class="flag flag-{f}" x="{x:.1f}" y="{top + bar_h + 14 * k + 3}" '
                f'width="{max(w - 0.3, 0.8):.1f}" height="11" {style}/>'
            )
    out.append("</g>")
    return "".join(out)


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
    body = _ticks(window, 0, layout.height) + [_draw_lane(lane) for lane in layout.lanes]
    body += [_DRAW[type(mark)](mark, href) for mark in layout.marks]
    if layout.lock_rows:
        body.append(f'<text x="4" y="{TOP + 10}" font-size="11">locks</text>')
    extra = f'data-mode="{layout.mode}"'
    return _svg(body, layout.height, window, "interval", extra), layout.info


def _draw_lane(lane: Lane) -> str:
    v = escape(lane.version)
    return (
        f'<g class="lane" data-version="{v}"><rect x="{LEFT}" y="{lane.y - 2}" width="{WIDTH}" '
        f'height="{lane.rows * ROW + 4}" fill="#fbfcfe" stroke="#e3e6ec"/>'
        f'<text x="4" y="{lane.y + 9}" font-size="9.5">v {v}</text></g>'
    )


def _draw_chunk(m: ChunkMark, href) -> str:
    fill = "#3d74e0" if m.status == "visible" else "url(#p-hatch)"
    stroke = (
        'stroke="#c0392b" stroke-dasharray="3 2"'
        if m.status == "incomplete"
        else 'stroke="#1d2330" stroke-width="0.3"'
    )
    out = (
        f'<g class="chunk" data-chunk="{m.interval}" data-version="{escape(m.version)}" '
        f'data-segments="{m.segments}" data-status="{m.status}"><title>{escape(m.title)}</title>'
        f'<rect x="{m.x}" y="{m.y}" width="{m.w}" height="{ROW - 2}" fill="{fill}" {stroke}/>'
    )
    if m.shown_share and m.status != "visible":
        out += (
            f'<rect x="{m.x}" y="{m.y + (ROW - 2) * (1 - m.shown_share):.1f}" width="{m.w}" '
            f'height="{(ROW - 2) * m.shown_share:.1f}" fill="#3d74e0"/>'
        )
    return out + "</g>"


def _segment_style(m: SegmentMark) -> tuple[str, str]:
    """(fill, stroke) of a segment mark: what it is, then what is wrong with it."""
    if "tombstone" in m.flags:
        fill = "url(#p-tomb)"
    elif m.status == "visible":
        fill = "#3d74e0"
    else:
        fill = "url(#p-hatch)"
    stroke = 'stroke="#1d2330" stroke-width="0.4"'
    if "incomplete" in m.flags:
        stroke = 'stroke="#c0392b" stroke-width="1.2" stroke-dasharray="3 2"'
    elif "partial-aug" in m.flags:
        stroke = 'stroke="#8e44ad" stroke-width="1.4" stroke-dasharray="1 1.5"'
    if m.highlight:
        stroke = 'stroke="#e67e22" stroke-width="2.2"'
    return fill, stroke


def _draw_segment(m: SegmentMark, href) -> str:
    attrs = (
        f'class="seg seg-{m.status}" data-segment-id="{escape(m.id)}" data-status="{m.status}" '
        f'data-version="{escape(m.version)}" data-partition="{m.partition}" '
        f'data-flags="{" ".join(m.flags)}" '
        f'data-overshadowed-by="{escape(" ".join(m.overshadowed_by[:MAX_BY]))}" '
        f'data-overshadowed-count="{len(m.overshadowed_by)}"'
        + (f' data-commit="{m.highlight}"' if m.highlight else "")
    )
    fill, stroke = _segment_style(m)
    parts = [
        f'<g {attrs}><a href="{href(m.id)}"><title>{escape(m.title)}</title>'
        f'<rect class="extent" x="{m.x}" y="{m.y}" width="{m.w}" height="{ROW - 2}" '
        f'fill="{fill}" {stroke}/>'
    ]
    for iv, vx, vw in m.visible_parts:
        parts.append(
            f'<rect class="visible-part" data-interval="{iv}" x="{vx}" y="{m.y}" width="{vw}" '
            f'height="{ROW - 2}" fill="#3d74e0"/>'
        )
    if m.label and m.w > 40:
        parts.append(
            f'<text x="{m.x + 2}" y="{m.y + ROW - 4}" font-size="8" fill="#1d2330" '
            f'paint-order="stroke" stroke="#fff" stroke-width="2">{" · ".join(m.label)}</text>'
        )
    parts.append("</a></g>")
    return "".join(parts)


def _draw_unused(m: UnusedMark, href) -> str:
    text = (
        f'<text x="{m.x + 2}" y="{m.y + ROW - 4}" font-size="8" fill="#777">unused</text>'
        if m.w > 40
        else ""
    )
    return (
        f'<g class="seg seg-unused" data-segment-id="{escape(m.id)}" data-status="unused" '
        f'data-version="{escape(m.version)}" data-partition="{m.partition}" data-flags="unused'
        f'{" tombstone" if m.tombstone else ""}"><a href="{href(m.id)}">'
        f"<title>{escape(m.id)}\nunused</title>"
        f'<rect x="{m.x}" y="{m.y}" width="{m.w}" height="{ROW - 2}" fill="url(#p-unused)" '
        f'stroke="#aaa" stroke-width="0.6"/>' + text + "</a></g>"
    )


def _draw_pending(m: PendingMark, href) -> str:
    return (
        f'<g class="pending" data-pending="{m.pk}" data-task="{escape(m.task_id)}" '
        f'data-version="{escape(m.version)}" data-partition="{m.partition}">'
        f"<title>{escape(m.title)}</title>"
        f'<rect x="{m.x}" y="{m.y}" width="{m.w}" height="{ROW - 2}" fill="none" stroke="#1b4aa6" '
        f'stroke-width="1.2" stroke-dasharray="4 3"/></g>'
    )


def _draw_lock(m: LockMark, href) -> str:
    style = (
        'fill="#fbdada" stroke="#8a1c1c" stroke-dasharray="2 2"'
        if m.revoked
        else 'fill="#f5c26b" stroke="#8a5a00"'
    )
    text = (
        f'<text x="{m.x + 2}" y="{m.y + 9}" font-size="8">🔒 {escape(m.text)}</text>'
        if m.w > 60
        else ""
    )
    return (
        f'<g class="lock" data-lock-id="{m.pk}" data-lock-type="{m.type}" '
        f'data-holder="{escape(m.holder)}" data-priority="{m.priority}" '
        f'data-revoked="{"1" if m.revoked else "0"}">'
        f"<title>{escape(m.title)}</title>"
        f'<rect x="{m.x}" y="{m.y}" width="{m.w}" height="12" {style}/>'
        f'<rect x="{m.x}" y="{m.y}" width="{m.w}" height="{m.guide_height:.0f}" fill="none" '
        f'stroke="#8a5a00" stroke-width="0.8" stroke-dasharray="1 3" pointer-events="none"/>'
        + text
        + "</g>"
    )


_DRAW = {
    ChunkMark: _draw_chunk,
    SegmentMark: _draw_segment,
    UnusedMark: _draw_unused,
    PendingMark: _draw_pending,
    LockMark: _draw_lock,
}
