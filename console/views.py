"""Console pages. Each partial is both part of its page and the HTMX fragment that
refreshes it; only parts that can change (active tasks) poll."""

from __future__ import annotations

import base64
import binascii
import json
import re
from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from console import timeline_svg
from console.security import OPERATOR, JSONRefused, parse_json_text, parse_natural, role_required
from console.templatetags.console_format import utc
from console.waits_for_layout import waits_for_layout
from metastore import selectors, services, task_logs
from metastore.druid.errors import SpecError
from metastore.intervals import Interval
from metastore.models import (
    Segment,
    Task,
    TaskStatus,
    TaskType,
)
from metastore.selectors import retention as retention_selectors
from metastore.selectors import tasks as task_reads

TASKS_PER_PAGE = 50
COMMITS_PER_PAGE = 25
SEGMENT_TABLE_MAX = 200


def _render(request, page: str, partial: str, context: dict) -> HttpResponse:
    template = partial if request.htmx else page
    return render(request, template, context)


# --- tasks ------------------------------------------------------------------------------------


TASK_COLUMNS = (  # (header, sort key or None)
    ("Task", "id"),
    ("Type", "type"),
    ("DataSource", "datasource"),
    ("Status", "status"),
    ("Phase / progress", None),
    ("Priority", "priority"),
    ("Created (UTC)", "created"),
    ("Duration", None),
)


def _task_headers(filters: dict, sort: str) -> list[dict]:
    """Each column's header: a link that sorts by it (ascending, then descending)."""
    current, descending = sort.lstrip("-"), sort.startswith("-")
    out = []
    for label, key in TASK_COLUMNS:
        header = {"label": label, "href": None, "aria": None}
        if key:
            ascending_next = not (key == current and not descending)
            header["href"] = "?" + urlencode(
                {**filters, "sort": key if ascending_next else f"-{key}"}
            )
            if key == current:
                header["aria"] = "descending" if descending else "ascending"
        out.append(header)
    return out


@role_required()
def tasks_page(request):
    status = (request.GET.get("status") or "").upper() or None
    if status and status not in TaskStatus.values:
        status = None
    ttype = request.GET.get("type") or None
    if ttype and ttype not in TaskType.values:
        ttype = None
    datasource = (request.GET.get("datasource") or "").strip()[:255] or None
    sort = request.GET.get("sort") or ""
    if sort.lstrip("-") not in selectors.TASK_SORTS:
        sort = ""
    group = request.GET.get("group") or ""
    if group not in selectors.TASK_GROUPS:
        group = ""
    filters = {
        k: v for k, v in (("status", status), ("type", ttype), ("datasource", datasource)) if v
    }
    query = urlencode(
        {**filters, **({"sort": sort} if sort else {}), **({"group": group} if group else {})}
    )
    context = {"group": group, "groups": [], "group_by": selectors.TASK_GROUPS}
    rows, page = [], None
    if group:
        context["groups"] = _task_group_rows(group, filters)
    else:
        after = _task_cursor(request.GET.get("after"), sort)
        rows, next_after = task_reads.tasks_page(
            **filters, sort=sort, after=after, limit=TASKS_PER_PAGE
        )
        page = {
            "total": selectors.tasks_count(**filters),
            "after": request.GET.get("after") if after is not None else "",
            "next": _task_cursor_text(next_after),
        }
    context |= {
        "tasks": rows,
        "page": page,
        "status": status,
        "type": ttype,
        "datasource": datasource or "",
        "statuses": TaskStatus.values,
        "types": TaskType.values,
        "query": query,
        "filtered": bool(filters),
        "headers": _task_headers(filters, sort),
        "sort": sort,
    }
    partial = "partials/task_groups.html" if group else "partials/task_table.html"
    return _render(request, "console/tasks.html", partial, context)


def _task_cursor_text(values: list | None) -> str:
    """A tasks page's cursor for the URL (opaque: base64 of its JSON)."""
    if values is None:
        return ""
    plain = [v.isoformat() if isinstance(v, datetime) else v for v in values]
    return base64.urlsafe_b64encode(json.dumps(plain).encode()).decode()


