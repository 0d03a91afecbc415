"""Druid's own SQL test dataSources `foo` and `numfoo` (Druid's TestDataBuilder: ROWS1
and ROWS1_WITH_NUMERIC_DIMS), published through the services as one segment each,
so that Druid's SQL test queries can run over the rows they were written for.

A multi-value string is stored as ingestion stores it (workers.jobs.parsing): one
value as itself, several as the JSON text of their list; `[]` is null and `[""]` is
the empty string, as Druid indexes them.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings
from django.db import transaction

from metastore import services
from metastore.intervals import Interval
from metastore.models import Task, TaskStatus

TIMES = ["2000-01-01", "2000-01-02", "2000-01-03", "2001-01-01", "2001-01-02", "2001-01-03"]
FOO = {
    "dim1": ["", "10.1", "2", "1", "def", "abc"],
    "dim2": ["a", None, "", "a", "abc", None],
    "dim3": ['["a","b"]', '["b","c"]', "d", "", None, None],
    "m1": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    "m2": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    "cnt": [1, 1, 1, 1, 1, 1],
}
NUMFOO = {
    **FOO,
    "d1": [1.0, 1.7, 0.0, None, None, None],
    "d2": [None, 1.7, 0.0, None, None, None],
    "dbl1": [1.0, 1.7, 0.0, None, None, None],  # d1 and d2 as newer Druid names them
    "dbl2": [None, 1.7, 0.0, None, None, None],
    "f1": [1.0, 0.1, 0.0, None, None, None],
    "f2": [None, 0.1, 0.0, None, None, None],
    "l1": [7, 325323, 0, None, None, None],
    "l2": [None, 325323, 0, None, None, None],
    "dim4": ["a", "a", "a", "b", "b", "b"],
    "dim5": ["aa", "ab", "ba", "ad", "aa", "ab"],
    "dim6": ["1", "2", "3", "4", "5", "6"],
}
_TYPES = {
    "m1": pa.float32(),
    "f1": pa.float32(),
    "f2": pa.float32(),
    "m2": pa.float64(),
    "d1": pa.float64(),
    "d2": pa.float64(),
    "dbl1": pa.float64(),
    "dbl2": pa.float64(),
    "cnt": pa.int64(),
    "l1": pa.int64(),
    "l2": pa.int64(),
}


def publish(
    inline_spec,
    datasource: str,
    columns: dict[str, list],
    times: list[str],
    types=None,
    dimension_types=None,
) -> None:
    """One segment of these rows (`times` as ISO dates or times, UTC), published as
    a task would publish it; a column is typed by `types`, else `_TYPES`, else a string.
    `dimension_types` ({name: type}) are the dimension types the segment's schema records."""
    recorded = dimension_types or {}
    types = {**_TYPES, **(types or {})}
    path = settings.STRATA_DEEP_STORAGE / datasource / uuid.uuid4().hex / "data.parquet"
    path.parent.mkdir(parents=True)
    moments = [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in times]
    table = pa.table(
        {
            "__time": pa.array(moments, type=pa.timestamp("us", tz="UTC")),
            **{name: pa.array(v, type=types.get(name, pa.string())) for name, v in columns.items()},
        }
    )
    pq.write_table(table, path)
    with transaction.atomic():
        task = services.task_submit(spec=inline_spec(datasource))
        assert services.task_claim(task_id=task.id, worker="pytest")
    task = Task.objects.get(id=task.id)
    years = Interval.parse("2000-01-01/2002-01-01")
    services.lock_acquire(task=task, interval=years)
    alloc = services.segments_allocate(task=task, interval=years, count=1, append=False)
    dimensions = [n for n in columns if n not in types]
    services.segments_publish(
        task=task,
        segments=[
            services.NewSegment(
                interval=years,
                version=alloc.version,
                partition=alloc.partitions[0],
                core_partitions=alloc.core_partitions,
                location=str(path),
                num_rows=len(times),
                size_bytes=path.stat().st_size,
                schema={
                    "dimensions": [
                        {"name": n, **({"type": recorded[n]} if n in recorded else {})}
                        for n in dimensions
                    ]
                },
            )
        ],
    )
    services.task_finish(task_id=task.id, status=TaskStatus.SUCCESS)


def publish_foo(inline_spec) -> None:
    publish(inline_spec, "foo", FOO, TIMES)


def publish_numfoo(inline_spec) -> None:
    publish(inline_spec, "numfoo", NUMFOO, TIMES)


# Druid's CalciteNestedDataQueryTest `nested` rows: its JSON columns stored as ingestion
# stores a nested or mixed field (an object as its JSON text, a scalar as itself).
NESTED_TIMES = ["2000-01-01"] * 5 + ["2000-01-02"] * 2
_NEST = [
    '{"x":100,"y":2.02,"z":"300","mixed":1,"mixed2":"1"}',
    None,
    '{"x":200,"y":3.03,"z":"abcdef","mixed":1.1,"mixed2":1}',
    None,
    None,
    '{"x":100,"y":2.02,"z":"400","mixed2":1.1}',
    None,
]
NESTED = {
    "string": ["aaa", "bbb", "ccc", "ddd", "eee", "aaa", "ddd"],
    "string_sparse": ["zzz", None, None, "yyy", None, None, None],
    "nest": _NEST,
    "nester": ['{"array":["a","b"],"n":{"x":"hello"}}', "hello", None, None, None,
               '{"array":["a","b"],"n":{"x":1}}', "2"],
    "long": [5, 4, 3, 2, 1, 5, 2],
    "cnt": [1] * 7,
}  # fmt: skip

# Druid's test lookup `lookyloo` (k -> v) as a dataSource of two string columns.
LOOKYLOO = {"k": ["a", "abc", "nosuchkey", "6"], "v": ["xa", "xabc", "mysteryvalue", "x6"]}


def publish_nested(inline_spec) -> None:
    publish(
        inline_spec,
        "nested",
        NESTED,
        NESTED_TIMES,
        types={"long": pa.int64()},
        dimension_types={"nest": "json", "nester": "json"},
    )


def publish_lookyloo(inline_spec) -> None:
    publish(inline_spec, "lookyloo", LOOKYLOO, ["2000-01-01"] * 4)
