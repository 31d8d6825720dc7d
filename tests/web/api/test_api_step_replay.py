"""POST /api/v1/runs/<id>/steps/<index>/replay/: what the run page's "Replay this request" does,
over the API (the README: everything the dashboard does is under /api/v1/). Answers as JSON, the
replay recorded with who asked and what it cost; refused in words when a covering budget is
reached; for the people who may replay on the page only (an operator of the run's project), in
the OpenAPI schema."""
import pytest

from audit.models import AuditEntry
from runs.models import Agent, Budget, StepReplay
from tests.projects import member, project
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api


@pytest.fixture
def otto(demo_data):
    return make_user("otto_a", "operators")


def url(run, index: int = 1) -> str:
    return f"/api/v1/runs/{run.pk}/steps/{index}/replay/"


def test_an_operator_replays_a_step_and_reads_the_answers_as_json(launch, script, otto):
    run = launch("hi", models=[script({"content": "hello"})])
    calm = script({"content": "Hello there.", "usage": {"prompt_tokens": 80, "completion_tokens": 4, "cost": 0.002}})
    eager = script({"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "ORD-1001"}}],
                    "usage": {"prompt_tokens": 80, "completion_tokens": 12}})
    answer = api(otto).post(url(run), {"models": [calm, eager, calm]}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    record = StepReplay.objects.get()
    assert {k: body[k] for k in ("replay_id", "run_id", "step", "tokens_in", "tokens_out")} == {
        "replay_id": record.pk, "run_id": run.pk, "step": 1, "tokens_in": 160, "tokens_out": 16}
    assert body["cost_usd"] == record.cost_usd >= 0.002  # the first's reported cost, the second's priced
    assert [a["model"] for a in body["answers"]] == [calm, eager]  # a repeat is asked once
    assert body["answers"][0]["ok"] and body["answers"][0]["content"] == "Hello there."
    assert body["answers"][1]["tool_calls"] == [{"name": "cancel_order", "arguments": '{"order_id": "ORD-1001"}'}]
    entry = AuditEntry.objects.get(kind="step replay")
    assert (entry.actor_name, entry.via, entry.after["models"]) == ("otto_a", "api", [calm, eager])


def test_a_reached_budget_is_a_409_in_words_and_bad_requests_are_refused(launch, script, otto):
    run = launch("hi", models=[script({"content": "hello", "usage": {"prompt_tokens": 50, "completion_tokens": 5}})])
    client = api(otto)
    assert client.post(url(run, 9), {"models": ["m"]}, format="json").status_code == 404
    assert client.post(f"/api/v1/runs/{run.pk + 100}/steps/1/replay/", {"models": ["m"]}, format="json").status_code == 404
    six = client.post(url(run), {"models": list("abcdef")}, format="json")
    assert six.status_code == 400 and six.json()["detail"] == "models: At most 5 models at once."
    stray = client.post(url(run), {"models": ["m"], "critcal": True}, format="json")
    assert stray.status_code == 400 and "critcal" in stray.json()["detail"]

    Budget.objects.create(name="Team", measure="cost", period="month", limit=0,
                          project_id=Agent.objects.get(name="demo").project_id)
    never = script({"content": "never asked"})
    refused = client.post(url(run), {"models": [never]}, format="json")
    assert refused.status_code == 409
    assert refused.json()["detail"].startswith("Budget reached: Team, $0 a month. A replay spends from it too, "
                                               "so no model was asked")
    assert script.requests(never) == [] and not StepReplay.objects.exists()


def test_who_may_replay_over_the_api(launch, script, demo_data):
    run = launch("hi", models=[script({"content": "hello"})])
    model = script({"content": "never asked", "repeat": True})
    body = {"models": [model]}
    anonymous = api().post(url(run), body, format="json")
    assert anonymous.status_code == 401
    viewer = api(make_user("vera_a", "viewers")).post(url(run), body, format="json")
    assert viewer.status_code == 403  # a replay spends tokens, as a launch does
    outsider = api(member("olga_beta", project("Beta"), "operators")).post(url(run), body, format="json")
    assert outsider.status_code == 404  # another project's run does not exist for them
    assert script.requests(model) == [] and not StepReplay.objects.exists()


def test_the_schema_documents_the_endpoint(demo_data, otto):
    schema = api(otto).get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/runs/{id}/steps/{index}/replay/"]["post"]
    assert operation["operationId"] == "runs_step_replay"
    assert {"200", "400", "401", "403", "404", "409", "429"} <= set(operation["responses"])
