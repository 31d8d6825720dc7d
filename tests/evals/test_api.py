"""Datasets, cases and experiments over the REST API: cases written by hand and made from a run,
export and import as JSONL, an experiment started, read once driven, compared with another and
cancelled; bad input answered by field; who may do what."""
import json

import pytest
from rest_framework.test import APIClient

from apikit.strict import UNKNOWN_FIELD
from evals.models import Case, Dataset, Experiment
from runs.lifecycle.agents import agent_draft_save
from runs.models import Agent, Run
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api
from toolsapp.models import Tool

WEATHER = "What's the weather in Lagos and London?"
TICKET = "Create a ticket about the login page being slow"
WEATHER_CHECKS = [{"kind": "stop_reason", "in": ["final_answer"]}, {"kind": "no_destructive_call"},
                  {"kind": "tool_called", "tool": "get_weather"}]


def client_for(name: str, group: str) -> APIClient:
    return api(make_user(name, group))


@pytest.fixture
def operator(demo_data):
    return client_for("opal", "operators")


@pytest.fixture
def viewer(demo_data):
    return client_for("vic", "viewers")


@pytest.fixture
def admin(demo_data):
    return client_for("adele", "admins")


def created(response) -> dict:
    assert response.status_code == 201, response.content.decode()[:2000]
    return response.json()


def new_dataset(client, name="weather", **extra) -> dict:
    return created(client.post("/api/v1/datasets/", {"name": name, **extra}, format="json"))


def new_case(client, dataset_id: int, **body) -> dict:
    return created(client.post(f"/api/v1/datasets/{dataset_id}/cases/", body, format="json"))


def start(client, **body) -> dict:
    return created(client.post("/api/v1/experiments/", body, format="json"))


def test_a_dataset_and_its_cases_written_by_hand(operator):
    dataset = new_dataset(operator, description="Cities")
    assert (dataset["name"], dataset["description"], dataset["case_count"], dataset["created_by"]) == (
        "weather", "Cities", 0, "opal")
    case = new_case(operator, dataset["id"], task=WEATHER, customer="acme", expectations=WEATHER_CHECKS)
    assert (case["name"], case["task"], case["customer"], case["expectations"]) == (WEATHER, WEATHER, "acme",
                                                                                   WEATHER_CHECKS)
    listed = operator.get("/api/v1/datasets/").json()
    assert [(d["name"], d["case_count"], d["experiment_count"]) for d in listed["results"]] == [("weather", 1, 0)]
    url = f"/api/v1/datasets/{dataset['id']}/cases/{case['id']}/"
    renamed = operator.patch(url, {"name": "two cities", "expectations": WEATHER_CHECKS[:1]}, format="json")
    assert renamed.status_code == 200
    assert (renamed.json()["name"], renamed.json()["task"], renamed.json()["expectations"]) == (
        "two cities", WEATHER, WEATHER_CHECKS[:1])
    assert operator.get(url).json()["name"] == "two cities"
    described = operator.patch(f"/api/v1/datasets/{dataset['id']}/", {"description": "Two cities"}, format="json")
    assert described.status_code == 200 and described.json()["description"] == "Two cities"
    # A case read and sent back whole is taken (its read-only fields are known).
    assert operator.patch(url, operator.get(url).json(), format="json").status_code == 200
    assert operator.delete(url).status_code == 204
    assert operator.get(url).status_code == 404
    assert operator.get(f"/api/v1/datasets/{dataset['id']}/cases/").json()["results"] == []


def test_a_case_from_a_run_gets_its_checks_prefilled_or_the_ones_sent(launch, operator):
    run = launch(WEATHER)
    dataset = new_dataset(operator)
    url = f"/api/v1/datasets/{dataset['id']}/cases/from-run/"
    prefilled = created(operator.post(url, {"run": run.pk}, format="json"))
    assert prefilled["name"].startswith(f"Run {run.pk}: ") and prefilled["task"] == WEATHER
    assert prefilled["source_run"] == run.pk
    assert {"kind": "tool_called", "tool": "get_weather",
            "conditions": [{"path": "$.city", "op": "eq", "value": "Lagos"}]} in prefilled["expectations"]
    assert {"kind": "stop_reason", "in": ["final_answer"]} in prefilled["expectations"]
    own = created(operator.post(url, {"run": run.pk, "name": "lagos only", "with_conversation": False,
                                      "expectations": [{"kind": "answer_contains", "text": "Lagos"}]}, format="json"))
    assert (own["name"], own["expectations"], own["messages"]) == (
        "lagos only", [{"kind": "answer_contains", "text": "Lagos"}], [])
    too_far = operator.post(url, {"run": run.pk, "step": 99}, format="json")
    assert too_far.status_code == 400 and "choose one from 1 to" in too_far.json()["errors"]["step"][0]
    missing = operator.post(url, {"run": run.pk + 1000}, format="json")
    assert missing.status_code == 400 and missing.json()["errors"] == {"run": [f"No run {run.pk + 1000}."]}
    assert Case.objects.filter(dataset_id=dataset["id"]).count() == 2


