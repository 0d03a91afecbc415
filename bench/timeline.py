"""Benchmark of metastore.timeline in the shape of Druid's VersionedIntervalTimelineBenchmark.

    python bench/timeline.py [--n 10,100,1000] [--lookups 2000] [--adds 2000]

Per N: 365 DAY intervals, each with N root segments (core set of N), one
compaction generation of 0.5*N segments in one AUG (minor version 1, roots =
all N roots) and 0.1*N appended segments; 58,400 segments at N=100, 584,000 at
N=1000. Prints build time, 3-day lookup time, incremental add/remove time,
memory per segment (tracemalloc) and, at N=10, the brute-force reference's
build time as a ratio. Targets: build <= 150 ms at N=100 and <= 2 s at N=1000,
lookup <= 50 us, add <= 50 us, memory <= 1 KB per segment.

Times are CPU time of this process by default (time.process_time), so that
other work on a shared machine does not inflate them; --wall uses wall-clock
time instead.
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metastore.intervals import Interval  # noqa: E402
from metastore.timeline import SegmentRef, Timeline  # noqa: E402

START = datetime(2023, 1, 1, tzinfo=UTC)
DAYS = 365
VERSION = "2023-06-01T00:00:00.000Z"

clock = time.process_time


def days() -> list[Interval]:
    return [Interval(START + timedelta(days=d), START + timedelta(days=d + 1)) for d in range(DAYS)]


def make_segments(n: int) -> list[SegmentRef]:
    compacted = max(n // 2, 1)
    appended = max(n // 10, 1)
    roots = frozenset(range(n))
    aug = frozenset(range(32768, 32768 + compacted))
    out: list[SegmentRef] = []
    for interval in days():
        prefix = f"bench_{interval.start:%Y-%m-%d}_{VERSION}_"
        for p in range(n):
            out.append(SegmentRef(f"{prefix}{p}", interval, VERSION, p, core_partitions=n))
        for p in aug:
            out.append(
                SegmentRef(
                    f"{prefix}{p}",
                    interval,
                    VERSION,
                    p,
                    minor_version=1,
                    root_partitions=roots,
                    atomic_update_group=aug,
                    core_partitions=n,
                )
            )
        for p in range(n, n + appended):
            out.append(SegmentRef(f"{prefix}{p}", interval, VERSION, p, core_partitions=n))
    return out


def best_of(runs: int, fn) -> tuple[float, object]:
    best = float("inf")
    result = None
    for _ in range(runs):
        gc.collect()
        t0 = clock()
        result = fn()
        best = min(best, clock() - t0)
    return best, result


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} us"


def bench(n: int, lookups: int, adds: int, rng: random.Random) -> None:
    segments = make_segments(n)
    print(f"\nN={n}: {len(segments):,} segments in {DAYS} DAY chunks")

    runs = 5 if len(segments) < 100_000 else 3
    build_s, timeline = best_of(runs, lambda: Timeline.build(segments))
    assert isinstance(timeline, Timeline)
    print(f"  build                        {build_s * 1e3:9.1f} ms  (best of {runs})")
    visible_per_day = len(timeline.lookup(days()[0]))
    assert visible_per_day == max(n // 2, 1) + max(n // 10, 1), visible_per_day

    intervals = days()
    windows = [
        Interval(intervals[d].start, intervals[d + 2].end)
        for d in (rng.randrange(DAYS - 2) for _ in range(lookups))
    ]
    t0 = clock()
    pieces = 0
    for window in windows:
        pieces += len(timeline.lookup(window))
    per_lookup = (clock() - t0) / lookups
    print(f"  lookup, 3-day window         {fmt_us(per_lookup)}  ({pieces // lookups} pieces)")

    hour_windows = [
        Interval(w.start + timedelta(hours=5), w.start + timedelta(hours=7)) for w in windows
    ]
    t0 = clock()
    for window in hour_windows:
        timeline.lookup(window)
    per_clipped = (clock() - t0) / lookups
    print(f"  lookup, 2-hour window        {fmt_us(per_clipped)}  (clipped pieces)")

    # Appends: a new root-like segment past the core set, in a random chunk.
    new = [
        SegmentRef(
            f"bench_new_{i}",
            intervals[d],
            VERSION,
            100_000 + i,
            core_partitions=n,
        )
        for i, d in enumerate(rng.randrange(DAYS) for _ in range(adds))
    ]
    t0 = clock()
    for seg in new:
        timeline.add(seg)
    per_add = (clock() - t0) / adds
    t0 = clock()
    timeline.lookup(intervals[0])  # the lazy refresh of every touched chunk
    refresh = clock() - t0
    print(f"  add (appended segment)       {fmt_us(per_add)}")
    print(
        f"  refresh after {adds} adds     {refresh * 1e3:9.1f} ms  "
        f"({fmt_us(refresh / adds).strip()} per add)"
    )

    t0 = clock()
    for seg in new:
        timeline.remove(seg.id)
        timeline.lookup(seg.interval)
    per_remove_lookup = (clock() - t0) / adds
    print(f"  remove + lookup of its day   {fmt_us(per_remove_lookup)}  (refresh included)")

    t0 = clock()
    for seg in new:
        timeline.add(seg)
        timeline.lookup(seg.interval)
    per_add_lookup = (clock() - t0) / adds
    print(f"  add + lookup of its day      {fmt_us(per_add_lookup)}  (refresh included)")

    # Removing a compaction member: its AUG goes partial, the N roots come back.
    victims = [
        f"bench_{intervals[d].start:%Y-%m-%d}_{VERSION}_32768" for d in range(min(adds, DAYS))
    ]
    t0 = clock()
    for seg_id in victims:
        timeline.remove(seg_id)
        timeline.status(seg_id.replace("_32768", "_0"))
    per_fallback = (clock() - t0) / len(victims)
    print(f"  remove AUG member + status   {fmt_us(per_fallback)}  (chunk falls back to its roots)")

    wanted = set(victims)
    restored = [seg for seg in segments if seg.id in wanted]
    t0 = clock()
    for seg in restored:
        timeline.add(seg)
        timeline.status(seg.id)
    per_restore = (clock() - t0) / len(restored)
    print(f"  add AUG member back + status {fmt_us(per_restore)}  (the roots are hidden again)")

    t0 = clock()
    hidden = timeline.fully_overshadowed()
    print(f"  fully_overshadowed()         {(clock() - t0) * 1e3:9.1f} ms  ({len(hidden):,} ids)")

    del timeline
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    measured_segments = make_segments(n)
    after_segments = tracemalloc.get_traced_memory()[0]
    measured = Timeline.build(measured_segments)
    after_build = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    count = len(measured_segments)
    seg_bytes = (after_segments - before) / count
    tl_bytes = (after_build - after_segments) / count
    print(f"  memory: SegmentRefs          {seg_bytes:9.0f} B/segment")
    print(f"  memory: Timeline             {tl_bytes:9.0f} B/segment")
    print(f"  memory: total                {seg_bytes + tl_bytes:9.0f} B/segment")
    del measured, measured_segments

    if n <= 10:
        try:
            from tests.timeline_reference import ReferenceTimeline
        except ImportError:
            return
        grid = [START + timedelta(days=d) for d in range(DAYS + 1)]
        t0 = clock()
        ReferenceTimeline(segments, grid)
        reference_s = clock() - t0
        print(
            f"  brute-force reference build  {reference_s * 1e3:9.1f} ms  "
            f"({reference_s / build_s:,.0f}x the timeline)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="10,100,1000", help="comma-separated N values")
    parser.add_argument("--lookups", type=int, default=2000)
    parser.add_argument("--adds", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = parser.parse_args()
    global clock
    if args.wall:
        clock = time.perf_counter
    rng = random.Random(args.seed)
    print(f"Python {sys.version.split()[0]}; {'wall-clock' if args.wall else 'CPU'} time")
    for n in (int(x) for x in args.n.split(",")):
        bench(n, args.lookups, args.adds, rng)


if __name__ == "__main__":
    main()
