"""The Django admin keeps decisions a record: approvals, archived approvals and calls are
read-only for everyone (superusers included), a run's launch settings cannot be edited, runs are
not added there, and deleting runs there archives their decisions first, as pruning does.
"""
import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils.html import escape

from runs.models import Approval, ArchivedApproval, Run, ToolCall
from runs.supervision.approvals.decide import approval_decide
from tests.support.approval_fixtures import pending_approval

DEMO_TASK = "Cancel order ORD-1001"


@pytest.fixture
def root(client, demo_data):
    user = User.objects.create_superuser("root", password="pw-root")
    client.force_login(user)
    return client


@pytest.fixture
def decided(launch, alice, no_dispatch) -> Approval:
    approval = pending_approval(launch(DEMO_TASK, approval_policy="ask"))
    return approval_decide(approval_id=approval.pk, user=alice, approve=False, reason="wrong order")


def admin_url(model: str, view: str, *args) -> str:
    return reverse(f"admin:runs_{model}_{view}", args=args)


def test_a_superuser_sees_approvals_but_cannot_add_change_or_delete_them(root, decided):
    assert root.get(admin_url("approval", "changelist")).status_code == 200
    page = root.get(admin_url("approval", "change", decided.pk))
    assert page.status_code == 200 and "wrong order" in page.content.decode()
    assert 'name="_save"' not in page.content.decode(), "a decision is shown read-only"

    edit = {"status": Approval.Status.APPROVED, "reason": "fine after all", "tool_call": decided.tool_call_id, "run": decided.run_id}
    assert root.post(admin_url("approval", "change", decided.pk), edit).status_code == 403
    assert root.get(admin_url("approval", "add")).status_code == 403
    assert root.post(admin_url("approval", "delete", decided.pk), {"post": "yes"}).status_code == 403
    bulk = {"action": "delete_selected", "_selected_action": [decided.pk], "post": "yes"}
    root.post(admin_url("approval", "changelist"), bulk)

    decided.refresh_from_db()
    assert (decided.status, decided.reason, decided.decided_by_name) == (Approval.Status.REJECTED, "wrong order", "alice")


def test_a_calls_status_cannot_be_changed_in_the_admin(root, decided):
    call = decided.tool_call
    before = call.status
    page = root.get(reverse("admin:runs_toolcall_change", args=[call.pk]))
    assert page.status_code == 200 and call.args_hash in page.content.decode()
    assert escape(call.arguments) not in page.content.decode(), "raw arguments may hold secrets: the hash identifies them"
    edit = {"status": ToolCall.Status.APPROVED, "args_hash": "forged"}
    assert root.post(reverse("admin:runs_toolcall_change", args=[call.pk]), edit).status_code == 403
    call.refresh_from_db()
    assert call.status == before != ToolCall.Status.APPROVED and call.args_hash != "forged"


def test_a_runs_launch_settings_are_read_only_and_runs_are_not_added_in_the_admin(root, decided):
    page = root.get(admin_url("run", "change", decided.run_id)).content.decode()
    for frozen in ("config", "overrides", "task", "customer", "agent", "created_by", "rerun_of"):
        assert f'name="{frozen}"' not in page, f"{frozen} is frozen at launch"
    assert root.get(admin_url("run", "add")).status_code == 403


@pytest.mark.parametrize("how", ["one", "bulk"])
def test_deleting_a_run_in_the_admin_archives_its_decisions(root, decided, how):
    run_id, args_hash = decided.run_id, decided.tool_call.args_hash
    if how == "one":
        response = root.post(admin_url("run", "delete", run_id), {"post": "yes"})
    else:
        response = root.post(admin_url("run", "changelist"), {"action": "delete_selected", "_selected_action": [run_id], "post": "yes"})
    assert response.status_code == 302, response.content.decode()[:2000]

    assert not Run.objects.filter(pk=run_id).exists() and not Approval.objects.filter(pk=decided.pk).exists()
    archived = ArchivedApproval.objects.get(approval_id=decided.pk)
    assert (archived.run_id, archived.status, archived.reason, archived.decided_by_name, archived.tool_name) == (
        run_id, Approval.Status.REJECTED, "wrong order", "alice", "cancel_order"
    )
    assert archived.run_task == DEMO_TASK and archived.args_hash == args_hash


def test_archived_approvals_are_viewable_and_read_only(root, decided):
    from runs.lifecycle.archive import approvals_archive  # here: the module is new with the archive

    approvals_archive(run_ids=[decided.run_id])
    archived = ArchivedApproval.objects.get(approval_id=decided.pk)
    assert root.get(reverse("admin:runs_archivedapproval_changelist")).status_code == 200
    assert root.get(reverse("admin:runs_archivedapproval_change", args=[archived.pk])).status_code == 200
    assert root.post(reverse("admin:runs_archivedapproval_change", args=[archived.pk]), {"status": "approved"}).status_code == 403
    assert root.post(reverse("admin:runs_archivedapproval_delete", args=[archived.pk]), {"post": "yes"}).status_code == 403
    assert ArchivedApproval.objects.get(pk=archived.pk).status == Approval.Status.REJECTED
