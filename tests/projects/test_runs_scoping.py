"""Two teams on one installation: an operator of project A sees A's runs, approvals, agents,
rules, budgets, webhooks and figures, and nothing of project B; a rule, a budget or a webhook of
B never touches A's runs. Through the real pages, API, services and the approvals socket."""
import asyncio

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from agentsite.asgi import application
from runs.engine.loop import run_advance
from runs.lifecycle.runs import InvalidRun, run_create
from runs.models import Agent, Approval, ApprovalRule, Budget, Run, Webhook, WebhookDelivery
from tests.projects import member, project
from tests.support.channel_layer import fresh_channel_layer

TASK_A, TASK_B = "Cancel order ORD-1001 for team A", "Cancel order ORD-1001 for team B"


@pytest.fixture
def teams(demo_data, no_dispatch):
    """Project A holds the demo agent and a waiting call; project B a copy of it and its own."""
    a, b = project("Alpha"), project("Beta")
    demo = Agent.objects.get(name="demo")
    Agent.objects.filter(pk=demo.pk).update(project=a)
    billing = Agent.objects.get(pk=demo.pk)
    billing.pk, billing.name, billing.project = None, "billing-bot", b
    billing.save()
    billing.tools.set(demo.tools.all())
    runs = {}
    for key, agent, task in (("a", "demo", TASK_A), ("b", "billing-bot", TASK_B)):
        run = run_create(agent=Agent.objects.get(name=agent), task=task)
        run_advance(run_id=run.pk)
        runs[key] = Run.objects.get(pk=run.pk)
    assert {r.status for r in runs.values()} == {Run.Status.AWAITING_APPROVAL}
    return {
        "a": a, "b": b, "runs": runs,
        "approvals": {k: Approval.objects.get(run=r, status=Approval.Status.PENDING) for k, r in runs.items()},
        "ann": member("ann", a, "operators"),  # an operator of A only
        "vic": member("vic", a, "operators"),  # an operator of A and a viewer of B
    }


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db(transaction=True)
def test_pages_and_api_show_an_operator_their_projects_runs_and_approvals_only(teams):
    ann = signed_in(teams["ann"])
    history = ann.get("/runs/").content.decode()
    assert TASK_A in history and TASK_B not in history
    listed = ann.get("/api/v1/runs/").json()["results"]
    assert [r["run_id"] for r in listed] == [teams["runs"]["a"].pk]
    exported = b"".join(ann.get("/api/v1/runs/export.jsonl").streaming_content).decode()
    assert TASK_A in exported and TASK_B not in exported
    queue = ann.get("/approvals/").content.decode()
    assert TASK_A in queue and TASK_B not in queue
    assert ann.get("/approvals/count/").json()["pending"] == 1
    assert [a["id"] for a in ann.get("/api/v1/approvals/").json()["results"]] == [teams["approvals"]["a"].pk]
    agents = ann.get("/agents/").content.decode()
    assert "demo" in agents and "billing-bot" not in agents
    assert [a["name"] for a in ann.get("/api/v1/agents/").json()["results"]] == ["demo"]
    assert "billing-bot" not in ann.get("/runs/new/").content.decode()
    # Another project's run, approval and agent are as if they did not exist.
    b_run, b_approval = teams["runs"]["b"], teams["approvals"]["b"]
    assert ann.get(f"/runs/{b_run.pk}/").status_code == 404
    assert ann.get(f"/api/v1/runs/{b_run.pk}/").status_code == 404
    assert ann.get(f"/approvals/{b_approval.pk}/").status_code == 404
    assert ann.get(f"/agents/{b_run.agent_id}/").status_code == 404
    # ...while a person of the platform team (a site role) sees both.
    site = signed_in(member("sam", teams["a"], "viewers"))
    from django.contrib.auth.models import Group
    teams["ann"].__class__.objects.get(username="sam").groups.add(Group.objects.get(name="operators"))
    assert {r["run_id"] for r in site.get("/api/v1/runs/").json()["results"]} == {r.pk for r in teams["runs"].values()}


