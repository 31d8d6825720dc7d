"""Datasets and experiments in the browser: an operator adds a case from a run, starts an
experiment, watches it finish live, then runs a draft and reads the comparison with the
regression first; a viewer reads but cannot start anything."""
import pytest
from playwright.sync_api import expect

from evals.models import Case, Dataset, Experiment
from runs.lifecycle.agents import agent_draft_save
from runs.models import Agent
from tests.browser import mark_page, requires_chromium, screenshot, still_same_page
from toolsapp.models import Tool

pytestmark = [pytest.mark.browser, requires_chromium]
WEATHER = "What's the weather in Lagos and London?"


def shots(page, name: str) -> None:
    for width, suffix in ((1280, "desktop"), (390, "phone")):
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(page, f"{name}-{suffix}")
    page.set_viewport_size({"width": 1280, "height": 900})


def test_operator_adds_a_case_runs_experiments_and_reads_the_regression(live, browser, users, launch, script):
    run = launch(WEATHER)
    page = browser.login(users["operator"])
    page.goto(f"/runs/{run.pk}/")
    page.get_by_role("link", name="Add to a dataset").click()
    expect(page.locator("h1")).to_have_text(f"Add run {run.pk} to a dataset")
    expect(page.locator("#id_expectations")).to_contain_text('"tool": "get_weather"')
    page.locator("#id_new_dataset").fill("weather checks")
    shots(page, "add-to-dataset")
    page.get_by_role("button", name="Add the case").click()
    expect(page.locator(".messages")).to_contain_text("added to dataset weather checks")
    dataset = Dataset.objects.get(name="weather checks")
    case = Case.objects.get(dataset=dataset)
    assert case.source_run_id == run.pk
    expect(page.locator(f'#case-table tr[data-case="{case.pk}"]')).to_contain_text(f"run {run.pk}")

    # An experiment on a slow model: the page shows it finish without a reload.
    slow = script({"content": "Lagos: 31 °C, sunny. London: 14 °C, rain."}, latency=2.5)
    page.locator("#id_experiment-agent").select_option(label="demo")
    page.locator("#id_experiment-models").fill(slow)
    shots(page, "dataset")
    page.get_by_role("button", name="Run 1 case").click()
    expect(page.locator("#experiment-status")).to_have_text("Running")
    mark_page(page)
    shots(page, "experiment-running")
    expect(page.locator("#experiment-status")).to_have_text("Finished", timeout=60_000)
    expect(page.locator("#cases-done")).to_have_text("1")
    assert still_same_page(page)
    # The scripted model called no tool: the prefilled checks of its calls fail, each said.
    result = page.locator(".case-result").first
    expect(result.locator(".verdict")).to_have_text("failed")
    expect(result.locator(".check-bad").first).to_contain_text("get_weather was requested")
    shots(page, "experiment")
    result.get_by_role("link", name="run").first.click()
    expect(page.locator("#run-experiment")).to_contain_text("nothing real changed")
    expect(page.locator("#rerun-form")).to_have_count(0)
    shots(page, "experiment-run")
    page.goto(f"/datasets/{dataset.pk}/cases/{case.pk}/")
    expect(page.locator("#id_expectations")).to_contain_text('"kind": "stop_reason"')
    shots(page, "case-edit")

    # The current version (the demo model) passes; a draft without get_weather regresses.
    page.goto(f"/datasets/{dataset.pk}/")
    page.locator("#id_experiment-agent").select_option(label="demo")
    page.get_by_role("button", name="Run 1 case").click()
    expect(page.locator("#experiment-status")).to_have_text("Finished", timeout=60_000)
    expect(page.locator(".case-result .verdict")).to_have_text("passed")
    current = Experiment.objects.filter(dataset=dataset).order_by("-pk").first()
    agent_draft_save(agent=Agent.objects.get(name="demo"), data={"tools": list(Tool.objects.filter(
        name__in=["search_tickets", "create_ticket", "get_ticket"]))})
    page.goto(f"/datasets/{dataset.pk}/")
    page.locator("#id_experiment-agent").select_option(label="demo")
    page.locator("#id_experiment-which").select_option("draft")
    page.get_by_role("button", name="Run 1 case").click()
    expect(page.locator("#experiment-status")).to_have_text("Finished", timeout=60_000)
    expect(page.locator("#experiment-version")).to_contain_text("draft v")
    page.locator("#compare-baseline").click()
    expect(page.locator("#count-regressed")).to_have_text("1")
    first_row = page.locator("#pairs tbody tr").first
    expect(first_row).to_have_attribute("data-change", "regressed")
    expect(first_row).to_contain_text("get_weather was requested")
    shots(page, "experiment-compare")
    first_row.get_by_role("link", name="side by side").click()
    expect(page.locator("#compare-table")).to_contain_text("get_weather")
    shots(page, "experiment-case-compare")
    assert current.pk != Experiment.objects.order_by("-pk").first().pk


def test_a_viewer_reads_datasets_and_experiments_but_starts_nothing(live, browser, users, launch):
    run = launch(WEATHER)
    dataset = Dataset.objects.create(name="read only")
    Case.objects.create(dataset=dataset, name="weather", task=WEATHER, source_run=run)
    page = browser.login(users["viewer"])
    page.goto("/datasets/")
    expect(page.locator("#dataset-table")).to_contain_text("read only")
    expect(page.locator("#dataset-form")).to_have_count(0)
    shots(page, "datasets")
    page.goto(f"/datasets/{dataset.pk}/")
    expect(page.locator("#case-table")).to_contain_text("weather")
    expect(page.locator("#experiment-form")).to_have_count(0)
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator("#run-add-to-dataset")).to_have_count(0)


def test_choosing_a_later_step_prefills_what_the_run_did_from_there(live, browser, users, launch):
    run = launch(WEATHER)
    page = browser.login(users["operator"])
    page.goto(f"/runs/{run.pk}/add-to-dataset/")
    expect(page.locator("#id_expectations")).to_contain_text('"tool": "get_weather"')
    page.locator("#id_step").select_option("2")
    expect(page).to_have_url(f"{browser.base_url}/runs/{run.pk}/add-to-dataset/?step=2")
    expect(page.locator("#id_expectations")).not_to_contain_text("get_weather")
    expect(page.locator("#id_step")).to_have_value("2")
    page.locator("#id_new_dataset").fill("from step two")
    page.get_by_role("button", name="Add the case").click()
    expect(page.locator(".messages")).to_contain_text("added to dataset from step two")
    case = Case.objects.get(dataset__name="from step two")
    assert case.source_step == 2 and [m["role"] for m in case.messages] == ["assistant", "tool", "tool"]
    expect(page.locator("#case-table")).to_contain_text("with its conversation")


def test_admin_says_what_a_tool_does_in_experiments(live, browser, users):
    tool = Tool.objects.get(name="create_ticket")
    page = browser.login(users["admin"])
    page.goto(f"/tools/{tool.pk}/")
    expect(page.locator("#tool-in-experiments")).to_have_text(
        "Runs only if it just reads (a read-only handler, idempotent, not destructive); else simulated")
    page.locator("#tool-edit").click()
    page.locator("#id_in_experiments").select_option("real")
    shots(page, "tool-form-experiments")
    page.locator("#tool-form button[type=submit]").click()
    expect(page.locator("#tool-in-experiments")).to_have_text("Runs for real in experiments (never a destructive tool)")
    shots(page, "tool-experiments")
    tool.refresh_from_db()
    assert tool.in_experiments == "real"
