"""An API token limited to one project acts in that project only, with its person's role there:
whatever its person may do elsewhere (a site admin's, a superuser's, or their roles in other
projects), through the token the things the site shares (tools) are read-only, another project's
things are as if they did not exist, and the person's tokens for other projects or for every
project are not its to list or revoke. Through real token-authenticated API requests."""
import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import api_token_create
from runs.models import ApprovalRule
from tests.projects import member, project
from tests.support.approval_fixtures import make_user
from toolsapp.models import Tool

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def token_client(user, project_=None) -> tuple[APIClient, ApiToken]:
    """An API client with a new token of the person's (limited to `project_` when given)."""
    made, key = api_token_create(user=user, name=f"for {project_.slug if project_ else 'every project'}",
                                 project=project_)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client, made


@pytest.fixture
def world(demo_data):
    alpha, beta = project("Alpha"), project("Beta")
    tools = {name: Tool.objects.create(name=f"{name}_lookup", handler="get_weather", project=where, parameters=SCHEMA)
             for name, where in (("shared", None), ("alpha", alpha), ("beta", beta))}
    rules = {key: ApprovalRule.objects.create(name=f"{where.name} asks", action="ask", project=where)
             for key, where in (("alpha", alpha), ("beta", beta))}
    return {"alpha": alpha, "beta": beta, "tools": tools, "rules": rules}


def site_admins() -> dict[str, User]:
    return {"a site admin": make_user("root", "admins"),
            "a superuser": User.objects.create_superuser("super", password="pw-super-long-1")}


def test_a_site_admins_token_limited_to_a_project_cannot_change_what_the_site_shares(world):
    shared = world["tools"]["shared"]
    url = f"/api/v1/tools/{shared.pk}/"
    for who, person in site_admins().items():
        limited, _ = token_client(person, world["alpha"])
        # It reads the shared tool (Alpha's agents use it), as a member of Alpha does...
        assert limited.get(url).status_code == 200, who
        # ...and changes nothing of it: not its fields, not its project, not its existence.
        refused = {
            "PATCH": limited.patch(url, {"description": "changed by a token of Alpha"}, format="json"),
            "PUT": limited.put(url, {"name": shared.name, "description": "replaced", "parameters": SCHEMA,
                                     "handler": "get_weather"}, format="json"),
            "PATCH project": limited.patch(url, {"project": "alpha"}, format="json"),
            "DELETE": limited.delete(url),
        }
        assert {what: answer.status_code for what, answer in refused.items()} == dict.fromkeys(refused, 403), who
        # Nor does it make a new tool the site shares.
        made = limited.post("/api/v1/tools/", {"name": "new_shared", "parameters": SCHEMA, "handler": "get_weather",
                                               "project": None}, format="json")
        assert made.status_code == 400 and "project" in made.json()["errors"], (who, made.json())
        assert Tool.objects.filter(pk=shared.pk, project=None, description="").exists(), who
        assert not Tool.objects.filter(name="new_shared").exists()
        # In Alpha it is an admin, as its person is in every project.
        alpha_tool = world["tools"]["alpha"]
        assert limited.patch(f"/api/v1/tools/{alpha_tool.pk}/", {"description": who}, format="json").status_code == 200
        # The same person's token for every project still changes the shared tool (the check is the limit's).
        unlimited, _ = token_client(person)
        assert unlimited.patch(url, {"description": who}, format="json").status_code == 200, who
        Tool.objects.filter(pk=shared.pk).update(description="")


def test_a_limited_token_neither_lists_nor_revokes_its_persons_other_tokens(world):
    ada = member("ada", world["alpha"], "admins")
    member("ada", world["beta"], "admins")
    limited, own = token_client(ada, world["alpha"])
    _, everywhere = token_client(ada)
    _, for_beta = token_client(ada, world["beta"])
    _, alpha_too = token_client(ada, world["alpha"])
    listed = limited.get("/api/v1/tokens/")
    assert listed.status_code == 200 and sorted(t["id"] for t in listed.json()) == sorted([own.pk, alpha_too.pk])
    for other in (everywhere, for_beta):
        refused = limited.post(f"/api/v1/tokens/{other.pk}/revoke/", {}, format="json")
        assert refused.status_code == 404 and refused.json()["detail"] == "No such token of yours."
        assert ApiToken.objects.get(pk=other.pk).revoked_at is None
    # One of the same project it revokes, as a session may.
    assert limited.post(f"/api/v1/tokens/{alpha_too.pk}/revoke/", {}, format="json").status_code == 200


def test_a_token_limited_to_a_project_keeps_its_limit_for_a_person_of_several_projects(world):
    """Vic views Alpha and administers Beta: his token limited to Alpha has a viewer's role and sees
    Alpha only, never the union of his roles or of his projects."""
    vic = member("vic", world["alpha"], "viewers")
    member("vic", world["beta"], "admins")
    limited, _ = token_client(vic, world["alpha"])
    alpha_rule, beta_rule = world["rules"]["alpha"], world["rules"]["beta"]
    # What it sees: Alpha's rules and tools (and the site's), nothing of Beta's.
    assert [r["name"] for r in limited.get("/api/v1/rules/").json()["results"]] == ["Alpha asks"]
    tools = {t["name"] for t in limited.get("/api/v1/tools/").json()["results"]}
    assert {"alpha_lookup", "shared_lookup"} <= tools and "beta_lookup" not in tools
    assert limited.get(f"/api/v1/rules/{beta_rule.pk}/").status_code == 404
    assert limited.patch(f"/api/v1/rules/{beta_rule.pk}/", {"name": "x"}, format="json").status_code == 404
    # What it does: a viewer's nothing, though its person is an admin elsewhere.
    assert limited.patch(f"/api/v1/rules/{alpha_rule.pk}/", {"name": "x"}, format="json").status_code == 403
    rule = {"name": "made by a viewer's token", "tool_pattern": "*", "action": "ask"}
    for body in (rule, {**rule, "project": "beta"}, {**rule, "project": "alpha"}):
        assert limited.post("/api/v1/rules/", body, format="json").status_code in (400, 403), body
    assert not ApprovalRule.objects.filter(name=rule["name"]).exists()
    # His token for every project is an admin's in Beta (so the refusals above are the limit's).
    everywhere, _ = token_client(vic)
    assert everywhere.patch(f"/api/v1/rules/{beta_rule.pk}/", {"name": "Beta asks first"},
                            format="json").status_code == 200
