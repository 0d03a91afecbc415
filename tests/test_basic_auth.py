"""HTTP Basic on the Druid endpoints (issue 26): what Airflow's DruidHook, pydruid
and Superset send on every request.

- Failed Basic attempts count toward the login form's lockout (one counter per
  address and user name, STRATA_LOGIN_MAX_FAILURES within
  STRATA_LOGIN_LOCKOUT_SECONDS); once locked out, even the right password gets
  the API's usual authentication failure, without the password being hashed.
- Verified credentials are remembered for STRATA_BASIC_AUTH_CACHE_SECONDS under
  a keyed hash of user name and password, so a polling client does not pay the
  password hash on every request; a changed password, a deactivated user or a
  lockout ends that at once.

The password hasher is Django's own PBKDF2 hasher, counted: PASSWORD_HASHERS
points at `CountingHasher` below, so the real authentication path runs and the
tests see how often it verified a password."""

from __future__ import annotations

import base64

import pytest
from conftest import TEST_PASSWORD
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import Group
from django.test import Client
from test_security import forget_login_failures

from console import security

pytestmark = pytest.mark.django_db

TASKS = "/druid/indexer/v1/tasks"
SQL = "/druid/v2/sql"


class CountingHasher(PBKDF2PasswordHasher):
    """Django's PBKDF2 hasher (few iterations: the tests count calls, not time)."""

    iterations = 1000
    verified = 0

    def verify(self, password, encoded):
        CountingHasher.verified += 1
        return super().verify(password, encoded)


@pytest.fixture(autouse=True)
def counting_hasher(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    settings.STRATA_LOGIN_MAX_FAILURES = 3
    CountingHasher.verified = 0
    security.basic_auth_cache_clear()
    yield CountingHasher
    security.basic_auth_cache_clear()


@pytest.fixture
def alice(counting_hasher, django_user_model):
    """An operator whose password is hashed by the counting hasher."""
    user = django_user_model.objects.create_user("alice", password=TEST_PASSWORD)
    user.groups.add(Group.objects.get(name="operator"))
    return user


def basic(username: str, password: str) -> dict:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}"}


def login_form(client: Client, password: str):
    return client.post("/accounts/login/", {"username": "alice", "password": password})


def test_wrong_basic_passwords_lock_the_user_out_like_the_login_form(alice, client):
    wrong = client.get(TASKS, **basic("alice", "wrong"))
    assert wrong.status_code == 403
    for _ in range(2):
        assert client.get(TASKS, **basic("alice", "wrong")).status_code == 403
    # The fourth attempt has the right password, and is refused the same way.
    locked = client.get(TASKS, **basic("alice", TEST_PASSWORD))
    assert (locked.status_code, locked.json()) == (wrong.status_code, wrong.json())
    # The same lockout as the login form's: the form refuses alice too.
    assert login_form(Client(), TEST_PASSWORD).status_code == 429
    # Another address is not locked out.
    elsewhere = Client(REMOTE_ADDR="10.0.0.9").get(TASKS, **basic("alice", TEST_PASSWORD))
    assert elsewhere.status_code == 200
    # When the window passes, alice's client works again.
    forget_login_failures()
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200


def test_failed_logins_on_the_form_lock_basic_out_too(alice, client):
    for _ in range(3):
        assert login_form(Client(), "wrong").status_code == 200  # the form, with its error
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 403
    assert (
        client.post(
            SQL, {"query": "SELECT 1"}, "application/json", **basic("alice", TEST_PASSWORD)
        ).status_code
        == 403
    )


def test_a_locked_out_user_name_costs_no_password_hash(alice, client, counting_hasher):
    for _ in range(3):
        client.get(TASKS, **basic("alice", "wrong"))
    assert counting_hasher.verified == 3
    for password in ("wrong", "also wrong", TEST_PASSWORD):
        assert client.get(TASKS, **basic("alice", password)).status_code == 403
    assert counting_hasher.verified == 3


def test_the_same_credentials_again_are_not_hashed_again(alice, client, counting_hasher):
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    assert counting_hasher.verified == 1
    for _ in range(3):
        assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    response = client.post(
        SQL, {"query": "SELECT 1 AS one"}, "application/json", **basic("alice", TEST_PASSWORD)
    )
    assert (response.status_code, response.json()) == (200, [{"one": 1}])
    assert counting_hasher.verified == 1
    # A wrong password is never answered from what was remembered.
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD + "!")).status_code == 403
    assert counting_hasher.verified == 2


def test_a_changed_password_ends_the_remembered_credentials(alice, client, counting_hasher):
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    alice.set_password("a new passphrase")
    alice.save()
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 403
    assert counting_hasher.verified == 2  # hashed again, and found wrong
    assert client.get(TASKS, **basic("alice", "a new passphrase")).status_code == 200


def test_a_deactivated_user_is_refused_at_once(alice, client):
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    alice.is_active = False
    alice.save()
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 403


def test_a_lockout_ends_the_remembered_credentials(alice, client, counting_hasher):
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    for _ in range(3):
        assert client.get(TASKS, **basic("alice", "wrong")).status_code == 403
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 403
    forget_login_failures()
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    assert counting_hasher.verified == 5  # the first, three wrong, and once more after the lockout


def test_a_role_taken_away_applies_to_remembered_credentials(alice, client):
    task_list = client.get(TASKS, **basic("alice", TEST_PASSWORD))
    assert task_list.status_code == 200
    alice.groups.set([Group.objects.get(name="viewer")])
    response = client.post(
        "/druid/indexer/v1/task",
        {"type": "index_parallel"},
        "application/json",
        **basic("alice", TEST_PASSWORD),
    )
    assert response.status_code == 403
    assert "this needs the operator role" in response.json()["error"]


def test_with_no_cache_lifetime_every_request_is_hashed(alice, client, counting_hasher, settings):
    settings.STRATA_BASIC_AUTH_CACHE_SECONDS = 0
    for _ in range(3):
        assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    assert counting_hasher.verified == 3


def test_the_cache_key_is_a_keyed_hash_not_the_password(alice, client, settings):
    assert client.get(TASKS, **basic("alice", TEST_PASSWORD)).status_code == 200
    (key,) = security.basic_auth_cache_keys()
    assert TEST_PASSWORD not in key and "alice" not in key
    # Another secret key gives another key for the same credentials.
    settings.SECRET_KEY = "another secret key, long enough to be one" * 2
    assert security.basic_auth_cache_key("alice", TEST_PASSWORD) != key


def test_a_user_name_with_a_nul_is_a_wrong_password_not_a_500(alice, client):
    for name in ("al\x00ice", "al\ud800ice"):
        token = base64.b64encode(f"{name}:{TEST_PASSWORD}".encode("utf-8", "surrogatepass"))
        response = client.get(TASKS, HTTP_AUTHORIZATION=f"Basic {token.decode()}")
        assert response.status_code == 403
