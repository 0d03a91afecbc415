"""Append allocation's hand-written SQL (metastore/lockbox_sql.py) against the pure
rules of metastore/allocation_rules.py: for random segment, allocation and lock
tables written straight through the ORM, where `segments_allocate` puts an append
must be where `allocation_rules.append_target` puts it when handed the timeline
(`selectors.timeline_for`) and the chunks' facts, read independently."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from django.db.models import Max

from metastore import allocation_rules, locking, selectors, services
from metastore.allocation_rules import NON_ROOT_PARTITION_START
from metastore.intervals import Interval
from metastore.models import (
    DataSource,
    PendingSegment,
    Segment,
    Task,
    TaskLock,
    TaskStatus,
)

pytestmark = pytest.mark.django_db

MONTH = Interval.parse("2024-01-01/2024-02-01")
VERSIONS = [
    "1970-01-01T00:00:00.000Z",
    "1970-01-01T00:00:00.001Z",
    "2024-05-01T00:00:00.000Z",
    "2024-06-01T00:00:00.000Z",
]
CASES = 120


def chunk(rng: random.Random) -> Interval:
    """An HOUR, DAY or the MONTH, all inside the first three days or the month."""
    kind = rng.choice(["HOUR", "DAY", "DAY", "MONTH"])
    if kind == "MONTH":
        return MONTH
    if kind == "DAY":
        start = MONTH.start + timedelta(days=rng.randrange(3))
        return Interval(start, start + timedelta(days=1))
    start = MONTH.start + timedelta(hours=rng.randrange(72))
    return Interval(start, start + timedelta(hours=1))


def new_task(ds: str, status: str) -> Task:
    task = services.task_create(spec={}, task_type="index_parallel", datasource=ds, enqueue=False)
    Task.objects.filter(id=task.id).update(status=status)
    return task


def random_tables(rng: random.Random, ds: str) -> None:
    source = DataSource.objects.get_or_create(name=ds)[0]
    for _ in range(rng.randint(0, 7)):
        interval, version = chunk(rng), rng.choice(VERSIONS)
        core = rng.randint(0, 2)
        tombstone = rng.random() < 0.1
        for p in range(rng.randint(1, 3)):
            Segment.objects.get_or_create(
                datasource=source,
                start=interval.start,
                end=interval.end,
                version=version,
                partition=p,
                defaults={
                    "id": Segment.make_id(ds, interval, version, p),
                    "root_partitions": [p],
                    "atomic_update_group": [p],
                    "core_partitions": 0 if tombstone else core,
                    "tombstone": tombstone,
                    "used": rng.random() < 0.75,
                },
            )
    for _ in range(rng.randint(0, 4)):
        interval, version = chunk(rng), rng.choice(VERSIONS)
        owner = new_task(
            ds, rng.choice([TaskStatus.RUNNING, TaskStatus.FAILED, TaskStatus.SUCCESS])
        )
        PendingSegment.objects.get_or_create(
            datasource=ds,
            start=interval.start,
            end=interval.end,
            version=version,
            partition=rng.randint(0, 4),
            defaults={"task": owner, "append": rng.random() < 0.7},
        )
    for _ in range(rng.randint(0, 2)):
        holder = new_task(ds, TaskStatus.RUNNING)
        interval = chunk(rng)
        TaskLock.objects.create(
            task=holder,
            group_id=holder.group_id,
            datasource=ds,
            start=interval.start,
            end=interval.end,
            type=rng.choice([locking.REPLACE, locking.EXCLUSIVE]),
            version=rng.choice(["2025-01-01T00:00:00.000Z", "1970-01-01T00:00:00.002Z"]),
            priority=0,
            granted_seq=0,
        )


def rule_inputs(ds: str, interval: Interval) -> dict:
    """The pure rules' inputs over `interval`, read through the ORM and the selectors' timeline."""
    visible = [
        (piece, ref.interval, ref.version)
        for piece, ref in selectors.timeline_for(datasource=ds).lookup(interval)
    ]
    overlapping = dict(start__lt=interval.end, end__gt=interval.start)
    facts: dict[tuple, list] = {}
    for s in Segment.objects.filter(datasource__name=ds, **overlapping):
        f = facts.setdefault((s.start, s.end, s.version), [0, None, False])
        f[0] = max(f[0], s.core_partitions)
        if s.partition < NON_ROOT_PARTITION_START:
            f[1] = max(f[1] if f[1] is not None else -1, s.partition)
    for p in PendingSegment.objects.filter(datasource=ds, **overlapping).select_related("task"):
        f = facts.setdefault((p.start, p.end, p.version), [0, None, False])
        f[1] = max(f[1] if f[1] is not None else -1, p.partition)
        f[2] = f[2] or bool(p.append and p.task and p.task.is_active)
    chunks = [
        allocation_rules.ChunkFacts(Interval(a, b), v, core, top, running)
        for (a, b, v), (core, top, running) in facts.items()
    ]
    lock_versions = TaskLock.objects.filter(
        datasource=ds, granularity=locking.TIME_CHUNK, revoked=False, **overlapping
    ).exclude(type=locking.APPEND)
    return {
        "interval": interval,
        "visible": visible,
        "chunks": chunks,
        "running_lock_versions": list(lock_versions.values_list("version", flat=True)),
    }


def expected_target(ds: str, interval: Interval) -> allocation_rules.AppendTarget | str:
    """The pure rule's answer for one piece."""
    try:
        return allocation_rules.append_target(**rule_inputs(ds, interval))
    except allocation_rules.AllocationRefused as exc:
        return str(exc)


