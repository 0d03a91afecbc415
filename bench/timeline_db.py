"""`timeline_for` from PostgreSQL: Druid's benchmark shape stored as Segment rows
(365 DAY chunks, N roots, one compaction generation of N/2 overwriting segments,
N/10 appends), timed cold (no cache) and warm. Not a test.

    python bench/timeline_db.py [--n 100]     (DATABASE_URL defaults to a fresh strata_bench_tl)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=100)
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
    from metastore import selectors
    from metastore.intervals import Interval
    from metastore.models import CommitKind, CommitLogEntry, DataSource, Segment

    n = args.n
    ds = DataSource.objects.create(name="bench")
    start = Interval.parse("2024-01-01/2024-01-02")
    rows = []
    for d in range(365):
        iv = Interval(start.start + timedelta(days=d), start.end + timedelta(days=d))
        version = "2024-06-01T00:00:00.000Z"
        roots = list(range(n))
        group = list(range(32768, 32768 + n // 2))
        for p in roots:
            rows.append((iv, version, p, 0, [p], [p]))
        for p in group:
            rows.append((iv, version, p, 1, roots, group))
        for p in range(n, n + max(1, n // 10)):
            rows.append((iv, version, p, 0, [p], [p]))
    t0 = time.perf_counter()
    Segment.objects.bulk_create(
        [
            Segment(
                id=Segment.make_id("bench", iv, v, p), datasource=ds, start=iv.start, end=iv.end,
                version=v, partition=p, minor_version=minor, root_partitions=r,
                atomic_update_group=g, core_partitions=n, num_rows=1, size_bytes=1,
            )
            for iv, v, p, minor, r, g in rows
        ],
        batch_size=5000,
    )
    CommitLogEntry.objects.create(datasource="bench", kind=CommitKind.PUBLISH, added=[], removed=[])
    print(f"inserted {len(rows):,} segments in {time.perf_counter() - t0:.1f} s")
    times = []
    for _ in range(3):
        selectors._timeline_cache.clear()
        t0 = time.perf_counter()
        timeline = selectors.timeline_for(datasource="bench")
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    selectors.timeline_for(datasource="bench")
    warm = time.perf_counter() - t0
    print(f"N={n}: {len(rows):,} segments; timeline_for cold: best {min(times) * 1000:.0f} ms "
          f"(runs: {', '.join(f'{t * 1000:.0f}' for t in times)} ms); warm (cached): {warm * 1000:.2f} ms")
    print(f"visible pieces over the year: {len(timeline.lookup(Interval.parse('2024-01-01/2025-01-01'))):,}")
    print("target: cold timeline_for <= 1 s at N=100")


if __name__ == "__main__":
    main()
