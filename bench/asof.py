"""Two reads that grew with the segments (bench/console.py's shape: 365 DAY chunks x
160 segments = 58,400 at --scale 1, 584,000 at --scale 10), each against a
baseline measured in the same run:

- `selectors.metric_types()` (INFORMATION_SCHEMA.COLUMNS, segmentMetadata): the
  baseline folds every used segment's schema in Python, as it did before;
- the dataSource page `?as_of=<seq>` of a commit 20 commits before the newest: the
  baseline is the whole timeline state rebuilt as of that commit (from the
  checkpoint and the log), as the page did before. The page is timed in a process
  with no timeline cached (cold), with the current state cached as a web process
  has it (warm), and again (the past state kept).

CPU time and wall time (median of --runs), with the load average. Not a test.

    python bench/asof.py [--scale 1] [--runs 5] [--reuse]
    (DATABASE_URL defaults to a fresh strata_bench_asof; the database is recreated
    unless --reuse finds this scale's fixture already built there)
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
N = 100  # roots per chunk: 100 + 50 + 10 = 160 segments
DS = "bench"
# A few distinct schemas, as a dataSource's ingestions leave: each day's segments
# have one of them (a json dimension in some, a metric's type changing).
SCHEMAS = [
    {
        "dimensions": [{"name": "page", "type": "string"}, {"name": "attrs", "type": "json"}],
        "metrics": [{"name": "count", "type": "count"}, {"name": "added", "type": "longSum"}],
    },
    {
        "dimensions": [{"name": "page", "type": "string"}, {"name": "attrs", "type": "string"}],
        "metrics": [{"name": "count", "type": "count"}, {"name": "added", "type": "doubleSum"}],
    },
    {
        "dimensions": [{"name": "page", "type": "string"}, {"name": "nest", "type": "json"}],
        "metrics": [{"name": "count", "type": "count"}, {"name": "users", "type": "thetaSketch"}],
    },
]


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.0f} ms (best {min(values) * 1000:.0f})"


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _timed(runs: int, read, before=lambda: None) -> tuple[list[float], list[float], object]:
    cpu, wall, out = [], [], None
    for _ in range(runs):
        before()
        c, t = time.process_time(), time.perf_counter()
        out = read()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - t)
    return cpu, wall, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=int, default=1, help="years of 365 chunks")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="keep a fixture already built")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/strata_bench_asof")
    reuse = args.reuse and _built(url, args)
    if not reuse:
        name, admin = url.rsplit("/", 1)[1], url.rsplit("/", 1)[0] + "/postgres"
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
        subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    if not reuse:
        _fixture(args.scale)
    _metric_types(args)
    _as_of_page(args)


def _built(url: str, args) -> bool:
    found = subprocess.run(
        ["psql", url, "-tAc", "SELECT count(*) FROM metastore_segment"],
        capture_output=True,
        text=True,
    )
    want = 365 * args.scale * (N + N // 2 + N // 10)
    return found.returncode == 0 and found.stdout.strip() == str(want)


def _fixture(scale: int) -> None:
    """The segments (rows written directly, as bench/console.py does), a checkpoint
    as a publish leaves, then 21 mark-unused commits through the services: one in
    the middle of the year, 20 at its end."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from metastore import services
    from metastore.intervals import Interval
    from metastore.models import CommitKind, CommitLogEntry, DataSource, Segment

    ds = DataSource.objects.create(name=DS)
    first = Interval.parse("2024-01-01/2024-01-02")
    version = "2024-06-01T00:00:00.000Z"
    t0 = time.perf_counter()
    batch, count = [], 0
    for d in range(365 * scale):
        iv = Interval(first.start + timedelta(days=d), first.end + timedelta(days=d))
        roots = list(range(N))
        group = list(range(32768, 32768 + N // 2))
        rows = [(p, 0, [p], [p]) for p in roots]
        rows += [(p, 1, roots, group) for p in group]
        rows += [(p, 0, [p], [p]) for p in range(N, N + N // 10)]
        for p, minor, r, g in rows:
            batch.append(
                Segment(
                    id=Segment.make_id(DS, iv, version, p),
                    datasource=ds,
                    start=iv.start,
                    end=iv.end,
                    version=version,
                    partition=p,
                    minor_version=minor,
                    root_partitions=r,
                    atomic_update_group=g,
                    core_partitions=N,
                    num_rows=1000,
                    size_bytes=100_000,
                    location=f"/deep/bench/{d}/{p}",
                    schema=SCHEMAS[(d // 7) % len(SCHEMAS)],
                )
            )
        if len(batch) >= 20_000:
            Segment.objects.bulk_create(batch, batch_size=5000)
            count += len(batch)
            batch = []
    Segment.objects.bulk_create(batch, batch_size=5000)
    count += len(batch)
    CommitLogEntry.objects.create(datasource=DS, kind=CommitKind.PUBLISH, added=[], removed=[])
    services.timeline_checkpoint_save(datasource=DS)
    used = Segment.objects.filter(datasource=ds, used=True, partition=N)
    middle = used.order_by("start").values_list("id", flat=True)[used.count() // 2]
    services.segments_mark_used(datasource=DS, used=False, segment_ids=[middle])
    for sid in used.order_by("-start").values_list("id", flat=True)[:20]:
        services.segments_mark_used(datasource=DS, used=False, segment_ids=[sid])
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    get_user_model().objects.create_superuser("bench", password="bench-password")
    print(f"fixture: {count:,} segments in {time.perf_counter() - t0:.1f} s")


def _metric_types_per_segment() -> dict[str, dict[str, str]]:
    """The baseline: every used segment's schema folded in Python (the read before)."""
    from metastore.models import Segment
    from metastore.selectors.datasources import fold_metric_types

    rows = (
        Segment.objects.filter(used=True)
        .exclude(schema={})
        .order_by("datasource__name", "created_at")
        .values_list("datasource__name", "schema")
    )
    return fold_metric_types(rows)


def _metric_types(args) -> None:
    from metastore import selectors
    from metastore.models import Segment

    n = Segment.objects.filter(used=True).count()
    print(f"metric_types at {n:,} used segments, load {_load()}:")
    base_cpu, base_wall, expected = _timed(args.runs, _metric_types_per_segment)
    cpu, wall, found = _timed(args.runs, selectors.metric_types)
    assert found == expected, (found, expected)
    print(f"  baseline (every segment's schema): CPU {_ms(base_cpu)}, wall {_ms(base_wall)}")
    print(
        f"  metric_types(): CPU {_ms(cpu)}, wall {_ms(wall)}; / baseline CPU = "
        f"{statistics.median(cpu) / statistics.median(base_cpu):.3f}, wall = "
        f"{statistics.median(wall) / statistics.median(base_wall):.3f}"
    )


def _as_of_page(args) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from metastore import selectors
    from metastore.selectors import states

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    newest = selectors.last_commit_seq(datasource=DS)
    seq = newest - 20
    path = f"/datasources/{DS}?as_of={seq}"
    print(f"the dataSource page as of commit {seq} ({newest} the newest), load {_load()}:")

    def rebuilt():
        state = states.state_of(selectors.timeline_for(datasource=DS, as_of=seq), seq)
        return states.state_rows(datasource=DS, state=state, interval=state.extent)

    def page():
        response = client.get(path)
        assert response.status_code == 200
        return response.content

    def current():
        selectors.timeline_caches_clear()
        selectors.timeline_state(datasource=DS)

    base_cpu, base_wall, _ = _timed(args.runs, rebuilt, selectors.timeline_caches_clear)
    print(f"  baseline (the state rebuilt as of it): CPU {_ms(base_cpu)}, wall {_ms(base_wall)}")
    for label, before in (
        ("page, nothing cached", selectors.timeline_caches_clear),
        ("page, the current state cached", current),
        ("page again", lambda: None),
    ):
        cpu, wall, _ = _timed(args.runs, page, before)
        print(
            f"  {label}: CPU {_ms(cpu)}, wall {_ms(wall)}; / baseline CPU = "
            f"{statistics.median(cpu) / statistics.median(base_cpu):.3f}"
        )
    print(f"  load average after: {_load()}")


if __name__ == "__main__":
    main()
