"""Pending segments (issue 22 item 5): after ~90 tasks the metastore held 628
allocations of tasks that had ended SUCCESS. They keep a chunk's partition numbers
from being handed out again (even once its segments are killed) and let the
janitor find what failed tasks left unpublished; nothing else reads them once the
task ended. So an ended task keeps only its chunk's highest number of what it
published, and its unpublished allocations (for the janitor)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from test_lockbox import DAY, DS, publish, task

from metastore import selectors, services
from metastore.allocation_rules import EPOCH_VERSION
from metastore.models import PendingSegment, Segment, TaskStatus

pytestmark = pytest.mark.django_db


def appender():
    t = task(50, useConcurrentLocks=True)
    assert services.lock_try_acquire(task=t, interval=DAY, lock_type="APPEND")
    return t


def test_many_appends_leave_one_pending_row_per_chunk_and_numbers_are_never_reused():
    handed_out = []
    for _ in range(30):
        alloc = publish(appender(), count=2, append=True)  # ends SUCCESS
        handed_out += alloc.partitions
    assert len(set(handed_out)) == 60
    # Before: 60 rows, one per allocation, for ever. Now: the chunk's highest number.
    assert list(PendingSegment.objects.values_list("partition", flat=True)) == [max(handed_out)]

    # Kill every segment of the chunk but the first task's: the chunk stays visible
    # and a later append joins it, after every number ever handed out there.
    first = Segment.objects.filter(partition__in=handed_out[:2])
    others = Segment.objects.exclude(id__in=first.values_list("id", flat=True))
    services.segments_mark_used(
        datasource=DS, used=False, segment_ids=list(others.values_list("id", flat=True))
    )
    killer = task(0, "kill")
    services.lock_acquire(task=killer, interval=DAY)
    services.segments_kill(task=killer, interval=DAY)
    services.task_finish(task_id=killer.id, status=TaskStatus.SUCCESS)
    assert Segment.objects.count() == 2
    alloc = services.segments_allocate(task=appender(), interval=DAY, count=1, append=True)
    assert (alloc.version, alloc.partitions) == (EPOCH_VERSION, (max(handed_out) + 1,))


def test_a_running_append_keeps_its_allocations_and_a_failed_one_keeps_its_unpublished_ones():
    started = timezone.now()
    running, failed, done = appender(), appender(), appender()
    publish(done, count=1, append=True)
    services.segments_allocate(task=running, interval=DAY, count=2, append=True)
    services.segments_allocate(task=failed, interval=DAY, count=2, append=True)
    services.task_finish(task_id=failed.id, status=TaskStatus.FAILED, error="boom")
    # The running task still needs its own (idempotent allocation, what it may publish).
    assert PendingSegment.objects.filter(task=running).count() == 2
    # The janitor still finds what the failed task never published.
    unpublished = selectors.unpublished_allocations(
        ended_after=started, ended_before=timezone.now() + timedelta(seconds=1)
    )
    assert sorted(p.partition for p in unpublished if p.task_id == failed.id) == sorted(
        PendingSegment.objects.filter(task=failed).values_list("partition", flat=True)
    )
    assert len([p for p in unpublished if p.task_id == failed.id]) == 2
    # The succeeded task's row goes once another task of the chunk ends: higher numbers exist.
    assert not PendingSegment.objects.filter(task=done).exists()
