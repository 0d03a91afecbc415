"""Druid's automatic compaction API (docs/api-reference/automatic-compaction-api.md),
checked against its documented examples, and the duty's submissions through it."""

from __future__ import annotations

import pytest

from metastore import services
from metastore.models import CompactionConfig, CompactionConfigAudit, Task
from metastore.services.compaction_run import compaction_duty_run

pytestmark = pytest.mark.django_db

BASE = "/druid/coordinator/v1"
# The documented sample request (wikipedia_hour, HOUR segments compacted into DAY).
DOC_EXAMPLE = {
    "dataSource": "wikipedia_hour",
    "skipOffsetFromLatest": "PT0S",
    "tuningConfig": {"partitionsSpec": {"type": "dynamic"}, "type": "index_parallel"},
    "granularitySpec": {"segmentGranularity": "DAY"},
}


def test_documented_post_then_get_answers_in_druids_shape(api_client):
    r = api_client.post(f"{BASE}/config/compaction", DOC_EXAMPLE, format="json")
    assert r.status_code == 200 and r.content == b""
    body = api_client.get(f"{BASE}/config/compaction").json()
    assert body["compactionTaskSlotRatio"] == 0.1
    assert body["maxCompactionTaskSlots"] == 2147483647
    (config,) = body["compactionConfigs"]
    assert config == api_client.get(f"{BASE}/config/compaction/wikipedia_hour").json()
    assert config["dataSource"] == "wikipedia_hour"
    assert config["taskPriority"] == 25
    assert config["inputSegmentSizeBytes"] == 100000000000000
    assert config["maxRowsPerSegment"] is None
    assert config["skipOffsetFromLatest"] == "PT0S"
    assert config["tuningConfig"]["partitionsSpec"]["type"] == "dynamic"
    assert config["granularitySpec"]["segmentGranularity"] == "DAY"
    for key in ("dimensionsSpec", "metricsSpec", "transformSpec", "ioConfig", "taskContext"):
        assert config[key] is None


def test_a_config_for_a_datasource_not_there_yet_is_accepted(api_client):
    r = api_client.post(f"{BASE}/config/compaction", {"dataSource": "later"}, format="json")
    assert r.status_code == 200
    assert CompactionConfig.objects.get(datasource="later").skip_offset_from_latest == "P1D"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"skipOffsetFromLatest": "P1D"}, "dataSource"),
        (
            {"dataSource": "w", "granularitySpec": {"segmentGranularity": "DECADE"}},
            "granularitySpec.segmentGranularity",
        ),
        ({"dataSource": "w", "skipOffsetFromLatest": "-PT1H"}, "skipOffsetFromLatest"),
        ({"dataSource": "w", "skipOffsetFromLatest": "yesterday"}, "skipOffsetFromLatest"),
    ],
)
def test_invalid_config_is_a_400_naming_the_field_and_stores_nothing(api_client, body, field):
    r = api_client.post(f"{BASE}/config/compaction", body, format="json")
    assert r.status_code == 400
    assert r.json()["field"] == field and field in r.json()["error"]
    assert not CompactionConfig.objects.exists()
    assert not CompactionConfigAudit.objects.exists()


def test_delete_turns_it_off_and_unknown_is_404(api_client):
    api_client.post(f"{BASE}/config/compaction", DOC_EXAMPLE, format="json")
    assert api_client.delete(f"{BASE}/config/compaction/wikipedia_hour").status_code == 200
    assert api_client.get(f"{BASE}/config/compaction/wikipedia_hour").status_code == 404
    assert api_client.delete(f"{BASE}/config/compaction/wikipedia_hour").status_code == 404
    assert (
        api_client.get(f"{BASE}/compaction/progress?dataSource=wikipedia_hour").status_code == 404
    )


