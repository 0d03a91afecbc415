"""The console at Druid's benchmark shape on PostgreSQL: 365 DAY chunks x 160
segments (100 roots, a compaction generation of 50 overwriting them, 10 appends)
= 58,400 segments. Times the server-side render of the dataSource page (whole
year, one mark per chunk) and of its interval view (one day: every segment),
their HTML size, and `timeline_for` cold, warm, and after one new commit (applied
to the cached timeline) against a full rebuild measured in the same run. Then,
with --tasks tasks added, every console list and the overview (issue 25). Not a test.

    python bench/console.py [--scale 1] [--runs 5] [--tasks 100000] [--reuse] [--lists-only]
                            [--commit-pages]
    (--scale 10: 584,000 segments)
    (DATABASE_URL defaults to a fresh strata_bench_console; the database is recreated,
    unless --reuse finds the fixture of this scale and task count already built there;
    --lists-only times the lists and the overview only; --commit-pages times only the
    commit pages, against the whole timelines rebuilt as of both commits as the page
    did before it drew only the segments around its window)
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
N = 100  # roots per chunk: 100 + 50 + 10 = 160 segments


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:.0f} ms (best {min(values) * 1000:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=int, default=1, help="years of 365 chunks")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks for the lists")
    parser.add_argument("--reuse", action="store_true", help="keep a fixture already built")
    parser.add_argument("--lists-only", action="store_true", help="only the lists and overview")
    parser.add_argument("--commit-pages", action="store_true", help="only the commit pages")
    parser.add_argument(
        "--first-page",
        action="store_true",
        help="with --reuse: only the first dataSource page in this fresh process, in parts",
    )
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/strata_bench_console")
    if args.reuse and _built(url, args):
        if args.first_page:
            return _first_page(url)
        if args.commit_pages:
            return _commit_pages_again(url, args)
        return _lists_again(url, args)
    name, admin = url.rsplit("/", 1)[1], url.rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    call_command("migrate", verbosity=0)
    from metastore import selectors, services
    from metastore.intervals import Interval
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
    first = Interval.parse("2024-01-01/2024-01-02")
    version = "2024-06-01T00:00:00.000Z"
    t0 = time.perf_counter()
    batch = []
    count = 0
    for d in range(365 * args.scale):
        iv = Interval(first.start + timedelta(days=d), first.end + timedelta(days=d))
        roots = list(range(N))
        group = list(range(32768, 32768 + N // 2))
        rows = [(p, 0, [p], [p]) for p in roots]
        rows += [(p, 1, roots, group) for p in group]
        rows += [(p, 0, [p], [p]) for p in range(N, N + N // 10)]
        for p, minor, r, g in rows:
            batch.append(
                Segment(
                    id=Segment.make_id("bench", iv, version, p),
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
                )
            )
        if len(batch) >= 20_000:
            Segment.objects.bulk_create(batch, batch_size=5000)
            count += len(batch)
            batch = []
    Segment.objects.bulk_create(batch, batch_size=5000)
    count += len(batch)
    CommitLogEntry.objects.create(datasource="bench", kind=CommitKind.PUBLISH, added=[], removed=[])
    print(f"inserted {count:,} segments in {time.perf_counter() - t0:.1f} s")
    if args.commit_pages:
        _tasks(args.tasks)  # so that --reuse finds this fixture for the lists too
        _analyze()
        get_user_model().objects.create_superuser("bench", password="bench-password")
        return _commit_pages_again(url, args)
    if args.lists_only:
        from django.test import Client as _Client

        user = get_user_model().objects.create_superuser("bench", password="bench-password")
        client = _Client()
        client.force_login(user)
        return _lists(client, args, count)

    # timeline_for: a full rebuild from the segment rows (no checkpoint) is the baseline
    rows_cold = []
    for _ in range(args.runs):
        selectors.timeline_caches_clear()
        TimelineCheckpoint.objects.all().delete()
        t = time.perf_counter()
        selectors.timeline_for(datasource="bench")
        rows_cold.append(time.perf_counter() - t)
    # what a publish does once it commits (a read never writes one)
    services.timeline_checkpoint_save(datasource="bench")
    # a fresh process now: the newest checkpoint, and the log after it (none here)
    cold = []
    for _ in range(args.runs):
        selectors.timeline_caches_clear()
        t = time.perf_counter()
        selectors.timeline_for(datasource="bench")
        cold.append(time.perf_counter() - t)
    t = time.perf_counter()
    selectors.timeline_for(datasource="bench")
    warm = time.perf_counter() - t
    # one new commit (a segment marked unused, then used again): applied, not rebuilt
    some = Segment.objects.filter(datasource=ds, partition=N).values_list("id", flat=True)[:1]
    applied = []
    for i in range(args.runs):
        CommitLogEntry.objects.create(
            datasource="bench",
            kind=CommitKind.MARK_UNUSED if i % 2 == 0 else CommitKind.MARK_USED,
            added=[] if i % 2 == 0 else list(some),
            removed=list(some) if i % 2 == 0 else [],
        )
        Segment.objects.filter(id__in=list(some)).update(used=i % 2 == 1)
        t = time.perf_counter()
        timeline = selectors.timeline_for(datasource="bench")
        applied.append(time.perf_counter() - t)
    rebuilt = Timeline.build(timeline_reads.segment_row_refs("bench"))
    assert {s.id for s in timeline.segments()} == {s.id for s in rebuilt.segments()}
    print(f"timeline_for cold from the rows, no checkpoint (the baseline): {_ms(rows_cold)}")
    print(
        f"timeline_for cold from the checkpoint: {_ms(cold)} "
        f"= {statistics.median(cold) / statistics.median(rows_cold):.3f} x the baseline"
        f"  [target <= 150 ms at scale 1]"
    )
    print(f"timeline_for warm (cached): {warm * 1000:.2f} ms")
    print(
        f"timeline_for after one new commit (applied to the cache): {_ms(applied)} "
        f"= {statistics.median(applied) / statistics.median(rows_cold):.3f} x the baseline"
    )

    user = get_user_model().objects.create_superuser("bench", password="bench-password")
    client = Client()
    client.force_login(user)
    day = "2024-07-01/2024-07-02"
    pages = [
        ("dataSource page (whole range)", "/datasources/bench"),
        ("interval view (one day, every segment)", f"/datasources/bench?interval={day}"),
        ("interval view with unused segments", f"/datasources/bench?interval={day}&unused=1"),
        (
            "segment page",
            f"/datasources/bench/segments/{Segment.make_id('bench', Interval.parse(day), version, 5)}",
        ),
    ]
    selectors.timeline_caches_clear()
    load = os.getloadavg()[0]
    t, cpu = time.perf_counter(), time.process_time()
    response = client.get(pages[0][1])
    first_render, first_cpu = time.perf_counter() - t, time.process_time() - cpu
    assert response.status_code == 200
    print(
        f"dataSource page, first render in a fresh process (timeline and state built): "
        f"{first_render * 1000:.0f} ms wall, {first_cpu * 1000:.0f} ms CPU"
        f"  [target <= 1000 ms at scale 10; load average {load:.1f} -> {os.getloadavg()[0]:.1f}]"
    )
    for label, path in pages:
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            response = client.get(path)
            times.append(time.perf_counter() - t)
            assert response.status_code == 200, (path, response.status_code)
        size = len(response.content)
        print(
            f"{label}: {_ms(times)}, HTML {size / 1024:.0f} KB"
            f"  [target <= {300 if args.scale == 1 else 1000} ms, <= 500 KB]"
        )
    # the first render after a commit: timeline and console state follow it, not rebuilt
    after_commit = []
    for i in range(args.runs):
        CommitLogEntry.objects.create(
            datasource="bench",
            kind=CommitKind.MARK_UNUSED if i % 2 == 0 else CommitKind.MARK_USED,
            added=[] if i % 2 == 0 else list(some),
            removed=list(some) if i % 2 == 0 else [],
        )
        Segment.objects.filter(id__in=list(some)).update(used=i % 2 == 1)
        t = time.perf_counter()
        assert client.get(pages[0][1]).status_code == 200
        after_commit.append(time.perf_counter() - t)
    print(f"dataSource page, first render after a new commit: {_ms(after_commit)}")
    print(
        f"ratios to the cold timeline read from the rows: page render / it = "
        f"{statistics.median(times) / statistics.median(rows_cold):.2f}"
    )
    _lists(client, args, count)


def _built(url: str, args) -> bool:
    """Whether `url`'s database holds this scale's segments and tasks already."""
    found = subprocess.run(
        [
            "psql",
            url,
            "-tAc",
            "SELECT (SELECT count(*) FROM metastore_segment), "
            "(SELECT count(*) FROM metastore_task)",
        ],
        capture_output=True,
        text=True,
    )
    want = f"{365 * args.scale * (N + N // 2 + N // 10)}|{args.tasks}"
    return found.returncode == 0 and found.stdout.strip() == want


def _lists_again(url: str, args) -> None:
    """The lists and the overview on the fixture a previous run left (--reuse)."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from metastore.models import Segment

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    _timed_lists(client, args, Segment.objects.count())


