"""Defects an operator met in the console (issue 25, "every page right"), each
shown first by a test that failed: in Chromium where it is what the browser does,
with Django's client where the server alone decides."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from test_query import history  # noqa: F401 - the shared metastore history fixture

from tests.conftest import TEST_PASSWORD

pytestmark = pytest.mark.django_db

MULTI_LINE = (
    "SELECT TIME_FLOOR(__time, 'PT6H') AS t,\n  COUNT(*) AS n\nFROM wiki\nGROUP BY 1\nORDER BY 1"
)


@pytest.fixture
def logged_in(client, user):
    assert client.login(username=user.username, password=TEST_PASSWORD)
    return client


# --- 1. the query page and multi-line SQL ---------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_multi_line_query_runs_from_the_query_page(console_page, history):  # noqa: F811
    page = console_page
    page.goto(page.console_url("/query"))
    # The prefilled example is itself several lines long: run it as it stands.
    assert "\n" in page.locator("textarea[name=sql]").input_value()
    page.click("#query-form button[type=submit]")
    expect(page.locator("#query-table")).to_have_count(1)
    assert page.locator("#query-error").count() == 0

    page.fill("textarea[name=sql]", MULTI_LINE)
    page.click("#query-form button[type=submit]")
    expect(page.locator("#query-table")).to_have_count(1)
    cells = page.locator("#query-table tbody tr").first.locator("td").all_inner_texts()
    assert cells == ["2024-01-01T00:00:00.000Z", "2"]
    # The query stays in the box, line breaks and all, to be edited and run again.
    assert page.locator("textarea[name=sql]").input_value().splitlines() == MULTI_LINE.splitlines()
    assert not page.problems


def test_a_refused_query_keeps_the_layout_and_the_text(logged_in, history):  # noqa: F811
    sql = "SELECT page\nFROM wiki\nWHERE page = 'a\x00'"

    response = logged_in.post("/query", {"sql": sql})

    assert response.status_code == 400
    html = response.content.decode()
    assert "<header>" in html and 'href="/datasources"' in html  # the console around it
    assert 'id="query-error"' in html and "sql:" in html and "control character" in html
    assert "FROM wiki" in html  # the text is kept for the operator to fix


def test_a_query_error_keeps_the_layout_and_the_text(logged_in, history):  # noqa: F811
    response = logged_in.post("/query", {"sql": "SELECT nope\r\nFROM wiki"})

    html = response.content.decode()
    assert "<header>" in html and 'id="query-error"' in html
    assert "SELECT nope\r\nFROM wiki" in html or "SELECT nope\nFROM wiki" in html


def test_a_viewer_may_run_a_query_by_post(client, django_user_model, history):  # noqa: F811
    from django.contrib.auth.models import Group

    bob = django_user_model.objects.create_user("bob", password=TEST_PASSWORD)
    bob.groups.add(Group.objects.get(name="viewer"))
    client.force_login(bob)

    response = client.post("/query", {"sql": MULTI_LINE})

    assert response.status_code == 200
    assert '<table id="query-table">' in response.content.decode()


def test_the_query_form_refuses_a_post_without_csrf(user, history):  # noqa: F811
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post("/query", {"sql": MULTI_LINE}).status_code == 403


# --- 2. API tokens in the Django admin ---------------------------------------------------------


@pytest.fixture
def admin_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    return client


def test_the_admin_never_shows_a_token_key_in_full(admin_client, user):
    from rest_framework.authtoken.models import Token

    key = Token.objects.create(user=user).key
    base = "/admin/authtoken/tokenproxy/"
    pages = [base, f"{base}{user.pk}/change/", f"{base}{user.pk}/delete/"]
    pages += [f"{base}{user.pk}/history/", f"{base}?q=alice"]

    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert key not in html, url
        assert key[:8] in html, url  # the prefix tells tokens apart
    # Nor does the admin's own log keep it once the token is changed.
    admin_client.post(f"{base}{user.pk}/change/", {"user": user.pk})
    from django.contrib.admin.models import LogEntry

    assert all(key not in e.object_repr for e in LogEntry.objects.all())


def test_a_token_created_in_the_admin_is_shown_once(admin_client, django_user_model):
    from django.contrib.admin.models import LogEntry
    from rest_framework.authtoken.models import Token

    bob = django_user_model.objects.create_user("bob", password=TEST_PASSWORD)

    created = admin_client.post("/admin/authtoken/tokenproxy/add/", {"user": bob.pk})

    key = Token.objects.get(user=bob).key
    assert created.status_code == 200 and key in created.content.decode()
    assert "will not be shown again" in created.content.decode()
    listed = admin_client.get("/admin/authtoken/tokenproxy/").content.decode()
    assert key not in listed and key[:8] in listed
    assert all(key not in e.object_repr for e in LogEntry.objects.all())
