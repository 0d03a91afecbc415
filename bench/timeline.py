"""Benchmark of metastore.timeline in the shapes of Druid's VersionedIntervalTimelineBenchmark.

    python bench/timeline.py [--n 10,100,1000] [--shapes DAY:10,...] [--days 365] [--quick]

Two parts. First, per N (``--n``): 365 DAY intervals, each with N root segments (core set of N), one
compaction generation of 0.5*N segments in one AUG (minor version 1, roots =
all N roots) and 0.1*N appended segments; 58,400 segments at N=100, 584,000 at
N=1000. Prints build time, a fresh process's cold load from a stored checkpoint
(decode + build, the database read excluded: see bench/timeline_db.py), 3-day
lookup time, incremental add/remove time, memory per segment (tracemalloc) and,
at N=10, the brute-force reference's build time as a ratio. Targets: build <= 150
ms at N=100 and <= 2 s at N=1000 (issue 24: <= 30 ms and <= 300 ms), lookup <= 50
us, add <= 50 us, memory <= 1 KB per segment.

Second, Druid PR #19278's shapes (``--shapes``, GRANULARITY:SEGMENTS_PER_INTERVAL):
a year (``--days``) of DAY (365), HOUR (8,760) or MINUTE (525,600) intervals,
one version, each interval with 10 (or 1) root segments forming its core set.
Per shape: build time (and, as a same-run baseline, the time to build a plain
dict of the same segments by id), the garbage collector's first pass over
what the build made (build pauses the collector, so that pass comes later),
memory per segment (tracemalloc, a second build), lookups per second of one interval and of a 1-hour window, the cost of
adding the next interval's chunk at the end (with and without the read that
refreshes the timeline), of late data (a new version of one interval in the
middle) and of removing it again. Issue 16's targets at MINUTE:1: build <= 2 s,
1-hour lookup <= 30 us, >= 244,000 single-minute lookups/s, next-minute add
<= 20 us; at MINUTE:10 (5.3 M segments) build <= 20 s at <= 300 B/segment.
``--quick`` runs N=10 and every shape over 30 days, with fewer operations.

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
from bisect import bisect_left
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metastore.checkpoint_codec import decode_refs, encode_refs  # noqa: E402
from metastore.intervals import Interval, format_ts  # noqa: E402
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
        result = None  # the last run's result is freed here, not inside the timing
        gc.collect()
        t0 = clock()
        result = fn()
        best = min(best, clock() - t0)
    return best, result


def fmt_us(seconds: float) -> str:
    return f"{seconds * 1e6:8.1f} us"


def cold(segments: list[SegmentRef], runs: int) -> None:
    """A fresh process's first timeline, from a stored checkpoint (what
    metastore.selectors.timeline does when it finds one): decode the blob, build.
    The database read of the blob is bench/timeline_db.py's part."""
    blob = encode_refs(segments)
    decode_s, decoded = best_of(runs, lambda: decode_refs(blob))
    assert len(decoded) == len(segments)
    cold_s, _ = best_of(runs, lambda: Timeline.build(decode_refs(blob)))
    per = len(blob) / len(segments)
    print(f"  checkpoint decode            {decode_s * 1e3:9.1f} ms  ({per:.1f} B/segment stored)")
    print(f"  cold: decode + build         {cold_s * 1e3:9.1f} ms  (database read excluded)")


def bench(n: int, lookups: int, adds: int, rng: random.Random) -> None:
    segments = make_segments(n)
    print(f"\nN={n}: {len(segments):,} segments in {DAYS} DAY chunks")

    runs = 5 if len(segments) < 100_000 else 3
    build_s, timeline = best_of(runs, lambda: Timeline.build(segments))
    assert isinstance(timeline, Timeline)
    print(f"  build                        {build_s * 1e3:9.1f} ms  (best of {runs})")
    cold(segments, runs)
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
    timeline.get("")  # the id index: a build makes it on the first read by id
    print(f"  id index (first get)         {(clock() - t0) * 1e3:9.1f} ms")
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


GRANULARITIES = {
    "DAY": timedelta(days=1),
    "HOUR": timedelta(hours=1),
    "MINUTE": timedelta(minutes=1),
}


