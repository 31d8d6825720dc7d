"""The metrics page's time series charts, as a person reads them, at desktop and phone width and
in both colour schemes: drawn, with hover values and a legend that toggles, and their tables
holding the page's own numbers."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.lifecycle.runs import run_cancel, run_create
from runs.models import Agent, Run, Step
from tests.browser import (
    CANCEL_ORDER,
    WEATHER,
    assert_no_violations,
    axe_violations,
    requires_chromium,
    screenshot,
    screenshot_dir,
)

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
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


# Where uPlot drew each tick label, measured as the canvas measures its text: every label whose box
# leaves the canvas (cut off) and every pair of neighbours whose boxes overlap, per chart.
LABEL_PROBLEMS = """() => {
  const measure = document.createElement("canvas").getContext("2d");
  const problems = [];
  for (const figure of document.querySelectorAll(".series-chart")) {
    const u = figure.querySelector(".series-plot").uplot;
    if (!u) continue;
    const ratio = uPlot.pxRatio;
    const plot = { left: u.bbox.left / ratio, top: u.bbox.top / ratio };
    u.axes.forEach((axis, a) => {
      if (!axis.show || !axis._show || !axis._values) return;
      measure.font = axis.font[0];  // as drawn: at the canvas's pixel ratio
      const fontPx = axis.font[2];
      const tick = axis.ticks.show ? axis.ticks.size : 0;
      const boxes = axis._values.map((text, n) => {
        if (text === null || text === "") return null;
        const lines = String(text).split("\\n");
        const width = Math.max(...lines.map((line) => measure.measureText(line).width)) / ratio;
        const at = u.valToPos(axis._splits[n], axis.scale);
        if (axis.side === 2) {
          const top = axis._pos + tick + axis.gap;
          return { text, left: plot.left + at - width / 2, right: plot.left + at + width / 2,
                   top, bottom: top + (lines.length - 1) * fontPx * axis.lineGap + fontPx };
        }
        const left = axis.side === 3 ? axis._pos - tick - axis.gap - width : axis._pos + tick + axis.gap;
        return { text, left, right: left + width, top: plot.top + at - fontPx / 2, bottom: plot.top + at + fontPx / 2 };
      }).filter(Boolean);
      for (const box of boxes) {
        if (box.left < -0.5 || box.right > u.width + 0.5 || box.top < -0.5 || box.bottom > u.height + 0.5) {
          problems.push(`${figure.id} axis ${a}: "${box.text}" cut (${JSON.stringify(box)}, canvas ${u.width}x${u.height})`);
        }
      }
      for (let n = 1; n < boxes.length; n++) {
        const [one, two] = [boxes[n - 1], boxes[n]];
        const apart = axis.side === 2 ? one.right <= two.left || two.right <= one.left
                                      : one.bottom <= two.top || two.bottom <= one.top;
        if (!apart) problems.push(`${figure.id} axis ${a}: "${one.text}" and "${two.text}" overlap`);
      }
    });
    const chart = u.root.getBoundingClientRect();
    const room = figure.getBoundingClientRect();
    if (chart.left < room.left - 0.5 || chart.right > room.right + 0.5) problems.push(`${figure.id}: wider than its card`);
  }
  return problems;
}"""

# Each drawn series: its dash and marker on the canvas, and its legend key as a person sees it.
SERIES_MARKS = """(id) => {
  const figure = document.getElementById(`series-${id}`);
  const u = figure.querySelector(".series-plot").uplot;
  const rows = figure.querySelectorAll(".u-legend .u-series");
  return u.series.slice(1).map((series, n) => {
    const key = rows[n + 1].querySelector(".u-marker");
    const line = key.querySelector("svg line");
    return {
      label: series.label, stroke: series._stroke, dash: (series.dash || []).join(","),
      keyDash: (line.getAttribute("stroke-dasharray") || "").split(" ").filter(Boolean).join(","),
      keyStroke: line.getAttribute("stroke"), marker: key.dataset.marker,
      keyShape: key.querySelector("svg path").getAttribute("d").length > 0,
    };
  });
}"""


def axis_labels(page, chart: str, axis: int) -> list[str]:
    return page.evaluate(
        "([id, a]) => document.querySelector(`#series-${id} .series-plot`).uplot.axes[a]._values.map(String)",
        [chart, axis],
    )


@pytest.fixture
def small_costs_and_slow_models(demo_data):
    """Runs of the last two days costing $0.0012 and $0.0034, answered by two models in 12 and
    8 seconds and in 900 and 450 ms (latency ticks in thousands of ms), one of them failed."""
    agent = Agent.objects.get(name="demo")
    now = timezone.now()
    days = [
        (2, 0.0012, Run.Status.SUCCEEDED, {"large-model": 12_345.0, "small-model": 900.0}),
        (1, 0.0034, Run.Status.FAILED, {"large-model": 8_000.0, "small-model": 450.0}),
        (1, 0.0, Run.Status.SUCCEEDED, {}),
    ]
    for ago, cost, status, latencies in days:
        run = run_create(agent=agent, task=f"A run of {ago} day(s) ago")
        created = now - timedelta(days=ago)
        Run.objects.filter(pk=run.pk).update(
            status=status, cost_usd=cost, tokens_in=600 * ago, tokens_out=200, created_at=created, finished_at=created
        )
        for index, (model, latency) in enumerate(latencies.items(), start=1):
            Step.objects.create(run=run, index=index, iteration=index, model=model, latency_ms=latency,
                                message={"role": "assistant", "content": "done"})


def test_chart_labels_are_whole_cost_ticks_differ_and_each_series_has_its_own_pattern(
        live, browser, users, small_costs_and_slow_models):
    page = browser.login(users["viewer"])
    page.goto("/metrics/")
    found = {}
    for size, scheme in ((DESKTOP, "light"), (DESKTOP, "dark"), (PHONE, "light"), (PHONE, "dark")):
        page.set_viewport_size(size)
        page.emulate_media(color_scheme=scheme)
        for chart in CHARTS:
            expect(page.locator(f"#series-{chart}")).to_have_attribute("data-scheme", scheme)
        page.wait_for_function(
            """() => [...document.querySelectorAll('.series-plot')].every(
                (plot) => !plot.uplot || plot.uplot.width === Math.floor(plot.getBoundingClientRect().width))"""
        )
        where = f"{'phone' if size is PHONE else 'desktop'}-{scheme}"

        # Every tick label is whole, inside its canvas, and clear of its neighbours.
        assert page.evaluate(LABEL_PROBLEMS) == [], where
        # Latency in thousands of ms, its labels whole ("12,000 ms", not ",000 ms").
        latency = axis_labels(page, "latency", 1)
        assert any(re.fullmatch(r"\d{1,3}(,\d{3})+ ms", text) for text in latency), (where, latency)
        # Small costs: each tick has the digits that tell it from the others.
        costs = [text for text in axis_labels(page, "tokens", 2) if text]
        assert len(costs) >= 3 and len(set(costs)) == len(costs), (where, costs)
        assert all(re.fullmatch(r"\$0\.\d{3,4}", text) for text in costs), (where, costs)

        # Each series of a chart has its own dash and marker, and its legend key shows both.
        for chart in ("runs", "latency", "tokens"):
            marks = page.evaluate(SERIES_MARKS, chart)
            assert len(marks) >= 2, (chart, marks)
            assert len({(m["dash"], m["marker"]) for m in marks}) == len(marks), (where, chart, marks)
            for mark in marks:
                assert mark["keyDash"] == mark["dash"] and mark["keyStroke"] == mark["stroke"], (where, mark)
                assert mark["marker"] and mark["keyShape"], (where, mark)
        latency_marks = page.evaluate(SERIES_MARKS, "latency")
        assert len({m["stroke"] for m in latency_marks}) == 2, latency_marks  # a colour per model

        found[where] = axe_violations(page)
        if screenshot_dir() is not None:  # the charts alone, to read their labels
            page.locator("#series").screenshot(path=str(screenshot_dir() / f"metrics-series-{where}.png"))
        screenshot(page, f"metrics-labels-{where}")
    assert_no_violations(found)

    # A day's window at phone width: a point per hour, labelled by the hour (the day under the
    # first), every label whole too.
    yesterday = (timezone.localdate() - timedelta(days=1)).isoformat()
    page.goto(f"/metrics/?date_from={yesterday}&date_to={yesterday}")
    expect(page.locator("#series-tokens")).to_have_attribute("data-drawn", "true")
    hours = axis_labels(page, "tokens", 0)
    assert hours and all(re.fullmatch(r"\d\d:00(\n\d{1,2} \w+)?", text) for text in hours), hours
    assert page.evaluate(LABEL_PROBLEMS) == []
    if screenshot_dir() is not None:
        page.locator("#series").screenshot(path=str(screenshot_dir() / "metrics-series-hours-phone-dark.png"))
