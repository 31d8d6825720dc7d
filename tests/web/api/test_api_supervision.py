"""The API of supervision: edit and approve, guidance, two-person state, named groups, grants and
bulk decisions, with the dashboard's permissions (viewers read, operators decide)."""
import json

from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.models import Approval, RunGrant
from tests.support.approval_fixtures import make_user
from tests.support.supervision_fixtures import EDITED, for_group, needing_two, parked
from toolsapp.models import Tool


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


def approve(user, approval, **body):
    return api(user).post(f"/api/v1/approvals/{approval.pk}/approve/", body, format="json")


def test_approve_with_edited_arguments_as_an_object_or_as_text(launch, alice, no_dispatch):
    first, second = parked(launch), parked(launch)

    as_object = approve(alice, first, arguments=json.loads(EDITED), reason="second order")
    as_text = approve(alice, second, arguments=EDITED)

    for response in (as_object, as_text):
        assert response.status_code == 200, response.json()
        body = response.json()
        assert body["detail"].endswith("with edited arguments.")
        assert body["approval"]["edited"] is True and body["approval"]["edited_args_hash"]
    assert Approval.objects.get(pk=first.pk).edited_args_hash == Approval.objects.get(pk=second.pk).edited_args_hash


def test_a_refused_edit_is_a_400_that_says_why(launch, alice, no_dispatch):
    approval = parked(launch)
    bad_schema = approve(alice, approval, arguments={"order_id": "1002", "reason": "second order"})
    not_json = approve(alice, approval, arguments="{not json")
    not_object = approve(alice, approval, arguments=[1, 2])
    assert [r.status_code for r in (bad_schema, not_json, not_object)] == [400, 400, 400]
    assert "schema refuses" in bad_schema.json()["detail"] and "order_id" in bad_schema.json()["detail"]
    assert "not valid JSON" in not_json.json()["detail"]
    assert "JSON object" in not_object.json()["detail"]
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING


def test_reject_with_guidance_and_a_late_second_decision_gets_409(launch, alice, bob, no_dispatch):
    approval = parked(launch)
    response = api(alice).post(f"/api/v1/approvals/{approval.pk}/reject/",
                               {"reason": "wrong order", "guidance": "Cancel ORD-1002 instead"}, format="json")
    assert response.status_code == 200
    assert response.json()["approval"]["guidance"] == "Cancel ORD-1002 instead"
    late = approve(bob, approval, arguments=EDITED)
    assert late.status_code == 409 and late.json()["detail"].startswith("Already rejected by alice")
    assert Approval.objects.get(pk=approval.pk).edited_arguments == ""


def test_two_person_state_in_the_queue_and_the_answers(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch), launched_by=bob)

    first = approve(alice, approval)
    assert first.status_code == 200 and first.json()["detail"].startswith("Approval 1 of 2 recorded")
    assert first.json()["approval"]["status"] == "pending"
    (item,) = api(alice).get("/api/v1/approvals/").json()["results"]
    assert (item["required_approvals"], item["approvals_given"], item["voters"]) == (2, 1, ["alice"])
    assert item["allow_edits"] is True and item["parameters"]["required"] == ["order_id", "reason"]

    again, launcher = approve(alice, approval), approve(bob, approval)
    assert again.status_code == 403 and "already approved" in again.json()["detail"]
    assert launcher.status_code == 403 and "launched this run" in launcher.json()["detail"]
    carol = make_user("carol", "operators")
    assert approve(carol, approval).json()["approval"]["status"] == "approved"


def test_the_queue_shows_a_proposed_edit_and_it_needs_every_approval_again(launch, alice, bob, no_dispatch):
    approval = needing_two(parked(launch))
    assert approve(alice, approval).status_code == 200
    edited = approve(bob, approval, arguments=json.loads(EDITED))
    assert edited.status_code == 200 and edited.json()["approval"]["status"] == "pending"
    assert edited.json()["detail"].startswith("Approval 1 of 2 recorded")

    (item,) = api(alice).get("/api/v1/approvals/").json()["results"]
    assert (item["approvals_given"], item["voters"], item["proposed_by"]) == (1, ["bob"], "bob")
    assert item["arguments"] == {"order_id": "ORD-1001", "reason": "Customer asked to cancel"}
    assert item["proposed_arguments"] == json.loads(EDITED)
    assert '  "order_id": "ORD-1002",' in item["proposed_arguments_text"].splitlines()
    assert item["proposed_args_hash"] == Approval.objects.get(pk=approval.pk).edited_args_hash
    unnamed = approve(alice, approval)
    assert unnamed.status_code == 400 and "bob proposed edited arguments" in unnamed.json()["errors"]["arguments"][0]
    named = approve(alice, approval, args_hash=item["proposed_args_hash"])
    assert named.status_code == 200 and named.json()["approval"]["status"] == "approved"


