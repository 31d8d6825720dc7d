"""The dashboard's datasets and experiments: adding a case from a run (its checks prefilled and
edited), writing one by hand, starting an experiment, reading its scorecard and comparing two;
who may do what; bad input answered at its field."""
import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from evals.models import Case, Dataset, Experiment
from runs.lifecycle.agents import agent_draft_save
from runs.models import Agent, Run
from tests.support.approval_fixtures import make_user
from toolsapp.models import Tool


def words(html: str) -> str:
    """A page's text as a person reads it: tags gone, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split()).replace(" .", ".")


def client_for(name: str, group: str) -> Client:
    client = Client()
    client.force_login(make_user(name, group))
    return client


@pytest.fixture
def operator(demo_data):
    return client_for("otto_e", "operators")


@pytest.fixture
def viewer(demo_data):
    return client_for("vera_e", "viewers")


def test_a_case_from_a_run_with_edited_checks_then_an_experiment_and_its_scorecard(launch, operator, drive):
    run = launch("What's the weather in Lagos and London?")
    page = operator.get(reverse("run_detail", args=[run.pk]))
    assert reverse("run_add_to_dataset", args=[run.pk]) in page.content.decode()
    form = operator.get(reverse("run_add_to_dataset", args=[run.pk]))
    prefilled = form.context["form"].initial["expectations"]
    assert {"kind": "tool_called", "tool": "get_weather",
            "conditions": [{"path": "$.city", "op": "eq", "value": "Lagos"}]} in prefilled
    edited = [e for e in prefilled if e["kind"] != "answer_contains"] + [{"kind": "answer_contains", "text": "Lagos"}]
    answer = operator.post(reverse("run_add_to_dataset", args=[run.pk]), {
        "new_dataset": "weather", "name": "weather in two cities", "expectations": json.dumps(edited)})
    dataset = Dataset.objects.get(name="weather")
    assert answer.status_code == 302 and answer.url == reverse("dataset_detail", args=[dataset.pk])
    case = Case.objects.get(dataset=dataset)
    assert (case.name, case.task, case.source_run_id, case.expectations) == (
        "weather in two cities", run.task, run.pk, edited)
    started = operator.post(reverse("dataset_detail", args=[dataset.pk]), {
        "action": "experiment", "experiment-agent": run.agent_id, "experiment-which": "current"})
    experiment = Experiment.objects.get(dataset=dataset)
    assert started.status_code == 302 and started.url == reverse("experiment_detail", args=[experiment.pk])
    drive(experiment)
    scorecard = operator.get(reverse("experiment_detail", args=[experiment.pk])).content.decode()
    assert "1 of 1 cases done" in words(scorecard) and "passed" in scorecard
    assert "the answer contains &#x27;Lagos&#x27;" in scorecard
    assert reverse("run_detail", args=[experiment.results.get().run_id]) in scorecard
    progress = operator.get(reverse("experiment_progress", args=[experiment.pk])).json()
    assert progress == {"status": "finished", "cases_total": 1, "cases_done": 1, "cases_passed": 1, "cases_failed": 0}
    # The experiment's run says what it is, and the history hides it unless asked.
    case_run = experiment.results.get().run
    run_page = operator.get(reverse("run_detail", args=[case_run.pk])).content.decode()
    assert "nothing real changed" in run_page and reverse("experiment_detail", args=[experiment.pk]) in run_page
    history = operator.get(reverse("run_list")).content.decode()
    assert f'href="/runs/{run.pk}/"' in history and f'href="/runs/{case_run.pk}/"' not in history
    shown = operator.get(reverse("run_list") + "?experiments=only").content.decode()
    assert f'href="/runs/{case_run.pk}/"' in shown and f'href="/runs/{run.pk}/"' not in shown


def test_comparing_a_draft_that_lost_a_tool_shows_the_regression_first(launch, operator, drive):
    agent = Agent.objects.get(name="demo")
    dataset = Dataset.objects.create(name="mixed")
    for task in ("What's the weather in Lagos and London?", "Create a ticket about the login page being slow"):
        operator.post(reverse("dataset_detail", args=[dataset.pk]), {
            "action": "case", "case-task": task, "case-customer": "acme",
            "case-expectations": json.dumps([{"kind": "stop_reason", "in": ["final_answer"]},
                                             {"kind": "no_destructive_call"},
                                             {"kind": "tool_called", "tool": "get_weather"}] if "weather" in task else []),
        })
    assert dataset.cases.count() == 2
    current = drive(Experiment.objects.get(pk=_start(operator, dataset, agent, "current")))
    agent_draft_save(agent=agent, data={"tools": list(Tool.objects.filter(
        name__in=["search_tickets", "create_ticket", "get_ticket", "lookup_order", "cancel_order"]))})
    draft = drive(Experiment.objects.get(pk=_start(operator, dataset, agent, "draft")))
    assert (current.cases_passed, draft.cases_passed) == (2, 1)
    page = operator.get(reverse("experiment_compare", args=[draft.pk, current.pk]))
    pairs = page.context["comparison"].pairs
    assert [p.change for p in pairs] == ["regressed", "still passing"]
    assert pairs[0].case_name.startswith("What's the weather")
    text = page.content.decode()
    assert text.index("regressed") < text.index("still passing")
    side = operator.get(reverse("case_compare", args=[draft.pk, current.pk, pairs[0].after.case_id]))
    assert side.status_code == 200 and "get_weather" in side.content.decode()
    # The two final answers differ: the words each lacks are marked, struck on the earlier side.
    assert side.context["answers_differ"]
    finals = side.content.decode().split('class="compare-final"')[1:]
    assert len(finals) == 2
    assert '<del class="change-removed">' in finals[0] and '<ins class="change-added">' in finals[1]
    # The draft's experiment offers the comparison with the current version's.
    assert reverse("experiment_compare", args=[draft.pk, current.pk]) in operator.get(
        reverse("experiment_detail", args=[draft.pk])).content.decode()


def _start(client, dataset, agent, which: str) -> int:
    answer = client.post(reverse("dataset_detail", args=[dataset.pk]), {
        "action": "experiment", "experiment-agent": agent.pk, "experiment-which": which})
    assert answer.status_code == 302, answer.content.decode()[:2000]
    return int(answer.url.rstrip("/").rsplit("/", 1)[1])


def test_bad_input_is_answered_at_its_field_and_nothing_is_lost(operator, demo_data):
    dataset = Dataset.objects.create(name="d")
    answer = operator.post(reverse("dataset_detail", args=[dataset.pk]), {
        "action": "case", "case-task": "do it", "case-expectations": '[{"kind": "tool_called"}]'})
    assert answer.status_code == 200
    assert "Expectation 1: a tool name is needed." in answer.content.decode()
    assert answer.context["case_form"]["task"].value() == "do it"  # what was typed stays
    not_json = operator.post(reverse("dataset_detail", args=[dataset.pk]), {
        "action": "case", "case-task": "do it", "case-expectations": "[{"})
    assert "Not JSON" in not_json.content.decode()
    no_draft = operator.post(reverse("dataset_detail", args=[dataset.pk]), {
        "action": "experiment", "experiment-agent": Agent.objects.get(name="demo").pk, "experiment-which": "draft"})
    assert "has no cases" in no_draft.content.decode()
    assert not Experiment.objects.exists() and not Case.objects.exists()


def test_who_may_do_what(launch, viewer, operator, client, demo_data):
    run = launch("What's the weather in Lagos and London?")
    dataset = Dataset.objects.create(name="d")
    assert viewer.get(reverse("dataset_list")).status_code == 200
    assert viewer.get(reverse("dataset_detail", args=[dataset.pk])).status_code == 200
    assert viewer.get(reverse("run_add_to_dataset", args=[run.pk])).status_code == 403
    assert viewer.post(reverse("dataset_list"), {"name": "mine"}).status_code == 403
    assert viewer.post(reverse("dataset_detail", args=[dataset.pk]), {"action": "case", "case-task": "x"}).status_code == 403
    assert "Add to a dataset" not in viewer.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert operator.post(reverse("dataset_delete", args=[dataset.pk])).status_code == 403
    assert client.get(reverse("dataset_list")).status_code == 302  # anonymous: to sign in
    assert Dataset.objects.count() == 1 and not Run.objects.filter(experiment=True).exists()


@pytest.mark.parametrize("expectations, message", [
    ('[{"kind": "at_most", "measure": [], "value": 1}]', "measure must be one of"),
    ('[{"kind": ["tool_called"]}]', "kind must be one of"),
    ('[{"kind": "tool_called", "tool": "x", "conditions": [{"path": "$.a", "op": {}, "value": 1}]}]', "op must be one of"),
    ("[" * 5000 + "]" * 5000, "Not JSON"),
    ('[{"kind": "answer_contains", "text": "a\\u0000b"}]', "NUL"),
])
def test_odd_checks_are_refused_at_their_field(operator, expectations, message):
    dataset = Dataset.objects.create(name="odd")
    answer = operator.post(reverse("dataset_detail", args=[dataset.pk]), {
        "action": "case", "case-task": "t", "case-expectations": expectations})
    assert answer.status_code == 200 and message in answer.content.decode()
    assert not Case.objects.exists()


def test_an_import_with_odd_lines_adds_nothing_and_names_each_line(operator, launch):
    from django.core.files.uploadedfile import SimpleUploadedFile

    run = launch("What's the weather in Lagos and London?")
    dataset = Dataset.objects.create(name="imported")
    lines = [
        json.dumps({"task": "fine", "source_run": run.pk}),
        json.dumps({"task": "a list as its run", "source_run": [run.pk]}),
        "[" * 5000 + "]" * 5000,
        json.dumps({"task": "far step", "source_step": 2**40}),
        json.dumps({"task": "nul \u0000 inside"}),
        "not json",
    ]
    upload = SimpleUploadedFile("cases.jsonl", "\n".join(lines).encode(), content_type="application/x-ndjson")
    answer = operator.post(reverse("dataset_import", args=[dataset.pk]), {"file": upload}, follow=True)
    text = answer.content.decode()
    assert "Nothing was imported" in text
    for number in (3, 4, 5, 6):
        assert f"Line {number}" in text
    assert not Case.objects.exists()
    good = SimpleUploadedFile("cases.jsonl", "\n".join(lines[:2]).encode())
    operator.post(reverse("dataset_import", args=[dataset.pk]), {"file": good})
    assert list(Case.objects.order_by("pk").values_list("task", "source_run_id")) == [
        ("fine", run.pk), ("a list as its run", None)]


def test_an_imported_line_with_a_raw_nul_is_named_with_its_column(operator):
    from django.core.files.uploadedfile import SimpleUploadedFile

    dataset = Dataset.objects.create(name="imported")
    upload = SimpleUploadedFile("cases.jsonl", b'{"task": "fine"}\n{"task": "ab\x00cd"}\n')
    text = operator.post(reverse("dataset_import", args=[dataset.pk]), {"file": upload}, follow=True).content.decode()
    assert "Line 2: not JSON: invalid control character NUL (U+0000) at column 13" in text
    assert not Case.objects.exists()


def test_an_experiments_run_is_neither_re_run_nor_forked(launch, operator, drive):
    run = launch("What's the weather in Lagos and London?")
    dataset = Dataset.objects.create(name="once")
    Case.objects.create(dataset=dataset, name="w", task=run.task, source_run=run)
    from evals.experiments import experiment_start

    experiment = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo")))
    case_run = experiment.results.get().run
    page = operator.get(reverse("run_detail", args=[case_run.pk])).content.decode()
    assert 'id="rerun-form"' not in page and "data-fork-url" not in page
    assert 'id="rerun-form"' in operator.get(reverse("run_detail", args=[run.pk])).content.decode()
    before = Run.objects.count()
    operator.post(reverse("run_rerun", args=[case_run.pk]), {"approval_policy": "ask"})
    fork = operator.post(reverse("run_fork", args=[case_run.pk]) + "?step=1", {"step": 1, "edit": "none"})
    assert fork.status_code in (200, 400, 409)
    assert Run.objects.count() == before
    from tests.web.api.test_api import api

    client = api(make_user("opal_api", "operators"))
    rerun = client.post(f"/api/v1/runs/{case_run.pk}/rerun/", {}, format="json")
    assert rerun.status_code == 400 and "experiment" in str(rerun.json())
    forked = client.post(f"/api/v1/runs/{case_run.pk}/fork/", {"step": 1}, format="json")
    assert forked.status_code in (400, 409) and "experiment" in str(forked.json())
    assert Run.objects.count() == before
