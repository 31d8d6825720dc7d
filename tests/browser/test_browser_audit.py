"""The audit log in the browser: an administrator changes an agent, then reads who changed what
in the audit log, filters it and finds the export."""
import pytest
from playwright.sync_api import expect

from runs.models import Agent
from tests.browser import axe_violations, requires_chromium, screenshot

pytestmark = [pytest.mark.browser, requires_chromium]


SPLIT_WORDS = """() => {
  // Every word of the table's cells whose letters the browser laid out on more than one line
  // ("cancel_or" / "der"): one rectangle per line a range over the word covers.
  const split = [];
  const walker = document.createTreeWalker(document.querySelector("#audit-table tbody"), NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.data.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const tops = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
      if (tops.size > 1) split.push(match[0]);
    }
  }
  return split;
}"""


def words_split_across_lines(page) -> list[str]:
    return page.evaluate(SPLIT_WORDS)


def test_an_administrator_reads_who_changed_what(live, browser, users):
    agent = Agent.objects.get(name="demo")
    page = browser.login(users["admin"])
    page.goto(f"/agents/{agent.pk}/edit/")
    page.locator("#id_max_iterations").fill("7")
    # A long change beside short identifiers: the table must not squeeze them letter by letter.
    page.locator("#id_description").fill("Cancels orders through cancel_order and refunds through refund_payment "
                                         "when the customer asks; " * 4)
    page.locator("form button[type=submit].primary, form button[type=submit]").first.click()
    expect(page.locator(".messages")).to_be_visible()

    page.locator("#nav-audit").click()
    entry = page.locator(".audit-entry[data-kind=agent][data-action=updated]").first
    expect(entry).to_contain_text("admin")
    expect(entry.locator(".audit-changes")).to_contain_text("max_iterations")
    expect(entry.locator(".audit-change", has_text="max_iterations").locator("del")).to_contain_text("10")
    expect(page.locator(".audit-entry[data-action=signed_in]").first).to_contain_text("admin")

    page.locator("#id_kind").select_option("agent")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".audit-entry[data-action=signed_in]")).to_have_count(0)
    expect(page.locator("#audit-export")).to_have_attribute("href", "/audit/export.jsonl?who=&kind=agent&action=&text=&since=&until=")
    assert axe_violations(page) == []
    assert words_split_across_lines(page) == []
    screenshot(page, "audit-log")
    page.set_viewport_size({"width": 390, "height": 844})
    assert words_split_across_lines(page) == []
    screenshot(page, "audit-log-phone")

    operator = browser.login(users["operator"])
    expect(operator.locator("#nav-audit")).to_have_count(0)
    response = operator.goto("/audit/")
    assert response.status == 403
