"""A second team sets itself up without Django's admin: a site administrator makes the project
with its first admin (a project's admin may not make projects); the header names the project a
person works in and switches among their own projects only; forms that ask for a project start
with that one."""
import pytest
from django.contrib.auth.models import User
from django.test import Client

from audit.models import AuditEntry
from projects.current import current_project
from projects.models import Membership, Project
from runs.models import Budget
from runs.web.forms.budgets import BudgetForm
from tests.projects import member, project
from tests.support.approval_fixtures import make_user

NEW, SWITCH = "/projects/new/", "/projects/current/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def teams(demo_data):
    a, b = project("Alpha"), project("Billing")
    return {"a": a, "b": b, "ann": member("ann", a, "admins"), "bill": member("bill", b, "admins"),
            "cy": member("cy", b, "operators"), "root": make_user("root", "admins"),
            "dan": User.objects.create_user("dan", password="pw-long-enough-1")}


@pytest.mark.django_db(transaction=True)
def test_a_site_administrator_makes_a_project_with_its_first_admin(teams):
    root = signed_in(teams["root"])
    response = root.post(NEW, {"name": "Support desk", "slug": "", "description": "Tickets", "admin": "dan"})
    assert response.status_code == 302
    made = Project.objects.get(name="Support desk")
    assert made.slug == "support-desk"
    assert Membership.objects.get(project=made, user__username="dan").role.name == "admins"
    page = root.get("/projects/").content.decode()
    assert "Support desk is made; dan is its admin" in page
    assert AuditEntry.objects.filter(kind="project", action="created", actor_name="root").exists()
    assert AuditEntry.objects.filter(kind="project role", action="created", actor_name="root").exists()


@pytest.mark.django_db(transaction=True)
def test_a_refused_new_project_says_why_and_keeps_what_was_typed(teams):
    page = signed_in(teams["root"]).post(NEW, {"name": "Alpha", "slug": "alpha2", "admin": "dan"}).content.decode()
    assert "A project is already named Alpha." in page and 'value="alpha2"' in page
    page = signed_in(teams["root"]).post(NEW, {"name": "Ops", "admin": "nobody"}).content.decode()
    assert "No account is named “nobody”" in page and not Project.objects.filter(name="Ops").exists()


@pytest.mark.django_db(transaction=True)
def test_a_project_admin_or_member_may_not_make_projects(teams):
    for who in ("ann", "cy"):
        client = signed_in(teams[who])
        assert client.post(NEW, {"name": "Mine", "admin": who}).status_code == 403
        assert "New project" not in client.get("/projects/").content.decode()
    assert not Project.objects.filter(name="Mine").exists()


@pytest.mark.django_db(transaction=True)
def test_the_current_project_is_the_first_of_theirs_then_the_one_switched_to(teams):
    vic = member("vic", teams["b"], "operators")
    member("vic", teams["a"], "viewers")
    client = signed_in(vic)
    header = client.get("/runs/").content.decode()
    assert '<option value="alpha" selected>Alpha</option>' in header  # first of theirs, by name
    response = client.post(SWITCH, {"project": "billing", "next": "/budgets/"})
    assert response.status_code == 302 and response["Location"] == "/budgets/"
    assert '<option value="billing" selected>Billing</option>' in client.get("/runs/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_nobody_switches_to_a_project_they_do_not_belong_to(teams):
    client = signed_in(teams["ann"])
    assert client.post(SWITCH, {"project": "billing"}).status_code == 404
    assert client.get(SWITCH).status_code == 405  # a switch is a POST
    assert '<span class="project-caption">Project</span> <strong>Alpha</strong>' in client.get("/runs/").content.decode()  # one project: named, no switch


@pytest.mark.django_db(transaction=True)
def test_a_switch_never_sends_the_person_to_another_site(teams):
    client = signed_in(teams["root"])
    response = client.post(SWITCH, {"project": "billing", "next": "https://elsewhere.example/"})
    assert response["Location"] == "/"


@pytest.mark.django_db(transaction=True)
def test_a_role_taken_away_leaves_no_current_project_behind(teams):
    vic = member("vic", teams["b"], "admins")
    member("vic", teams["a"], "admins")
    client = signed_in(vic)
    client.post(SWITCH, {"project": "billing"})
    Membership.objects.filter(user=vic, project=teams["b"]).delete()
    assert '<span class="project-caption">Project</span> <strong>Alpha</strong>' in client.get("/runs/").content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_new_budget_form_starts_with_the_project_the_person_works_in(teams):
    root = teams["root"]
    root.current_project_choice = teams["b"].pk
    assert current_project(root) == teams["b"]
    assert BudgetForm(instance=Budget(), user=root)["project"].initial == teams["b"].pk
    client = signed_in(root)
    client.post(SWITCH, {"project": "billing"})
    page = client.get("/budgets/new/").content.decode()
    assert f'<option value="{teams["b"].pk}" selected>Billing</option>' in page