def test_a_proposed_edit_of_a_sensitive_field_is_masked_in_the_queue(launch, alice, bob, no_dispatch):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    approval = needing_two(parked(launch))
    approve(bob, approval, arguments={"order_id": "ORD-1002", "reason": "bob's private note"})
    response = api(alice).get("/api/v1/approvals/")
    (item,) = response.json()["results"]
    assert item["proposed_arguments"] == {"order_id": "ORD-1002", "reason": "••••"}
    assert item["arguments"] == {"order_id": "ORD-1001", "reason": "••••"}
    assert '  "reason": ••••' in item["proposed_arguments_text"].splitlines()
    assert "private" not in response.content.decode()


def test_a_group_call_shows_its_group_and_refuses_others(launch, alice, bob, no_dispatch):
    approval = parked(launch)
    for_group(approval, "finance").user_set.add(bob)
    (item,) = api(alice).get("/api/v1/approvals/").json()["results"]
    assert item["group"] == "finance"
    refused = api(alice).post(f"/api/v1/approvals/{approval.pk}/reject/", {"reason": "no"}, format="json")
    assert refused.status_code == 403 and refused.json()["detail"] == "Only members of finance may decide this call."
    assert approve(bob, approval).status_code == 200


def test_grants_are_given_listed_and_revoked(launch, alice, viewer, no_dispatch):
    approval = parked(launch)
    given = approve(alice, approval, grant="identical")
    assert given.status_code == 200
    grant = given.json()["grant"]
    assert (grant["tool"], grant["scope"], grant["by"], grant["revoked"]) == ("cancel_order", "identical", "alice", False)

    listed = api(viewer).get(f"/api/v1/runs/{approval.run_id}/grants/")
    assert listed.status_code == 200 and [g["grant_id"] for g in listed.json()["results"]] == [grant["grant_id"]]
    assert api(viewer).post(f"/api/v1/grants/{grant['grant_id']}/revoke/").status_code == 403
    assert RunGrant.objects.get().active

    revoked = api(alice).post(f"/api/v1/grants/{grant['grant_id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["grant"]["revoked_by"] == "alice"
    assert not RunGrant.objects.get().active
    assert api(alice).post("/api/v1/grants/999999/revoke/").status_code == 404
    assert api(alice).get("/api/v1/runs/999999/grants/").status_code == 404


def test_a_grant_for_a_two_person_call_is_a_400(launch, alice, no_dispatch):
    approval = needing_two(parked(launch))
    response = approve(alice, approval, grant="tool")
    assert response.status_code == 400 and "two people" in response.json()["detail"]
    assert approve(alice, approval, grant="forever").status_code == 400


def test_bulk_decisions_over_the_api(launch, alice, bob, viewer, no_dispatch):
    mine, taken = parked(launch), parked(launch)
    api(bob).post(f"/api/v1/approvals/{taken.pk}/reject/", {"reason": "no"}, format="json")
    body = {"ids": [mine.pk, taken.pk, 999_999], "decision": "approve", "reason": "batch"}

    assert api(viewer).post("/api/v1/approvals/bulk/", body, format="json").status_code == 403
    response = api(alice).post("/api/v1/approvals/bulk/", body, format="json")

    assert response.status_code == 200
    outcome = response.json()
    assert [(a["id"], a["status"], a["decided_by"]) for a in outcome["decided"]] == [(mine.pk, "approved", "alice")]
    assert [a["id"] for a in outcome["already"]] == [taken.pk]
    assert outcome["already"][0]["detail"].startswith("Already rejected by bob")
    assert outcome["refused"] == [{"id": 999_999, "detail": "No such approval."}]


def test_bulk_refuses_too_many_or_no_ids(alice, no_dispatch):
    for ids in ([], list(range(1, 202))):
        response = api(alice).post("/api/v1/approvals/bulk/", {"ids": ids, "decision": "reject"}, format="json")
        assert response.status_code == 400 and response.json()["detail"].startswith("ids:")
