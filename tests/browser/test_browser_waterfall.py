"""The run page's waterfall: one bar per model request, tool call and wait for a person on one
time axis, growing while the run goes on (driven by the real worker), drawn again from the stored
events after a reload, each bar opening the step or call it belongs to."""
import re

import pytest
from playwright.sync_api import expect

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, Run
from runs.supervision.approvals.decide import approval_decide
from tests.browser import (
    assert_no_violations,
    axe_violations,
    requires_chromium,
    screenshot,
    screenshot_dir,
    wait_for_seq,
)
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# Event times are stored to the millisecond: derived edges may differ from the true ones by that much.
SLACK_MS = 2


def weather(call_id: str, city: str) -> dict:
    return {"id": call_id, "name": "get_weather", "arguments": {"city": city}}


def card_screenshot(locator, name: str) -> None:
    """The waterfall alone, beside the full-page screenshot (when SCREENSHOT_DIR is set)."""
    directory = screenshot_dir()
    if directory is not None:
        locator.screenshot(path=str(directory / f"{name}.png"))


def bars(page) -> list[dict]:
    """Every bar of the waterfall, top to bottom, as the page states it."""
    return page.evaluate(
        """() => [...document.querySelectorAll('#run-waterfall .wf-rows .wf-bar')].map((bar) => ({
            kind: bar.closest('.wf-row').dataset.kind,
            start: Number(bar.dataset.startMs),
            end: bar.dataset.endMs === '' ? null : Number(bar.dataset.endMs),
            step: bar.dataset.step ? Number(bar.dataset.step) : null,
            call: bar.dataset.callPk ? Number(bar.dataset.callPk) : null,
            label: bar.closest('.wf-hit').title,
            box: bar.getBoundingClientRect().toJSON(),
        }))"""
    )


def of_kind(found: list[dict], kind: str) -> list[dict]:
    return [bar for bar in found if bar["kind"] == kind]


def before(first: dict, then: dict) -> bool:
    return first["end"] <= then["start"] + SLACK_MS


