"""What the broker holds: the Strata task ids of the run_task messages waiting in
the queue or delivered and not yet acknowledged, as the Redis transport keeps
them. The reaper reads it before it queues a PENDING task again
(`workers.reaper.requeue_lost_tasks`).

Named `broker_queue`, not `queue`, so that it never stands for the standard
library's `queue` module.
"""

from __future__ import annotations

import base64
import json
import logging

from metastore.services.tasks import RUN_TASK

log = logging.getLogger("workers.tasks")


def queued_task_ids() -> set[str] | None:
    """The Strata task ids of the run_task messages in the default queue or
    delivered and unacknowledged, as the Redis transport keeps them; None if the
    broker cannot be read."""
    from celery import current_app

    queue = current_app.conf.task_default_queue
    try:
        with current_app.connection_for_read() as conn:
            channel = conn.default_channel
            client = channel.client
            raw = []
            for priority in channel.priority_steps:
                raw.extend(client.lrange(channel._q_for_pri(queue, priority), 0, -1))
            raw.extend(client.hvals(channel.unacked_key))
    except Exception as exc:  # a broker that is down or is not Redis
        log.warning("could not read the broker's queue (%s: %s)", type(exc).__name__, exc)
        return None
    ids = set()
    for item in raw:
        task_id = run_task_argument(item)
        if task_id is not None:
            ids.add(task_id)
    return ids


def run_task_argument(raw: bytes) -> str | None:
    """The task id a run_task message carries (a queued message, or an unacked
    one stored as [message, exchange, routing key]); None for anything else."""
    try:
        message = json.loads(raw)
        if isinstance(message, list):
            message = message[0]
        if message.get("headers", {}).get("task") != RUN_TASK:
            return None
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return args[0] if args and isinstance(args[0], str) else None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
