"""Replaying a step's request from the run page: an operator sends it to two models, reads
their answers side by side, and finds the replay listed on the run page with what it spent."""
import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser import axe_violations, requires_chromium, screenshot, wait_for_seq

pytestmark = [pytest.mark.browser, requires_chromium]


def test_an_operator_replays_a_step_against_two_models(live, browser, users, launch, script):
    original = script({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}}]},
                      {"content": "Lagos is sunny."})
    run = launch("Weather in Lagos?", models=[original])
    assert run.status == Run.Status.SUCCEEDED
    calm = script({"content": "Lagos: 31 °C and sunny."})
    eager = script({"tool_calls": [{"name": "get_weather", "arguments": {"city": "London"}}]})
    page = browser.login(users["operator"])
    page.goto(f"/runs/{run.pk}/")
    wait_for_seq(page, run.event_seq)
    page.locator("#step-2").get_by_role("link", name="Replay this request").click()
    expect(page.locator("h1")).to_have_text(f"Replay step 2 of run {run.pk}")
    page.locator("#id_models").fill(f"{calm}\n{eager}")
    page.locator("#replay-button").click()
    answers = page.locator("#replay-answers .replay-answer")
    expect(answers).to_have_count(2)
    expect(answers.nth(0).locator(".replay-content")).to_have_text("Lagos: 31 °C and sunny.")
    expect(answers.nth(1).locator(".replay-calls")).to_contain_text("asks for get_weather")
    expect(answers.nth(1).locator(".replay-calls")).to_contain_text("(not run)")
    for width, name in ((1280, "step-replay-desktop"), (390, "step-replay-phone")):
        page.set_viewport_size({"width": width, "height": 900})
        screenshot(page, name)

    page.get_by_role("link", name="Back to the run").click()
    replays = page.locator("#run-replays .replay-record")
    expect(replays).to_have_count(1)
    expect(replays.locator(".replay-who")).to_have_text("operator")
    expect(replays.locator(".replay-models")).to_have_text(f"{calm}, {eager}")
    expect(replays.locator(".replay-spent")).to_contain_text("tokens · $")
    for width, name in ((1280, "run-replays-desktop"), (390, "run-replays-phone")):
        page.set_viewport_size({"width": width, "height": 900})
        replays.scroll_into_view_if_needed()
        screenshot(page, name)
    assert axe_violations(page) == []
