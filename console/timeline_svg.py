"""Server-rendered SVG of a dataSource's timeline: the bucketed overview and the
per-version interval view. Every mark carries data attributes (the tests and the
zoom script read them); the number of shapes is bounded whatever the size."""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime, timedelta

from django.urls import reverse
from django.utils.html import escape

from metastore.intervals import Granularity, Interval, format_ts
from metastore.selectors import TimelineState

MAX_BUCKETS = 1000
MAX_SEGMENT_MARKS = 600  # above this the interval view draws one mark per chunk
MAX_CHUNK_MARKS = 1500  # above this it asks to zoom in
LEFT = 170
WIDTH = 1100
ROW = 12
LANE_GAP = 6
MAX_BY = 5  # ids named in a mark's data-overshadowed-by (the count says how many)

DEFS = """<defs>
<pattern id="p-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#eceff4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#8a94a8" stroke-width="2"/></pattern>
<pattern id="p-tomb" width="8" height="8" patternUnits="userSpaceOnUse"><rect width="8" height="8" fill="#fff"/><path d="M0 0L8 8M8 0L0 8" stroke="#555" stroke-width="1"/></pattern>
<pattern id="p-unused" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#fafafa"/><circle cx="3" cy="3" r="1" fill="#aaa"/></pattern>
</defs>"""


def _x(t: datetime, window: Interval) -> float:
    span = (window.end - window.start).total_seconds()
    if t <= window.start:
        return LEFT
    if t >= window.end:
        return LEFT + WIDTH
    return LEFT + (t - window.start).total_seconds() / span * WIDTH


def _span(interval: Interval, window: Interval) -> tuple[float, float]:
    x0, x1 = _x(interval.start, window), _x(interval.end, window)
    return round(x0, 2), round(max(x1 - x0, 0.8), 2)


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
        x = _x(t, window)
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
    return _svg(body, height, window, "overview", f'data-buckets="{n}"'), n


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


