"""`selectors.metric_types()` (INFORMATION_SCHEMA.COLUMNS' and segmentMetadata's
metric and json column types) reads each dataSource's distinct schemas, each at its
newest used segment, and must answer what folding every used segment's schema in
creation order answers (the read it replaced, kept here as the reference)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from metastore import selectors
from metastore.intervals import Interval
from metastore.models import DataSource, Segment
from metastore.selectors.datasources import fold_metric_types

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 1, 1, tzinfo=UTC)

# Schemas whose order matters: a metric's type changing, a json dimension stored
# otherwise later (it is then no longer json), a metric and a dimension of one name.
POOL = [
    {"metrics": [{"name": "m", "type": "longSum"}], "dimensions": ["page"]},
    {
        "metrics": [{"name": "m", "type": "doubleSum"}],
        "dimensions": [{"name": "j", "type": "json"}],
    },
    {"dimensions": [{"name": "j", "type": "string"}, {"name": "k", "type": "json"}]},
    {"metrics": [{"name": "j", "type": "count"}], "dimensions": [{"name": "k", "type": "long"}]},
    {"metrics": [{"name": "k", "type": "json"}], "dimensions": [{"name": "j", "type": "json"}]},
    {"metrics": [{"name": "x", "type": "thetaSketch"}, "bad", {"type": "nameless"}]},
    {"dimensions": [{"name": "x", "type": "json"}, {"name": "m", "type": "string"}]},
    {},
]


def folded_per_segment() -> dict[str, dict[str, str]]:
    """The reference: every used segment's schema, oldest first, folded in Python."""
    rows = (
        Segment.objects.filter(used=True)
        .exclude(schema={})
        .order_by("datasource__name", "created_at")
        .values_list("datasource__name", "schema")
    )
    return fold_metric_types(rows)


def segments(ds: DataSource, schemas: list[dict], *, used: list[bool] | None = None) -> None:
    """One segment per schema, created in that order (one second apart)."""
    for i, schema in enumerate(schemas):
        iv = Interval(T0 + timedelta(days=i), T0 + timedelta(days=i + 1))
        seg = Segment.objects.create(
            id=Segment.make_id(ds.name, iv, "v1", 0),
            datasource=ds,
            start=iv.start,
            end=iv.end,
            version="v1",
            partition=0,
            root_partitions=[0],
            atomic_update_group=[0],
            used=True if used is None else used[i],
            schema=schema,
        )
        Segment.objects.filter(id=seg.id).update(created_at=T0 + timedelta(seconds=i))


def test_a_schema_seen_again_later_counts_at_its_newest_segment():
    a, b = POOL[0], POOL[1]  # m: longSum, then doubleSum with j json
    segments(DataSource.objects.create(name="abA"), [a, b, a])
    segments(DataSource.objects.create(name="ab"), [a, b])
    assert selectors.metric_types() == {
        "abA": {"m": "longSum", "j": "json"},
        "ab": {"m": "doubleSum", "j": "json"},
    }
    assert selectors.metric_types() == folded_per_segment()


def test_a_json_dimension_stored_otherwise_later_is_not_json_unless_named_json_again():
    json_j, string_j = POOL[1], POOL[2]
    segments(DataSource.objects.create(name="jsj"), [json_j, string_j, json_j, string_j])
    segments(DataSource.objects.create(name="sjs"), [string_j, json_j, string_j, json_j])
    assert selectors.metric_types() == {
        "jsj": {"m": "doubleSum", "k": "json"},
        "sjs": {"m": "doubleSum", "k": "json", "j": "json"},
    }
    assert selectors.metric_types() == folded_per_segment()


def test_unused_segments_and_empty_schemas_do_not_count():
    ds = DataSource.objects.create(name="some")
    segments(ds, [POOL[0], POOL[1], {}], used=[True, False, True])
    assert selectors.metric_types() == {"some": {"m": "longSum"}}


@pytest.mark.parametrize("seed", range(6))
def test_distinct_schemas_answer_what_every_segment_answers(seed):
    rng = random.Random(seed)
    for d in range(3):
        ds = DataSource.objects.create(name=f"ds{d}")
        n = rng.randint(1, 25)
        schemas = [rng.choice(POOL[: rng.randint(2, len(POOL))]) for _ in range(n)]
        segments(ds, schemas, used=[rng.random() < 0.8 for _ in range(n)])
    assert selectors.metric_types() == folded_per_segment()
