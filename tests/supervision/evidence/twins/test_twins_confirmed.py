"""Approving twins together (a bulk approval, or one approval with a grant for the rest of its run)
decides nothing until the person names them; the API answers 409 listing them, unless the request
says it knows. A single plain Approve of a call with twins is allowed: its card names them."""
from django.urls import reverse
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.models import Agent, Approval, CallEvidence, RunGrant
from tests.projects import project
from tests.supervision.evidence.twins import card, queue_html, text_of, waiting

PENDING, APPROVED = Approval.Status.PENDING, Approval.Status.APPROVED


def statuses(*approvals) -> list[str]:
    return [Approval.objects.get(pk=a.pk).status for a in approvals]


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


def bulk(client, ids, *, confirm=None, json=False, decision="approve"):
    data = {"ids": [str(pk) for pk in ids], "decision": decision, "reason": "batch"}
    if confirm is not None:
        data["confirm_twins"] = confirm
    headers = {"HTTP_ACCEPT": "application/json"} if json else {}
    return client.post(reverse("approval_bulk"), data, **headers)


def test_a_bulk_approval_of_twins_is_refused_until_they_are_confirmed_by_name(launch, client, alice, no_dispatch):
    first, second = waiting(launch), waiting(launch)
    client.force_login(alice)

    refused = bulk(client, [first.pk, second.pk])
    assert refused.status_code == 409 and statuses(first, second) == [PENDING, PENDING]
    page = text_of(refused.content.decode())
    named = (f"#{first.pk} cancel_order in run {first.run_id} and #{second.pk} cancel_order in run {second.run_id} "
             "act on the same thing")
    assert "Nothing was approved: the selection holds twins" in page and named in page
    # The confirmation names them: one box for the group, sent with the same selection and reason.
    html = refused.content.decode()
    assert f'name="confirm_twins" value="{first.pk},{second.pk}" required' in html
    assert f'name="ids" value="{first.pk}"' in html and 'name="reason" value="batch"' in html

    # Naming only one of them is not enough.
    assert bulk(client, [first.pk, second.pk], confirm=[str(first.pk)]).status_code == 409
    assert statuses(first, second) == [PENDING, PENDING]

    confirmed = bulk(client, [first.pk, second.pk], confirm=[f"{first.pk},{second.pk}"])
    assert confirmed.status_code == 302 and statuses(first, second) == [APPROVED, APPROVED]
    # Each decision keeps the twin its decider was shown.
    assert [t["approval"] for t in CallEvidence.objects.get(pk=first.pk).twins_at_decision] == [second.pk]


def test_the_pages_script_gets_the_refusal_and_its_confirmation_as_json(launch, client, alice, no_dispatch):
    first, second = waiting(launch), waiting(launch)
    client.force_login(alice)
    refused = bulk(client, [first.pk, second.pk], json=True)
    assert refused.status_code == 409
    body = refused.json()
    assert body["twins_to_confirm"] == [first.pk, second.pk]
    assert body["error"].startswith("Nothing was approved: ") and "act on the same thing" in body["error"]
    assert f'value="{first.pk},{second.pk}"' in body["confirm_html"] and 'class="card bulk-twins"' in body["confirm_html"]

    answer = bulk(client, [first.pk, second.pk], json=True, confirm=[f"{first.pk},{second.pk}"])
    assert answer.status_code == 200 and answer.json()["decided"] == [first.pk, second.pk]


def test_a_call_whose_twin_waits_outside_the_selection_is_named_with_it(launch, client, alice, no_dispatch):
    selected, other = waiting(launch), waiting(launch)
    client.force_login(alice)
    refused = bulk(client, [selected.pk], json=True)
    assert refused.status_code == 409
    assert (f"#{selected.pk} cancel_order in run {selected.run_id} acts on the same thing as "
            f"#{other.pk} (also waiting in run {other.run_id})") in refused.json()["error"]
    assert bulk(client, [selected.pk], json=True, confirm=[f"{selected.pk},{other.pk}"]).status_code == 200
    assert statuses(selected, other) == [APPROVED, PENDING]


def test_rejecting_twins_together_needs_no_confirmation(launch, client, alice, no_dispatch):
    first, second = waiting(launch), waiting(launch)
    client.force_login(alice)
    assert bulk(client, [first.pk, second.pk], decision="reject").status_code == 302
    assert statuses(first, second) == [Approval.Status.REJECTED, Approval.Status.REJECTED]


