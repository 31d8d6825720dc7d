"""A person's role counts in its own project only: an admin of Beta who is a viewer of Alpha is a
viewer in Alpha (the permission backend answers with the role of the project the request is
about, never with the union of all of the person's roles)."""
from django.test import Client

from runs.models import Agent
from tests.projects import member, project


def test_an_admin_of_one_project_is_only_a_viewer_where_they_are_one(demo_data):
    alpha, beta = project("Alpha"), project("Beta")
    Agent.objects.filter(name="demo").update(project=alpha)
    agent = Agent.objects.get(name="demo")
    person = member("vera", beta, "admins")
    member("vera", alpha, "viewers")
    client = Client()
    client.force_login(person)

    assert client.get(f"/agents/{agent.pk}/").status_code == 200  # a viewer of Alpha sees the agent
    assert client.get(f"/agents/{agent.pk}/edit/").status_code == 403
    response = client.post(f"/agents/{agent.pk}/edit/", {"name": "renamed", "system_prompt": "x"})
    assert response.status_code == 403
    assert Agent.objects.get(pk=agent.pk).name == "demo"
    assert client.post("/api/v1/agents/", {"name": "made-in-alpha", "project": alpha.pk},
                       content_type="application/json").status_code in (400, 403)
    assert not Agent.objects.filter(name="made-in-alpha").exists()