def test_export_then_import_gives_the_same_cases(launch, operator):
    run = launch(WEATHER)
    source = new_dataset(operator, name="source")
    created(operator.post(f"/api/v1/datasets/{source['id']}/cases/from-run/", {"run": run.pk}, format="json"))
    new_case(operator, source["id"], task=TICKET, name="ticket", customer="acme")
    export = operator.get(f"/api/v1/datasets/{source['id']}/export.jsonl")
    assert export.status_code == 200 and export["Content-Type"].startswith("application/x-ndjson")
    assert "attachment" in export["Content-Disposition"]
    text = b"".join(export.streaming_content).decode()
    assert len(text.splitlines()) == 2
    copy = new_dataset(operator, name="copy")
    imported = operator.post(f"/api/v1/datasets/{copy['id']}/import/", text, content_type="application/x-ndjson")
    assert created(imported)["detail"] == "2 cases imported."

    def fields(dataset_id):
        rows = operator.get(f"/api/v1/datasets/{dataset_id}/cases/").json()["results"]
        return [{k: row[k] for k in ("name", "task", "customer", "messages", "expectations", "source_run",
                                     "source_step")} for row in rows]

    assert fields(copy["id"]) == fields(source["id"]) and len(fields(copy["id"])) == 2
    # The same JSONL inside a JSON body.
    again = new_dataset(operator, name="again")
    created(operator.post(f"/api/v1/datasets/{again['id']}/import/", {"jsonl": text}, format="json"))
    assert fields(again["id"]) == fields(source["id"])


def test_a_case_holding_unicode_line_separators_survives_export_then_import(operator):
    # U+2028, U+2029 and U+0085 are written as they are inside a JSON string (valid JSON): a line
    # of the JSONL is what ends at a line feed, not at every character Python calls a line break.
    task = "Cancel ORD-1001\u2028then ORD-1002\u2029and say so\u0085thanks"
    source = new_dataset(operator, name="separators")
    new_case(operator, source["id"], task=task, name="seps")
    text = b"".join(operator.get(f"/api/v1/datasets/{source['id']}/export.jsonl").streaming_content).decode()
    assert "\u2028" in text and text.count("\n") == 1
    for name, body, kind in (("copy", text, "application/x-ndjson"), ("again", {"jsonl": text}, None)):
        copy = new_dataset(operator, name=name)
        url = f"/api/v1/datasets/{copy['id']}/import/"
        imported = operator.post(url, body, content_type=kind) if kind else operator.post(url, body, format="json")
        assert created(imported)["detail"] == "1 case imported."
        [case] = operator.get(f"/api/v1/datasets/{copy['id']}/cases/").json()["results"]
        assert case["task"] == task
    # A line really cut in two says where, once.
    cut = operator.post(url, text.replace("\u2028", "\n", 1), content_type="application/x-ndjson")
    assert cut.status_code == 400 and "Line 1: not JSON: unterminated string starting at column 26." in cut.json()["errors"]["jsonl"]


