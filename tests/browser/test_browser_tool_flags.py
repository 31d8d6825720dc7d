"""The tool editor in the browser: an admin ticks a tool's approval flags and the tool page shows
them with what each does."""
import pytest
from playwright.sync_api import expect

from tests.browser import requires_chromium, screenshot
from toolsapp.models import Tool

pytestmark = [pytest.mark.browser, requires_chromium]


def test_admin_marks_a_tool_critical_and_always_ask_and_sees_it_on_its_page(live, browser, users):
    tool = Tool.objects.get(name="cancel_order")
    page = browser.login(users["admin"])
    page.goto(f"/tools/{tool.pk}/")
    expect(page.locator("#tool-critical")).to_contain_text("no")
    page.locator("#tool-edit").click()
    expect(page.locator("#tool-form")).to_contain_text("two different people")
    page.locator("#id_critical").check()
    page.locator("#id_always_ask").check()
    page.locator("#id_allow_argument_edits").uncheck()
    page.locator("#tool-form button[type=submit]").click()

    expect(page.locator("#tool-critical")).to_contain_text("yes")
    expect(page.locator("#tool-critical")).to_contain_text("two different people")
    expect(page.locator("#tool-always-ask")).to_contain_text("yes")
    expect(page.locator("#tool-allow-argument-edits")).to_contain_text("no")
    screenshot(page, "tool-approval-flags")
    tool.refresh_from_db()
    assert (tool.critical, tool.always_ask, tool.allow_argument_edits) == (True, True, False)
