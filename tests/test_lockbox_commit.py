"""An allocation or a lock grant in a transaction of its own commits with its
last write (PostgreSQL, `lockbox_sql.commits_with_last_write`): what it wrote is
committed, a failed one commits nothing and holds nothing, and inside a
caller's transaction it leaves the commit (or the rollback) to the caller."""

from __future__ import annotations

import psycopg
import pytest
from conftest import TEST_WORKER
from django.db import connection, transaction
from psycopg.pq import TransactionStatus

from metastore import locking, services
from metastore.intervals import Interval
from metastore.models import PendingSegment, Task

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the commit rides on PostgreSQL's pipeline"
    ),
]

DS = "commits"
DAY = Interval.parse("2024-01-01/2024-01-02")


def claimed_task(priority: int = 50) -> Task:
    t = services.task_create(
        spec={"context": {"priority": priority}},
        task_type="index_parallel",
        datasource=DS,
        enqueue=False,
    )
    assert services.task_claim(task_id=t.id, worker=TEST_WORKER)
    return t


def claimed_task_with_lock(lock_type: str = locking.EXCLUSIVE) -> Task:
    t = claimed_task()
    assert services.lock_try_acquire(task=t, interval=DAY, lock_type=lock_type)
    return t


def idle_and_holding_nothing():
    """No transaction open on this connection and no advisory lock held by it."""
    assert connection.get_autocommit()
    assert connection.connection.info.transaction_status == TransactionStatus.IDLE
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        )
        assert cursor.fetchone()[0] == 0


def elsewhere(sql: str, params: list) -> list[tuple]:
    """What another connection sees committed."""
    s = connection.settings_dict
    with psycopg.connect(
        host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432, user=s["USER"], dbname=s["NAME"]
    ) as other:
        return other.execute(sql, params).fetchall()


def committed_rows(task_id: str) -> list[tuple]:
    """The task's allocations as another connection sees them."""
    return elsewhere(
        "SELECT sequence_name, partition FROM metastore_pendingsegment WHERE task_id = %s "
        "ORDER BY sequence_name, partition",
        [task_id],
    )


def test_an_allocation_of_its_own_is_committed_with_its_write():
    t = claimed_task_with_lock()
    alloc = services.segments_allocate(
        task=t, interval=DAY, count=2, append=True, sequence_name="a"
    )
    idle_and_holding_nothing()
    assert committed_rows(t.id) == [("a", p) for p in alloc.partitions]
    # The connection goes on as usual: the next call is idempotent and the ORM writes.
    assert (
        services.segments_allocate(task=t, interval=DAY, count=2, append=True, sequence_name="a")
        == alloc
    )
    Task.objects.filter(id=t.id).update(phase="after")
    assert Task.objects.get(id=t.id).phase == "after"
    idle_and_holding_nothing()


def test_a_failed_allocation_commits_nothing_and_holds_nothing():
    t = claimed_task_with_lock()
    services.segments_allocate(task=t, interval=DAY, count=2, append=False, sequence_name="a")
    # The core set of a chunk is allocated once: under another sequence name its
    # insert collides, in the round trip that would have committed it.
    with pytest.raises(services.ServiceError, match="core set"):
        services.segments_allocate(task=t, interval=DAY, count=3, append=False, sequence_name="b")
    idle_and_holding_nothing()
    assert committed_rows(t.id) == [("a", 0), ("a", 1)]
    # Another task's decision on the dataSource is not kept waiting.
    other = claimed_task()
    assert services.lock_try_acquire(task=other, interval=Interval.parse("2024-01-02/2024-01-03"))


def test_inside_a_callers_transaction_the_caller_commits_or_rolls_back():
    t = claimed_task_with_lock()
    with pytest.raises(RuntimeError), transaction.atomic():
        services.segments_allocate(task=t, interval=DAY, count=1, append=True, sequence_name="a")
        assert PendingSegment.objects.filter(task_id=t.id).count() == 1
        raise RuntimeError("the caller changes its mind")
    idle_and_holding_nothing()
    assert committed_rows(t.id) == []
    with transaction.atomic():
        services.segments_allocate(task=t, interval=DAY, count=1, append=True, sequence_name="b")
        assert committed_rows(t.id) == []  # not committed before the caller's block ends
    assert committed_rows(t.id) == [("b", 0)]


def test_a_lock_grant_of_its_own_commits_the_grant_and_the_revocation_it_made():
    low = claimed_task_with_lock()
    high = claimed_task(priority=90)
    lock = services.lock_try_acquire(task=high, interval=DAY)
    assert lock is not None
    idle_and_holding_nothing()
    assert elsewhere(
        "SELECT task_id, revoked FROM metastore_tasklock WHERE datasource = %s ORDER BY id", [DS]
    ) == [(low.id, True), (high.id, False)]


def flushed(table: str, row_id: int) -> bool:
    """Whether the WAL that wrote the row is on disk: the flush position is past
    the row's page's last change (pageinspect)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pageinspect")
        cursor.execute(
            f"SELECT pg_current_wal_flush_lsn() >= (SELECT lsn FROM page_header(get_raw_page("  # noqa: S608
            f"'{table}', (SELECT (ctid::text::point)[0]::int FROM {table} WHERE id = %s))))",
            [row_id],
        )
        return cursor.fetchone()[0]


def test_a_lock_grant_is_on_disk_when_it_is_handed_out():
    """A decision of its own commits without waiting for the disk (the dataSource's
    lock is let go at once) and waits for it after that: the lock it returns is
    on disk. (Without the wait, the background WAL writer flushes within 200 ms,
    well after this looks.)"""
    for priority in (50, 90):  # a plain grant, then one that preempts it
        t = claimed_task(priority=priority)
        lock = services.lock_try_acquire(task=t, interval=DAY)
        assert flushed("metastore_tasklock", lock.id)
        idle_and_holding_nothing()


def test_a_release_is_committed_at_once_and_leaves_a_callers_commit_waiting_for_the_disk():
    """A release of its own commits without waiting for the disk (a lost release
    is a lock held longer); inside a caller's transaction it must not make the
    caller's commit asynchronous too."""
    t = claimed_task()
    lock = services.lock_try_acquire(task=t, interval=DAY)
    services.lock_release(lock_id=lock.id)
    idle_and_holding_nothing()
    assert elsewhere("SELECT count(*) FROM metastore_tasklock WHERE id = %s", [lock.id]) == [(0,)]
    lock = services.lock_try_acquire(task=t, interval=DAY)
    with transaction.atomic():
        services.lock_release(lock_id=lock.id)
        Task.objects.filter(id=t.id).update(phase="released")
    assert flushed("metastore_task", t.id)
