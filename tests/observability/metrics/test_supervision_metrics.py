"""Supervision metrics against hand-made approvals whose numbers are known: who decided (rules,
people, grants, the run's policy, expiry), what each rule did, time saved, and approval waits by
rule and by tool."""
from datetime import timedelta

import pytest
from django.urls import reverse

from runs.models import Agent, Approval, RunGrant, ToolCall
from runs.observability.metrics.page import metrics_summary
from tests.lifecycle.test_history import user_in
from tests.observability.metrics.test_metrics import END, MIDNIGHT, START, at, call, run

pytestmark = pytest.mark.django_db
S = Approval.Status


def decision(r, tool, status, *, wait=None, rule=None, automatic=False, grant=False, requested=None):
    """One approval of a `tool` call in run `r`; `rule` is (name, version); `wait` seconds to decide."""
    requested = requested or at(4)
    approval = Approval.objects.create(
        tool_call=call(r, tool, ToolCall.Status.PENDING), run=r, status=status, automatic=automatic,
        rule_name=rule[0] if rule else "", rule_version=rule[1] if rule else None,
        decided_by_name="" if automatic or status in (S.PENDING, S.EXPIRED) else "alice",
        grant=RunGrant.objects.create(run=r, tool_name=tool, granted_by_name="alice") if grant else None,
    )
    decided = requested + timedelta(seconds=wait or 0) if status != S.PENDING else None
    Approval.objects.filter(pk=approval.pk).update(requested_at=requested, decided_at=decided)
    return approval


SMALL_V3, SMALL_V2, NO_DELETES, BIG = ("refunds small", 3), ("refunds small", 2), ("no deletes", 1), ("big refunds", 1)


@pytest.fixture
def supervised():
    agent = Agent.objects.create(name="alpha")
    r = run(agent)
    for _ in range(4):
        decision(r, "refund", S.APPROVED, rule=SMALL_V3, automatic=True)
    decision(r, "refund", S.APPROVED, rule=SMALL_V2, automatic=True)
    for _ in range(2):
        decision(r, "delete_account", S.REJECTED, rule=NO_DELETES, automatic=True)
    # "big refunds" asks people: they took 100, 300, 200 s on refunds, 1000 s on a cancellation.
    for wait in (100, 300, 200):
        decision(r, "refund", S.APPROVED, rule=BIG, wait=wait)
    decision(r, "cancel_order", S.REJECTED, rule=BIG, wait=1000)
    decision(r, "refund", S.PENDING, rule=BIG)
    for _ in range(2):
        decision(r, "cancel_order", S.APPROVED, automatic=True, grant=True)
    decision(r, "cancel_order", S.APPROVED, automatic=True)  # the run's approve-all policy
    # No rule: people took 10..50 s.
    for wait in (40, 10, 30, 20):
        decision(r, "cancel_order", S.APPROVED, wait=wait)
    decision(r, "cancel_order", S.REJECTED, wait=50)
    decision(r, "cancel_order", S.EXPIRED, wait=3600)
    decision(r, "refund", S.EXPIRED, wait=60, rule=BIG)
    decision(r, "cancel_order", S.PENDING)

    # A run created before the period: none of its approvals count.
    outside = run(agent, created=MIDNIGHT - timedelta(seconds=1))
    decision(outside, "refund", S.APPROVED, rule=SMALL_V3, automatic=True)
    decision(outside, "refund", S.APPROVED, rule=BIG, wait=5000)
    return agent


def test_shares_of_decisions_by_who_decided(supervised):
    s = metrics_summary(start=START, end=END).supervision
    assert s.decided == 21  # pending ones left out
    shares = {d.kind: (d.count, d.share) for d in s.deciders}
    assert shares == {
        "person": (9, 9 / 21), "rule": (7, 7 / 21), "grant": (2, 2 / 21), "policy": (1, 1 / 21), "expiry": (2, 2 / 21),
        "run_ended": (0, 0.0),
    }


