"""What a person launching a run may choose: the approval policy ("ask" unless they have the right
to another; re-runs never copy it) and overrides within what the agent allows. The command line
(the host's operator) is not restricted."""
import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from rest_framework.test import APIClient

from runs.engine.loop import run_advance
from runs.lifecycle import launch as launch_module
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, Run
from tests.support.approval_fixtures import make_user
from toolsapp.models import Tool

CANCEL = "Cancel order ORD-1001"


@pytest.fixture(autouse=True)
def _no_worker(monkeypatch):
    monkeypatch.setattr(launch_module, "run_dispatch", lambda run_id: None)


@pytest.fixture
def admin(demo_data):
    return make_user("ada", "admins")


@pytest.fixture
def trusted(alice):
    """An operator who was given the right to launch approve-all runs."""
    alice.user_permissions.add(Permission.objects.get(codename="approve_all_launch"))
    return User.objects.get(pk=alice.pk)  # a fresh object: permissions are cached per object


@pytest.fixture
def outside_tool(demo_data):
    """An enabled tool that the demo agent does not have."""
    return Tool.objects.create(name="drop_database", parameters={"type": "object"}, destructive=True)


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def demo() -> Agent:
    return Agent.objects.get(name="demo")


@pytest.fixture
def approve_all_run(demo_data):
    """A run launched at the host's shell with --approve-all, finished."""
    run = run_create(agent=demo(), task=CANCEL, approval_policy="approve")
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.config["approval_policy"] == "approve"
    return run


# --- the approval policy of a launch --------------------------------------------------------------


def test_a_rerun_from_the_browser_of_an_approve_all_run_asks_a_person(approve_all_run, client, alice):
    client.force_login(alice)
    response = client.post(reverse("run_rerun", args=[approve_all_run.pk]))
    rerun = Run.objects.get(rerun_of=approve_all_run)
    assert response.status_code == 302 and rerun.config["approval_policy"] == "ask"

    run_advance(run_id=rerun.pk)
    rerun.refresh_from_db()
    assert rerun.status == Run.Status.AWAITING_APPROVAL
    assert Approval.objects.get(run=rerun).status == Approval.Status.PENDING


@pytest.mark.parametrize("who,code,policy", [("alice", 403, None), ("trusted", 201, "approve")])
def test_a_rerun_through_the_api_approves_all_only_for_those_with_the_right(approve_all_run, request, who, code, policy):
    response = api(request.getfixturevalue(who)).post(
        f"/api/v1/runs/{approve_all_run.pk}/rerun/", {"approval_policy": "approve"}, format="json")
    assert response.status_code == code, response.content
    if code == 403:
        assert "approve_all_launch" in response.json()["detail"]
        assert not Run.objects.filter(rerun_of=approve_all_run).exists()
    else:
        assert Run.objects.get(rerun_of=approve_all_run).config["approval_policy"] == policy


def test_a_rerun_through_the_api_without_a_choice_asks(approve_all_run, alice):
    response = api(alice).post(f"/api/v1/runs/{approve_all_run.pk}/rerun/", {}, format="json")
    assert response.status_code == 201
    assert Run.objects.get(pk=response.json()["run_id"]).config["approval_policy"] == "ask"


def test_a_rerun_from_the_browser_choosing_approve_all_without_the_right_is_forbidden(approve_all_run, client, alice):
    client.force_login(alice)
    response = client.post(reverse("run_rerun", args=[approve_all_run.pk]), {"approval_policy": "approve"})
    assert response.status_code == 403
    assert not Run.objects.filter(rerun_of=approve_all_run).exists()


@pytest.mark.parametrize("who,policy,code", [
    ("alice", "approve", 403), ("alice", "reject", 201), ("alice", None, 201), ("trusted", "approve", 201),
    ("superuser", "approve", 201),
])
def test_an_api_launch_chooses_its_policy_only_with_the_right(demo_data, request, who, policy, code):
    user = User.objects.create_superuser("root") if who == "superuser" else request.getfixturevalue(who)
    body = {"agent": "demo", "task": CANCEL, **({"approval_policy": policy} if policy else {})}
    response = api(user).post("/api/v1/runs/", body, format="json")
    assert response.status_code == code, response.content
    if code == 201:
        assert Run.objects.get(pk=response.json()["run_id"]).config["approval_policy"] == (policy or "ask")
    else:
        assert "approve_all_launch" in response.json()["detail"] and not Run.objects.exists()