def _task_cursor(text: str | None, sort: str) -> list | None:
    """The cursor `after` names, in its fields' types; None (the first page) when
    absent or not a cursor of this sort."""
    if not text:
        return None
    fields, _ = task_reads.task_order(sort)
    try:
        values = json.loads(base64.urlsafe_b64decode(text.encode()))
        if not isinstance(values, list) or len(values) != len(fields):
            return None
        return [_cursor_value(f, v) for f, v in zip(fields, values, strict=True)]
    except (ValueError, TypeError, binascii.Error):
        return None


def _cursor_value(field: str, value):
    if field == "created_at":
        found = datetime.fromisoformat(value)
        if found.tzinfo is None:
            raise ValueError("a time without its zone")
        return found
    if field == "priority":
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**31:
            raise ValueError("not a priority")
        return value
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def _exact(column: str, value: str) -> str:
    return f"={value}" if column == "datasource" else value


def _task_group_rows(group: str, filters: dict) -> list[dict]:
    """Each group with its counts per status and the link that lists its tasks."""
    rows = []
    for g in selectors.tasks_grouped(by=group, **filters):
        rows.append(
            {
                "value": g.value,
                "total": g.total,
                "counts": [g.by_status.get(st, 0) for st in TaskStatus.values],
                "newest": g.newest,
                "href": "?" + urlencode({**filters, group: _exact(group, g.value)}),
            }
        )
    return rows


TEMPLATES = ("ingest", "append", "replace", "compact", "kill")


def spec_template(kind: str, datasource: str, interval: str) -> dict:
    """A prefilled spec of each kind for `datasource` over `interval`."""
    ingest = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page"]},
                "metricsSpec": [{"type": "count", "name": "count"}],
                "granularitySpec": {
                    "segmentGranularity": "DAY",
                    "queryGranularity": "NONE",
                    "rollup": True,
                    "intervals": [interval],
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {
                    "type": "inline",
                    "data": '{"ts": "' + interval[:10] + 'T00:00:00Z", "page": "A"}',
                },
                "inputFormat": {"type": "json"},
                "appendToExisting": False,
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        },
    }
    if kind == "append":
        ingest["spec"]["ioConfig"]["appendToExisting"] = True
        del ingest["spec"]["dataSchema"]["granularitySpec"]["intervals"]
    elif kind == "replace":
        ingest["spec"]["ioConfig"]["dropExisting"] = True
    elif kind == "compact":
        return {
            "type": "compact",
            "dataSource": datasource,
            "ioConfig": {
                "type": "compact",
                "inputSpec": {"type": "interval", "interval": interval},
            },
            "tuningConfig": {"type": "index_parallel", "partitionsSpec": {"type": "dynamic"}},
        }
    elif kind == "kill":
        return {"type": "kill", "dataSource": datasource, "interval": interval}
    return ingest


def _field_line(text: str, field: str) -> int | None:
    """The 1-based line of the spec text where the offending field's key sits."""
    parts = [p for p in re.split(r"[.\[\]]", field) if p and not p.isdigit()]
    if not parts:
        return None
    lines = text.splitlines()
    start = 0
    found = None
    for part in parts:
        for i in range(start, len(lines)):
            if f'"{part}"' in lines[i]:
                found, start = i, i + 1
                break
    return found + 1 if found is not None else None


def _submit_context(text: str, kind: str, datasource: str, interval: str, error=None) -> dict:
    field = getattr(error, "field", None)
    line = _field_line(text, field) if field else None
    return {
        "spec_text": text,
        "template": kind,
        "templates": TEMPLATES,
        "datasource": datasource,
        "interval": interval,
        "error": error,
        "error_field": field,
        "error_message": getattr(error, "message", str(error) if error else ""),
        "error_line": line,
        "lines": list(enumerate(text.splitlines(), 1)) if error else [],
        "datasources": selectors.datasource_names(),
    }


@role_required(OPERATOR)
def task_new(request):
    kind = request.GET.get("template") or "ingest"
    if kind not in TEMPLATES:
        kind = "ingest"
    datasource = request.GET.get("datasource") or "wiki"
    interval = request.GET.get("interval") or "2024-01-01/2024-01-02"
    text = json.dumps(spec_template(kind, datasource, interval), indent=2)
    return render(
        request, "console/task_new.html", _submit_context(text, kind, datasource, interval)
    )


