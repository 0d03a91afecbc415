"""When the background rounds last ran (the beat process's task reaper, the
intermediary janitor): a timestamp per round in Redis, which web, workers and
beat share, so the console's overview and Services view can say whether beat is
alive without a table written every few seconds. Missing (Redis restarted, or
the round never ran) reads as None."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

KEY_PREFIX = "strata:last-run:"
KEEP_SECONDS = 7 * 24 * 3600
_clients: dict = {}


def _prefix() -> str:
    from django.conf import settings

    # Tests (which share one Redis) give each run its own prefix.
    return getattr(settings, "STRATA_LAST_RUN_PREFIX", KEY_PREFIX)


def _redis(url: str):
    import redis

    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    return _clients[url]


def last_run_mark(name: str, *, redis_url: str, now: datetime | None = None) -> None:
    """Record that the round `name` ran now (best effort: Redis away, nothing)."""
    import redis

    stamp = (now or datetime.now(UTC)).timestamp()
    with contextlib.suppress(redis.RedisError, OSError):
        _redis(redis_url).set(f"{_prefix()}{name}", repr(stamp), ex=KEEP_SECONDS)


def last_runs(names: list[str], *, redis_url: str) -> dict[str, datetime | None]:
    """When each round last ran; raises redis.RedisError / OSError if Redis is away."""
    prefix = _prefix()
    values = _redis(redis_url).mget([f"{prefix}{n}" for n in names])
    return {
        n: datetime.fromtimestamp(float(v), UTC) if v is not None else None
        for n, v in zip(names, values, strict=True)
    }


# --- the Coordinator's duties: when each last ran and what it did ---------------------------

DUTIES = ("compaction", "retention", "history", "kill")


def duty_run_mark(name: str, *, summary: str, redis_url: str, now: datetime | None = None) -> None:
    """Record that the duty `name` ran now and what it did, in words (best effort)."""
    import json

    import redis

    value = json.dumps({"at": (now or datetime.now(UTC)).timestamp(), "summary": summary})
    with contextlib.suppress(redis.RedisError, OSError):
        _redis(redis_url).set(f"{_prefix()}duty:{name}", value, ex=KEEP_SECONDS)


def duty_runs(*, redis_url: str) -> dict[str, tuple[datetime, str] | None]:
    """Each duty's last run (when, what it did), None if not recorded; raises
    redis.RedisError / OSError if Redis is away."""
    import json

    values = _redis(redis_url).mget([f"{_prefix()}duty:{n}" for n in DUTIES])
    out: dict[str, tuple[datetime, str] | None] = {}
    for name, raw in zip(DUTIES, values, strict=True):
        record = json.loads(raw) if raw is not None else None
        out[name] = (
            (datetime.fromtimestamp(float(record["at"]), UTC), str(record["summary"]))
            if record
            else None
        )
    return out
