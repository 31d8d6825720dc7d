"""The compare page shows what changed inside values (words, keys), and the fork form names calls
as the run page does; at desktop and phone width, light and dark, without an axe violation."""
import json

import pytest
from playwright.sync_api import expect

from runs.lifecycle.forks import run_fork
from runs.models import Run
from tests.browser import assert_no_violations, axe_violations, requires_chromium, screenshot, wait_for_seq
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
WEATHER = {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]}
LABEL = 'search_tickets(query="heat alerts") · step 2'


def search(query: str) -> dict:
    return {"tool_calls": [{"id": "s1", "name": "search_tickets", "arguments": {"query": query}}]}


def sizes_and_schemes():
    for scheme in ("light", "dark"):
        for size in (DESKTOP, PHONE):
            yield scheme, size, f"{scheme}-{'phone' if size == PHONE else 'desktop'}"


def test_compare_shows_changed_words_and_keys_and_every_page_names_calls_alike(live, browser, users, launch, script):
    model = script(WEATHER, search("heat alerts"), {"content": "The weather in Lagos is hot today."},
                   search("snow alerts"), {"content": "The weather in Lagos is cold today."})
    parent = launch("Weather in Lagos", models=[model])
    fork = run_fork(run_id=parent.pk, step_index=1, user=users["operator"], edit=None)
    fork = wait_for_status(fork.pk, *Run.FINISHED_STATUSES)
    assert fork.status == Run.Status.SUCCEEDED, fork.stop_detail
    page = browser.login(users["operator"])
    found = {}
    for scheme, size, where in sizes_and_schemes():
        page.emulate_media(color_scheme=scheme)
        page.set_viewport_size(size)

        # The run page and the fork form name the call the same way.
        page.goto(f"/runs/{parent.pk}/")
        wait_for_seq(page, parent.event_seq)
        expect(page.locator("#step-2 .call-label")).to_have_text(LABEL)
        page.goto(f"/runs/{parent.pk}/fork/?step=2")
        expect(page.locator("#fork-step-calls .call-label")).to_have_text(LABEL)
        expect(page.locator("#id_call_id option")).to_have_text([LABEL])
        found[f"fork form {where}"] = axe_violations(page)
        screenshot(page, f"fork-form-labels-{where}")

        page.goto(f"/runs/{fork.pk}/compare/")
        parent_side = page.locator("#compare-table .compare-parent")
        fork_side = page.locator("#compare-table .compare-fork")
        # Words: struck through on the parent's side, underlined on the fork's.
        expect(parent_side.locator(".compare-answer del.change-removed")).to_have_text(["hot"])
        expect(fork_side.locator(".compare-answer ins.change-added")).to_have_text(["cold"])
        assert parent_side.locator("del.change-removed").first.evaluate("e => getComputedStyle(e).textDecorationLine") == "line-through"
        assert fork_side.locator("ins.change-added").first.evaluate("e => getComputedStyle(e).textDecorationLine") == "underline"
        # A screen reader hears the change in words, not only a colour.
        assert fork_side.locator("ins.change-added").first.evaluate("e => getComputedStyle(e, '::before').content") == '" [added: "'
        # Keys: the arguments' query changed, from the parent's value to the fork's.
        key = fork_side.locator('.compare-key[data-path="query"]')
        expect(key).to_have_attribute("data-change", "changed")
        expect(key.locator("del")).to_have_text('"heat alerts"')
        expect(key.locator("ins")).to_have_text('"snow alerts"')
        # Calls are named as on the run page; their arguments read as a tree.
        expect(parent_side.locator(".compare-step[data-index='2'] .call-label")).to_have_text([LABEL])
        expect(fork_side.locator(".compare-step[data-index='2'] .call-label")).to_have_text([LABEL.replace("heat", "snow")])
        expect(fork_side.locator(".compare-step[data-index='2'] .compare-args.jt")).to_contain_text('"query": "snow alerts"')
        # The final answers, word by word.
        expect(page.locator("#compare-outcome ins.change-added")).to_have_text(["cold"])
        expect(page.locator("#compare-outcome del.change-removed")).to_have_text(["hot"])
        found[f"compare {where}"] = axe_violations(page)
        screenshot(page, f"compare-changes-{where}")
    assert_no_violations(found)


def test_the_live_label_is_the_servers(live, browser, users):
    """static/js/call_label.js writes what runs/lifecycle/call_labels.py writes, for the same arguments."""
    from runs.lifecycle.call_labels import call_label

    cases = [
        {"city": "Lagos"}, {}, {"note": "ü" * 40, "n": 3, "ok": False, "none": None},
        {"filters": {"a": 1}, "ids": [1], "empty": [], "card": "••••"}, {f"key{n}": n for n in range(20)},
    ]
    page = browser.login(users["viewer"])
    page.goto("/runs/")
    texts = [json.dumps(c, indent=2, ensure_ascii=False) for c in cases] + ["(not valid JSON; hidden)"]
    live_labels = page.evaluate(
        """async (texts) => {
          const { callLabel } = await import("/static/js/call_label.js");
          return texts.map((text) => callLabel({ tool: "t", argumentsText: text, step: 4 }).text);
        }""", texts)
    assert live_labels == [call_label(tool="t", arguments=text, step=4)["text"] for text in texts]
