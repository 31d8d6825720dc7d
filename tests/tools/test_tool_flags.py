"""The three approval flags of a tool (critical, always ask, allow argument edits) can be set and
seen wherever tools are edited and shown: the dashboard's form and page, the admin, the API and its
OpenAPI schema, each with what it does; only those who may change tools may change them."""
import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from tests.support.approval_fixtures import make_user
from tests.tools.test_tool_services import SCHEMA, form_post
from tests.web.api.test_api import api
from toolsapp.models import Tool

FLAGS = ("critical", "always_ask", "allow_argument_edits")


def flags(name: str) -> tuple:
    return Tool.objects.filter(name=name).values_list(*FLAGS).get()


@pytest.fixture
def ada(demo_data, client):
    client.force_login(make_user("ada", "admins"))
    return client


def test_the_form_sets_the_flags_and_the_tool_page_shows_them(ada):
    response = ada.post(reverse("tool_create"), form_post(destructive="on", critical="on", always_ask="on"))
    assert response.status_code == 302, response.context["form"].errors
    assert flags("check_stock") == (True, True, False)  # an unticked box: no edits before approving

    page = ada.get(reverse("tool_detail", args=[Tool.objects.get(name="check_stock").pk])).content.decode()
    assert 'id="tool-critical">yes' in page and 'id="tool-always-ask">yes' in page
    assert 'id="tool-allow-argument-edits">no' in page
    form = ada.get(reverse("tool_edit", args=[Tool.objects.get(name="check_stock").pk])).content.decode()
    for help_text in (Tool._meta.get_field(f).help_text for f in FLAGS):
        assert help_text.replace("'", "&#x27;") in form


def test_the_admin_sets_the_flags(demo_data, client):
    client.force_login(User.objects.create_superuser("root", password="pw-root-long-enough"))
    tool = Tool.objects.get(name="cancel_order")
    post = form_post(name="cancel_order", handler="cancel_order", destructive="on", critical="on",
                     allow_argument_edits="on")
    response = client.post(reverse("admin:toolsapp_tool_change", args=[tool.pk]), post)
    assert response.status_code == 302
    assert flags("cancel_order") == (True, False, True)


def test_the_api_sets_reads_and_documents_the_flags(demo_data):
    client = api(make_user("ada", "admins"))
    created = client.post("/api/v1/tools/", {"name": "check_stock", "parameters": SCHEMA, "destructive": True,
                                             "critical": True, "always_ask": True}, format="json")
    assert created.status_code == 201, created.json()
    assert {f: created.json()[f] for f in FLAGS} == {"critical": True, "always_ask": True, "allow_argument_edits": True}
    assert flags("check_stock") == (True, True, True)
    changed = client.patch(f"/api/v1/tools/{created.json()['id']}/", {"critical": False, "allow_argument_edits": False},
                           format="json")
    assert changed.status_code == 200 and flags("check_stock") == (False, True, False)

    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    properties = json.loads(schema.content)["components"]["schemas"]["Tool"]["properties"]
    for flag in FLAGS:
        assert properties[flag]["type"] == "boolean"
        assert properties[flag]["description"] == Tool._meta.get_field(flag).help_text


def test_who_may_not_change_tools_may_not_change_the_flags(demo_data):
    tool = Tool.objects.get(name="cancel_order")
    operator = api(make_user("otto", "operators"))
    refused = operator.patch(f"/api/v1/tools/{tool.pk}/", {"critical": True}, format="json")
    assert refused.status_code == 403 and flags("cancel_order") == (False, False, True)
    assert {f: operator.get(f"/api/v1/tools/{tool.pk}/").json()[f] for f in FLAGS} == {
        "critical": False, "always_ask": False, "allow_argument_edits": True}
