"""Indexes for append allocation's reads on PostgreSQL (metastore/lockbox_sql.py).

- (dataSource, "end" - start) on segments and allocations: the longest chunk a
  dataSource holds is one index probe, and bounds `start` from below in the
  overlap reads (a btree bounds `start < :end AND "end" > :start` on one side
  only, so they scanned every earlier chunk).
- (task, dataSource, start, end, version) over append allocations: "an append
  still running was given ids in this chunk" is one probe per active task,
  instead of a pass over every allocation of the chunk.

SQLite keeps the plain reads and gets none of these.
"""

from django.db import migrations

_INDEXES = [
    (
        "metastore_segment_chunk_length",
        "CREATE INDEX IF NOT EXISTS metastore_segment_chunk_length "
        'ON metastore_segment (datasource_id, ("end" - start))',
    ),
    (
        "metastore_pending_chunk_length",
        "CREATE INDEX IF NOT EXISTS metastore_pending_chunk_length "
        'ON metastore_pendingsegment (datasource, ("end" - start))',
    ),
    (
        "metastore_pending_append_task",
        "CREATE INDEX IF NOT EXISTS metastore_pending_append_task "
        'ON metastore_pendingsegment (task_id, datasource, start, "end", version) WHERE append',
    ),
]


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for _, sql in _INDEXES:
            schema_editor.execute(sql)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name, _ in _INDEXES:
            schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("metastore", "0008_worker"),
    ]

    operations = [migrations.RunPython(create, drop)]