@pytest.mark.django_db(transaction=True)
def test_an_operator_decides_only_where_their_role_decides(teams):
    member("vic", teams["b"], "viewers")
    vic = signed_in(teams["vic"])
    b_approval, a_approval = teams["approvals"]["b"], teams["approvals"]["a"]
    # A viewer in B sees B's call but may not decide it; an operator in A decides A's.
    assert vic.get(f"/approvals/{b_approval.pk}/").status_code == 200
    refused = vic.post(f"/api/v1/approvals/{b_approval.pk}/approve/", {}, content_type="application/json")
    assert refused.status_code == 403
    assert vic.post(f"/api/v1/approvals/{a_approval.pk}/approve/", {}, content_type="application/json").status_code == 200
    # Bulk: another project's call is refused as not there (ann), or as not hers to decide (vic).
    ann = signed_in(teams["ann"])
    answer = ann.post("/api/v1/approvals/bulk/", {"ids": [b_approval.pk], "decision": "reject", "reason": "x"},
                      content_type="application/json").json()
    assert answer["refused"] == [{"id": b_approval.pk, "detail": "No such approval."}]
    answer = vic.post("/api/v1/approvals/bulk/", {"ids": [b_approval.pk], "decision": "reject", "reason": "x"},
                      content_type="application/json").json()
    assert answer["refused"][0]["id"] == b_approval.pk and "role there" in answer["refused"][0]["detail"]
    assert Approval.objects.get(pk=b_approval.pk).status == Approval.Status.PENDING


@pytest.mark.django_db(transaction=True)
def test_launching_another_projects_agent_is_refused(teams):
    ann = signed_in(teams["ann"])
    answer = ann.post("/api/v1/runs/", {"agent": "billing-bot", "task": "hi"}, content_type="application/json")
    assert answer.status_code == 400 and answer.json()["errors"]["agent"] == ["Object with name=billing-bot does not exist."]
    page = ann.post("/runs/new/", {"agent": teams["runs"]["b"].agent_id, "task": "hi"})
    assert page.status_code == 200 and "Select a valid choice" in page.content.decode()
    with pytest.raises(InvalidRun, match="not an agent of a project where you launch runs"):
        run_create(agent=Agent.objects.get(name="billing-bot"), task="hi", user=teams["ann"])
    assert Run.objects.filter(agent__name="billing-bot").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_rule_budget_and_webhook_of_one_project_never_touch_anothers_runs(teams, settings):
    settings.WEBHOOK_URLS = []
    b = teams["b"]
    ApprovalRule.objects.create(name="B rejects everything", project=b, tool_pattern="*", action="reject")
    Budget.objects.create(name="B spends nothing", project=b, measure="runs", limit=0)
    Webhook.objects.create(url="https://hooks.example.com/alpha", project=teams["a"])
    Webhook.objects.create(url="https://hooks.example.com/beta", project=b)
    runs = {}
    for agent, task in (("demo", "Cancel order ORD-1002 for A"), ("billing-bot", "Cancel order ORD-1002 for B")):
        run = run_create(agent=Agent.objects.get(name=agent), task=task)
        run_advance(run_id=run.pk)
        runs[agent] = Run.objects.get(pk=run.pk)
    # A's run is not held by B's budget, and B's rule does not decide its call: a person does.
    assert runs["demo"].status == Run.Status.AWAITING_APPROVAL
    assert Approval.objects.get(run=runs["demo"]).rule_id is None
    # B's run waits on B's budget.
    assert runs["billing-bot"].status == Run.Status.QUEUED and runs["billing-bot"].budget_hold is not None
    pending = WebhookDelivery.objects.filter(event="approval.pending")
    assert sorted(pending.values_list("url", flat=True).distinct()) == ["https://hooks.example.com/alpha"]


