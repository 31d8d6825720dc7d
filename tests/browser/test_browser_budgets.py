"""Budgets in the browser: an admin adds a token budget for the demo agent through the form; a run
launched from the launch page uses more than it before its second model request, so it pauses at
that boundary and asks; its page says which budget, the queue shows a budget request, the admin
raises it for that run only and the run finishes. An operator sees the budgets and the request
but cannot change or raise them, only stop the run. The form says what is wrong in words, at its field."""
import re

import pytest
from playwright.sync_api import expect

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, Budget, BudgetHold, BudgetRaise, Run
from tests.browser import RUN_URL, requires_chromium, run_id_of, screenshot, wait_for_seq
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]

SENTENCE = "Budget reached: Support, 1,000 tokens a day"
DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}


def weather_script(script) -> str:
    """A call using 1,500 tokens, then the answer. The first answer comes after 2.5 s: every
    process reads the budgets afresh at most 2 s apart, so the check before the second request
    sees a budget saved just before the run started (in another process)."""
    return script(
        {"tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Lagos"}'}],
         "usage": {"prompt_tokens": 1500, "completion_tokens": 0}, "latency": 2.5},
        {"content": "Sunny in Lagos.", "usage": {"prompt_tokens": 20, "completion_tokens": 5}},
    )


def shots(page, name: str) -> None:
    """`name` at desktop width and `name-phone` at phone width; the page is left at desktop width."""
    page.set_viewport_size(DESKTOP)
    screenshot(page, name)
    page.set_viewport_size(PHONE)
    screenshot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


def support_budget() -> Budget:
    return Budget.objects.create(name="Support", scope="agent", agent=Agent.objects.get(name="demo"),
                                 measure="tokens", period="day", limit=1000)


def paused_run(script, user) -> Run:
    run = run_create(agent=Agent.objects.get(name="demo"), task="What's the weather in Lagos?", user=user,
                     overrides={"models": [weather_script(script)], "summarize_on_stop": False})
    run_dispatch(run_id=run.pk)
    return wait_for_status(run.pk, Run.Status.PAUSED)


