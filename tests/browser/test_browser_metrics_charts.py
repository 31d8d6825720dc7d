"""The metrics page's time series charts, as a person reads them, at desktop and phone width and
in both colour schemes: drawn, with hover values and a legend that toggles, and their tables
holding the page's own numbers."""
import re

import pytest
from playwright.sync_api import expect

from runs.lifecycle.runs import run_cancel, run_create
from runs.models import Agent, Run
from tests.browser import CANCEL_ORDER, WEATHER, axe_violations, requires_chromium, screenshot

pytestmark = [pytest.mark.browser, requires_chromium]

CHARTS = ("runs", "error-rate", "latency", "tokens", "tool-errors", "approval-wait", "deciders")


@pytest.fixture
def seeded_runs(launch):
    """Two succeeded runs, one failed at its limit, one decided by the run's policy, one cancelled."""
    runs = [
        launch(WEATHER),
        launch("What's the weather in London?"),
        launch("What's the weather in Lagos?", max_iterations=1),
        launch(CANCEL_ORDER, approval_policy="approve"),
        run_cancel(run=run_create(agent=Agent.objects.get(name="demo"), task="Find ticket about the VPN")),
    ]
    assert [run.status for run in runs].count(Run.Status.SUCCEEDED) >= 2
    return runs


def table_of(page, chart: str) -> list[dict]:
    """The rows of a chart's table, opened as a person would: {column header: cell text or value}."""
    figure = page.locator(f"#series-{chart}")
    if not figure.locator("details").evaluate("details => details.open"):
        figure.locator("summary").click()
    table = figure.locator(f"#table-series-{chart}")
    expect(table).to_be_visible()
    return table.evaluate(
        """table => {
          const heads = [...table.tHead.rows[0].cells].map(cell => cell.textContent);
          return [...table.tBodies[0].rows].map(row => Object.fromEntries([...row.cells].map(
            (cell, i) => [heads[i], cell.dataset.value === undefined ? cell.textContent : cell.dataset.value])));
        }"""
    )


def column_sums(rows: list[dict]) -> dict:
    sums = {}
    for row in rows:
        for name, value in list(row.items())[1:]:
            sums[name] = sums.get(name, 0) + (float(value) if value else 0)
    return sums


def shown_counts(page, selector: str) -> dict:
    """{label: count} of the page's own bars (the totals beside the charts)."""
    return {
        row.locator("span").first.inner_text(): int(row.locator(".num").inner_text().replace(",", ""))
        for row in page.locator(f"{selector} .bar-row").all()
    }


def test_metrics_charts_draw_the_seeded_figures_and_their_tables_equal_the_page(live, browser, users, seeded_runs):
    page = browser.login(users["viewer"])
    page.goto("/metrics/")
    for chart in CHARTS:
        expect(page.locator(f"#series-{chart}")).to_have_attribute("data-drawn", "true")
    expect(page.locator("#series-runs")).to_have_attribute("data-unit", "day")
    expect(page.locator("#series-runs canvas")).to_be_visible()

    # Runs by outcome: its columns add up to the page's runs by status; tokens per day equal the page's.
    assert column_sums(table_of(page, "runs")) == {label: float(n) for label, n in shown_counts(page, "#chart-status").items()}
    tokens = {row["Day"]: row for row in table_of(page, "tokens")}
    shown = page.locator("#chart-tokens-per-day .bar-row[data-day]")
    assert shown.count() == len(tokens)
    assert sum(int(row["Tokens"]) for row in tokens.values()) == sum(
        int(row.get_attribute("data-tokens")) for row in shown.all()
    ) > 0
    latency = table_of(page, "latency")
    assert any(name.startswith("demo") for name in latency[0]), latency[0]
    deciders = column_sums(table_of(page, "deciders"))
    assert deciders.get("The run's policy") == float(
        page.locator("#supervision-deciders .bar-row[data-decider=policy]").get_attribute("data-count")
    ) > 0

    # The legend: a click hides a series and shows it again; pointing at the chart shows its values.
    legend = page.locator("#series-runs .u-legend .u-series").filter(has_text="Succeeded")
    legend.click()
    expect(legend).to_have_class(re.compile(r"\bu-off\b"))
    legend.click()
    expect(legend).not_to_have_class(re.compile(r"\bu-off\b"))
    plot = page.locator("#series-runs .u-over")
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
    expect(legend.locator(".u-value")).to_have_text(str(int(column_sums(table_of(page, "runs"))["Succeeded"])))

    assert axe_violations(page) == []
    screenshot(page, "metrics-charts")
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_function("() => document.querySelector('#series-runs .uplot').offsetWidth <= 390")
    screenshot(page, "metrics-charts-phone")
    page.emulate_media(color_scheme="dark")
    assert axe_violations(page) == []
    screenshot(page, "metrics-charts-phone-dark")
    page.set_viewport_size({"width": 1280, "height": 900})
    screenshot(page, "metrics-charts-dark")

    # A day's window: a point per hour, the same totals.
    today = Run.objects.get(pk=seeded_runs[0].pk).created_at.date().isoformat()
    page.goto(f"/metrics/?date_from={today}&date_to={today}")
    expect(page.locator("#series-runs")).to_have_attribute("data-unit", "hour")
    expect(page.locator("#series-runs")).to_have_attribute("data-drawn", "true")
    assert column_sums(table_of(page, "runs")) == {label: float(n) for label, n in shown_counts(page, "#chart-status").items()}
    assert browser.errors == []
