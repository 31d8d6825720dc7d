"""A tool's settings for the moment of decision (identifier fields, state check, required earlier
read, outside content) are set where tools are edited, the form and the API, and refused in the
same clear words in both when they name what does not exist or may not be used."""
import pytest
from django.urls import reverse

from projects.models import DEFAULT_SLUG, Project
from tests.projects import member, project
from tests.support.approval_fixtures import make_user
from tests.tools.test_tool_services import SCHEMA, form_post
from tests.web.api.test_api import api
from toolsapp.models import Tool

CHECK = {"tool": "lookup_order", "arguments": {"order_id": "$.sku"}}
SETTINGS = ("identifier_fields", "state_check", "requires_read", "reads_outside_content")


def settings_of(name: str) -> tuple:
    return Tool.objects.filter(name=name).values_list(*SETTINGS).get()


@pytest.fixture
def ada(demo_data, client):
    client.force_login(make_user("ada", "admins"))
    return client


def in_default(**changes) -> dict:
    """The form's fields for check_stock in the Default project, where the demo tools are."""
    return form_post(project=str(Project.objects.get(slug=DEFAULT_SLUG).pk), **changes)


def errors(response) -> dict:
    return {field: list(messages) for field, messages in response.context["form"].errors.items()}


def test_the_form_sets_them_and_the_tool_page_shows_them(ada):
    response = ada.post(reverse("tool_create"), in_default(
        destructive="on", identifier_fields=" sku ", state_check='{"tool": " lookup_order ", "arguments": {"order_id": "$.sku"}}',
        requires_read='{"tool": "lookup_order", "arguments": {"order_id": "$.sku"}}', reads_outside_content="on"))
    assert response.status_code == 302, errors(response)
    assert settings_of("check_stock") == (["sku"], CHECK, CHECK, True)
    page = ada.get(reverse("tool_detail", args=[Tool.objects.get(name="check_stock").pk])).content.decode()
    assert '<span class="mono">lookup_order</span> with <span class="mono">order_id = $.sku</span>' in page
    assert 'id="tool-identifier-fields"><span class="mono">sku</span>' in page
    assert 'id="tool-reads-outside">yes' in page
    form = ada.get(reverse("tool_edit", args=[Tool.objects.get(name="check_stock").pk])).content.decode()
    assert "{&quot;tool&quot;: &quot;lookup_order&quot;, &quot;arguments&quot;: {&quot;order_id&quot;: &quot;$.sku&quot;}}" in form


def test_a_form_sent_without_them_keeps_them_and_empty_ones_clear_them(ada):
    ada.post(reverse("tool_create"), in_default(destructive="on", identifier_fields="sku",
                                               state_check='{"tool": "lookup_order", "arguments": {"order_id": "$.sku"}}'))
    tool = Tool.objects.get(name="check_stock")
    assert ada.post(reverse("tool_edit", args=[tool.pk]), in_default(destructive="on", description="Changed.")).status_code == 302
    assert settings_of("check_stock")[:2] == (["sku"], CHECK)
    assert ada.post(reverse("tool_edit", args=[tool.pk]), in_default(identifier_fields="", state_check="")).status_code == 302
    assert settings_of("check_stock")[:2] == ([], {})


@pytest.mark.parametrize("field, typed, message", [
    ("identifier_fields", "sku, nope", "Not an argument of this tool: nope (its arguments: sku)."),
    ("state_check", '{"tool": "cancel_order", "arguments": {"order_id": "$.sku"}}',
     "cancel_order is destructive: a state check runs without asking anyone, so it must only read."),
    ("state_check", '{"tool": "no_such_tool"}', "There is no tool named 'no_such_tool'."),
    ("state_check", "lookup_order", "Not valid JSON (Expecting value: line 1 column 1 (char 0)); write it as "
     '{"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}.'),
    ("requires_read", '{"tool": "lookup_order", "arguments": {"order_id": "sku"}}',
     "order_id: 'sku' is not a JSON path: write $.name (or $.list[0], $[\"odd key\"])."),
    ("requires_read", '{"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}',
     "order_id: $.order_id is not in this tool's arguments (its arguments: sku)."),
    ("requires_read", '{"tool": "lookup_order", "arguments": {"order": "$.sku"}}',
     "order: not an argument of lookup_order (its arguments: order_id)."),
    ("requires_read", '{"tool": "check_stock"}', "The read must be another tool than this one."),
])
def test_the_form_refuses_what_cannot_work_in_words(ada, field, typed, message):
    response = ada.post(reverse("tool_create"), in_default(destructive="on", **{field: typed}))
    assert response.status_code == 200
    assert message in errors(response)[field]
    assert not Tool.objects.filter(name="check_stock").exists()


def test_the_api_sets_reads_and_refuses_them(demo_data):
    client = api(make_user("ada", "admins"))
    created = client.post("/api/v1/tools/", {"name": "check_stock", "parameters": SCHEMA, "destructive": True,
                                             "project": DEFAULT_SLUG, "identifier_fields": ["sku"], "state_check": CHECK}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert {f: body[f] for f in SETTINGS} == {"identifier_fields": ["sku"], "state_check": CHECK, "requires_read": {},
                                              "reads_outside_content": False}
    refused = client.patch(f"/api/v1/tools/{body['id']}/", {
        "identifier_fields": ["nope"], "requires_read": {"tool": "lookup_order", "arguments": {"order_id": "sku"}},
        "state_check": ["lookup_order"]}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["identifier_fields"] == ["Not an argument of this tool: nope (its arguments: sku)."]
    assert refused.json()["errors"]["requires_read"] == [
        "order_id: 'sku' is not a JSON path: write $.name (or $.list[0], $[\"odd key\"])."]
    assert refused.json()["errors"]["state_check"][0].startswith("An object naming a tool and its arguments")
    assert settings_of("check_stock") == (["sku"], CHECK, {}, False)
    changed = client.patch(f"/api/v1/tools/{body['id']}/", {"state_check": {}, "reads_outside_content": True},
                           format="json")
    assert changed.status_code == 200 and settings_of("check_stock") == (["sku"], {}, {}, True)


def test_another_projects_tool_may_not_be_named(demo_data):
    acme, globex = project("Acme"), project("Globex")
    Tool.objects.create(name="globex_lookup", project=globex, parameters={
        "type": "object", "properties": {"order_id": {"type": "string"}}})
    client = api(member("ann", acme, "admins"))
    other = {"tool": "globex_lookup", "arguments": {"order_id": "$.sku"}}
    refused = client.post("/api/v1/tools/", {"name": "check_stock", "parameters": SCHEMA, "project": "acme",
                                             "state_check": other}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["state_check"] == [
        "globex_lookup is another project's tool: name one of this tool's project or one the site shares."]
    shared = api(make_user("ada", "admins")).post("/api/v1/tools/", {
        "name": "check_stock", "parameters": SCHEMA, "project": None, "requires_read": other}, format="json")
    assert shared.status_code == 400
    assert shared.json()["errors"]["requires_read"] == [
        "globex_lookup belongs to a project: a tool the site shares names only shared tools."]