@pytest.mark.django_db(transaction=True)
def test_the_approvals_socket_tells_an_operator_of_their_projects_changes_only(teams):
    fresh_channel_layer()
    client = signed_in(teams["ann"])
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"),
               (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]
    a_run, b_run = teams["runs"]["a"], teams["runs"]["b"]

    async def body():
        socket = WebsocketCommunicator(application, "/ws/approvals/", headers=headers)
        connected, _ = await socket.connect(timeout=10)
        assert connected
        from channels.db import database_sync_to_async

        from runs.engine.storage.events import approvals_changed
        await database_sync_to_async(approvals_changed)(run_id=b_run.pk)
        await database_sync_to_async(approvals_changed)(run_id=a_run.pk)
        seen = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5
        while a_run.pk not in seen and loop.time() < deadline:
            message = await socket.receive_json_from(timeout=deadline - loop.time())
            if message.get("type") == "approvals.changed":
                seen.append(message["run_id"])
                assert message["pending"] == 1  # A's one call, not both projects' two
        await socket.disconnect()
        return seen

    seen = async_to_sync(body)()
    assert a_run.pk in seen and b_run.pk not in seen
    fresh_channel_layer()


@pytest.mark.django_db(transaction=True)
def test_the_run_socket_of_another_projects_run_is_refused(teams):
    fresh_channel_layer()
    client = signed_in(teams["ann"])
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"),
               (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]

    async def connects(run_id: int) -> bool:
        socket = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)
        connected, _ = await socket.connect(timeout=10)
        await socket.disconnect()
        return connected

    assert async_to_sync(connects)(teams["runs"]["a"].pk)
    assert not async_to_sync(connects)(teams["runs"]["b"].pk)
    fresh_channel_layer()


@pytest.mark.django_db(transaction=True)
def test_forms_offer_the_persons_projects_and_refuse_another(teams):
    admin = member("ada", teams["a"], "admins")
    ada = signed_in(admin)
    page = ada.get("/rules/new/").content.decode()
    assert "Alpha" in page and "Beta" not in page and "billing-bot" not in page
    answer = ada.post("/api/v1/rules/", {"name": "r", "tool_pattern": "*", "action": "ask", "project": "beta"},
                      content_type="application/json")
    assert answer.status_code == 400 and answer.json()["errors"]["project"] == ["No project 'beta'."]
    answer = ada.post("/api/v1/rules/", {"name": "r", "tool_pattern": "*", "action": "ask"},
                      content_type="application/json")
    assert answer.status_code == 201 and answer.json()["project"] == "alpha"
    answer = ada.post("/api/v1/budgets/", {"name": "b", "scope": "agent", "agent": "billing-bot", "limit": 5},
                      content_type="application/json")
    assert answer.status_code == 400 and answer.json()["errors"]["agent"] == ["Object with name=billing-bot does not exist."]
    assert [b["name"] for b in ada.get("/api/v1/budgets/").json()["results"]] == []
    Budget.objects.create(name="B's", project=teams["b"], measure="runs", limit=3)
    assert "B&#x27;s" not in ada.get("/budgets/").content.decode()
    Webhook.objects.create(url="https://hooks.example.com/beta", project=teams["b"])
    assert "hooks.example.com/beta" not in ada.get("/settings/webhooks/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_metrics_count_an_operators_projects_agents_only(teams):
    ann = signed_in(teams["ann"])
    figures = ann.get("/api/v1/metrics/").json()
    assert figures["agent_id"] == teams["runs"]["a"].agent_id and figures["runs_total"] == 1
    other = ann.get(f"/api/v1/metrics/?agent={teams['runs']['b'].agent_id}")
    assert other.status_code == 400  # another project's agent is not a choice
    page = ann.get("/metrics/").content.decode()
    assert "billing-bot" not in page and "all agents" not in page
