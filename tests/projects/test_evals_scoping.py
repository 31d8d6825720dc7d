"""Datasets, cases and experiments per project, as the people of two teams see them: an operator of
project Alpha sees Alpha's datasets, experiments and agents in every list and choice, and none of
Beta's; an id of Beta's named in a body or query string is answered as if it did not exist; a
site operator (in the "operators" group) sees both, and is told in words when a run or agent is
of another project than the dataset."""
import html
import json
import re

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from evals import datasets as data
from evals.experiments import experiment_start
from evals.models import Case, Dataset, Experiment
from projects.models import DEFAULT_SLUG
from runs.lifecycle.agents import agent_save
from tests.projects import member, project
from tests.support.approval_fixtures import make_user

WEATHER = "What's the weather in Lagos and London?"


def options(page: str, name: str) -> list[str]:
    """The choices a person sees in the form's <select name=...>, by their words (the page's own
    form, in <main>: the header's project switch is a <select name="project"> too)."""
    select = re.search(rf'<select name="{re.escape(name)}"[^>]*>(.*?)</select>', page.split("<main>", 1)[-1], re.S)
    assert select, f"no <select name={name!r}> on the page"
    return [html.unescape(text).strip() for text in re.findall(r"<option[^>]*>(.*?)</option>", select.group(1), re.S)]


def rows(page: str) -> list[str]:
    """The dataset list's rows: each dataset's name and project as the table shows them."""
    table = re.search(r'<table id="dataset-table">(.*?)</table>', page, re.S)
    if not table:
        return []
    return [" ".join(re.sub(r"<[^>]+>", " ", html.unescape(row)).split()[:2])
            for row in re.findall(r"<tr data-dataset=[^>]*>(.*?)</tr>", table.group(1), re.S)]


