"""Results, arguments and JSON answers read as a tree on the run page (fold, search, copy, masked
fields), at desktop and phone width, light and dark."""
import json

import pytest
from playwright.sync_api import expect

from tests.browser import (
    assert_no_violations,
    axe_violations,
    requires_chromium,
    screenshot,
    screenshot_dir,
    wait_for_seq,
)
from toolsapp.models import Tool

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
LONG_NOTE = "Heat warning for the whole coast: " + "drink water, stay in the shade, check on neighbours. " * 5
ANSWER = {
    "summary": {
        "city": "Lagos",
        "details": {"alerts": [{"level": "high", "note": "deep needle under two folds"}], "count": 1, "checked": True},
    },
    "advice": LONG_NOTE,
    "sources": None,
}


def part_screenshot(locator, name: str) -> None:
    """A close-up of one part of the page (the full page at phone width is too tall to read)."""
    directory = screenshot_dir()
    if directory is not None:
        locator.screenshot(path=str(directory / f"{name}.png"))


def call_item(page, tool: str):
    return page.locator("#timeline .call[data-call-pk]").filter(has=page.locator(".call-tool", has_text=tool))


@pytest.fixture
def json_run(launch, script):
    # The city is a sensitive field here: the page (and so the tree) only ever has it masked.
    Tool.objects.filter(name="get_weather").update(sensitive_fields=["city"])
    model = script(
        {"tool_calls": [
            {"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}},
            {"id": "s1", "name": "search_tickets", "arguments": {"query": "weather alerts"}},
        ]},
        {"content": json.dumps(ANSWER)},
    )
    return launch("The weather in Lagos, as JSON", models=[model])


def test_the_run_page_shows_json_as_a_tree_that_folds_searches_and_copies(live, browser, users, json_run):
    run = json_run
    page = browser.login(users["viewer"])
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for size in (DESKTOP, PHONE):
            where = f"{scheme}-{'phone' if size == PHONE else 'desktop'}"
            page.set_viewport_size(size)
            page.goto(f"/runs/{run.pk}/")
            wait_for_seq(page, run.event_seq)

            # A sensitive field reads as masked, in the tree and in the call's name.
            weather = call_item(page, "get_weather")
            masked = weather.locator(".call-args-json .jt-masked-leaf")
            expect(masked).to_contain_text('"city": "••••"')
            expect(masked.locator(".jt-type")).to_have_text("masked")
            expect(weather.locator(".call-label")).to_have_text('get_weather(city="••••") · step 1')
            expect(weather.locator(".call-args-json")).not_to_contain_text("Lagos")  # the raw value is not in the tree

            # The model's JSON answer is a tree: the deep value is folded away until searched.
            answer = page.locator("#step-2 .assistant-json")
            expect(answer.locator(".jt-tree")).to_be_visible()
            expect(answer.get_by_text("deep needle under two folds")).to_have_count(0)
            alerts = answer.locator(".jt-toggle", has_text='"alerts"')
            expect(alerts).to_have_attribute("aria-expanded", "false")
            answer.get_by_role("searchbox", name="Search the model's answer in step 2").fill("needle")
            expect(answer.locator("mark")).to_have_text("needle")
            expect(answer.locator("mark")).to_be_visible()
            expect(answer.locator(".jt-status")).to_have_text("1 match")
            expect(alerts).to_have_attribute("aria-expanded", "true")

            # Fold and unfold, by mouse and by keyboard.
            summary = answer.locator(".jt-toggle", has_text='"summary"')
            expect(summary).to_have_attribute("aria-expanded", "true")
            summary.click()
            expect(summary).to_have_attribute("aria-expanded", "false")
            expect(answer.locator("mark")).to_be_hidden()
            summary.focus()
            page.keyboard.press("Enter")
            expect(summary).to_have_attribute("aria-expanded", "true")
            expect(answer.locator("mark")).to_be_visible()

            # A long string is folded, with "show all".
            advice = answer.locator(".jt-leaf", has_text='"advice"')
            more = advice.get_by_role("button", name=f"Show all {len(LONG_NOTE)} characters of \"advice\"")
            expect(more).to_have_attribute("aria-expanded", "false")
            expect(advice.locator(".jt-text")).not_to_have_text(LONG_NOTE)
            more.click()
            expect(advice.locator(".jt-text")).to_have_text(LONG_NOTE)

            # Copy puts the JSON (as the page has it: masked) on the clipboard.
            copy = weather.get_by_role("button", name="Copy the arguments of get_weather as JSON")
            copy.click()
            expect(weather.locator(".call-args-json .jt-status")).to_have_text("Copied.")
            assert json.loads(page.evaluate("navigator.clipboard.readText()")) == {"city": "••••"}

            found[where] = axe_violations(page)
            screenshot(page, f"json-tree-{where}")
            part_screenshot(page.locator("#timeline"), f"json-tree-timeline-{where}")
    assert_no_violations(found)



def test_a_long_result_shows_its_start_then_the_whole_as_a_tree_in_its_place(live, browser, users, launch, script):
    body = "The ticket's long body: " + "the air conditioning in the Lagos office stopped again. " * 8
    model = script(
        {"tool_calls": [{"id": "t1", "name": "create_ticket",
                         "arguments": {"title": "[TEST] Heat in Lagos", "body": body, "priority": "low"}}]},
        {"content": "Filed."},
    )
    run = launch("File a ticket", models=[model])
    page = browser.login(users["viewer"])
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"/runs/{run.pk}/")
        wait_for_seq(page, run.event_seq)
        ticket = call_item(page, "create_ticket")
        preview = ticket.locator(".call-result")
        expect(preview.locator("summary")).to_contain_text("the first 300 characters: Full result shows all")
        expand = ticket.locator(".call-expand")
        expect(expand).to_have_text("Full result")
        expect(expand).to_have_attribute("aria-expanded", "false")
        expand.click()
        # The whole result, as a tree, in the preview's place (not below a copy of it).
        full = ticket.locator(".call-full .jt")
        expect(full.locator(".jt-leaf", has_text='"body"')).to_be_visible()
        expect(preview).to_be_hidden()
        full.get_by_role("button", name=f'Show all {len(body)} characters of "body"').click()
        expect(full.locator(".jt-leaf", has_text='"body"').locator(".jt-text")).to_have_text(body)
        expect(expand).to_have_attribute("aria-expanded", "true")
        assert not axe_violations(page)
        part_screenshot(ticket, f"json-tree-full-result-{'phone' if size == PHONE else 'desktop'}")
        expect(expand).to_have_text("Hide full result")
        expand.click()
        expect(preview).to_be_visible()
        expect(ticket.locator(".call-full")).to_be_hidden()
