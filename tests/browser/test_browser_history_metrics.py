"""The run history's filters and the metrics page, as a person uses them."""
import re

import pytest
from playwright.sync_api import expect

from runs.lifecycle.runs import run_cancel, run_create
from runs.models import Agent, Run
from tests.browser import CANCEL_ORDER, WEATHER, requires_chromium, screenshot

pytestmark = [pytest.mark.browser, requires_chromium]


@pytest.fixture
def some_runs(launch):
    """One run of each kind, made in this process (faster than through the browser)."""
    lagos = launch(WEATHER)
    london = launch("What's the weather in London?")
    limited = launch("What's the weather in Lagos?", max_iterations=1)  # stops before answering
    waiting = launch(CANCEL_ORDER)
    cancelled = run_cancel(run=run_create(agent=Agent.objects.get(name="demo"), task="Find ticket about the VPN"))
    runs = {"lagos": lagos, "london": london, "limited": limited, "waiting": waiting, "cancelled": cancelled}
    expected = {
        "lagos": Run.Status.SUCCEEDED,
        "london": Run.Status.SUCCEEDED,
        "limited": Run.Status.FAILED,
        "waiting": Run.Status.AWAITING_APPROVAL,
        "cancelled": Run.Status.CANCELLED,
    }
    assert {name: run.status for name, run in runs.items()} == expected
    return runs


def shown_run_ids(page) -> set[int]:
    rows = page.locator("#history-table tr.run-row[data-run-id]")
    return {int(row.get_attribute("data-run-id")) for row in rows.all()}


def test_history_filters_by_status_and_text(live, browser, users, some_runs):
    page = browser.login(users["viewer"])
    page.goto("/runs/")
    rows = page.locator("#history-table tr.run-row[data-run-id]")
    expect(rows).to_have_count(len(some_runs))

    filters = page.locator("#history-filters")
    filters.locator("select[name=status]").select_option(Run.Status.SUCCEEDED)
    filters.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"[?&]status=succeeded"))
    expect(rows).to_have_count(2)
    assert shown_run_ids(page) == {some_runs["lagos"].pk, some_runs["london"].pk}
    for row in rows.all():
        expect(row.locator(".status")).to_have_text("Succeeded")

    filters.locator("select[name=status]").select_option("")
    filters.locator("input[name=q]").fill("lagos")
    filters.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"[?&]q=lagos"))
    expect(rows).to_have_count(2)
    assert shown_run_ids(page) == {some_runs["lagos"].pk, some_runs["limited"].pk}
    expect(page.locator("#history-count")).to_contain_text("2 runs match")
    screenshot(page, "history")

    # At a laptop's 1280 px the header's links keep one row, and no one-word heading or status is
    # broken mid-word ("ITERATIO / NS", "Succeed / ed" before).
    assert page.viewport_size["width"] == 1280
    link_tops = page.locator("#topbar nav > a").evaluate_all("links => links.map(a => a.getBoundingClientRect().top)")
    assert max(link_tops) - min(link_tops) < 5, link_tops
    broken = page.evaluate("""() => [...document.querySelectorAll('#history-table th, #history-table .status')]
        .filter(el => !el.textContent.trim().includes(' '))
        .filter(el => { const r = document.createRange(); r.selectNodeContents(el); return r.getClientRects().length > 1; })
        .map(el => el.textContent.trim())""")
    assert broken == [], broken
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "history-phone")

    # Both at once, and a filter nothing matches.
    filters.locator("select[name=status]").select_option(Run.Status.FAILED)
    filters.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"status=failed"))
    expect(rows).to_have_count(1)
    assert shown_run_ids(page) == {some_runs["limited"].pk}
    filters.locator("input[name=q]").fill("no such task")
    filters.locator("button[type=submit]").click()
    page.wait_for_url(re.compile(r"q=no\+such\+task"))
    expect(rows).to_have_count(0)
    expect(page.locator("#history-table")).to_contain_text("No runs match these filters.")

    filters.get_by_role("link", name="Clear").click()
    expect(rows).to_have_count(len(some_runs))


def test_metrics_page_shows_success_rate_and_charts_for_the_default_period(live, browser, users, some_runs):
    page = browser.login(users["viewer"])
    page.goto("/metrics/")
    # Finished: two succeeded, one failed, one cancelled; the run awaiting approval is left out.
    rate = page.locator("#metric-success-rate")
    expect(rate).to_have_attribute("data-value", "0.500000")
    expect(rate).to_have_text("50.0%")

    status_chart = page.locator("#chart-status")
    for status, count in {
        Run.Status.SUCCEEDED: 2, Run.Status.FAILED: 1, Run.Status.CANCELLED: 1, Run.Status.AWAITING_APPROVAL: 1
    }.items():
        expect(status_chart.locator(f".bar-row[data-key={status}] .num")).to_have_text(str(count))
    expect(page.locator("#chart-stop-reason .bar-row[data-key=final_answer] .num")).to_have_text("2")
    expect(page.locator("#chart-stop-reason .bar-row[data-key=iteration_limit] .num")).to_have_text("1")
    today = Run.objects.get(pk=some_runs["lagos"].pk).created_at.date().isoformat()
    expect(page.locator(f"#chart-tokens-per-day .bar-row[data-day='{today}']")).to_be_visible()
    expect(page.locator("#table-model-latency tr[data-model=demo]")).to_be_visible()
    screenshot(page, "metrics")