@role_required()
@require_POST
def task_submit(request):
    text = request.POST.get("spec", "")
    kind = request.POST.get("template", "")
    ds, interval = request.POST.get("datasource", ""), request.POST.get("interval", "")
    try:
        spec = parse_json_text(text, field="spec")
        task = services.task_submit(spec=spec, user=request.user)
    except JSONRefused as exc:
        line = _json_error_line(text) if "not valid JSON" in str(exc.detail) else None
        field = f"(JSON line {line})" if line else exc.field
        error = SpecError(field, f"the spec is {exc.detail}")
        context = _submit_context(text, kind, ds, interval, error)
        context["error_line"] = line
        return render(request, "console/task_new.html", context, status=400)
    except SpecError as exc:
        # Refused input: 400, the form again with the error at its field.
        return render(
            request,
            "console/task_new.html",
            _submit_context(text, kind, ds, interval, exc),
            status=400,
        )
    messages.success(request, f"Submitted {task.id}")
    return redirect("console:task", task_id=task.id)


def _json_error_line(text: str) -> int | None:
    """The line of a JSON syntax error in `text` (None if it parses)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return exc.lineno
    except (ValueError, RecursionError):
        return None
    return None


def _phase_rows(task: Task) -> list[dict]:
    phases = (task.report or {}).get("phases") or {}
    rows = []
    total = sum(v for v in phases.values() if isinstance(v, int | float)) or 0
    for name, seconds in phases.items():
        if not isinstance(seconds, int | float):
            continue
        rows.append(
            {
                "name": name,
                "seconds": seconds,
                "share": (seconds / total * 100) if total else 0,
                "done": 100,
            }
        )
    if task.is_active and task.phase and task.phase not in phases:
        rows.append(
            {"name": task.phase, "seconds": None, "share": 0, "done": round(task.progress * 100)}
        )
    offset = 0.0
    for r in rows:
        r["offset"] = offset
        offset += r["share"]
    return rows


def _log_tail(task_id: str) -> dict | None:
    """The end of the task's log, starting at a whole line; None if it has none."""
    tail = task_logs.task_log_read(task_id=task_id, offset=-task_logs.TAIL_BYTES)
    if tail is None:
        return None
    clipped = len(tail) >= task_logs.TAIL_BYTES
    if clipped and b"\n" in tail:
        tail = tail.split(b"\n", 1)[1]
    return {"text": tail.decode("utf-8", "replace"), "clipped": clipped}


@role_required()
def task_page(request, task_id: str):
    task = selectors.task_get(task_id=task_id)
    if task is None:
        raise Http404(task_id)
    blockers = [b.get("task") for b in task.waiting_on or [] if b.get("task")]
    context = {
        "task": task,
        "locks": selectors.locks_of_task(task_id=task.id),
        "blocking": selectors.tasks_blocked_by(task_id=task.id),
        "blockers": blockers,
        "phases": _phase_rows(task),
        "spec_json": json.dumps(task.spec, indent=2),
        "report_json": json.dumps(task.report, indent=2),
        "samples": (task.report or {}).get("parseExceptionSamples") or [],
        "log_tail": _log_tail(task.id),
        "row_stats": (task.report or {}).get("rowStats"),
    }
    return _render(request, "console/task.html", "partials/task_detail.html", context)


@role_required()
@require_POST
def task_cancel(request, task_id: str):
    try:
        services.task_cancel(task_id=task_id, user=request.user)
        messages.info(request, f"Cancel requested for {task_id}")
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    except Task.DoesNotExist:
        raise Http404(task_id) from None
    return redirect("console:task", task_id=task_id)


# --- locks ------------------------------------------------------------------------------------


@role_required()
def locks_page(request):
    waiting = selectors.tasks_waiting(limit=200)
    context = {
        "locks": selectors.locks_list(datasource=request.GET.get("datasource")),
        "waiting": waiting,
        "waits_for": waits_for_layout((t.id, t.waiting_on) for t in waiting),
    }
    return _render(request, "console/locks.html", "partials/lock_table.html", context)


# --- dataSources --------------------------------------------------------------------------------


@role_required()
def datasources_page(request):
    return render(
        request,
        "console/datasources.html",
        {"datasources": selectors.datasources_overview()},
    )


def _parse_interval(text: str | None) -> Interval | None:
    if not text:
        return None
    try:
        interval = Interval.parse(text)
    except (ValueError, TypeError):
        return None
    return interval if interval.start < interval.end else None


