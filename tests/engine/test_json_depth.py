"""JSON nested too deeply, wherever a person or a model supplies it, is a clear error: a 400, a
form error, an error result for the model (loop_contract/test_json_depth_calls.py), never a
RecursionError (a 500 or a crashed run)."""
import pytest
from django.urls import reverse

from hosting.text import JsonTooDeep, loads, nested_deeper_than, text_nested_deeper_than
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api
from tests.web.pages import test_agents_tools_pages as pages
from tests.web.pages.test_agents_tools_pages import agent_post, tool_post

admin = pages.admin  # fixture
BOMB = "[" * 100_000 + "]" * 100_000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- The one reader --------------------------------------------------------------------------------


def test_json_up_to_64_levels_is_read_and_deeper_is_refused_with_the_limit_named():
    assert loads(nested(64)) is not None
    with pytest.raises(JsonTooDeep, match="JSON nested deeper than 64 levels"):
        loads(nested(65))
    with pytest.raises(ValueError, match="deeper than 64"):  # a ValueError: old `except ValueError` catch it
        loads(BOMB.encode())


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '{"a": "' + "[" * 1000 + '", "b": "\\"[[[[", "c": [1]}'
    assert not text_nested_deeper_than(text)
    assert loads(text)["c"] == [1]


def test_a_parsed_value_is_measured_without_recursion():
    value = []
    for _ in range(5000):
        value = [value]
    assert nested_deeper_than(value) and not nested_deeper_than([[{"a": [1]}]])


# --- Entry points ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/runs/", "/api/v1/agents/", "/api/v1/tools/"])
def test_an_api_body_nested_too_deeply_is_a_400(demo_data, path):
    user = make_user("ada", "admins")
    response = api(user).post(path, data=BOMB, content_type="application/json")
    assert response.status_code == 400
    assert "nested deeper than 64 levels" in response.json()["detail"]


def test_tool_parameters_nested_too_deeply_are_a_form_error(demo_data, admin):
    response = admin.post(reverse("tool_create"), tool_post(parameters=BOMB))
    assert response.status_code == 200
    assert "nested deeper than 64 levels" in response.content.decode()


def test_provider_options_nested_too_deeply_are_a_form_error(demo_data, admin):
    response = admin.post(reverse("agent_create"), agent_post(provider_options='{"x": ' + BOMB + "}"))
    assert response.status_code == 200
    assert "nested deeper than 64 levels" in response.content.decode()


def test_provider_options_deeper_than_the_limit_are_refused_by_the_service(demo_data):
    from django.core.exceptions import ValidationError

    from runs.engine.storage.text import check_storable_json

    value = {}
    for _ in range(70):
        value = {"x": value}
    with pytest.raises(ValidationError, match="provider_options is nested deeper than 64 levels"):
        check_storable_json(value, "provider_options")


def test_the_demo_model_answers_a_request_nested_too_deeply_with_a_400(demo_server):
    import urllib.error
    import urllib.request

    request = urllib.request.Request(f"{demo_server.url}/chat/completions", data=BOMB.encode(),
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert "nested deeper than 64 levels" in refused.value.read().decode()
