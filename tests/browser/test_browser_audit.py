"""The audit log in the browser: an administrator changes an agent, then reads who changed what
in the audit log, filters it and finds the export."""
import pytest
from playwright.sync_api import expect

from runs.models import Agent
from tests.browser import axe_violations, requires_chromium, screenshot

pytestmark = [pytest.mark.browser, requires_chromium]


def test_an_administrator_reads_who_changed_what(live, browser, users):
    agent = Agent.objects.get(name="demo")
    page = browser.login(users["admin"])
    page.goto(f"/agents/{agent.pk}/edit/")
    page.locator("#id_max_iterations").fill("7")
    page.locator("form button[type=submit].primary, form button[type=submit]").first.click()
    expect(page.locator(".messages")).to_be_visible()

    page.locator("#nav-audit").click()
    entry = page.locator(".audit-entry[data-kind=agent][data-action=updated]").first
    expect(entry).to_contain_text("admin")
    expect(entry.locator(".audit-changes")).to_contain_text("max_iterations")
    expect(entry.locator(".audit-changes del")).to_contain_text("10")
    expect(page.locator(".audit-entry[data-action=signed_in]").first).to_contain_text("admin")

    page.locator("#id_kind").select_option("agent")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator(".audit-entry[data-action=signed_in]")).to_have_count(0)
    expect(page.locator("#audit-export")).to_have_attribute("href", "/audit/export.jsonl?who=&kind=agent&action=&text=&since=&until=")
    assert axe_violations(page) == []
    screenshot(page, "audit-log")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "audit-log-phone")

    operator = browser.login(users["operator"])
    expect(operator.locator("#nav-audit")).to_have_count(0)
    response = operator.goto("/audit/")
    assert response.status == 403
