"""Request hardening and roles, shared by the REST API, the console and the shim.

- `StrictJSONParser`: the only parser for request bodies that carry specs. It
  refuses bodies over STRATA_MAX_BODY_BYTES (413) before reading them, JSON
  nested deeper than STRATA_MAX_JSON_DEPTH, duplicate keys, NaN/Infinity and
  numbers too long to be meaningful (400, naming the field), and any content
  type but application/json (415, by DRF's content negotiation).
- `parse_json_text` (from `metastore.strict_json`): the same rules for JSON that arrives inside a form field
  (the console's submit form).
- `parse_natural`: a count or commit number from a query parameter, ASCII
  digits only and bounded; `MAX_LIST_ITEMS`: the most ids one request may list.
- Roles: the Django groups `viewer`, `operator` and `admin`, each with Strata's
  permissions; `StrataRolePermission` (the API's default permission class) lets
  viewers use safe methods and operators unsafe ones, unless a view declares
  `strata_role`; `role_required` does the same for console views.
- `ThrottledLoginView`: the console's login view, refusing further attempts for a
  while after repeated failures from one client for one user name.
- `StrataBasicAuthentication`: HTTP Basic for Druid's clients, counting failures
  toward the same lockout, and remembering verified credentials briefly so that
  a client polling every second does not pay the password hash each time.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import re
import threading
import time
from collections import OrderedDict
from functools import wraps

from django.conf import settings
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpResponse, JsonResponse
from django.utils.crypto import salted_hmac
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from drf_spectacular.authentication import BasicScheme
from rest_framework import exceptions, permissions, status
from rest_framework.authentication import BasicAuthentication, TokenAuthentication
from rest_framework.parsers import JSONParser

from metastore.roles import ADMIN, OPERATOR, ROLE_PERMISSIONS, ROLES, VIEWER
from metastore.strict_json import UNSTORABLE, JSONRefused, parse_json_text

log = logging.getLogger(__name__)

# --- strict JSON ----------------------------------------------------------------------


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "request body too large"
    default_code = "payload_too_large"


# The most ids (task or segment ids, versions, lock filter policies) one request may
# list: more would exceed the database's limit on query parameters (SQLite: 250,000).
MAX_LIST_ITEMS = 10_000

_ASCII_DIGITS = re.compile(r"[0-9]{1,18}")


def parse_natural(text: str | None) -> int | None:
    """A non-negative integer from a query parameter or form field, or None when
    `text` is anything else: only ASCII digits, at most 18 of them (`str.isdigit`
    also accepts superscript digits, which `int` refuses, and any number of
    digits, which overflow a database integer)."""
    if text is None or not _ASCII_DIGITS.fullmatch(text):
        return None
    return int(text)


class StrictJSONParser(JSONParser):
    """application/json only, bounded in size and depth, no duplicate keys."""

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        limit = settings.STRATA_MAX_BODY_BYTES
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        try:
            declared = int(declared) if declared else None
        except ValueError:
            declared = None
        if declared is not None and declared > limit:
            raise PayloadTooLarge(f"request body of {declared} bytes; at most {limit}")
        if stream is None:
            raise JSONRefused("(body)", "empty body")
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise PayloadTooLarge(f"request body over {limit} bytes")
        encoding = (parser_context or {}).get("encoding", "utf-8") or "utf-8"
        if encoding.lower().replace("-", "") not in ("utf8", "ascii"):
            raise exceptions.UnsupportedMediaType(f"application/json; charset={encoding}")
        return parse_json_text(raw)


# --- roles -------------------------------------------------------------------------------


_UNKNOWN = object()


def user_role(user) -> str | None:
    """The highest role a user has (superusers are admins), or None. Computed once
    per user object (the token authentication computes it in its own query)."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    role = getattr(user, "_strata_role", _UNKNOWN)
    if role is _UNKNOWN:
        role = None
        for candidate in reversed(ROLES):
            if user.has_perm(f"metastore.{ROLE_PERMISSIONS[candidate][0]}"):
                role = candidate
                break
        user._strata_role = role
    return role


