"""The answer being written, on the live run page: a scripted model streams a known answer slowly
through the real worker; the page shows a growing prefix before the step is committed (also
after a reload mid-answer), then exactly the committed text. A stream cut in the middle is shown
struck through as discarded, and the next model's answer takes its place."""
import pytest
from playwright.sync_api import expect

from runs.models import Run, Step
from tests.browser import RUN_URL, axe_violations, requires_chromium, run_id_of, screenshot
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]

ANSWER = ("Lagos is hot and humid today, 31 degrees with a light breeze from the sea; "
          "London is grey, 12 degrees, with rain expected after four in the afternoon.")
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}

# The streamed text shown while the step is not committed yet, or false (evaluated in the page).
SHOWN_BEFORE_COMMIT = """min => {
  const words = document.querySelector('#answer-stream .stream[data-state=writing] .stream-words');
  if (!words || document.getElementById('step-1')) return false;
  return words.textContent.length >= min ? words.textContent : false;
}"""


def launch_from_the_page(page, models: str) -> int:
    page.goto("/runs/new/")
    page.locator("#id_agent").select_option(label="demo")
    page.locator("#id_task").fill("What's the weather in Lagos and London?")
    page.locator("#launch-overrides > summary").click()
    page.locator("#id_models").fill(models)
    page.locator("#launch-button").click()
    page.wait_for_url(RUN_URL)
    return run_id_of(page)


def shown_before_commit(page, at_least: int) -> str:
    return page.wait_for_function(SHOWN_BEFORE_COMMIT, arg=at_least, timeout=30_000).json_value()


def test_the_answer_grows_on_the_page_before_its_step_is_committed_then_is_exactly_the_committed_text(
    live, browser, users, script
):
    # 26 chunks 0.22 s apart: about 6 s of writing, after a second of "reading".
    model = script({"content": ANSWER, "latency": 1.0, "stream": {"chunk_chars": 6, "chunk_delay": 0.22}})
    page = browser.login(users["operator"])
    run_id = launch_from_the_page(page, model)

    first = shown_before_commit(page, 1)
    later = shown_before_commit(page, len(first) + 6)
    assert ANSWER.startswith(first) and ANSWER.startswith(later) and len(later) > len(first)
    stream = page.locator("#answer-stream .stream[data-state=writing]")
    expect(stream.locator(".stream-state")).to_have_text("writing… (not committed yet)")
    expect(stream.locator(".stream-model")).to_have_text(model)
    screenshot(page, "run-streaming-desktop")
    page.emulate_media(color_scheme="dark")
    screenshot(page, "run-streaming-desktop-dark")
    assert axe_violations(page) == []
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(PHONE)
    screenshot(page, "run-streaming-phone")
    page.set_viewport_size(DESKTOP)

    # Opened again mid-answer: the text so far, then the stream goes on.
    page.reload()
    again = shown_before_commit(page, len(later) + 1)
    assert ANSWER.startswith(again)

    expect(page.locator("#step-1 .assistant-text")).to_have_text(ANSWER, timeout=30_000)
    expect(page.locator("#answer-stream")).to_be_hidden()
    run = wait_for_status(run_id, Run.Status.SUCCEEDED)
    assert Step.objects.get(run=run).message["content"] == ANSWER == run.answer


def test_a_stream_cut_in_the_middle_is_shown_discarded_and_the_next_models_answer_replaces_it(
    live, browser, users, script
):
    cut = script({"content": "Lagos is on fire with heat and the sea is boiling over", "latency": 0.5,
                  "stream": {"chunk_chars": 5, "chunk_delay": 0.3, "cut_after": 8}})
    good = script({"content": "Lagos: 31 degrees.", "latency": 2.5})
    page = browser.login(users["operator"])
    run_id = launch_from_the_page(page, f"{cut}, {good}")

    discarded = page.locator("#answer-stream .stream[data-state=discarded]")
    expect(discarded).to_be_visible(timeout=30_000)
    expect(discarded.locator(".stream-state")).to_have_text("discarded: this answer was not used")
    expect(discarded.locator(".stream-reason")).to_contain_text("the streamed answer was cut off")
    expect(discarded.locator(".stream-words")).to_contain_text("Lagos is on")
    assert discarded.locator(".stream-text").evaluate("n => getComputedStyle(n).textDecorationLine") == "line-through"
    assert page.locator("#step-1").count() == 0
    screenshot(page, "run-stream-discarded-desktop")

    step = page.locator("#step-1")
    expect(step.locator(".assistant-text")).to_have_text("Lagos: 31 degrees.", timeout=30_000)
    expect(step.locator(".step-errors")).to_contain_text("the streamed answer was cut off")
    expect(step.locator(".step-errors")).to_contain_text("the partial answer was discarded")
    expect(page.locator("#answer-stream")).to_be_hidden()
    wait_for_status(run_id, Run.Status.SUCCEEDED)