def _extent(name: str, state, held: list, show_unused: bool) -> Interval | None:
    """The whole dataSource: its segments, and what is locked or being written
    (`held`: locks and pending allocations), and its unused segments if shown."""
    spans = [(state.extent.start, state.extent.end)] if state.extent else []
    spans += [(x.start, x.end) for x in held]
    if show_unused:
        unused_span = selectors.unused_span(datasource=name)
        if unused_span is not None:
            spans.append((unused_span.start, unused_span.end))
    return Interval(min(s for s, _ in spans), max(e for _, e in spans)) if spans else None


def _segment_table(name: str, state, chunks, details: dict, unused) -> list[dict]:
    """The rows of the segments table under the timeline: each chunk's segments,
    newest version first, then the unused segments shown."""
    segment_href = timeline_svg.segment_hrefs(name)
    table = []
    for c in chunks:
        for ref in sorted(
            c.segments, key=lambda r: (r.version, r.minor_version, r.partition), reverse=True
        ):
            table.append(_used_row(state, c, ref, details.get(ref.id, (0, 0, "")), segment_href))
    for seg in unused:
        table.append(
            {
                "id": seg.id,
                "href": segment_href(seg.id),
                "interval": seg.interval,
                "version": seg.version,
                "minor": seg.minor_version,
                "partition": seg.partition,
                "roots": [],
                "tombstone": seg.tombstone,
                "rows": seg.num_rows,
                "size": seg.size_bytes,
                "upgraded_from": seg.upgraded_from,
                "status": "unused",
                "incomplete": False,
                "visible": [],
                "by": [],
            }
        )
    return table


def _used_row(state, chunk, ref, d: tuple, segment_href) -> dict:
    st = chunk.status_of(ref)
    return {
        "id": ref.id,
        "href": segment_href(ref.id),
        "interval": ref.interval,
        "version": ref.version,
        "minor": ref.minor_version,
        "partition": ref.partition,
        "roots": sorted(ref.roots) if len(ref.roots) > 1 else [],
        "tombstone": ref.tombstone,
        "rows": d[0],
        "size": d[1],
        "upgraded_from": d[2],
        "status": "overshadowed" if st == "incomplete" else st,
        "incomplete": st == "incomplete",
        "visible": state.timeline.visible_intervals(ref.id) if st == "partial" else [],
        "by": sorted(state.timeline.overshadowed_by(ref.id))
        if st in ("partial", "overshadowed")
        else [],
    }


def _int_param(request, name: str, default: int) -> int:
    try:
        return int(request.GET.get(name, default))
    except ValueError:
        return default


def _window_facts(name: str, chunks, n_segments: int, window: Interval, show_unused: bool):
    """The unused segments shown in `window` (if asked for) and the rows, bytes and
    origin of its segments when few enough are drawn one by one."""
    unused = []
    if show_unused:
        unused = selectors.unused_segments_in(
            datasource=name, interval=window, limit=timeline_svg.MAX_SEGMENT_MARKS
        )
    details = {}
    if n_segments + len(unused) <= timeline_svg.MAX_SEGMENT_MARKS:
        details = selectors.segment_facts(ids=[r.id for c in chunks for r in c.segments])
    return unused, details


def _state_at(name: str, as_of: int | None):
    """The timeline state as of commit `as_of` (None: now). As of the dataSource's
    newest commit it is the current state, kept per commit, not rebuilt from a
    checkpoint (seconds at 584,000 segments): the page of the last commit."""
    if as_of is not None and as_of == selectors.last_commit_seq(datasource=name):
        state = selectors.timeline_state(datasource=name)
        if state.seq == as_of:
            return state
    return selectors.timeline_state(datasource=name, as_of=as_of)


