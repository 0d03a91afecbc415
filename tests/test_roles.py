"""Roles (issue 15): viewer reads everything, operator also acts (submit, cancel,
mark used/unused), admin also administers (Django admin, users). Enforced per
endpoint in the REST API, in the console (buttons hidden and refused) and for
any DRF view by the default permission class (the Druid shim's `strata_role`).
Users and tokens are made with the management commands."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.response import Response
from rest_framework.test import APIClient, APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from metastore import services
from metastore.models import Segment, Task, TaskStatus

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
        token = Token.objects.create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def world(publish, claimed_task, monkeypatch):
    monkeypatch.setattr(services.tasks, "_enqueue", lambda task_id: None)
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


class ReadOnlyQuery(APIView):
    """Like the Druid shim's SQL endpoint: a POST that only reads."""

    strata_role = "viewer"

    def post(self, request):
        return Response({"rows": []})


class AdminOnly(APIView):
    strata_role = "admin"

    def get(self, request):
        return Response({"ok": True})


@pytest.mark.parametrize("role", ROLES)
def test_a_view_declares_its_role_with_strata_role(role, django_user_model):
    user = make_user(django_user_model, role)
    factory = APIRequestFactory()

    request = factory.post("/druid/v2/sql", {"query": "SELECT 1"}, format="json")
    if user is not None:
        force_authenticate(request, user=user)
    response = ReadOnlyQuery.as_view()(request)
    assert (response.status_code == 200) == (RANK[role] >= 1), response.status_code

    request = factory.get("/admin-only")
    if user is not None:
        force_authenticate(request, user=user)
    response = AdminOnly.as_view()(request)
    assert (response.status_code == 200) == (RANK[role] >= 3), response.status_code


# --- the console ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["norole", "viewer", "operator", "admin"])
def test_console_per_role(role, world, inline_spec, client, django_user_model):
    user = make_user(django_user_model, role)
    client.force_login(user)
    running = world["running"]
    pages = ["/", f"/tasks/{running.id}", "/locks", "/datasources", "/datasources/wiki"]
    for page in pages:
        response = client.get(page)
        assert response.status_code == (403 if role == "norole" else 200), (
            page,
            response.status_code,
        )

    tasks_page = client.get("/").content.decode()
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