def test_an_admin_adds_a_budget_a_run_pauses_on_it_and_is_raised_from_the_queue_and_finishes(
        live, browser, users, script):
    admin = browser.login(users["admin"])
    admin.goto("/budgets/")
    expect(admin.locator("#no-budgets")).to_be_visible()
    admin.locator("#budget-add").click()
    admin.wait_for_url("**/budgets/new/")
    admin.locator("#id_name").fill("Support")
    admin.locator("#id_scope").select_option(label="One agent's runs")
    admin.locator("#id_measure").select_option(label="Tokens")
    admin.locator("#id_period").select_option(label="a day")
    admin.locator("#id_limit").fill("1000")
    # The form says what is wrong, at its field, and saves nothing.
    admin.locator("#budget-save").click()
    expect(admin.locator("#field-agent .errorlist")).to_have_text("Choose the agent whose runs this budget covers.")
    expect(admin.locator("h1")).to_have_text("New budget")
    assert not Budget.objects.exists()
    admin.locator("#id_agent").select_option(label="demo")
    admin.locator("#id_limit").fill("-5")
    admin.locator("#budget-save").click()
    expect(admin.locator("#field-limit .errorlist")).to_have_text("A number, 0 or more.")
    expect(admin.locator("#field-agent .errorlist")).to_have_count(0)
    expect(admin.locator("#id_name")).to_have_value("Support")  # what was typed is kept
    assert not Budget.objects.exists()
    shots(admin, "budget-form-errors")
    admin.locator("#id_limit").fill("1000")
    admin.locator("#budget-save").click()
    admin.wait_for_url(re.compile(r"/budgets/$"))
    expect(admin.locator(".messages li")).to_contain_text("Budget Support, 1,000 tokens a day added")
    budget = Budget.objects.get()
    assert (budget.scope, budget.agent.name, budget.measure, budget.period, budget.limit) == (
        "agent", "demo", "tokens", "day", 1000)
    row = admin.locator(f"#budget-{budget.pk}")
    expect(row.locator(".budget-name")).to_have_text("Support")
    expect(row.locator("header")).to_contain_text("1,000 tokens a day")
    expect(row.locator("header")).to_contain_text("One agent's runs: demo")
    expect(row.locator(".budget-used")).to_contain_text("0 tokens used of 1,000 tokens")

    # The run, launched from the launch page, with the model scripted.
    model = weather_script(script)
    admin.goto("/runs/new/")
    admin.locator("#id_agent").select_option(label="demo")
    admin.locator("#id_task").fill("What's the weather in Lagos?")
    admin.locator("#launch-overrides > summary").click()
    admin.locator("#id_models").fill(model)
    admin.locator("#launch-button").click()
    admin.wait_for_url(RUN_URL)
    run_id = run_id_of(admin)

    # Live: the page was open while the worker paused the run before its second request.
    expect(admin.locator("#run-budget")).to_be_visible()
    expect(admin.locator("#run-budget-sentence")).to_have_text(SENTENCE)
    expect(admin.locator("#run-status")).to_have_attribute("data-status", Run.Status.PAUSED)
    expect(admin.locator("#paused-by")).to_have_text("its budget")
    run = wait_for_status(run_id, Run.Status.PAUSED)
    assert len(script.requests(model)) == 1 and run.tokens_in == 1500
    admin.reload()  # and as the server renders it
    expect(admin.locator("#run-budget")).to_be_visible()
    expect(admin.locator("#run-budget")).to_contain_text(SENTENCE)
    expect(admin.locator("#run-budget")).to_contain_text("waits in the approvals queue")
    shots(admin, "budget-run-paused")

    admin.goto("/budgets/")
    expect(row.locator(".status")).to_have_text("Reached")
    expect(row.locator(".budget-used")).to_contain_text("1,500 tokens used of 1,000 tokens")
    expect(row.locator(".budget-used")).to_contain_text("1 run waiting")
    expect(row.locator(".budget-meter")).to_have_attribute("aria-label", "100 % used")
    shots(admin, "budgets")

    admin.goto("/approvals/")
    card = admin.locator(f".budget-request[data-run-id='{run_id}']")
    expect(admin.locator("#budget-requests h2")).to_have_text("Budget requests (1)")
    expect(card.locator(".budget-sentence")).to_have_text(SENTENCE)
    expect(card.locator(".status")).to_have_text("Paused between steps")
    expect(card).to_contain_text("Used 1,500 tokens of 1,000 tokens")
    expect(card.get_by_label("this run only")).to_be_checked()
    expect(card.get_by_role("button", name="Stop with a summary")).to_be_visible()
    # Typed once the card is settled: a refresh already under way (the page's own, on the run's
    # pause) may replace the input while it is typed into; what is asserted is the refresh below.
    for _ in range(5):
        card.locator(".budget-limit").fill("5000")
        admin.wait_for_timeout(300)
        if card.locator(".budget-limit").input_value() == "5000":
            break
    expect(card.locator(".budget-limit")).to_have_value("5000")
    # A live refresh of the queue while the limit is typed keeps it: a second run of the spent
    # budget, handed to the worker now, waits queued, and its request joins the list live.
    card.evaluate("node => { node.dataset.before = 'refresh'; }")
    second = run_create(agent=Agent.objects.get(name="demo"), task="And in London?", user=users["admin"],
                        overrides={"models": [script({"content": "unused"})], "summarize_on_stop": False})
    run_dispatch(run_id=second.pk)
    expect(admin.locator("#budget-requests h2")).to_have_text("Budget requests (2)")
    expect(admin.locator(f".budget-request[data-run-id='{run_id}'][data-before]")).to_have_count(0)  # redrawn
    expect(card.locator(".budget-limit")).to_have_value("5000")
    expect(admin.locator(f".budget-request[data-run-id='{second.pk}'] .status")).to_have_text("Waiting to start")
    shots(admin, "budget-request-queue")

    with admin.expect_navigation():
        card.get_by_role("button", name="Raise", exact=True).click()
    expect(admin.locator(".messages li")).to_contain_text(
        f"Budget Support raised to 5,000 tokens for run {run_id} until")
    expect(admin.locator(".messages li")).to_contain_text(f"Run {run_id} went on.")
    raised = BudgetRaise.objects.get()
    assert (raised.run_id, raised.limit, raised.by_name) == (run_id, 5000, "admin")

    # No sweep runs here: the worker, whose budgets were cached before the raise, sees it at once.
    run = wait_for_status(run_id, Run.Status.SUCCEEDED)
    assert len(script.requests(model)) == 2 and not BudgetHold.objects.filter(run_id=run_id).exists()
    admin.reload()
    expect(admin.locator(".budget-request")).to_have_count(1)  # the second run: the raise was for the first only
    assert Run.objects.get(pk=second.pk).status == Run.Status.QUEUED
    admin.goto(f"/runs/{run_id}/")
    expect(admin.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(admin.locator("#run-answer")).to_have_text("Sunny in Lagos.")
    expect(admin.locator("#run-budget")).to_be_hidden()
    wait_for_seq(admin, run.event_seq)  # the whole timeline is on the page
    paused = admin.locator("#timeline .lever-paused").first
    expect(paused).to_contain_text("Paused by its budget at")
    expect(paused).to_contain_text(SENTENCE)
    expect(admin.locator("#timeline .lever-paused")).to_have_count(1)  # it did not pause again
    expect(admin.locator("#timeline .lever-resume")).to_have_count(1)
    expect(admin.locator("#timeline .lever-resume")).to_contain_text("Resumed by admin, who raised its budget")
    shots(admin, "budget-run-finished")


def test_an_operator_sees_budgets_but_cannot_change_or_raise_them(live, browser, users, script):
    budget = support_budget()
    run = paused_run(script, users["admin"])
    assert BudgetHold.objects.get(run=run).sentence == SENTENCE

    operator = browser.login(users["operator"])
    operator.goto("/budgets/")
    row = operator.locator(f"#budget-{budget.pk}")
    expect(row.locator(".budget-used")).to_contain_text("1,500 tokens used of 1,000 tokens")
    expect(row.locator(".status")).to_have_text("Reached")
    expect(operator.locator("#budget-add")).to_have_count(0)
    expect(operator.get_by_role("link", name="Add a budget")).to_have_count(0)
    expect(row.get_by_role("link", name="Edit")).to_have_count(0)
    expect(row.get_by_role("button", name="Delete")).to_have_count(0)
    shots(operator, "budgets-operator")

    operator.goto("/approvals/")
    card = operator.locator(f".budget-request[data-run-id='{run.pk}']")
    expect(card.locator(".budget-sentence")).to_have_text(SENTENCE)
    expect(card.locator("form.budget-raise")).to_have_count(0)
    expect(card.get_by_role("button", name="Raise")).to_have_count(0)
    expect(card.get_by_role("button", name="Stop with a summary")).to_be_visible()
    shots(operator, "budget-request-operator")
    token = card.locator("input[name=csrfmiddlewaretoken]").first.input_value()  # the Stop form's

    # Neither the pages nor a hand-made POST let an operator in.
    for url in ("/budgets/new/", f"/budgets/{budget.pk}/"):
        assert operator.goto(url).status == 403, url
    response = operator.request.post(f"/budgets/{budget.pk}/raise/", form={
        "csrfmiddlewaretoken": token, "limit": "5000", "until": "2999-01-01T00:00", "applies_to": "run",
        "run": str(run.pk), "next": "/approvals/"})
    assert response.status == 403 and "CSRF" not in response.text()  # refused for the role, not the token
    assert not BudgetRaise.objects.exists()
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED
