"""Budgets and rules of two teams, through the API with a person's own token and through the
pages: the runs waiting on a budget are listed to the people of their project only; a raise names
a run of its budget's project only (another's is refused as a missing id); the person a rule or
budget names ("launched by", "person who launches") is offered and accepted from the people of
its project only, another's answered as an account that does not exist."""
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import api_token_create
from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_create
from runs.models import Agent, ApprovalRule, Budget, BudgetRaise, Run
from tests.projects import member, project
from tests.support.approval_fixtures import make_user


def with_token(user) -> APIClient:
    """The API as the person's own token (not limited to a project) calls it."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def teams(demo_data, no_dispatch):
    """Alpha holds the demo agent, Beta a copy of it (billing-bot); each project's budget of no
    runs at all holds a run of its agent; ada is an admin of Alpha only, bea of Beta only."""
    alpha, beta = project("Alpha"), project("Beta")
    demo = Agent.objects.get(name="demo")
    Agent.objects.filter(pk=demo.pk).update(project=alpha)
    billing = Agent.objects.get(pk=demo.pk)
    billing.pk, billing.name, billing.project = None, "billing-bot", beta
    billing.save()
    budgets, runs = {}, {}
    for key, team, agent in (("alpha", alpha, "demo"), ("beta", beta, "billing-bot")):
        budgets[key] = Budget.objects.create(name=f"{team.name} runs", project=team, measure="runs", limit=0)
        run = run_create(agent=Agent.objects.get(name=agent), task=f"What's the weather for {team.name}?")
        run_advance(run_id=run.pk)
        runs[key] = Run.objects.get(pk=run.pk)
        assert runs[key].status == Run.Status.QUEUED and runs[key].budget_hold is not None
    return {"alpha": alpha, "beta": beta, "budgets": budgets, "runs": runs,
            "ada": member("ada", alpha, "admins"), "bea": member("bea", beta, "admins")}


# --- the runs waiting on a budget --------------------------------------------------------------------

def test_the_api_lists_the_runs_waiting_on_a_budget_of_the_persons_projects_only(teams):
    runs = teams["runs"]
    for person, team in (("ada", "alpha"), ("bea", "beta")):
        listed = with_token(teams[person]).get("/api/v1/budgets/requests/")
        assert listed.status_code == 200
        assert [(r["run_id"], r["agent"]) for r in listed.json()] == [(runs[team].pk, runs[team].agent.name)]
        # The same as the queue page shows the person.
        queue = signed_in(teams[person]).get("/approvals/").content.decode()
        other = "beta" if team == "alpha" else "alpha"
        assert teams["budgets"][team].name in queue and teams["budgets"][other].name not in queue
    # A site admin (every project's) is given both: the cut is the person's projects, not fewer.
    root = with_token(make_user("root", "admins")).get("/api/v1/budgets/requests/").json()
    assert sorted(r["run_id"] for r in root) == sorted(run.pk for run in runs.values())


# --- a raise for one run -------------------------------------------------------------------------------

def test_a_raise_naming_another_projects_run_is_refused_as_a_missing_id(teams):
    alpha_budget, beta_run = teams["budgets"]["alpha"], teams["runs"]["beta"]
    until = (timezone.now() + timedelta(hours=1)).isoformat()
    url = f"/api/v1/budgets/{alpha_budget.pk}/raise/"
    # An admin of Alpha, and a site admin who sees Beta's run: neither may name it on Alpha's budget.
    for who in (with_token(teams["ada"]), with_token(make_user("root", "admins"))):
        missing = who.post(url, {"limit": 5, "until": until, "run_id": 10**6}, format="json")
        crossed = who.post(url, {"limit": 5, "until": until, "run_id": beta_run.pk}, format="json")
        assert missing.status_code == 400
        assert (crossed.status_code, crossed.json()) == (missing.status_code, missing.json())
    # The page's form (the queue's raise) answers the same words for both.
    page = signed_in(teams["ada"])
    form = {"limit": "5", "until": timezone.localtime(timezone.now() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
            "applies_to": "run", "next": "/budgets/"}
    said = {}
    for run_id in (10**6, beta_run.pk):
        answer = page.post(f"/budgets/{alpha_budget.pk}/raise/", {**form, "run": run_id}, follow=True)
        said[run_id] = re.findall(r"Budget Alpha runs was not raised[^<]*", answer.content.decode())
    assert said[10**6] and said[beta_run.pk] == said[10**6], said
    assert not BudgetRaise.objects.exists()
    assert Run.objects.get(pk=beta_run.pk).budget_hold is not None  # still waiting on Beta's own budget
    # Alpha's own run is raised as before.
    raised = with_token(teams["ada"]).post(url, {"limit": 5, "until": until, "run_id": teams["runs"]["alpha"].pk},
                                           format="json")
    assert raised.status_code == 200 and raised.json() == {"released": [teams["runs"]["alpha"].pk]}


# --- the person a rule or a budget names ------------------------------------------------------------

def launcher_options(page: str) -> list[str]:
    select = re.search(r'<select name="launched_by"[^>]*>(.*?)</select>', page, re.S)
    assert select, "no launched_by choice on the page"
    return [text.strip() for text in re.findall(r"<option[^>]*>(.*?)</option>", select.group(1), re.S)]


def refused_as_nobody(page, form: dict, launcher: int) -> None:
    """A new rule naming `launcher` is refused with exactly the errors of an account that does not exist."""
    refused = {}
    for name, person in (("them", launcher), ("nobody", 10**6)):
        answer = page.post("/rules/new/", {**form, "launched_by": person})
        assert answer.status_code == 200
        refused[name] = re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', answer.content.decode(), re.S)
    assert refused["nobody"] and refused["them"] == refused["nobody"], refused


def test_the_rule_form_offers_and_accepts_the_people_of_the_rules_project_only(teams):
    ann = member("ann", teams["alpha"], "operators")  # of Alpha: her runs may be a rule's
    page = signed_in(teams["ada"])
    for url in ("/rules/new/",
                f"/rules/{ApprovalRule.objects.create(name='asks', project=teams['alpha'], action='ask').pk}/"):
        offered = launcher_options(page.get(url).content.decode())
        assert {"anyone", "ada", "ann"} <= set(offered) and "bea" not in offered, (url, offered)
    form = {"name": "Ann's refunds", "tool_pattern": "*", "action": "ask", "position": "100", "enabled": "on",
            "project": teams["alpha"].pk}
    refused_as_nobody(page, form, teams["bea"].pk)
    assert not ApprovalRule.objects.filter(name="Ann's refunds").exists()
    assert page.post("/rules/new/", {**form, "launched_by": ann.pk}).status_code == 302
    assert ApprovalRule.objects.get(name="Ann's refunds").launched_by == ann


def test_a_new_rule_of_an_admin_of_both_projects_names_a_launcher_of_the_chosen_project_only(teams):
    dan = member("dan", teams["beta"], "admins")  # an admin of both: the form offers both teams' people
    member("dan", teams["alpha"], "admins")
    page = signed_in(dan)
    assert "bea" in launcher_options(page.get("/rules/new/").content.decode())
    form = {"name": "Bea's refunds", "tool_pattern": "*", "action": "ask", "position": "100", "enabled": "on",
            "project": teams["alpha"].pk}
    refused_as_nobody(page, form, teams["bea"].pk)
    assert not ApprovalRule.objects.filter(name="Bea's refunds").exists()
    # In Beta, bea is a launcher like any of its people.
    assert page.post("/rules/new/", {**form, "project": teams["beta"].pk, "launched_by": teams["bea"].pk}).status_code == 302

def test_a_rule_or_budget_in_the_api_names_a_person_of_its_project_only(teams):
    ada = with_token(teams["ada"])
    member("ann", teams["alpha"], "operators")
    root = make_user("root", "admins")  # of the platform team: a launcher in every project
    rule = {"name": "r", "tool_pattern": "*", "action": "ask"}
    budget = {"name": "b", "scope": "person", "measure": "runs", "limit": 5}
    for path, body, field in (("/api/v1/rules/", rule, "launched_by"), ("/api/v1/budgets/", budget, "person")):
        bea = ada.post(path, {**body, field: "bea"}, format="json")
        nobody = ada.post(path, {**body, field: "nobody"}, format="json")
        assert nobody.status_code == 400 and "nobody" in nobody.json()["errors"][field][0]
        assert (bea.status_code, bea.json()["errors"][field]) == (400, [
            nobody.json()["errors"][field][0].replace("nobody", "bea")]), bea.json()
        # A site admin choosing Alpha for it is refused Beta's person the same way.
        crossed = with_token(root).post(path, {**body, field: "bea", "project": "alpha"}, format="json")
        assert crossed.status_code == 400 and crossed.json()["errors"][field] == bea.json()["errors"][field]
        for name in ("ann", "root"):
            made = ada.post(path, {**body, "name": f"{body['name']} {name}", field: name}, format="json")
            assert made.status_code == 201 and made.json()[field] == name, made.json()
    # A change names the people of the thing's own project too.
    made = ApprovalRule.objects.get(name="r ann")
    changed = ada.patch(f"/api/v1/rules/{made.pk}/", {"launched_by": "bea"}, format="json")
    assert changed.status_code == 400 and ApprovalRule.objects.get(pk=made.pk).launched_by.username == "ann"


def test_the_budget_form_offers_and_accepts_the_people_of_the_budgets_project_only(teams):
    ann = member("ann", teams["alpha"], "operators")
    dan = member("dan", teams["beta"], "admins")  # an admin of both projects: he sees both teams' people
    member("dan", teams["alpha"], "admins")
    page = signed_in(dan)
    budget = teams["budgets"]["alpha"]
    offered = re.search(r'<select name="person"[^>]*>(.*?)</select>', page.get(f"/budgets/{budget.pk}/")
                        .content.decode(), re.S).group(1)
    assert ">ann<" in offered and ">bea<" not in offered
    form = {"name": "Alpha runs", "scope": "person", "measure": "runs", "period": "day", "limit": "3",
            "alert_share": "0.8", "enabled": "on"}
    said = {}
    for name, person in (("bea", teams["bea"].pk), ("nobody", 10**6)):
        for url, extra in ((f"/budgets/{budget.pk}/", {}), ("/budgets/new/", {"project": teams["alpha"].pk})):
            answer = page.post(url, {**form, **extra, "person": person})
            assert answer.status_code == 200
            said[name, url] = re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', answer.content.decode(), re.S)
    for url in (f"/budgets/{budget.pk}/", "/budgets/new/"):
        assert said["nobody", url] and said["bea", url] == said["nobody", url], said
    assert Budget.objects.count() == 2
    assert page.post(f"/budgets/{budget.pk}/", {**form, "person": ann.pk}).status_code == 302
    assert Budget.objects.get(pk=budget.pk).person == ann
