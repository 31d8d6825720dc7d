"""What a provider's odd answer looks like on the run page: the reasoning folded apart from the
answer, and a note saying which characters were replaced."""
import json

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser import requires_chromium, wait_for_seq

pytestmark = [pytest.mark.browser, requires_chromium]

THINKING = "The user wants Lagos. It is sunny there."


def test_the_reasoning_is_shown_folded_apart_from_the_answer_with_a_note_on_replaced_characters(
    live, browser, users, launch, script
):
    body = {
        "id": "raw", "object": "chat.completion", "created": 0, "model": "raw",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": [
            {"type": "thinking", "thinking": THINKING}, {"type": "text", "text": "Lagos is sunny \ud83d."},
        ]}}],
    }
    run = launch("weather in Lagos?", models=[script({"raw": json.dumps(body), "status": 200})])
    assert run.status == Run.Status.SUCCEEDED and run.answer == "Lagos is sunny \ufffd."

    page = browser.login(users["operator"])
    page.goto(f"/runs/{run.pk}/")
    wait_for_seq(page, run.event_seq)
    step = page.locator("#step-1")
    expect(step.locator(".assistant-text")).to_have_text("Lagos is sunny \ufffd.")
    folded = step.locator("details.step-reasoning")
    expect(folded).not_to_have_attribute("open", "")
    expect(folded.locator("summary")).to_have_text("Reasoning")
    expect(folded.get_by_text(THINKING)).to_be_hidden()
    folded.locator("summary").click()
    expect(folded.get_by_text(THINKING)).to_be_visible()
    expect(step.locator(".assistant-text")).not_to_contain_text(THINKING)
    expect(step.locator(".step-notes")).to_contain_text("replaced with U+FFFD")
