"""The lock box's hot path in plain SQL, for PostgreSQL and SQLite alike.

A lock decision or a segment allocation runs inside its dataSource's critical
section (the dataSource row, locked until the transaction ends), so every
millisecond spent there is a millisecond every other task of that dataSource
waits. Through the ORM one decision was about ten queries and 4 ms of Python,
mostly query compilation, and each query a round trip to the database: the
lock box managed about 55 decisions a second with 8 clients (bench/locks.py).

Here the same reads and writes are short hand-written statements, and on
PostgreSQL the statements of one step go in a single round trip (psycopg's
pipeline mode) as server-side prepared statements. Each statement still runs
in order with its own snapshot, so the reads that follow the `FOR UPDATE` of
the dataSource row see everything committed before the lock was granted.

Only `metastore.services` calls this module, inside its own transactions; the
rules stay in `metastore.locking` and the services. Rows come back as model
instances built with `Model.from_db`, as the ORM would give them.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from metastore import allocation_rules, locking
from metastore.allocation_rules import NON_ROOT_PARTITION_START
from metastore.intervals import Interval
from metastore.models import (
    ACTIVE_STATUSES,
    DataSource,
    TaskLock,
    TaskStatus,
)
from metastore.timeline import SegmentRef, refs_from_rows

_DATASOURCE_FIELDS = ["id", "name", "created_at", "last_version"]
_LOCK_FIELDS = [
    "id",
    "task_id",
    "group_id",
    "datasource",
    "start",
    "end",
    "granularity",
    "type",
    "version",
    "priority",
    "partition",
    "revoked",
    "revoked_by_id",
    "granted_seq",
    "created_at",
]
_LOCK_COLUMNS = ", ".join(f'"{f}"' for f in _LOCK_FIELDS)
_LOCK_INSERT_COLUMNS = ", ".join(f'"{f}"' for f in _LOCK_FIELDS[1:])


# --- running statements -----------------------------------------------------------


@dataclass(frozen=True)
class Query:
    sql: str
    params: Sequence | Mapping = ()


_COMMIT = "COMMIT"


def flush_after_commit(task_id: str) -> Query:
    """The statement that, sent after an asynchronous COMMIT in the same round
    trip (`_locked(..., async_commit=True)`), returns only once that commit is
    on disk: it runs in a transaction of its own, which commits synchronously
    at the round trip's end, and waits for the WAL up to its commit record to
    be flushed; the asynchronous commit is earlier in the WAL. It must write
    WAL for that (a transaction that writes none does not wait): a row lock
    on the task's own row does, without a new row version, and KEY SHARE
    blocks no update of the task."""
    return Query("SELECT 1 FROM metastore_task WHERE id = %s FOR KEY SHARE", [task_id])


def commits_with_last_write() -> bool:
    """Whether the caller, about to open a transaction, may end it by sending
    COMMIT with its last writes (`run(..., commit=True)`): only on PostgreSQL
    and only for a transaction of its own (not inside another atomic block).
    A critical section then ends on the server with its writes, one round
    trip sooner than Django's commit after them (which then finds nothing to
    commit)."""
    return (
        connection.vendor == "postgresql"
        and not connection.in_atomic_block
        and connection.get_autocommit()
    )


def run(
    *queries: Query, commit: bool = False, then: Query | None = None
) -> list[list[tuple] | int]:
    """Run `queries` in order in the current transaction: the rows of each one
    that returns rows, else its row count.

    On PostgreSQL they go to the server together (one round trip) and are
    prepared once per connection; elsewhere they run one after the other.
    `commit` (PostgreSQL, see `commits_with_last_write`) sends COMMIT after
    them in the same round trip; if one of them fails, the COMMIT is not run
    and the transaction is rolled back as usual. `then` (with `commit`) runs
    after the COMMIT in the same round trip (`flush_after_commit`).
    """
    if connection.vendor != "postgresql":
        out = []
        with connection.cursor() as cursor:
            for query in queries:
                cursor.execute(query.sql, query.params)
                out.append(_result(cursor))
        return out
    import psycopg

    connection.ensure_connection()
    raw = connection.connection
    # A pipeline only pays off for several statements.
    batch = raw.pipeline() if len(queries) > 1 or commit else contextlib.nullcontext()
    cursors = []
    # Errors surface as Django's exception classes, as they would through the ORM.
    with connection.wrap_database_errors, batch:
        for query in queries:
            cursor = psycopg.Cursor(raw)  # server-side binding, so it can be prepared
            cursor.execute(query.sql, query.params)
            cursors.append(cursor)
        if commit:
            psycopg.Cursor(raw).execute(_COMMIT, prepare=False)
            if then is not None:
                psycopg.Cursor(raw).execute(then.sql, then.params)
    return [_result(c) for c in cursors]


def _result(cursor) -> list[tuple] | int:
    return cursor.fetchall() if cursor.description is not None else cursor.rowcount


def _for_update() -> str:
    # SQLite has no row locks: its IMMEDIATE transactions serialize writers.
    return " FOR UPDATE" if connection.features.has_select_for_update else ""


def _db_dt(value: datetime):
    """A datetime as this database's driver wants it in a raw statement."""
    return connection.ops.adapt_datetimefield_value(value)


