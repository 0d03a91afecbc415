"""Console pages. Each partial is both part of its page and the HTMX fragment that
refreshes it (`hx-trigger="every 2s"`)."""

from __future__ import annotations

import json
from collections import OrderedDict

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.security import JSONRefused, parse_json_text, role_required
from metastore import selectors, services
from metastore.models import DataSource, Task, TaskStatus
from metastore.specs import SpecError


def _render(request, page: str, partial: str, context: dict) -> HttpResponse:
    template = partial if request.htmx else page
    return render(request, template, context)


@role_required()
def tasks_page(request):
    status = request.GET.get("status") or None
    if status and status.upper() not in TaskStatus.values:
        status = None
    context = {
        "tasks": selectors.tasks_list(status=status, datasource=request.GET.get("datasource"))[
            :200
        ],
        "status": status,
        "statuses": TaskStatus.values,
    }
    return _render(request, "console/tasks.html", "partials/task_table.html", context)


@role_required()
@require_POST
def task_submit(request):
    text = request.POST.get("spec", "")
    try:
        spec = parse_json_text(text, field="spec")
        task = services.task_submit(spec=spec, user=request.user)
    except JSONRefused as exc:
        messages.error(request, f"The spec is refused — {exc.field}: {exc.detail}")
        return redirect("console:tasks")
    except SpecError as exc:
        messages.error(request, f"Invalid spec — {exc}")
        return redirect("console:tasks")
    messages.success(request, f"Submitted {task.id}")
    return redirect("console:task", task_id=task.id)


@role_required()
def task_page(request, task_id: str):
    task = get_object_or_404(Task, id=task_id)
    context = {
        "task": task,
        "locks": task.locks.all(),
        "spec_json": json.dumps(task.spec, indent=2),
        "report_json": json.dumps(task.report, indent=2),
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


@role_required()
def locks_page(request):
    context = {
        "locks": selectors.locks_list(datasource=request.GET.get("datasource")),
        "waiting": Task.objects.filter(status=TaskStatus.WAITING).order_by("waiting_since"),
    }
    return _render(request, "console/locks.html", "partials/lock_table.html", context)


@role_required()
def datasources_page(request):
    return render(
        request, "console/datasources.html", {"datasources": selectors.datasources_list()}
    )


@role_required()
def datasource_page(request, name: str):
    if not DataSource.objects.filter(name=name).exists():
        raise Http404(f"no dataSource {name}")
    show_unused = request.GET.get("unused") == "1"
    views = selectors.segment_views(datasource=name, used=None if show_unused else True)
    chunks: OrderedDict = OrderedDict()
    for view in views:
        key = str(view.segment.interval)
        chunks.setdefault(key, []).append(view)
    for key in chunks:
        chunks[key].sort(
            key=lambda v: (v.segment.version, v.segment.minor_version, v.segment.partition),
            reverse=True,
        )
    counts = {"visible": 0, "partial": 0, "overshadowed": 0, "unused": 0}
    for view in views:
        counts[view.status] = counts.get(view.status, 0) + 1
    context = {
        "name": name,
        "chunks": chunks,
        "counts": counts,
        "show_unused": show_unused,
        "commits": selectors.commits_for(datasource=name)[:20],
        "locks": selectors.locks_list(datasource=name),
    }
    return _render(request, "console/datasource.html", "partials/segment_timeline.html", context)
