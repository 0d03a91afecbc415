"""The Segments view's keyset orders by size and by rows (issue 25): (size_bytes, id)
and (num_rows, id), so a page sorted by either is one index walk at any depth."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("metastore", "0015_segment_start_index")]

    operations = [
        migrations.AddIndex(
            model_name="segment",
            index=models.Index(fields=["size_bytes", "id"], name="segment_size_id"),
        ),
        migrations.AddIndex(
            model_name="segment",
            index=models.Index(fields=["num_rows", "id"], name="segment_rows_id"),
        ),
    ]
