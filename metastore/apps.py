from django.apps import AppConfig


class MetastoreConfig(AppConfig):
    name = "metastore"
    verbose_name = "Metastore"
    default_auto_field = "django.db.models.BigAutoField"