def test_task_slots_and_cluster_config(api_client):
    r = api_client.post(f"{BASE}/config/compaction/taskslots?ratio=0.2&max=250000")
    assert r.status_code == 200
    body = api_client.get(f"{BASE}/config/compaction").json()
    assert (body["compactionTaskSlotRatio"], body["maxCompactionTaskSlots"]) == (0.2, 250000)
    cluster = api_client.get("/druid/indexer/v1/compaction/config/cluster").json()
    assert cluster["compactionPolicy"]["type"] == "newestSegmentFirst"
    assert cluster["useSupervisors"] is False and cluster["engine"] == "native"
    bad = api_client.post(f"{BASE}/config/compaction/taskslots?ratio=1.5")
    assert bad.status_code == 400 and bad.json()["field"] == "compactionTaskSlotRatio"
    bad = api_client.post(f"{BASE}/config/compaction/taskslots?max=0")
    assert bad.status_code == 400 and bad.json()["field"] == "maxCompactionTaskSlots"


def test_history_records_author_comment_and_the_global_config(api_client):
    api_client.post(
        f"{BASE}/config/compaction",
        DOC_EXAMPLE,
        format="json",
        HTTP_X_DRUID_AUTHOR="alice",
        HTTP_X_DRUID_COMMENT="daily segments",
    )
    api_client.post(
        f"{BASE}/config/compaction", {**DOC_EXAMPLE, "skipOffsetFromLatest": "P1D"}, format="json"
    )
    history = api_client.get(f"{BASE}/config/compaction/wikipedia_hour/history").json()
    assert [h["compactionConfig"]["skipOffsetFromLatest"] for h in history] == ["PT0S", "P1D"]
    first = history[0]
    assert set(first) == {"globalConfig", "compactionConfig", "auditInfo", "auditTime"}
    assert first["auditInfo"]["author"] == "alice"
    assert first["auditInfo"]["comment"] == "daily segments"
    assert first["globalConfig"]["compactionTaskSlotRatio"] == 0.1
    # A change of the cluster's slots is in its history, with its config as it stood.
    api_client.post(f"{BASE}/config/compaction/taskslots?ratio=0.5")
    newest = api_client.get(f"{BASE}/config/compaction/wikipedia_hour/history?count=1").json()
    assert [h["compactionConfig"]["skipOffsetFromLatest"] for h in newest] == ["P1D"]
    assert newest[0]["globalConfig"]["compactionTaskSlotRatio"] == 0.5
    history = history + newest
    by_query = api_client.get(f"{BASE}/config/compaction/history?dataSource=wikipedia_hour").json()
    assert by_query == history
    assert (
        api_client.get(f"{BASE}/config/compaction/wikipedia_hour/history?count=x").status_code
        == 400
    )
    assert api_client.get(f"{BASE}/config/compaction/nobody/history").json() == []


def test_status_and_progress_have_druids_snapshot_fields_and_a_reason_per_interval(
    api_client, publish
):
    for d in (1, 2, 3):
        publish(
            "wiki",
            f"2024-01-0{d}/2024-01-0{d + 1}",
            {f"2024-01-0{d}T00/2024-01-0{d}T01": 1, f"2024-01-0{d}T23/2024-01-0{d + 1}T00": 1},
            size=100,
        )
    api_client.post(
        f"{BASE}/config/compaction",
        {"dataSource": "wiki", "granularitySpec": {"segmentGranularity": "DAY"}},
        format="json",
    )
    (entry,) = api_client.get(f"{BASE}/compaction/status").json()["latestStatus"]
    intervals = entry.pop("intervals")
    assert entry == {
        "dataSource": "wiki",
        "scheduleStatus": "AWAITING_FIRST_RUN",
        "bytesAwaitingCompaction": 400,
        "bytesCompacted": 0,
        "bytesSkipped": 200,
        "segmentCountAwaitingCompaction": 4,
        "segmentCountCompacted": 0,
        "segmentCountSkipped": 2,
        "intervalCountAwaitingCompaction": 2,
        "intervalCountCompacted": 0,
        "intervalCountSkipped": 1,
    }
    assert [i["interval"][:10] for i in intervals] == ["2024-01-03", "2024-01-02", "2024-01-01"]
    assert intervals[0]["reasonCode"] == "SKIP_OFFSET" and "P1D" in intervals[0]["reason"]
    # Two awaiting intervals, one slot (2 slots x 0.1, at least 1): the newest goes
    # first, and takes the older one next to it along into its task.
    assert intervals[1]["reasonCode"] == "NEEDS_COMPACTION"
    assert intervals[2]["reasonCode"] == "NEEDS_COMPACTION"
    assert (
        "taken along into one task compacting 2024-01-01T00:00:00.000Z/2024-01-03"
        in (intervals[2]["reason"])
    )
    progress = api_client.get(f"{BASE}/compaction/progress?dataSource=wiki").json()
    assert progress == {"remainingSegmentSize": 400}
    assert api_client.get(f"{BASE}/compaction/progress").status_code == 400
    assert api_client.get(f"{BASE}/compaction/status?dataSource=nope").status_code == 404


