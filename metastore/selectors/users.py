"""Who is asking: an API token or a user read with the roles they hold, in one
query (the edges' authentication classes decide what to do with them)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import Exists, OuterRef, Q

from metastore.models import ApiToken
from metastore.roles import ROLE_PERMISSIONS


def _role_annotations(user_ref: str) -> dict:
    """EXISTS subqueries that say, per role permission, whether the user referenced
    by `user_ref` has it directly or through a group (as ModelBackend would); read
    back as `_has_<role>`."""
    return {
        f"_has_{role}": Exists(
            Permission.objects.filter(
                codename=codename, content_type__app_label="metastore"
            ).filter(Q(group__user=OuterRef(user_ref)) | Q(user=OuterRef(user_ref)))
        )
        for role, (codename, _) in ROLE_PERMISSIONS.items()
    }


def api_token_with_roles(*, digest: str) -> ApiToken | None:
    """The token stored under `digest`, with its user and `_has_<role>` flags."""
    return (
        ApiToken.objects.select_related("user")
        .annotate(**_role_annotations("user_id"))
        .filter(digest=digest)
        .first()
    )


def user_with_roles(*, pk: int):
    """The user `pk` with `_has_<role>` flags, or None."""
    return (
        get_user_model()._default_manager.annotate(**_role_annotations("pk")).filter(pk=pk).first()
    )