def test_waterfall_of_parallel_reads_an_approval_and_an_answer(live, browser, users, script):
    model = script(
        {"tool_calls": [weather("w1", "Lagos"), weather("w2", "London")], "latency": 0.3},
        {"tool_calls": [{"id": "c1", "name": "cancel_order", "arguments": {"order_id": "ORD-1001", "reason": "asked twice"}}],
         "latency": 0.3},
        {"content": "Cancelled order ORD-1001. Lagos is hot, London mild.", "latency": 0.3},
    )
    run = run_create(agent=Agent.objects.get(name="demo"), task="Weather in two cities, then cancel ORD-1001",
                     overrides={"models": [model]})
    operator = users["operator"]
    page = browser.login(operator)
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator("#live-state")).to_have_text("live")
    waterfall = page.locator("#run-waterfall")
    # Folded at first (the timeline starts in the first screen), with what the run used so far.
    expect(waterfall.locator("summary")).to_contain_text("Waterfall")
    expect(waterfall.locator(".wf-chart")).to_be_hidden()
    waterfall.locator("summary").click()
    run_dispatch(run_id=run.pk)

    # Live: the first two answers, the two reads, and the wait for a person growing.
    wait = waterfall.locator(".wf-row-approval .wf-bar")
    expect(wait).to_have_count(1)
    expect(wait).to_have_class(re.compile(r"\bwf-open\b"))
    expect(waterfall.locator(".wf-row-model .wf-bar")).to_have_count(2)
    expect(waterfall.locator(".wf-row-call .wf-bar")).to_have_count(2)
    wait_row = waterfall.locator(".wf-row-approval .wf-hit")
    expect(wait_row).to_have_attribute("title", re.compile(r"^Approval of cancel_order waited .* so far, still waiting"))
    # It grows with the clock, from milliseconds to seconds.
    expect(wait_row).to_have_attribute("title", re.compile(r"waited \d+(\.\d)? s so far"))
    page.set_viewport_size(DESKTOP)
    card_screenshot(waterfall, "waterfall-card-live-desktop")

    approval = Approval.objects.get(run=run)
    approval_decide(approval_id=approval.pk, user=operator, approve=True)
    run = wait_for_status(run.pk, *Run.FINISHED_STATUSES)
    assert run.status == Run.Status.SUCCEEDED, run.stop_detail
    wait_for_seq(page, run.event_seq)
    expect(waterfall.locator(".wf-row-model .wf-bar")).to_have_count(3)
    expect(waterfall.locator(".wf-bar.wf-open")).to_have_count(0)
    live_bars = bars(page)
    check_bars(live_bars, run)

    # The running total beside it: the run's own counters.
    expect(waterfall.locator("[data-total=tokens] dd")).to_have_text(f"{run.tokens_in:,} in / {run.tokens_out:,} out")
    expect(waterfall.locator("[data-total=cost] dd")).to_have_text(f"${run.cost_usd:.6f}")
    expect(waterfall.locator(".wf-row-model .wf-sum").last).to_have_text(
        f"Σ {run.tokens_in + run.tokens_out:,} tokens · ${run.cost_usd:.6f}")

    expect(waterfall.locator(".wf-brief")).to_have_text(
        re.compile(rf"^{run.tokens_in + run.tokens_out} tokens · \${run.cost_usd:.6f} · [\d.]+ s$"))

    # A reload draws the same bars from the stored events (and the page remembers it open).
    page.reload()
    expect(waterfall.locator("details")).to_have_attribute("open", "")
    wait_for_seq(page, run.event_seq)
    expect(waterfall.locator(".wf-row-model .wf-bar")).to_have_count(3)
    drop = ("box", "label")
    assert [{k: v for k, v in b.items() if k not in drop} for b in bars(page)] == \
        [{k: v for k, v in b.items() if k not in drop} for b in live_bars]

    found = {}
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            name = f"{'phone' if size == PHONE else 'desktop'}-{scheme}"
            waterfall.scroll_into_view_if_needed()
            screenshot(page, f"waterfall-{name}")
            card_screenshot(waterfall, f"waterfall-card-{name}")
            found[name] = axe_violations(page)
    page.emulate_media(color_scheme="light")
    assert_no_violations(found)

    # A bar opens what it belongs to: the call, scrolled into view and focused (phone width).
    cancel_pk = run.tool_calls.get(tool_name="cancel_order").pk
    waterfall.locator(f".wf-row-call .wf-bar[data-call-pk='{cancel_pk}']").click()
    call = page.locator(f"#timeline li.call[data-call-pk='{cancel_pk}']")
    expect(call).to_be_in_viewport()
    expect(call).to_be_focused()

    # By keyboard: one tab stop (the row used last), arrows move between rows, Enter opens the step.
    page.set_viewport_size(DESKTOP)
    rows = waterfall.locator(".wf-rows button.wf-hit")
    stop = waterfall.locator(".wf-rows button.wf-hit[tabindex='0']")
    expect(stop).to_have_count(1)
    expect(stop.locator(".wf-bar")).to_have_attribute("data-call-pk", str(cancel_pk))
    stop.focus()
    page.keyboard.press("Home")
    expect(rows.first).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(rows.nth(1)).to_be_focused()
    expect(rows.nth(1)).to_have_attribute("tabindex", "0")
    expect(rows.first).to_have_attribute("tabindex", "-1")
    page.keyboard.press("End")
    expect(rows.last).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#step-3")).to_be_focused()
    expect(page.locator("#step-3")).to_be_in_viewport()


def check_bars(found: list[dict], run: Run) -> None:
    """One bar per model request, tool call and approval wait, in the order the run went."""
    models = sorted(of_kind(found, "model"), key=lambda bar: bar["step"])
    calls = of_kind(found, "call")
    waits = of_kind(found, "approval")
    assert [bar["step"] for bar in models] == [1, 2, 3]
    assert len(calls) == 3 and len(waits) == 1, found
    (queued,) = of_kind(found, "queued")  # created, then picked up by the worker
    assert len(found) == 8 and found[0] == queued and before(queued, models[0]), found
    pks = {call.tool_name + call.call_id: call.pk for call in run.tool_calls.all()}
    reads = [bar for bar in calls if bar["call"] in (pks["get_weatherw1"], pks["get_weatherw2"])]
    (cancel,) = [bar for bar in calls if bar["call"] == pks["cancel_orderc1"]]
    (wait,) = waits
    assert wait["call"] == cancel["call"]
    assert "approved, decided by operator" in wait["label"], wait["label"]

    # The two reads ran together after the first answer: overlapping bars on separate rows.
    for read in reads:
        assert before(models[0], read) and before(read, models[1]), (models, read)
    assert max(r["start"] for r in reads) <= min(r["end"] for r in reads), reads
    one, two = (read["box"] for read in reads)
    assert one["x"] < two["x"] + two["width"] and two["x"] < one["x"] + one["width"], (one, two)
    assert one["y"] != two["y"], "parallel calls share a row"
    # Then the destructive call waited for a person, ran, and the model answered.
    assert before(models[1], wait) and before(wait, cancel) and before(cancel, models[2]), found
    assert wait["end"] - wait["start"] >= 1000, wait  # the test waited for its label to reach seconds


