"""The publish service's upgrades and carry-overs against the pure rules of
metastore/upgrade_rules.py, on random histories written straight through the ORM
(segments with real Parquet files, copies sharing them, commits before and after
the replace's lock was granted): what `segments_publish` copies where, and the
rows and bytes each copy claims, must be what `upgrade_rules` says when handed
facts read independently (the commit log, the timeline, the files by pyarrow).
These are the rules whose bugs lose rows, as tests/test_allocation_reference.py
checks allocation."""

from __future__ import annotations

import itertools
import os
import random
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from metastore import locking, selectors, services, upgrade_rules
from metastore.intervals import Interval
from metastore.models import CommitKind, CommitLogEntry, DataSource, Segment, Task, TaskStatus

pytestmark = pytest.mark.django_db

DAY = Interval.parse("2024-01-01/2024-01-02")
OLD_VERSIONS = ["1970-01-01T00:00:00.000Z", "2024-02-01T00:00:00.000Z", "2024-03-01T00:00:00.000Z"]
CASES = 40
PARTITIONS = itertools.count(1)  # root partition numbers no two test segments share


def hour(h: int, n: int = 1) -> Interval:
    return Interval(DAY.start + timedelta(hours=h), DAY.start + timedelta(hours=h + n))


def random_chunk(rng: random.Random) -> Interval:
    kind = rng.choice(["HOUR", "SIX_HOUR", "DAY"])
    if kind == "DAY":
        return DAY
    if kind == "SIX_HOUR":
        return hour(6 * rng.randrange(4), 6)
    return hour(rng.randrange(24))


def write_file(rng: random.Random, folder, name: str, interval: Interval) -> tuple[str, int, int]:
    """A Parquet file of 1-12 rows at random instants inside `interval`."""
    span = int((interval.end - interval.start).total_seconds())
    times = sorted(
        interval.start + timedelta(seconds=rng.randrange(span)) for _ in range(rng.randint(1, 12))
    )
    path = folder / f"{name}.parquet"
    pq.write_table(pa.table({"__time": pa.array(times, pa.timestamp("ms", tz="UTC"))}), path)
    return str(path), len(times), os.path.getsize(path)


def new_task(ds: str, task_type: str = "index_parallel") -> Task:
    task = services.task_create(spec={}, task_type=task_type, datasource=ds, enqueue=False)
    Task.objects.filter(id=task.id).update(status=TaskStatus.RUNNING)
    task.refresh_from_db()
    return task


def commit_segments(rng, folder, ds: str, count: int) -> None:
    """`count` appended segments, each committed by a task of its own; some are
    copies sharing an earlier one's file at a finer interval inside it."""
    source = DataSource.objects.get_or_create(name=ds)[0]
    made: list[Segment] = []
    for _ in range(count):
        writer = new_task(ds)
        version = rng.choice(OLD_VERSIONS)
        originals = [s for s in made if not s.upgraded_from]
        if originals and rng.random() < 0.3:
            base = rng.choice(originals)
            inside = [iv for iv in (hour(h) for h in range(24)) if base.interval.contains(iv)]
            interval, location, upgraded_from = rng.choice(inside), base.location, base.id
            rows = size = 0  # figures of a copy do not matter to its own copy: they are recounted
            version = max(version, base.version)
        else:
            interval = random_chunk(rng)
            location, rows, size = write_file(rng, folder, writer.id, interval)
            upgraded_from = ""
        partition = next(PARTITIONS)
        seg = Segment.objects.create(
            id=Segment.make_id(ds, interval, version, partition),
            datasource=source,
            start=interval.start,
            end=interval.end,
            version=version,
            partition=partition,
            root_partitions=[partition],
            atomic_update_group=[partition],
            core_partitions=0,
            location=location,
            num_rows=rows,
            size_bytes=size,
            upgraded_from=upgraded_from,
            created_by=writer,
            used=rng.random() < 0.9,
        )
        CommitLogEntry.objects.create(
            datasource=ds, task=writer, kind=CommitKind.PUBLISH, added=[seg.id]
        )
        made.append(seg)


def file_facts(location: str, intervals) -> upgrade_rules.FileFacts:
    """The file's facts read here, by pyarrow, independently of the service."""
    table = pq.read_table(location).to_pandas()
    times = list(table["__time"])
    rows_in = {iv: sum(iv.start <= t < iv.end for t in times) for iv in intervals}
    return upgrade_rules.FileFacts(len(times), os.path.getsize(location), rows_in)


def expected_rows(copies: list[upgrade_rules.Copy], locations: dict[str, str]) -> set[tuple]:
    out = set()
    for copy in copies:
        location = locations[copy.source.id]
        file = file_facts(location, [copy.interval])
        if not upgrade_rules.shows_rows(copy, file):
            continue
        rows, size = upgrade_rules.copy_figures(copy, file)
        out.add((copy.source.original, copy.interval, copy.version, rows, size))
    return out


def made_copies(task: Task) -> set[tuple]:
    return {
        (s.upgraded_from, s.interval, s.version, s.num_rows, s.size_bytes)
        for s in Segment.objects.filter(created_by=task).exclude(upgraded_from="")
    }


def source_of(seg: Segment, seq: int = 0) -> upgrade_rules.Source:
    return upgrade_rules.Source(
        seg.id,
        seg.interval,
        seg.version,
        seg.upgraded_from or seg.id,
        seq,
        seg.num_rows,
        seg.size_bytes,
    )


