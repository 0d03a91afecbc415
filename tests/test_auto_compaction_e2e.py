"""Auto-compaction unattended: a real worker (two threads, real Spark) and the real
beat process running the compaction duty every 2 s, while appends at HOUR and DAY
granularity (with late rows up to three days old) keep landing, the last ones
HOUR appends naming their hours (`granularitySpec.intervals`, issue 22's defect
B setting) submitted while a DAY compaction runs. At the end no task failed,
every row id is read back once through SQL, every visible segment's `num_rows`
is the rows its file holds, and every interval is compacted as the config asks."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta

import pyarrow.parquet as pq
import pytest
from conftest import REPO, _database_url, _stop_process_group

from metastore import selectors, services
from metastore.intervals import ETERNITY, Interval
from metastore.models import ACTIVE_STATUSES, FINAL_STATUSES, Segment, Task, TaskStatus
from metastore.selectors.compaction import compaction_plans

pytestmark = [pytest.mark.spark, pytest.mark.e2e]

DS = "stream"
START_TIMEOUT_S = 180
SETTLE_TIMEOUT_S = 2400


@pytest.fixture
def worker_and_beat(transactional_db, redis_url, strata_dirs, tmp_path):
    """`celery worker -P threads -c 2` and `celery beat` (the duty every 2 s) on a
    queue of their own; this process enqueues there too."""
    from django.db import connection

    from console.celery import app

    queue = f"strata-autocompact-{uuid.uuid4().hex[:8]}"
    session_queue = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    nodename = f"{queue}@{socket.gethostname()}"
    env = dict(os.environ)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    env.update(strata_dirs.env())
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "DATABASE_URL": _database_url(connection.settings_dict),
            "REDIS_URL": redis_url,
            "STRATA_QUEUE": queue,
            "SPARK_SHUFFLE_PARTITIONS": "2",
            "STRATA_HEARTBEAT_SECONDS": "0.5",
            "STRATA_COMPACTION_PERIOD_SECONDS": "2",
            "PYTHONUNBUFFERED": "1",
        }
    )
    worker_argv = [sys.executable, "-m", "celery", "-A", "console", "worker", "-P", "threads"]
    worker_argv += ["-c", "2", "-Q", queue, "-n", nodename, "--loglevel", "INFO"]
    worker_argv += ["--without-gossip", "--without-mingle"]
    beat_argv = [sys.executable, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO"]
    beat_argv += ["--schedule", str(tmp_path / "beat-schedule")]
    procs, logs = {}, {}
    for name, argv in (("worker", worker_argv), ("beat", beat_argv)):
        logs[name] = open(tmp_path / f"{name}.log", "wb")  # noqa: SIM115 - closed below
        procs[name] = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=logs[name],
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def tail(name: str) -> str:
        return (tmp_path / f"{name}.log").read_text(errors="replace")[-5000:]

    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not app.control.ping(destination=[nodename], timeout=1.0):
            if procs["worker"].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the worker did not start:\n{tail('worker')}")
        yield tail
    finally:
        # Off first: the duty submits nothing more; then what runs is canceled.
        services.compaction_config_delete(datasource=DS)
        for task in Task.objects.filter(status__in=ACTIVE_STATUSES):
            services.task_cancel(task_id=task.id)
        for proc in procs.values():
            _stop_process_group(proc, grace_s=30)
        for log in logs.values():
            log.close()
        app.conf.task_default_queue = session_queue


def append_spec(
    inline_spec, n: int, granularity: str, name_hours: bool = False
) -> tuple[dict, list[str]]:
    """Rows for 2024-01-01..03 (the older days are late data), each with its own id;
    with `name_hours`, the spec's granularitySpec.intervals are the rows' hours."""
    rows, ids, hours = [], [], []
    for day in (1, 2, 3):
        for hour in (1 + n, 12 + n, 23):
            rid = f"a{n}-{day}-{hour}"
            ids.append(rid)
            rows.append({"ts": f"2024-01-0{day}T{hour:02d}:{n:02d}:00Z", "page": rid, "added": 1})
            start = datetime(2024, 1, day, hour, tzinfo=UTC)
            hours.append(
                f"{start:%Y-%m-%dT%H}:00:00Z/{start + timedelta(hours=1):%Y-%m-%dT%H}:00:00Z"
            )
    spec = inline_spec(
        DS,
        data="\n".join(json.dumps(r) for r in rows),
        segment_granularity=granularity,
        intervals=hours if name_hours else None,
        context={"useConcurrentLocks": True},
    )
    spec["spec"]["ioConfig"]["appendToExisting"] = True
    return spec, ids


def wait_for(predicate, what: str, tail, timeout: float = SETTLE_TIMEOUT_S, poll: float = 1.0):
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out waiting for {what}\nworker:\n{tail('worker')}\nbeat:\n{tail('beat')}"
            )
        time.sleep(poll)
    return value


def settled() -> bool:
    """Nothing runs and every interval is compacted as configured."""
    if Task.objects.filter(status__in=ACTIVE_STATUSES).exists():
        return False
    statuses = compaction_plans(datasource=DS).statuses.get(DS, [])
    return bool(statuses) and all(st.status == "compacted" for st in statuses)


@pytest.mark.timeout(3600)  # Spark jobs one after another, on a busy machine
def test_auto_compaction_under_concurrent_appends_loses_and_duplicates_nothing(
    worker_and_beat, inline_spec, api_client
):
    tail = worker_and_beat
    expected: list[str] = []
    appends = []

    def submit(n: int, granularity: str, name_hours: bool = False) -> str:
        spec, ids = append_spec(inline_spec, n, granularity, name_hours)
        expected.extend(ids)
        task_id = services.task_submit(spec=spec).id
        appends.append(task_id)
        return task_id

    def ended(task_id: str) -> None:
        wait_for(
            lambda: Task.objects.filter(id=task_id, status__in=FINAL_STATUSES).exists(),
            f"append {task_id}",
            tail,
        )

    def append(n: int, granularity: str, name_hours: bool = False) -> None:
        ended(submit(n, granularity, name_hours))

    # Mixed granularities: HOUR and DAY chunks in the same days, then compaction on.
    append(0, "HOUR")
    append(1, "DAY")
    services.compaction_config_set(
        data={
            "dataSource": DS,
            "skipOffsetFromLatest": "PT0S",
            "granularitySpec": {"segmentGranularity": "DAY"},
        },
        author="test",
    )
    services.compaction_cluster_set(slot_ratio=1.0, max_slots=1)
    wait_for(lambda: Task.objects.filter(type="compact").exists(), "a compaction", tail)
    # Late data into every day while the duty's compactions run, one append at a time.
    for n in (2, 3, 4):
        append(n, "DAY")
    # HOUR appends that lock their hours first, each submitted while the duty's DAY
    # compaction runs (issue 22's defect B setting: the hour's chunk changes under it).
    # The duty compacts as soon as an append succeeds, so by now every day may be
    # compacted and nothing running: a DAY append makes its days eligible again,
    # and the HOUR append goes in the moment the duty's compaction is active.
    hourly = []
    for n in (5, 6):
        known = list(Task.objects.filter(type="compact").values_list("id", flat=True))
        day = submit(n, "DAY")
        wait_for(
            lambda known=known: (
                Task.objects.filter(type="compact", status__in=ACTIVE_STATUSES)
                .exclude(id__in=known)
                .exists()
            ),
            "a compaction after a DAY append",
            tail,
            poll=0.05,
        )
        hourly.append(submit(n + 2, "HOUR", name_hours=True))
        ended(day)
        ended(hourly[-1])
    for task in Task.objects.filter(id__in=appends):
        assert task.status == TaskStatus.SUCCESS, (task.id, task.error)
    overlapped = [
        a.id
        for a in Task.objects.filter(id__in=appends)
        if Task.objects.filter(
            type="compact", started_at__lt=a.ended_at, ended_at__gt=a.started_at
        ).exists()
        or Task.objects.filter(type="compact", started_at__lt=a.ended_at, ended_at=None).exists()
    ]
    assert overlapped, "no append ran while a compaction ran"
    assert set(hourly) & set(overlapped), "no HOUR append ran while a compaction ran"
    wait_for(settled, "every interval compacted", tail)

    assert not Task.objects.filter(status=TaskStatus.FAILED).exists(), list(
        Task.objects.filter(status=TaskStatus.FAILED).values_list("id", "error")
    )
    compactions = Task.objects.filter(type="compact")
    assert compactions.filter(status=TaskStatus.SUCCESS).exists()
    assert all(t.id.startswith("coordinator-issued_compact_stream_") for t in compactions)
    assert all(t.spec["context"]["useConcurrentLocks"] for t in compactions)
    # One slot and several days eligible at once: a task took its neighbours along.
    spans = [Interval.parse(t.spec["ioConfig"]["inputSpec"]["interval"]) for t in compactions]
    assert any(span.duration > timedelta(days=1) for span in spans), spans
    # Appends lock each day: a compaction's REPLACE lock on one day is never revoked.
    assert not compactions.filter(error__contains="preempted").exists()

    body = api_client.post(
        "/api/v1/query", {"sql": f'SELECT page, "count" FROM {DS}'}, format="json"
    ).json()
    pages = sorted(row[0] for row in body["rows"])
    assert pages == sorted(expected)  # none lost, none duplicated
    assert all(row[1] == 1 for row in body["rows"])

    locations = dict(Segment.objects.filter(datasource__name=DS).values_list("id", "location"))
    visible = [ref for _, ref in selectors.timeline_for(datasource=DS).lookup(ETERNITY)]
    facts = selectors.segment_facts(ids=[ref.id for ref in visible])
    total = 0
    for ref in visible:
        if ref.tombstone:
            continue
        in_file = pq.ParquetFile(locations[ref.id]).metadata.num_rows
        assert facts[ref.id][0] == in_file, ref.id
        total += in_file
    assert total == len(expected)
    states = Segment.objects.filter(id__in=[r.id for r in visible]).values_list(
        "compaction_state", flat=True
    )
    assert all(s and s["granularitySpec"]["segmentGranularity"] == "DAY" for s in states)
