"""A write the API cannot honour is refused, never half done: every write endpoint answers 400
naming each field it does not take (a misspelt safety flag, a field of another endpoint, one inside
a nested object), and changes nothing."""
import pytest
from rest_framework.test import APIClient

from accounts.models import ApiToken
from runs.models import Agent, ApprovalRule, OperatorMessage, Run
from tests.support.approval_fixtures import make_user, pending_approval
from tests.web.api.test_api import CANCEL_TASK, api
from toolsapp.models import Tool

SCHEMA = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"], "additionalProperties": False}
RULE = {"name": "r", "tool_pattern": "cancel_order", "action": "approve", "agent": "demo",
        "conditions": [{"path": "$.order_id", "op": "eq", "value": "ORD-1"}], "position": 10}


@pytest.fixture
def ada(demo_data):
    return make_user("ada", "admins")


@pytest.fixture
def waiting(launch):
    return pending_approval(launch(CANCEL_TASK))


@pytest.fixture
def finished(launch):
    run = launch()
    assert run.status == Run.Status.SUCCEEDED
    return run


def state():
    """What a refused write must leave as it was."""
    return (Tool.objects.count(), Agent.objects.count(), Run.objects.count(), ApprovalRule.objects.count(),
            list(Tool.objects.values_list("name", "critical", "always_ask", "allow_argument_edits", "timeout_seconds")),
            list(Run.objects.values_list("status", "pause_requested", "cancel_requested", "stop_requested_by_name")),
            OperatorMessage.objects.count(), ApiToken.objects.filter(revoked_at__isnull=False).count())


# (method, path, a body the endpoint takes, where the stray field goes: None = top level)
WRITES = [
    ("post", "/api/v1/tools/", {"name": "check_stock", "parameters": SCHEMA}, None),
    ("patch", "/api/v1/tools/{tool}/", {"timeout_seconds": 9}, None),
    ("put", "/api/v1/tools/{tool}/", {"name": "get_weather", "parameters": SCHEMA}, None),
    ("post", "/api/v1/agents/", {"name": "mine"}, None),
    ("patch", "/api/v1/agents/{agent}/", {"max_iterations": 3}, None),
    ("post", "/api/v1/runs/", {"agent": "demo", "task": "Weather in Lagos?"}, None),
    ("post", "/api/v1/runs/{finished}/rerun/", {}, None),
    ("post", "/api/v1/runs/{finished}/fork/", {"step": 1}, None),
    ("post", "/api/v1/runs/{finished}/fork/", {"step": 1, "edit": {"message": "hi"}}, "edit"),
    ("post", "/api/v1/runs/{finished}/fork/",
     {"step": 1, "edit": {"tool_result": {"call_id": "x", "content": "y"}}}, "edit.tool_result"),
    ("post", "/api/v1/runs/{run}/cancel/", {}, None),
    ("post", "/api/v1/runs/{run}/pause/", {}, None),
    ("post", "/api/v1/runs/{run}/resume/", {}, None),
    ("post", "/api/v1/runs/{run}/stop/", {}, None),
    ("post", "/api/v1/runs/{run}/message/", {"text": "Check ORD-1002 too."}, None),
    ("post", "/api/v1/approvals/{approval}/approve/", {"reason": "fine"}, None),
    ("post", "/api/v1/approvals/{approval}/reject/", {"reason": "no"}, None),
    ("post", "/api/v1/approvals/bulk/", {"ids": [1], "decision": "reject"}, None),
    ("post", "/api/v1/rules/", RULE, None),
    ("post", "/api/v1/rules/preview/", RULE, None),
    ("post", "/api/v1/tokens/", {"name": "n"}, None),
    ("post", "/api/v1/tokens/{token}/revoke/", {}, None),
]


@pytest.mark.parametrize("method, path, body, inside", WRITES, ids=[f"{m} {p} {i or ''}" for m, p, _b, i in WRITES])
def test_every_write_refuses_a_field_it_does_not_take_and_names_it(ada, waiting, finished, method, path, body, inside):
    token = ApiToken.objects.create(user=ada, name="t", prefix="p", key_hash="h" * 64) if "{token}" in path else None
    url = path.format(tool=Tool.objects.get(name="get_weather").pk, agent=Agent.objects.get(name="demo").pk,
                      finished=finished.pk, run=waiting.run_id, approval=waiting.pk,
                      token=token.pk if token else 0)
    if "bulk" in path:
        body = {**body, "ids": [waiting.pk]}
    stray = {**body}
    target = stray
    for key in (inside.split(".") if inside else []):
        target[key] = {**target[key]}
        target = target[key]
    target["critcal"] = True
    before = state()

    client = APIClient()
    client.force_login(ada)  # a session: tokens are made from one, not with a token
    response = getattr(client, method)(url, stray, format="json")

    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    for key in (inside.split(".") if inside else []):
        errors = errors[key]
    assert "critcal" in errors and "Unknown field" in str(errors["critcal"])
    assert "critcal" in response.json()["detail"]
    assert state() == before


def test_a_field_an_endpoint_reads_back_is_not_unknown(ada):
    """A tool read, changed and sent back whole is taken: read-only fields are the endpoint's own."""
    client = api(ada)
    tool = client.get(f"/api/v1/tools/{Tool.objects.get(name='get_weather').pk}/").json()
    response = client.put(f"/api/v1/tools/{tool['id']}/", {**tool, "timeout_seconds": 11}, format="json")
    assert response.status_code == 200, response.json()
    assert Tool.objects.get(name="get_weather").timeout_seconds == 11


@pytest.mark.parametrize("path", ["/api/v1/runs/", "/api/v1/approvals/archived/", "/api/v1/agents/"])
def test_an_unknown_format_query_parameter_is_ignored_not_a_404(ada, path):
    """A stray `?format=` (a proxy's, a script's) does not turn a list into "Not found."."""
    client = APIClient()
    client.force_authenticate(ada)
    response = client.get(path, {"format": "{'x': 1}"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("application/json")
    # A format it renders still chooses: the schema as JSON.
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200 and "openapi" in schema.json()