def test_append_allocation_sql_agrees_with_the_pure_rule_on_random_tables():
    rng = random.Random(20241)
    outcomes = set()
    for case in range(CASES):
        ds = f"ref{case}"
        random_tables(rng, ds)
        interval = chunk(rng)
        want = expected_target(ds, interval)
        appender = new_task(ds, TaskStatus.RUNNING)
        # An APPEND lock over the whole month covers any chunk the rows go into.
        TaskLock.objects.create(
            task=appender,
            group_id=appender.group_id,
            datasource=ds,
            start=MONTH.start,
            end=MONTH.end,
            type=locking.APPEND,
            version="2030-01-01T00:00:00.000Z",
            priority=0,
            granted_seq=0,
        )
        try:
            got = services.segments_allocate(task=appender, interval=interval, count=2, append=True)
        except services.ServiceError as exc:
            assert isinstance(want, str), (case, interval, want, str(exc))
            assert str(exc) == want
            outcomes.add("refused")
            continue
        assert not isinstance(want, str), (case, interval, want, got)
        first = want.next_partition
        assert (got.interval, got.version, got.partitions, got.core_partitions) == (
            want.interval,
            want.version,
            (first, first + 1),
            want.core,
        ), case
        outcomes.add("fresh" if got.version not in VERSIONS else "existing")
        if got.interval != interval:
            outcomes.add("wider chunk")
    # The random tables reach every kind of answer.
    assert outcomes >= {"refused", "existing", "wider chunk"}, outcomes


def test_free_partition_sql_agrees_with_the_pure_rule():
    rng = random.Random(7)
    from metastore import lockbox_sql

    for case in range(40):
        ds = f"free{case}"
        random_tables(rng, ds)
        source = DataSource.objects.get(name=ds)
        interval, version = chunk(rng), rng.choice(VERSIONS)
        where = dict(start=interval.start, end=interval.end, version=version)
        segs = Segment.objects.filter(datasource=source, **where)
        tops = [
            segs.filter(partition__lt=NON_ROOT_PARTITION_START).aggregate(m=Max("partition"))["m"],
            PendingSegment.objects.filter(datasource=ds, **where).aggregate(m=Max("partition"))[
                "m"
            ],
        ]
        core = segs.aggregate(m=Max("core_partitions"))["m"] or 0
        top = max((t for t in tops if t is not None), default=None)
        assert lockbox_sql.chunk_partitions(source, interval, version) == (
            core,
            allocation_rules.next_partition(core, top),
        )


def test_append_layout_sql_agrees_with_the_pure_rule_on_random_tables():
    """The runner splits an append's rows by `services.append_layout` (the SQL's
    facts) before it locks and allocates: piece by piece it must be the pure
    rule's layout, including a gap appended at a running append's finer
    granularity (an HOUR append running inside the DAY)."""
    rng = random.Random(5150)
    outcomes = set()
    for case in range(CASES):
        ds = f"layout{case}"
        random_tables(rng, ds)
        interval = rng.choice([MONTH, chunk(rng), chunk(rng)])
        try:
            want = [
                (piece, t.interval)
                for piece, t in allocation_rules.append_layout(**rule_inputs(ds, interval))
            ]
        except allocation_rules.AllocationRefused:
            want = [(interval, interval)]  # append_layout leaves the refusal to allocation
            outcomes.add("refused")
        got = services.append_layout(datasource=ds, intervals=[interval])
        assert got == want, case
        if len(want) > 1:
            outcomes.add("split")
        # A gap cut at a running append's length: adjacent pieces where nothing is
        # visible, each in a chunk of its own (a gap is otherwise one piece).
        shown = {chunk for _, chunk, _ in rule_inputs(ds, interval)["visible"]}
        own = {piece for piece, target in want if piece == target and piece not in shown}
        if any(p.end == q.start for p in own for q in own):
            outcomes.add("finer running granularity")
    assert outcomes >= {"split", "finer running granularity"}, outcomes
