"""API tokens stored as digests (issue 25, item 7): the key is shown once, when
issued; the database, the admin and its log never hold it; rotation, revocation
and expiry work; keys issued before the change keep working after the migration."""

from __future__ import annotations

import hashlib
import importlib
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from playwright.sync_api import expect
from rest_framework.test import APIClient

from metastore.models import ApiToken
from metastore.services import api_token_issue, api_token_revoke
from tests.conftest import ARTIFACTS, TEST_PASSWORD

pytestmark = pytest.mark.django_db


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _database_text() -> str:
    """Every text value of every table the tokens could live in."""
    out = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f'SELECT * FROM "{table}"')
            out += [str(v) for row in cursor.fetchall() for v in row]
    return "\n".join(out)


def test_an_issued_key_authenticates_and_only_its_digest_is_stored(user):
    token, key = api_token_issue(user=user)

    assert _client(key).get("/api/v1/tasks").status_code == 200
    assert token.digest == hashlib.sha256(key.encode()).hexdigest()
    assert key not in _database_text()
    assert token.prefix == key[:8]


def test_a_wrong_or_revoked_or_expired_key_is_refused(user):
    _, key = api_token_issue(user=user)
    assert _client(key[:-1] + ("0" if key[-1] != "0" else "1")).get(
        "/api/v1/tasks"
    ).status_code in (401, 403)
    assert _client(key.upper()).get("/api/v1/tasks").status_code in (
        401,
        403,
    )  # not the digest's case

    token, key = api_token_issue(user=user, expires_at=timezone.now() - timedelta(seconds=1))
    response = _client(key).get("/api/v1/tasks")
    assert response.status_code in (401, 403) and "expired" in response.content.decode()

    _, key = api_token_issue(user=user)
    assert api_token_revoke(user=user) is True
    assert _client(key).get("/api/v1/tasks").status_code in (401, 403)
    assert not ApiToken.objects.filter(user=user).exists()


def test_rotation_replaces_the_key_at_once(user):
    _, old = api_token_issue(user=user)
    _, new = api_token_issue(user=user)

    assert _client(old).get("/api/v1/tasks").status_code in (401, 403)
    assert _client(new).get("/api/v1/tasks").status_code == 200
    assert ApiToken.objects.filter(user=user).count() == 1


def test_the_migration_hashes_the_keys_drf_kept_in_clear(user, django_user_model):
    """A database from before: DRF's authtoken table with clear keys. After the
    migration's step the same keys authenticate and the clear ones are gone."""
    bob = django_user_model.objects.create_user("bob", password=TEST_PASSWORD)
    keys = {user.pk: "a" * 39 + "1", bob.pk: "0123456789abcdef0123456789abcdef01234567"}
    created = timezone.now() - timedelta(days=30)
    with connection.cursor() as cursor:
        cursor.execute(
            'CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, '
            '"created" timestamptz NOT NULL, "user_id" integer NOT NULL UNIQUE)'
        )
        for pk, key in keys.items():
            cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)", [key, created, pk])
    migration = importlib.import_module("metastore.migrations.0014_api_token_digest")
    from django.apps import apps

    with connection.schema_editor() as editor:
        migration.hash_existing_keys(apps, editor)

    assert _client(keys[user.pk]).get("/api/v1/tasks").status_code == 200
    assert ApiToken.objects.get(user=bob).prefix == "01234567"
    assert ApiToken.objects.get(user=bob).created_at == created
    for key in keys.values():
        assert key not in _database_text()


def test_a_viewer_cannot_see_the_tokens_in_the_admin(client, django_user_model):
    from django.contrib.auth.models import Group

    viewer = django_user_model.objects.create_user("vera", password=TEST_PASSWORD, is_staff=True)
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    assert client.get("/admin/metastore/apitoken/").status_code == 403


def test_rotating_in_the_admin_shows_the_new_keys_once(client, django_user_model, user):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    token, old = api_token_issue(user=user)

    response = client.post(
        "/admin/metastore/apitoken/",
        {"action": "rotate", "_selected_action": [token.pk]},
    )

    new = re.search(r'id="token-key"[^>]*>([0-9a-f]{40})<', response.content.decode())[1]
    assert new != old
    assert _client(new).get("/api/v1/tasks").status_code == 200
    assert _client(old).get("/api/v1/tasks").status_code in (401, 403)
    assert new not in client.get("/admin/metastore/apitoken/").content.decode()


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_an_admin_issues_a_token_in_the_browser_and_sees_it_once(
    browser, live_server, django_user_model, user
):
    django_user_model.objects.create_superuser("root", "root@example.com", TEST_PASSWORD)
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/admin/login/")
        page.fill("input[name=username]", "root")
        page.fill("input[name=password]", TEST_PASSWORD)
        page.click("input[type=submit]")
        page.goto(f"{live_server.url}/admin/metastore/apitoken/add/")
        page.select_option("select[name=user]", label="alice")
        page.click("input[name=_save]")

        key = page.locator("#token-key").inner_text().strip()
        assert re.fullmatch(r"[0-9a-f]{40}", key)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / "token_created.png")
        assert _client(key).get("/api/v1/tasks").status_code == 200

        page.goto(f"{live_server.url}/admin/metastore/apitoken/")
        expect(page.locator("#result_list")).to_contain_text(key[:8])
        expect(page.locator("#result_list")).to_contain_text("alice")
        assert key not in page.content()
    finally:
        context.close()
