"""The retention, history and kill duties on PostgreSQL, through the services:
a rule drop is a commit time travel sees; time travel at the edge of the history
retention; overshadowed segments leave only once no retained commit shows them;
kill never deletes a segment a retained as_of shows, nor one a running task holds."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.utils import timezone

from metastore import selectors, services
from metastore.duties.kill import KillConfig, UnusedSegment, kill_slot_budget, plan_kill
from metastore.duties.periods import Period
from metastore.intervals import Interval
from metastore.models import CommitKind, CommitLogEntry, Segment, Task, TaskStatus
from metastore.selectors import retention as retention_selectors
from workers import runner
from workers.history_duty import run_history_duty
from workers.kill_duty import kill_plan, kill_spec, run_kill_duty
from workers.retention_duty import run_retention_duty

pytestmark = pytest.mark.django_db

DS = "wiki"
D1, D2, D3 = "2024-01-01/2024-01-02", "2024-01-02/2024-01-03", "2024-01-03/2024-01-04"
# Kill everything eligible at once: no buffer, no duration to retain.
EAGER = KillConfig(
    on=True,
    duration_to_retain=Period.parse("P0D"),
    ignore_duration_to_retain=True,
    buffer_period=Period.parse("P0D"),
    max_segments=100,
)


def visible_ids(as_of=None) -> set[str]:
    timeline = selectors.timeline_for(datasource=DS, as_of=as_of)
    return {ref.id for ref in timeline.segments()} - timeline.fully_overshadowed()


def created(seq: int):
    return CommitLogEntry.objects.get(seq=seq).created_at


def run_task_here(task_id: str) -> Task:
    assert services.task_claim(task_id=task_id, worker="pytest")
    runner.run_task(task_id)
    return Task.objects.get(id=task_id)


def test_a_rule_drop_is_a_commit_that_time_travel_sees(publish):
    days = [publish(DS, d, {d: 1}) for d in (D1, D2, D3)]
    services.rules_set(
        datasource=DS, rules=[{"type": "dropByInterval", "interval": "2024-01-01/2024-01-03"}]
    )
    report = run_retention_duty()
    assert report[DS]["dropped"] == 2
    entry = CommitLogEntry.objects.get(seq=report[DS]["commit"])
    assert entry.kind == CommitKind.MARK_UNUSED
    assert sorted(entry.removed) == sorted(days[0].segment_ids + days[1].segment_ids)
    assert "dropByInterval" in entry.note and entry.user is None
    assert visible_ids() == set(days[2].segment_ids)
    # Before the drop, time travel still shows the dropped days.
    assert visible_ids(as_of=entry.seq - 1) == {s for d in days for s in d.segment_ids}
    # A second run finds nothing left to drop: no empty commit.
    assert run_retention_duty()[DS] == {"dropped": 0, "commit": None, "unmatched": 0}


def test_period_rules_need_a_drop_rule_and_the_default_rules_follow(publish):
    publish(DS, D1, {D1: 1})
    services.rules_set(datasource=DS, rules=[{"type": "loadByPeriod", "period": "P1M"}])
    assert services.retention_apply(datasource=DS).plan.drops == ()  # Druid #13080
    services.rules_set(datasource="_default", rules=[{"type": "dropForever"}])
    run = services.retention_apply(datasource=DS)
    assert [d.rule.type for d in run.plan.drops] == ["dropForever"]
    assert run.plan.drops[0].from_default


def test_rules_are_audited_and_an_invalid_list_stores_nothing(user):
    services.rules_set(
        datasource=DS, rules=[{"type": "dropForever"}], author="ops", comment="why", ip="10.0.0.1"
    )
    with pytest.raises(ValueError):
        services.rules_set(datasource=DS, rules=[{"type": "keepForever"}], user=user)
    assert retention_selectors.rules_stored(datasource=DS) == [{"type": "dropForever"}]
    (audit,) = retention_selectors.rules_history(key=DS)
    assert (audit.author, audit.comment, audit.ip) == ("ops", "why", "10.0.0.1")
    services.rules_set(datasource=DS, rules=[], user=user)
    assert retention_selectors.rules_history(key=DS)[-1].author == "alice"


def test_time_travel_is_refused_past_the_retention_edge_naming_the_oldest_commit(publish):
    first = publish(DS, D1, {D1: 1})
    second = publish(DS, D1, {D1: 1})
    edge = created(first.commit_seq) + timedelta(days=7)
    # Exactly 7 days after the first commit it is still retained.
    assert (
        retention_selectors.as_of_refusal(datasource=DS, as_of=first.commit_seq, now=edge) is None
    )
    later = edge + timedelta(microseconds=1)
    refusal = retention_selectors.as_of_refusal(datasource=DS, as_of=first.commit_seq, now=later)
    assert f"oldest retained commit is {second.commit_seq}" in refusal
    assert "P7D" in refusal
    assert (
        retention_selectors.as_of_refusal(datasource=DS, as_of=second.commit_seq, now=later) is None
    )
    # Long after, the latest commit (the present) is still reachable.
    far = later + timedelta(days=365)
    assert (
        retention_selectors.as_of_refusal(datasource=DS, as_of=second.commit_seq, now=far) is None
    )
    # Before the dataSource's first commit there was nothing: not refused.
    assert (
        retention_selectors.as_of_refusal(datasource=DS, as_of=first.commit_seq - 1, now=far)
        is None
    )


def test_retention_follows_the_setting(publish, settings):
    first = publish(DS, D1, {D1: 1})
    publish(DS, D1, {D1: 1})
    now = created(first.commit_seq) + timedelta(days=2)
    assert retention_selectors.as_of_refusal(datasource=DS, as_of=first.commit_seq, now=now) is None
    settings.STRATA_HISTORY_RETENTION = "P1D"
    assert retention_selectors.as_of_refusal(datasource=DS, as_of=first.commit_seq, now=now)


def test_overshadowed_segments_stay_while_a_retained_commit_shows_them(publish):
    old = publish(DS, D1, {D1: 2})
    new = publish(DS, D1, {D1: 1})
    assert visible_ids() == set(new.segment_ids)
    soon = created(new.commit_seq) + timedelta(days=1)
    assert services.history_apply(datasource=DS, now=soon) is None
    assert Segment.objects.filter(id__in=old.segment_ids, used=True).count() == 2
    # Once the commit that showed them is past the retention, they go unused: one commit.
    later = created(new.commit_seq) + timedelta(days=8)
    report = run_history_duty(now=later)
    assert report[DS]["markedUnused"] == 2
    entry = CommitLogEntry.objects.get(seq=report[DS]["commit"])
    assert sorted(entry.removed) == sorted(old.segment_ids) and "history retention" in entry.note
    assert visible_ids() == set(new.segment_ids)
    assert not Segment.objects.filter(id__in=old.segment_ids, used=True).exists()


def test_a_segment_shown_by_a_retained_commit_in_between_is_kept(publish):
    # s1, then s2 over it, then s3 over s2: with the first commit expired but the
    # second retained, s2 (shown right after the second commit) stays; s1 goes.
    s1 = publish(DS, D1, {D1: 1})
    s2 = publish(DS, D1, {D1: 1})
    s3 = publish(DS, D1, {D1: 1})
    now = created(s1.commit_seq) + timedelta(days=7, microseconds=1)
    assert created(s2.commit_seq) >= now - timedelta(days=7)
    entry = services.history_apply(datasource=DS, now=now)
    assert entry.removed == s1.segment_ids
    assert Segment.objects.get(id=s2.segment_ids[0]).used
    assert visible_ids() == set(s3.segment_ids)


def test_a_running_tasks_read_point_is_retained(publish, claimed_task):
    s1 = publish(DS, D1, {D1: 1})
    reader = claimed_task(DS)
    services.lock_acquire(task=reader, interval=Interval.parse(D2))  # reads as of s1's commit
    s2 = publish(DS, D1, {D1: 1})
    far = created(s2.commit_seq) + timedelta(days=30)
    assert retention_selectors.history_horizon(datasource=DS, now=far).seq == s1.commit_seq
    assert services.history_apply(datasource=DS, now=far) is None
    services.task_finish(task_id=reader.id, status=TaskStatus.SUCCESS)
    assert services.history_apply(datasource=DS, now=far).removed == s1.segment_ids


def test_kill_never_deletes_a_segment_a_retained_as_of_shows(publish, no_enqueue):
    a = publish(DS, D1, {D1: 1})
    b = publish(DS, D2, {D2: 1})
    services.rules_set(datasource=DS, rules=[{"type": "dropByInterval", "interval": D1}])
    drop = services.retention_apply(datasource=DS).entry
    # Even with no buffer and no duration to retain, the dropped day is shown by
    # retained commits (before the drop): the kill duty leaves it.
    assert kill_plan(datasource=DS, config=EAGER, now=timezone.now()) is None
    assert run_kill_duty(config=EAGER) == {}
    # Once the drop is the oldest retained commit, nothing retained shows it.
    later = created(drop.seq) + timedelta(days=8)
    report = run_kill_duty(config=EAGER, now=later)
    task = run_task_here(report[DS]["task"])
    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["segmentsKilled"] == 1
    assert not Segment.objects.filter(id__in=a.segment_ids).exists()
    assert Segment.objects.filter(id__in=b.segment_ids, used=True).exists()
    assert task.spec["context"] == {"strataDuty": "kill"}


def test_kill_duty_honours_buffer_and_duration_to_retain(publish, no_enqueue):
    publish(DS, D1, {D1: 1})
    services.segments_mark_used(datasource=DS, used=False, interval=Interval.parse(D1))
    later = timezone.now() + timedelta(days=8)
    druid_defaults = KillConfig(on=True)  # P90D retained, P30D buffer
    # Unused for 8 days only: within the 30-day buffer (Druid #5305).
    assert kill_plan(datasource=DS, config=druid_defaults, now=later) is None
    # Past the buffer, but a 2024 interval is long past P90D too.
    plan = kill_plan(datasource=DS, config=druid_defaults, now=later + timedelta(days=30))
    assert plan is not None and str(plan.interval) == Interval.parse(D1).__str__()
    # A durationToRetain longer than the data's age keeps it.
    keep = KillConfig(
        on=True, duration_to_retain=Period.parse("P100Y"), buffer_period=Period.parse("P0D")
    )
    assert kill_plan(datasource=DS, config=keep, now=later) is None
    assert run_kill_duty(config=KillConfig(on=False), now=later) == {}


def test_kill_duty_leaves_intervals_a_running_task_holds(publish, claimed_task, no_enqueue):
    publish(DS, D1, {D1: 1})
    publish(DS, D2, {D2: 1})
    services.segments_mark_used(
        datasource=DS, used=False, interval=Interval.parse("2024-01-01/2024-01-03")
    )
    holder = claimed_task(DS)
    services.lock_acquire(task=holder, interval=Interval.parse(D1))
    later = timezone.now() + timedelta(days=8)
    plan = kill_plan(datasource=DS, config=EAGER, now=later)
    assert str(plan.interval) == str(Interval.parse(D2))  # D1 is locked: not in the umbrella
    report = run_kill_duty(config=EAGER, now=later)
    # One duty kill task per dataSource at a time.
    assert run_kill_duty(config=EAGER, now=later)[DS]["skipped"]
    task = run_task_here(report[DS]["task"])
    assert task.status == TaskStatus.SUCCESS, task.error
    assert Segment.objects.filter(start__date="2024-01-01").exists()
    assert not Segment.objects.filter(start__date="2024-01-02").exists()


def test_kill_max_interval_whitelist_and_slot_budget(publish, no_enqueue):
    day0 = timezone.now() - timedelta(days=400)
    unused = [
        UnusedSegment(
            f"s{i}", Interval(day0 + timedelta(days=d), day0 + timedelta(days=d + 1)), day0
        )
        for i, d in enumerate((0, 10, 40))
    ]
    plan = plan_kill(config=EAGER, now=timezone.now(), unused=unused, history_starts=day0)
    assert plan.segment_ids == ("s0", "s1")  # s2 is past maxInterval P30D from s0's start
    unlimited = KillConfig(**{**EAGER.__dict__, "max_interval": None})
    plan = plan_kill(config=unlimited, now=timezone.now(), unused=unused, history_starts=day0)
    assert plan.segment_ids == ("s0", "s1", "s2")
    assert kill_slot_budget(EAGER, 2) == 1 and kill_slot_budget(EAGER, 40) == 4
    assert kill_slot_budget(KillConfig(max_task_slots=2), 40) == 2
    publish(DS, D1, {D1: 1})
    services.segments_mark_used(datasource=DS, used=False, interval=Interval.parse(D1))
    later = timezone.now() + timedelta(days=8)
    others = KillConfig(**{**EAGER.__dict__, "datasources": ("other",)})
    assert run_kill_duty(config=others, now=later) == {}
    assert run_kill_duty(config=KillConfig(**{**EAGER.__dict__, "datasources": (DS,)}), now=later)


def test_a_segment_marked_unused_after_the_plan_is_not_killed(publish, no_enqueue):
    publish(DS, D1, {D1: 1})
    c = publish(DS, D2, {D2: 1})
    services.segments_mark_used(datasource=DS, used=False, interval=Interval.parse(D1))
    later = timezone.now() + timedelta(days=8)
    plan = kill_plan(datasource=DS, config=EAGER, now=later)
    # D2 goes unused after the decision: the kill task's cutoff spares it (Druid #15710),
    # even over an interval that covers it.
    services.segments_mark_used(datasource=DS, used=False, interval=Interval.parse(D2))
    spec = kill_spec(DS, plan)
    spec["interval"] = "2024-01-01/2024-01-03"
    task = run_task_here(services.task_submit(spec=spec).id)
    assert task.status == TaskStatus.SUCCESS, task.error
    assert task.report["segmentsKilled"] == 1
    assert Segment.objects.filter(id__in=c.segment_ids).exists()


def test_the_duties_are_scheduled_in_beat_and_registered():
    from console.celery import app

    app.loader.import_default_modules()
    schedule = django_settings.CELERY_BEAT_SCHEDULE
    for name in ("intermediary-janitor", "retention-duty", "history-duty", "kill-duty"):
        assert schedule[name]["task"] in app.tasks
    # Run by name: a worker's run_task, and the reaper and compaction rounds on request.
    for task in ("run_task", "task_reaper", "compaction_duty"):
        assert f"workers.tasks.{task}" in app.tasks
    assert schedule["retention-duty"]["schedule"] == django_settings.STRATA_RETENTION_SECONDS


def test_the_api_the_sql_endpoint_and_the_console_refuse_expired_as_of(
    publish, api_client, client, user, settings
):
    import time

    first = publish(DS, D1, {D1: 1})
    second = publish(DS, D1, {D1: 1})
    timeline = f"/api/v1/datasources/{DS}/timeline"
    assert api_client.get(f"{timeline}?as_of={first.commit_seq}").status_code == 200
    time.sleep(0.2)
    settings.STRATA_HISTORY_RETENTION = "PT0.1S"
    refused = api_client.get(f"{timeline}?as_of={first.commit_seq}")
    assert refused.status_code == 400
    body = refused.json()
    assert body["field"] == "as_of"
    assert f"oldest retained commit is {second.commit_seq}" in body["message"]
    assert api_client.get(f"{timeline}?as_of={second.commit_seq}").status_code == 200
    sql = api_client.post(
        "/api/v1/query",
        {"sql": f"SELECT COUNT(*) FROM {DS}", "as_of": first.commit_seq},
        format="json",
    )
    assert sql.status_code == 400 and sql.json()["field"] == "as_of"
    assert f"oldest retained commit is {second.commit_seq}" in sql.json()["message"]
    sys_segments = api_client.post(
        "/api/v1/query",
        {"sql": "SELECT COUNT(*) FROM sys.segments", "as_of": first.commit_seq},
        format="json",
    )
    assert sys_segments.status_code == 400 and sys_segments.json()["field"] == "as_of"
    now_sys = api_client.post(
        "/api/v1/query",
        {"sql": "SELECT COUNT(*) FROM sys.segments", "as_of": second.commit_seq},
        format="json",
    )
    assert now_sys.status_code == 200, now_sys.content
    client.force_login(user)
    page = client.get(f"/datasources/{DS}?as_of={first.commit_seq}")
    assert f"oldest retained commit is {second.commit_seq}" in page.content.decode()
    # The commit page of the second commit shows the first's timeline: with a warning.
    commit = client.get(f"/datasources/{DS}/commits/{second.commit_seq}").content.decode()
    assert "may lack deleted segments" in commit


def test_time_travel_before_a_hand_kill_is_refused_not_shown_without_its_files(
    publish, api_client, no_enqueue
):
    first = publish(DS, D1, {D1: 1})
    other = publish(DS, D2, {D2: 1})
    unmark = services.segments_mark_used(datasource=DS, used=False, interval=Interval.parse(D1))
    timeline = f"/api/v1/datasources/{DS}/timeline"
    assert api_client.get(f"{timeline}?as_of={other.commit_seq}").status_code == 200
    # An operator's kill task deletes the unused day at once, as Druid's does.
    task = run_task_here(
        services.task_submit(spec={"type": "kill", "dataSource": DS, "interval": D1}).id
    )
    assert task.status == TaskStatus.SUCCESS and task.report["segmentsKilled"] == 1
    assert not Segment.objects.filter(id__in=first.segment_ids).exists()
    # Before the unmark, time travel would show a segment whose file is gone: refused.
    refused = api_client.get(f"{timeline}?as_of={other.commit_seq}")
    assert refused.status_code == 400
    message = refused.json()["message"]
    assert f"kill commit {task.report['commit']}" in message
    assert f"oldest commit time travel can show is {unmark.seq}" in message
    assert api_client.get(f"{timeline}?as_of={unmark.seq}").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_beat_scheduled_retention_duty_runs_on_a_real_worker(worker, publish):
    import time

    from console.celery import app

    kept = publish(DS, D2, {D2: 1})
    dropped = publish(DS, D1, {D1: 1})
    services.rules_set(datasource=DS, rules=[{"type": "dropByInterval", "interval": D1}])
    # What beat sends every STRATA_RETENTION_SECONDS, by the schedule's task name.
    name = django_settings.CELERY_BEAT_SCHEDULE["retention-duty"]["task"]
    app.send_task(name, queue=worker.queue)
    deadline = time.monotonic() + 60
    while Segment.objects.filter(id__in=dropped.segment_ids, used=True).exists():
        assert time.monotonic() < deadline, worker.tail()
        time.sleep(0.2)
    entry = CommitLogEntry.objects.filter(datasource=DS).order_by("-seq").first()
    assert entry.kind == CommitKind.MARK_UNUSED and entry.removed == dropped.segment_ids
    assert Segment.objects.filter(id__in=kept.segment_ids, used=True).exists()
