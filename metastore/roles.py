"""Strata's roles (viewer, operator, admin) as Django groups and permissions.

The metastore owns them: its management commands create users with a role, and
the edges (`console.security`) check a request's role against them.
"""

from __future__ import annotations

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
# Strata's own permissions (on the Task content type); a role has its own and those below.
ROLE_PERMISSIONS = {
    VIEWER: ("strata_view", "View everything in Strata"),
    OPERATOR: ("strata_operate", "Submit, cancel, kill and compact tasks; mark segments"),
    ADMIN: ("strata_admin", "Administer Strata: users, roles, the Django admin"),
}


def roles_ensure(**_kwargs) -> None:
    """Create the role groups and their permissions (idempotent; run after migrate)."""
    from django.contrib.auth.models import Group, Permission
    from django.contrib.contenttypes.models import ContentType

    from metastore.models import Task

    content_type = ContentType.objects.get_for_model(Task)
    perms = {}
    for role, (codename, name) in ROLE_PERMISSIONS.items():
        perms[role], _ = Permission.objects.get_or_create(
            codename=codename, content_type=content_type, defaults={"name": name}
        )
    model_view = list(
        Permission.objects.filter(
            content_type__app_label="metastore", codename__startswith="view_"
        ).exclude(codename="view_apitoken")
    )
    for i, role in enumerate(ROLES):
        group, _ = Group.objects.get_or_create(name=role)
        wanted = [perms[r] for r in ROLES[: i + 1]] + model_view
        if role == ADMIN:
            wanted += list(
                Permission.objects.filter(content_type__app_label="auth")
                | Permission.objects.filter(
                    content_type__app_label="metastore", codename__endswith="_apitoken"
                )
            )
        group.permissions.add(*wanted)
