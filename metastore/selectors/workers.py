"""The live workers and who holds their task slots."""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dc_field
from datetime import datetime, timedelta

from metastore.models import Task, TaskStatus, Worker


@dataclass(frozen=True)
class TaskSlot:
    """One task slot: the task that holds it (RUNNING, or WAITING for a lock), or None."""

    number: int
    task: Task | None


@dataclass(frozen=True)
class LiveWorker:
    """A worker whose heartbeat is recent, with its task slots and what holds them."""

    name: str
    nodename: str
    queues: list[str]
    capacity: int
    heartbeat_at: datetime
    tasks: list[str]  # the ids of the tasks it runs (RUNNING or WAITING)

    @property
    def busy(self) -> int:
        return len(self.tasks)

    @property
    def free(self) -> int:
        return max(0, self.capacity - self.busy)


@dataclass(frozen=True)
class TaskSlots:
    """Who holds the task slots, and the PENDING tasks queued for one.

    The capacity is the sum of the live workers' slots (each registers its own
    with its heartbeat), not a setting: a stopped or lost worker's slots are
    gone. A WAITING task holds its slot (its worker waits for the lock); a
    PENDING task has no slot yet. `pending_for_slot` says whether the PENDING
    tasks wait because every slot is taken (rather than being about to start);
    `no_worker` that no worker is alive to run them at all."""

    capacity: int
    slots: list[TaskSlot]
    pending: list[Task]
    pending_count: int
    workers: list[LiveWorker] = dc_field(default_factory=list)

    @property
    def busy(self) -> int:
        return sum(1 for slot in self.slots if slot.task is not None)

    @property
    def free(self) -> int:
        return len(self.slots) - self.busy

    @property
    def no_worker(self) -> bool:
        return not self.workers

    @property
    def pending_for_slot(self) -> bool:
        return self.pending_count > 0 and self.free == 0


_SLOT_FIELDS = (
    "id",
    "type",
    "datasource",
    "status",
    "priority",
    "created_at",
    "started_at",
    "phase",
    "progress",
    "worker",
    "waiting_on",
    "waiting_since",
)


def live_workers(*, now: datetime | None = None) -> list[Worker]:
    """Workers whose last heartbeat is within STRATA_HEARTBEAT_TIMEOUT."""
    from django.conf import settings
    from django.utils import timezone

    since = (now or timezone.now()) - timedelta(seconds=float(settings.STRATA_HEARTBEAT_TIMEOUT))
    return list(Worker.objects.filter(heartbeat_at__gte=since).order_by("name"))


def task_slots(*, pending_limit: int = 50) -> TaskSlots:
    """The live workers' task slots with their tasks in start order, then the
    PENDING tasks oldest first (at most `pending_limit`). Three queries.

    Should more tasks run than the live workers have slots (a worker lost
    with its tasks not yet reaped), every one is shown, in slots beyond them."""
    workers = live_workers()
    holders = list(
        Task.objects.filter(status__in=(TaskStatus.RUNNING, TaskStatus.WAITING))
        .only(*_SLOT_FIELDS)
        .order_by("started_at", "id")
    )
    live = []
    for w in workers:
        processes = set(w.processes or ()) | {w.name}
        live.append(
            LiveWorker(
                name=w.name,
                nodename=w.nodename,
                queues=list(w.queues or ()),
                capacity=w.capacity,
                heartbeat_at=w.heartbeat_at,
                tasks=[t.id for t in holders if t.worker in processes],
            )
        )
    capacity = sum(w.capacity for w in workers)
    slots = [
        TaskSlot(number=n + 1, task=holders[n] if n < len(holders) else None)
        for n in range(max(capacity, len(holders)))
    ]
    pending_qs = Task.objects.filter(status=TaskStatus.PENDING).only(*_SLOT_FIELDS)
    pending = list(pending_qs.order_by("created_at", "id")[: pending_limit + 1])
    pending_count = len(pending) if len(pending) <= pending_limit else pending_qs.count()
    return TaskSlots(
        capacity=capacity,
        slots=slots,
        pending=pending[:pending_limit],
        pending_count=pending_count,
        workers=live,
    )
