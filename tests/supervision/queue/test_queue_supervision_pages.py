"""The queue and run pages of supervision: two-person state, groups and rules shown, edits
offered only where they are safe, grants on the run page, bulk decisions, one approval's own
page, and who may do what (permissions, CSRF, sign-in)."""
import html as html_lib
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from runs.models import Approval, ApprovalVote, RunGrant
from tests.support.approval_fixtures import pending_approval
from toolsapp.models import Tool
from toolsapp.sensitive import MASK

DEMO_TASK = "Cancel order ORD-1001"


def page_text(client, url) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return html_lib.unescape(response.content.decode())


def card_of(page: str, approval: Approval) -> str:
    start = page.index(f'data-approval-id="{approval.pk}"')
    return page[start:page.find("</article>", start)]


@pytest.fixture
def waiting(launch):
    """A run waiting on its cancel_order approval."""
    run = launch(DEMO_TASK, approval_policy="ask")
    return run, pending_approval(run)


# --- What the queue shows ------------------------------------------------------------------------


def test_a_two_person_approval_shows_one_of_two_and_who_gave_it(waiting, client, alice, bob):
    run, approval = waiting
    Approval.objects.filter(pk=approval.pk).update(required_approvals=2, approvals_given=1)
    ApprovalVote.objects.create(approval=approval, user=bob, user_name="bob")
    client.force_login(alice)
    card = card_of(page_text(client, reverse("approval_queue")), approval)
    assert "1 of 2 approvals" in card
    assert "approved by bob" in card
    # Grants never cover two-person calls; the second approval decides, so it may edit.
    assert "Approve + this tool for this run" not in card and "No grants for calls that need two people." in card
    assert "Edit arguments" in card

    Approval.objects.filter(pk=approval.pk).update(approvals_given=0)
    ApprovalVote.objects.all().delete()
    card = card_of(page_text(client, reverse("approval_queue")), approval)
    assert "0 of 2 approvals" in card
    # Any approval may edit: an edit starts the count again on the edited arguments.
    assert "Edit arguments" in card and "needs 2 approvals again" in card


