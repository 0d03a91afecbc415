"""The console's auto-compaction page: each configured dataSource's intervals,
newest first, with status and reason (live through HTMX), and its config, which
the page creates, edits (Druid's JSON, validated as the API does) and deletes."""

from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse

from console.security import role_required
from metastore import services
from metastore.druid.errors import SpecError
from metastore.duties.compaction import snapshot
from metastore.selectors import compaction as reads
from metastore.strict_json import JSONRefused, parse_json_text

NEW_CONFIG = {"dataSource": "", "skipOffsetFromLatest": "P1D", "granularitySpec": None}


def _rows(datasource: str | None) -> tuple[list[dict], reads.CompactionPlans]:
    plans = reads.compaction_plans(datasource=datasource)
    state = "RUNNING" if plans.last_run_at else "AWAITING_FIRST_RUN"
    configs = {c.datasource: c for c in reads.compaction_configs()}
    return [
        {
            "name": ds,
            "snapshot": snapshot(ds, statuses, status=state),
            "intervals": statuses,
            "config_json": json.dumps(reads.config_json(configs[ds]), indent=2),
        }
        for ds, statuses in sorted(plans.statuses.items())
        if ds in configs
    ], plans


def _form_text(datasource: str | None) -> str:
    config = reads.compaction_config(datasource=datasource) if datasource else None
    if config is None:
        return json.dumps({**NEW_CONFIG, "dataSource": datasource or ""}, indent=2)
    return json.dumps(reads.config_json(config), indent=2)


def _page(request, datasource: str | None, *, text: str | None = None, error=None, status=200):
    rows, plans = _rows(datasource)
    context = {
        "datasources": rows,
        "budget": plans.budget,
        "used": plans.used,
        "last_run_at": plans.last_run_at,
        "selected": datasource,
        "config_text": _form_text(datasource) if text is None else text,
        "error_field": error.field if error else None,
        "error_message": error.message if error else None,
    }
    template = "partials/compaction_intervals.html" if request.htmx else "console/compaction.html"
    return render(request, template, context, status=status)


def _audit(request) -> dict:
    return {
        "author": request.user.get_username(),
        "comment": request.POST.get("comment", ""),
        "ip": request.META.get("REMOTE_ADDR", ""),
    }


def _back(datasource: str | None):
    url = reverse("console:compaction")
    return redirect(f"{url}?datasource={datasource}" if datasource else url)


@role_required()
def compaction_page(request):
    """GET /compaction[?datasource=]: per-interval status with reasons. POST
    `action=save` with `config` (Druid's JSON) creates or replaces a config;
    `action=delete` with `datasource` turns auto-compaction of it off."""
    datasource = request.GET.get("datasource") or None
    if request.method != "POST":
        return _page(request, datasource)
    if request.POST.get("action") == "delete":
        name = request.POST.get("datasource", "")
        if services.compaction_config_delete(datasource=name, **_audit(request)):
            messages.success(request, f"Auto-compaction of {name} is off")
        return _back(None)
    text = request.POST.get("config", "")
    try:
        data = parse_json_text(text, field="config")
        config = services.compaction_config_set(data=data, **_audit(request))
    except JSONRefused as exc:
        error = SpecError(exc.field or "config", f"the config is {exc.detail}")
        return _page(request, datasource, text=text, error=error, status=400)
    except SpecError as exc:
        return _page(request, datasource, text=text, error=exc, status=400)
    messages.success(request, f"Saved the auto-compaction config of {config.datasource}")
    return _back(config.datasource)
