"""A GiST index on each segment's time range, on PostgreSQL: the segments
overlapping a window (`selectors.state_around`, the commit page) are found by
it whatever the window, where the (start, end) b-trees bound only one side and a
window in the middle of a long history read every row."""

from django.db import migrations

CREATE = (
    "CREATE INDEX IF NOT EXISTS segment_time_range "
    'ON metastore_segment USING gist (tstzrange(start, "end"))'
)
DROP = "DROP INDEX IF EXISTS segment_time_range"


def _on_postgresql(sql: str):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("metastore", "0019_chunk_rows_index")]

    operations = [migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP))]