def test_a_proposed_edit_is_shown_beside_the_models_arguments_masked_and_approved_by_its_hash(
        waiting, client, alice, bob, no_dispatch):
    _, approval = waiting
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    Approval.objects.filter(pk=approval.pk).update(required_approvals=2)
    secret = "bob's private note"
    client.force_login(bob)
    edit = json.dumps({"order_id": "ORD-1002", "reason": secret})
    response = client.post(reverse("approval_decide", args=[approval.pk]),
                           {"decision": "approve", "arguments": edit, "args_hash": approval.tool_call.args_hash},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1)

    client.force_login(alice)
    page = page_text(client, reverse("approval_queue"))
    card = card_of(page, approval)
    model_part, proposed_part = card.split("Proposed edit by bob", 1)
    assert '"ORD-1001"' in model_part and "The model's arguments" in model_part
    assert '"ORD-1002"' in proposed_part and MASK in proposed_part and "1 of 2 approvals on these arguments" in proposed_part
    assert secret not in page and "Customer asked to cancel" not in page
    assert f'name="args_hash" value="{approval.edited_args_hash}"' in card, "Approve approves the version shown"
    box = card.split("<textarea", 1)[1].split(">", 1)[1].split("</textarea>")[0]
    assert json.loads(box) == {"order_id": "ORD-1002", "reason": MASK}, "the box holds the proposed edit"

    # Approving the box as shown keeps bob's hidden value: the same arguments, the second approval.
    response = client.post(reverse("approval_decide", args=[approval.pk]),
                           {"decision": "approve", "arguments": box, "args_hash": approval.edited_args_hash},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    approval.refresh_from_db()
    assert (approval.status, json.loads(approval.edited_arguments)["reason"]) == (Approval.Status.APPROVED, secret)


def test_approving_from_a_page_that_showed_no_edit_is_refused_once_an_edit_was_proposed(
        waiting, client, alice, bob, no_dispatch):
    _, approval = waiting
    Approval.objects.filter(pk=approval.pk).update(required_approvals=2)
    client.force_login(alice)
    card = card_of(page_text(client, reverse("approval_queue")), approval)
    assert f'name="args_hash" value="{approval.tool_call.args_hash}"' in card
    from runs.supervision.approvals.decide import approval_decide
    approval_decide(approval_id=approval.pk, user=bob, approve=True,
                    arguments='{"order_id": "ORD-1002", "reason": "the second order"}')

    response = client.post(reverse("approval_decide", args=[approval.pk]),
                           {"decision": "approve", "args_hash": approval.tool_call.args_hash},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and "bob proposed edited arguments" in response.json()["error"]
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1)


def test_the_group_asked_and_the_rule_that_routed_the_call_are_shown(waiting, client, alice):
    _, approval = waiting
    group = Group.objects.create(name="refund-desk")
    Approval.objects.filter(pk=approval.pk).update(group=group, rule_name="refunds over 50", rule_version=3)
    client.force_login(alice)
    card = card_of(page_text(client, reverse("approval_queue")), approval)
    assert "asks group refund-desk" in card
    assert "sent by rule 'refunds over 50' v3" in card


def test_the_queue_shows_how_long_the_oldest_call_has_waited(waiting, client, alice):
    _, approval = waiting
    client.force_login(alice)
    page = page_text(client, reverse("approval_queue"))
    assert 'id="oldest-waiting"' in page and "The oldest call has waited" in page
    # In the header badge's words ("12 s", "2 h 5 min"), never Django's "0 minutes".
    Approval.objects.filter(pk=approval.pk).update(requested_at=timezone.now() - timedelta(seconds=12))
    page = page_text(client, reverse("approval_queue"))
    assert re.search(r"The oldest call has waited <strong>1[2-9] s</strong>", page)
    assert "0\xa0minutes" not in page and "0 minutes" not in page
    assert re.search(r"asked 1[2-9] s ago", card_of(page, approval))
    Approval.objects.filter(pk=approval.pk).update(requested_at=timezone.now() - timedelta(hours=2, minutes=5, seconds=3))
    page = page_text(client, reverse("approval_queue"))
    assert "The oldest call has waited <strong>2 h 5 min</strong>" in page
    assert "asked 2 h 5 min ago" in card_of(page, approval)


def test_the_audit_names_the_rule_that_decided(waiting, client, alice):
    _, approval = waiting
    Approval.objects.filter(pk=approval.pk).update(
        status=Approval.Status.APPROVED, automatic=True, rule_name="small refunds", rule_version=2
    )
    client.force_login(alice)
    page = page_text(client, reverse("approval_queue"))
    row = page[page.index(f'class="audit-row" data-approval-id="{approval.pk}"'):]
    assert "rule 'small refunds' v2" in row[:row.index("</tr>")]


# --- Edits: offered where safe ------------------------------------------------------------------


def test_the_edit_box_holds_the_calls_arguments_and_the_tools_schema(waiting, client, alice):
    _, approval = waiting
    client.force_login(alice)
    card = card_of(page_text(client, reverse("approval_queue")), approval)
    assert "Edit arguments" in card
    box = card[card.index("<textarea"):card.index("</textarea>")]
    assert "disabled" in box.split(">")[0], "a closed edit box must not send an edit"
    assert json.loads(box.split(">", 1)[1])["order_id"] == "ORD-1001"
    assert '"pattern": "^ORD-[0-9]{1,10}$"' in card  # the schema, for the browser's check
    assert "Approve + identical calls for this run" in card and "Approve + this tool for this run" in card


def test_a_tool_that_forbids_edits_has_no_edit_box(waiting, client, alice):
    _, approval = waiting
    Tool.objects.filter(name="cancel_order").update(allow_argument_edits=False)
    client.force_login(alice)
    card = card_of(page_text(client, reverse("approval_queue")), approval)
    assert "This tool forbids edits." in card
    assert "<textarea" not in card and "Edit arguments" not in card


def test_a_sensitive_value_stays_masked_in_the_edit_box(waiting, client, alice):
    _, approval = waiting
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    secret = json.loads(approval.tool_call.arguments)["reason"]
    client.force_login(alice)
    page = page_text(client, reverse("approval_queue"))
    box = card_of(page, approval).split("<textarea", 1)[1].split(">", 1)[1].split("</textarea>")[0]
    assert json.loads(box) == {"order_id": "ORD-1001", "reason": MASK}
    assert secret not in page


def test_viewer_sees_no_controls(waiting, client, viewer):
    _, approval = waiting
    client.force_login(viewer)
    page = page_text(client, reverse("approval_queue"))
    card = card_of(page, approval)
    assert "<textarea" not in card and "approve-button" not in card and "select-approval" not in card
    assert 'id="bulk-form"' not in page


# --- One approval's page (the escalation e-mails' link) ------------------------------------------


def test_the_approval_page_needs_sign_in_and_a_get_never_decides(waiting, client, viewer, alice):
    _, approval = waiting
    url = reverse("approval_detail", args=[approval.pk])
    assert url == f"/approvals/{approval.pk}/"
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    client.force_login(viewer)
    card = card_of(page_text(client, url), approval)
    assert "cancel_order" in card and "approve-button" not in card
    client.force_login(alice)
    card = card_of(page_text(client, url), approval)
    assert "approve-button" in card and f'name="next" value="{url}"' in card
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
    assert client.get(reverse("approval_detail", args=[approval.pk + 1000])).status_code == 404


def test_the_approval_page_of_a_decided_call_says_who_decided(waiting, client, alice):
    _, approval = waiting
    Approval.objects.filter(pk=approval.pk).update(status=Approval.Status.REJECTED, decided_by_name="bob", reason="no")
    client.force_login(alice)
    card = card_of(page_text(client, reverse("approval_detail", args=[approval.pk])), approval)
    assert "rejected by bob" in card and "approve-button" not in card


def test_a_user_without_the_view_permission_cannot_open_an_approval(waiting, client, django_user_model):
    _, approval = waiting
    client.force_login(django_user_model.objects.create_user("nobody", password="x"))
    assert client.get(reverse("approval_detail", args=[approval.pk])).status_code == 403


# --- Grants on the run page -----------------------------------------------------------------------


def test_the_run_page_lists_grants_with_revoke_for_operators_only(waiting, client, alice, viewer):
    run, approval = waiting
    active = RunGrant.objects.create(run=run, tool_name="cancel_order", args_hash=approval.tool_call.args_hash,
                                     granted_by=alice, granted_by_name="alice")
    RunGrant.objects.create(run=run, tool_name="cancel_order", granted_by_name="alice", revoked_by_name="bob",
                            revoked_at=approval.requested_at)
    client.force_login(alice)
    page = page_text(client, reverse("run_detail", args=[run.pk]))
    grants = page[page.index('id="run-grants"'):page.index("</table>", page.index('id="run-grants"'))]
    assert "identical cancel_order calls" in grants and "every cancel_order call" in grants
    assert "revoked by bob" in grants
    assert grants.count("revoke-button") == 1
    assert reverse("grant_revoke", args=[active.pk]) in grants
    client.force_login(viewer)
    page = page_text(client, reverse("run_detail", args=[run.pk]))
    assert "identical cancel_order calls" in page and "revoke-button" not in page


# --- Who may post -----------------------------------------------------------------------------------


def test_viewer_cannot_bulk_decide_or_revoke(waiting, client, viewer, alice):
    run, approval = waiting
    grant = RunGrant.objects.create(run=run, tool_name="cancel_order", granted_by_name="alice")
    client.force_login(viewer)
    assert client.post(reverse("approval_bulk"), {"ids": [approval.pk], "decision": "approve"}).status_code == 403
    assert client.post(reverse("grant_revoke", args=[grant.pk])).status_code == 403
    approval.refresh_from_db()
    grant.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and grant.active


def test_posts_without_a_csrf_token_are_refused(waiting, alice):
    run, approval = waiting
    grant = RunGrant.objects.create(run=run, tool_name="cancel_order", granted_by_name="alice")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("approval_bulk"), {"ids": [approval.pk], "decision": "approve"}).status_code == 403
    assert client.post(reverse("grant_revoke", args=[grant.pk])).status_code == 403
    assert client.post(reverse("approval_decide", args=[approval.pk]), {"decision": "approve"}).status_code == 403
    approval.refresh_from_db()
    grant.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and grant.active