def test_autocompact_supervisor_maps_onto_the_config(api_client):
    r = api_client.post(
        "/druid/indexer/v1/supervisor",
        {"type": "autocompact", "suspended": False, "spec": DOC_EXAMPLE},
        format="json",
    )
    assert r.status_code == 200 and r.json() == {"id": "autocompact__wikipedia_hour"}
    assert (
        CompactionConfig.objects.get(datasource="wikipedia_hour").skip_offset_from_latest == "PT0S"
    )
    bad = api_client.post(
        "/druid/indexer/v1/supervisor",
        {"type": "autocompact", "spec": {"dataSource": "w", "skipOffsetFromLatest": "-P1D"}},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "spec.skipOffsetFromLatest"
    kafka = api_client.post("/druid/indexer/v1/supervisor", {"type": "kafka"}, format="json")
    assert kafka.status_code == 400 and kafka.json()["field"] == "type"
    api_client.post(
        "/druid/indexer/v1/supervisor",
        {"type": "autocompact", "suspended": True, "spec": DOC_EXAMPLE},
        format="json",
    )
    assert not CompactionConfig.objects.filter(datasource="wikipedia_hour").exists()


def test_duty_submits_within_the_slot_budget_and_stops_at_once_when_turned_off(
    api_client, publish, no_enqueue
):
    for d in (1, 2, 3, 4, 5):
        publish("wiki", f"2024-01-0{d}/2024-01-0{d + 1}", {f"2024-01-0{d}T00/2024-01-0{d}T01": 1})
    api_client.post(
        f"{BASE}/config/compaction",
        {
            "dataSource": "wiki",
            "taskPriority": 30,
            "granularitySpec": {"segmentGranularity": "DAY"},
        },
        format="json",
    )
    api_client.post(f"{BASE}/config/compaction/taskslots?ratio=1&max=2")
    plans = compaction_duty_run()
    submitted = [st for st in plans.statuses["wiki"] if st.submit]
    # Two slots for three days: the second task takes the last day along.
    assert [str(st.interval)[:10] for st in submitted] == ["2024-01-03", "2024-01-02", "2024-01-01"]
    assert submitted[1].task_id == submitted[2].task_id != submitted[0].task_id
    tasks = list(Task.objects.filter(type="compact").order_by("id"))
    assert len(tasks) == 2
    spans = sorted(t.spec["ioConfig"]["inputSpec"]["interval"][:24] for t in tasks)
    assert spans == ["2024-01-01T00:00:00.000Z", "2024-01-03T00:00:00.000Z"]
    for task in tasks:
        assert task.id.startswith("coordinator-issued_compact_wiki_")
        assert task.priority == 30
        assert task.spec["context"]["useConcurrentLocks"] is True
    # A second run finds them running and the slots used: nothing more.
    again = compaction_duty_run()
    assert Task.objects.filter(type="compact").count() == 2
    codes = {str(st.interval)[:10]: st.code for st in again.statuses["wiki"]}
    assert codes == {
        "2024-01-05": "SKIP_OFFSET",
        "2024-01-04": "SKIP_OFFSET",
        "2024-01-03": "TASK_RUNNING",
        "2024-01-02": "TASK_RUNNING",
        "2024-01-01": "TASK_RUNNING",
    }
    status = api_client.get(f"{BASE}/compaction/status?dataSource=wiki").json()["latestStatus"]
    assert status[0]["scheduleStatus"] == "RUNNING"
    for task in tasks:
        services.task_cancel(task_id=task.id)
    api_client.delete(f"{BASE}/config/compaction/wiki")
    compaction_duty_run()
    assert Task.objects.filter(type="compact").count() == 2


def test_the_worker_entry_point_runs_one_duty_round(api_client, publish, no_enqueue, settings):
    from workers.compaction_duty import CompactionDutyThread
    from workers.tasks import compaction_duty

    publish(
        "wiki", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 1, "2024-01-02/2024-01-03": 1}
    )
    api_client.post(
        f"{BASE}/config/compaction",
        {"dataSource": "wiki", "skipOffsetFromLatest": "PT0S"},
        format="json",
    )
    submitted = compaction_duty()
    (task_id,) = submitted["wiki"]
    assert (
        Task.objects.get(id=task_id)
        .spec["ioConfig"]["inputSpec"]["interval"]
        .startswith("2024-01-02")
    )
    settings.STRATA_COMPACTION_PERIOD_SECONDS = 0  # off: the beat thread returns at once
    duty = CompactionDutyThread()
    duty.thread.start()
    duty.thread.join(timeout=5)
    assert not duty.thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_a_freed_slot_is_taken_at_once_not_a_period_later(
    publish, no_enqueue, settings, monkeypatch
):
    import time

    from workers import compaction_duty

    publish(
        "wiki", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 1, "2024-01-02/2024-01-03": 1}
    )
    services.compaction_config_set(data={"dataSource": "wiki", "skipOffsetFromLatest": "PT0S"})
    settings.STRATA_COMPACTION_PERIOD_SECONDS = 3600
    monkeypatch.setattr(compaction_duty, "SLOT_POLL_SECONDS", 0.1)
    (first,) = [st.task_id for st in compaction_duty_run().statuses["wiki"] if st.submit]
    duty = compaction_duty.CompactionDutyThread()
    duty.thread.start()
    try:
        time.sleep(0.5)
        assert Task.objects.filter(type="compact").count() == 1  # no slot, an hour to go
        services.task_cancel(task_id=first)  # its slot is free
        deadline = time.monotonic() + 20
        while Task.objects.filter(type="compact").count() < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert Task.objects.filter(type="compact").count() == 2
    finally:
        duty.stop.set()
        duty.thread.join(timeout=10)


