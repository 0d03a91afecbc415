"""The overview (the console's home page) and the Services view.

The overview: task slots and workers, tasks by state, the dataSources with what
a query reads, locks held and waits, and when the background rounds last ran.
The Services view: each of Strata's processes and stores with its health, as
this web process can see it (a heartbeat, a ping, a TCP connect), each check
bounded to a second. The Coordinator's duties' last runs: `metastore.duty_glance`."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils import timezone

from console.security import role_required
from metastore import selectors
from metastore.last_runs import last_runs
from metastore.selectors import overview as glance
from metastore.selectors.duties import duties_glance

ROUNDS = ("reaper", "janitor")
JANITOR_EVERY_SECONDS = 60.0  # CELERY_BEAT_SCHEDULE's intermediary-janitor
_STARTED = time.time()
# Query parameters of the tasks list: "/" with them is an old link to that list.
TASK_LIST_PARAMS = ("status", "type", "datasource", "sort", "group", "page")


@dataclass(frozen=True)
class Service:
    kind: str  # web | database | redis | worker | beat | janitor | spark
    name: str
    healthy: bool | None  # None: not known
    detail: str
    seen_at: datetime | None = None


def _age(then: datetime | None, now: datetime) -> str:
    return "never" if then is None else f"{max(0.0, (now - then).total_seconds()):.0f} s ago"


def _rounds(now: datetime) -> tuple[dict, str | None]:
    try:
        return last_runs(list(ROUNDS), redis_url=settings.REDIS_URL), None
    except Exception as exc:  # Redis away: said so, not a 500
        return {name: None for name in ROUNDS}, f"Redis unreachable: {exc.__class__.__name__}"


def _background(now: datetime, runs: dict, problem: str | None) -> list[Service]:
    reaper_every = float(settings.STRATA_REAPER_SECONDS)
    out = []
    for kind, name, then, every in (
        ("beat", "beat (task reaper)", runs.get("reaper"), reaper_every),
        ("janitor", "intermediary janitor", runs.get("janitor"), JANITOR_EVERY_SECONDS),
    ):
        fresh = then is not None and now - then <= timedelta(seconds=max(3 * every, 30))
        detail = problem or f"last round {_age(then, now)} (every {every:g} s)"
        out.append(Service(kind, name, None if problem else fresh, detail, then))
    return out


def _timed(check) -> tuple[bool, str]:
    started = time.perf_counter()
    try:
        check()
    except Exception as exc:
        return False, f"{exc.__class__.__name__}: {str(exc)[:120]}"
    return True, f"answers in {(time.perf_counter() - started) * 1000:.1f} ms"


def _ping_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _ping_redis() -> None:
    import redis

    redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1).ping()


def spark_masters() -> list[tuple[str, int]]:
    """(host, port) of each master of a `spark://h1:p1,h2:p2` SPARK_MASTER; none
    when Spark runs inside each worker (`local[...]`)."""
    master = settings.SPARK_MASTER or ""
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master[len("spark://") :].split(","):
        host, _, port = part.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host, int(port)))
    return out


def _connect(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=1):
        pass


def services_health(now: datetime | None = None) -> list[Service]:
    now = now or timezone.now()
    up = int(time.time() - _STARTED)
    out = [
        Service(
            "web", f"{socket.gethostname()}:{os.getpid()}", True, f"this process, up {up} s", now
        )
    ]
    ok, detail = _timed(_ping_database)
    out.append(Service("database", connection.vendor, ok, detail, now))
    ok, detail = _timed(_ping_redis)
    out.append(Service("redis", "Redis (broker, throttle, last runs)", ok, detail, now))
    timeout = timedelta(seconds=float(settings.STRATA_HEARTBEAT_TIMEOUT))
    for w in glance.workers_registered():
        live = now - w.heartbeat_at <= timeout
        detail = f"{w.capacity} slots, heartbeat {_age(w.heartbeat_at, now)}"
        out.append(
            Service("worker", w.name, live, detail if live else f"lost: {detail}", w.heartbeat_at)
        )
    if not any(s.kind == "worker" for s in out):
        out.append(Service("worker", "(none)", False, "no worker registered: no task can start"))
    out += _background(now, *_rounds(now))
    for host, port in spark_masters():
        ok, detail = _timed(lambda h=host, p=port: _connect(h, p))
        out.append(Service("spark", f"spark://{host}:{port}", ok, detail, now))
    return out


@role_required()
def overview(request):
    if any(k in request.GET for k in TASK_LIST_PARAMS):  # an old link to the tasks list
        return redirect(f"{reverse('console:tasks')}?{request.GET.urlencode()}")
    now = timezone.now()
    runs, problem = _rounds(now)
    context = {
        "task_slots": selectors.task_slots(pending_limit=5),
        "tasks": glance.task_counts(now=now),
        "datasources": glance.datasources_glance(),
        "locks": glance.locks_glance(),
        "rounds": _background(now, runs, problem),
        "now": now,
    }
    context["duties"], context["duties_problem"] = duties_glance(now=now)
    return render(request, "console/overview.html", context)


@role_required()
def services_page(request):
    services = services_health()
    context = {"services": services, "unhealthy": [s for s in services if s.healthy is False]}
    return render(request, "console/services.html", context)


urlpatterns = [path("services", services_page, name="console-services")]
