"""API tokens stored as digests (issue 25): the ApiToken table, and every key DRF's
authtoken table held in clear moved into it as its SHA-256 digest and prefix, then
erased there. Clients keep their keys: the same key authenticates afterwards."""

import hashlib

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

DRF_TABLE = "authtoken_token"


def hash_existing_keys(apps, schema_editor):
    connection = schema_editor.connection
    if DRF_TABLE not in connection.introspection.table_names():
        return  # a database that never had DRF's tokens
    ApiToken = apps.get_model("metastore", "ApiToken")
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "key", "user_id", "created" FROM {DRF_TABLE}')
        rows = cursor.fetchall()
        ApiToken.objects.bulk_create(
            ApiToken(
                user_id=user_id,
                digest=hashlib.sha256(key.encode()).hexdigest(),
                prefix=key[:8],
                created_at=created,
            )
            for key, user_id, created in rows
        )
        # The clear keys go: the table stays (its migrations are recorded) but empty.
        cursor.execute(f"DELETE FROM {DRF_TABLE}")


class Migration(migrations.Migration):
    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("metastore", "0013_retention_rules"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("prefix", models.CharField(max_length=8)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_token",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"verbose_name": "API token", "ordering": ["user_id"]},
        ),
        # Irreversible by nature: the clear keys are gone.
        migrations.RunPython(hash_existing_keys, migrations.RunPython.noop),
    ]
