"""Schema metadata for segments published before it was recorded: derived from
the spec of the task that wrote their rows (for an upgraded copy, the task of
the segment it was copied from), with schemaless dimensions read from the
segment's Parquet file when it is still there."""

from __future__ import annotations

import os

from django.db import migrations

from metastore.schema import schema_from_ingestion_spec


def _file_columns(location: str) -> list[tuple[str, str]]:
    if not location or not os.path.isfile(location):
        return []
    try:
        import pyarrow.parquet as pq

        schema = pq.read_schema(location)
    except Exception:  # an unreadable file: the spec alone decides
        return []
    return [(field.name, str(field.type)) for field in schema]


def derive_schemas(apps, schema_editor):
    Segment = apps.get_model("metastore", "Segment")
    Task = apps.get_model("metastore", "Task")
    specs: dict[str, dict] = {}
    creators = dict(Segment.objects.values_list("id", "created_by_id"))
    todo = Segment.objects.filter(schema={}, tombstone=False).only(
        "id", "location", "created_by_id", "upgraded_from"
    )
    for seg in todo.iterator():
        task_id = creators.get(seg.upgraded_from) if seg.upgraded_from else seg.created_by_id
        task_id = task_id or seg.created_by_id
        if not task_id:
            continue
        if task_id not in specs:
            task = Task.objects.filter(id=task_id).values("type", "spec").first()
            specs[task_id] = task["spec"] if task and task["type"] == "index_parallel" else {}
        spec = specs[task_id]
        if not spec:
            continue
        schema = schema_from_ingestion_spec(spec, _file_columns(seg.location))
        if schema:
            Segment.objects.filter(id=seg.id).update(schema=schema)


class Migration(migrations.Migration):
    dependencies = [("metastore", "0005_segment_schema")]

    operations = [migrations.RunPython(derive_schemas, migrations.RunPython.noop)]
