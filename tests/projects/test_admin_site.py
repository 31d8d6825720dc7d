"""Django's admin is the site's, not cut by project: a project's admin made staff (to map chat
identities, as the README used to say) read every project's runs, agents and audit log there, and
could delete another project's agent. Only superusers and site administrators (the site role
"admins") enter it now; everyone else is sent to the admin's sign-in, which says they may not."""
import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from runs.models import Agent
from tests.projects import member, project

PASSWORD = "pw-long-enough-1"


def signed_in(username: str) -> Client:
    """A session made the way a person makes one: their username and password."""
    client = Client()
    assert client.post("/login/", {"username": username, "password": PASSWORD}).status_code == 302
    return client


@pytest.fixture
def beta_agent(demo_data):
    project("Alpha")
    demo = Agent.objects.get(name="demo")
    demo.pk, demo.name, demo.project = None, "beta-secret-bot", project("Beta")
    demo.save()
    return demo


def refused(client: Client, url: str, method: str = "get", data=None) -> None:
    answer = getattr(client, method)(url, data or {})
    assert answer.status_code == 302 and answer["Location"].startswith("/admin/login/"), (url, answer.status_code)
    page = client.get(answer["Location"]).content.decode()
    assert "not authorized to access this page" in page and "beta-secret" not in page


@pytest.mark.django_db(transaction=True)
def test_a_staff_project_admin_is_refused_everywhere_in_the_admin(beta_agent):
    ann = member("ann", project("Alpha"), "admins")
    User.objects.filter(pk=ann.pk).update(is_staff=True)
    client = signed_in("ann")
    refused(client, "/admin/")
    refused(client, "/admin/runs/run/")
    refused(client, "/admin/audit/auditentry/")
    refused(client, f"/admin/runs/agent/{beta_agent.pk}/change/")
    refused(client, f"/admin/runs/agent/{beta_agent.pk}/delete/", "post", {"post": "yes"})
    assert Agent.objects.filter(pk=beta_agent.pk).exists()
    # The header has no link to it; her projects page has her project's people instead.
    page = client.get("/projects/").content.decode()
    assert 'href="/admin/"' not in page and 'action="/projects/members/add/"' in page


@pytest.mark.django_db(transaction=True)
def test_superusers_and_site_administrators_enter_the_admin(beta_agent):
    User.objects.create_superuser("root", password=PASSWORD)
    site = User.objects.create_user("sam", password=PASSWORD, is_staff=True)
    site.groups.add(Group.objects.get(name="admins"))
    for username in ("root", "sam"):
        client = signed_in(username)
        assert client.get("/admin/").status_code == 200, username
        assert client.get("/admin/runs/run/").status_code == 200, username
        change = client.get(f"/admin/runs/agent/{beta_agent.pk}/change/")
        assert change.status_code == 200 and "beta-secret-bot" in change.content.decode(), username
        assert 'href="/admin/"' in client.get("/projects/").content.decode(), username
    assert signed_in("sam").post(f"/admin/runs/agent/{beta_agent.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Agent.objects.filter(pk=beta_agent.pk).exists()