def _seg_title(ref, status, rows_of, by, vis, window) -> str:
    r = rows_of.get(ref.id)
    parts = [ref.id, f"status: {status}"]
    if r is not None:
        parts.append(f"{r[0]:,} rows, {r[1]:,} bytes")
    if ref.tombstone:
        parts.append("tombstone")
    if by:
        parts.append(
            "overshadowed by "
            + ", ".join(by[:3])
            + (f" and {len(by) - 3} more" if len(by) > 3 else "")
        )
    if status == "partial":
        parts.append("visible " + ", ".join(str(v) for v in vis))
    return "\n".join(parts)


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
    """One lane per version (newest on top). Returns the SVG and what it drew."""
    timeline = state.timeline
    chunks = state.chunks_overlapping(window)
    total = sum(len(c.segments) for c in chunks) + len(unused)
    mode = "segments" if total <= MAX_SEGMENT_MARKS else "chunks"
    info = {"mode": mode, "segments": total, "chunks": len(chunks), "marks": 0}
    if mode == "chunks" and len(chunks) > MAX_CHUNK_MARKS:
        info["mode"] = "zoom"
        return "", info
    highlight = highlight or {}
    segment_href = segment_hrefs(datasource)
    # lanes: version -> rows needed
    lanes: dict[str, int] = {}
    for c in chunks:
        need = len(c.segments) if mode == "segments" else 1
        lanes[c.version] = max(lanes.get(c.version, 0), need)
    extra: dict[tuple, int] = {}
    if mode == "segments":
        for seg in unused:
            key = (seg.start, seg.end, seg.version)
            extra[key] = extra.get(key, 0) + 1
    for p in pendings:
        key = (p.start, p.end, p.version)
        extra[key] = extra.get(key, 0) + 1
    for (s, e, v), k in extra.items():
        base = max(
            (
                len(c.segments)
                for c in chunks
                if c.version == v and c.interval.start == s and c.interval.end == e
            ),
            default=0,
        )
        if mode == "chunks":
            base = 1 if base else 0
        lanes[v] = max(lanes.get(v, 0), base + k)
    versions = sorted(lanes, reverse=True)
    top = 18
    lock_rows = min(len(locks), 12)
    lock_h = 14 * lock_rows + (6 if lock_rows else 0)
    y = top + lock_h
    lane_y: dict[str, float] = {}
    body: list[str] = []
    for v in versions:
        lane_y[v] = y
        h = lanes[v] * ROW
        body.append(
            f'<g class="lane" data-version="{escape(v)}"><rect x="{LEFT}" y="{y - 2}" width="{WIDTH}" '
            f'height="{h + 4}" fill="#fbfcfe" stroke="#e3e6ec"/>'
            f'<text x="4" y="{y + 9}" font-size="9.5">v {escape(v)}</text></g>'
        )
        y += h + LANE_GAP
    height = max(y + 6, top + 40)
    body = _ticks(window, 0, height) + body
    used_rows: dict[tuple, int] = {}
    marks = 0
    for c in chunks:
        key = (c.interval.start, c.interval.end, c.version)
        ly = lane_y[c.version]
        x, w = _span(c.interval, window)
        if mode == "chunks":
            used_rows[key] = 1
            st = (
                "incomplete"
                if not c.complete
                else "visible"
                if c.n_visible == len(c.segments)
                else "overshadowed"
                if c.n_overshadowed == len(c.segments)
                else "mixed"
            )
            fill = "#3d74e0" if st == "visible" else "url(#p-hatch)"
            stroke = (
                'stroke="#c0392b" stroke-dasharray="3 2"'
                if st == "incomplete"
                else 'stroke="#1d2330" stroke-width="0.3"'
            )
            title = (
                f"{c.interval} v{c.version}: {len(c.segments)} segments — {c.n_visible} visible, "
                f"{c.n_partial} partially overshadowed, {c.n_overshadowed} overshadowed"
                f"{', ' + str(c.tombstones) + ' tombstones' if c.tombstones else ''}"
                f"{'' if c.complete else ', incomplete'}"
            )
            body.append(
                f'<g class="chunk" data-chunk="{c.interval}" data-version="{escape(c.version)}" '
                f'data-segments="{len(c.segments)}" data-status="{st}"><title>{escape(title)}</title>'
                f'<rect x="{x}" y="{ly}" width="{w}" height="{ROW - 2}" fill="{fill}" {stroke}/>'
            )
            if c.n_visible or c.n_partial:
                share = (c.n_visible + c.n_partial) / len(c.segments)
                if st != "visible":
                    body.append(
                        f'<rect x="{x}" y="{ly + (ROW - 2) * (1 - share):.1f}" width="{w}" '
                        f'height="{(ROW - 2) * share:.1f}" fill="#3d74e0"/>'
                    )
            body.append("</g>")
            marks += 1
            continue
        used_rows[key] = len(c.segments)
        for row, ref in enumerate(c.segments):
            status = state.status.get(ref.id, "overshadowed")
            by = (
                sorted(timeline.overshadowed_by(ref.id))
                if status in ("partial", "overshadowed")
                else []
            )
            vis = timeline.visible_intervals(ref.id) if status == "partial" else []
            flags = []
            if ref.tombstone:
                flags.append("tombstone")
            if ref.id in c.partial_aug:
                flags.append("partial-aug")
            if not c.complete:
                flags.append("incomplete")
            d = details.get(ref.id)
            upgraded = bool(d and d[2])
            if upgraded:
                flags.append("upgraded")
            ry = ly + row * ROW
            title = _seg_title(ref, status, details, by, vis, window)
            if upgraded:
                title += f"\nupgraded from {d[2]}"
            hl = highlight.get(ref.id, "")
            attrs = (
                f'class="seg seg-{status}" data-segment-id="{escape(ref.id)}" data-status="{status}" '
                f'data-version="{escape(ref.version)}" data-partition="{ref.partition}" '
                f'data-flags="{" ".join(flags)}" data-overshadowed-by="{escape(" ".join(by[:MAX_BY]))}" '
                f'data-overshadowed-count="{len(by)}"' + (f' data-commit="{hl}"' if hl else "")
            )
            href = segment_href(ref.id)
            if ref.tombstone:
                base_fill = "url(#p-tomb)"
            elif status == "visible":
                base_fill = "#3d74e0"
            else:
                base_fill = "url(#p-hatch)"
            stroke = 'stroke="#1d2330" stroke-width="0.4"'
            if not c.complete:
                stroke = 'stroke="#c0392b" stroke-width="1.2" stroke-dasharray="3 2"'
            elif ref.id in c.partial_aug:
                stroke = 'stroke="#8e44ad" stroke-width="1.4" stroke-dasharray="1 1.5"'
            if hl:
                stroke = 'stroke="#e67e22" stroke-width="2.2"'
            parts = [
                f'<g {attrs}><a href="{href}"><title>{escape(title)}</title>'
                f'<rect class="extent" x="{x}" y="{ry}" width="{w}" height="{ROW - 2}" fill="{base_fill}" {stroke}/>'
            ]
            if status == "partial" and not ref.tombstone:
                for iv in vis:
                    vx, vw = _span(iv, window)
                    parts.append(
                        f'<rect class="visible-part" data-interval="{iv}" x="{vx}" y="{ry}" width="{vw}" '
                        f'height="{ROW - 2}" fill="#3d74e0"/>'
                    )
            label = []
            if ref.tombstone:
                label.append("tombstone")
            if ref.id in c.partial_aug:
                label.append("partial AUG")
            if not c.complete:
                label.append("incomplete")
            if upgraded:
                label.append("↑ upgraded")
            if label and w > 40:
                parts.append(
                    f'<text x="{x + 2}" y="{ry + ROW - 4}" font-size="8" fill="#1d2330" '
                    f'paint-order="stroke" stroke="#fff" stroke-width="2">{" · ".join(label)}</text>'
                )
            parts.append("</a></g>")
            body.append("".join(parts))
            marks += 1
    for seg in unused if mode == "segments" else ():
        key = (seg.start, seg.end, seg.version)
        if seg.version not in lane_y:
            continue
        row = used_rows.get(key, 0)
        used_rows[key] = row + 1
        ry = lane_y[seg.version] + row * ROW
        x, w = _span(Interval(seg.start, seg.end), window)
        href = segment_href(seg.id)
        body.append(
            f'<g class="seg seg-unused" data-segment-id="{escape(seg.id)}" data-status="unused" '
            f'data-version="{escape(seg.version)}" data-partition="{seg.partition}" data-flags="unused'
            f'{" tombstone" if seg.tombstone else ""}"><a href="{href}"><title>{escape(seg.id)}\nunused</title>'
            f'<rect x="{x}" y="{ry}" width="{w}" height="{ROW - 2}" fill="url(#p-unused)" stroke="#aaa" stroke-width="0.6"/>'
            + (
                f'<text x="{x + 2}" y="{ry + ROW - 4}" font-size="8" fill="#777">unused</text>'
                if w > 40
                else ""
            )
            + "</a></g>"
        )
        marks += 1
    for p in pendings:
        key = (p.start, p.end, p.version)
        if p.version not in lane_y:
            continue
        row = used_rows.get(key, 0)
        used_rows[key] = row + 1
        ry = lane_y[p.version] + row * ROW
        x, w = _span(Interval(p.start, p.end), window)
        body.append(
            f'<g class="pending" data-pending="{p.pk}" data-task="{escape(p.task_id or "")}" '
            f'data-version="{escape(p.version)}" data-partition="{p.partition}">'
            f"<title>{escape(f'being written by {p.task_id}: partition {p.partition} of {p.start}/{p.end} v{p.version}')}</title>"
            f'<rect x="{x}" y="{ry}" width="{w}" height="{ROW - 2}" fill="none" stroke="#1b4aa6" '
            f'stroke-width="1.2" stroke-dasharray="4 3"/></g>'
        )
        marks += 1
    for i, lock in enumerate(locks[:lock_rows]):
        x, w = _span(lock.interval, window)
        ly = top + 14 * i
        revoked = " revoked" if lock.revoked else ""
        text = f"{lock.type} {lock.task_id} p{lock.priority}{revoked}"
        style = (
            'fill="#fbdada" stroke="#8a1c1c" stroke-dasharray="2 2"'
            if lock.revoked
            else 'fill="#f5c26b" stroke="#8a5a00"'
        )
        body.append(
            f'<g class="lock" data-lock-id="{lock.pk}" data-lock-type="{lock.type}" '
            f'data-holder="{escape(lock.task_id)}" data-priority="{lock.priority}" '
            f'data-revoked="{"1" if lock.revoked else "0"}">'
            f"<title>{escape(f'{lock.type} lock on {lock.interval} held by {lock.task_id} (priority {lock.priority}, version {lock.version}){revoked}')}</title>"
            f'<rect x="{x}" y="{ly}" width="{w}" height="12" {style}/>'
            f'<rect x="{x}" y="{ly}" width="{w}" height="{height - ly - 4:.0f}" fill="none" stroke="#8a5a00" '
            f'stroke-width="0.8" stroke-dasharray="1 3" pointer-events="none"/>'
            + (
                f'<text x="{x + 2}" y="{ly + 9}" font-size="8">🔒 {escape(text)}</text>'
                if w > 60
                else ""
            )
            + "</g>"
        )
        marks += 1
    if lock_rows:
        body.append(f'<text x="4" y="{top + 10}" font-size="11">locks</text>')
    info["marks"] = marks
    return _svg(body, height, window, "interval", f'data-mode="{mode}"'), info
