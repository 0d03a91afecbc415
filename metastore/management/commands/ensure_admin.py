"""Make sure the console can be logged into: a superuser `admin` and its API token.

If no superuser exists, `admin` is created with the password in
STRATA_ADMIN_PASSWORD, or a generated one that is printed this once (it is not
stored anywhere in clear). The superuser's API token is created when missing
and printed when created (only its digest is stored). Auth models are written through Django's own
managers, the one place Strata writes outside `metastore.services`.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from metastore import services
from metastore.models import ApiToken

ADMIN_USERNAME = "admin"


@dataclass(frozen=True)
class EnsuredAdmin:
    username: str
    # Only set when this call created the user or the token: they are shown once.
    password: str | None
    password_generated: bool
    token: str | None


def admin_ensure() -> EnsuredAdmin:
    """Create `admin` unless a superuser exists; give the superuser a token."""
    users = get_user_model()
    password = None
    generated = False
    with transaction.atomic():
        superusers = users.objects.filter(is_superuser=True)
        user = (
            superusers.filter(**{users.USERNAME_FIELD: ADMIN_USERNAME}).first()
            or superusers.order_by("pk").first()
        )
        if user is None:
            password = os.environ.get("STRATA_ADMIN_PASSWORD") or None
            if password is None:
                password = secrets.token_urlsafe(12)
                generated = True
            user = users.objects.create_superuser(
                username=ADMIN_USERNAME, email="", password=password
            )
        key = None
        if not ApiToken.objects.filter(user=user).exists():
            key = services.api_token_issue(user=user)[1]
    return EnsuredAdmin(
        username=user.get_username(),
        password=password,
        password_generated=generated,
        token=key,
    )


class Command(BaseCommand):
    help = "Create the superuser `admin` (and its API token) if no superuser exists."

    def handle(self, *args, **options):
        admin = admin_ensure()
        if admin.password is None:
            self.stdout.write(f"admin: superuser {admin.username!r} already exists")
        elif admin.password_generated:
            self.stdout.write(
                self.style.SUCCESS(
                    f"admin: created superuser {admin.username!r} with password "
                    f"{admin.password}  (shown once: note it down)"
                )
            )
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"admin: created superuser {admin.username!r} with the password "
                    "from STRATA_ADMIN_PASSWORD"
                )
            )
        if admin.token is not None:
            self.stdout.write(f"admin: API token for {admin.username!r}: {admin.token}")