def signed_in(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def token_client(username: str, password: str) -> APIClient:
    """An API client with a token got the way a person gets one: POST /api/v1/token/."""
    answer = APIClient().post("/api/v1/token/", {"username": username, "password": password}, format="json")
    assert answer.status_code == 200, answer.content
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {answer.json()['token']}")
    return client


class World:
    """Two teams, each with an agent, a run of it, a dataset with a case and an experiment."""


@pytest.fixture
def world(demo_data, launch):
    w = World()
    w.alpha, w.beta = project("Alpha"), project("Beta")
    w.alpha_bot = agent_save(agent=None, data={"name": "alpha-bot"}, project=w.alpha)
    w.beta_bot = agent_save(agent=None, data={"name": "beta-bot"}, project=w.beta)
    w.alpha_run = launch(WEATHER, agent="alpha-bot")
    w.beta_run = launch("What's the weather in Oslo?", agent="beta-bot")
    w.alpha_set = Dataset.objects.create(name="alpha-cases", project=w.alpha)
    w.beta_set = Dataset.objects.create(name="beta-cases", project=w.beta)
    for dataset in (w.alpha_set, w.beta_set):
        data.case_add(dataset=dataset, data={"task": WEATHER, "expectations": [{"kind": "no_destructive_call"}]})
    w.alpha_exp = experiment_start(dataset=w.alpha_set, agent=w.alpha_bot)
    w.beta_exp = experiment_start(dataset=w.beta_set, agent=w.beta_bot)
    w.olga = member("olga", w.alpha)  # an operator of Alpha only
    w.sid = make_user("sid", "operators")  # an operator of every project
    return w


# --- The pages ------------------------------------------------------------------------------------


def test_the_datasets_page_lists_the_persons_projects_datasets_with_their_project(world):
    olga = signed_in("olga").get(reverse("dataset_list")).content.decode()
    assert rows(olga) == ["alpha-cases Alpha"]
    assert "beta-cases" not in olga
    # A new dataset can only go to Alpha, and Alpha is chosen already.
    assert options(olga, "project") == ["Choose a project", "Alpha"]
    assert f'<option value="{world.alpha.pk}" selected>Alpha</option>' in olga
    sid = signed_in("sid").get(reverse("dataset_list")).content.decode()
    assert rows(sid) == ["alpha-cases Alpha", "beta-cases Beta"]
    assert {"Alpha", "Beta"} <= set(options(sid, "project"))


def test_a_dataset_made_on_the_page_goes_to_the_persons_project_and_never_to_anothers(world):
    olga = signed_in("olga")
    made = olga.post(reverse("dataset_list"), {"name": "alpha-more", "project": ""})
    dataset = Dataset.objects.get(name="alpha-more")
    assert made.status_code == 302 and dataset.project == world.alpha
    refused = olga.post(reverse("dataset_list"), {"name": "sneaky", "project": world.beta.pk})
    assert refused.status_code == 200
    assert "Select a valid choice" in refused.content.decode()
    assert not Dataset.objects.filter(name="sneaky").exists()
    detail = olga.get(reverse("dataset_detail", args=[dataset.pk])).content.decode()
    assert re.search(r'id="dataset-project">project Alpha<', detail)


def test_an_experiment_on_the_page_runs_an_agent_of_the_datasets_project_only(world):
    olga = signed_in("olga")
    url = reverse("dataset_detail", args=[world.alpha_set.pk])
    page = olga.get(url).content.decode()
    assert [o for o in options(page, "experiment-agent") if not o.startswith("-")] == ["alpha-bot"]
    before = Experiment.objects.count()
    refused = olga.post(url, {"action": "experiment", "experiment-agent": world.beta_bot.pk,
                              "experiment-which": "current"})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    # Even a site operator cannot run another project's agent on it: it is not offered.
    sid = signed_in("sid")
    assert "beta-bot" not in options(sid.get(url).content.decode(), "experiment-agent")
    refused = sid.post(url, {"action": "experiment", "experiment-agent": world.beta_bot.pk,
                             "experiment-which": "current"})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert Experiment.objects.count() == before


def test_a_run_is_added_to_a_dataset_of_its_own_project_only(world):
    olga = signed_in("olga")
    url = reverse("run_add_to_dataset", args=[world.alpha_run.pk])
    page = olga.get(url).content.decode()
    assert options(page, "dataset") == ["a new dataset", "alpha-cases"]
    refused = olga.post(url, {"dataset": world.beta_set.pk, "name": "leak"})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not Case.objects.filter(name="leak").exists()
    # A site operator is offered the run's project's datasets too, and nothing else.
    sid = signed_in("sid")
    assert options(sid.get(url).content.decode(), "dataset") == ["a new dataset", "alpha-cases"]
    refused = sid.post(url, {"dataset": world.beta_set.pk, "name": "leak"})
    assert refused.status_code == 200 and not Case.objects.filter(name="leak").exists()
    # A new dataset made from the run is the run's project's.
    made = olga.post(url, {"new_dataset": "from-a-run", "name": "one"})
    assert made.status_code == 302 and Dataset.objects.get(name="from-a-run").project == world.alpha


def test_an_imported_case_keeps_no_source_run_of_another_project(world):
    olga = signed_in("olga")
    lines = "\n".join(json.dumps({"name": name, "task": WEATHER, "source_run": run.pk})
                      for name, run in (("own", world.alpha_run), ("theirs", world.beta_run)))
    upload = SimpleUploadedFile("cases.jsonl", lines.encode(), content_type="application/x-ndjson")
    answer = olga.post(reverse("dataset_import", args=[world.alpha_set.pk]), {"file": upload})
    assert answer.status_code == 302
    cases = {c.name: c for c in Case.objects.filter(dataset=world.alpha_set, name__in=["own", "theirs"])}
    assert cases["own"].source_run_id == world.alpha_run.pk
    assert cases["theirs"].source_run_id is None and cases["theirs"].answers == []


# --- The API --------------------------------------------------------------------------------------


@pytest.fixture
def olga_api(world):
    return token_client("olga", "pw-long-enough-1")


@pytest.fixture
def sid_api(world):
    return token_client("sid", "pw-sid")


def names(answer) -> list[str]:
    assert answer.status_code == 200, answer.content
    return [row.get("name") or row.get("dataset_name") for row in answer.json()["results"]]


def test_the_api_lists_the_callers_projects_datasets_and_experiments(world, olga_api, sid_api):
    datasets = olga_api.get("/api/v1/datasets/").json()["results"]
    assert [(d["name"], d["project"], d["project_name"]) for d in datasets] == [
        ("alpha-cases", world.alpha.pk, "Alpha")]
    assert names(olga_api.get("/api/v1/experiments/")) == ["alpha-cases"]
    # Beta's dataset in the query string: no experiments, as for a dataset that does not exist.
    assert olga_api.get(f"/api/v1/experiments/?dataset={world.beta_set.pk}").json()["results"] == []
    assert names(sid_api.get("/api/v1/datasets/")) == ["alpha-cases", "beta-cases"]
    assert names(sid_api.get("/api/v1/experiments/")) == ["beta-cases", "alpha-cases"]
    assert names(sid_api.get(f"/api/v1/experiments/?dataset={world.beta_set.pk}")) == ["beta-cases"]


def test_a_dataset_made_over_the_api_goes_to_a_project_of_the_caller(world, olga_api, sid_api):
    made = olga_api.post("/api/v1/datasets/", {"name": "alpha-api"}, format="json")
    assert made.status_code == 201 and made.json()["project"] == world.alpha.pk
    for named in (world.beta.pk, "beta"):
        refused = olga_api.post("/api/v1/datasets/", {"name": "sneaky", "project": named}, format="json")
        assert refused.status_code == 400 and refused.json()["errors"]["project"] == [f"No project {named!r}."]
    assert not Dataset.objects.filter(name="sneaky").exists()
    assert sid_api.post("/api/v1/datasets/", {"name": "beta-api", "project": "beta"},
                        format="json").json()["project"] == world.beta.pk
    # Read and sent back whole, a dataset is taken; moved to another project, refused in words.
    url = f"/api/v1/datasets/{world.alpha_set.pk}/"
    assert sid_api.patch(url, sid_api.get(url).json(), format="json").status_code == 200
    moved = sid_api.patch(url, {"project": world.beta.pk}, format="json")
    assert moved.status_code == 400 and "stays in project Alpha" in moved.json()["errors"]["project"][0]
    # A person of two projects, neither the Default one, is asked which.
    member("twin", world.alpha)
    member("twin", world.beta)
    twin = token_client("twin", "pw-long-enough-1")
    unsure = twin.post("/api/v1/datasets/", {"name": "which"}, format="json")
    assert unsure.status_code == 400
    assert unsure.json()["errors"]["project"] == [
        "Say which project the dataset is for: you may make datasets in Alpha, Beta."]
    assert twin.post("/api/v1/datasets/", {"name": "which", "project": "beta"},
                     format="json").json()["project_name"] == "Beta"


def test_a_default_project_is_the_dataset_s_project_for_a_person_there_too(world):
    default = project("Default")
    assert default.slug == DEFAULT_SLUG
    member("dora", world.alpha)
    member("dora", default)
    made = token_client("dora", "pw-long-enough-1").post("/api/v1/datasets/", {"name": "dora-set"}, format="json")
    assert made.status_code == 201 and made.json()["project_name"] == "Default"


def test_an_experiment_over_the_api_names_a_dataset_agent_and_baseline_the_caller_sees(world, olga_api, sid_api):
    before = Experiment.objects.count()
    refused = olga_api.post("/api/v1/experiments/", {"dataset": world.beta_set.pk, "agent": "alpha-bot"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["dataset"] == [f"No dataset {world.beta_set.pk}."]
    for agent in ("beta-bot", world.beta_bot.pk):
        refused = olga_api.post("/api/v1/experiments/", {"dataset": world.alpha_set.pk, "agent": agent}, format="json")
        assert refused.status_code == 400 and refused.json()["errors"]["agent"] == [f"No agent {agent!r}."]
    refused = olga_api.post("/api/v1/experiments/", {"dataset": world.alpha_set.pk, "agent": "alpha-bot",
                                                     "baseline": world.beta_exp.pk}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["baseline"] == [f"No experiment {world.beta_exp.pk}."]
    # A site operator sees Beta's agent, and is told it is not the dataset's project's.
    mixed = sid_api.post("/api/v1/experiments/", {"dataset": world.alpha_set.pk, "agent": "beta-bot"}, format="json")
    assert mixed.status_code == 400
    assert mixed.json()["errors"]["agent"] == [
        "Agent beta-bot is of project Beta, dataset alpha-cases of project Alpha: "
        "an experiment runs an agent of its dataset's project."]
    assert Experiment.objects.count() == before
    started = olga_api.post("/api/v1/experiments/", {"dataset": world.alpha_set.pk, "agent": "alpha-bot",
                                                     "baseline": world.alpha_exp.pk}, format="json")
    assert started.status_code == 201, started.content


def test_a_viewer_of_one_project_makes_datasets_and_experiments_only_where_she_is_an_operator(world):
    member("vicky", world.alpha, role="viewers")
    member("vicky", world.beta, role="operators")
    vicky = token_client("vicky", "pw-long-enough-1")
    refused = vicky.post("/api/v1/datasets/", {"name": "viewed", "project": "alpha"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["project"] == ["You may not make datasets in project Alpha."]
    assert vicky.post("/api/v1/datasets/", {"name": "viewed"}, format="json").json()["project_name"] == "Beta"
    refused = vicky.post("/api/v1/experiments/", {"dataset": world.alpha_set.pk, "agent": "alpha-bot"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"] == "You may not run experiments in project Alpha."
    assert vicky.post("/api/v1/experiments/", {"dataset": world.beta_set.pk, "agent": "beta-bot"},
                      format="json").status_code == 201


def test_a_case_over_the_api_comes_from_a_run_of_the_datasets_project(world, olga_api, sid_api):
    base = f"/api/v1/datasets/{world.alpha_set.pk}/cases/"
    count = Case.objects.filter(dataset=world.alpha_set).count()
    refused = olga_api.post(base + "from-run/", {"run": world.beta_run.pk}, format="json")
    assert refused.status_code == 400 and refused.json()["errors"]["run"] == [f"No run {world.beta_run.pk}."]
    refused = olga_api.post(base, {"task": WEATHER, "source_run": world.beta_run.pk}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["source_run"] == [f"No run {world.beta_run.pk}."]
    mixed = sid_api.post(base + "from-run/", {"run": world.beta_run.pk}, format="json")
    assert mixed.status_code == 400
    assert mixed.json()["errors"]["run"] == [
        f"Run {world.beta_run.pk} is of project Beta, dataset alpha-cases of project Alpha: "
        "a dataset's cases come from runs of its project."]
    assert Case.objects.filter(dataset=world.alpha_set).count() == count
    own = olga_api.post(base + "from-run/", {"run": world.alpha_run.pk}, format="json")
    assert own.status_code == 201 and own.json()["source_run"] == world.alpha_run.pk
    case_url = f"{base}{own.json()['id']}/"
    assert olga_api.patch(case_url, olga_api.get(case_url).json(), format="json").status_code == 200
    moved = olga_api.patch(case_url, {"source_run": world.beta_run.pk}, format="json")
    assert moved.status_code == 400 and moved.json()["errors"]["source_run"] == [f"No run {world.beta_run.pk}."]
    assert Case.objects.get(pk=own.json()["id"]).source_run_id == world.alpha_run.pk


def test_an_import_over_the_api_drops_a_source_run_of_another_project(world, olga_api):
    lines = "\n".join(json.dumps({"name": name, "task": WEATHER, "source_run": run.pk})
                      for name, run in (("own", world.alpha_run), ("theirs", world.beta_run)))
    answer = olga_api.post(f"/api/v1/datasets/{world.alpha_set.pk}/import/", {"jsonl": lines}, format="json")
    assert answer.status_code == 201, answer.content
    kept = dict(Case.objects.filter(pk__in=answer.json()["cases"]).values_list("name", "source_run"))
    assert kept == {"own": world.alpha_run.pk, "theirs": None}


def test_a_source_run_of_another_project_is_dropped_from_a_line_holding_a_unicode_line_separator(world, olga_api):
    # The export writes U+2028 raw inside a string (valid JSON): the line is still one line, and
    # its source run of Beta is left out as from any other line.
    task = "Weather in Lagos\u2028and London?"
    lines = "\n".join(json.dumps({"name": name, "task": task, "source_run": run.pk}, ensure_ascii=False)
                      for name, run in (("own", world.alpha_run), ("theirs", world.beta_run)))
    answer = olga_api.post(f"/api/v1/datasets/{world.alpha_set.pk}/import/", {"jsonl": lines}, format="json")
    assert answer.status_code == 201, answer.content
    kept = dict(Case.objects.filter(pk__in=answer.json()["cases"]).values_list("name", "source_run"))
    assert kept == {"own": world.alpha_run.pk, "theirs": None}
    assert set(Case.objects.filter(pk__in=answer.json()["cases"]).values_list("task", flat=True)) == {task}
