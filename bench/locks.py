"""Lock-box benchmark on PostgreSQL: 8 concurrent clients acquire+release EXCLUSIVE
time-chunk locks (each also allocates one segment), printing throughput, p50/p99
latency and allocations per second. Not a test.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/strata_bench python bench/locks.py [--clients 8] [--requests 300]
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/strata_bench")
    name = url.rsplit("/", 1)[1]
    admin = url.rsplit("/", 1)[0] + "/postgres"
    subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    env = {**os.environ, "DATABASE_URL": url, "PYTHONPATH": str(ROOT), "STRATA_LOG_LEVEL": "WARNING"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.lock_stress_worker", str(i), str(args.requests), str(i), "bench"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
        )
        for i in range(args.clients)
    ]
    results = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    wall = time.perf_counter() - started
    lat = sorted(x for r in results for x in r["latencies"])
    allocs = [x for r in results for x in r["allocations"]]
    total = len(lat)
    busy = max(sum(r["latencies"]) for r in results)
    print(f"clients: {args.clients}, acquire+release cycles: {total}")
    print(f"throughput: {total / busy:,.0f} acquire+release/s (client busy time), "
          f"{total / wall:,.0f}/s including process start-up")
    print(f"latency p50: {statistics.median(lat) * 1000:.1f} ms, "
          f"p99: {lat[int(0.99 * (total - 1))] * 1000:.1f} ms")
    print(f"allocations: {len(allocs)}, {args.clients * len(allocs) / max(sum(allocs), 1e-9):,.0f}/s "
          f"with {args.clients} clients (mean {statistics.mean(allocs) * 1000:.2f} ms each)")
    print("targets: >= 500 acquire+release/s, p99 <= 50 ms, >= 1,000 allocations/s")


if __name__ == "__main__":
    main()
