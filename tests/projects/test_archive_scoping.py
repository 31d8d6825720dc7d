"""Decisions of pruned runs stay with the project whose run it was: an agent's name can be given
up by one project and taken by another's agent, and the archive follows the project, not the name."""
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.utils import timezone

from runs.lifecycle.archive import runs_delete
from runs.models import Agent, Approval, ArchivedApproval, Run
from tests.projects import member, project
from tests.support.approval_fixtures import pending_approval

ARCHIVED = "/api/v1/approvals/archived/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_renamed_agents_archived_decisions_stay_with_its_project(launch, no_dispatch):
    alpha, beta = project("Alpha"), project("Beta")
    Agent.objects.filter(name="demo").update(project=alpha)
    approval = pending_approval(launch("Cancel order ORD-1001"))
    Run.objects.filter(pk=approval.run_id).update(customer="alpha-customer-7")
    Approval.objects.filter(pk=approval.pk).update(
        status=Approval.Status.APPROVED, decided_by_name="ann", decided_at=timezone.now())
    runs_delete(run_ids=[approval.run_id])
    ann, bea = signed_in(member("ann", alpha, "admins")), signed_in(member("bea", beta, "admins"))

    # Alpha renames its agent; Beta makes one with the name Alpha gave up.
    demo = Agent.objects.get(name="demo")
    demo.name = "alpha-support"
    demo.save()
    copy = Agent.objects.get(pk=demo.pk)
    copy.pk, copy.name, copy.project = None, "demo", beta
    copy.save()

    # Beta reads none of Alpha's decision; Alpha keeps it, under the name its agent had then.
    assert bea.get(ARCHIVED).json()["results"] == []
    assert bea.get(ARCHIVED, {"run_id": approval.run_id}).json()["results"] == []
    (row,) = ann.get(ARCHIVED).json()["results"]
    assert (row["approval_id"], row["agent_name"], row["customer"], row["decided_by_name"]) == (
        approval.pk, "demo", "alpha-customer-7", "ann")


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_gives_archived_decisions_the_project_of_the_agent_with_their_name():
    executor = MigrationExecutor(connection)
    try:
        before_targets = [("runs", "0042_budget_scope_label"), ("projects", "0003_chat_channel")]
        executor.migrate(before_targets)
        executor.loader.build_graph()
        before = executor.loader.project_state(before_targets).apps
        alpha = before.get_model("projects", "Project").objects.create(name="Alpha", slug="alpha")
        before.get_model("runs", "Agent").objects.create(name="alpha-support", project=alpha)
        for pk, agent_name in ((1, "alpha-support"), (2, "deleted-since")):
            before.get_model("runs", "ArchivedApproval").objects.create(approval_id=pk, run_id=pk, agent_name=agent_name, tool_name="t", status="approved")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    # The name's agent gives its project; a decision whose agent is gone is nobody's but the site's.
    assert dict(ArchivedApproval.objects.values_list("approval_id", "project__slug")) == {1: "alpha", 2: None}
