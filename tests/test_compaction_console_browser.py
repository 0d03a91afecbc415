"""The auto-compaction console page in a real headless Chromium against the live
server: a config is created (after a refused one that names its field), its
intervals show with their typed skip reasons, it is edited, then deleted; every
change audited under the logged-in user."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from metastore.models import CompactionConfig, CompactionConfigAudit

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DS = "clicks"
DAYS = {f"2024-01-0{d}/2024-01-0{d + 1}": 1 for d in (1, 2, 3)}


def save(page, config: dict | str, comment: str = "") -> None:
    text = config if isinstance(config, str) else json.dumps(config)
    page.fill("textarea[name=config]", text)
    page.fill("input[name=comment]", comment)
    page.click("button[value=save]")


def row(page, interval: str):
    return page.locator("#compaction-intervals tr", has_text=interval)


def test_compaction_page_creates_shows_reasons_edits_and_deletes_a_config(console_page, publish):
    page = console_page
    publish(DS, "2024-01-01/2024-01-04", DAYS)
    page.goto(page.console_url("/compaction"))
    expect(page.locator("#compaction-intervals")).to_contain_text("Auto-compaction is off")

    save(page, {"dataSource": DS, "skipOffsetFromLatest": "-P1D"})
    expect(page.locator(".spec-error")).to_have_attribute("data-field", "skipOffsetFromLatest")
    assert not CompactionConfig.objects.exists()

    config = {"dataSource": DS, "skipIntervals": ["2024-01-01/2024-01-02"]}
    save(page, config, comment="skip the first day")
    page.wait_for_url("**/compaction?datasource=clicks")
    expect(row(page, "2024-01-03T00:00:00.000Z/")).to_contain_text("SKIP_OFFSET")
    expect(row(page, "2024-01-01T00:00:00.000Z/")).to_contain_text("SKIP_INTERVALS")
    expect(row(page, "2024-01-02T00:00:00.000Z/")).to_contain_text("NEEDS_COMPACTION")
    page.screenshot(path="tests/artifacts/compaction_page.png", full_page=True)

    page.click("text=Edit config")
    edited = json.loads(page.input_value("textarea[name=config]"))
    assert edited["skipIntervals"] == ["2024-01-01T00:00:00.000Z/2024-01-02T00:00:00.000Z"]
    save(page, {**edited, "skipOffsetFromLatest": "PT0S"}, comment="no offset")
    expect(row(page, "2024-01-03T00:00:00.000Z/")).not_to_contain_text("SKIP_OFFSET")
    assert CompactionConfig.objects.get().skip_offset_from_latest == "PT0S"

    page.click(f"button[value=delete][data-datasource={DS}]")
    expect(page.locator("#compaction-intervals")).to_contain_text("Auto-compaction is off")
    assert not CompactionConfig.objects.exists()
    audits = CompactionConfigAudit.objects.order_by("id")
    assert [(a.author, a.comment) for a in audits] == [
        ("alice", "skip the first day"),
        ("alice", "no offset"),
        ("alice", ""),
    ]
    assert not page.problems, page.problems
