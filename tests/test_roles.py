"""Roles (issue 15): viewer reads everything, operator also acts (submit, cancel,
mark used/unused, kill, compact), admin also administers (Django admin, users).
Enforced per endpoint, by real requests per role: the REST API, the Druid shim
(Overlord and Coordinator APIs, with token or HTTP Basic authentication), both
SQL endpoints (a query is a read: viewers may run it), and the console (buttons
hidden and refused, a refused action changing nothing). Users and tokens are
made with the management commands."""

from __future__ import annotations

import base64
import io
import json
import re

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.core.management import call_command
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from metastore import services
from metastore.models import CommitLogEntry, Segment, Task, TaskStatus

pytestmark = pytest.mark.django_db

ROLES = ["anonymous", "norole", "viewer", "operator", "admin", "superuser"]
RANK = {"anonymous": -1, "norole": 0, "viewer": 1, "operator": 2, "admin": 3, "superuser": 3}


def make_user(django_user_model, role: str):
    if role == "anonymous":
        return None
    if role == "superuser":
        return django_user_model.objects.create_superuser(role, "", "pw")
    user = django_user_model.objects.create_user(role, password="pw")
    if role != "norole":
        user.groups.add(Group.objects.get(name=role))
    return user


def client_for(user) -> APIClient:
    client = APIClient()
    if user is not None:
        _, key = services.api_token_issue(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def world(publish, claimed_task, no_enqueue):
    published = publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    running = claimed_task("wiki")
    return {"published": published, "running": running}


def endpoints(world, inline_spec):
    seg = world["published"].segment_ids[0]
    return [
        ("get", "/api/v1/tasks", None, 1),
        ("get", f"/api/v1/tasks/{world['running'].id}", None, 1),
        ("get", "/api/v1/locks", None, 1),
        ("get", "/api/v1/datasources", None, 1),
        ("get", "/api/v1/datasources/wiki/segments", None, 1),
        ("get", "/api/v1/datasources/wiki/timeline", None, 1),
        ("get", "/api/v1/datasources/wiki/commits", None, 1),
        ("post", "/api/v1/tasks", inline_spec("fresh"), 2),
        ("post", f"/api/v1/tasks/{world['running'].id}/cancel", {}, 2),
        ("post", "/api/v1/datasources/wiki/mark-unused", {"segment_ids": [seg]}, 2),
        ("post", "/api/v1/datasources/wiki/mark-used", {"segment_ids": [seg]}, 2),
    ]


ENDPOINT_IDS = [
    "list-tasks",
    "get-task",
    "locks",
    "datasources",
    "segments",
    "timeline",
    "commits",
    "submit",
    "cancel",
    "mark-unused",
    "mark-used",
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("index", range(len(ENDPOINT_IDS)), ids=ENDPOINT_IDS)
def test_api_endpoint_per_role(role, index, world, inline_spec, django_user_model):
    method, path, body, needed = endpoints(world, inline_spec)[index]
    user = make_user(django_user_model, role)
    client = client_for(user)
    tasks_before = Task.objects.count()
    used_before = list(Segment.objects.values_list("id", "used"))
    response = client.get(path) if method == "get" else client.post(path, body, format="json")
    allowed = RANK[role] >= needed
    if allowed:
        assert response.status_code in (200, 201, 202), (response.status_code, response.content)
    else:
        assert response.status_code in (401, 403), (response.status_code, response.content)
        assert "detail" in response.json()
        assert Task.objects.count() == tasks_before
        assert list(Segment.objects.values_list("id", "used")) == used_before
        assert Task.objects.get(id=world["running"].id).cancel_requested is False
    if role == "viewer" and not allowed:
        assert "operator" in response.json()["detail"]


class AdminOnly(APIView):
    strata_role = "admin"

    def get(self, request):
        return Response({"ok": True})


@pytest.mark.parametrize("role", ROLES)
def test_a_view_may_require_more_than_its_method_with_strata_role(role, django_user_model):
    user = make_user(django_user_model, role)
    request = APIRequestFactory().get("/admin-only")
    if user is not None:
        force_authenticate(request, user=user)
    response = AdminOnly.as_view()(request)
    assert (response.status_code == 200) == (RANK[role] >= 3), response.status_code


# --- the Druid shim and SQL -----------------------------------------------------------------


@pytest.fixture
def druid_world(world, publish):
    """`world`, plus an unused segment on 2024-01-02 for the markUsed endpoints. The
    anonymous request throttle counts per process: it starts from zero."""
    cache.clear()
    unused = publish("wiki", "2024-01-02/2024-01-03", {"2024-01-02/2024-01-03": 1})
    services.segments_mark_used(datasource="wiki", used=False, segment_ids=unused.segment_ids)
    return {**world, "used": world["published"].segment_ids[0], "unused": unused.segment_ids[0]}


def metastore_state() -> dict:
    return {
        "tasks": Task.objects.count(),
        "segments": list(Segment.objects.order_by("id").values_list("id", "used")),
        "canceling": list(Task.objects.filter(cancel_requested=True).values_list("id", flat=True)),
        "commits": CommitLogEntry.objects.count(),
    }


def is_used(segment_id: str) -> bool:
    return Segment.objects.get(id=segment_id).used


IDX, COORD = "/druid/indexer/v1", "/druid/coordinator/v1"

# name -> (method, path, body, the least role, what an allowed write did); paths and
# bodies name the world's objects as {running}, {used}, {unused}, {spec}.
DRUID_AND_SQL = {
    "druid-tasks": ("get", f"{IDX}/tasks", None, "viewer", None),
    "druid-runningTasks": ("get", f"{IDX}/runningTasks", None, "viewer", None),
    "druid-completeTasks": ("get", f"{IDX}/completeTasks?max=10", None, "viewer", None),
    "druid-task-payload": ("get", f"{IDX}/task/{{running}}", None, "viewer", None),
    "druid-task-status": ("get", f"{IDX}/task/{{running}}/status", None, "viewer", None),
    "druid-task-reports": ("get", f"{IDX}/task/{{running}}/reports", None, "viewer", None),
    "druid-taskStatus": ("post", f"{IDX}/taskStatus", ["{running}"], "viewer", None),
    "druid-activeLocks": ("post", f"{IDX}/activeLocks", [{"datasource": "wiki"}], "viewer", None),
    "druid-lockedIntervals": (
        "post",
        f"{IDX}/lockedIntervals/v2",
        [{"datasource": "wiki"}],
        "viewer",
        None,
    ),
    "coordinator-datasources": ("get", f"{COORD}/metadata/datasources?full", None, "viewer", None),
    "coordinator-segments-of": (
        "get",
        f"{COORD}/metadata/datasources/wiki/segments?full",
        None,
        "viewer",
        None,
    ),
    "coordinator-segments": (
        "get",
        f"{COORD}/metadata/segments?includeOvershadowedStatus",
        None,
        "viewer",
        None,
    ),
    "api-query": ("post", "/api/v1/query", {"sql": "SELECT 1 AS one"}, "viewer", None),
    "druid-sql": ("post", "/druid/v2/sql", {"query": "SELECT 1 AS one"}, "viewer", None),
    "druid-submit": (
        "post",
        f"{IDX}/task",
        "{spec}",
        "operator",
        lambda w, before: Task.objects.count() == before["tasks"] + 1,
    ),
    "druid-shutdown": (
        "post",
        f"{IDX}/task/{{running}}/shutdown",
        None,
        "operator",
        lambda w, before: Task.objects.get(id=w["running"].id).cancel_requested,
    ),
    "druid-markUnused-ids": (
        "post",
        f"{IDX}/datasources/wiki/markUnused",
        {"segmentIds": ["{used}"]},
        "operator",
        lambda w, before: not is_used(w["used"]),
    ),
    "druid-markUsed-interval": (
        "post",
        f"{IDX}/datasources/wiki/markUsed",
        {"interval": "2024-01-02/2024-01-03"},
        "operator",
        lambda w, before: is_used(w["unused"]),
    ),
    "coordinator-markUnused-interval": (
        "post",
        f"{COORD}/datasources/wiki/markUnused",
        {"interval": "2024-01-01/2024-01-02"},
        "operator",
        lambda w, before: not is_used(w["used"]),
    ),
    "coordinator-markUsed-ids": (
        "post",
        f"{COORD}/datasources/wiki/markUsed",
        {"segmentIds": ["{unused}"]},
        "operator",
        lambda w, before: is_used(w["unused"]),
    ),
}


def _fill(value, w: dict, spec: dict):
    """The endpoint's path or body with the world's ids in place of {running}, ..."""
    if value == "{spec}":
        return spec
    if isinstance(value, str):
        return value.format(running=w["running"].id, used=w["used"], unused=w["unused"])
    if isinstance(value, list):
        return [_fill(v, w, spec) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, w, spec) for k, v in value.items()}
    return value


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("name", list(DRUID_AND_SQL))
def test_druid_shim_and_sql_per_role(role, name, druid_world, inline_spec, django_user_model):
    method, path, body, needed, did = DRUID_AND_SQL[name]
    path, body = _fill(path, druid_world, {}), _fill(body, druid_world, inline_spec("fresh"))
    client = client_for(make_user(django_user_model, role))
    before = metastore_state()
    response = client.get(path) if method == "get" else client.post(path, body, format="json")
    allowed = RANK[role] >= RANK[needed]
    if allowed:
        assert response.status_code == 200, (response.status_code, response.content[:500])
        if did is None:
            assert metastore_state() == before  # a read, even sent as POST, changes nothing
        else:
            assert did(druid_world, before), metastore_state()
    else:
        assert response.status_code in (401, 403), (response.status_code, response.content)
        payload = response.json()
        assert payload["error"] and "detail" in payload, payload
        assert metastore_state() == before
    if role == "viewer" and not allowed:
        assert "operator" in response.json()["error"]


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_druid_clients_basic_auth_carries_the_role(role, druid_world, inline_spec, client):
    from django.contrib.auth import get_user_model

    user = make_user(get_user_model(), role)
    user.set_password("pw-for-basic")
    user.save()
    auth = "Basic " + base64.b64encode(f"{role}:pw-for-basic".encode()).decode()
    before = metastore_state()

    def post(path, body):
        return client.post(
            path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=auth
        )

    assert client.get(f"{IDX}/tasks", HTTP_AUTHORIZATION=auth).status_code == 200
    assert post("/druid/v2/sql", {"query": "SELECT 1"}).status_code == 200
    submit = post(f"{IDX}/task", inline_spec("basic"))
    mark = post(f"{IDX}/datasources/wiki/markUnused", {"segmentIds": [druid_world["used"]]})
    if role == "viewer":
        assert (submit.status_code, mark.status_code) == (403, 403)
        assert metastore_state() == before
    else:
        assert (submit.status_code, mark.status_code) == (200, 200)
        assert Task.objects.filter(id=submit.json()["task"]).exists()
        assert not is_used(druid_world["used"])


# --- the console ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["norole", "viewer", "operator", "admin"])
def test_console_per_role(role, world, inline_spec, client, django_user_model):
    user = make_user(django_user_model, role)
    client.force_login(user)
    running = world["running"]
    pages = [
        "/",
        "/tasks",
        "/segments",
        "/services",
        f"/tasks/{running.id}",
        "/locks",
        "/datasources",
        "/datasources/wiki",
    ]
    for page in pages:
        response = client.get(page)
        assert response.status_code == (403 if role == "norole" else 200), (
            page,
            response.status_code,
        )

    tasks_page = client.get("/tasks").content.decode()
    task_page = client.get(f"/tasks/{running.id}").content.decode()
    can_operate = RANK[role] >= 2
    assert ("/tasks/new" in tasks_page) == can_operate  # the submit form's link
    assert (f"/tasks/{running.id}/cancel" in task_page) == can_operate

    before = Task.objects.count()
    submit = client.post("/tasks/submit", {"spec": json.dumps(inline_spec("console"))})
    cancel = client.post(f"/tasks/{running.id}/cancel")
    if can_operate:
        assert submit.status_code == 302 and Task.objects.count() == before + 1
        assert cancel.status_code == 302
        assert Task.objects.get(id=running.id).cancel_requested
    else:
        assert submit.status_code == 403 and cancel.status_code == 403
        assert Task.objects.count() == before
        assert not Task.objects.get(id=running.id).cancel_requested


def test_console_needs_a_login(client):
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.parametrize("role", ["viewer", "operator", "admin", "superuser"])
def test_only_admins_reach_the_django_admin(role, client, django_user_model):
    if role == "admin":  # as an operator would make one
        call_command("create_user", role, "--role", role, stdout=io.StringIO())
        user = django_user_model.objects.get(username=role)
    else:
        user = make_user(django_user_model, role)
    client.force_login(user)
    response = client.get("/admin/auth/user/")
    if RANK[role] >= 3:
        assert response.status_code == 200
    else:
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


# --- management commands ---------------------------------------------------------------------


def test_create_user_with_a_role_and_a_token(django_user_model, monkeypatch, world, inline_spec):
    monkeypatch.setenv("NEW_PW", "s3cret-pass")
    out = io.StringIO()
    call_command(
        "create_user",
        "bob",
        "--role",
        "viewer",
        "--password-from-env",
        "NEW_PW",
        "--token",
        stdout=out,
    )
    bob = django_user_model.objects.get(username="bob")
    assert [g.name for g in bob.groups.all()] == ["viewer"] and not bob.is_staff
    assert bob.check_password("s3cret-pass")
    key = re.search(r"API token: (\w+)", out.getvalue()).group(1)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/tasks").status_code == 200
    assert client.post("/api/v1/tasks", inline_spec("x"), format="json").status_code == 403

    # Changing the role replaces it (one role at a time); admin is also staff.
    call_command("create_user", "bob", "--role", "admin", stdout=io.StringIO())
    bob.refresh_from_db()
    assert [g.name for g in bob.groups.all()] == ["admin"] and bob.is_staff
    assert client.post("/api/v1/tasks", inline_spec("x"), format="json").status_code == 201


def test_rotate_token_invalidates_the_old_one(django_user_model):
    out = io.StringIO()
    call_command("create_user", "carol", "--role", "operator", "--token", stdout=out)
    old = re.search(r"API token: (\w+)", out.getvalue()).group(1)
    out = io.StringIO()
    call_command("rotate_token", "carol", stdout=out)
    new = re.search(r"new API token for 'carol': (\w+)", out.getvalue()).group(1)
    assert new != old

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {old}")
    assert client.get("/api/v1/tasks").status_code in (401, 403)
    client.credentials(HTTP_AUTHORIZATION=f"Token {new}")
    assert client.get("/api/v1/tasks").status_code == 200

    call_command("rotate_token", "carol", "--revoke", stdout=io.StringIO())
    assert client.get("/api/v1/tasks").status_code in (401, 403)


def test_create_user_refuses_an_empty_password_variable(monkeypatch):
    from django.core.management.base import CommandError

    monkeypatch.delenv("MISSING_PW", raising=False)
    with pytest.raises(CommandError, match="MISSING_PW"):
        call_command("create_user", "dave", "--role", "viewer", "--password-from-env", "MISSING_PW")


def test_ended_tasks_are_untouched_by_a_refused_cancel(world, django_user_model):
    viewer = make_user(django_user_model, "viewer")
    client = client_for(viewer)
    response = client.post(f"/api/v1/tasks/{world['running'].id}/cancel")
    assert response.status_code == 403
    assert Task.objects.get(id=world["running"].id).status == TaskStatus.RUNNING


@pytest.mark.parametrize("role", ["norole", "viewer", "operator", "admin"])
def test_console_datasource_actions_per_role(role, druid_world, client, django_user_model):
    """Mark used/unused, kill and compact: the form and its buttons are shown to
    operators only, and a POST by anyone else is a 403 that changes nothing."""
    client.force_login(make_user(django_user_model, role))
    can_operate = RANK[role] >= 2
    used, unused = druid_world["used"], druid_world["unused"]

    page = client.get("/datasources/wiki")
    if role == "norole":
        assert page.status_code == 403
    else:
        html = page.content.decode()
        for action in ("mark_unused", "mark_used", "kill", "compact"):
            assert (f'value="{action}"' in html) == can_operate, action
        assert ('type="checkbox" name="segment"' in html) == can_operate
        query = client.get("/query", {"sql": "SELECT 42 AS answer"})
        assert query.status_code == 200 and "answer" in query.content.decode()
    assert client.get("/tasks/new").status_code == (200 if can_operate else 403)

    action = "/datasources/wiki/actions"
    before = metastore_state()
    confirm = client.post(action, {"action": "mark_unused", "segment": used})
    kill = client.post(
        action, {"action": "kill", "interval": "2024-01-02/2024-01-03", "confirm": "yes"}
    )
    if not can_operate:
        assert confirm.status_code == 403 and kill.status_code == 403
        for data in (
            {"action": "mark_unused", "segment": used, "confirm": "yes"},
            {"action": "mark_unused", "interval": "2024-01-01/2024-01-02", "confirm": "yes"},
            {"action": "mark_used", "segment": unused, "confirm": "yes"},
            {"action": "compact", "interval": "2024-01-01/2024-01-02"},
        ):
            assert client.post(action, data).status_code == 403, data
        assert metastore_state() == before
        return

    assert confirm.status_code == 200 and "Confirm" in confirm.content.decode()
    assert kill.status_code == 302
    assert Task.objects.filter(type="kill", datasource="wiki").count() == 1
    marked = client.post(
        action, {"action": "mark_used", "interval": "2024-01-02/2024-01-03", "confirm": "yes"}
    )
    assert marked.status_code == 302 and is_used(unused)
    marked = client.post(action, {"action": "mark_unused", "segment": used, "confirm": "yes"})
    assert marked.status_code == 302 and not is_used(used)
    compact = client.post(action, {"action": "compact", "interval": "2024-01-01/2024-01-02"})
    assert compact.status_code == 302 and "template=compact" in compact["Location"]
