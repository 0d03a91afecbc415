"""A waiting task is woken by a release (PostgreSQL LISTEN/NOTIFY), not by its
next poll, and it does not rewrite its task row while nothing changes."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, connections
from test_lockbox import DAY, task

from metastore import services
from metastore.models import Task, TaskStatus
from metastore.services import locks as lock_service

pytestmark = pytest.mark.django_db(transaction=True)


def waiter_thread(waiter, out: dict) -> threading.Thread:
    def run():
        try:
            out["lock"] = services.lock_acquire(task=waiter, interval=DAY, timeout_ms=120_000)
            out["at"] = time.monotonic()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def wait_until_waiting(task_id: str) -> None:
    deadline = time.monotonic() + 60
    while Task.objects.get(id=task_id).status != TaskStatus.WAITING:
        assert time.monotonic() < deadline, "the waiter never queued"
        time.sleep(0.05)


def task_row_version(task_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text::bigint FROM metastore_task WHERE id = %s", [task_id])
        return cursor.fetchone()[0]


def test_a_release_wakes_the_waiter_long_before_its_fallback_poll(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's; SQLite waiters poll")
    monkeypatch.setattr(lock_service, "LOCK_WAKE_FALLBACK_SECONDS", 60.0)
    holder, waiter = task(50), task(50)
    held = services.lock_acquire(task=holder, interval=DAY)
    out: dict = {}
    thread = waiter_thread(waiter, out)
    wait_until_waiting(waiter.id)
    released = time.monotonic()
    services.lock_release(lock_id=held.id)
    thread.join(timeout=50)
    assert "lock" in out, "the waiter was not woken by the release"
    assert out["at"] - released < 30  # its next poll was 60 s away


def test_a_waiter_deciding_again_with_nothing_changed_does_not_rewrite_its_row(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's row version (xmin)")
    monkeypatch.setattr(lock_service, "LOCK_WAKE_FALLBACK_SECONDS", 0.05)
    holder, waiter = task(50), task(50)
    held = services.lock_acquire(task=holder, interval=DAY)
    out: dict = {}
    thread = waiter_thread(waiter, out)
    wait_until_waiting(waiter.id)
    version = task_row_version(waiter.id)
    time.sleep(1.0)  # some twenty decisions, each finding the same blocker
    assert task_row_version(waiter.id) == version
    services.lock_release(lock_id=held.id)
    thread.join(timeout=50)
    assert "lock" in out
    assert Task.objects.get(id=waiter.id).status == TaskStatus.RUNNING
