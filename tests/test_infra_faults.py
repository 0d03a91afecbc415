"""Infrastructure faults (issue 15), on real services of the test's own: a private
PostgreSQL cluster (initdb in a tmp dir, its own port) restarted while a task
publishes, and a private redis-server restarted while a task runs. The shared
services are never touched.

Whatever the moment of the restart, the task either publishes exactly once
(one publish commit, its segments' files all present) or fails cleanly (no
segment, no commit, no lock, no file) and can be resubmitted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

PG_BIN = Path("/usr/lib/postgresql/15/bin")
RUN_TIMEOUT_S = 400


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_postgres(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        argv = ["runuser", "-u", "postgres", "--", *argv]
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120, **kwargs)


class PrivatePostgres:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.log = root / "postgres.log"

    def url(self, db: str = "strata") -> str:
        return f"postgres://root@127.0.0.1:{self.port}/{db}"

    def init(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        as_postgres([str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "root"])

    def _ctl(self, *args: str) -> None:
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        as_postgres(
            [
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                opts,
                "-w",
                *args,
            ]
        )

    def start(self) -> None:
        self._ctl("start")

    def restart(self) -> None:
        self._ctl("restart", "-m", "fast")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("stop", "-m", "immediate")

    def query(self, sql: str, params=()) -> list[tuple]:
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(self.url(), autocommit=True, connect_timeout=3) as conn:
                    return conn.execute(sql, params).fetchall()
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


@pytest.fixture
def private_postgres():
    import psycopg

    if not (PG_BIN / "initdb").exists():
        pytest.fail(f"{PG_BIN}/initdb is missing (PostgreSQL 15 server binaries)")
    root = Path(tempfile.mkdtemp(prefix="strata-pg-", dir="/tmp"))
    pg = PrivatePostgres(root)
    try:
        pg.init()
        pg.start()
        with psycopg.connect(pg.url("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE strata")
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


def env_for(pg: PrivatePostgres, data_dir: Path, redis_url: str) -> dict:
    env = dict(os.environ)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": pg.url(),
            "REDIS_URL": redis_url,
            "STRATA_DATA_DIR": str(data_dir),
            "STRATA_INPUT_ROOTS": str(data_dir / "input"),
            "STRATA_HEARTBEAT_SECONDS": "0.2",
            "SPARK_SHUFFLE_PARTITIONS": "2",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def many_days_spec(datasource: str, days: int = 60) -> dict:
    lines = [
        json.dumps(
            {
                "ts": f"2024-{1 + d // 28:02d}-{1 + d % 28:02d}T0{h}:00:00Z",
                "page": f"p{h}",
                "added": 1,
            }
        )
        for d in range(days)
        for h in range(3)
    ]
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": datasource,
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": ["page"]},
                "metricsSpec": [{"type": "longSum", "name": "added", "fieldName": "added"}],
                "granularitySpec": {
                    "segmentGranularity": "DAY",
                    "queryGranularity": "NONE",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "inline", "data": "\n".join(lines)},
                "inputFormat": {"type": "json"},
            },
        },
    }


RUNNER = """
import django, json, sys
django.setup()
from django.db import transaction
from metastore import services
spec = json.loads(sys.stdin.read())
with services.task_enqueuer(None), transaction.atomic():  # this process runs it
    task = services.task_submit(spec=spec)
    assert services.task_claim(task_id=task.id, worker="infra-test")
print(task.id, flush=True)
from workers.runner import run_task
run_task(task.id)
"""


def start_runner(env: dict, spec: dict, log: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(log, "wb"),  # noqa: SIM115 - the child keeps it
        start_new_session=True,
    )
    proc.stdin.write(json.dumps(spec).encode())
    proc.stdin.close()
    task_id = proc.stdout.readline().decode().strip()
    if not task_id:
        proc.wait(timeout=60)
        pytest.fail(f"the runner did not start:\n{log.read_text(errors='replace')[-3000:]}")
    return proc, task_id


def finish(proc: subprocess.Popen, log: Path) -> None:
    try:
        proc.wait(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the runner hung:\n{log.read_text(errors='replace')[-3000:]}")


def assert_exactly_once_or_clean(
    pg: PrivatePostgres, task_id: str, datasource: str, deep: Path
) -> str:
    ((status, error),) = pg.query(
        "SELECT status, error FROM metastore_task WHERE id = %s", (task_id,)
    )
    commits = pg.query(
        "SELECT added FROM metastore_commitlogentry WHERE task_id = %s AND kind = 'publish'",
        (task_id,),
    )
    segments = pg.query(
        "SELECT id, location FROM metastore_segment WHERE created_by_id = %s", (task_id,)
    )
    locks = pg.query("SELECT count(*) FROM metastore_tasklock WHERE task_id = %s", (task_id,))
    assert locks == [(0,)], locks
    files = (
        sorted(str(p) for p in (deep / datasource).rglob("*.parquet"))
        if (deep / datasource).exists()
        else []
    )
    if status == "SUCCESS":
        assert len(commits) == 1, commits
        assert sorted(commits[0][0]) == sorted(s[0] for s in segments)
        assert sorted(s[1] for s in segments) == files
        assert all(Path(s[1]).exists() for s in segments)
    else:
        assert status == "FAILED", (status, error)
        assert commits == [] and segments == [], (commits, segments)
        assert files == [], files
    return status


def test_postgres_restarted_while_a_task_publishes(private_postgres, redis_url, tmp_path):
    pg = private_postgres
    data = tmp_path / "data"
    (data / "input").mkdir(parents=True)
    env = env_for(pg, data, redis_url)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=300,
    )

    log = tmp_path / "runner.log"
    proc, task_id = start_runner(env, many_days_spec("restarted"), log)
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while True:
        rows = pg.query("SELECT status, phase FROM metastore_task WHERE id = %s", (task_id,))
        if rows and rows[0][1] == "publishing":
            break
        if rows and rows[0][0] in ("SUCCESS", "FAILED", "CANCELED"):
            pytest.fail(f"the task ended before publishing: {rows}")
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no publishing phase:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.02)
    pg.restart()  # terminates every connection, the runner's included
    finish(proc, log)

    status = assert_exactly_once_or_clean(pg, task_id, "restarted", data / "deep")
    print(f"\nPostgreSQL restarted while publishing: the task ended {status}")
    if status == "FAILED":  # it can be resubmitted, and then publishes once
        log2 = tmp_path / "runner2.log"
        proc2, task2 = start_runner(env, many_days_spec("restarted"), log2)
        finish(proc2, log2)
        assert assert_exactly_once_or_clean(pg, task2, "restarted", data / "deep") == "SUCCESS"
    rows = pg.query(
        "SELECT count(*), sum(num_rows) FROM metastore_segment s JOIN metastore_datasource d "
        "ON d.id = s.datasource_id WHERE d.name = 'restarted' AND s.used"
    )
    assert rows == [(60, 180)], rows
