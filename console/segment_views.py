"""The Segments view: every segment of every dataSource (metastore.selectors.segment_list),
filtered by dataSource, interval, version, state and shard type, sorted by any
column, paged by cursor. A filter that makes no sense is a 400 page naming it."""

from __future__ import annotations

import base64
import binascii
import json
from urllib.parse import urlencode

from django.shortcuts import render
from django.urls import path

from console.security import parse_natural, role_required
from metastore.intervals import Interval
from metastore.selectors import segment_list as cs

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500

COLUMNS = (  # (header, sort key or None)
    ("DataSource", "datasource"),
    ("Start (UTC)", "start"),
    ("End (UTC)", "end"),
    ("Version", "version"),
    ("Partition", "partition"),
    ("Shard", None),
    ("State", None),
    ("Rows", "rows"),
    ("Size", "size"),
)


class Refused(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def encode_cursor(after: list) -> str:
    return base64.urlsafe_b64encode(json.dumps(after).encode()).decode().rstrip("=")


def decode_cursor(text: str, sort: str) -> list:
    try:
        raw = base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4))
        value, last_id = json.loads(raw)
        if not isinstance(last_id, str):
            raise ValueError("id")
        return [cs.cursor_value(sort, value), last_id]
    except (ValueError, TypeError, OverflowError, UnicodeError, binascii.Error):
        raise Refused("cursor", "invalid cursor; use the page's next link") from None


def parse_filters(get) -> cs.SegmentFilters:
    """The filters of a query string (the page's and the API's); Refused names a bad one."""
    interval = None
    text = (get.get("interval") or "").strip()
    if text:
        try:
            interval = Interval.parse(text)
        except (ValueError, TypeError, OverflowError):
            interval = None
        if interval is None or not interval.start < interval.end:
            raise Refused("interval", "an ISO-8601 start/end with start before end")
    state = get.get("state") or ""
    if state and state not in cs.STATES:
        raise Refused("state", f"one of {', '.join(cs.STATES)}")
    shard = get.get("shard") or ""
    if shard and shard not in cs.SHARD_TYPES:
        raise Refused("shard", f"one of {', '.join(cs.SHARD_TYPES)}")
    return cs.SegmentFilters(
        datasource=(get.get("datasource") or "").strip()[:255],
        interval=interval,
        version=(get.get("version") or "").strip()[:64],
        state=state,
        shard_type=shard,
    )


def parse_sort(get) -> str:
    sort = get.get("sort") or cs.DEFAULT_SORT
    if sort.lstrip("-") not in cs.SORTS:
        raise Refused("sort", f"one of {', '.join(cs.SORTS)}, '-' first for descending")
    return sort


def _sort_and_limit(get) -> tuple[str, int]:
    sort = parse_sort(get)
    limit = PAGE_SIZE
    if get.get("limit"):
        limit = parse_natural(get.get("limit")) or 0
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise Refused("limit", f"an integer from 1 to {MAX_PAGE_SIZE}")
    return sort, limit


def _headers(params: dict, sort: str) -> list[dict]:
    current, descending = sort.lstrip("-"), sort.startswith("-")
    out = []
    for label, key in COLUMNS:
        header = {"label": label, "href": None, "aria": None}
        if key:
            ascending_next = not (key == current and not descending)
            header["href"] = "?" + urlencode(
                {**params, "sort": key if ascending_next else f"-{key}"}
            )
            if key == current:
                header["aria"] = "descending" if descending else "ascending"
        out.append(header)
    return out


@role_required()
def segments_list(request):
    get = request.GET
    typed = {k: get.get(k, "") for k in ("datasource", "interval", "version", "state", "shard")}
    context = {"typed": typed, "states": cs.STATES, "shard_types": cs.SHARD_TYPES}
    try:
        filters = parse_filters(get)
        sort, limit = _sort_and_limit(get)
        after = decode_cursor(get["cursor"], sort) if get.get("cursor") else None
    except Refused as refused:
        context.update(error=refused, headers=[], rows=[])
        return render(request, "console/segments.html", context, status=400)
    page = cs.segments_page(filters=filters, sort=sort, after=after, limit=limit)
    params = {k: v for k, v in typed.items() if v}
    if limit != PAGE_SIZE:
        params["limit"] = limit
    next_href = None
    if page.next_after is not None:
        next_href = "?" + urlencode(
            {**params, "sort": sort, "cursor": encode_cursor(page.next_after)}
        )
    context.update(
        rows=page.rows,
        matching=page.matching,
        headers=_headers(params, sort),
        sort=sort,
        next_href=next_href,
        first_href="?" + urlencode({**params, "sort": sort}) if after is not None else None,
    )
    return render(request, "console/segments.html", context)


urlpatterns = [path("segments", segments_list, name="console-segments")]