# The time axis as drawn: where it ends (ms from the run's first event), its labels, and whether
# each label lies inside the track and clear of its neighbours.
AXIS = """() => {
  const track = document.querySelector('#run-waterfall .wf-axis-track');
  const room = track.getBoundingClientRect();
  const ticks = [...track.querySelectorAll('.wf-tick')].map((tick) => ({
    ms: Number(tick.dataset.ms), text: tick.textContent, box: tick.getBoundingClientRect().toJSON() }));
  const inside = ticks.every(({ box }) => box.left >= room.left - 0.5 && box.right <= room.right + 0.5);
  const apart = ticks.every((tick, n) => n === 0 || ticks[n - 1].box.right <= tick.box.left);
  return { endMs: Number(track.dataset.endMs), ticks, inside, apart, track: room.toJSON() };
}"""


def test_a_short_run_gets_an_axis_at_its_own_scale_and_its_parallel_calls_bars_apart(live, browser, users, script, launch):
    model = script(
        {"tool_calls": [weather("w1", "Lagos"), weather("w2", "London")]},
        {"content": "Lagos is hot, London mild."},
        latency=0.02,
    )
    run = launch("Weather in Lagos and London", models=[model])  # driven in this process: no queue wait
    assert run.status == Run.Status.SUCCEEDED, run.stop_detail
    page = browser.login(users["viewer"])
    page.goto(f"/runs/{run.pk}/")
    waterfall = page.locator("#run-waterfall")
    waterfall.locator("summary").click()
    wait_for_seq(page, run.event_seq)
    expect(waterfall.locator(".wf-row-call .wf-bar")).to_have_count(2)
    expect(waterfall.locator(".wf-row-model .wf-bar")).to_have_count(2)

    found = {}
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            name = f"{'phone' if size == PHONE else 'desktop'}-{scheme}"
            page.wait_for_function(
                "() => document.querySelector('#run-waterfall .wf-axis-track .wf-tick:last-child').getBoundingClientRect()"
                ".right <= document.querySelector('#run-waterfall .wf-axis-track').getBoundingClientRect().right + 0.5"
            )
            axis = page.evaluate(AXIS)
            drawn = bars(page)
            took = max(bar["end"] for bar in drawn)  # the run's last bar ends where the run did
            # The axis ends at the run's end or the next tick after it, not at a second or more.
            assert took <= axis["endMs"] < 2 * took + 1, (name, took, axis)
            if took < 500:
                assert axis["endMs"] < 1000 and all(t["text"] == "0" or t["text"].endswith(" ms") for t in axis["ticks"]), axis
            assert axis["inside"] and axis["apart"] and len(axis["ticks"]) >= 2, (name, axis)
            track = axis["track"]
            # So the run fills most of the track, its model requests are bars, not specks...
            assert max(bar["box"]["x"] + bar["box"]["width"] for bar in drawn) >= track["x"] + track["width"] / 2, drawn
            for bar in of_kind(drawn, "model"):
                assert bar["box"]["width"] >= (bar["end"] - bar["start"]) / axis["endMs"] * track["width"] - 1.5, bar
                assert bar["box"]["width"] >= 8, (name, bar)
            # ...and its two parallel calls are two bars on their own rows, each wide enough to see.
            one, two = (bar["box"] for bar in of_kind(drawn, "call"))
            assert one["y"] != two["y"] and one["width"] >= 4 and two["width"] >= 4, (one, two)
            waterfall.scroll_into_view_if_needed()
            screenshot(page, f"waterfall-short-{name}")
            card_screenshot(waterfall, f"waterfall-short-card-{name}")
            found[name] = axe_violations(page)
    page.emulate_media(color_scheme="light")
    assert_no_violations(found)
