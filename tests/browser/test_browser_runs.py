"""Launching a run from the browser, watching it live, reloading it, cancelling it."""
import re

import pytest
from playwright.sync_api import expect

from runs.models import Run, ToolCall
from tests.browser import (
    RUN_URL,
    WEATHER,
    mark_page,
    requires_chromium,
    run_id_of,
    screenshot,
    still_same_page,
    wait_for_seq,
)

pytestmark = [pytest.mark.browser, requires_chromium]


def launch_from_page(page, task: str, *, models: str | None = None) -> int:
    """Fill the Launch page like a person would; returns the id of the run page it lands on."""
    page.goto("/runs/new/")
    page.locator("#id_agent").select_option(label="demo")
    page.locator("#id_task").fill(task)
    if models:
        page.locator("#launch-overrides > summary").click()
        page.locator("#id_models").fill(models)
    page.locator("#launch-button").click()
    page.wait_for_url(RUN_URL)
    return run_id_of(page)


def test_launched_run_fills_its_timeline_live_and_a_reload_shows_the_same(live, browser, users, slow_demo_model):
    # Each model answer takes a second, so the page is rendered (right after the launch) well
    # before the run ends, and everything after that has to arrive through the websocket.
    slow_demo_model(1.0)
    page = browser.login(users["operator"])
    run_id = launch_from_page(page, WEATHER)
    mark_page(page)
    rendered_seq = int(page.locator("#run-page").get_attribute("data-rendered-seq"))
    expect(page.locator("#live-state")).to_have_text("live")

    steps = page.locator("#timeline .step[data-index]")
    expect(steps.first).to_be_visible()
    weather_calls = page.locator("#timeline .call[data-call-pk]").filter(
        has=page.locator(".call-tool", has_text=re.compile(r"^get_weather$"))
    )
    expect(weather_calls).to_have_count(2)
    for n in range(2):
        expect(weather_calls.nth(n).locator(".call-status")).to_have_attribute("data-status", ToolCall.Status.SUCCEEDED)
    expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(page.locator("#run-answer")).to_contain_text("Lagos")
    expect(page.locator("#run-answer")).to_contain_text("London")
    expect(page.locator("#timeline .run-end")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(page.locator("#cancel-form")).to_be_hidden()
    expect(page.locator("#rerun-button")).to_be_visible()
    expect(page.locator("#live-state")).to_have_text("up to date")  # no longer "live" once it ended

    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.SUCCEEDED
    wait_for_seq(page, run.event_seq)
    assert still_same_page(page), "the page reloaded or navigated while the run went on"
    assert rendered_seq < run.event_seq, "every event was already in the rendered page: nothing came live"
    assert steps.count() == run.steps.count()
    before = page.locator("#timeline").inner_text()
    screenshot(page, "run-page")

    page.reload()
    wait_for_seq(page, run.event_seq)
    expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    assert page.locator("#timeline").inner_text() == before


def test_operator_cancels_a_running_run_from_its_page(live, browser, users, script):
    # Slow tool-calling answers: the run is still working when the button is pressed.
    searches = [{"tool_calls": [{"name": "search_tickets", "arguments": {"query": f"printer {n}"}}]} for n in range(8)]
    model = script(*searches, {"content": "done"}, latency=2.0)
    page = browser.login(users["operator"])
    run_id = launch_from_page(page, "Search the tickets about printers, one query at a time.", models=model)
    expect(page.locator("#run-overrides")).to_contain_text(model)
    expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.RUNNING)

    page.locator("#cancel-button").click()
    # It asks first, next to the button, and says what cancelling does.
    expect(page.locator("#cancel-form .confirm-box")).to_contain_text("without a summary")
    assert Run.objects.get(pk=run_id).status == Run.Status.RUNNING, "nothing happened before the confirmation"
    page.locator("#cancel-form .confirm-yes").click()
    page.wait_for_url(re.compile(r"/runs/\d+/#run-answers$"))  # back at the controls, with the answer there
    expect(page.locator("#run-answers")).to_contain_text(re.compile(rf"Run {run_id} (was cancelled|will stop at its next check)"))
    expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.CANCELLED)
    expect(page.locator("#run-stop-reason")).to_have_attribute("data-stop-reason", Run.StopReason.CANCELLED)
    expect(page.locator("#timeline .run-end")).to_have_attribute("data-status", Run.Status.CANCELLED)
    expect(page.locator("#cancel-button")).to_be_hidden()
    expect(page.locator("#rerun-button")).to_be_visible()
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.CANCELLED
    assert run.iterations < len(searches), "the run went on to the end of its script"


def test_an_idle_run_page_stays_connected(live, browser, users, launch):
    run = launch(WEATHER)
    page = browser.login(users["viewer"])
    page.goto(f"/runs/{run.pk}/")
    # Connected, and it says the run has ended rather than "live".
    expect(page.locator("#live-state")).to_have_text("up to date")
    expect(page.locator("#timeline .run-end")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    new_sockets = []
    page.on("websocket", lambda socket: new_sockets.append(socket.url))
    # Nothing happens in a finished run: a person leaving the page open should not see it
    # drop to "reconnecting…" and back (the page and its header badge each hold one socket).
    page.wait_for_timeout(12_000)
    expect(page.locator("#live-state")).to_have_text("up to date")
    assert new_sockets == [], "the page had to reconnect while idle"


def test_the_launch_page_shows_the_agents_settings_in_its_empty_fields(live, browser, users):
    from runs.models import Agent

    agent = Agent.objects.get(name="demo")
    tools = ", ".join(sorted(agent.tools.values_list("name", flat=True))) or "none"
    page = browser.login(users["operator"])
    page.goto("/runs/new/")
    page.locator("#id_agent").select_option(label="demo")
    expect(page.locator("#id_models")).to_have_attribute("placeholder", ", ".join(agent.model_list) or "the default models")
    expect(page.locator("#id_max_iterations")).to_have_attribute("placeholder", str(agent.max_iterations))
    expect(page.locator("#id_first_tool_choice option").first).to_have_text(
        f"the agent's setting ({agent.first_tool_choice})"
    )
    expect(page.locator("#agent-tools")).to_have_text(f"The agent's: {tools}.")


def test_a_call_whose_outcome_is_unknown_says_so_on_the_run_page(live, browser, users, launch, no_dispatch):
    from tests.supervision.queue.test_outcome_unknown_display import approved_then_interrupted

    run = approved_then_interrupted(launch, users["operator"])
    page = browser.login(users["viewer"])
    page.goto(f"/runs/{run.pk}/")
    wait_for_seq(page, Run.objects.get(pk=run.pk).event_seq)
    cancel = page.locator("#timeline .call[data-call-pk]").filter(
        has=page.locator(".call-tool", has_text=re.compile(r"^cancel_order$"))
    )
    badge = cancel.locator(".call-status")
    expect(badge).to_have_attribute("data-status", ToolCall.Status.UNKNOWN)
    expect(badge).to_have_text("Outcome unknown")
    expect(cancel.locator(".call-unknown")).to_contain_text("may have taken effect")
    expect(cancel.locator(".call-error")).to_contain_text("outcome unknown")