def _py_dt(value) -> datetime | None:
    """A datetime column's value as an aware datetime (SQLite returns text)."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        value = parse_datetime(value)
    return value.replace(tzinfo=UTC) if timezone.is_naive(value) else value


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


# --- statements -------------------------------------------------------------------


# Advisory-lock key space of the lock box (first of the two int4 keys; the second
# is the dataSource id mod 2^31 - 1). Public: a test gate holds the same lock.
ADVISORY_CLASS = 0x5354


def _locked(
    name: str,
    *queries: Query,
    lock: bool = True,
    generic_plans: bool = False,
    async_commit: bool = False,
) -> tuple[DataSource | None, list]:
    """Take the dataSource's lock, then run `queries`: (its row, their results).

    On PostgreSQL the lock is a transaction-level advisory lock on the
    dataSource's id, not `FOR UPDATE` on its row: a lock grant updates the row
    (its last version), and waiters queued on a row that keeps being updated
    must chase its newest version and are woken out of order, which made the
    slowest 1% of decisions ten times slower than the median. Every statement
    after the lock sees everything committed before it was granted. SQLite's
    IMMEDIATE transactions already serialize writers. `lock=False` runs the same
    reads without the lock, for a caller that only looks. `generic_plans`
    plans the prepared statements that follow once, whatever their values
    (PostgreSQL's plan_cache_mode, for this transaction).

    `async_commit` (PostgreSQL, for a transaction that ends with `run(...,
    commit=True, flush=True)`) commits this transaction without waiting for
    the disk, so the dataSource's lock is let go as soon as COMMIT has made the
    writes visible, and the next decision need not wait for this one's WAL
    flush (5-15 ms on this machine, two thirds of a decision: the lock box ran
    one decision per flush). The caller waits for the flush after that, in
    the same round trip (`flush_after_commit`): no lock is handed out before it is on disk.
    Another decision that saw these writes before they were on disk is later
    in the WAL: once it is on disk, so are they, so a crash never keeps a
    decision and loses one it was made over.
    """
    read = Query(
        "SELECT id, name, created_at, last_version FROM metastore_datasource WHERE name = %s",
        [name],
    )
    advisory = []
    if connection.vendor == "postgresql":
        # The setting goes with the lock, in one statement: it holds for the
        # statements after it in the same round trip.
        settings = "".join(
            f", set_config('{key}', '{value}', true)"
            for key, value, on in (
                ("plan_cache_mode", "force_generic_plan", generic_plans),
                ("synchronous_commit", "off", async_commit),
            )
            if on
        )
        if lock:
            advisory = [
                Query(
                    "SELECT pg_advisory_xact_lock(%s, CAST(MOD(id, 2147483647) AS integer))"
                    f"{settings} FROM metastore_datasource WHERE name = %s",
                    [ADVISORY_CLASS, name],
                )
            ]
        elif settings:
            advisory = [Query(f"SELECT {settings[2:]}")]
    results = run(*advisory, read, *queries)
    return _datasource(results[len(advisory)]), results[len(advisory) + 1 :]


def _lock_task(task_id: str) -> Query:
    return Query(
        "SELECT id, group_id, priority, status, cancel_requested, waiting_since, "
        "waiting_request IS NOT NULL, waiting_on, waiting_request FROM metastore_task "
        "WHERE id = %s" + _for_update(),
        [task_id],
    )


def _last_commit_seq(datasource: str) -> Query:
    return Query(
        "SELECT COALESCE((SELECT seq FROM metastore_commitlogentry WHERE datasource = %s "
        "ORDER BY seq DESC LIMIT 1), 0)",
        [datasource],
    )


def _datasource(rows) -> DataSource | None:
    if not rows:
        return None
    ds_id, name, created_at, last_version = rows[0]
    return DataSource.from_db(
        connection.alias, _DATASOURCE_FIELDS, [ds_id, name, _py_dt(created_at), last_version]
    )


def _lock(row) -> TaskLock:
    values = list(row)
    for i in (4, 5, 14):  # start, end, created_at
        values[i] = _py_dt(values[i])
    values[11] = bool(values[11])
    return TaskLock.from_db(connection.alias, _LOCK_FIELDS, values)


# --- lock decisions ---------------------------------------------------------------


@dataclass(frozen=True)
class TaskState:
    """What a lock decision needs to know of the requesting task."""

    id: str
    group_id: str
    priority: int
    status: str
    cancel_requested: bool
    waiting_since: datetime | None
    has_waiting_request: bool
    waiting_on: list | None = None
    waiting_request: dict | None = None


@dataclass(frozen=True)
class DecisionReads:
    """Everything one lock decision reads, holding the dataSource's lock."""

    datasource: DataSource
    task: TaskState | None
    locks: list[TaskLock]  # overlapping the request, plus the task's revoked locks
    queued: list[tuple[str, str, dict]]  # (task id, group id, lock request) of earlier waiters
    last_commit_seq: int


def decision_reads(
    *, datasource: str, task_id: str, intervals: Sequence[Interval], async_commit: bool = False
) -> DecisionReads | None:
    """Take the dataSource's lock (and the task's row) and read what a decision on
    all of `intervals` needs; None when the dataSource has no row yet (nothing is
    locked then). `async_commit`: see `_locked`."""
    overlap = " OR ".join(['(start < %s AND "end" > %s)'] * len(intervals))
    bounds = [_db_dt(v) for iv in intervals for v in (iv.end, iv.start)]
    ds, (task_rows, lock_rows, queued_rows, seq_rows) = _locked(
        datasource,
        _lock_task(task_id),
        Query(
            f"SELECT {_LOCK_COLUMNS} FROM metastore_tasklock WHERE (datasource = %s "
            f"AND ({overlap})) OR (task_id = %s AND revoked) ORDER BY id",
            [datasource, *bounds, task_id],
        ),
        # Other groups' WAITING tasks queued before this one (all of them if it is not queued).
        Query(
            "SELECT w.id, w.group_id, w.waiting_request FROM metastore_task w "
            "JOIN metastore_task me ON me.id = %s WHERE w.datasource = %s AND w.status = %s "
            "AND w.waiting_request IS NOT NULL AND w.group_id <> me.group_id "
            "AND (me.waiting_since IS NULL OR w.waiting_since < me.waiting_since)",
            [task_id, datasource, TaskStatus.WAITING.value],
        ),
        _last_commit_seq(datasource),
        async_commit=async_commit,
    )
    if ds is None:
        return None
    task = None
    if task_rows:
        r = task_rows[0]
        task = TaskState(
            r[0], r[1], r[2], r[3], bool(r[4]), _py_dt(r[5]), bool(r[6]), _json(r[7]), _json(r[8])
        )
    return DecisionReads(
        datasource=ds,
        task=task,
        locks=[_lock(r) for r in lock_rows],
        queued=[(r[0], r[1], _json(r[2])) for r in queued_rows],
        last_commit_seq=seq_rows[0][0],
    )


def grant_writes(
    *,
    task_id: str,
    revoke: Sequence[int] = (),
    datasource_version: tuple[int, str] | None = None,
    new_locks: Sequence[dict] = (),
    resume_task: str | None = None,
    commit: bool = False,
    notify: str | None = None,
) -> list[TaskLock]:
    """Carry out `task_id`'s granted decision in one round trip: revoke the victims' locks,
    record the dataSource's new last version, insert the locks (`new_locks`: the
    TaskLock fields but id) and clear the task's waiting state; with `commit`,
    the transaction's last writes, returning once they are on disk (see `run`
    and `_locked`); with `notify` (a dataSource),
    wake its waiters (a waiter granted leaves the queue others wait behind)."""
    queries = []
    if notify is not None and connection.vendor == "postgresql":
        queries.append(Query("SELECT pg_notify(%s, %s)", [RELEASE_CHANNEL, notify]))
    if revoke:
        queries.append(
            Query(
                "UPDATE metastore_tasklock SET revoked = %s, revoked_by_id = %s "
                f"WHERE id IN ({', '.join(['%s'] * len(revoke))})",
                [True, task_id, *revoke],
            )
        )
    if datasource_version is not None:
        ds_id, version = datasource_version
        queries.append(
            Query(
                "UPDATE metastore_datasource SET last_version = %s WHERE id = %s", [version, ds_id]
            )
        )
    if resume_task is not None:
        queries.append(
            Query(
                "UPDATE metastore_task SET status = %s, waiting_on = %s, waiting_request = NULL, "
                "waiting_since = NULL WHERE id = %s",
                [TaskStatus.RUNNING.value, "[]", resume_task],
            )
        )
    inserted = []
    for new_lock in new_locks:
        values = [new_lock[f] for f in _LOCK_FIELDS[1:]]
        inserted.append(values)
        queries.append(
            Query(
                f"INSERT INTO metastore_tasklock ({_LOCK_INSERT_COLUMNS}) "
                f"VALUES ({', '.join(['%s'] * len(values))}) RETURNING id",
                [_db_dt(v) if isinstance(v, datetime) else v for v in values],
            )
        )
    then = flush_after_commit(task_id) if commit else None
    results = run(*queries, commit=commit, then=then) if queries or commit else []
    ids = [r[0][0] for r in results[len(results) - len(inserted) :]] if inserted else []
    return [
        TaskLock.from_db(connection.alias, _LOCK_FIELDS, [lock_id, *values])
        for lock_id, values in zip(ids, inserted, strict=True)
    ]


def datasource_for_update(name: str) -> DataSource | None:
    """The dataSource's row, its lock held until the surrounding transaction ends."""
    return _locked(name)[0]


def lock_delete(lock_id: int) -> int:
    """Delete one lock and wake the dataSource's waiters (`wait_for_release`).

    On PostgreSQL, in a transaction of its own, one statement that commits
    without waiting for the disk (as a decision does, `_locked`), and returns
    without waiting for it either: a release lost by a crash is a lock held a
    little longer, never one held twice. Whatever was decided over it (a
    waiter granted, the task's end) is later in the WAL and waits for the
    disk, so the release is on disk before any of it."""
    deleted = Query("DELETE FROM metastore_tasklock WHERE id = %s RETURNING datasource", [lock_id])
    if connection.vendor != "postgresql":
        return run(Query("DELETE FROM metastore_tasklock WHERE id = %s", [lock_id]))[0]
    # Only for a transaction of its own: inside a caller's it would hold for the caller's commit.
    own = ", set_config('synchronous_commit', 'off', true)" if commits_with_last_write() else ""
    rows = run(
        Query(
            f"WITH gone AS ({deleted.sql}) SELECT pg_notify(%s, datasource){own} FROM gone",
            [*deleted.params, RELEASE_CHANNEL],
        )
    )[0]
    return len(rows)


# --- waking waiters ---------------------------------------------------------------

# PostgreSQL channel on which a dataSource's name is sent whenever its locks or its
# queue change in a way that may let a waiting task through: a lock is released,
# a waiter is granted or gives up. NOTIFY is delivered when the sender commits.
RELEASE_CHANNEL = "strata_lock_release"


def notify_release(datasource: str) -> None:
    """Wake the waiters on `datasource` once the current transaction commits."""
    if connection.vendor == "postgresql":
        run(Query("SELECT pg_notify(%s, %s)", [RELEASE_CHANNEL, datasource]))


def listen() -> bool:
    """Subscribe this connection to lock releases (PostgreSQL, outside a
    transaction): True if it now listens. Notifications arriving from then on
    are kept by the driver until read, so a release after the caller's next
    decision is never missed. A waiter listens only while it waits (`unlisten`):
    the driver keeps every notification it has not read."""
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return False  # a LISTEN in a transaction would only start at its commit
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute(f"LISTEN {RELEASE_CHANNEL}")
    connection.connection._strata_listening = True
    return True


def unlisten() -> None:
    """Stop listening (`listen`) and drop the notifications not read."""
    raw = connection.connection
    if raw is None or not getattr(raw, "_strata_listening", False):
        return
    raw._strata_listening = False
    with connection.cursor() as cursor:
        cursor.execute(f"UNLISTEN {RELEASE_CHANNEL}")
    for _ in raw.notifies(timeout=0):
        pass


def wait_for_release(datasource: str, timeout_s: float) -> None:
    """Block until a release on `datasource` is notified or `timeout_s` passes
    (then the caller decides again anyway: the fallback for a missed wake-up).
    Elsewhere than PostgreSQL (SQLite), sleep `timeout_s`: polling."""
    raw = connection.connection if connection.vendor == "postgresql" else None
    if raw is None or not getattr(raw, "_strata_listening", False):
        time.sleep(timeout_s)
        return
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        for note in raw.notifies(timeout=left, stop_after=1):
            if note.payload == datasource:
                return


# --- allocation -------------------------------------------------------------------


def _chunk_params(ds: DataSource | str, interval: Interval) -> dict:
    name = ds if isinstance(ds, str) else ds.name
    params = {
        "name": name,
        "start": _db_dt(interval.start),
        "end": _db_dt(interval.end),
        "top": NON_ROOT_PARTITION_START,
    }
    return params


_DS_ID = "(SELECT id FROM metastore_datasource WHERE name = %(name)s)"
_ACTIVE = ", ".join(f"'{status.value}'" for status in ACTIVE_STATUSES)
# A dataSource's active tasks, one (dataSource, status) probe per status: with
# `status IN (...)` a plan made without statistics read every task the
# dataSource ever had and filtered them.
_ACTIVE_TASKS = (
    "("
    + " UNION ALL ".join(
        f"SELECT id FROM metastore_task WHERE datasource = %(name)s AND status = '{status.value}'"
        for status in ACTIVE_STATUSES
    )
    + ")"
)
_OVERLAPS = 'start < %(end)s AND "end" > %(start)s'


def _chunk_partitions_sql(version_sql: str) -> str:
    """(core partitions, highest used root partition, highest allocated root
    partition) of the chunk at the version `version_sql` evaluates to."""
    chunk = f'start = %(start)s AND "end" = %(end)s AND version = {version_sql}'
    return (
        f"(SELECT MAX(core_partitions) FROM metastore_segment "
        f"WHERE datasource_id = {_DS_ID} AND {chunk}), "
        f"(SELECT MAX(partition) FROM metastore_segment "
        f"WHERE datasource_id = {_DS_ID} AND {chunk} AND partition < %(top)s), "
        f"(SELECT MAX(partition) FROM metastore_pendingsegment "
        f"WHERE datasource = %(name)s AND {chunk} AND partition < %(top)s)"
    )


def chunk_partitions(ds: DataSource, interval: Interval, version: str) -> tuple[int, int]:
    """(core partitions, next free root partition number) of one chunk."""
    params = {**_chunk_params(ds, interval), "v": version}
    core, used_top, pending_top = run(Query("SELECT " + _chunk_partitions_sql("%(v)s"), params))[0][
        0
    ]
    top = max((h for h in (used_top, pending_top) if h is not None), default=None)
    core = core or 0
    return core, allocation_rules.next_partition(core, top)


# What an append needs to know of the chunks overlapping its rows (SPEC §5): the
# used segments (for the timeline's visible chunks), and per chunk its core set,
# its highest root partition ever published or allocated, and whether an append
# still running was given ids there.
#
# These run inside the dataSource's critical section for every allocation, so
# they must not grow with the dataSource's history. On PostgreSQL:
# - `start < :end AND "end" > :start` bounds a btree on (start, end) on one
#   side only (it scanned every earlier chunk); the other side is bounded by
#   the longest chunk the table holds for the dataSource (`start > :start -
#   longest`, an index probe on (dataSource, "end" - start), exact in the
#   statement's snapshot, so no overlapping chunk is missed);
# - the allocations of a chunk are not aggregated row by row (a busy chunk
#   holds thousands): its distinct chunks are enumerated by skipping through
#   the identity index (one probe per chunk), its highest root partition is a
#   backward probe, and "an append still running was given ids here" skips
#   through each active task's append allocations (one probe per active task
#   and chunk it wrote in the interval);
# - the plans must be right without statistics (see `_SEGMENT_AFTER`):
#   tests/test_lockbox_plans.py counts what these reads read, young and old.
# SQLite (development and tests) runs the plain forms.
_APPEND_SEGMENTS = (
    'SELECT id, start, "end", version, partition, minor_version, root_partitions, '
    "atomic_update_group, core_partitions, tombstone FROM metastore_segment "
    f"WHERE datasource_id = {_DS_ID} AND used AND {_OVERLAPS}"
)
_SEGMENT_CHUNKS = (
    'SELECT start, "end", version, MAX(core_partitions), '
    "MAX(CASE WHEN partition < %(top)s THEN partition END), 0 FROM metastore_segment "
    f'WHERE datasource_id = {_DS_ID} AND {_OVERLAPS} GROUP BY start, "end", version'
)
_APPEND_CHUNKS = (
    f"{_SEGMENT_CHUNKS} "
    'UNION ALL SELECT p.start, p."end", p.version, 0, '
    "MAX(CASE WHEN p.partition < %(top)s THEN p.partition END), "
    f"MAX(CASE WHEN p.append AND t.status IN ({_ACTIVE}) THEN 1 ELSE 0 END) "
    "FROM metastore_pendingsegment p LEFT JOIN metastore_task t ON p.task_id = t.id "
    'WHERE p.datasource = %(name)s AND p.start < %(end)s AND p."end" > %(start)s '
    'GROUP BY p.start, p."end", p.version'
)
# The longest chunk and a chunk's highest partition are written as ORDER BY ...
# DESC LIMIT 1, not MAX(): both forms can use the index, but without planner
# statistics (a table that has not been analyzed yet, as every table is on a
# server running without autovacuum) MAX() was planned as an aggregate over
# every row of the dataSource, and the plan, prepared once, stayed so as the
# table grew. Only an index in that order serves ORDER BY ... LIMIT 1 without
# a sort, so it is chosen whatever the statistics say.
_SEGMENT_AFTER = (
    'start > CAST(%(start)s AS timestamp with time zone) - (SELECT q."end" - q.start '
    f"FROM metastore_segment q WHERE q.datasource_id = {_DS_ID} "
    'ORDER BY q."end" - q.start DESC LIMIT 1)'
)
_PENDING_AFTER = (
    'p.start > CAST(%(start)s AS timestamp with time zone) - (SELECT q."end" - q.start '
    "FROM metastore_pendingsegment q WHERE q.datasource = %(name)s "
    'ORDER BY q."end" - q.start DESC LIMIT 1)'
)
_PENDING_CHUNK = (
    'p.datasource = %(name)s AND p.start = c.start AND p."end" = c."end" AND p.version = c.version'
)
# In the identity index's order: without statistics every index on the
# dataSource looks as cheap as another, and only this one needs no sort.
_APPEND_SEGMENTS_PG = (
    f'{_APPEND_SEGMENTS} AND {_SEGMENT_AFTER} ORDER BY start, "end", version, partition'
)
_APPEND_CHUNKS_PG = (
    "WITH RECURSIVE chunk AS ("
    '(SELECT p.start, p."end", p.version FROM metastore_pendingsegment p '
    f"WHERE p.datasource = %(name)s AND p.start < %(end)s AND {_PENDING_AFTER} "
    'ORDER BY p.start, p."end", p.version LIMIT 1) '
    'UNION ALL (SELECT n.start, n."end", n.version FROM chunk c CROSS JOIN LATERAL ('
    'SELECT p.start, p."end", p.version FROM metastore_pendingsegment p '
    "WHERE p.datasource = %(name)s AND p.start < %(end)s "
    'AND (p.start, p."end", p.version) > (c.start, c."end", c.version) '
    'ORDER BY p.start, p."end", p.version LIMIT 1) n)), '
    # The chunks appends still running were given, skipping through each active
    # task's append allocations chunk by chunk (one probe per active task and
    # chunk it wrote in the interval, however many ids it holds there).
    f'running AS ((SELECT t.id, f.start, f."end", f.version FROM {_ACTIVE_TASKS} t '
    'CROSS JOIN LATERAL (SELECT p.start, p."end", p.version FROM metastore_pendingsegment p '
    "WHERE p.task_id = t.id AND p.append AND p.datasource = %(name)s "
    f"AND p.start < %(end)s AND {_PENDING_AFTER} "
    'ORDER BY p.start, p."end", p.version LIMIT 1) f) '
    'UNION ALL (SELECT r.id, n.start, n."end", n.version FROM running r CROSS JOIN LATERAL ('
    'SELECT p.start, p."end", p.version FROM metastore_pendingsegment p '
    "WHERE p.task_id = r.id AND p.append AND p.datasource = %(name)s AND p.start < %(end)s "
    'AND (p.start, p."end", p.version) > (r.start, r."end", r.version) '
    'ORDER BY p.start, p."end", p.version LIMIT 1) n)) '
    + _SEGMENT_CHUNKS.replace(" GROUP BY", f" AND {_SEGMENT_AFTER} GROUP BY")
    + ' UNION ALL SELECT c.start, c."end", c.version, 0, '
    "(SELECT p.partition FROM metastore_pendingsegment p "
    f"WHERE {_PENDING_CHUNK} AND p.partition < %(top)s ORDER BY p.partition DESC LIMIT 1), "
    "CASE WHEN EXISTS (SELECT 1 FROM running r WHERE r.start = c.start "
    'AND r."end" = c."end" AND r.version = c.version) THEN 1 ELSE 0 END '
    'FROM chunk c WHERE c."end" > %(start)s'
)
_RUNNING_LOCK_VERSIONS = (
    "SELECT DISTINCT version FROM metastore_tasklock WHERE datasource = %(name)s "
    f"AND granularity = %(time_chunk)s AND type <> %(append)s AND NOT revoked AND {_OVERLAPS}"
)


def _append_queries(params: dict) -> list[Query]:
    """The three reads of `AppendFacts` for one interval."""
    if connection.vendor == "postgresql":
        segments, chunks = _APPEND_SEGMENTS_PG, _APPEND_CHUNKS_PG
    else:
        segments, chunks = _APPEND_SEGMENTS, _APPEND_CHUNKS
    return [
        Query(segments, params),
        Query(chunks, params),
        Query(
            _RUNNING_LOCK_VERSIONS,
            {**params, "time_chunk": locking.TIME_CHUNK, "append": locking.APPEND},
        ),
    ]


@dataclass(frozen=True)
class AppendFacts:
    """What an append over one interval reads of the chunks overlapping it."""

    segments: list[SegmentRef]  # used segments overlapping the interval
    chunks: list[allocation_rules.ChunkFacts]
    running_lock_versions: list[str]


def _append_facts(segment_rows, chunk_rows, lock_rows) -> AppendFacts:
    refs = refs_from_rows(
        (r[0], _py_dt(r[1]), _py_dt(r[2]), *r[3:9], bool(r[9])) for r in segment_rows
    )
    merged: dict[tuple, list] = {}
    for start, end, version, core, top, running in chunk_rows:
        key = (_py_dt(start), _py_dt(end), version)
        facts = merged.setdefault(key, [0, None, False])
        facts[0] = max(facts[0], core or 0)
        if top is not None:
            facts[1] = top if facts[1] is None else max(facts[1], top)
        facts[2] = facts[2] or bool(running)
    chunks = [
        allocation_rules.ChunkFacts(Interval(start, end), version, core, top, running)
        for (start, end, version), (core, top, running) in merged.items()
    ]
    return AppendFacts(refs, chunks, [r[0] for r in lock_rows])


@dataclass(frozen=True)
class ChunkReads:
    """What one allocation request reads of its chunk."""

    existing: list[tuple[Interval, str, int]]  # ids already handed to this sequence
    append: AppendFacts | None


@dataclass(frozen=True)
class AllocationReads:
    """Everything a batch of allocations reads, holding the dataSource's lock."""

    datasource: DataSource
    task_exists: bool
    task_revoked: bool
    task_status: str | None
    task_cancel_requested: bool
    locks: list[tuple[Interval, str, str]]  # (interval, version, type) of its time-chunk locks
    chunks: list[ChunkReads]  # one per request, in order


def allocation_reads(
    *,
    datasource: str,
    task_id: str,
    requests: Sequence[tuple[Interval, str]],
    append: bool,
    lock: bool = True,
) -> AllocationReads | None:
    """Take the dataSource's lock (and the task's row) and read what allocating for
    each (interval, sequence name) needs, in one round trip; None when the
    dataSource has no row yet. `lock=False` only looks (no lock taken)."""
    queries = _task_queries(task_id) + [_given_query(task_id, requests)]
    # The chunks' facts, read once per distinct interval: every request for the
    # same rows reads the same (nothing is written before they are all read).
    intervals = list(dict.fromkeys(interval for interval, _ in requests)) if append else []
    for interval in intervals:
        queries += _append_queries(_chunk_params(datasource, interval))
    # The append reads are prepared statements whose plans do not depend on
    # their values (index probes and bounded ranges); planning them afresh each
    # time cost more than running them (0.5 ms of a 0.7 ms read).
    ds, results = _locked(datasource, *queries, lock=lock, generic_plans=append)
    if ds is None:
        return None
    task_rows, lock_rows, given_rows = results[0], results[1], results[2]
    facts = {
        interval: _append_facts(*results[3 + 3 * i : 6 + 3 * i])
        for i, interval in enumerate(intervals)
    }
    return AllocationReads(
        datasource=ds,
        task_exists=bool(task_rows),
        task_revoked=bool(task_rows and task_rows[0][0]),
        task_status=task_rows[0][1] if task_rows else None,
        task_cancel_requested=bool(task_rows and task_rows[0][2]),
        locks=[(Interval(_py_dt(a), _py_dt(b)), v, t) for a, b, v, t in lock_rows],
        chunks=_chunk_reads(requests, given_rows, facts),
    )


def _task_queries(task_id: str) -> list[Query]:
    """The task's row (locked), whether a lock of it was revoked, and its time-chunk locks."""
    return [
        Query(
            "SELECT EXISTS (SELECT 1 FROM metastore_tasklock WHERE task_id = %s AND revoked), "
            "status, cancel_requested FROM metastore_task WHERE id = %s" + _for_update(),
            [task_id, task_id],
        ),
        Query(
            'SELECT start, "end", version, type FROM metastore_tasklock WHERE task_id = %s '
            "AND granularity = %s AND NOT revoked ORDER BY created_at, id",
            [task_id, locking.TIME_CHUNK],
        ),
    ]


def _given_query(task_id: str, requests: Sequence[tuple[Interval, str]]) -> Query:
    """What each sequence already got for its rows (an append's chunk may be
    wider), for all requests at once.

    A row holding a request's rows starts no later and ends no earlier than it.
    No dataSource term: a task has one, and with it the planner could take an
    index on the dataSource and read every allocation it ever had."""
    names = sorted({name for _, name in requests})
    if len(names) == 1:
        by_name, name_params = "sequence_name = %s", names
    elif connection.vendor == "postgresql":
        by_name, name_params = "sequence_name = ANY(%s)", [names]
    else:
        by_name, name_params = f"sequence_name IN ({', '.join(['%s'] * len(names))})", names
    return Query(
        'SELECT sequence_name, start, "end", version, partition FROM '
        f"metastore_pendingsegment WHERE task_id = %s AND {by_name} "
        'AND start <= %s AND "end" >= %s ORDER BY partition',
        [
            task_id,
            *name_params,
            _db_dt(max(interval.start for interval, _ in requests)),
            _db_dt(min(interval.end for interval, _ in requests)),
        ],
    )


def _chunk_reads(
    requests: Sequence[tuple[Interval, str]], given_rows, facts: dict[Interval, AppendFacts]
) -> list[ChunkReads]:
    """One `ChunkReads` per request: the ids its sequence already holds for its
    rows, and the facts of its interval (appends)."""
    given = [(name, Interval(_py_dt(a), _py_dt(b)), v, p) for name, a, b, v, p in given_rows]
    chunks = []
    for interval, sequence_name in requests:
        existing = [
            (iv, v, p)
            for name, iv, v, p in given
            if name == sequence_name and iv.contains(interval)
        ]
        chunks.append(ChunkReads(existing=existing, append=facts.get(interval)))
    return chunks


def pending_insert(
    *,
    task_id: str,
    datasource: str,
    allocations: Iterable[tuple[Interval, str, Iterable[int], str]],
    append: bool,
    commit: bool = False,
) -> None:
    """Record allocated segment ids, given as (interval, version, partitions,
    sequence name), in one round trip; with `commit`, the transaction's last
    (see `run`)."""
    now = _db_dt(timezone.now())
    rows = [
        [
            datasource,
            _db_dt(interval.start),
            _db_dt(interval.end),
            version,
            p,
            task_id,
            sequence_name,
            append,
            now,
        ]
        for interval, version, partitions, sequence_name in allocations
        for p in partitions
    ]
    queries = []
    for i in range(0, len(rows), 500):  # stay far below SQLite's bound-parameter limit
        chunk = rows[i : i + 500]
        placeholders = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
        queries.append(
            Query(
                'INSERT INTO metastore_pendingsegment (datasource, start, "end", version, '
                f"partition, task_id, sequence_name, append, created_at) VALUES {placeholders}",
                [v for row in chunk for v in row],
            )
        )
    if queries or commit:
        run(*queries, commit=commit)


# --- pending segments of ended tasks --------------------------------------------------


def pending_prune(task_id: str, final_statuses: Sequence[str]) -> int:
    """Delete the published allocations of `task_id`, and of tasks that ended, in
    the chunks `task_id` allocated in, unless one is its chunk's highest root (or
    non-root) partition number (`services.pending_segments_prune`). One
    statement; each chunk is reached through the identity indexes of pending
    segments and segments, never by scanning either table."""
    statuses = ", ".join(["%s"] * len(final_statuses))
    same = 'q.datasource = p.datasource AND q.start = p.start AND q."end" = p."end" AND q.version = p.version'
    sql = (
        "DELETE FROM metastore_pendingsegment WHERE id IN ("
        'SELECT p.id FROM (SELECT DISTINCT datasource, start, "end", version '
        "FROM metastore_pendingsegment WHERE task_id = %s) c "
        "JOIN metastore_pendingsegment p ON p.datasource = c.datasource AND p.start = c.start "
        'AND p."end" = c."end" AND p.version = c.version '
        "LEFT JOIN metastore_task t ON t.id = p.task_id "
        f"WHERE (p.task_id = %s OR p.task_id IS NULL OR t.status IN ({statuses})) "
        "AND EXISTS (SELECT 1 FROM metastore_segment s JOIN metastore_datasource d "
        "ON d.id = s.datasource_id WHERE d.name = p.datasource AND s.start = p.start "
        'AND s."end" = p."end" AND s.version = p.version AND s.partition = p.partition) '
        f"AND EXISTS (SELECT 1 FROM metastore_pendingsegment q WHERE {same} "
        "AND q.partition > p.partition AND (q.partition >= %s) = (p.partition >= %s)))"
    )
    top = NON_ROOT_PARTITION_START  # (bound, as every constant of the core)
    return run(Query(sql, [task_id, task_id, *final_statuses, top, top]))[0]
