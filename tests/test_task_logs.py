"""Task logs (issue 25): the driver JVM's output of a task run in a slot process
is in the task's log, served by Druid's endpoint and shown on the task page; a
log is capped with its beginning and end kept; old logs are removed."""

from __future__ import annotations

import gzip
import os
import re
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from metastore import services
from metastore.models import TaskStatus
from metastore.task_logs import cut_log, task_log_append, task_log_path
from workers.cleanup import remove_old_task_logs
from workers.slots import copy_driver_log

LINE = re.compile(rb"line (\d{5}) [a-z]+\n")
ISO_UTC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
JVM_LINE = re.compile(rb"\S+ [A-Z]+ jvm[.:]")


def numbered(first: int, count: int) -> bytes:
    return b"".join(b"line %05d %s\n" % (i, b"x" * (i % 23)) for i in range(first, first + count))


def test_a_log_past_its_cap_keeps_its_beginning_and_end_and_says_how_much_was_cut(tmp_path):
    path = tmp_path / "task.log"
    cap = 4096
    written = b""
    for chunk in range(40):  # past the cap several times: cuts add up
        data = numbered(chunk * 10, 10)
        task_log_append(path, data, max_bytes=cap)
        written += data

    text = path.read_bytes()
    assert len(text) <= cap
    head, marker, tail = re.split(rb"\n(\[\.\.\. \d+ bytes of this log cut here[^\n]*)\n", text)
    assert b"STRATA_TASK_LOG_MAX_BYTES=4096" in marker
    assert written.startswith(head + b"\n") and written.endswith(tail)
    cut = int(re.search(rb"(\d+) bytes", marker)[1])
    assert cut == len(written) - len(head) - 1 - len(tail)  # every byte accounted for
    # Whole lines on both sides, the newest line last.
    assert LINE.fullmatch(head.split(b"\n")[-1] + b"\n")
    assert tail.endswith(numbered(399, 1)) and LINE.match(tail)
    assert cut_log(text, cap) == text  # a log within its cap is left alone


def test_writers_of_one_log_lose_no_line_while_it_is_cut(tmp_path):
    """The worker's thread, the slot process and the JVM copier append to the
    same file; each append and cut holds the file's lock."""
    path = tmp_path / "task.log"

    def write(writer: int) -> None:
        for i in range(300):
            task_log_append(path, b"writer %d line %05d\n" % (writer, i), max_bytes=16384)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = path.read_bytes().split(b"\n")
    marker = next(i for i, line in enumerate(lines) if line.startswith(b"[... "))
    for w in range(4):  # after the cut, each writer's lines run on without a gap to its last
        mine = [
            int(x.split()[-1]) for x in lines[marker + 1 : -1] if x.startswith(b"writer %d" % w)
        ]
        assert not mine or mine == list(range(mine[0], 300)), (w, mine[:5])
    assert lines[-2].endswith(b" line 00299")


def test_the_driver_log_is_copied_in_whole_lines_in_the_task_logs_own_format(tmp_path):
    jvm, task = tmp_path / "slot.jvm.log", tmp_path / "task.log"
    jvm.write_bytes(b"before the task\n")
    start = jvm.stat().st_size
    with jvm.open("ab") as f:
        f.write(b"26/11/26 07:00:00 ERROR Executor: Exception in task 0.0\n\tat x.y(Z.java:1)\n")
        f.write(b"2026-11-26T07:22:10.997036694Z Executor task (TID 3) ERROR Exception in task\n")
        f.write(b"Caused by: it\npart")
    local = time.mktime((2026, 11, 26, 7, 0, 0, 0, 0, -1))  # log4j writes the JVM's local time
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(local)).replace("Z", ".000Z")

    copied = copy_driver_log(jvm, start, task)

    first, second, third, fourth = task.read_text().splitlines()
    assert first == f"{at} ERROR jvm.Executor: Exception in task 0.0"
    assert re.fullmatch(ISO_UTC + r" ERROR jvm: \tat x\.y\(Z\.java:1\)", second)
    assert third == "2026-11-26T07:22:10.997Z ERROR jvm: [Executor task (TID 3)] Exception in task"
    assert re.fullmatch(ISO_UTC + " ERROR jvm: Caused by: it", fourth)
    assert copy_driver_log(jvm, copied, task) == copied  # "part" waits for its line's end
    assert copy_driver_log(jvm, copied, task, final=True) == jvm.stat().st_size
    assert re.fullmatch(ISO_UTC + " WARNING jvm: part", task.read_text().splitlines()[-1])


