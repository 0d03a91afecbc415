"""Druid's retention rules API (console/druid_rules.py) against the request and
response examples of Druid's "Retention rules API" reference: rules per
dataSource and `_default`, `?full`, the audit from X-Druid-Author /
X-Druid-Comment, the history; invalid rules are 400s naming the field and store
nothing."""

from __future__ import annotations

import json

import pytest

from metastore.models import RetentionRules, RetentionRulesAudit

pytestmark = pytest.mark.django_db

RULES = "/druid/coordinator/v1/rules"

# "Update retention rules for a datasource" sample request (kttm1).
KTTM1 = [
    {"type": "broadcastForever"},
    {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}},
    {"type": "dropByPeriod", "period": "P1M"},
]
# "Update default retention rules for all datasources" sample request.
DEFAULTS = [
    {"type": "dropByPeriod", "period": "P1M", "includeFuture": True},
    {"type": "broadcastByPeriod", "period": "P1M", "includeFuture": True},
]


def post(client, name, rules, **headers):
    return client.post(
        f"{RULES}/{name}", data=json.dumps(rules), content_type="application/json", **headers
    )


def test_druids_sample_update_is_stored_audited_and_read_back(api_client):
    response = post(
        api_client,
        "kttm1",
        KTTM1,
        HTTP_X_DRUID_AUTHOR="doc intern",
        HTTP_X_DRUID_COMMENT="submitted via api",
    )
    assert response.status_code == 200, response.content
    assert api_client.get(f"{RULES}/kttm1").json() == [
        {"type": "broadcastForever"},
        {"type": "loadForever", "tieredReplicants": {"_default_tier": 2}},
        {"type": "dropByPeriod", "period": "P1M", "includeFuture": True},
    ]
    (entry,) = api_client.get(f"{RULES}/kttm1/history").json()
    assert entry["key"] == "kttm1" and entry["type"] == "rules"
    assert entry["auditInfo"] == {
        "author": "doc intern",
        "comment": "submitted via api",
        "ip": "127.0.0.1",
    }
    assert json.loads(entry["payload"]) == api_client.get(f"{RULES}/kttm1").json()
    assert entry["auditTime"].endswith("Z")


def test_all_rules_include_the_default_and_full_appends_it(api_client):
    # Nothing set: Druid's own default rule.
    assert api_client.get(RULES).json() == {
        "_default": [{"type": "loadForever", "tieredReplicants": {"_default_tier": 2}}]
    }
    assert api_client.get(f"{RULES}/_default").json() == api_client.get(RULES).json()["_default"]
    post(
        api_client,
        "social_media",
        [{"type": "dropByInterval", "interval": "2023-01-01/2023-02-01"}],
    )
    post(api_client, "wikipedia_api", [])
    # The "Get an array of all retention rules" sample response's shape.
    assert api_client.get(RULES).json() == {
        "_default": [{"tieredReplicants": {"_default_tier": 2}, "type": "loadForever"}],
        "social_media": [
            {
                "interval": "2023-01-01T00:00:00.000Z/2023-02-01T00:00:00.000Z",
                "type": "dropByInterval",
            }
        ],
        "wikipedia_api": [],
    }
    full = api_client.get(f"{RULES}/social_media?full").json()
    assert [rule["type"] for rule in full] == ["dropByInterval", "loadForever"]
    # A dataSource without rules: [] and 200, as in Druid.
    assert api_client.get(f"{RULES}/nobody").json() == []


def test_default_rules_are_replaced_and_an_empty_array_removes_them(api_client):
    assert post(api_client, "_default", DEFAULTS).status_code == 200
    assert [r["type"] for r in api_client.get(RULES).json()["_default"]] == [
        "dropByPeriod",
        "broadcastByPeriod",
    ]
    assert post(api_client, "_default", []).status_code == 200
    assert api_client.get(RULES).json()["_default"] == []
    assert api_client.get(f"{RULES}/kttm1?full").json() == []


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ([{"type": "keepForever"}], "[0].type"),
        ([{"type": "loadForever"}, {"type": "loadByPeriod", "period": "one month"}], "[1].period"),
        ([{"type": "dropByPeriod", "period": "P-1M"}], "[0].period"),
        ([{"type": "dropByInterval", "interval": "2023-02-01/2023-01-01"}], "[0].interval"),
        ([{"type": "loadForever", "tieredReplicants": {"hot": -1}}], "[0].tieredReplicants.hot"),
        ({"type": "loadForever"}, "(body)"),
    ],
)
def test_an_invalid_rule_is_a_400_naming_the_field_and_nothing_is_stored(api_client, rules, field):
    post(api_client, "wiki", [{"type": "dropForever"}])
    response = post(api_client, "wiki", rules)
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field and field in body["error"]
    assert api_client.get(f"{RULES}/wiki").json() == [{"type": "dropForever"}]
    assert RetentionRulesAudit.objects.count() == 1


def test_an_author_too_long_to_store_is_a_400_naming_the_header(api_client):
    response = post(api_client, "wiki", [{"type": "dropForever"}], HTTP_X_DRUID_AUTHOR="x" * 300)
    assert response.status_code == 400 and response.json()["field"] == "X-Druid-Author"
    assert not RetentionRules.objects.exists()


def test_history_takes_interval_or_count_not_both(api_client):
    for n in range(3):
        post(api_client, "wiki", [{"type": "dropByPeriod", "period": f"P{n + 1}D"}])
    post(api_client, "other", [{"type": "dropForever"}])
    assert len(api_client.get(f"{RULES}/history").json()) == 4
    newest = api_client.get(f"{RULES}/wiki/history?count=2").json()
    assert [json.loads(e["payload"])[0]["period"] for e in newest] == ["P2D", "P3D"]
    assert api_client.get(f"{RULES}/history?interval=2000-01-01/2000-01-02").json() == []
    both = api_client.get(f"{RULES}/history?interval=2000-01-01/2030-01-01&count=1")
    assert both.status_code == 400 and both.json()["field"] == "count"
    assert api_client.get(f"{RULES}/history?count=0").status_code == 400
    bad = api_client.get(f"{RULES}/history?interval=yesterday")
    assert bad.status_code == 400 and bad.json()["field"] == "interval"


def test_a_viewer_reads_rules_but_may_not_change_them(django_user_model):
    from django.contrib.auth.models import Group
    from rest_framework.test import APIClient

    from metastore.services import api_token_issue

    viewer = django_user_model.objects.create_user("vic", password="pw-12345-xyz")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_issue(user=viewer)[1]}")
    assert client.get(RULES).status_code == 200
    refused = post(client, "wiki", [{"type": "dropForever"}])
    assert refused.status_code == 403 and "operator" in refused.json()["error"]
    assert not RetentionRules.objects.exists()
