"""Budgets in the API and on the pages: the same checks in words, who may do what, what a period
used, the runs waiting on a budget and a raise that lets them go on."""
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import api_token_create
from audit.models import AuditEntry
from runs.controls import levers
from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_create
from runs.models import Agent, Budget, BudgetHold, BudgetRaise, Run
from tests.support.approval_fixtures import make_user

BUDGET = {"name": "Support", "scope": "agent", "agent": "demo", "measure": "tokens", "period": "day", "limit": 1000}


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=user)[1]}")
    return client


def page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def people(demo_data):
    return {"ada": make_user("ada", "admins"), "olga": make_user("olga", "operators"),
            "vic": make_user("vic", "viewers")}


@pytest.fixture
def held(script, people, monkeypatch):
    """A run paused by a spent budget of 1,000 tokens a day."""
    monkeypatch.setattr(levers, "run_dispatch", lambda run_id: None)
    budget = Budget.objects.create(**{**BUDGET, "agent": Agent.objects.get(name="demo")})
    model = script({"tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}],
                    "usage": {"prompt_tokens": 1500, "completion_tokens": 0}}, {"content": "Sunny."})
    run = run_create(agent=Agent.objects.get(name="demo"), task="weather", user=people["olga"],
                     overrides={"models": [model], "summarize_on_stop": False})
    run_advance(run_id=run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED
    return budget, run


def test_an_admin_creates_reads_changes_and_deletes_a_budget_and_each_change_is_audited(people):
    admin = api(people["ada"])
    created = admin.post("/api/v1/budgets/", BUDGET, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["agent"], body["person"], body["used"], body["alert_share"]) == ("demo", None, 0.0, 0.8)
    url = f"/api/v1/budgets/{body['id']}/"
    # Another scope forgets the agent: a budget names only what its scope needs.
    changed = admin.patch(url, {"scope": "site"}, format="json")
    assert (changed.status_code, changed.json()["agent"]) == (200, None)
    assert api(people["vic"]).get("/api/v1/budgets/").json()["results"][0]["name"] == "Support"
    assert admin.delete(url).status_code == 204
    assert list(AuditEntry.objects.filter(kind="budget").values_list("action", flat=True).order_by("pk")) == [
        "created", "updated", "deleted"]


@pytest.mark.parametrize("body, field, words", [
    ({**BUDGET, "agent": None}, "agent", "Choose the agent"),
    ({**BUDGET, "scope": "person"}, "person", "Choose the person"),
    ({**BUDGET, "limit": -1}, "limit", "0 or more"),
    ({**BUDGET, "measure": "runs", "limit": 2.5}, "limit", "whole number"),
    ({**BUDGET, "alert_share": 1.5}, "alert_share", "at most 1"),
    ({**BUDGET, "agent": "nobody"}, "agent", "does not exist"),
    ({**BUDGET, "shadow": True}, "shadow", "nknown"),
])
def test_a_bad_budget_is_refused_at_its_field_and_nothing_is_saved(people, body, field, words):
    refused = api(people["ada"]).post("/api/v1/budgets/", body, format="json")
    assert refused.status_code == 400 and words in " ".join(refused.json()["errors"][field]), refused.json()
    assert not Budget.objects.exists()


def test_only_admins_write_budgets_or_raise_them(people, held):
    budget, run = held
    operator = api(people["olga"])
    assert operator.post("/api/v1/budgets/", BUDGET, format="json").status_code == 403
    assert operator.patch(f"/api/v1/budgets/{budget.pk}/", {"limit": 5}, format="json").status_code == 403
    until = (timezone.now() + timedelta(hours=1)).isoformat()
    assert operator.post(f"/api/v1/budgets/{budget.pk}/raise/", {"limit": 9000, "until": until},
                         format="json").status_code == 403
    assert page(people["olga"]).post(f"/budgets/{budget.pk}/raise/", {"limit": 9000, "until": "2099-01-01T00:00",
                                                                     "applies_to": "all"}).status_code == 403
    assert page(people["olga"]).get("/budgets/new/").status_code == 403
    assert not BudgetRaise.objects.exists()
    assert APIClient().get("/api/v1/budgets/").status_code == 401


def test_the_runs_waiting_are_listed_and_a_raise_through_the_api_lets_them_go_on(people, held):
    budget, run = held
    admin = api(people["ada"])
    [waiting] = admin.get("/api/v1/budgets/requests/").json()
    assert (waiting["run_id"], waiting["run_status"], waiting["used"], waiting["limit"], waiting["sentence"]) == (
        run.pk, "paused", 1500.0, 1000.0, "Budget reached: Support, 1,000 tokens a day")
    until = (timezone.now() + timedelta(hours=2)).isoformat()
    too_low = admin.post(f"/api/v1/budgets/{budget.pk}/raise/", {"limit": 800, "until": until}, format="json")
    assert too_low.status_code == 400 and "above the budget's own" in too_low.json()["errors"]["limit"][0]
    past = admin.post(f"/api/v1/budgets/{budget.pk}/raise/",
                      {"limit": 8000, "until": "2001-01-01T00:00:00Z"}, format="json")
    assert past.status_code == 400
    raised = admin.post(f"/api/v1/budgets/{budget.pk}/raise/", {"limit": 8000, "until": until, "run_id": run.pk},
                        format="json")
    assert raised.status_code == 200 and raised.json() == {"released": [run.pk]}
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED and not BudgetHold.objects.exists()
    assert AuditEntry.objects.filter(kind="budget raise", action="created").count() == 1


def test_the_pages_list_budgets_with_their_use_and_the_queue_offers_a_raise(people, held):
    budget, run = held
    listing = page(people["vic"]).get("/budgets/").content.decode()
    assert "1,500 tokens</strong> used of 1,000 tokens" in listing and "Reached" in listing
    assert "budget_create" not in listing and 'id="budget-add"' not in listing  # a viewer only reads

    queue = page(people["ada"]).get("/approvals/").content.decode()
    assert "Budget reached: Support, 1,000 tokens a day" in queue and 'class="budget-raise"' in queue
    operators_queue = page(people["olga"]).get("/approvals/").content.decode()
    assert 'class="budget-raise"' not in operators_queue and "Stop with a summary" in operators_queue
    assert "Budget reached: Support, 1,000 tokens a day" in page(people["olga"]).get(f"/runs/{run.pk}/").content.decode()
    assert page(people["olga"]).get("/approvals/count/").json()["budget_waiting"] == 1  # the header's "1 on budget"
    assert "1 on budget" in operators_queue

    admin = page(people["ada"])
    refused = admin.post(f"/budgets/{budget.pk}/raise/", {"limit": "lots", "until": "2099-01-01T00:00",
                                                          "applies_to": "run", "run": run.pk,
                                                          "next": "/approvals/"}, follow=True)
    assert "was not raised" in refused.content.decode() and not BudgetRaise.objects.exists()
    far = admin.post(f"/budgets/{budget.pk}/raise/", {"limit": "5000", "until": "2099-01-01T00:00",
                                                      "applies_to": "run", "run": run.pk, "next": "/approvals/"},
                     follow=True)
    assert "At most a year from now" in far.content.decode() and not BudgetRaise.objects.exists()
    until = timezone.localtime(timezone.now() + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M")
    done = admin.post(f"/budgets/{budget.pk}/raise/", {"limit": "5000", "until": until, "applies_to": "run",
                                                       "run": run.pk, "next": "/approvals/"}, follow=True)
    assert f"Run {run.pk} went on." in done.content.decode()
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED


def test_an_admin_adds_a_budget_through_the_form_and_a_bad_one_is_explained(people):
    admin = page(people["ada"])
    bad = admin.post("/budgets/new/", {"name": "Billing", "scope": "agent", "measure": "cost", "period": "day",
                                       "limit": "50", "alert_share": "0.8", "enabled": "on"})
    assert bad.status_code == 200 and "Choose the agent whose runs this budget covers." in bad.content.decode()
    assert not Budget.objects.exists()
    agent = Agent.objects.get(name="demo")
    good = admin.post("/budgets/new/", {"name": "Billing", "scope": "agent", "agent": agent.pk, "measure": "cost",
                                        "period": "month", "limit": "50", "alert_share": "0.8", "enabled": "on"})
    assert good.status_code == 302
    assert "Billing" in admin.get("/budgets/").content.decode()
    assert Budget.objects.get().agent == agent


def test_the_budget_list_reads_what_each_period_used_in_one_query(people):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    admin = api(people["ada"])

    def queries_for_list() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert admin.get("/api/v1/budgets/").status_code == 200
        return len(seen)

    Budget.objects.create(name="one", measure="tokens", limit=10)
    queries_for_list()  # the token's first use from this address is recorded once
    one = queries_for_list()
    for n in range(4):
        Budget.objects.create(name=f"b{n}", measure="cost", limit=5)
    assert queries_for_list() == one
    assert [b["used"] for b in admin.get("/api/v1/budgets/").json()["results"]] == [0.0] * 5