def test_a_slot_processes_logs_are_emptied_between_tasks_once_past_the_cap(tmp_path):
    from workers.slots import SlotProcess

    slot = SlotProcess(
        process=None, conn=None, log_path=tmp_path / "s.log", jvm_log_path=tmp_path / "s.jvm.log"
    )
    with slot.jvm_log_path.open("ab") as jvm, slot.log_path.open("ab") as own:
        jvm.write(b"x" * 5000)
        own.write(b"y" * 100)
        jvm.flush()
        own.flush()
        slot.trim_logs(4096)
        jvm.write(b"after\n")  # the JVM writes on, in append mode: at the new end
    assert slot.jvm_log_path.read_bytes() == b"after\n"
    assert slot.log_path.read_bytes() == b"y" * 100  # under the cap: kept


@pytest.mark.django_db
def test_logs_older_than_the_retention_are_removed_except_an_active_tasks(
    claimed_task, strata_dirs, settings
):
    settings.STRATA_TASK_LOG_RETENTION = "P30D"
    active = claimed_task("logs_active")
    ended = claimed_task("logs_ended")
    services.task_finish(task_id=ended.id, status=TaskStatus.SUCCESS)
    recent = claimed_task("logs_recent")
    services.task_finish(task_id=recent.id, status=TaskStatus.SUCCESS)
    slot_log = strata_dirs.data / "slot-logs" / "old-slot.jvm.log"
    slot_log.parent.mkdir(exist_ok=True)
    slot_log.write_text("old\n")
    old = time.time() - timedelta(days=31).total_seconds()
    for task in (active, ended, recent):
        task_log_path(task.id).parent.mkdir(parents=True, exist_ok=True)
        task_log_append(task_log_path(task.id), b"a line\n")
    for path in (task_log_path(active.id), task_log_path(ended.id), slot_log):
        os.utime(path, (old, old))

    removed = remove_old_task_logs(now=timezone.now())

    assert set(removed) == {task_log_path(ended.id), slot_log}
    assert task_log_path(active.id).exists() and task_log_path(recent.id).exists()


# --- a task's driver JVM output, end to end ------------------------------------------------


@pytest.mark.e2e
@pytest.mark.spark
@pytest.mark.django_db(transaction=True)
def test_a_failed_spark_job_shows_the_driver_jvms_errors_in_the_task_log(
    worker, wait_for_task, api_client, client, user, strata_dirs
):
    """The session's worker runs tasks in slot processes: a gzip file that is not
    one fails the Spark job reading it, and what Spark's JVM logged about it is
    in the task's log, in Druid's endpoint (with offset) and on the task page."""
    base = strata_dirs.input_root / "jvm-log"
    base.mkdir(exist_ok=True)
    (base / "broken.json.gz").write_bytes(b"this is not gzip\n" * 64)
    (base / "good.json.gz").write_bytes(gzip.compress(b'{"ts": "2024-01-01T00:00:00Z"}\n'))
    spec = {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "jvm_log",
                "timestampSpec": {"column": "ts", "format": "iso"},
                "dimensionsSpec": {"dimensions": []},
                "granularitySpec": {"segmentGranularity": "DAY", "queryGranularity": "NONE"},
            },
            "ioConfig": {
                "type": "index_parallel",
                "inputSource": {"type": "local", "baseDir": str(base), "filter": "*.json.gz"},
                "inputFormat": {"type": "json"},
            },
        },
    }
    task = wait_for_task(services.task_submit(spec=spec, user=user).id)
    assert task.status == TaskStatus.FAILED

    url = f"/druid/indexer/v1/task/{task.id}/log"
    whole = api_client.get(url).content
    lines = whole.decode().splitlines()
    jvm = [i for i, line in enumerate(lines) if JVM_LINE.match(line.encode())]
    errors = [lines[i] for i in jvm if " ERROR jvm" in lines[i]]
    assert errors, "\n".join(lines[i][:300] for i in jvm[:30])
    assert any("broken.json.gz" in line for line in errors), errors
    # Spark's log4j layout (the logger's name kept), and no warning about an
    # unconfigured scheduler pool: a slot's driver runs one task, FIFO.
    assert any(" ERROR jvm." in line for line in errors), errors
    assert b"has not been configured" not in whole
    # In the task log's own format (no raw log4j line), before the task's last line.
    assert all(re.match(ISO_UTC + r" [A-Z]+ jvm(\.[\w$.-]+)?: ", lines[i]) for i in jvm)
    raw = r"\d\d/\d\d/\d\d \d\d:|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{4,}Z "  # log4j's own times
    assert not [line for line in lines if re.match(raw, line)]
    assert max(jvm) < max(i for i, line in enumerate(lines) if "ended FAILED" in line)
    assert api_client.get(url, {"offset": -200}).content == whole[-200:]

    client.force_login(user)
    page = client.get(f"/tasks/{task.id}").content.decode()
    shown = re.search(r'<pre class="task-log"[^>]*>(.*?)</pre>', page, re.S)[1]
    assert " ERROR jvm" in shown and "broken.json.gz" in shown
