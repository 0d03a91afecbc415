"""Auto-compaction configs through Strata's REST API, the Django admin and the
console page: the same configs, the same validation, audited through the services."""

from __future__ import annotations

import pytest

from metastore import services
from metastore.models import CompactionConfig, CompactionConfigAudit

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    return client


def test_rest_api_serves_and_validates_the_same_configs(api_client):
    r = api_client.post(
        "/api/v1/compaction/configs",
        {"dataSource": "wiki", "skipOffsetFromLatest": "PT6H", "comment": "six hours"},
        format="json",
    )
    assert r.status_code == 201 and r.json()["skipOffsetFromLatest"] == "PT6H"
    assert api_client.get("/api/v1/compaction/configs").json()["configs"][0]["dataSource"] == "wiki"
    druid = api_client.get("/druid/coordinator/v1/config/compaction/wiki").json()
    assert druid == api_client.get("/api/v1/compaction/configs/wiki").json()
    audit = CompactionConfigAudit.objects.get()
    assert (audit.author, audit.comment) == ("alice", "six hours")
    bad = api_client.post(
        "/api/v1/compaction/configs",
        {"dataSource": "wiki", "granularitySpec": {"segmentGranularity": "SOMETIMES"}},
        format="json",
    )
    assert bad.status_code == 400 and bad.json()["field"] == "granularitySpec.segmentGranularity"
    status = api_client.get("/api/v1/compaction/status").json()
    assert status["datasources"][0]["dataSource"] == "wiki"
    assert api_client.delete("/api/v1/compaction/configs/wiki").status_code == 204
    assert api_client.get("/api/v1/compaction/configs/wiki").status_code == 404


def test_admin_adds_and_deletes_through_the_services(admin_client):
    form = {
        "datasource": "wiki",
        "task_priority": "25",
        "input_segment_size_bytes": "100000000000000",
        "max_rows_per_segment": "",
        "skip_offset_from_latest": "P1D",
        "tuning_config": "null",
        "granularity_spec": '{"segmentGranularity": "DAY"}',
        "dimensions_spec": "null",
        "metrics_spec": "null",
        "transform_spec": "null",
        "io_config": "null",
        "task_context": "null",
    }
    bad = admin_client.post(
        "/admin/metastore/compactionconfig/add/", {**form, "skip_offset_from_latest": "-P1D"}
    )
    assert bad.status_code == 200 and b"skipOffsetFromLatest" in bad.content
    assert not CompactionConfig.objects.exists()
    r = admin_client.post(
        "/admin/metastore/compactionconfig/add/",
        {**form, "skip_intervals": '["2024-01-01/2024-01-02"]'},
    )
    assert r.status_code == 302, r.content[-2000:]
    config = CompactionConfig.objects.get()
    assert config.granularity_spec == {"segmentGranularity": "DAY"}
    assert config.skip_intervals == ["2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z"]
    assert CompactionConfigAudit.objects.get().author == "root"
    r = admin_client.post(f"/admin/metastore/compactionconfig/{config.pk}/delete/", {"post": "yes"})
    assert r.status_code == 302
    assert not CompactionConfig.objects.exists()
    assert CompactionConfigAudit.objects.count() == 2


def test_console_page_lists_intervals_with_reasons(client, user, publish):
    publish(
        "wiki", "2024-01-01/2024-01-03", {"2024-01-01/2024-01-02": 1, "2024-01-02/2024-01-03": 1}
    )
    services.compaction_config_set(data={"dataSource": "wiki"})
    client.force_login(user)
    page = client.get("/compaction").content.decode()
    assert "SKIP_OFFSET" in page and "NEEDS_COMPACTION" in page
    assert "2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z" in page
    fragment = client.get("/compaction?datasource=wiki", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and "SKIP_OFFSET" in fragment


def test_datasource_page_links_to_its_compaction_status(client, user, publish):
    publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    client.force_login(user)
    page = client.get("/datasources/wiki").content.decode()
    assert "/compaction?datasource=wiki" in page
    off = client.get("/compaction?datasource=wiki").content.decode()
    assert "Auto-compaction is off for wiki" in off


def test_overview_shows_each_duty_last_run_what_it_did_and_next_run(
    client, user, publish, settings, no_enqueue
):
    import re
    import uuid

    from workers.compaction_duty import run_once
    from workers.history_duty import run_history_duty

    settings.STRATA_LAST_RUN_PREFIX = f"test:{uuid.uuid4().hex}:last-run:"
    publish("wiki", "2024-01-01/2024-01-02", {"2024-01-01/2024-01-02": 1})
    services.compaction_config_set(data={"dataSource": "wiki", "skipOffsetFromLatest": "PT0S"})
    client.force_login(user)

    def duty(name: str) -> str:
        html = client.get("/").content.decode()
        return re.search(rf'<tr data-duty="{name}">(.*?)</tr>', html, re.S)[1]

    assert "not yet" in duty("compaction") and "off" in duty("kill")
    run_once()
    run_history_duty()
    assert "submitted 1 compaction task(s)" in duty("compaction")
    assert "every 60 s" in duty("compaction")
    assert "marked 0 overshadowed segment(s) unused in 1 dataSource(s)" in duty("history")
    assert "not yet" in duty("retention") and "off" in duty("kill")
