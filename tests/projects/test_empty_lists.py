"""An empty list says what is missing and who can fix it: a new member's Launch page in a project
without agents names the project's admins instead of offering nothing and answering "This field
is required."; so do the new budget and new rule forms."""
import pytest
from django.test import Client

from projects.empty_lists import nothing_yet_text
from runs.lifecycle.agents import agent_save
from runs.models import Agent
from tests.projects import member, project


def test_the_sentence_names_what_is_missing_and_who_can_add_it():
    admins = [("bill", "admin"), ("bo", "admin")]
    assert nothing_yet_text(project="Billing", things="agents", you_may=False, people=admins) == \
        "Billing has no agents yet: an admin of Billing (bill, bo) can add one."
    assert nothing_yet_text(project="Billing", things="agents", you_may=True, people=admins) == \
        "Billing has no agents yet: you may add one."
    assert nothing_yet_text(project="Billing", things="agents", you_may=False, people=[]) == \
        "Billing has no agents yet, and none of its people may add one: ask a site administrator."
    assert nothing_yet_text(project="B", things="agents", you_may=False, people=[("a", "admin"), ("o", "operator")]) \
        == "B has no agents yet: a, o can add one."


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def billing(demo_data):
    b = project("Billing")
    return {"b": b, "bill": member("bill", b, "admins"), "cy": member("cy", b, "operators")}


NOTE = "Billing has no agents yet: an admin of Billing (bill) can add one."


@pytest.mark.django_db(transaction=True)
def test_a_new_members_launch_page_says_who_can_add_an_agent(billing):
    cy = signed_in(billing["cy"])
    page = cy.get("/runs/new/").content.decode()
    assert NOTE in page and 'disabled aria-describedby="agents-nothing-yet"' in page
    assert "Add an agent" not in page  # not theirs to add
    answer = cy.post("/runs/new/", {"task": "Refund order 7"}).content.decode()
    assert NOTE in answer and "This field is required." not in answer


@pytest.mark.django_db(transaction=True)
def test_the_projects_admin_is_told_they_may_add_one_and_where(billing):
    page = signed_in(billing["bill"]).get("/runs/new/").content.decode()
    assert "Billing has no agents yet: you may add one." in page and 'href="/agents/new/"' in page


@pytest.mark.django_db(transaction=True)
def test_once_an_agent_is_there_it_is_offered_and_chosen(billing):
    agent = agent_save(agent=None, project=billing["b"], data={"name": "billing-bot"})
    page = signed_in(billing["cy"]).get("/runs/new/").content.decode()
    assert "has no agents yet" not in page
    assert f'<option value="{agent.pk}" selected>billing-bot</option>' in page


@pytest.mark.django_db(transaction=True)
def test_new_budget_and_rule_forms_say_the_project_has_no_agents(billing):
    bill = signed_in(billing["bill"])
    for url in ("/budgets/new/", "/rules/new/"):
        page = bill.get(url).content.decode()
        assert "Billing has no agents yet: you may add one." in page, url
    assert not Agent.objects.filter(project=billing["b"]).exists()


@pytest.mark.django_db(transaction=True)
def test_a_datasets_experiment_form_says_the_project_has_no_agents(billing):
    from evals.models import Case, Dataset

    dataset = Dataset.objects.create(name="refunds", project=billing["b"])
    Case.objects.create(dataset=dataset, name="refund", task="Refund order 7")
    bill = signed_in(billing["bill"])
    page = bill.get(f"/datasets/{dataset.pk}/").content.decode()
    assert "Billing has no agents yet: you may add one." in page
    answer = bill.post(f"/datasets/{dataset.pk}/", {"action": "experiment", "experiment-which": "current"})
    assert "Billing has no agents yet: you may add one." in answer.content.decode()
    assert "This field is required." not in answer.content.decode()
