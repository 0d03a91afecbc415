"""Create a user with a role (viewer, operator or admin), or change a user's role.

    manage.py create_user NAME --role operator [--password-from-env VAR] [--token]

The password is read from the environment variable given (never from the command
line, where `ps` would show it) or generated and printed once. An admin is also
staff (the Django admin). `--token` prints a new API token for the user. Auth
models are written through Django's own managers, as in `ensure_admin`.
"""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from metastore import services
from metastore.roles import ADMIN, ROLES, roles_ensure


def user_set_role(*, username: str, role: str, password: str | None = None) -> tuple[object, bool]:
    """Create `username` (or update it) with exactly `role`; return (user, created)."""
    if role not in ROLES:
        raise CommandError(f"unknown role {role!r}; accepted: {', '.join(ROLES)}")
    users = get_user_model()
    roles_ensure()
    with transaction.atomic():
        user, created = users.objects.get_or_create(**{users.USERNAME_FIELD: username})
        if password is not None:
            user.set_password(password)
        elif created:
            user.set_unusable_password()
        user.is_staff = role == ADMIN
        user.save()
        user.groups.remove(*Group.objects.filter(name__in=ROLES))
        user.groups.add(Group.objects.get(name=role))
    return user, created


class Command(BaseCommand):
    help = "Create a user with a role (viewer, operator, admin) or change an existing user's role."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument(
            "--password-from-env",
            metavar="VAR",
            help="read the password from this environment variable",
        )
        parser.add_argument(
            "--generate-password",
            action="store_true",
            help="generate a password and print it once",
        )
        parser.add_argument("--token", action="store_true", help="create and print a new API token")

    def handle(self, *args, username, role, password_from_env, generate_password, token, **options):
        password = None
        if password_from_env:
            password = os.environ.get(password_from_env)
            if not password:
                raise CommandError(
                    f"the environment variable {password_from_env} is empty or unset"
                )
        elif generate_password:
            password = secrets.token_urlsafe(12)
        user, created = user_set_role(username=username, role=role, password=password)
        verb = "created" if created else "updated"
        self.stdout.write(self.style.SUCCESS(f"{verb} user {username!r} with the role {role}"))
        if generate_password:
            self.stdout.write(f"password: {password}  (shown once)")
        if token:
            key = services.api_token_issue(user=user)[1]
            self.stdout.write(f"API token: {key}")