def _timeline_context(
    request, name: str, *, as_of: int | None, window: Interval | None, highlight=None
) -> dict:
    show_unused = request.GET.get("unused") == "1"
    state = _state_at(name, as_of)
    current = as_of is None
    all_locks = selectors.active_locks(datasource=name) if current else []
    all_pendings = selectors.pending_allocations(datasource=name) if current else []
    extent = _extent(name, state, [*all_locks, *all_pendings], show_unused)
    if window is None:
        window = extent or Interval.parse("2000-01-01/2000-01-02")
    granularity = timeline_svg.segment_granularity(state)
    window = timeline_svg.snap_window(window, granularity)
    locks = [x for x in all_locks if x.start < window.end and x.end > window.start]
    pendings = [x for x in all_pendings if x.start < window.end and x.end > window.start]
    overview_svg, n_buckets = timeline_svg.overview(
        state,
        window,
        selectors.state_rows(datasource=name, state=state, interval=window),
        locks,
        pendings,
        _int_param(request, "buckets", 400),
    )
    chunks = state.chunks_overlapping(window)
    n_segments = sum(c.size for c in chunks)
    unused, details = _window_facts(name, chunks, n_segments, window, show_unused)
    interval_svg, info = timeline_svg.interval_view(
        datasource=name,
        state=state,
        window=window,
        details=details,
        locks=locks,
        pendings=pendings,
        unused=unused,
        highlight=highlight,
    )
    table = []
    if n_segments <= SEGMENT_TABLE_MAX:
        table = _segment_table(name, state, chunks, details, unused)
    return {
        "name": name,
        "window": window,
        "granularity": granularity,
        "extent": extent,
        "as_of": as_of,
        "show_unused": show_unused,
        "overview_svg": overview_svg,
        "n_buckets": n_buckets,
        "interval_svg": interval_svg,
        "info": info,
        "table": table,
        "table_shown": n_segments <= SEGMENT_TABLE_MAX,
        "counts": timeline_svg.window_counts(state, window),  # the badges follow the window
        "locks": locks,
        "pendings": pendings,
        "state": state,
    }