def test_rule_hits_by_name_and_version(supervised):
    s = metrics_summary(start=START, end=END).supervision
    rows = [(r.rule_name, r.rule_version, r.hits, r.approved, r.rejected, r.asked) for r in s.rule_hits]
    assert rows == [
        ("big refunds", 1, 6, 0, 0, 6),  # 4 decided by people, 1 expired, 1 still waiting
        ("refunds small", 3, 4, 4, 0, 0),
        ("no deletes", 1, 2, 0, 2, 0),
        ("refunds small", 2, 1, 1, 0, 0),
    ]


def test_time_saved_is_automatic_rule_and_grant_decisions_times_the_median_person_wait(supervised):
    s = metrics_summary(start=START, end=END).supervision
    assert s.saved_calls == 9  # 7 by rules, 2 by grants; the policy's decision is not counted
    # People's waits: 10, 20, 30, 40, 50, 100, 200, 300, 1000 -> median (5th of 9) 50 s, p90 (9th) 1000 s.
    assert (s.person_decisions, s.person_wait_p50, s.person_wait_p90) == (9, 50.0, 1000.0)
    assert s.saved_minutes == pytest.approx(9 * 50 / 60)


def test_approval_wait_by_rule_and_by_tool(supervised):
    s = metrics_summary(start=START, end=END).supervision
    # big refunds: 100, 200, 300, 1000 -> 2nd of 4 and 4th of 4; no rule: 10..50 -> 3rd and 5th of 5.
    assert [(w.key, w.count, w.p50, w.p90) for w in s.wait_by_rule] == [
        ("(no rule)", 5, 30.0, 50.0), ("big refunds", 4, 200.0, 1000.0)]
    # cancel_order: 10, 20, 30, 40, 50, 1000 -> 3rd and 6th of 6; refund: 100, 200, 300.
    assert [(w.key, w.count, w.p50, w.p90) for w in s.wait_by_tool] == [
        ("cancel_order", 6, 30.0, 1000.0), ("refund", 3, 200.0, 300.0)]


def test_an_empty_period_has_no_shares_and_no_minutes(db):
    s = metrics_summary(start=START, end=END).supervision
    assert s.decided == 0 and all(d.share is None for d in s.deciders)
    assert (s.saved_calls, s.saved_minutes, s.wait_by_rule, s.rule_hits) == (0, None, [], [])


def test_the_page_and_the_api_show_the_supervision_figures(client, supervised):
    client.force_login(user_in("viewers", "vera"))
    period = {"date_from": "2026-03-01", "date_to": "2026-03-07"}
    html = client.get(reverse("metrics"), period).content.decode()
    assert 'data-decider="rule" data-count="7"' in html
    assert 'id="time-saved" data-calls="9" data-minutes="7.500"' in html
    assert "times the median time a call waited for a person" in html  # says how it is computed
    assert 'data-rule="no deletes" data-version="1" data-hits="2" data-approved="0" data-rejected="2"' in html
    for table in ("table-rule-hits", "table-wait-by-rule", "table-wait-by-tool"):
        assert f'id="{table}"' in html
    assert 'data-key="big refunds" data-count="4" data-p50="200.0" data-p90="1000.0"' in html
    assert 'data-key="cancel_order" data-count="6" data-p50="30.0" data-p90="1000.0"' in html

    body = client.get("/api/v1/metrics/", period).json()["supervision"]
    assert body["decided"] == 21
    assert {d["kind"]: d["count"] for d in body["deciders"]}["grant"] == 2
    assert body["rule_hits"][0] == {"rule_name": "big refunds", "rule_version": 1, "hits": 6, "approved": 0,
                                    "rejected": 0, "sent_to_people": 6}
    assert body["time_saved"]["calls"] == 9 and body["time_saved"]["minutes"] == pytest.approx(7.5)
    assert body["wait_by_tool"][1] == {"key": "refund", "count": 3, "p50": 200.0, "p90": 300.0}


def test_queries_do_not_grow_with_the_number_of_approvals(supervised, django_assert_max_num_queries):
    r = run(supervised)
    for wait in range(1, 200):
        decision(r, "cancel_order", S.APPROVED, wait=wait, rule=BIG if wait % 2 else None)
    with django_assert_max_num_queries(40):
        metrics_summary(start=START, end=END)
