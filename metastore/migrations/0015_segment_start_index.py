"""The Segments view's keyset order across dataSources (issue 25): (start, id)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("metastore", "0014_api_token_digest")]

    operations = [
        migrations.AddIndex(
            model_name="segment",
            index=models.Index(fields=["start", "id"], name="segment_start_id"),
        ),
    ]