def test_gets_never_decide_or_revoke(waiting, client, alice):
    run, approval = waiting
    grant = RunGrant.objects.create(run=run, tool_name="cancel_order", granted_by_name="alice")
    client.force_login(alice)
    assert client.get(reverse("approval_bulk"), {"ids": [approval.pk], "decision": "approve"}).status_code == 405
    assert client.get(reverse("grant_revoke", args=[grant.pk])).status_code == 405


# --- Decisions through the pages (H2's services) ---------------------------------------------------


def test_bulk_approve_reports_the_ones_decided_meanwhile(launch, client, alice, bob, no_dispatch):
    first = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    second = pending_approval(launch("Cancel order ORD-1003", approval_policy="ask"))
    Approval.objects.filter(pk=second.pk).update(status=Approval.Status.APPROVED, decided_by_name="bob", decided_at=timezone.now())
    client.force_login(alice)
    response = client.post(reverse("approval_bulk"), {"ids": [first.pk, second.pk], "decision": "approve", "reason": "ok"},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    body = response.json()
    assert body["decided"] == [first.pk]
    assert [a["id"] for a in body["already"]] == [second.pk]
    assert f"#{first.pk}" in body["message"] and f"#{second.pk} already approved by bob" in body["message"]
    first.refresh_from_db()
    assert first.status == Approval.Status.APPROVED and first.decided_by_name == "alice"


def test_an_edit_the_schema_refuses_is_not_approved_and_says_why(waiting, client, alice, no_dispatch):
    _, approval = waiting
    client.force_login(alice)
    edit = json.dumps({"order_id": "not-an-order", "reason": "customer asked"})
    response = client.post(reverse("approval_decide", args=[approval.pk]), {"decision": "approve", "arguments": edit},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    assert "order_id" in response.json()["error"]
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING


def test_reject_with_guidance_and_approve_with_a_grant(launch, client, alice, no_dispatch):
    rejected = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    approved = pending_approval(launch("Cancel order ORD-1003", approval_policy="ask"))
    client.force_login(alice)
    client.post(reverse("approval_decide", args=[rejected.pk]),
                {"decision": "reject", "reason": "wrong order", "guidance": "cancel ORD-1003 instead"})
    rejected.refresh_from_db()
    assert (rejected.status, rejected.guidance) == (Approval.Status.REJECTED, "cancel ORD-1003 instead")
    client.post(reverse("approval_decide", args=[approved.pk]), {"decision": "approve_tool"})
    grant = RunGrant.objects.get(run_id=approved.run_id)
    assert (grant.tool_name, grant.args_hash, grant.granted_by_name) == ("cancel_order", "", "alice")
    page = page_text(client, reverse("run_detail", args=[approved.run_id]))
    assert "every cancel_order call" in page

    response = client.post(reverse("grant_revoke", args=[grant.pk]), follow=True)
    assert "Revoked the grant" in html_lib.unescape(response.content.decode())
    grant.refresh_from_db()
    assert not grant.active and grant.revoked_by_name == "alice"