def test_replace_publish_upgrades_what_the_pure_rule_says(tmp_path):
    rng = random.Random(2211)
    outcomes = set()
    for case in range(CASES):
        ds = f"up{case}"
        commit_segments(rng, tmp_path, ds, rng.randint(0, 3))
        replace = new_task(ds, "compact")
        lock = services.lock_acquire(task=replace, interval=DAY, lock_type=locking.REPLACE)
        commit_segments(rng, tmp_path, ds, rng.randint(1, 5))  # appended while it runs
        chunks = rng.choice(
            [[DAY], [hour(6 * i, 6) for i in range(4)], [hour(h) for h in rng.sample(range(24), 5)]]
        )
        allocations = services.segments_allocate_many(
            task=replace, requests=[services.AllocationRequest(c, 1) for c in chunks], append=False
        )
        new = [
            services.NewSegment(
                interval=a.interval, version=a.version, partition=0, core_partitions=1
            )
            for a in allocations
        ]
        # The rule's facts: what other tasks' publishes added after the grant, still used.
        after = {
            seg_id: entry.seq
            for entry in CommitLogEntry.objects.filter(datasource=ds, seq__gt=lock.granted_seq)
            for seg_id in entry.added
        }
        committed = Segment.objects.filter(id__in=list(after), used=True, tombstone=False)
        want = upgrade_rules.replace_upgrades(
            locks=[upgrade_rules.ReplaceLock(lock.interval, lock.version, lock.granted_seq)],
            committed=[source_of(s, after[s.id]) for s in committed],
            published=[upgrade_rules.Chunk(a.interval, a.version) for a in allocations],
        )
        locations = {s.id: s.location for s in committed}
        services.segments_publish(task=replace, segments=new)
        assert made_copies(replace) == expected_rows(want, locations), case
        assert_partitions_fresh(ds)
        outcomes |= {"cross granularity" for c in want if c.interval != c.source.interval}
        outcomes |= {"copy of a copy" for c in want if c.source.is_copy}
        outcomes |= {"none"} if not want else {"some"}
    assert outcomes >= {"cross granularity", "copy of a copy", "none", "some"}, outcomes


def test_append_publish_carries_over_what_the_pure_rule_says(tmp_path):
    rng = random.Random(2212)
    outcomes = set()
    for case in range(CASES):
        ds = f"carry{case}"
        commit_segments(rng, tmp_path, ds, rng.randint(0, 2))
        append = new_task(ds)
        services.lock_acquire(task=append, interval=DAY, lock_type=locking.APPEND)
        interval = rng.choice([DAY, hour(6 * rng.randrange(4), 6)])
        try:
            alloc = services.segments_allocate(task=append, interval=interval, count=1, append=True)
        except services.ServiceError:  # rows that would go into several chunks: split first
            outcomes.add("refused")
            continue
        # Replaces commit over it while it runs: chunks at newer versions.
        commit_replaces(rng, ds)
        location, rows, size = write_file(rng, tmp_path, append.id, alloc.interval)
        seg_id = Segment.make_id(ds, alloc.interval, alloc.version, alloc.partitions[0])
        visible = [
            upgrade_rules.Chunk(ref.interval, ref.version)
            for _, ref in selectors.timeline_for(datasource=ds).lookup(alloc.interval)
        ]
        source = upgrade_rules.Source(seg_id, alloc.interval, alloc.version, seg_id, 0, rows, size)
        want = upgrade_rules.append_carry_overs(published=[source], visible={seg_id: visible})
        services.segments_publish(
            task=append,
            segments=[
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=alloc.partitions[0],
                    core_partitions=alloc.core_partitions,
                    location=location,
                    num_rows=rows,
                    size_bytes=size,
                )
            ],
        )
        assert made_copies(append) == expected_rows(want, {seg_id: location}), case
        assert_partitions_fresh(ds)
        outcomes |= {"finer chunks" for c in want if not c.interval.contains(c.source.interval)}
        outcomes |= {"none"} if not want else {"some"}
    assert outcomes >= {"finer chunks", "none", "some"}, outcomes


def commit_replaces(rng, ds: str) -> None:
    """0-2 replaces, each publishing complete chunks (HOUR, SIX_HOUR or DAY) at a new version."""
    source = DataSource.objects.get(name=ds)
    for n in range(rng.randint(0, 2)):
        version = f"2025-0{n + 1}-01T00:00:00.000Z"
        writer = new_task(ds, "compact")
        ids = []
        for interval in {random_chunk(rng) for _ in range(rng.randint(1, 3))}:
            seg = Segment.objects.create(
                id=Segment.make_id(ds, interval, version, 0),
                datasource=source,
                start=interval.start,
                end=interval.end,
                version=version,
                partition=0,
                root_partitions=[0],
                atomic_update_group=[0],
                core_partitions=1,
                tombstone=rng.random() < 0.2,
                created_by=writer,
            )
            ids.append(seg.id)
        CommitLogEntry.objects.create(
            datasource=ds, task=writer, kind=CommitKind.PUBLISH, added=ids
        )


def assert_partitions_fresh(ds: str) -> None:
    """Copies take partition numbers after their chunk's core set, never one in use."""
    for seg in Segment.objects.filter(datasource__name=ds).exclude(upgraded_from=""):
        assert seg.partition >= seg.core_partitions, seg.id
