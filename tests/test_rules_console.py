"""The console's retention rules page (console/rules_views.py): rules are
previewed ("this would drop N segments, M rows, in these intervals") before they
are saved, and only exactly what was previewed is saved."""

from __future__ import annotations

import json
import re

import pytest

from metastore.models import RetentionRulesAudit, Segment
from metastore.selectors import retention as retention_selectors

pytestmark = pytest.mark.django_db

DS = "wiki"
DROP_JAN_1_2 = json.dumps([{"type": "dropByInterval", "interval": "2024-01-01/2024-01-03"}])


@pytest.fixture
def page(client, user, publish):
    for day in ("2024-01-01/2024-01-02", "2024-01-02/2024-01-03", "2024-01-05/2024-01-06"):
        publish(DS, day, {day: 2}, rows=10)
    client.force_login(user)
    return f"/datasources/{DS}/rules"


def previewed_digest(html: str) -> str:
    return re.search(r'name="previewed" value="([0-9a-f]+)"', html).group(1)


def test_preview_names_segments_rows_and_intervals_and_stores_nothing(client, page):
    response = client.post(page, {"rules": DROP_JAN_1_2, "action": "preview"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "would drop 4 segments, 40 rows" in html
    assert "2024-01-01T00:00:00.000Z/2024-01-03T00:00:00.000Z" in html  # merged
    assert "2024-01-05" not in html.split("drop-intervals")[1].split("</ul>")[0]
    assert retention_selectors.rules_stored(datasource=DS) is None
    assert Segment.objects.filter(used=True).count() == 6


def test_save_stores_exactly_what_was_previewed(client, page, user):
    preview = client.post(page, {"rules": DROP_JAN_1_2, "action": "preview"}).content.decode()
    digest = previewed_digest(preview)
    # Text changed after the preview: previewed again, not saved.
    changed = json.dumps([{"type": "dropForever"}])
    again = client.post(page, {"rules": changed, "action": "save", "previewed": digest})
    assert "would drop 6 segments, 60 rows" in again.content.decode()
    assert retention_selectors.rules_stored(datasource=DS) is None
    saved = client.post(
        page, {"rules": DROP_JAN_1_2, "action": "save", "previewed": digest, "comment": "old days"}
    )
    assert saved.status_code == 302
    assert retention_selectors.rules_stored(datasource=DS) == [
        {"type": "dropByInterval", "interval": "2024-01-01T00:00:00.000Z/2024-01-03T00:00:00.000Z"}
    ]
    audit = RetentionRulesAudit.objects.get()
    assert (audit.author, audit.comment, audit.user) == ("alice", "old days", user)
    # Saving drops nothing by itself: the duty does, as a commit.
    assert Segment.objects.filter(used=True).count() == 6
    assert "old days" in client.get(page).content.decode()


def test_invalid_rules_are_refused_at_their_field(client, page):
    bad = json.dumps([{"type": "dropForever"}, {"type": "dropByPeriod", "period": "a month"}])
    response = client.post(page, {"rules": bad, "action": "save", "previewed": "x"})
    assert response.status_code == 400
    assert 'data-field="[1].period"' in response.content.decode()
    assert client.post(page, {"rules": "[{", "action": "preview"}).status_code == 400
    assert retention_selectors.rules_stored(datasource=DS) is None


def test_a_comment_that_cannot_be_stored_is_refused_at_its_field(client, page):
    digest = previewed_digest(
        client.post(page, {"rules": DROP_JAN_1_2, "action": "preview"}).content.decode()
    )
    response = client.post(
        page, {"rules": DROP_JAN_1_2, "action": "save", "previewed": digest, "comment": "a\x00b"}
    )
    assert response.status_code == 400
    assert 'data-field="comment"' in response.content.decode()
    assert retention_selectors.rules_stored(datasource=DS) is None


def test_the_datasource_page_links_to_its_rules(client, page):
    assert page in client.get(f"/datasources/{DS}").content.decode()
