"""The lock box's reads do not grow with a dataSource's history (PostgreSQL).

A lock decision or an allocation runs inside its dataSource's critical section,
so what it reads there must stay the same whether the dataSource has seen ten
allocations or thousands. These tests count what PostgreSQL itself reports
having read (index entries and rows, `pg_stat_get_xact_tuples_returned`, for
this transaction) around one call of the real services, once on a young
dataSource and once after a long history, with the statements' plans prepared
while the tables were small and never analyzed (as on a server without
autovacuum, and as on every server until its first ANALYZE). A plan that
aggregates or filters every row of a dataSource (what MAX() and redundant
single-column indexes gave) fails them; the figures do not depend on time.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from conftest import TEST_WORKER
from django.db import connection, transaction

from metastore import locking, services
from metastore.intervals import Interval
from metastore.models import TaskStatus

# Committed transactions, as in service: rows a transaction deletes or updates
# leave index entries that later scans skip once the change is committed.
pytestmark = pytest.mark.django_db(transaction=True)

BASE = Interval.parse("2024-01-01/2024-01-02")


def day(n: int) -> Interval:
    return Interval(BASE.start + timedelta(days=n), BASE.start + timedelta(days=n + 1))


def task(datasource: str):
    t = services.task_create(
        spec={"context": {"priority": 50}},
        task_type="index_parallel",
        datasource=datasource,
        enqueue=False,
    )
    assert services.task_claim(task_id=t.id, worker=TEST_WORKER)
    return t


def rows_read(call) -> int:
    """Index entries and rows the metastore's tables returned to `call`'s statements."""
    sql = (
        "WITH t AS (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname LIKE 'metastore%%') "
        "SELECT COALESCE(SUM(pg_stat_get_xact_tuples_returned(oid)), 0) FROM "
        "(SELECT oid FROM t UNION ALL SELECT indexrelid FROM pg_index "
        "WHERE indrelid IN (SELECT oid FROM t)) r"
    )
    # The counters are this transaction's, so the call runs inside one.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql)
        before = cursor.fetchone()[0]
        call()
        cursor.execute(sql)
        return cursor.fetchone()[0] - before


def allocate_one(t, n: int, name: str):
    return lambda: services.segments_allocate(
        task=t, interval=day(n), count=1, append=True, sequence_name=name
    )


def lock_and_release(t, n: int):
    def call():
        services.lock_release(lock_id=services.lock_try_acquire(task=t, interval=day(n)).id)

    return call


def grow_history(datasource: str, t, *, allocations: int, tasks: int, publishes: int):
    """A dataSource's past: many allocations in the chunks `t` writes, many ended
    tasks, and many commits (published appends)."""
    for b in range(allocations // 50):
        services.segments_allocate_many(
            task=t,
            requests=[
                services.AllocationRequest(day(j % 3), 1, f"history-{b}-{j}") for j in range(50)
            ],
            append=True,
        )
    for _ in range(tasks):
        services.task_finish(task_id=task(datasource).id, status=TaskStatus.SUCCESS)
    for i in range(publishes):
        p = task(datasource)
        assert services.lock_try_acquire(task=p, interval=day(20 + i), lock_type=locking.APPEND)
        alloc = services.segments_allocate(task=p, interval=day(20 + i), count=1, append=True)
        services.segments_publish(
            task=p,
            segments=[
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=alloc.partitions[0],
                    core_partitions=alloc.core_partitions,
                    location=f"mem://{p.id}",
                    num_rows=1,
                )
            ],
        )
        services.task_finish(task_id=p.id, status=TaskStatus.SUCCESS)


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="plans and read counts are PostgreSQL's"
)
def test_allocation_and_lock_reads_do_not_grow_with_history():
    writer = task("young")
    assert services.lock_try_acquire(
        task=writer, interval=Interval(day(0).start, day(9).end), lock_type=locking.EXCLUSIVE
    )
    other = task("young")
    # Warm up: every statement is prepared (psycopg prepares on the sixth
    # execution) and planned while the tables hold next to nothing.
    for i in range(8):
        allocate_one(writer, i % 3, f"warm-{i}")()
        lock_and_release(other, 10 + i % 3)()
    young = {
        "allocation": rows_read(allocate_one(writer, 1, "young")),
        "lock": rows_read(lock_and_release(other, 11)),
    }

    grow_history("young", writer, allocations=3000, tasks=200, publishes=60)
    # Rows the history deleted or updated (released locks, ended tasks) leave
    # index entries until VACUUM removes them, as autovacuum would by now (its
    # shortcut of leaving a few in the indexes is turned off). It does not
    # analyze: the plans stay those made without statistics.
    with connection.cursor() as cursor:
        for table in ("metastore_task", "metastore_tasklock", "metastore_pendingsegment"):
            cursor.execute(f"VACUUM (INDEX_CLEANUP ON) {table}")
    old = {
        "allocation": rows_read(allocate_one(writer, 1, "old")),
        "lock": rows_read(lock_and_release(other, 11)),
    }
    # The history is 3,000 allocations in the same three chunks, 260 ended
    # tasks and 60 commits; a read that scales with it would read thousands.
    for call in young:
        assert old[call] <= 2 * young[call] + 20, (call, young, old)
