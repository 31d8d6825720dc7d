"""The approval queue page: what an operator sees, who may decide, expiry, and query counts."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import Approval, RunEvent
from runs.supervision.approvals.decide import approvals_expire
from runs.supervision.evidence.provenance import identifier_seen, identifiers_in, is_id_key, unseen_identifiers
from runs.supervision.queue.argument_lines import argument_lines
from tests.support.approval_fixtures import make_user, pending_approval
from toolsapp.models import Tool
from toolsapp.sensitive import MASK

DEMO_TASK = "Cancel order ORD-1001"


# --- Pure helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key, expected",
    [("id", True), ("order_id", True), ("ticket-id", True), ("ORDER_ID", True), ("orderId", True),
     ("order_ids", True), ("paid", False), ("valid", False), ("reason", False), (None, False), ("", False)],
)
def test_id_keys(key, expected):
    assert is_id_key(key) is expected


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("order", "ORD-1001", ["ORD-1001"]),
        ("ref", "inv-77", ["inv-77"]),
        ("ref", "123456789", ["123456789"]),
        ("ref", "3f2b8c1e-7a4d-4e2b-9c1f-0a1b2c3d4e5f", ["3f2b8c1e-7a4d-4e2b-9c1f-0a1b2c3d4e5f"]),
        ("ticket_id", 42, ["42"]),
        ("customer_id", "acme", ["acme"]),
        ("count", 42, []),
        ("flag", True, []),
        ("ticket_id", True, []),
        ("city", "London", []),
        ("reason", "Customer asked to cancel ORD-1001 and ORD-1002 today", ["ORD-1001", "ORD-1002"]),
        ("reason", "Send it as UTF-8 before 2024", []),
        ("amount", 12.5, []),
        ("ref", "  ", []),
    ],
)
def test_identifiers_in_a_value(key, value, expected):
    assert identifiers_in(key, value) == expected


def test_identifier_seen_matches_whole_tokens_only():
    known = 'Cancel order ORD-1001\n{"order_id": "ORD-2001", "items": [7]}'
    assert identifier_seen("ORD-1001", known)
    assert identifier_seen("ord-2001", known)  # the model may change the case
    assert identifier_seen("7", known)
    assert not identifier_seen("ORD-100", known)
    assert not identifier_seen("ORD-10011", known)
    assert not identifier_seen("1001", "ORD-10011")


def test_unseen_identifiers_of_a_value():
    known = "Cancel order ORD-1001"
    assert unseen_identifiers("order_id", "ORD-1001", known) == []
    assert unseen_identifiers("order_id", "ORD-7777", known) == ["ORD-7777"]
    assert unseen_identifiers("reason", "customer asked", known) == []


def test_sensitive_keys_are_masked_by_name_at_any_depth():
    args = {"card": "4111", "nested": {"Card": {"n": 1}, "other": [{"card": "x", "ok": 2}]}, "keep": "v"}
    lines = argument_lines(args, sensitive_fields=["card"], unseen=lambda k, v: [])
    text = "".join(l.text for l in lines)
    assert [l.key for l in lines if l.masked] == ['"card"', '"Card"', '"card"']
    assert "4111" not in text and '"x"' not in text and "1" not in text.replace(MASK, "")
    assert '"v"' in text and "2" in text


def test_argument_lines_pretty_print_mask_and_flag():
    args = {"order_id": "ORD-7777", "secret": {"token": "abc"}, "items": ["ORD-1001", 2], "empty": {}}
    lines = argument_lines(
        args, sensitive_fields=["secret"], unseen=lambda k, v: unseen_identifiers(k, v, "ORD-1001")
    )
    text = "\n".join(f"{l.indent}{l.key + ': ' if l.key else ''}{l.text}{',' if l.comma else ''}" for l in lines)
    assert text == (
        '{\n  "order_id": "ORD-7777",\n  "secret": ••••,\n  "items": [\n    "ORD-1001",\n    2\n  ],\n  "empty": {}\n}'
    )
    assert [l.text for l in lines if l.masked] == [MASK]
    assert [l.unseen for l in lines if l.unseen] == [("ORD-7777",)]
    assert "abc" not in text


def test_masked_values_are_never_checked_for_identifiers():
    checked = []
    argument_lines({"account_id": "ACC-1"}, sensitive_fields=["account_id"], unseen=lambda k, v: checked.append(v) or [])
    assert checked == []


# --- Fixtures ----------------------------------------------------------------------------------


def queue_html(client) -> str:
    response = client.get(reverse("approval_queue"))
    assert response.status_code == 200
    return response.content.decode()


def card_html(html: str, approval: Approval) -> str:
    start = html.index(f'data-approval-id="{approval.pk}"')
    end = html.find("</article>", start)
    return html[start:end]


# --- The queue's content ------------------------------------------------------------------------


def test_queue_shows_a_pending_approval_with_what_the_operator_needs(launch, client, alice):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    client.force_login(alice)
    html = queue_html(client)
    card = card_html(html, approval)
    assert 'id="approval-list"' in html
    assert "cancel_order" in card
    assert reverse("run_detail", args=[run.pk]) in card
    assert DEMO_TASK in card
    assert "&quot;order_id&quot;" in card and "&quot;ORD-1001&quot;" in card
    assert approval.tool_call.args_hash[:10] in card
    assert "approve-button" in card and "reject-button" in card and 'name="reason"' in card
    assert reverse("approval_decide", args=[approval.pk]) in card
    # ORD-1001 is in the task: not something the model made up.
    assert "flag-unseen" not in card


def test_sensitive_fields_are_masked(launch, client, alice):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    run = launch(DEMO_TASK, approval_policy="ask")
    client.force_login(alice)
    card = card_html(queue_html(client), pending_approval(run))
    assert '<span class="masked"' in card and MASK in card
    assert "Customer asked to cancel" not in card
    assert "ORD-1001" in card  # only the sensitive field is hidden


def test_an_invented_order_id_is_flagged(launch, script, client, alice):
    model = script(
        {"content": "I will cancel order ORD-7777 now.",
         "tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "ORD-7777", "reason": "customer asked"}}]},
    )
    run = launch("Please cancel my most recent order", models=[model], approval_policy="ask")
    client.force_login(alice)
    card = card_html(queue_html(client), pending_approval(run))
    assert card.count('class="flag-unseen"') >= 1
    assert "ORD-7777" in card
    assert "I will cancel order ORD-7777 now." in card  # what the model said before the call


def test_an_id_from_an_earlier_tool_result_is_not_flagged(launch, script, client, alice):
    model = script(
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "ORD-1003"}}]},
        {"content": "Found it: the desk lamp.",
         "tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "ORD-1003", "reason": "customer asked"}}]},
    )
    run = launch("Cancel my desk lamp order", models=[model], approval_policy="ask")
    assert "ORD-1003" in run.tool_calls.get(tool_name="lookup_order").result_text
    client.force_login(alice)
    card = card_html(queue_html(client), pending_approval(run))
    assert "ORD-1003" in card
    assert "flag-unseen" not in card
    assert "Found it: the desk lamp." in card


def test_the_previous_steps_words_are_shown_when_the_call_came_without_text(launch, script, client, alice):
    model = script(
        {"content": "Let me look that order up first.",
         "tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "ORD-1001"}}]},
        {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "ORD-1001", "reason": "customer asked"}}]},
    )
    run = launch(DEMO_TASK, models=[model], approval_policy="ask")
    client.force_login(alice)
    assert "Let me look that order up first." in card_html(queue_html(client), pending_approval(run))


def test_note_and_expiry_are_shown(launch, client, alice):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    approval.note = "Interrupted by a crash while running; it may already have taken effect."
    approval.expires_at = timezone.now() + timedelta(hours=1)
    approval.save()
    client.force_login(alice)
    card = card_html(queue_html(client), approval)
    assert "Interrupted by a crash" in card
    assert "expires at" in card


def test_queue_lists_oldest_first_and_only_pending(launch, client, alice, no_dispatch):
    from runs.supervision.approvals.decide import approval_decide

    first, second, third = (launch(DEMO_TASK, approval_policy="ask") for _ in range(3))
    approval_decide(approval_id=pending_approval(second).pk, user=alice, approve=False, reason="not today")
    client.force_login(alice)
    html = queue_html(client)
    listed = html[html.index('id="approval-list"'):html.index('id="approval-audit"')]
    a1, a3 = pending_approval(first), pending_approval(third)
    assert listed.index(f'data-approval-id="{a1.pk}"') < listed.index(f'data-approval-id="{a3.pk}"')
    assert listed.count('class="card approval"') == 2


def test_audit_lists_recent_decisions(launch, client, alice, no_dispatch):
    from runs.supervision.approvals.decide import approval_decide

    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    approval_decide(approval_id=approval.pk, user=alice, approve=False, reason="customer changed their mind")
    client.force_login(alice)
    html = queue_html(client)
    audit = html[html.index('id="approval-audit"'):]
    assert "alice" in audit and "Rejected" in audit and "customer changed their mind" in audit
    assert "cancel_order" in audit and approval.tool_call.args_hash[:10] in audit
    assert reverse("run_detail", args=[run.pk]) in audit


def test_partial_and_count(launch, client, viewer):
    launch(DEMO_TASK, approval_policy="ask")
    client.force_login(viewer)
    partial = client.get(reverse("approval_queue_partial"))
    assert partial.status_code == 200
    body = partial.content.decode()
    assert 'id="approval-list"' in body and "<html" not in body
    assert client.get(reverse("approval_count")).json()["pending"] == 1


# --- Permissions over HTTP -----------------------------------------------------------------------


def test_viewer_sees_the_queue_but_cannot_decide(launch, client, viewer, no_dispatch):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    client.force_login(viewer)
    card = card_html(queue_html(client), approval)
    assert "cancel_order" in card
    assert "approve-button" not in card and "reject-button" not in card
    response = client.post(reverse("approval_decide", args=[approval.pk]), {"decision": "approve"})
    assert response.status_code == 403
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert no_dispatch == []


@pytest.mark.parametrize("name", ["approval_queue", "approval_queue_partial", "approval_count"])
def test_anonymous_users_are_sent_to_login(client, demo_data, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_anonymous_post_is_sent_to_login(launch, client):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    response = client.post(reverse("approval_decide", args=[approval.pk]), {"decision": "approve"})
    assert response.status_code == 302 and response.url.startswith(reverse("login"))
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_users_without_the_permission_get_403(client, demo_data):
    client.force_login(make_user("nobody", None))
    assert client.get(reverse("approval_queue")).status_code == 403
    assert client.get(reverse("approval_count")).status_code == 403


def test_decide_needs_post_and_csrf(launch, alice, no_dispatch):
    from django.test import Client

    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    url = reverse("approval_decide", args=[approval.pk])
    assert client.get(url).status_code == 405
    assert client.post(url, {"decision": "approve"}).status_code == 403  # no CSRF token
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


# --- Deciding over HTTP ----------------------------------------------------------------------------


def test_operator_approves_from_the_form(launch, client, alice, no_dispatch):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    client.force_login(alice)
    response = client.post(reverse("approval_decide", args=[approval.pk]), {"decision": "approve"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("approval_queue")
    assert "Approved cancel_order" in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.decided_by == alice
    assert no_dispatch == [run.pk]  # the run goes back to a worker
    event = RunEvent.objects.get(run=run, kind="approval")
    assert event.data["status"] == Approval.Status.APPROVED and event.data["decided_by"] == "alice"


def test_operator_rejects_with_a_reason_over_fetch(launch, client, alice, no_dispatch):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    client.force_login(alice)
    response = client.post(
        reverse("approval_decide", args=[approval.pk]),
        {"decision": "reject", "reason": "wrong customer"},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 200
    assert response.json()["approval"]["status"] == Approval.Status.REJECTED
    approval.refresh_from_db()
    assert approval.status == Approval.Status.REJECTED and approval.reason == "wrong customer"


def test_second_decision_is_refused_naming_the_winner(launch, client, alice, bob, no_dispatch):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    url = reverse("approval_decide", args=[approval.pk])
    client.force_login(alice)
    assert client.post(url, {"decision": "approve"}, HTTP_ACCEPT="application/json").status_code == 200

    client.force_login(bob)
    response = client.post(url, {"decision": "reject", "reason": "no"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 409
    assert response.json()["error"].startswith("Already approved by alice at ")

    response = client.post(url, {"decision": "reject", "reason": "no"}, follow=True)
    assert "Already approved by alice at " in response.content.decode()
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED and approval.decided_by == alice
    assert RunEvent.objects.filter(run=approval.run, kind="approval").count() == 1


def test_invalid_decision_is_400(launch, client, alice):
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    client.force_login(alice)
    response = client.post(reverse("approval_decide", args=[approval.pk]), {"decision": "maybe"})
    assert response.status_code == 400
    assert client.post(reverse("approval_decide", args=[999999]), {"decision": "approve"}).status_code == 404


# --- Expiry ------------------------------------------------------------------------------------------


def test_deciding_an_overdue_approval_records_it_as_expired(launch, client, alice, no_dispatch):
    run = launch(DEMO_TASK, approval_policy="ask")
    approval = pending_approval(run)
    Approval.objects.filter(pk=approval.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    client.force_login(alice)
    card = card_html(queue_html(client), approval)
    assert "expired at" in card
    response = client.post(
        reverse("approval_decide", args=[approval.pk]), {"decision": "approve"}, HTTP_ACCEPT="application/json"
    )
    assert response.status_code == 200
    assert response.json()["approval"]["status"] == Approval.Status.EXPIRED
    assert "counts as a rejection" in response.json()["message"]
    approval.refresh_from_db()
    assert approval.status == Approval.Status.EXPIRED and approval.decided_by is None
    assert no_dispatch == [run.pk]  # resumed: the model hears the call was not executed


def test_approvals_expire_expires_only_overdue_ones(launch, no_dispatch):
    overdue, current, open_ended = (pending_approval(launch(DEMO_TASK, approval_policy="ask")) for _ in range(3))
    now = timezone.now()
    Approval.objects.filter(pk=overdue.pk).update(expires_at=now - timedelta(minutes=1))
    Approval.objects.filter(pk=current.pk).update(expires_at=now + timedelta(hours=1))
    assert approvals_expire() == 1
    statuses = dict(Approval.objects.values_list("pk", "status"))
    assert statuses == {
        overdue.pk: Approval.Status.EXPIRED,
        current.pk: Approval.Status.PENDING,
        open_ended.pk: Approval.Status.PENDING,
    }
    assert no_dispatch == [overdue.run_id]
    assert RunEvent.objects.get(run_id=overdue.run_id, kind="approval").data["status"] == Approval.Status.EXPIRED


# --- Queries ---------------------------------------------------------------------------------------


def test_queue_queries_do_not_grow_with_the_number_of_approvals(
    launch, client, alice, no_dispatch, django_assert_max_num_queries
):
    from runs.supervision.approvals.decide import approval_decide

    runs = [launch(DEMO_TASK, approval_policy="ask") for _ in range(22)]
    for run in runs[:2]:  # something in the audit too
        approval_decide(approval_id=pending_approval(run).pk, user=alice, approve=False, reason="no")
    assert Approval.objects.filter(status=Approval.Status.PENDING).count() == 20
    client.force_login(alice)
    # 12, 2 for the cards' evidence (its rows, the sensitive fields of the tools it quotes), 2 for
    # the twins (the cards' keys, then the calls sharing them) and the first-shown stamp: at most 17.
    with django_assert_max_num_queries(17):
        html = queue_html(client)
    assert html.count('class="card approval"') == 20
    with django_assert_max_num_queries(17):
        assert client.get(reverse("approval_queue_partial")).status_code == 200