def _first_page(url: str) -> None:
    """The first dataSource page in this fresh process on the fixture a previous
    run left, and (in a second pass, caches cleared) its parts: the rows per
    chunk, the cold `timeline_for` and the state."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import get_resolver

    from metastore import selectors
    from metastore.selectors import states

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    collecting = [0.0, 0.0]  # the cyclic collector's time in the request, and its start

    def timed(phase, info):
        if phase == "start":
            collecting[1] = time.process_time()
        else:
            collecting[0] += time.process_time() - collecting[1]

    # The URLconf (and the API modules it imports: numpy, drf-spectacular) loads on
    # a process's first request, whichever page it is: timed apart.
    t = time.process_time()
    get_resolver().url_patterns  # noqa: B018
    urlconf = time.process_time() - t
    load = os.getloadavg()[0]
    gc.callbacks.append(timed)
    t, cpu = time.perf_counter(), time.process_time()
    assert client.get("/datasources/bench").status_code == 200
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    gc.callbacks.remove(timed)
    print(
        f"dataSource page, first render in a fresh process: {wall * 1000:.0f} ms wall, "
        f"{cpu * 1000:.0f} ms CPU (of it the garbage collector {collecting[0] * 1000:.0f} ms)"
        f"  [target <= 1000 ms; load average {load:.1f} -> {os.getloadavg()[0]:.1f}]"
        f"\n  (before it, the URLconf's import on the first request: {urlconf * 1000:.0f} ms CPU)"
    )
    selectors.timeline_caches_clear()
    parts = [
        ("timeline_for cold", lambda: selectors.timeline_for(datasource="bench")),
        ("state", lambda: states.timeline_state(datasource="bench")),
        ("rows per chunk", lambda: states.chunk_rows(datasource="bench")),
    ]
    for label, part in parts:
        t, cpu = time.perf_counter(), time.process_time()
        part()
        print(
            f"  {label}: {(time.perf_counter() - t) * 1000:.0f} ms wall, "
            f"{(time.process_time() - cpu) * 1000:.0f} ms CPU"
        )


def _tasks(n: int) -> None:
    """`n` ended tasks over 20 dataSources (5% FAILED), and 50 RUNNING, WAITING and
    PENDING: the tasks lists' and the overview's shape."""
    from datetime import UTC, datetime

    from metastore.models import Task, TaskStatus

    t0 = time.perf_counter()
    base = datetime(2024, 1, 1, tzinfo=UTC)
    statuses = [TaskStatus.SUCCESS] * 19 + [TaskStatus.FAILED]
    batch = []
    for i in range(n):
        status = (
            statuses[i % 20]
            if i < n - 150
            else (TaskStatus.RUNNING, TaskStatus.WAITING, TaskStatus.PENDING)[i % 3]
        )
        created = base + timedelta(seconds=30 * i)
        batch.append(
            Task(
                id=f"index_parallel_ds{i % 20}_{i:08d}",
                type=("index_parallel", "compact", "kill")[i % 3],
                datasource=f"wikipedia_ds{i % 20}",
                spec={"type": "index_parallel"},
                status=status,
                priority=50,
                group_id=f"g{i}",
                created_at=created,
                started_at=created,
                ended_at=created + timedelta(seconds=60)
                if status in (TaskStatus.SUCCESS, TaskStatus.FAILED)
                else None,
                error="input file is gone" if status == TaskStatus.FAILED else "",
            )
        )
        if len(batch) >= 10_000:
            Task.objects.bulk_create(batch)
            batch = []
    Task.objects.bulk_create(batch)
    # The ended ones ended now: the overview counts the last day's.
    Task.objects.filter(status__in=(TaskStatus.SUCCESS, TaskStatus.FAILED)).update(
        ended_at=datetime.now(UTC)
    )
    print(f"inserted {n:,} tasks in {time.perf_counter() - t0:.1f} s")


def _lists(client, args, segments: int) -> None:
    """Server time of every console list and the overview (issue 25): warm, the
    median of `runs` renders in this process (the timeline states are cached per
    commit, as in a web process that has served the page once)."""
    _tasks(args.tasks)
    _analyze()
    _timed_lists(client, args, segments)


def _analyze() -> None:
    """VACUUM ANALYZE once the fixture is in, as autovacuum does after a bulk
    load: without statistics the planner guesses (e.g. that a tenth of the
    segments are unused) and reads whole tables for the lists."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def _timed_lists(client, args, segments: int) -> None:
    from metastore import selectors
    from metastore.models import CommitKind, CommitLogEntry, Segment

    # A commit that marked one segment unused (the newest): its page is timed below.
    gone = (
        Segment.objects.filter(used=True).order_by("-start", "id").values_list("id", flat=True)[0]
    )
    Segment.objects.filter(id=gone).update(used=False)
    commit = CommitLogEntry.objects.create(
        datasource="bench", kind=CommitKind.MARK_UNUSED, added=[], removed=[gone]
    )

    selectors.timeline_caches_clear()
    t = time.perf_counter()
    assert client.get("/").status_code == 200
    print(f"overview, first render in a fresh process: {(time.perf_counter() - t) * 1000:.0f} ms")
    pages = [
        ("overview (home page)", "/"),
        ("services", "/services"),
        ("dataSources", "/datasources"),
        ("tasks (newest first)", "/tasks"),
        ("tasks filtered ?datasource=ds1", "/tasks?datasource=ds1"),
        ("tasks sorted by priority", "/tasks?sort=-priority"),
        ("tasks sorted by status", "/tasks?sort=status"),
        ("tasks ?status=FAILED", "/tasks?status=FAILED"),
        ("tasks grouped by dataSource", "/tasks?group=datasource"),
        ("tasks grouped by status", "/tasks?group=status"),
        ("tasks grouped by type", "/tasks?group=type"),
        ("segments (newest first)", "/segments"),
        ("segments sorted by size", "/segments?sort=size"),
        ("segments ?state=overshadowed", "/segments?state=overshadowed"),
        ("segments ?state=visible&sort=-size", "/segments?state=visible&sort=-size"),
        (
            "segments ?datasource=bench&interval=one day",
            "/segments?datasource=bench&interval=2024-07-01/2024-07-02",
        ),
        ("segments ?version=2024-06", "/segments?version=2024-06"),
        ("locks", "/locks"),
        ("compaction", "/compaction"),
        ("commit page (one segment marked unused)", f"/datasources/bench/commits/{commit.seq}"),
        ("dataSource page (whole range, its commits)", "/datasources/bench"),
    ]
    client.get("/segments?state=visible")  # the states, once per process
    print(f"console lists at {segments:,} segments and {args.tasks:,} tasks (server time, warm):")
    for label, path in pages:
        times = []
        for _ in range(args.runs):
            t = time.perf_counter()
            response = client.get(path)
            times.append(time.perf_counter() - t)
            assert response.status_code == 200, (path, response.status_code)
        print(f"  {label}: {_ms(times)}  [goal <= 100 ms at 584,000 segments]")
    # deep in the segments list: the cursor of page 21 costs what page 1 does
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        html = client.get("/segments?limit=500").content.decode()
        times.append(time.perf_counter() - t)
    print(f"  segments, page 1 of 500: {_ms(times)}")
    for _ in range(20):
        found = re.search(r'href="\?([^"]+)" id="segments-next"', html)
        html = client.get("/segments?" + found[1].replace("&amp;", "&")).content.decode()
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        client.get("/segments?" + found[1].replace("&amp;", "&"))
        times.append(time.perf_counter() - t)
    print(f"  segments, page 21 of 500 by cursor: {_ms(times)}")
    # and in the tasks table: page 101 by cursor, as page 1
    url, page = "/tasks?sort=-priority", 1
    for _ in range(100):
        html = client.get(url).content.decode()
        found = re.search(r'href="\?([^"]*)" id="tasks-next"', html)
        if found is None:  # fewer tasks than 101 pages (a small --tasks)
            break
        url, page = "/tasks?" + found[1].replace("&amp;", "&"), page + 1
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        client.get(url)
        times.append(time.perf_counter() - t)
    print(f"  tasks sorted by priority, page {page} by cursor: {_ms(times)}")


