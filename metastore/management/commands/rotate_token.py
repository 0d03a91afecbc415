"""Rotate a user's API token: the old one stops working at once.

manage.py rotate_token NAME            # print the new token
manage.py rotate_token NAME --revoke   # only remove the token
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from metastore import services


def token_rotate(*, username: str, revoke: bool = False) -> str | None:
    users = get_user_model()
    user = users.objects.filter(**{users.USERNAME_FIELD: username}).first()
    if user is None:
        raise CommandError(f"no user {username!r}")
    if revoke:
        services.api_token_revoke(user=user)
        return None
    return services.api_token_issue(user=user)[1]


class Command(BaseCommand):
    help = "Replace a user's API token with a new one (or revoke it)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--revoke", action="store_true", help="remove the token, create none")

    def handle(self, *args, username, revoke, **options):
        key = token_rotate(username=username, revoke=revoke)
        if key is None:
            self.stdout.write(self.style.SUCCESS(f"revoked the API token of {username!r}"))
        else:
            self.stdout.write(self.style.SUCCESS(f"new API token for {username!r}: {key}"))
