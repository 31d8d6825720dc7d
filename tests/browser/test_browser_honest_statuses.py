"""Statuses that tell the truth, as a person sees them at 1280×800 and 390×844, light and dark: a run
whose destructive call a person rejected stays "Succeeded" but is marked "1 call rejected" in the
history and on its page, and the history's filter finds it; a run stopped with a summary reads
"Stopped by an operator"; on a phone the history shows runs first (filters folded, status in view);
a run a budget holds offers the raise instead of a Resume that would be refused, and the raise lets
it go on; the tool page says what each approval setting does; and a critical call in a project
with one person who may decide says on its card why no one can approve it."""
import re

import pytest
from playwright.sync_api import expect

from runs.controls.levers import run_stop
from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, Budget, Run
from runs.supervision.approvals.decide import approval_decide
from tests.browser import PASSWORD, assert_no_violations, axe_violations, requires_chromium, screenshot, wait_for_seq
from tests.conftest import wait_for_status, wait_until
from tests.projects import member, project
from toolsapp.models import Tool

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}


def looked_at(page, name: str, found: dict) -> None:
    """Screenshots of the page at both sizes, light and dark, and what axe finds in each; the page
    is left light at desktop size."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            page.set_viewport_size(size)
            found[f"{name} {scheme}{suffix}"] = axe_violations(page)
            screenshot(page, f"{name}-{scheme}{suffix}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(DESKTOP)


def rejected_run(launch, operator) -> Run:
    """A run whose cancel_order call a person rejected; the demo model then answers, so it succeeds."""
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval_decide(approval_id=Approval.objects.get(run=run).pk, user=operator, approve=False,
                    reason="the customer asked to keep it")
    return wait_for_status(run.pk, *Run.FINISHED_STATUSES)  # the decision hands the run to the live worker


def stopped_run(script, operator) -> Run:
    """A run an operator stopped with a summary."""
    summary = {"repeat": True, "if_tool_choice": "none", "content": "Looked up the weather once."}
    weather = [{"tool_calls": [{"name": "get_weather", "arguments": {"city": f"Lagos {n}"}}]} for n in range(8)]
    model = script(summary, *weather, {"content": "never reached"}, latency=1.0)
    run = run_create(agent=Agent.objects.get(name="demo"), task="Weather, again and again", user=operator,
                     overrides={"models": [model]})
    run_dispatch(run_id=run.pk)
    wait_for_status(run.pk, Run.Status.RUNNING)
    run_stop(run_id=run.pk, user=operator)
    wait_for_status(run.pk, *Run.FINISHED_STATUSES)
    wait_until(lambda: not Run.objects.get(pk=run.pk).summary_pending, message="the summary written")
    return Run.objects.get(pk=run.pk)


def test_a_rejected_call_is_marked_and_found_and_an_operator_stop_says_so(live, browser, users, launch, script):
    rejected = rejected_run(launch, users["operator"])
    assert rejected.status == Run.Status.SUCCEEDED, rejected.stop_detail  # the status stays as it is
    plain = launch("What's the weather in Lagos?")
    stopped = stopped_run(script, users["operator"])
    assert (stopped.status, stopped.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.OPERATOR_STOP)

    page = browser.login(users["viewer"])
    page.goto("/runs/")
    found = {}
    row = page.locator(f"#history-table tr.run-row[data-run-id='{rejected.pk}']")
    expect(row.locator(".status")).to_have_text("Succeeded")
    expect(row.locator(".run-mark")).to_have_text("1 call rejected")
    expect(page.locator(f"tr.run-row[data-run-id='{plain.pk}'] .run-mark")).to_have_count(0)
    expect(page.locator(f"tr.run-row[data-run-id='{stopped.pk}'] .status")).to_have_text("Stopped by an operator")
    looked_at(page, "history-marks", found)

    # The filter finds it, and only it; the filters stay open once one is set.
    page.locator("#history-filters select[name=decisions]").select_option("rejected")
    page.locator("#history-filters button[type=submit]").click()
    page.wait_for_url(re.compile(r"[?&]decisions=rejected"))
    rows = page.locator("#history-table tr.run-row")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-run-id", str(rejected.pk))
    expect(page.locator("#history-filter-summary")).to_have_text("Filters (1 set)")
    page.set_viewport_size(PHONE)
    expect(page.locator("#history-filters select[name=decisions]")).to_be_visible()  # open: a filter is set
    page.set_viewport_size(DESKTOP)
    looked_at(page, "history-filtered-rejected", found)

    page.goto(f"/runs/{rejected.pk}/")
    wait_for_seq(page, rejected.event_seq)
    expect(page.locator("#run-status")).to_have_text("Succeeded")
    expect(page.locator("h1 .run-mark")).to_have_text("1 call rejected")
    looked_at(page, "run-page-rejected", found)
    page.goto(f"/runs/{stopped.pk}/")
    wait_for_seq(page, Run.objects.get(pk=stopped.pk).event_seq)
    expect(page.locator("#run-status")).to_have_text("Stopped by an operator")
    expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.CANCELLED)
    expect(page.locator("#timeline .run-end .run-end-status")).to_have_text("Stopped by an operator")  # the end line too
    looked_at(page, "run-page-stopped", found)
    assert_no_violations(found)


def test_the_history_on_a_phone_shows_runs_first_with_their_status(live, browser, users, launch):
    runs = [launch(f"What's the weather in Lagos, day {n}? Say whether to take an umbrella.") for n in range(4)]
    page = browser.login(users["viewer"])
    page.set_viewport_size(PHONE)
    page.goto("/runs/")
    # The filters are folded; the first screen shows runs, each with its whole status.
    expect(page.locator("#history-filter-box")).not_to_have_attribute("open", "")
    expect(page.locator("#history-filters select[name=status]")).to_be_hidden()
    first = page.locator(f"tr.run-row[data-run-id='{runs[-1].pk}']")
    box = first.bounding_box()
    assert box["y"] + box["height"] <= PHONE["height"], box
    status = first.locator(".status")
    expect(status).to_be_in_viewport()
    status_box = status.bounding_box()
    assert status_box["x"] >= 0 and status_box["x"] + status_box["width"] <= PHONE["width"], status_box
    # The task reads as a line of words, not a word a line: its box is wider than tall.
    task = first.locator("td.run-task").bounding_box()
    assert task["width"] > PHONE["width"] * 0.7 and task["height"] < 4 * 22, task
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    found = {}
    looked_at(page, "history-phone-first-screen", found)
    # Opening the filters shows them; a search keeps them open on the next page.
    page.set_viewport_size(PHONE)
    page.reload()
    page.locator("#history-filter-summary").click()
    page.get_by_label("Search").fill("day 2")
    page.get_by_label("Search").press("Enter")
    expect(page.locator("tr.run-row")).to_have_count(1)
    expect(page.get_by_label("Search")).to_be_visible()
    assert_no_violations(found)


def test_a_budget_paused_run_offers_the_raise_and_the_raise_lets_it_go_on(live, browser, users, script):
    Budget.objects.create(name="Support", scope="agent", agent=Agent.objects.get(name="demo"),
                          measure="tokens", period="day", limit=1000)
    model = script(
        {"tool_calls": [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Lagos"}'}],
         "usage": {"prompt_tokens": 1500, "completion_tokens": 0}, "latency": 2.5},
        {"content": "Sunny in Lagos.", "usage": {"prompt_tokens": 20, "completion_tokens": 5}},
    )
    run = run_create(agent=Agent.objects.get(name="demo"), task="What's the weather in Lagos?", user=users["admin"],
                     overrides={"models": [model], "summarize_on_stop": False})
    run_dispatch(run_id=run.pk)
    run = wait_for_status(run.pk, Run.Status.PAUSED)

    # An operator sees what lets it go on and who may do it, not a Resume that would be refused.
    operator = browser.login(users["operator"])
    operator.goto(f"/runs/{run.pk}/")
    budget = operator.locator("#run-budget")
    expect(budget).to_contain_text("Budget reached: Support, 1,000 tokens a day")
    expect(budget.locator("#run-budget-how")).to_contain_text("Resume cannot let it go on before")
    expect(budget.locator("#run-budget-who")).to_have_text("Who may raise it: admin.")
    expect(budget.get_by_role("link", name="Its budget request in the queue")).to_have_attribute(
        "href", "/approvals/#budget-requests")
    expect(budget.locator("form.budget-raise")).to_have_count(0)
    expect(operator.locator("#resume-button")).to_be_hidden()
    expect(operator.locator("#stop-button")).to_be_visible()
    found = {}
    looked_at(operator, "run-page-budget-operator", found)

    admin = browser.login(users["admin"])
    admin.goto(f"/runs/{run.pk}/")
    form = admin.locator("#run-budget form.budget-raise")
    expect(form.get_by_label("this run only")).to_be_checked()
    expect(admin.locator("#resume-button")).to_be_hidden()
    looked_at(admin, "run-page-budget-admin", found)
    form.locator(".budget-limit").fill("5000")
    with admin.expect_navigation():
        form.get_by_role("button", name="Raise and let it go on").click()
    assert admin.url.endswith(f"/runs/{run.pk}/")  # the answer where the raise was made
    expect(admin.locator(".messages li")).to_contain_text(f"Budget Support raised to 5,000 tokens for run {run.pk} until")
    expect(admin.locator(".messages li")).to_contain_text(f"Run {run.pk} went on.")
    run = wait_for_status(run.pk, Run.Status.SUCCEEDED)
    expect(admin.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(admin.locator("#run-answer")).to_have_text("Sunny in Lagos.")
    expect(admin.locator("#run-budget")).to_be_hidden()
    assert_no_violations(found)


def test_the_tool_page_says_what_each_setting_does_and_a_one_decider_project_is_warned(live, browser, users, launch):
    billing = project("Billing")
    Agent.objects.filter(name="demo").update(project=billing)
    ada = member("ada", billing, "admins", password=PASSWORD)
    tool = Tool.objects.get(name="cancel_order")
    Tool.objects.filter(pk=tool.pk).update(project=billing, critical=True)

    page = browser.login(ada)
    page.goto(f"/tools/{tool.pk}/")
    expect(page.locator("#tool-always-ask")).to_have_text(
        "no: a call that waits for approval may be approved by a rule, a grant or the run's approval policy, "
        "not only by a person.")
    expect(page.locator("#tool-critical")).to_contain_text(
        "yes: each call needs two different people's approval, neither the run's launcher.")
    expect(page.locator("#tool-critical-warning")).to_have_text(
        "Its calls can never be approved: each needs two different people's approval, and only ada may decide "
        "calls in Billing. Give a second person the operator role in Billing, or clear Critical.")
    found = {}
    looked_at(page, "tool-page-critical-warning", found)

    # A call of it waits; its card says why no one can approve it.
    run = launch("Cancel order ORD-1001")
    approval = Approval.objects.get(run=run)
    assert approval.required_approvals == 2
    Run.objects.filter(pk=run.pk).update(created_by=ada)
    page.goto("/approvals/")
    card = page.locator(f".approval[data-approval-id='{approval.pk}']")
    expect(card.locator(".no-approver")).to_have_text(
        "No one can give this call the 2 more approvals it needs: no one else may approve it in Billing "
        "(left out: ada, who launched the run). Reject it, or ask an admin of Billing to give another person "
        "the operator role there.")
    looked_at(page, "queue-no-approver", found)
    assert_no_violations(found)
