from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_roles(sender, **kwargs):
    # After the metastore's models (and their permissions) exist: the role groups.
    if sender.label == "metastore":
        from metastore.roles import roles_ensure

        roles_ensure(using=kwargs.get("using"))


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Strata console"

    def ready(self):
        post_migrate.connect(_ensure_roles, dispatch_uid="strata-roles")
