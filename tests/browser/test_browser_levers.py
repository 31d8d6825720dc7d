"""An operator's levers on the live run page, with a viewer watching from a second context: pause
mid-run, a message to the agent, resume, and the run going on to its end. The run is driven by
the real worker and a slow scripted demo model, so there is time to pause it mid-run."""
import pytest
from playwright.sync_api import expect

from runs.models import OperatorMessage, Run
from tests.browser import RUN_URL, requires_chromium, run_id_of, screenshot
from tests.conftest import wait_for_status, wait_until

pytestmark = [pytest.mark.browser, requires_chromium]

SEARCHES = 9  # and the answer: the demo agent allows 10 iterations
NOTE = "Stop searching for printers; look for scanners instead."


def searches(n: int) -> list[dict]:
    return [{"tool_calls": [{"name": "search_tickets", "arguments": {"query": f"printer {i}"}}]} for i in range(n)]


def launch_slow_run(page, model: str) -> int:
    page.goto("/runs/new/")
    page.locator("#id_agent").select_option(label="demo")
    page.locator("#id_task").fill("Search the tickets about printers, one query at a time.")
    page.locator("#launch-overrides > summary").click()
    page.locator("#id_models").fill(model)
    page.locator("#launch-button").click()
    page.wait_for_url(RUN_URL)
    return run_id_of(page)


def user_texts(request: dict) -> list[str]:
    return [m.get("content") or "" for m in request["messages"] if m.get("role") == "user"]


def test_pause_message_resume_with_a_viewer_watching(live, browser, users, script):
    # Slow enough (about 30 s unpaused) that two sign-ins on a loaded machine still find it running.
    model = script(*searches(SEARCHES), {"content": "Found the scanner tickets."}, latency=3.5)
    operator = browser.login(users["operator"])
    run_id = launch_slow_run(operator, model)
    watcher = browser.login(users["viewer"])
    watcher.goto(f"/runs/{run_id}/")
    expect(watcher.locator("#live-state")).to_have_text("live")
    # A viewer sees the run's state, never its levers.
    expect(watcher.locator("#pause-button")).to_have_count(0)
    expect(watcher.locator("#message-form")).to_have_count(0)
    expect(watcher.locator("#timeline .step[data-index]").first).to_be_visible()

    with operator.expect_navigation():  # a plain form post, back to the run page
        operator.locator("#pause-button").click()
    for page in (operator, watcher):
        expect(page.locator("#run-paused")).to_be_visible()
        expect(page.locator("#paused-by")).to_have_text("operator")
        expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.PAUSED)
        expect(page.locator("#run-status")).to_have_text("Paused")
        expect(page.locator("#timeline .lever-paused")).to_contain_text("Paused by operator at")
    expect(operator.locator("#resume-button")).to_be_visible()
    expect(operator.locator("#pause-button")).to_be_hidden()
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.PAUSED and run.paused_by_name == "operator"
    wait_until(lambda: not Run.objects.get(pk=run_id).lease_owner, message="the paused run to let go of its worker")
    paused_at_step = run.steps.count()
    assert paused_at_step < SEARCHES, "the run went on to its end before the pause"
    screenshot(operator, "run-paused")  # with the levers an operator has

    operator.locator("#message-text").fill(NOTE)
    with operator.expect_navigation():
        operator.locator("#message-button").click()
    for page in (operator, watcher):
        note = page.locator("#timeline .operator-message")
        expect(note).to_have_count(1)
        expect(note.locator(".operator-message-head")).to_contain_text("Message from operator operator")
        expect(note.locator(".operator-message-text")).to_have_text(NOTE)
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.PAUSED and run.steps.count() == paused_at_step, "a message woke a paused run"
    screenshot(watcher, "run-operator-message")  # as a viewer sees it

    with operator.expect_navigation():
        operator.locator("#resume-button").click()
    run = wait_for_status(run_id, *Run.FINISHED_STATUSES)
    assert run.status == Run.Status.SUCCEEDED, run.stop_detail
    for page in (operator, watcher):
        expect(page.locator("#timeline .lever-resume")).to_contain_text("Resumed by operator")
        expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
        expect(page.locator("#run-paused")).to_be_hidden()
        expect(page.locator("#timeline .run-end")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(operator.locator("#run-levers")).to_be_hidden()
    assert watcher.locator("#timeline .step[data-index]").count() == run.steps.count()

    # The note went to the model once, as a user message of the first request after the pause.
    requests = script.requests(model)
    carrying = [n for n, request in enumerate(requests) if NOTE in user_texts(request)]
    assert carrying and carrying[0] == paused_at_step, carrying
    assert OperatorMessage.objects.get(run_id=run_id).step.index == paused_at_step + 1


def test_stop_with_a_summary_ends_the_run_for_everyone_watching(live, browser, users, script):
    # The repeating entry is skipped by the run's own requests and answers only the tools-free summary.
    summary = {"repeat": True, "if_tool_choice": "none", "content": "Searched two queries; no printer tickets found."}
    # Slow enough (about 22 s unstopped, within the demo agent's 10 iterations) that two people
    # signing in on a loaded machine still find it running.
    model = script(summary, *searches(8), {"content": "never reached"}, latency=2.5)
    operator = browser.login(users["operator"])
    run_id = launch_slow_run(operator, model)
    watcher = browser.login(users["viewer"])
    watcher.goto(f"/runs/{run_id}/")
    expect(watcher.locator("#timeline .step[data-index]").first).to_be_visible()

    operator.locator("#stop-button").click()
    expect(operator.locator("#stop-form .confirm-box")).to_contain_text("writes a summary")
    with operator.expect_navigation():
        operator.locator("#stop-form .confirm-yes").click()
    # The run ends first; its summary follows as the last step and becomes the answer.
    for page in (operator, watcher):
        expect(page.locator("#timeline .lever-stop")).to_contain_text("Stop with a summary requested by operator")
        expect(page.locator("#run-stop-reason")).to_have_attribute("data-stop-reason", Run.StopReason.OPERATOR_STOP)
        expect(page.locator("#run-answer")).to_have_text(summary["content"])
        expect(page.locator("#timeline .step-summary")).to_have_count(1)
    expect(operator.locator("#run-levers")).to_be_hidden()
    expect(operator.locator("#run-stop-requested")).to_be_hidden()
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.CANCELLED and run.stop_reason == Run.StopReason.OPERATOR_STOP
    assert run.answer == summary["content"]
