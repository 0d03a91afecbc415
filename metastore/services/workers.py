"""Task workers: each registers its capacity (task slots) with a heartbeat."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from metastore.models import Worker


def worker_heartbeat(
    *,
    name: str,
    capacity: int,
    nodename: str = "",
    queues: Sequence[str] = (),
    processes: Sequence[str] = (),
) -> Worker:
    """Record that the worker `name` is alive with `capacity` task slots."""
    if capacity < 1:
        raise ValueError(f"a worker has 1 or more task slots, not {capacity}")
    worker, _ = Worker.objects.update_or_create(
        name=name,
        defaults={
            "capacity": capacity,
            "nodename": nodename,
            "queues": sorted(queues),
            "processes": sorted(processes),
            "heartbeat_at": timezone.now(),
        },
    )
    return worker


def worker_stopped(*, name: str) -> None:
    """The worker `name` stops: its slots are gone at once (not at its heartbeat's expiry)."""
    Worker.objects.filter(name=name).delete()
