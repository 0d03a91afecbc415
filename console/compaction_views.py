"""The console's auto-compaction page: each configured dataSource's intervals,
newest first, with status and reason (live through HTMX), and its config."""

from __future__ import annotations

import json

from django.shortcuts import render

from console.security import role_required
from metastore.duties import compaction_run
from metastore.duties.compaction import snapshot
from metastore.selectors import compaction as reads


def _rows(datasource: str | None) -> tuple[list[dict], compaction_run.CompactionPlans]:
    plans = compaction_run.compaction_plans(datasource=datasource)
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


@role_required()
def compaction_page(request):
    """GET /compaction[?datasource=]: per-interval status with reasons."""
    datasource = request.GET.get("datasource") or None
    rows, plans = _rows(datasource)
    context = {
        "datasources": rows,
        "budget": plans.budget,
        "used": plans.used,
        "last_run_at": plans.last_run_at,
        "selected": datasource,
    }
    template = "partials/compaction_intervals.html" if request.htmx else "console/compaction.html"
    return render(request, template, context)