@role_required()
def datasource_page(request, name: str):
    if not selectors.datasource_known(name=name):
        raise Http404(f"no dataSource {name}")
    window = _parse_interval(request.GET.get("interval"))
    if request.GET.get("interval") and window is None:
        messages.error(request, f"interval {request.GET.get('interval')!r} is not an ISO interval")
    as_of = parse_natural(request.GET.get("as_of"))
    if request.GET.get("as_of") and as_of is None:
        messages.error(request, "as_of must be a commit number")
    first_seq, last_seq = selectors.commit_neighbours(datasource=name)
    if as_of is not None and as_of >= last_seq:
        as_of = None
    refusal = as_of is not None and retention_selectors.as_of_refusal(datasource=name, as_of=as_of)
    if refusal:
        messages.error(request, refusal)
        as_of = None
    context = _timeline_context(request, name, as_of=as_of, window=window)
    if window is not None and context["window"] != window and not request.htmx:
        # A dragged window, snapped to the segment granularity: the URL says so too.
        params = request.GET.copy()
        params["interval"] = str(context["window"])
        return redirect(f"{request.path}?{params.urlencode()}")
    commits = Paginator(selectors.commits_for(datasource=name), COMMITS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    context.update(
        {
            "commits": commits,
            "first_seq": first_seq,
            "last_seq": last_seq,
            "active_tasks": selectors.active_tasks_of(datasource=name, limit=20),
            "full_path": request.get_full_path(),
        }
    )
    return _render(request, "console/datasource.html", "partials/datasource_timeline.html", context)


def _json_html(value) -> str:
    return format_html("<code>{}</code>", json.dumps(value, sort_keys=True))


def _segment_fields(seg: Segment) -> list[tuple[str, str]]:
    """The segment's fields as (name, HTML): names for ids, JSON for JSON, yes/no
    for flags, ISO-8601 UTC for times. Schema and compaction state have sections."""
    yes_no = {True: "yes", False: "no"}
    task = seg.created_by_id
    return [
        ("id", format_html("<code>{}</code>", seg.id)),
        (
            "datasource",
            format_html(
                '<a href="{}">{}</a>',
                reverse("console:datasource", args=[seg.datasource.name]),
                seg.datasource.name,
            ),
        ),
        ("interval", format_html("<code>{}</code>", seg.interval)),
        ("version", format_html("<code>{}</code>", seg.version)),
        ("partition", str(seg.partition)),
        ("minor_version", str(seg.minor_version)),
        ("core_partitions", str(seg.core_partitions)),
        ("root_partitions", _json_html(seg.root_partitions)),
        ("atomic_update_group", _json_html(seg.atomic_update_group)),
        ("shard_spec", _json_html(seg.shard_spec)),
        ("tombstone", yes_no[seg.tombstone]),
        ("num_rows", f"{seg.num_rows:,}"),
        (
            "size_bytes",
            format_html("{} bytes ({})", f"{seg.size_bytes:,}", filesizeformat(seg.size_bytes)),
        ),
        ("location", format_html("<code>{}</code>", seg.location) if seg.location else "—"),
        ("used", yes_no[seg.used]),
        ("used_status_updated_at", utc(seg.used_status_updated_at)),
        (
            "created_by",
            format_html('<a href="{}">{}</a>', reverse("console:task", args=[task]), task)
            if task
            else "—",
        ),
        ("created_at", utc(seg.created_at)),
    ]


@role_required()
def segment_page(request, name: str, segment_id: str):
    detail = selectors.segment_detail(segment_id=segment_id)
    if detail is None or detail["segment"].datasource.name != name:
        raise Http404(f"no segment {segment_id} in {name}")
    detail.update(
        {
            "name": name,
            "fields": _segment_fields(detail["segment"]),
            "schema_json": json.dumps(detail["schema"], indent=2) if detail["schema"] else "",
            "compaction_json": json.dumps(detail["compaction_state"], indent=2)
            if detail["compaction_state"]
            else "",
        }
    )
    return render(request, "console/segment.html", detail)


def _commit_timelines(request, name: str, seqs, window, span, ids) -> tuple[dict, dict | None]:
    """The timeline contexts after commit seqs[1] and before it (as of seqs[0],
    None for the first), drawn over `window`. Both are built from the segments
    around `window` and `span` only (`selectors.state_around`): the page costs what
    the commit touched, not the dataSource's history. Without a window (a commit
    that changed nothing) the whole timelines are drawn."""
    prev, seq = seqs
    added = {sid: "added" for sid in ids["added"]}
    removed = {sid: "removed" for sid in ids["removed"]}
    if window is None:
        after = _timeline_context(request, name, as_of=seq, window=None, highlight=added)
        before = None
        if prev is not None:
            before = _timeline_context(
                request, name, as_of=prev, window=after["window"], highlight=removed
            )
        return after, before
    region = _hull(window, span)
    state = selectors.state_around(datasource=name, as_of=seq, interval=region)
    # The window snaps to the segment granularity of what is around it.
    granularity = timeline_svg.segment_granularity(state)
    window = timeline_svg.snap_window(window, granularity)
    if _hull(window, span) != region:
        region = _hull(window, span)
        state = selectors.state_around(datasource=name, as_of=seq, interval=region)
    after = _commit_side(request, name, state, window, added)
    before = None
    if prev is not None:
        state = selectors.state_around(datasource=name, as_of=prev, interval=region)
        before = _commit_side(request, name, state, window, removed)
    return after, before


def _commit_side(request, name: str, state, window: Interval, highlight: dict) -> dict:
    """One of the commit page's two timelines: the interval view of `window` (what
    the page draws of `_timeline_context`, from a state of the segments around it)."""
    chunks = state.chunks_overlapping(window)
    n_segments = sum(c.size for c in chunks)
    show_unused = request.GET.get("unused") == "1"
    unused, details = _window_facts(name, chunks, n_segments, window, show_unused)
    interval_svg, _ = timeline_svg.interval_view(
        datasource=name,
        state=state,
        window=window,
        details=details,
        locks=[],  # a past timeline: no locks or allocations drawn
        pendings=[],
        unused=unused,
        highlight=highlight,
    )
    return {"window": window, "interval_svg": interval_svg, "state": state}


def _hull(window: Interval, span: Interval | None) -> Interval:
    if span is None:
        return window
    return Interval(min(window.start, span.start), max(window.end, span.end))


@role_required()
def commit_page(request, name: str, seq: int):
    entry = selectors.commit_entry(datasource=name, seq=seq)
    if entry is None:
        raise Http404(f"{name} has no commit {seq}")
    added, removed = list(entry.added or []), list(entry.removed or [])
    span = selectors.segments_span(ids=(added + removed)[:2000])
    window = _parse_interval(request.GET.get("interval")) or span
    prev = selectors.commit_before(datasource=name, seq=seq)
    refusal = retention_selectors.as_of_refusal(
        datasource=name, as_of=prev if prev is not None else seq
    )
    if refusal:  # shown, not refused: the change set itself is still true
        messages.warning(request, f"{refusal}; the timelines below may lack deleted segments")
    after, before = _commit_timelines(
        request, name, (prev, seq), window, span, {"added": added, "removed": removed}
    )
    change = None
    if span is not None:
        # What the commit overshadowed: segments read by queries before it and not
        # (or only in part) after it. Its "removed" are only those marked unused.
        change = selectors.commit_change(
            datasource=name,
            before=before["state"] if before else None,
            after=after["state"],
            window=span,
        )
    return render(
        request,
        "console/commit.html",
        {
            "name": name,
            "entry": entry,
            "added": added[:200],
            "removed": removed[:200],
            "n_added": len(added),
            "n_removed": len(removed),
            "change": change,
            "change_window": span,
            "after": after,
            "before": before,
            "prev": prev,
            "next": selectors.commit_after(datasource=name, seq=seq),
        },
    )


ACTIONS = ("mark_unused", "mark_used", "kill", "compact")


def _action_refused(request, name: str, field: str, message: str) -> HttpResponse:
    """A refused operator action: 400, the dataSource's page again with the error
    shown at the offending field of its action form, the typed interval kept."""
    typed = (request.POST.get("interval") or "").strip()
    window = _parse_interval(typed)
    context = _timeline_context(request, name, as_of=None, window=window)
    first_seq, last_seq = selectors.commit_neighbours(datasource=name)
    context.update(
        {
            "commits": Paginator(selectors.commits_for(datasource=name), COMMITS_PER_PAGE).get_page(
                1
            ),
            "first_seq": first_seq,
            "last_seq": last_seq,
            "active": selectors.has_active_tasks(datasource=name),
            "full_path": reverse("console:datasource", args=[name]),
            "action_error": {"field": field, "message": message},
            "action_interval": typed,
        }
    )
    return render(request, "console/datasource.html", context, status=400)


def _action_problem(action, interval_text: str, interval, ids) -> tuple[str, str] | None:
    """(form field, what is wrong) with an operator action's input, or None."""
    if action not in ACTIONS:
        return "action", f"unknown action {action!r}; one of {', '.join(ACTIONS)}"
    if interval_text and interval is None:
        return "interval", f"{interval_text[:200]!r} is not an ISO interval"
    if action in ("compact", "kill") and interval is None:
        return "interval", f"{action} needs an interval"
    if action in ("mark_unused", "mark_used") and not ids and interval is None:
        return "interval", "give an interval or select segments"
    return None


@role_required()
@require_POST
def datasource_action(request, name: str):
    if not selectors.datasource_exists(name=name):
        raise Http404(name)
    action = request.POST.get("action")
    interval_text = (request.POST.get("interval") or "").strip()
    interval = _parse_interval(interval_text)
    ids = [i for i in request.POST.getlist("segment") if i]
    back = reverse("console:datasource", args=[name]) + (
        f"?interval={interval_text}" if interval else ""
    )
    problem = _action_problem(action, interval_text, interval, ids)
    if problem is not None:
        return _action_refused(request, name, *problem)
    if action == "compact":
        return redirect(
            reverse("console:task-new")
            + f"?template=compact&datasource={name}&interval={interval_text}"
        )
    if request.POST.get("confirm") != "yes":
        count, sample = selectors.segments_to_mark(
            datasource=name, used=action != "mark_unused", ids=ids, interval=interval
        )
        context = {"name": name, "action": action, "label": action.replace("_", " ")}
        context |= {"interval": interval_text if interval else "", "ids": ids, "back": back}
        context |= {"count": count, "sample": sample}
        return render(request, "console/confirm_action.html", context)
    if action == "kill":
        try:
            task = services.task_submit(
                spec={"type": "kill", "dataSource": name, "interval": interval_text},
                user=request.user,
            )
        except SpecError as exc:
            return _action_refused(request, name, "interval", f"kill refused — {exc}")
        messages.success(request, f"Submitted kill task {task.id}")
        return redirect("console:task", task_id=task.id)
    try:
        entry = services.segments_mark_used(
            datasource=name,
            used=action == "mark_used",
            interval=None if ids else interval,
            segment_ids=ids or None,
            user=request.user,
        )
    except services.ServiceError as exc:
        field = "segment" if ids else "interval"
        return _action_refused(request, name, field, str(exc))
    if entry is None:
        messages.info(request, "nothing to change")
    else:
        n = len(entry.added or entry.removed)
        messages.success(
            request,
            f"commit #{entry.seq}: {n} segments marked {'used' if action == 'mark_used' else 'unused'}",
        )
    return redirect(back)
