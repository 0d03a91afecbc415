"""A fix to kombu's Redis transport, applied wherever the Celery app is loaded.

When Redis goes away while a worker holds an unacknowledged message (a running
task: Strata's tasks are acks_late), Celery closes the lost connection, which
detaches the channel from its transport. kombu 5.7.0's Redis channel then
reaches for a new connection pool twice on that detached channel -- to put the
unacked messages back while closing, and to acknowledge the message when the
task ends -- and fails with an AttributeError (`'NoneType' object has no
attribute 'hostname'` / `'client'`) that escapes Celery's handling of
connection errors: the first kills the consumer, so the worker never
reconnects; the second is an "Unrecoverable error" that stops the worker (the
same family as celery/kombu#582 and #970).

Here a detached channel raises redis' ConnectionError instead, which Celery
already handles: the close goes on, the late ack is logged as not sent, and the
worker reconnects. Nothing is lost: Redis keeps a delivered message in its
`unacked` hash until it is acknowledged and hands it out again after the
visibility timeout (a redelivered run_task finds its task claimed and does
nothing), and a PENDING task whose message a restarted Redis lost is queued
again by the reaper (`workers.reaper.requeue_lost_tasks`).
"""

from __future__ import annotations

from kombu.transport import redis as kombu_redis

_original_connparams = kombu_redis.Channel._connparams


def _connparams(self, asynchronous=False):
    transport = getattr(self, "connection", None)
    if transport is None or getattr(transport, "client", None) is None:
        from redis.exceptions import ConnectionError as RedisConnectionError

        raise RedisConnectionError("the broker connection of this channel is closed")
    return _original_connparams(self, asynchronous=asynchronous)


def install() -> None:
    if kombu_redis.Channel._connparams is not _connparams:
        kombu_redis.Channel._connparams = _connparams