def test_the_launch_form_refuses_approve_all_without_the_right(client, alice):
    client.force_login(alice)
    response = client.post(reverse("run_launch"), {"agent": demo().pk, "task": CANCEL, "approval_policy": "approve"})
    assert response.status_code == 200 and "approve_all_launch" in response.content.decode()
    assert not Run.objects.exists()


def test_the_launch_form_launches_approve_all_for_someone_with_the_right(client, trusted):
    client.force_login(trusted)
    response = client.post(reverse("run_launch"), {"agent": demo().pk, "task": CANCEL, "approval_policy": "approve"})
    assert response.status_code == 302
    assert Run.objects.get().config["approval_policy"] == "approve"


# --- overrides within the agent -------------------------------------------------------------------


def test_an_api_launch_may_not_give_a_run_a_tool_its_agent_lacks(alice, outside_tool):
    response = api(alice).post("/api/v1/runs/", {"agent": "demo", "task": "x", "tools": ["drop_database"]}, format="json")
    assert response.status_code == 400
    assert "drop_database" in response.json()["errors"]["tools"][0] and not Run.objects.exists()


def test_the_launch_form_may_not_give_a_run_a_tool_its_agent_lacks(client, alice, outside_tool):
    client.force_login(alice)
    data = {"agent": demo().pk, "task": "x", "tools": ["get_weather", "drop_database"]}
    response = client.post(reverse("run_launch"), data)
    assert response.status_code == 200 and "not tools of agent demo: drop_database" in response.content.decode()
    assert not Run.objects.exists()


@pytest.mark.parametrize("setting,value", [("max_iterations", 2**53 - 1), ("max_cost_usd", 1e308), ("max_tokens", 10**12)])
def test_an_operator_may_not_raise_a_limit_above_the_agents(alice, setting, value):
    response = api(alice).post("/api/v1/runs/", {"agent": "demo", "task": "x", setting: value}, format="json")
    assert response.status_code == 400
    assert "at most the agent's" in response.json()["errors"][setting][0] and not Run.objects.exists()


def test_an_operator_may_lower_a_limit_and_choose_among_the_agents_tools(alice):
    body = {"agent": "demo", "task": "x", "max_iterations": 2, "tools": ["get_weather"]}
    response = api(alice).post("/api/v1/runs/", body, format="json")
    assert response.status_code == 201
    assert response.json()["overrides"] == {"max_iterations": 2, "tools": ["get_weather"]}


def test_someone_who_may_change_agents_may_raise_limits_up_to_the_hard_maxima(admin):
    raised = api(admin).post("/api/v1/runs/", {"agent": "demo", "task": "x", "max_iterations": 500}, format="json")
    assert raised.status_code == 201 and raised.json()["overrides"] == {"max_iterations": 500}
    beyond = api(admin).post("/api/v1/runs/", {"agent": "demo", "task": "x", "max_iterations": 2**53}, format="json")
    assert beyond.status_code == 400


def test_the_launch_form_refuses_a_limit_above_the_agents(client, alice):
    client.force_login(alice)
    response = client.post(reverse("run_launch"), {"agent": demo().pk, "task": "x", "max_iterations": 1000})
    assert response.status_code == 200 and "at most the agent&#x27;s 10" in response.content.decode()


def test_a_rerun_by_a_person_keeps_within_the_agent(client, alice, outside_tool):
    original = run_create(agent=demo(), task="x", overrides={"tools": ["drop_database"], "max_iterations": 1})
    Run.objects.filter(pk=original.pk).update(status=Run.Status.FAILED)
    client.force_login(alice)
    client.post(reverse("run_rerun", args=[original.pk]))
    assert not Run.objects.filter(rerun_of=original).exists()


@pytest.mark.parametrize("customer", ["ACME\x1b[31m", "ACME\nEvil Corp", "x" * 101, " ACME\u200b"])
def test_a_customer_must_be_short_printable_text(alice, customer):
    response = api(alice).post("/api/v1/runs/", {"agent": "demo", "task": "x", "customer": customer}, format="json")
    assert response.status_code == 400 and "customer" in response.json()["errors"]
    assert not Run.objects.exists()


def test_the_command_line_is_the_hosts_operator_and_is_not_restricted(outside_tool):
    run = run_create(agent=demo(), task="x", approval_policy="approve",
                     overrides={"tools": ["drop_database"], "max_iterations": 2**53 - 1})
    assert run.config["tools"] == ["drop_database"] and run.config["approval_policy"] == "approve"
