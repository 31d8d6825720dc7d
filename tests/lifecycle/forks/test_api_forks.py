"""Forks over the REST API: who may fork, what a refusal says, the new run's links to its family,
and a fork compared with its parent."""
import pytest

from runs.engine.loop import run_advance
from runs.lifecycle import forks
from runs.models import Run
from tests.engine.loop_contract.support import call, calls
from tests.support.timeline_replay import mismatches
from tests.web.api.test_api import api


def weather(city, call_id, n):
    return {**calls(call("get_weather", {"city": city}, call_id)),
            "usage": {"prompt_tokens": 100 * n, "completion_tokens": n, "cost": 0.001 * n}}


@pytest.fixture
def dispatched(monkeypatch):
    sent = []
    monkeypatch.setattr(forks, "run_dispatch", lambda run_id: sent.append(run_id))
    return sent


@pytest.fixture
def parent(launch, script):
    """A finished three-step run (two weather calls, then an answer); its model then answers a fork."""
    model = script(weather("Lagos", "w1", 1), weather("London", "w2", 2), {"content": "Warm and wet."},
                   weather("Paris", "w3", 3), {"content": "Fork: warm, wet and mild.", "usage": {
                       "prompt_tokens": 400, "completion_tokens": 4, "cost": 0.004}})
    run = launch("Weather in Lagos and London", models=[model], summarize_on_stop=False)
    assert run.status == Run.Status.SUCCEEDED
    return run


@pytest.fixture(autouse=True)
def _timeline_equals_rows(demo_data):
    yield
    assert [p for run_id in Run.objects.values_list("pk", flat=True) for p in mismatches(run_id)] == []


def fork_url(run) -> str:
    return f"/api/v1/runs/{run.pk}/fork/"


def test_an_operator_forks_and_a_viewer_may_not(parent, alice, viewer, dispatched):
    body = {"step": 2, "edit": {"tool_result": {"call_id": "w2", "content": '{"ok":true,"result":"snow"}'}}}
    refused = api(viewer).post(fork_url(parent), body, format="json")
    assert refused.status_code == 403 and Run.objects.count() == 1

    response = api(alice).post(fork_url(parent), body, format="json")

    assert response.status_code == 201, response.json()
    fork = response.json()
    assert response["Location"].endswith(f"/api/v1/runs/{fork['run_id']}/")
    assert (fork["forked_from"], fork["forked_at_step"], fork["status"], fork["iterations"]) == (
        parent.pk, 2, "queued", 2)
    assert [s["index"] for s in fork["steps"]] == [1, 2]
    assert fork["steps"][1]["calls"][0]["result_preview"] == '{"ok":true,"result":"snow"}'
    assert fork["family"]["parent"]["run_id"] == parent.pk and fork["family"]["parent"]["relation"] == "fork"
    assert dispatched == [fork["run_id"]]
    family = api(viewer).get(f"/api/v1/runs/{parent.pk}/").json()["family"]
    assert [(f["run_id"], f["step"]) for f in family["forks"]] == [(fork["run_id"], 2)]
    assert family["parent"] is None and family["reruns"] == []


def test_forks_that_do_not_fit_get_a_400_in_words(parent, alice, dispatched):
    client = api(alice)
    cases = [
        ({"step": 7}, f"Run {parent.pk} has no step 7; it has 3 steps so far."),
        ({"step": 2, "edit": {"tool_result": {"call_id": "nope", "content": "x"}}},
         "Step 2 has no call with id 'nope'; its calls are 'w2'."),
        ({"step": 1, "edit": {"answer": "Sunny everywhere."}},
         "The model's answer at step 1 called tools: only an answer without calls can be replaced. "
         "Edit one of the results instead, or fork from a step without calls."),
        ({"step": 3, "edit": {"answer": "x", "message": "y"}},
         'edit: An edit is one of {"tool_result": {"call_id": "...", "content": "..."}}, {"answer": "..."} '
         'or {"message": "..."}.'),
        ({"step": "two"}, "step: A valid integer is required."),
    ]
    for body, words in cases:
        response = client.post(fork_url(parent), body, format="json")
        assert (response.status_code, response.json()["detail"]) == (400, words)
    assert client.post("/api/v1/runs/999999/fork/", {"step": 1}, format="json").status_code == 404
    assert Run.objects.count() == 1 and dispatched == []


def test_a_fork_compared_with_its_parent(parent, alice, viewer, dispatched):
    created = api(alice).post(fork_url(parent), {"step": 2, "edit": {"message": "Add Paris."}}, format="json")
    fork_id = created.json()["run_id"]
    run_advance(run_id=fork_id)

    compared = api(viewer).get(f"/api/v1/runs/{fork_id}/compare/")

    assert compared.status_code == 200
    data = compared.json()
    assert (data["fork_step"], data["edit"]) == (2, {"edit": "message", "by": "alice"})
    assert [(r["index"], r["shared"], r["parent"] is not None, r["fork"] is not None) for r in data["rows"]] == [
        (2, True, True, True), (3, False, True, True), (4, False, False, True)]
    assert [c["tool"] for c in data["rows"][2]["fork"]["calls"]] == []
    assert data["rows"][1]["fork"]["calls"][0]["tool"] == "get_weather"
    assert data["parent"]["stop_reason"] == data["fork"]["stop_reason"] == "final_answer"
    assert (data["parent"]["steps_since_fork"], data["fork"]["steps_since_fork"]) == (1, 2)
    assert data["fork"]["since_fork"]["tokens_in"] == 300 + 400
    assert data["fork"]["since_fork"]["cost_usd"] == pytest.approx(0.007)
    assert data["fork"]["run_totals"]["tokens_in"] == 100 + 200 + 300 + 400

    not_a_fork = api(viewer).get(f"/api/v1/runs/{parent.pk}/compare/")
    assert (not_a_fork.status_code, not_a_fork.json()["detail"]) == (
        400, f"Run {parent.pk} is not a fork: it has no parent to compare with.")
    assert api(viewer).get("/api/v1/runs/999999/compare/").status_code == 404


def test_a_fork_keeps_to_what_the_agent_allows_now(parent, alice, dispatched):
    from runs.engine.loop import run_advance
    from toolsapp.models import Tool

    agent = parent.agent
    agent.tools.remove(Tool.objects.get(name="get_weather"))  # an admin takes the tool away and lowers the cap
    agent.max_iterations = 2
    agent.save()
    client = api(alice)

    refused = client.post(fork_url(parent), {"step": 2}, format="json")
    assert (refused.status_code, refused.json()["detail"]) == (400, (
        f"You may not fork run {parent.pk} from step 2: the conversation up to that step already used 2 "
        "iterations, and agent demo now allows at most 2 (max iterations). Fork from an earlier step, or ask an "
        "admin to raise the agent's limit."))
    assert Run.objects.count() == 1 and dispatched == []

    created = client.post(fork_url(parent), {"step": 1}, format="json")
    assert created.status_code == 201, created.json()
    fork = Run.objects.get(pk=created.json()["run_id"])
    assert "get_weather" not in fork.config["tools"] and fork.config["max_iterations"] == 2
    run_advance(run_id=fork.pk)
    fork.refresh_from_db()
    # The model calls London's weather again at the fork's last iteration: the cap holds, nothing runs.
    assert (fork.status, fork.stop_reason, fork.iterations) == (Run.Status.FAILED, "iteration_limit", 2)
    assert [c["status"] for c in client.get(f"/api/v1/runs/{fork.pk}/").json()["steps"][1]["calls"]] == ["skipped"]