def shape_segments(step: timedelta, count: int, per: int, first: int = 0) -> list[SegmentRef]:
    """``count`` consecutive intervals of length ``step``, each with ``per`` root segments.

    Ids are Druid's (dataSource_start_end_version_partition); the segments of
    one interval share its Interval, as they do when read from the metastore.
    """
    out: list[SegmentRef] = []
    for c in range(first, first + count):
        start = START + c * step
        interval = Interval(start, start + step)
        prefix = f"wikipedia_{format_ts(start)}_{format_ts(start + step)}_{VERSION}_"
        for p in range(per):
            out.append(SegmentRef(f"{prefix}{p}", interval, VERSION, p, core_partitions=per))
    return out


def per_second(seconds: float) -> str:
    return f"{1 / seconds:12,.0f} /s" if seconds > 0 else "         inf /s"


def bench_shape(name: str, per: int, days: int, ops: int, memory: bool, rng: random.Random):
    step = GRANULARITIES[name]
    count = int(timedelta(days=days) / step)
    t0 = clock()
    segments = shape_segments(step, count, per)
    made = clock() - t0
    print(
        f"\n{name} x {per}: {len(segments):,} segments in {count:,} {name} chunks "
        f"(SegmentRefs made in {made:.2f} s)"
    )
    gc.collect()
    t0 = clock()
    by_id = {s.id: s for s in segments}
    dict_s = clock() - t0
    del by_id
    runs = 3 if len(segments) <= 200_000 else 1
    build_s, timeline = best_of(runs, lambda: Timeline.build(segments))
    assert isinstance(timeline, Timeline)
    print(
        f"  build                        {build_s * 1e3:9.1f} ms  (best of {runs}; "
        f"{build_s / dict_s:.1f}x a dict of the segments by id, {dict_s * 1e3:.1f} ms)"
    )
    # Build pauses the cyclic garbage collector; its first pass over the new
    # objects comes later, in whatever runs next. Count it here, honestly.
    t0 = clock()
    gc.collect(1)
    deferred = clock() - t0
    print(
        f"  collector pass after build   {deferred * 1e3:9.1f} ms  (deferred by build; not in it)"
    )
    everything = Interval(START, START + count * step)
    assert len(timeline.lookup(everything)) == len(segments)

    # One interval: the chunk's own Interval object, as a caller holding it would ask.
    chunks = [segments[i * per].interval for i in range(count)]
    starts = [c.start for c in chunks]
    picks = [rng.randrange(count) for _ in range(ops)]
    asked = [Interval(chunks[i].start, chunks[i].end) for i in picks]
    lookup = timeline.lookup
    t0 = clock()
    for q in asked:
        lookup(q)
    one = (clock() - t0) / ops
    # The same-run floor: finding the chunk by bisect in a plain sorted list.
    t0 = clock()
    for q in asked:
        bisect_left(starts, q.start)
    floor = (clock() - t0) / ops
    print(
        f"  lookup, one {name:<6}           {fmt_us(one)}  {per_second(one)}  "
        f"({per} pieces; {one / floor:.0f}x a bisect of the starts)"
    )

    hour = timedelta(hours=1)
    hours = count * step // hour
    offset = timedelta(hours=5) if step > hour else timedelta(0)  # inside a day: clipped pieces
    windows = []
    for _ in range(ops):
        h = rng.randrange(max(hours, 1)) if step <= hour else rng.randrange(count) * 24
        windows.append(Interval(START + h * hour + offset, START + h * hour + offset + hour))
    t0 = clock()
    pieces = 0
    for q in windows:
        pieces += len(lookup(q))
    window = (clock() - t0) / ops
    print(
        f"  lookup, 1-hour window        {fmt_us(window)}  {per_second(window)}  "
        f"({pieces // ops} pieces)"
    )

    # What the read side does per commit (issue 24): copy the timeline readers hold,
    # apply the commit to the copy, read it; against a rebuild, in the same run.
    nxt = shape_segments(step, 1, per, first=count)
    copies = 20 if len(segments) <= 200_000 else 3

    def snapshot(held: Timeline = timeline) -> Timeline:
        moved = held.copy()
        for seg in nxt:
            moved.add(seg)
        moved.lookup(nxt[0].interval)
        return moved

    snap_s, _ = best_of(copies, snapshot)
    print(
        f"  snapshot: copy + commit + read {snap_s * 1e3:7.2f} ms  "
        f"({snap_s / build_s:.3f}x a rebuild)"
    )

    # The next interval's chunk, at the end, chunk after chunk (a streaming dataSource).
    adds = min(ops, 2000)
    new = shape_segments(step, adds, per, first=count)
    t0 = clock()
    for seg in new:
        timeline.add(seg)
    add = (clock() - t0) / adds
    t0 = clock()
    timeline.lookup(new[-1].interval)
    refresh = clock() - t0
    print(
        f"  add next chunk at the end    {fmt_us(add)}  per chunk of {per}; "
        f"then one read refreshes {adds:,} chunks in {refresh * 1e3:.1f} ms"
    )
    for seg in new:
        timeline.remove(seg.id)
    lookup(everything)
    t0 = clock()
    for k in range(adds):
        for seg in new[k * per : (k + 1) * per]:
            timeline.add(seg)
        lookup(new[k * per].interval)
    add_read = (clock() - t0) / adds
    print(f"  add next chunk + read it     {fmt_us(add_read)}  (refresh included)")

    # Late data: a new version of one interval in the middle, read, then removed again.
    late_picks = [rng.randrange(count) for _ in range(adds)]
    late = [
        SegmentRef(f"late_{k}_{p}", chunks[c], f"2024-late-{k:06d}", p, core_partitions=per)
        for k, c in enumerate(late_picks)
        for p in range(per)
    ]
    t0 = clock()
    for k in range(adds):
        for seg in late[k * per : (k + 1) * per]:
            timeline.add(seg)
        lookup(chunks[late_picks[k]])
    late_s = (clock() - t0) / adds
    print(f"  late version of one chunk    {fmt_us(late_s)}  (add + read, refresh included)")
    t0 = clock()
    for k in range(adds):
        for seg in late[k * per : (k + 1) * per]:
            timeline.remove(seg.id)
        lookup(chunks[late_picks[k]])
    unlate_s = (clock() - t0) / adds
    print(f"  remove it again              {fmt_us(unlate_s)}  (remove + read, refresh included)")
    beyond = Interval(START, START + (count + adds) * step)
    assert lookup(beyond) == [(s.interval, s) for s in segments + new]
    del timeline
    gc.collect()

    if memory:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        measured = Timeline.build(segments)
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        del measured
        gc.collect()
        sample = min(count, max(1, 50_000 // per))
        tracemalloc.start()
        before_refs = tracemalloc.get_traced_memory()[0]
        kept = shape_segments(step, sample, per)
        refs = tracemalloc.get_traced_memory()[0] - before_refs
        tracemalloc.stop()
        del kept
        tl_bytes = (after - before) / len(segments)
        ref_bytes = refs / (sample * per)
        print(f"  memory: Timeline             {tl_bytes:9.0f} B/segment")
        print(
            f"  memory: SegmentRefs          {ref_bytes:9.0f} B/segment  "
            f"(Druid-style ids; {tl_bytes + ref_bytes:.0f} B/segment in all)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default=None, help="comma-separated N values (default 10,100,1000)")
    parser.add_argument(
        "--shapes",
        default=None,
        help="comma-separated GRANULARITY:SEGMENTS_PER_INTERVAL (default: DAY, HOUR, MINUTE x 1, 10)",
    )
    parser.add_argument("--days", type=int, default=None, help="span of --shapes (default 365)")
    parser.add_argument("--lookups", type=int, default=None)
    parser.add_argument("--adds", type=int, default=None)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc builds")
    parser.add_argument("--quick", action="store_true", help="N=10 and 30 days: a cheap run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = parser.parse_args()
    global clock
    if args.wall:
        clock = time.perf_counter
    quick = args.quick
    ns = args.n if args.n is not None else ("10" if quick else "10,100,1000")
    shapes = args.shapes
    if shapes is None:
        shapes = "DAY:10,DAY:1,HOUR:10,HOUR:1,MINUTE:10,MINUTE:1"
    days_ = args.days if args.days is not None else (30 if quick else 365)
    lookups = args.lookups if args.lookups is not None else (500 if quick else 2000)
    adds = args.adds if args.adds is not None else (500 if quick else 2000)
    rng = random.Random(args.seed)
    print(f"Python {sys.version.split()[0]}; {'wall-clock' if args.wall else 'CPU'} time")
    for n in (int(x) for x in ns.split(",") if x):
        bench(n, lookups, adds, rng)
    for shape in (x for x in shapes.split(",") if x):
        name, _, per = shape.partition(":")
        bench_shape(
            name.upper(),
            int(per or 10),
            days_,
            lookups,
            not args.no_memory,
            random.Random(args.seed),
        )


if __name__ == "__main__":
    main()