def test_bad_input_is_answered_by_field_and_changes_nothing(operator):
    dataset = new_dataset(operator)
    cases = f"/api/v1/datasets/{dataset['id']}/cases/"
    no_tool = operator.post(cases, {"task": "do it", "expectations": [{"kind": "tool_called"}]}, format="json")
    assert no_tool.status_code == 400
    assert no_tool.json()["errors"] == {"expectations": ["Expectation 1: a tool name is needed."]}
    assert no_tool.json()["detail"] == "expectations: Expectation 1: a tool name is needed."
    odd = operator.post(cases, {"task": "do it", "expectations": [{"kind": "at_most", "measure": [], "value": 3}]},
                        format="json")
    assert odd.status_code == 400 and "measure must be one of" in odd.json()["errors"]["expectations"][0]
    no_task = operator.post(cases, {"name": "nothing to do"}, format="json")
    assert no_task.status_code == 400 and list(no_task.json()["errors"]) == ["task"]
    misspelt = operator.post(cases, {"task": "do it", "expectation": []}, format="json")
    assert misspelt.status_code == 400 and misspelt.json()["errors"] == {"expectation": [UNKNOWN_FIELD]}
    bad_customer = operator.post(cases, {"task": "do it", "customer": " acme"}, format="json")
    assert bad_customer.status_code == 400 and "spaces" in bad_customer.json()["errors"]["customer"][0]
    taken = operator.post("/api/v1/datasets/", {"name": "weather"}, format="json")
    assert taken.status_code == 400 and taken.json()["errors"] == {"name": ["A dataset named 'weather' exists already."]}
    lines = "\n".join([json.dumps({"task": "fine"}), "{not json", json.dumps({"name": "no task"}),
                       json.dumps({"task": "x", "expectations": [{"kind": "judge"}]})])
    imported = operator.post(f"/api/v1/datasets/{dataset['id']}/import/", lines, content_type="application/x-ndjson")
    assert imported.status_code == 400
    problems = imported.json()["errors"]["jsonl"]
    assert problems[0].startswith("Line 2: not JSON")
    assert "Line 3, task: The task is needed." in problems
    assert any(p.startswith("Line 4, expectations: Expectation 1: rubric must be text") for p in problems)
    empty = operator.post(f"/api/v1/datasets/{dataset['id']}/import/", {"jsonl": ""}, format="json")
    assert empty.status_code == 400 and empty.json()["errors"] == {"jsonl": ["No cases: one JSON object per line."]}
    nothing = operator.post("/api/v1/experiments/", {"dataset": dataset["id"], "agent": "demo"}, format="json")
    assert nothing.status_code == 400 and nothing.json()["detail"] == "Dataset weather has no cases."
    nobody = operator.post("/api/v1/experiments/", {"dataset": dataset["id"], "agent": "nobody"}, format="json")
    assert nobody.status_code == 400 and nobody.json()["errors"] == {"agent": ["No agent 'nobody'."]}
    assert operator.get("/api/v1/datasets/999999/export.jsonl").json() == {"detail": "No such dataset."}
    assert not Case.objects.exists() and not Experiment.objects.exists() and Dataset.objects.count() == 1


def test_a_raw_nul_in_an_imported_line_is_named_with_its_line_and_column(operator):
    dataset = new_dataset(operator)
    lines = [json.dumps({"task": "fine"}), "", '{"task": "ab\x00cd"}', '{"task": "tab\there"}']
    imported = operator.post(f"/api/v1/datasets/{dataset['id']}/import/", "\n".join(lines),
                             content_type="application/x-ndjson")
    assert imported.status_code == 400
    assert imported.json()["errors"]["jsonl"] == [
        "Line 3: not JSON: invalid control character NUL (U+0000) at column 13 (inside a string, write it as \\u0000).",
        "Line 4: not JSON: invalid control character tab (U+0009) at column 14 (inside a string, write it as \\u0009).",
    ]
    wrapped = operator.post(f"/api/v1/datasets/{dataset['id']}/import/", {"jsonl": "\n".join(lines)}, format="json")
    assert wrapped.json()["errors"] == imported.json()["errors"]
    assert not Case.objects.exists()