class StrataTokenAuthentication(TokenAuthentication):
    """DRF's `Authorization: Token <key>` header, checked against the digest
    Strata stores (`metastore.models.ApiToken`: the key itself is never kept),
    reading the user's role in the same query. An expired token is refused."""

    def authenticate_credentials(self, key):
        from django.utils import timezone

        from metastore import selectors
        from metastore.services import token_digest

        token = selectors.api_token_with_roles(digest=token_digest(key))
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if token.expires_at is not None and token.expires_at <= timezone.now():
            raise exceptions.AuthenticationFailed("Token expired.")
        user = token.user
        if not user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        _take_role(user, token)
        return (user, token)


def _take_role(user, annotated) -> None:
    """Set the user's role from the `_has_<role>` flags read on `annotated`
    (`selectors.api_token_with_roles`, `selectors.user_with_roles`)."""
    if user.is_superuser:
        user._strata_role = ADMIN
    else:
        held = [role for role in ROLES if getattr(annotated, f"_has_{role}")]
        user._strata_role = held[-1] if held else None


def has_role(user, role: str) -> bool:
    held = user_role(user)
    return held is not None and ROLES.index(held) >= ROLES.index(role)


def required_role(method: str, declared: str | None) -> str:
    if declared:
        return declared
    return VIEWER if method in permissions.SAFE_METHODS else OPERATOR


class StrataRolePermission(permissions.BasePermission):
    """Viewers read, operators act; a view's `strata_role` overrides the rule.

    A view may set `strata_role = "viewer"` for a read-only POST (a query), or
    "operator"/"admin" to require more than the method implies."""

    message = "your role does not allow this"

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        wanted = required_role(request.method, getattr(view, "strata_role", None))
        if has_role(request.user, wanted):
            return True
        held = user_role(request.user) or "no role"
        self.message = f"this needs the {wanted} role; {request.user.get_username()} has {held}"
        return False


def role_required(role: str | None = None):
    """Console view decorator: log in first, then the role (by default: viewer for
    GET/HEAD, operator for anything else). Refusals are 403 pages."""
    from django.contrib.auth.views import redirect_to_login

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            wanted = required_role(request.method, role)
            if not has_role(request.user, wanted):
                return HttpResponse(
                    f"Forbidden: this needs the {wanted} role.",
                    status=403,
                    content_type="text/plain",
                )
            return view(request, *args, **kwargs)

        return wrapper

    return decorate


def roles_context(request) -> dict:
    """Template context: `strata_role` and `can_operate` / `can_admin` to hide buttons."""
    user = getattr(request, "user", None)
    return {
        "strata_role": user_role(user),
        "can_operate": has_role(user, OPERATOR),
        "can_admin": has_role(user, ADMIN),
    }


# --- login throttling ----------------------------------------------------------------------
# The counters live in Redis (REDIS_URL, which web, worker and beat share), so
# every gunicorn process and every web machine counts the same failures; if
# Redis does not answer, in this process's cache (still throttled, per process).


def _client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR") or "?"


def _throttle_keys(request, username: str | None = None) -> list[str]:
    """The failure counters of (address, user name) and of the address alone; the
    user name is the login form's unless given (HTTP Basic's)."""
    if username is None:
        username = request.POST.get("username") or ""
    username = username[:150].lower()
    ip = hashlib.sha256(_client_ip(request).encode()).hexdigest()[:32]
    user = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    prefix = settings.STRATA_LOGIN_THROTTLE_PREFIX
    return [f"{prefix}:{ip}:{user}", f"{prefix}-ip:{ip}"]


_redis_clients: dict = {}


def _throttle_redis():
    import redis

    url = settings.REDIS_URL
    if url not in _redis_clients:
        _redis_clients[url] = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    return _redis_clients[url]


def _redis_errors() -> tuple:
    import redis

    return (redis.RedisError, OSError)


def login_failures(keys: list[str]) -> list[int]:
    """The failed-login counts under these keys."""
    try:
        values = _throttle_redis().mget(keys)
        return [int(v or 0) for v in values]
    except _redis_errors() as exc:
        log.warning("login throttle: Redis unavailable (%s); counting in this process", exc)
        return [cache.get(key, 0) for key in keys]


