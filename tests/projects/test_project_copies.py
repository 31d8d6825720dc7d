"""A project's admin copies an agent or a tool into their project from another project they
belong to: a copy with a name that says so, through the agents' and tools' own rules; the
original unchanged. A member who is not the project's admin, an admin of another project, and
anyone copying from a project they do not belong to are refused."""
import html

import pytest
from django.test import Client

from audit.models import AuditEntry
from runs.lifecycle.agent_copies import agent_copy_name
from runs.lifecycle.agents import agent_save
from runs.models import Agent
from tests.projects import member, project
from toolsapp.forms import tool_save_in_project
from toolsapp.models import Tool
from toolsapp.tool_copies import copy_name

pytestmark = pytest.mark.urls("tests.projects.copy_urls")
COPY = "/projects/copy/"
PARAMETERS = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def teams(demo_data):
    """Alpha's refund_order tool and refunder agent; ann admin of Alpha and Billing; bill admin of
    Billing only; cy operator of Billing; zed admin of Zeta, which holds a secret agent."""
    a, b, z = project("Alpha"), project("Billing"), project("Zeta")
    tool = tool_save_in_project(tool=None, project=a, data={
        "name": "refund_order", "parameters": PARAMETERS, "kind": "http", "url": "https://shop.example/refund",
        "destructive": True, "description": "Refunds an order"})
    shared = Tool.objects.filter(project=None, enabled=True).exclude(kind=Tool.Kind.MCP).first()
    agent = agent_save(agent=None, project=a, data={"name": "refunder", "system_prompt": "Refund politely.",
                                                    "tools": [tool] + ([shared] if shared else [])})
    secret = agent_save(agent=None, project=z, data={"name": "zeta-secret"})
    ann = member("ann", a, "admins")
    member("ann", b, "admins")
    return {"a": a, "b": b, "z": z, "tool": tool, "agent": agent, "secret": secret, "shared": shared, "ann": ann,
            "bill": member("bill", b, "admins"), "cy": member("cy", b, "operators"), "zed": member("zed", z, "admins")}


def test_a_copy_is_named_as_a_copy_and_never_takes_a_taken_name():
    taken = {"refund_order-billing", "refunder (copy in Billing)"}
    assert copy_name("refund_order", "billing", taken=taken.__contains__) == "refund_order-billing-2"
    assert agent_copy_name("refunder", "Billing", taken=taken.__contains__) == "refunder (copy 2 in Billing)"
    assert len(copy_name("x" * 64, "billing", taken=lambda name: False)) == 64
    assert len(agent_copy_name("y" * 100, "Billing", taken=lambda name: False)) == 100


@pytest.mark.django_db(transaction=True)
def test_an_admin_copies_a_tool_then_the_agent_which_uses_the_copy(teams):
    ann = signed_in(teams["ann"])
    page = ann.get(COPY, {"into": "billing"}).content.decode()
    assert "refunder" in page and "refund_order" in page and "zeta-secret" not in page
    ann.post(COPY, {"into": "billing", "kind": "tool", "id": teams["tool"].pk})
    tool = Tool.objects.get(name="refund_order-billing")
    assert (tool.project, tool.destructive, tool.config["url"]) == (teams["b"], True, "https://shop.example/refund")
    response = ann.post(COPY, {"into": "billing", "kind": "agent", "id": teams["agent"].pk}, follow=True)
    assert "refunder (copy in Billing) is now an agent of Billing, a copy of refunder." in response.content.decode()
    copied = Agent.objects.get(name="refunder (copy in Billing)")
    assert copied.project == teams["b"] and copied.system_prompt == "Refund politely."
    expected = {"refund_order-billing"} | ({teams["shared"].name} if teams["shared"] else set())
    assert set(copied.tools.values_list("name", flat=True)) == expected
    assert copied.versions.count() == 1
    original = Agent.objects.get(pk=teams["agent"].pk)
    assert original.project == teams["a"] and original.name == "refunder"
    assert AuditEntry.objects.filter(kind="agent", action="created", object_repr__contains="copy in Billing",
                                     actor_name="ann").exists()


@pytest.mark.django_db(transaction=True)
def test_an_agent_copied_before_its_tools_says_which_tools_it_lacks(teams):
    page = html.unescape(signed_in(teams["ann"]).post(
        COPY, {"into": "billing", "kind": "agent", "id": teams["agent"].pk}, follow=True).content.decode())
    assert "It has none of Alpha's tools it used (refund_order): copy them below" in page
    copied = Agent.objects.get(name="refunder (copy in Billing)")
    assert not copied.tools.filter(project=teams["a"]).exists()


@pytest.mark.django_db(transaction=True)
def test_copying_from_a_project_you_do_not_belong_to_is_refused(teams):
    bill = signed_in(teams["bill"])
    assert bill.post(COPY, {"into": "billing", "kind": "agent", "id": teams["agent"].pk}).status_code == 404
    assert bill.post(COPY, {"into": "billing", "kind": "agent", "id": teams["secret"].pk}).status_code == 404
    assert bill.post(COPY, {"into": "billing", "kind": "tool", "id": teams["tool"].pk}).status_code == 404
    assert "refunder" not in bill.get(COPY, {"into": "billing"}).content.decode()
    assert not Agent.objects.filter(project=teams["b"]).exists() and not Tool.objects.filter(project=teams["b"]).exists()


@pytest.mark.django_db(transaction=True)
def test_only_the_projects_admins_copy_into_it(teams):
    cy = signed_in(teams["cy"])  # an operator of Billing
    assert cy.get(COPY, {"into": "billing"}).status_code == 403
    assert cy.post(COPY, {"into": "billing", "kind": "tool", "id": teams["tool"].pk}).status_code == 403
    zed = signed_in(teams["zed"])  # an admin of Zeta: Billing does not exist for them
    assert zed.get(COPY, {"into": "billing"}).status_code == 404
    assert zed.post(COPY, {"into": "billing", "kind": "agent", "id": teams["secret"].pk}).status_code == 404
    ann = signed_in(teams["ann"])  # Alpha's and Billing's admin, not Zeta's
    assert ann.post(COPY, {"into": "zeta", "kind": "agent", "id": teams["agent"].pk}).status_code == 404
    assert not Agent.objects.filter(project__in=[teams["b"], teams["z"]]).exclude(pk=teams["secret"].pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_copy_is_a_post_with_the_csrf_token(teams):
    client = Client(enforce_csrf_checks=True)
    client.force_login(teams["ann"])
    assert client.post(COPY, {"into": "billing", "kind": "tool", "id": teams["tool"].pk}).status_code == 403
    assert not Tool.objects.filter(project=teams["b"]).exists()


@pytest.mark.django_db(transaction=True)
def test_shared_and_mcp_tools_are_not_offered_nor_copied(teams):
    if teams["shared"] is None:
        pytest.skip("no shared tool in the demo data")
    ann = signed_in(teams["ann"])
    response = ann.post(COPY, {"into": "billing", "kind": "tool", "id": teams["shared"].pk})
    assert response.status_code == 404  # every project has it already
    assert teams["shared"].name not in ann.get(COPY, {"into": "billing"}).content.decode()
    assert not Tool.objects.filter(project=teams["b"]).exists()
