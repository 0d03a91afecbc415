"""The task slots fragment: `partials/task_slots.html`, refreshed every 2 s by HTMX
wherever it is included (the locks page): the live workers with their capacity
(registered with their heartbeat), the tasks holding the slots, the PENDING ones."""

from __future__ import annotations

from django.shortcuts import render

from console.security import role_required
from metastore import selectors


@role_required()
def task_slots_fragment(request):
    return render(request, "partials/task_slots.html", {"task_slots": selectors.task_slots()})