def login_failure_add(keys: list[str], window: int) -> None:
    """Count one failed login under each key, for `window` seconds from the first."""
    try:
        client = _throttle_redis()
        for key in keys:
            # The window starts at the first failure (no EXPIRE NX: Redis 6 lacks it).
            if client.incr(key) == 1 or client.ttl(key) < 0:
                client.expire(key, window)
    except _redis_errors() as exc:
        log.warning("login throttle: Redis unavailable (%s); counting in this process", exc)
        for key in keys:
            cache.add(key, 0, window)
            try:
                cache.incr(key)
            except ValueError:
                cache.set(key, 1, window)


def login_failures_forget(keys: list[str]) -> None:
    with contextlib.suppress(*_redis_errors()):
        _throttle_redis().delete(*keys)
    cache.delete_many(keys)


def login_locked_out(keys: list[str]) -> bool:
    """Whether the address has failed too often, for this user name or for any."""
    limit = settings.STRATA_LOGIN_MAX_FAILURES
    per_user, per_ip = login_failures(keys)
    return per_user >= limit or per_ip >= 5 * limit


@method_decorator(never_cache, name="dispatch")
class ThrottledLoginView(auth_views.LoginView):
    """Django's login view; after STRATA_LOGIN_MAX_FAILURES failed attempts for one
    user name from one address (or 5x that from one address) within
    STRATA_LOGIN_LOCKOUT_SECONDS, further attempts get 429 until the window passes."""

    def post(self, request, *args, **kwargs):
        keys = _throttle_keys(request)
        if login_locked_out(keys):
            log.warning("login throttled for %s", keys[0])
            return HttpResponse(
                "Too many failed logins: try again later.", status=429, content_type="text/plain"
            )
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        login_failure_add(_throttle_keys(self.request), settings.STRATA_LOGIN_LOCKOUT_SECONDS)
        return super().form_invalid(form)

    def form_valid(self, form):
        login_failures_forget(_throttle_keys(self.request)[:1])
        return super().form_valid(form)


# --- HTTP Basic ------------------------------------------------------------------------------
# Druid's clients (Airflow's DruidHook, pydruid, Superset) send the password on every
# request, and verifying it costs the full password hash (PBKDF2: ~0.5 s of a core).
# A verified pair is remembered in this process for STRATA_BASIC_AUTH_CACHE_SECONDS
# under an HMAC (SECRET_KEY) of user name and password, with the user's id and an
# HMAC of their stored password hash. Every request still reads the user's row, so a
# changed password, a deactivated user or a role taken away applies at once, in every
# process; the lockout (shared with the login form, in Redis) is checked first.

_BASIC_FAILED = "Invalid username/password."  # DRF's own message, for every refusal
_BASIC_CACHE_MAX = 4096
# HMAC of the credentials -> (user pk, user name, HMAC of the password hash, expiry)
_basic_cache: OrderedDict[str, tuple[object, str, str, float]] = OrderedDict()
_basic_cache_lock = threading.Lock()


def basic_auth_cache_key(username: str, password: str) -> str:
    """The HMAC (keyed with SECRET_KEY) that stands for a user name and password."""
    # Length-prefixed: no choice of name and password can collide with another.
    text = f"{len(username)}:{username}:{password}"
    return salted_hmac("strata.basic-auth", text, algorithm="sha256").hexdigest()


def _password_token(encoded: str) -> str:
    return salted_hmac("strata.basic-auth.password", encoded, algorithm="sha256").hexdigest()


def basic_auth_cache_keys() -> list[str]:
    with _basic_cache_lock:
        return list(_basic_cache)


def basic_auth_cache_clear() -> None:
    with _basic_cache_lock:
        _basic_cache.clear()


def _basic_cache_forget(username: str) -> None:
    with _basic_cache_lock:
        for key in [k for k, entry in _basic_cache.items() if entry[1] == username]:
            del _basic_cache[key]


