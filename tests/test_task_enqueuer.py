"""`services.task_enqueuer`: the public seam through which tests, benchmarks and
one-process scripts keep tasks off the broker (or route them elsewhere)."""

from __future__ import annotations

import pytest

from metastore import services
from metastore.models import Task, TaskStatus

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_submitted_task_is_handed_to_the_sender_once_committed(inline_spec):
    sent: list[str] = []
    with services.task_enqueuer(sent.append):
        task = services.task_submit(spec=inline_spec("wiki"))
        assert services.task_enqueue(task_id="again") is True
    assert sent == [task.id, "again"]
    assert Task.objects.get(id=task.id).status == TaskStatus.PENDING


def test_the_sender_is_restored_when_the_block_ends_even_on_an_error():
    outer: list[str] = []
    inner: list[str] = []
    with services.task_enqueuer(outer.append):
        with pytest.raises(RuntimeError), services.task_enqueuer(inner.append):
            services.task_enqueue(task_id="a")
            raise RuntimeError("boom")
        services.task_enqueue(task_id="b")
    assert (outer, inner) == (["b"], ["a"])


def test_none_keeps_tasks_off_the_queue_and_a_failing_sender_is_a_broker_outage(
    inline_spec, no_enqueue
):
    task = services.task_submit(spec=inline_spec("wiki"))
    assert services.task_enqueue(task_id=task.id) is True

    def down(task_id: str) -> None:
        raise ConnectionError("broker down")

    with services.task_enqueuer(down):
        assert services.task_enqueue(task_id=task.id) is False
    assert Task.objects.get(id=task.id).status == TaskStatus.PENDING