def test_druid_fields_strata_cannot_take_are_refused_by_name(api_client):
    bad = api_client.post(
        f"{BASE}/config/compaction/cluster",
        {"compactionPolicy": {"type": "mostFragmentedFirst"}},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "compactionPolicy.type"
    dynamic = api_client.get(f"{BASE}/config").json()
    assert dynamic["killDataSourceWhitelist"] == [] and dynamic["killTaskSlotRatio"] == 0.1
    assert dynamic["strataKill"]["maxInterval"] == "P30D"
    for field in ("killPendingSegmentsSkipList", "killDataSourceWhitelist", "maxSegmentsToMove"):
        bad = api_client.post(f"{BASE}/config", {field: []}, format="json")
        assert bad.status_code == 400 and bad.json()["field"] == field
    body = {**DOC_EXAMPLE, "skipIntervals": ["2024-01-01/2024-02-01"]}
    assert api_client.post(f"{BASE}/config/compaction", body, format="json").status_code == 200
    got = api_client.get(f"{BASE}/config/compaction/wikipedia_hour").json()["skipIntervals"]
    assert got == ["2024-01-01T00:00:00.000Z/2024-02-01T00:00:00.000Z"]


@pytest.mark.django_db(transaction=True)
def test_new_data_is_compacted_at_once_while_a_slot_is_free_not_a_period_later(
    publish, no_enqueue, settings, monkeypatch
):
    import time

    from workers import compaction_duty

    services.compaction_config_set(data={"dataSource": "wiki", "skipOffsetFromLatest": "PT0S"})
    settings.STRATA_COMPACTION_PERIOD_SECONDS = 3600
    monkeypatch.setattr(compaction_duty, "SLOT_POLL_SECONDS", 0.1)
    duty = compaction_duty.CompactionDutyThread()
    duty.thread.start()
    try:
        time.sleep(0.5)
        assert not Task.objects.filter(type="compact").exists()  # nothing yet, an hour to go
        publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 2})  # an append ends
        deadline = time.monotonic() + 20
        while not Task.objects.filter(type="compact").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        (task,) = Task.objects.filter(type="compact")
        assert task.spec["ioConfig"]["inputSpec"]["interval"].startswith("2024-01-01")
    finally:
        duty.stop.set()
        duty.thread.join(timeout=10)