def _basic_cache_put(key: str, username: str, user) -> None:
    lifetime = settings.STRATA_BASIC_AUTH_CACHE_SECONDS
    if lifetime <= 0:
        return
    entry = (user.pk, username, _password_token(user.password), time.monotonic() + lifetime)
    with _basic_cache_lock:
        _basic_cache[key] = entry
        _basic_cache.move_to_end(key)
        while len(_basic_cache) > _BASIC_CACHE_MAX:
            _basic_cache.popitem(last=False)


def _basic_cached_user(key: str, username: str):
    """The user these credentials were verified for, read now with their role, if
    that was within the cache lifetime and their password hash is still the same."""
    with _basic_cache_lock:
        entry = _basic_cache.get(key)
    if entry is None:
        return None
    pk, cached_name, token, expires = entry
    user = None
    if cached_name == username and time.monotonic() < expires:
        from metastore import selectors

        user = selectors.user_with_roles(pk=pk)
    if (
        user is None
        or not user.is_active
        or not hmac.compare_digest(_password_token(user.password), token)
    ):
        with _basic_cache_lock:
            _basic_cache.pop(key, None)
        return None
    _take_role(user, user)
    return user


class StrataBasicAuthentication(BasicAuthentication):
    """DRF's HTTP Basic, under the login form's lockout and with verified
    credentials remembered for a short while (see above). Every refusal, a
    lockout included, is the API's usual authentication failure."""

    def authenticate_credentials(self, userid, password, request=None):
        keys = _throttle_keys(request, userid)
        if login_locked_out(keys):
            log.warning("HTTP Basic throttled for %s", keys[0])
            raise exceptions.AuthenticationFailed(_BASIC_FAILED)
        key = basic_auth_cache_key(userid, password)
        user = _basic_cached_user(key, userid)
        if user is not None:
            return (user, None)
        user = None
        if not UNSTORABLE.search(userid):  # no such user; the database cannot compare it
            credentials = {get_user_model().USERNAME_FIELD: userid, "password": password}
            user = authenticate(request=request, **credentials)
        if user is None or not user.is_active:
            login_failure_add(keys, settings.STRATA_LOGIN_LOCKOUT_SECONDS)
            _basic_cache_forget(userid)
            raise exceptions.AuthenticationFailed(_BASIC_FAILED)
        login_failures_forget(keys[:1])
        _basic_cache_put(key, userid, user)
        return (user, None)


class StrataBasicScheme(BasicScheme):
    """The OpenAPI description of StrataBasicAuthentication: HTTP Basic."""

    target_class = "console.security.StrataBasicAuthentication"


def json_error(status_code: int, error: str, **extra) -> JsonResponse:
    return JsonResponse({"error": error, **extra}, status=status_code)


class RejectHostileRequestMiddleware:
    """Refuse, before any view runs, a request whose path, query string or
    credentials carry NUL or other control characters (no database can store
    them; no view needs them): 400, as JSON under /api/."""

    HEADERS = ("HTTP_AUTHORIZATION", "HTTP_COOKIE", "HTTP_X_CSRFTOKEN")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        problem = None
        if _has_control(request.path):
            problem = ("(path)", "the URL path contains control characters")
        else:
            for key, values in request.GET.lists():
                if _has_control(key) or any(_has_control(v) for v in values):
                    problem = (key, "query parameter contains control characters")
                    break
            for header in self.HEADERS:
                if problem is None and "\x00" in request.META.get(header, ""):
                    problem = (header[5:].lower(), "header contains a NUL character")
        if problem is not None:
            field, message = problem
            if request.path.startswith(("/api/", "/druid/")):
                return json_error(400, f"{field}: {message}", field=field, message=message)
            return HttpResponse(
                f"Bad request: {field}: {message}", status=400, content_type="text/plain"
            )
        return self.get_response(request)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _has_control(text: str) -> bool:
    return bool(_CONTROL.search(text))


class SecureCookiesOverHttpsMiddleware:
    """Mark every cookie Secure on a response to a request that came over HTTPS
    (`request.is_secure()`, which honours SECURE_PROXY_SSL_HEADER behind a proxy),
    so a session or CSRF cookie set over HTTPS is never sent back over HTTP."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.is_secure():
            for morsel in response.cookies.values():
                morsel["secure"] = True
        return response
