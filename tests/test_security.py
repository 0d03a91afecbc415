"""Safe defaults (issue 15): DEBUG off unless asked for, a generated secret key,
JSON error bodies for every API error (404, 405, 500 included) without
tracebacks, security headers, secure cookies over HTTPS (also behind a proxy),
CSRF on console forms and login throttling."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO, TEST_PASSWORD
from django.core.cache import cache
from django.test import Client

from metastore import selectors

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _clear_cache():
    cache.clear()
    yield
    cache.clear()


def forget_login_failures() -> None:
    """What the end of the lockout window does: the counters are gone."""
    import redis
    from django.conf import settings

    cache.clear()
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1)
        keys = list(client.scan_iter(match=f"{settings.STRATA_LOGIN_THROTTLE_PREFIX}*"))
        if keys:
            client.delete(*keys)
        client.close()
    except (redis.RedisError, OSError):
        pass  # no Redis: the counters were in this process's cache


def settings_in_subprocess(tmp_path, code: str, **env) -> str:
    environment = {
        k: v for k, v in os.environ.items() if k not in ("DJANGO_DEBUG", "DJANGO_SECRET_KEY")
    }
    environment.update(
        {"DJANGO_SETTINGS_MODULE": "console.settings", "STRATA_DATA_DIR": str(tmp_path)}
    )
    environment.update(env)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import django; django.setup(); from django.conf import settings; {code}",
        ],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.strip()


def test_debug_is_off_unless_asked_for(tmp_path):
    assert settings_in_subprocess(tmp_path, "print(settings.DEBUG)") == "False"
    assert settings_in_subprocess(tmp_path, "print(settings.DEBUG)", DJANGO_DEBUG="1") == "True"


def test_without_a_secret_key_one_is_generated_once_and_kept_private(tmp_path):
    first = settings_in_subprocess(tmp_path, "print(settings.SECRET_KEY)")
    second = settings_in_subprocess(tmp_path, "print(settings.SECRET_KEY)")
    assert first == second and len(first) >= 50 and "development" not in first
    key_file = tmp_path / "secret_key"
    assert key_file.stat().st_mode & 0o077 == 0
    given = settings_in_subprocess(
        tmp_path, "print(settings.SECRET_KEY)", DJANGO_SECRET_KEY="k" * 60
    )
    assert given == "k" * 60


def test_api_404_405_and_500_are_json_without_traceback(api_client, monkeypatch, caplog):
    response = api_client.get("/api/v1/no-such-thing")
    assert response.status_code == 404 and response.json()["error"].startswith("not found")

    response = api_client.get("/api/v1/tasks/nope")
    assert response.status_code == 404 and "detail" in response.json()

    response = api_client.delete("/api/v1/tasks")
    assert response.status_code == 405 and "DELETE" in response.json()["detail"]

    def broken(**kwargs):
        raise RuntimeError("secret internals: password=hunter2")

    monkeypatch.setattr(selectors, "tasks_list", broken)
    response = api_client.get("/api/v1/tasks")
    assert response.status_code == 500
    message = "internal server error (see the server log)"
    assert response.json() == {"error": message, "field": None, "message": message}
    assert "hunter2" not in response.content.decode()
    assert "hunter2" in caplog.text  # the log has it all


def test_console_500_shows_no_traceback(user, monkeypatch):
    client = Client(raise_request_exception=False)
    client.force_login(user)

    def broken(**kwargs):
        raise RuntimeError("secret internals: password=hunter2")

    monkeypatch.setattr(selectors, "tasks_count", broken)  # what the tasks page reads
    response = client.get("/tasks")
    assert response.status_code == 500
    body = response.content.decode()
    assert "hunter2" not in body and "Traceback" not in body


def test_security_headers(client):
    response = client.get("/accounts/login/")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"


def _login(client, username, password, **extra):
    page = client.get("/accounts/login/", **extra)
    token = page.cookies["csrftoken"].value
    return client.post(
        "/accounts/login/",
        {"username": username, "password": password, "csrfmiddlewaretoken": token},
        **extra,
    )


def test_cookies_are_secure_over_https_only(user):
    plain = Client(enforce_csrf_checks=True)
    response = _login(plain, "alice", TEST_PASSWORD)
    assert response.status_code == 302
    assert not response.cookies["sessionid"]["secure"]

    https = Client(enforce_csrf_checks=True)
    response = _login(
        https, "alice", TEST_PASSWORD, secure=True, HTTP_REFERER="https://testserver/"
    )
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"] and response.cookies["sessionid"]["httponly"]
    assert response.cookies["csrftoken"]["secure"]


def test_cookies_are_secure_behind_an_https_proxy(user, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    client = Client(enforce_csrf_checks=True)
    response = _login(
        client,
        "alice",
        TEST_PASSWORD,
        HTTP_HOST="strata.example",
        HTTP_X_FORWARDED_PROTO="https",
        HTTP_REFERER="https://strata.example/",
    )
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"]


def test_login_and_console_forms_need_csrf(user):
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "alice", "password": TEST_PASSWORD})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


def test_login_is_throttled_after_repeated_failures(user, settings):
    settings.STRATA_LOGIN_MAX_FAILURES = 3
    client = Client()
    for _ in range(3):
        response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
        assert response.status_code == 200  # the form again, with its error
    # Now even the right password is refused for a while.
    response = client.post("/accounts/login/", {"username": "alice", "password": TEST_PASSWORD})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    # Another address is not affected.
    other = Client(REMOTE_ADDR="10.0.0.9")
    response = other.post("/accounts/login/", {"username": "alice", "password": TEST_PASSWORD})
    assert response.status_code == 302
    # When the window passes (the counters expire), alice may log in again.
    forget_login_failures()
    response = client.post("/accounts/login/", {"username": "alice", "password": TEST_PASSWORD})
    assert response.status_code == 302


FAIL_LOGINS_ELSEWHERE = """
import django, sys
django.setup()
from django.test import Client
client = Client()
for _ in range(int(sys.argv[1])):
    response = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    print(response.status_code, flush=True)
"""


def test_login_throttling_is_shared_by_every_web_process(user, settings, redis_url, tmp_path):
    """Failures counted by one process (another gunicorn worker, another machine)
    throttle the next attempt in this one: the counters are in Redis."""
    from conftest import _database_url
    from django.db import connection

    settings.REDIS_URL = redis_url
    settings.STRATA_LOGIN_MAX_FAILURES = 3
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "DATABASE_URL": _database_url(connection.settings_dict),
        "REDIS_URL": redis_url,
        "STRATA_LOGIN_MAX_FAILURES": "3",
        "STRATA_LOGIN_THROTTLE_PREFIX": settings.STRATA_LOGIN_THROTTLE_PREFIX,
        "STRATA_DATA_DIR": str(tmp_path),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    other = subprocess.run(
        [sys.executable, "-c", FAIL_LOGINS_ELSEWHERE, "3"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert other.returncode == 0, other.stderr[-3000:]
    assert other.stdout.split() == ["200", "200", "200"]
    # This process counted nothing itself, and yet refuses alice now.
    cache.clear()
    response = Client().post("/accounts/login/", {"username": "alice", "password": TEST_PASSWORD})
    assert response.status_code == 429
    forget_login_failures()
    response = Client().post("/accounts/login/", {"username": "alice", "password": TEST_PASSWORD})
    assert response.status_code == 302