def test_who_may_do_what(launch, operator, viewer, admin):
    run = launch(WEATHER)
    dataset = new_dataset(operator)
    case = new_case(operator, dataset["id"], task=WEATHER, expectations=WEATHER_CHECKS)
    d = dataset["id"]
    anonymous = APIClient()
    assert [anonymous.get(path).status_code for path in ("/api/v1/datasets/", "/api/v1/experiments/")] == [401, 401]
    assert anonymous.post("/api/v1/datasets/", {"name": "mine"}, format="json").status_code == 401
    for path in ("/api/v1/datasets/", f"/api/v1/datasets/{d}/", f"/api/v1/datasets/{d}/cases/",
                 f"/api/v1/datasets/{d}/cases/{case['id']}/", f"/api/v1/datasets/{d}/export.jsonl",
                 "/api/v1/experiments/"):
        assert viewer.get(path).status_code == 200, path
    refused = [
        viewer.post("/api/v1/datasets/", {"name": "mine"}, format="json"),
        viewer.patch(f"/api/v1/datasets/{d}/", {"description": "x"}, format="json"),
        viewer.post(f"/api/v1/datasets/{d}/cases/", {"task": "x"}, format="json"),
        viewer.patch(f"/api/v1/datasets/{d}/cases/{case['id']}/", {"task": "x"}, format="json"),
        viewer.delete(f"/api/v1/datasets/{d}/cases/{case['id']}/"),
        viewer.post(f"/api/v1/datasets/{d}/cases/from-run/", {"run": run.pk}, format="json"),
        viewer.post(f"/api/v1/datasets/{d}/import/", {"jsonl": '{"task": "x"}'}, format="json"),
        viewer.post("/api/v1/experiments/", {"dataset": d, "agent": "demo"}, format="json"),
        operator.delete(f"/api/v1/datasets/{d}/"),  # deleting a dataset is for admins
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert Dataset.objects.count() == 1 and Case.objects.get().task == WEATHER and not Experiment.objects.exists()
    # An operator runs experiments; a viewer reads them but cannot cancel one.
    experiment = start(operator, dataset=d, agent="demo")
    assert viewer.get(f"/api/v1/experiments/{experiment['id']}/").status_code == 200
    assert viewer.post(f"/api/v1/experiments/{experiment['id']}/cancel/").status_code == 403
    # An admin deletes a dataset, but not one whose experiments need it.
    kept = admin.delete(f"/api/v1/datasets/{d}/")
    assert kept.status_code == 409
    assert kept.json()["detail"] == (
        "Dataset weather has an experiment, whose scorecard needs it: it cannot be deleted.")
    spare = new_dataset(operator, name="spare")
    assert admin.delete(f"/api/v1/datasets/{spare['id']}/").status_code == 204
    assert list(Dataset.objects.values_list("name", flat=True)) == ["weather"]


def test_an_experiment_started_then_read_once_its_cases_ran(operator, viewer, drive):
    dataset = new_dataset(operator)
    case = new_case(operator, dataset["id"], task=WEATHER, name="two cities", customer="acme",
                    expectations=WEATHER_CHECKS)
    agent = Agent.objects.get(name="demo")
    started = operator.post("/api/v1/experiments/", {"dataset": dataset["id"], "agent": agent.pk}, format="json")
    body = created(started)
    assert started["Location"].endswith(f"/api/v1/experiments/{body['id']}/")
    assert (body["status"], body["cases_total"], body["cases_done"], body["agent_name"]) == ("running", 1, 0, "demo")
    assert body["label"] == f"v{agent.version} (current)" and body["pass_rate"] is None
    assert [(r["case_name"], r["status"], r["passed"]) for r in body["results"]] == [("two cities", "running", None)]
    drive(Experiment.objects.get(pk=body["id"]))
    read = viewer.get(f"/api/v1/experiments/{body['id']}/").json()
    assert (read["status"], read["cases_done"], read["cases_passed"], read["cases_failed"], read["pass_rate"]) == (
        "finished", 1, 1, 0, 1.0)
    result = read["results"][0]
    assert (result["case"], result["passed"], result["stop_reason"]) == (case["id"], True, "final_answer")
    assert [c["label"] for c in result["checks"] if c["ok"]] == [
        "the run stopped with Final answer", "no destructive call was requested", "get_weather was requested"]
    run = Run.objects.get(pk=result["run"])
    assert run.experiment and run.task == WEATHER and run.customer == "acme"
    iterations = read["distributions"]["iterations"]
    assert (iterations["count"], iterations["min"], iterations["max"]) == (1, run.iterations, run.iterations)
    assert read["distributions"]["tokens"]["median"] == run.total_tokens
    listed = viewer.get(f"/api/v1/experiments/?dataset={dataset['id']}").json()["results"]
    assert [(e["id"], e["status"], e["cases_passed"]) for e in listed] == [(body["id"], "finished", 1)]
    assert viewer.get("/api/v1/experiments/?dataset=999999").json()["results"] == []
    assert viewer.get("/api/v1/experiments/?dataset=x").json()["errors"] == {"dataset": ["A dataset's id."]}
    assert new_dataset(operator, name="other")["experiment_count"] == 0
    assert operator.get(f"/api/v1/datasets/{dataset['id']}/").json()["experiment_count"] == 1


def test_a_draft_without_the_weather_tool_shows_its_regression_first(operator, drive):
    dataset = new_dataset(operator, name="mixed")
    new_case(operator, dataset["id"], task=WEATHER, customer="acme", expectations=WEATHER_CHECKS)
    new_case(operator, dataset["id"], task=TICKET, customer="acme")
    agent = Agent.objects.get(name="demo")
    current = drive(Experiment.objects.get(pk=start(operator, dataset=dataset["id"], agent="demo")["id"]))
    agent_draft_save(agent=agent, data={"tools": list(Tool.objects.filter(
        name__in=["search_tickets", "create_ticket", "get_ticket", "lookup_order", "cancel_order"]))})
    draft = start(operator, dataset=dataset["id"], agent="demo", draft=True, baseline=current.pk)
    assert draft["label"].startswith("draft v") and draft["draft"] and draft["baseline"] == current.pk
    drive(Experiment.objects.get(pk=draft["id"]))
    read = operator.get(f"/api/v1/experiments/{draft['id']}/").json()
    assert (read["cases_passed"], read["cases_failed"], read["compared_with"]) == (1, 1, current.pk)
    failed = next(r for r in read["results"] if not r["passed"])
    assert [c["seen"] for c in failed["checks"] if not c["ok"]] == ["no call of get_weather"]
    comparison = operator.get(f"/api/v1/experiments/{draft['id']}/compare/{current.pk}/").json()
    assert comparison["counts"] == {"regressed": 1, "fixed": 0, "still_failing": 0, "still_passing": 1,
                                    "only_in_one": 0, "not_scored_yet": 0}
    assert [(p["change"], p["before_passed"], p["after_passed"]) for p in comparison["pairs"]] == [
        ("regressed", True, False), ("still passing", True, True)]
    regressed = comparison["pairs"][0]
    assert regressed["case_name"] == WEATHER
    assert Run.objects.get(pk=regressed["after_run"]).case_result.experiment_id == draft["id"]
    assert Run.objects.get(pk=regressed["before_run"]).case_result.experiment_id == current.pk
    assert (comparison["before"]["id"], comparison["after"]["id"]) == (current.pk, draft["id"])
    # Experiments of two datasets do not compare.
    other = new_dataset(operator, name="other")
    new_case(operator, other["id"], task=TICKET)
    elsewhere = start(operator, dataset=other["id"], agent="demo")
    refused = operator.get(f"/api/v1/experiments/{elsewhere['id']}/compare/{current.pk}/")
    assert refused.status_code == 400 and "only experiments of one dataset compare" in refused.json()["detail"]
    wrong_baseline = operator.post("/api/v1/experiments/", {"dataset": other["id"], "agent": "demo",
                                                           "baseline": current.pk}, format="json")
    assert wrong_baseline.status_code == 400 and "another dataset" in wrong_baseline.json()["errors"]["baseline"][0]


def test_cancelling_an_experiment_stops_its_runs(operator):
    dataset = new_dataset(operator)
    for task in (WEATHER, TICKET):
        new_case(operator, dataset["id"], task=task)
    experiment = start(operator, dataset=dataset["id"], agent="demo", max_iterations=3, models=["demo"])
    assert experiment["overrides"] == {"max_iterations": 3, "models": ["demo"]}
    url = f"/api/v1/experiments/{experiment['id']}/cancel/"
    with_body = operator.post(url, {"force": True}, format="json")
    assert with_body.status_code == 400 and with_body.json()["errors"] == {"force": [UNKNOWN_FIELD]}
    cancelled = operator.post(url)
    assert cancelled.status_code == 200
    assert cancelled.json()["detail"].startswith(f"Experiment {experiment['id']} was cancelled")
    assert cancelled.json()["experiment"]["status"] == "cancelled"
    runs = Run.objects.filter(case_result__experiment_id=experiment["id"])
    assert runs.count() == 2 and all(run.status == Run.Status.CANCELLED for run in runs)
    assert operator.get(f"/api/v1/experiments/{experiment['id']}/").json()["status"] == "cancelled"
    again = operator.post(url)
    assert again.status_code == 409 and again.json()["detail"] == f"Experiment {experiment['id']} is cancelled already."


def test_an_operator_cannot_raise_the_versions_limits_for_an_experiment(demo_data):
    from evals.datasets import case_add, dataset_create

    dataset = dataset_create(name="limits")
    case_add(dataset=dataset, data={"task": "hello"})
    agent = Agent.objects.get(name="demo")
    client = client_for("ollie_limits", "operators")
    answer = client.post("/api/v1/experiments/", {"dataset": dataset.pk, "agent": agent.pk,
                                                  "max_cost_usd": agent.max_cost_usd * 100}, format="json")
    assert answer.status_code == 400 and "The experiment's max_cost_usd may be at most the version's 1;" in str(answer.json())
    lower = client.post("/api/v1/experiments/", {"dataset": dataset.pk, "agent": agent.pk, "max_iterations": 2},
                        format="json")
    assert lower.status_code == 201, lower.json()
    assert Experiment.objects.count() == 1
