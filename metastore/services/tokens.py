"""API tokens: issued, rotated and revoked here; stored as a digest only.

A key is `secrets.token_hex(20)` (40 hex characters, the shape DRF's tokens had,
so clients and their `Authorization: Token <key>` header are unchanged). The
database keeps its SHA-256 digest and its first characters; the key itself is
returned once, to the caller that shows it."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from django.db import transaction

from metastore.models import ApiToken

TOKEN_PREFIX_CHARS = 8


def token_digest(key: str) -> str:
    """The stored form of a key: its SHA-256, in hex."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def api_token_issue(*, user, expires_at: datetime | None = None) -> tuple[ApiToken, str]:
    """Give `user` a new token, replacing any it had (rotation: the old key stops
    working in the same transaction). Returns the token and its key."""
    key = secrets.token_hex(20)
    with transaction.atomic():
        ApiToken.objects.filter(user=user).delete()
        token = ApiToken.objects.create(
            user=user,
            digest=token_digest(key),
            prefix=key[:TOKEN_PREFIX_CHARS],
            expires_at=expires_at,
        )
    return token, key


def api_token_revoke(*, user) -> bool:
    """Remove `user`'s token; whether there was one."""
    deleted, _ = ApiToken.objects.filter(user=user).delete()
    return deleted > 0
