"""Lock-box benchmark on PostgreSQL: 8 concurrent client processes. Not a test.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/strata_bench python bench/locks.py \
        [--clients 8] [--operations 1000] [--phases lock,alloc,alloc_batch,lifecycle,contended]

Prints, per phase (see bench/lock_client.py), operations per second over the
wall time from "go" to the last client's end, and p50/p99 latency per call.
Targets (issue 4): >= 500 acquire+release/s, p99 <= 50 ms, >= 1,000
allocations/s. The baseline measured in the same run is the database's floor:
the same clients doing one trivial transaction (BEGIN; SELECT 1; COMMIT) per
operation through Django, so the ratio says how close the lock box is to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = ["floor", "lock", "handoff", "alloc", "alloc_batch", "lifecycle", "contended"]
UNITS = {
    "floor": "trivial transactions",
    "lock": "acquire+release",
    "handoff": "acquire+release of one day by every client (waiting)",
    "alloc": "allocations",
    "alloc_batch": "allocations (batches of 50)",
    "lifecycle": "task lifecycles (create, claim, lock, allocate, end)",
    "contended": "contended decisions",
}


def run_phase(phase: str, clients: int, operations: int, env: dict) -> dict:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "bench" / "lock_client.py"),
                str(i),
                str(operations),
                phase,
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(clients)
    ]
    for p in procs:
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"client failed to start: {line!r}")
    go = time.time()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"client failed in phase {phase}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["ended"] for r in results) - go
    lat = sorted(x for r in results for x in r["latencies"])
    return {
        "count": sum(r["count"] for r in results),
        "granted": sum(r["granted"] for r in results),
        "wall": wall,
        "p50": statistics.median(lat),
        "p99": lat[int(0.99 * (len(lat) - 1))],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--phases", default=",".join(PHASES))
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/strata_bench")
    if not url.startswith("postgres"):
        raise SystemExit("bench/locks.py measures PostgreSQL: set DATABASE_URL=postgres://...")
    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench",
        "PYTHONPATH": str(ROOT),
        "STRATA_LOG_LEVEL": "WARNING",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    print(f"{args.clients} client processes, {args.operations} operations each, PostgreSQL")
    floor = None
    for phase in args.phases.split(","):
        ops = args.operations // 5 if phase == "alloc_batch" else args.operations
        r = run_phase(phase, args.clients, ops, env)
        rate = r["count"] / r["wall"]
        if phase == "floor":
            floor = rate
        extra = f", {r['granted']} granted" if phase == "contended" else ""
        ratio = f" ({rate / floor:.2f} of the floor)" if floor and phase != "floor" else ""
        print(
            f"{phase:12} {rate:8,.0f} {UNITS[phase]}/s{ratio}; per call p50 "
            f"{r['p50'] * 1000:.1f} ms, p99 {r['p99'] * 1000:.1f} ms{extra}"
        )
    print("targets: >= 500 acquire+release/s, p99 <= 50 ms, >= 1,000 allocations/s")


if __name__ == "__main__":
    main()