def test_calls_of_different_orders_or_projects_are_approved_together_without_a_question(launch, client, alice,
                                                                                          no_dispatch):
    alpha, beta = project("Alpha"), project("Beta")
    demo = Agent.objects.get(name="demo")
    Agent.objects.filter(pk=demo.pk).update(project=alpha)
    copy = Agent.objects.get(pk=demo.pk)
    copy.pk, copy.name, copy.project = None, "billing-bot", beta
    copy.save()
    copy.tools.set(demo.tools.all())
    ours, theirs, other_order = waiting(launch), waiting(launch, agent="billing-bot"), waiting(launch, "Cancel order ORD-1002")
    client.force_login(alice)
    assert bulk(client, [ours.pk, theirs.pk, other_order.pk]).status_code == 302
    assert statuses(ours, theirs, other_order) == [APPROVED, APPROVED, APPROVED]


def test_the_api_refuses_a_bulk_approval_of_twins_with_409_listing_them_until_the_request_names_them(
    launch, alice, no_dispatch
):
    first, second = waiting(launch), waiting(launch)
    refused = api(alice).post("/api/v1/approvals/bulk/", {"ids": [first.pk, second.pk], "decision": "approve"},
                              format="json")
    assert refused.status_code == 409 and statuses(first, second) == [PENDING, PENDING]
    body = refused.json()
    assert body["twins_to_confirm"] == [first.pk, second.pk]
    (conflict,) = body["twins"]
    assert conflict["approvals"] == [{"id": first.pk, "run": first.run_id, "tool": "cancel_order"},
                                     {"id": second.pk, "run": second.run_id, "tool": "cancel_order"}]
    assert conflict["twins"] == [] and conflict["confirm"] == [first.pk, second.pk]
    assert "act on the same thing" in body["detail"] and '"twins_confirmed"' in body["detail"]

    answer = api(alice).post("/api/v1/approvals/bulk/", {
        "ids": [first.pk, second.pk], "decision": "approve", "twins_confirmed": body["twins_to_confirm"],
    }, format="json")
    assert answer.status_code == 200
    assert [a["id"] for a in answer.json()["decided"]] == [first.pk, second.pk]
    assert statuses(first, second) == [APPROVED, APPROVED]


def test_the_api_refuses_a_grant_on_a_call_with_twins_unless_the_request_names_them(launch, alice, no_dispatch):
    first, second = waiting(launch), waiting(launch)
    url = f"/api/v1/approvals/{first.pk}/approve/"
    refused = api(alice).post(url, {"grant": "identical"}, format="json")
    assert refused.status_code == 409 and statuses(first) == [PENDING] and not RunGrant.objects.exists()
    assert refused.json()["twins_to_confirm"] == [first.pk, second.pk]

    answer = api(alice).post(url, {"grant": "identical", "twins_confirmed": [first.pk, second.pk]}, format="json")
    assert answer.status_code == 200 and answer.json()["grant"]["scope"] == "identical"

    # A plain approval of the other one needs no confirmation: the card and the API list its twin.
    assert api(alice).post(f"/api/v1/approvals/{second.pk}/approve/", {}, format="json").status_code == 200
    assert statuses(first, second) == [APPROVED, APPROVED]


def test_the_cards_grant_buttons_ask_for_the_twins_by_name(launch, client, alice, no_dispatch):
    first, second = waiting(launch), waiting(launch)
    client.force_login(alice)
    shown = card(queue_html(client), first.pk)
    assert f'name="confirm_twins" form="decide-{first.pk}" value="{first.pk},{second.pk}"' in shown
    assert f"I know #{first.pk} acts on the same thing as #{second.pk}" in text_of(shown)

    url = reverse("approval_decide", args=[first.pk])
    json = {"HTTP_ACCEPT": "application/json"}
    refused = client.post(url, {"decision": "approve_identical"}, **json)
    assert refused.status_code == 409 and statuses(first) == [PENDING]
    assert "act" in refused.json()["error"] and f"#{second.pk}" in refused.json()["error"]
    answer = client.post(url, {"decision": "approve_identical", "confirm_twins": f"{first.pk},{second.pk}"}, **json)
    assert answer.status_code == 200 and statuses(first) == [APPROVED] and RunGrant.objects.count() == 1
    # Approve alone: allowed, with the twins on the card.
    assert client.post(reverse("approval_decide", args=[second.pk]), {"decision": "approve"}, **json).status_code == 200
