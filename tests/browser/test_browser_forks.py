"""Forking a finished run from one of its steps with an edited tool result, in the browser, and the
side-by-side comparison of the fork with its parent. The fork runs on the real worker."""
import re

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser import RUN_URL, axe_violations, requires_chromium, run_id_of, screenshot, wait_for_seq
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]

SNOW = "London: snowing, -3 C"
ALERTS = {"tool_calls": [{"name": "search_tickets", "arguments": {"query": "weather alerts"}}]}


def weather(call_id: str, city: str) -> dict:
    return {"tool_calls": [{"name": "get_weather", "arguments": {"city": city}, "id": call_id}]}


def test_fork_from_a_step_with_an_edited_result_then_compare(live, browser, users, launch, script):
    # The parent takes the first four answers; the fork, which copies steps 1-2, the last two.
    model = script(
        weather("call_lagos", "Lagos"), weather("call_london", "London"), ALERTS, {"content": "Warm everywhere."},
        ALERTS, {"content": "Snow in London, warm elsewhere."},
    )
    parent = launch("What's the weather in Lagos and London, and any tickets about it?", models=[model])
    assert parent.status == Run.Status.SUCCEEDED and parent.steps.count() == 4

    page = browser.login(users["operator"])
    page.goto(f"/runs/{parent.pk}/")
    wait_for_seq(page, parent.event_seq)
    page.locator("#step-2 .step-fork").click()
    expect(page.locator("#fork-step")).to_have_attribute("data-step", "2")
    expect(page.locator("#fork-step-calls li[data-call-id='call_london']")).to_be_visible()

    page.locator("#fork-form input[name=edit][value=tool_result]").check()
    page.locator("#id_call_id").select_option("call_london")
    expect(page.locator("#id_content")).to_have_value(re.compile("light rain"))  # the recorded result, to edit
    page.locator("#id_content").fill(SNOW)
    page.locator("#fork-button").click()
    page.wait_for_url(RUN_URL)
    fork_id = run_id_of(page)
    assert fork_id != parent.pk
    fork = wait_for_status(fork_id, *Run.FINISHED_STATUSES)
    assert fork.forked_from_id == parent.pk and fork.forked_at_step == 2
    assert fork.status == Run.Status.SUCCEEDED, fork.stop_detail
    expect(page.locator("#forked-from")).to_contain_text(f"Fork of run {parent.pk}")
    expect(page.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(page.locator("#run-answer")).to_have_text("Snow in London, warm elsewhere.")
    # The edited result says so (who, when), next to what really happened, on the fork's page.
    london = page.locator("#timeline .call[data-call-id='call_london']")
    expect(london.locator(".call-result-edited")).to_contain_text("Result edited by operator")
    expect(london.locator(".call-preview")).to_contain_text(SNOW)
    screenshot(page, "fork-edited-result")

    page.locator("#compare-link").click()
    expect(page).to_have_url(re.compile(rf"/runs/{fork_id}/compare/$"))
    expect(page.locator("#compare-fork-point")).to_contain_text(f"Forked from step 2 of run {parent.pk}")
    parent_side = page.locator("#compare-table .compare-parent .compare-step")
    fork_side = page.locator("#compare-table .compare-fork .compare-step")
    # From the fork point on: the parent's steps after step 2 beside the fork's own.
    expect(parent_side.filter(has_text="Step 3")).to_have_count(1)
    expect(parent_side.filter(has_text="Step 4")).to_have_count(1)
    expect(parent_side.filter(has_text="Step 1")).to_have_count(0)
    expect(fork_side.filter(has_text="Step 3")).to_have_count(1)
    expect(fork_side.filter(has_text="Step 3")).to_contain_text("search_tickets")
    expect(page.locator("#compare-fork-point")).to_contain_text("changed the result of call call_london")
    expect(page.locator("#compare-outcome .compare-stop-reason")).to_have_count(2)
    # Each step's answer and each call's arguments and result, what differs marked.
    expect(fork_side.filter(has_text="Step 3").locator(".compare-args")).to_contain_text('"query"')
    expect(page.locator("#compare-table .compare-fork .compare-answer.differs")).to_contain_text("Snow in London")
    expect(page.locator("#compare-outcome .compare-final")).to_have_text(["Warm everywhere.", "Snow in London, warm elsewhere."])
    expect(page.locator("#compare-outcome .differs-flag")).to_have_count(2)
    problems = axe_violations(page)
    assert not problems, problems
    screenshot(page, "fork-compare")

    # The parent's page lists its fork, with a link to the comparison.
    page.goto(f"/runs/{parent.pk}/")
    expect(page.locator(f"#family-forks .family-fork[data-run-id='{fork_id}']")).to_contain_text("from step 2")


def test_a_fork_after_an_admin_took_a_tool_away_says_so_on_the_form_and_in_its_timeline(live, browser, users, launch, script):
    from runs.models import Agent
    from toolsapp.models import Tool

    model = script(weather("call_lagos", "Lagos"), weather("call_london", "London"), {"content": "Warm."},
                   {"content": "Still warm."})
    parent = launch("What's the weather in Lagos and London?", models=[model])
    assert parent.status == Run.Status.SUCCEEDED
    agent = Agent.objects.get(name="demo")
    agent.tools.remove(Tool.objects.get(name="cancel_order"))
    agent.max_iterations = 4
    agent.save()

    page = browser.login(users["operator"])
    page.goto(f"/runs/{parent.pk}/fork/?step=2")
    expect(page.locator("#fork-differences")).to_contain_text("cancel_order is no longer offered")
    expect(page.locator("#fork-differences")).to_contain_text("max iterations 10 -> 4")
    page.locator("#fork-button").click()
    page.wait_for_url(RUN_URL)
    fork = wait_for_status(run_id_of(page), *Run.FINISHED_STATUSES)
    assert fork.status == Run.Status.SUCCEEDED and "cancel_order" not in fork.config["tools"]
    origin = page.locator(".fork-origin .fork-differences")
    expect(origin).to_contain_text(f"Its settings differ from run {parent.pk}'s: cancel_order is no longer offered")
    expect(origin).to_contain_text("max iterations 10 -> 4")
