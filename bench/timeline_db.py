"""`timeline_for` from PostgreSQL, cold (a fresh process: no in-process cache). Not a test.

Shapes (stored as Segment rows, then one commit):
  day     Druid's benchmark shape: 365 DAY chunks, each N roots, one compaction
          generation of N/2 segments overwriting them, N/10 appends
          (N=100: 58,400 segments)
  minute  one segment per MINUTE chunk over a year: 525,600 segments

Reported, each as the database read and `Timeline.build` apart:
  rows        no checkpoint: every used segment row is read (the baseline; then
              `services.timeline_checkpoint_save` writes the checkpoint, timed apart)
  checkpoint  the newest checkpoint read and decoded (what a cold read does now)
and `timeline_for` cold end to end (from the checkpoint) and warm, with the
ratio to the rows path measured in the same run.

    python bench/timeline_db.py [--shape day|minute] [--n 100] [--runs 3] [--no-build]
    (DATABASE_URL defaults to a fresh strata_bench_tl; the database is recreated)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ms(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0] * 1000:.0f} ms"
    return f"median {statistics.median(values) * 1000:.0f} ms (best {min(values) * 1000:.0f})"


def _rows(shape: str, n: int):
    """(interval, version, partition, minor, roots, aug, core) of every segment."""
    from metastore.intervals import Interval

    version = "2024-06-01T00:00:00.000Z"
    first = Interval.parse("2024-01-01/2024-01-02")
    if shape == "minute":
        step = timedelta(minutes=1)
        start = first.start
        for m in range(365 * 24 * 60):
            yield Interval(start + m * step, start + (m + 1) * step), version, 0, 0, [0], [0], 1
        return
    for d in range(365):
        iv = Interval(first.start + timedelta(days=d), first.end + timedelta(days=d))
        roots = list(range(n))
        group = list(range(32768, 32768 + n // 2))
        for p in roots:
            yield iv, version, p, 0, [p], [p], n
        for p in group:
            yield iv, version, p, 1, roots, group, n
        for p in range(n, n + max(1, n // 10)):
            yield iv, version, p, 0, [p], [p], n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=("day", "minute"), default="day")
    parser.add_argument("--n", type=int, default=100, help="roots per DAY chunk")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-build", action="store_true", help="time the reads only")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/strata_bench_tl")
    name, admin = url.rsplit("/", 1)[1], url.rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from metastore import selectors, services
    from metastore.models import (
        CommitKind,
        CommitLogEntry,
        DataSource,
        Segment,
        TimelineCheckpoint,
    )
    from metastore.selectors import timeline as timeline_reads
    from metastore.timeline import Timeline

    ds = DataSource.objects.create(name="bench")
    t0 = time.perf_counter()
    batch, count = [], 0
    for iv, v, p, minor, r, g, core in _rows(args.shape, args.n):
        batch.append(
            Segment(
                id=Segment.make_id("bench", iv, v, p),
                datasource=ds,
                start=iv.start,
                end=iv.end,
                version=v,
                partition=p,
                minor_version=minor,
                root_partitions=r,
                atomic_update_group=g,
                core_partitions=core,
                num_rows=1,
                size_bytes=1,
            )
        )
        if len(batch) >= 20_000:
            Segment.objects.bulk_create(batch, batch_size=5000)
            count += len(batch)
            batch = []
    Segment.objects.bulk_create(batch, batch_size=5000)
    count += len(batch)
    seq = CommitLogEntry.objects.create(
        datasource="bench", kind=CommitKind.PUBLISH, added=[], removed=[]
    ).seq
    print(f"shape {args.shape}: inserted {count:,} segments in {time.perf_counter() - t0:.1f} s")

    def timed(f):
        t = time.perf_counter()
        value = f()
        return time.perf_counter() - t, value

    # the rows path (no checkpoint): the baseline
    rows_read, refs = [], []
    for _ in range(args.runs if args.shape == "day" else 1):
        elapsed, refs = timed(lambda: timeline_reads.segment_row_refs("bench"))
        rows_read.append(elapsed)
    # what a publish does once it commits (here from the rows again: none exists yet)
    write, written = timed(lambda: services.timeline_checkpoint_save(datasource="bench"))
    assert written == seq
    (checkpoint,) = TimelineCheckpoint.objects.filter(datasource="bench")
    size = len(bytes(checkpoint.refs))
    runs = args.runs if args.shape == "day" else 1
    build = []
    if not args.no_build:
        for _ in range(runs):
            elapsed, _ = timed(lambda: Timeline.build(refs))
            build.append(elapsed)
    # the checkpoint path: what a cold read does now
    cp_read = []
    for _ in range(args.runs):
        elapsed, cp_refs = timed(lambda: timeline_reads.refs_at(datasource="bench", seq=seq))
        cp_read.append(elapsed)
    assert set(cp_refs) == set(refs)
    print(
        f"{count:,} segments; checkpoint {size / 1024:.0f} KB, "
        f"read and written by the service in {write * 1000:.0f} ms"
    )
    print(f"rows path:       database read {_ms(rows_read)}")
    print(
        f"checkpoint path: database read + decode {_ms(cp_read)} "
        f"= {statistics.median(cp_read) / statistics.median(rows_read):.3f} x the rows read"
    )
    if build:
        print(f"Timeline.build:  {_ms(build)}")
    if args.no_build:
        return
    cold, cpu = [], []
    for _ in range(runs):
        selectors.timeline_caches_clear()
        c = time.process_time()
        elapsed, timeline = timed(lambda: selectors.timeline_for(datasource="bench"))
        cpu.append(time.process_time() - c)
        cold.append(elapsed)
    warm, _ = timed(lambda: selectors.timeline_for(datasource="bench"))
    before = statistics.median(rows_read) + statistics.median(build)
    print(
        f"timeline_for cold (checkpoint): {_ms(cold)} vs rows read + build {before * 1000:.0f} ms "
        f"= {statistics.median(cold) / before:.2f} x; warm (cached): {warm * 1000:.2f} ms"
    )
    print(f"timeline_for cold, this process's CPU time: {_ms(cpu)} (less sensitive to load)")
    if args.shape == "day":
        print("target (issue 24): cold timeline_for <= 100 ms CPU at N=100 (58,400 segments)")
    from metastore.intervals import Interval

    year = Interval.parse("2024-01-01/2025-01-01")
    print(f"visible pieces over the year: {len(timeline.lookup(year)):,}")


if __name__ == "__main__":
    main()
