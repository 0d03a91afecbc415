"""The Django admin: its pages load for a superuser, and what it changes goes
through the services (so the commit log records it)."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.utils import quote

from metastore import services
from metastore.models import CommitKind, CommitLogEntry, Segment, Task, TaskStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def admin_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def segments(publish):
    published = publish(
        "wiki", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 2, "2024-01-02/2024-01-03": 1}
    )
    return published.segment_ids


def change_url(model: str, pk: str) -> str:
    return f"/admin/metastore/{model}/{quote(pk)}/change/"


def test_admin_pages_load(admin_client, segments, claimed_task):
    from metastore.intervals import Interval

    holder = claimed_task("wiki")
    services.lock_acquire(task=holder, interval=Interval.parse("2024-02-01/2024-02-02"))
    lock_id = holder.locks.get().id
    commit_seq = CommitLogEntry.objects.get().seq

    pages = {
        "/admin/": "Metastore",
        "/admin/metastore/datasource/": "wiki",
        "/admin/metastore/segment/": segments[0],
        "/admin/metastore/segment/?used__exact=1&datasource__id__exact=1": "",
        "/admin/metastore/task/": holder.id,
        "/admin/metastore/tasklock/": holder.id,
        "/admin/metastore/commitlogentry/": change_url("commitlogentry", str(commit_seq)),
        "/admin/metastore/pendingsegment/": "wiki",
        change_url("segment", segments[0]): segments[0],
        change_url("task", holder.id): holder.id,
        change_url("tasklock", str(lock_id)): "EXCLUSIVE",
        change_url("commitlogentry", str(commit_seq)): segments[0],
    }
    for url, text in pages.items():
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert text in response.content.decode(), url


def test_segments_cannot_be_added_or_deleted_by_hand(admin_client, segments):
    assert admin_client.get("/admin/metastore/segment/add/").status_code == 403
    assert (
        admin_client.get(f"/admin/metastore/segment/{quote(segments[0])}/delete/").status_code
        == 403
    )
    changelist = admin_client.get("/admin/metastore/segment/").content.decode()
    assert 'value="delete_selected"' not in changelist
    assert 'value="mark_unused"' in changelist


def test_admin_action_marks_segments_unused_through_the_service(admin_client, admin_user, segments):
    chosen = segments[:2]

    response = admin_client.post(
        "/admin/metastore/segment/",
        {"action": "mark_unused", "_selected_action": chosen, "index": 0},
        follow=True,
    )

    assert response.status_code == 200
    assert "2 segments marked unused" in response.content.decode()
    assert set(Segment.objects.filter(used=False).values_list("id", flat=True)) == set(chosen)
    entry = CommitLogEntry.objects.latest("seq")
    assert entry.kind == CommitKind.MARK_UNUSED
    assert entry.user == admin_user and entry.task is None
    assert sorted(entry.removed) == sorted(chosen) and entry.added == []

    admin_client.post(
        "/admin/metastore/segment/",
        {"action": "mark_used", "_selected_action": chosen, "index": 0},
    )
    entry = CommitLogEntry.objects.latest("seq")
    assert entry.kind == CommitKind.MARK_USED and sorted(entry.added) == sorted(chosen)
    assert not Segment.objects.filter(used=False).exists()
    assert CommitLogEntry.objects.count() == 3  # publish, unused, used


def test_admin_edit_of_a_segment_is_recorded(admin_client, admin_user, segments):
    segment = Segment.objects.get(id=segments[2])

    response = admin_client.post(
        change_url("segment", segment.id),
        {  # "used" unchecked
            "location": "/moved/elsewhere.parquet",
            "shard_spec": json.dumps(segment.shard_spec),
            "_save": "Save",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    segment.refresh_from_db()
    assert segment.used is False and segment.location == "/moved/elsewhere.parquet"
    entry = CommitLogEntry.objects.latest("seq")
    assert entry.kind == CommitKind.ADMIN_EDIT and entry.user == admin_user
    assert entry.removed == [segment.id] and entry.added == []
    assert "location" in entry.note and "used" in entry.note


def test_admin_cancel_action_goes_through_the_service(admin_client, inline_spec, admin_user):
    task = services.task_submit(spec=inline_spec("wiki"), user=admin_user)

    admin_client.post(
        "/admin/metastore/task/", {"action": "cancel", "_selected_action": [task.id], "index": 0}
    )

    task.refresh_from_db()
    assert task.status == TaskStatus.CANCELED
    assert task.error == "canceled by root before it started"
    response = admin_client.post(
        "/admin/metastore/task/",
        {"action": "cancel", "_selected_action": [task.id], "index": 0},
        follow=True,
    )
    assert "already ended" in response.content.decode()
    assert Task.objects.get(id=task.id).status == TaskStatus.CANCELED