def _commit_pages_again(url: str, args) -> None:
    """The commit pages on the fixture (--commit-pages): of the newest commit and of
    one with 20 commits after it, each mark-unused of one segment, through the
    services (checkpoints as they fall due). Server time, CPU and wall, median of
    `runs`, each in a process whose timeline caches are cleared (the page reads no
    cache), against the baseline measured in the same run: the whole timeline
    states rebuilt as of the commit and the one before it, which the page did
    before it drew only the segments around its window."""
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client

    from metastore import selectors, services
    from metastore.models import Segment, TimelineCheckpoint

    client = Client()
    client.force_login(get_user_model().objects.get(username="bench"))
    if not TimelineCheckpoint.objects.filter(datasource="bench").exists():
        services.timeline_checkpoint_save(datasource="bench")  # as a publish leaves one
    used = Segment.objects.filter(datasource__name="bench", used=True, partition=N)
    middle = used.order_by("start").values_list("id", flat=True)[used.count() // 2]
    mid = services.segments_mark_used(datasource="bench", used=False, segment_ids=[middle])
    for sid in used.order_by("-start").values_list("id", flat=True)[:20]:
        newest = services.segments_mark_used(datasource="bench", used=False, segment_ids=[sid])
    print(f"commit pages at {Segment.objects.count():,} segments, load {_load()}:")
    for label, entry in (("newest commit", newest), ("a commit 20 before the newest", mid)):
        prev = selectors.commit_before(datasource="bench", seq=entry.seq)
        cpu, wall = [], []
        for _ in range(args.runs):
            selectors.timeline_caches_clear()
            c, t = time.process_time(), time.perf_counter()
            selectors.timeline_state(datasource="bench", as_of=prev)
            selectors.timeline_state(datasource="bench", as_of=entry.seq)
            cpu.append(time.process_time() - c)
            wall.append(time.perf_counter() - t)
        page_cpu, page_wall = [], []
        for _ in range(args.runs):
            selectors.timeline_caches_clear()
            c, t = time.process_time(), time.perf_counter()
            response = client.get(f"/datasources/bench/commits/{entry.seq}")
            page_cpu.append(time.process_time() - c)
            page_wall.append(time.perf_counter() - t)
            assert response.status_code == 200 and "Overshadowed (" in response.content.decode()
        print(
            f"  {label}: page CPU {_ms(page_cpu)}, wall {_ms(page_wall)}; baseline (both "
            f"states rebuilt) CPU {_ms(cpu)}, wall {_ms(wall)}; page / baseline CPU = "
            f"{statistics.median(page_cpu) / statistics.median(cpu):.3f}  [goal <= 100 ms]"
        )
    print(f"  load average after: {_load()}")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
