"""The rule backtest in the browser: an admin drafts a rule approving every cancel_order, presses
Preview, and reads first the call a person rejected that it would have approved (with what the
model had just read); Save asks for that call by name, and once the box naming it is ticked the
rule is saved and its page shows the version saved over it. With SCREENSHOT_DIR set, the preview
is saved at desktop and phone width, light and dark."""
import pytest
from playwright.sync_api import expect

from runs.models import ApprovalRule, ApprovalRuleVersion
from tests.browser import assert_no_violations, axe_violations, requires_chromium, screenshot
from tests.supervision.rules.backtest_calls import Decided

pytestmark = [pytest.mark.browser, requires_chromium]


def test_the_preview_lists_a_rejected_call_first_and_saving_asks_for_it_by_name(live, browser, users):
    decided = Decided()
    rejected = decided.add("cancel_order", {"order_id": "ORD-1001", "reason": "customer asked"}, decision="rejected",
                           by="operator")
    decided.add("cancel_order", {"order_id": "ORD-1002"}, decision="approved", by="operator", edited=True)
    decided.add("cancel_order", {"order_id": "ORD-1003"}, decision="approved", by="operator")
    page = browser.login(users["admin"])
    page.goto("/rules/new/")
    page.locator("#id_name").fill("approve cancels")
    page.locator("#id_tool_pattern").fill("cancel_order")
    page.locator("#id_action").select_option("approve")

    page.locator("#rule-preview-button").click()

    first = page.locator("#rule-backtest-disagreements .backtest-disagreement").first
    expect(first).to_have_attribute("data-approval", str(rejected.pk))
    expect(first.locator(".backtest-kind")).to_have_text("Would have approved what a person rejected")
    expect(first).to_contain_text("Rejected by operator")
    first.locator("details.backtest-read summary").click()
    expect(first.locator("details.backtest-read")).to_contain_text('"status": "cancelled"')
    expect(page.locator("#rule-backtest-counts [data-count=agreed_approved]")).to_have_text("1")
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, height, suffix in ((1280, 900, ""), (390, 844, "-phone")):
            page.set_viewport_size({"width": width, "height": height})
            found[f"{scheme}{suffix}"] = axe_violations(page)
            screenshot(page, f"rule-backtest-{scheme}{suffix}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})
    assert_no_violations(found)

    confirm = page.locator("#rule-confirm")
    expect(confirm).to_contain_text(f"approval #{rejected.pk}: cancel_order in run #{decided.run.pk}, rejected by operator")
    page.locator("#rule-save").click()
    expect(page.locator("#rule-confirm")).to_contain_text("so it was not saved")
    assert not ApprovalRule.objects.exists()
    page.locator("#rule-confirm-saved-over").check()
    page.locator("#id_name").fill("approve cancels, read")  # a change after reading: the box is cleared
    expect(page.locator("#rule-confirm-saved-over")).not_to_be_checked()
    expect(page.locator("#rule-confirm-stale")).to_be_visible()
    page.locator("#rule-confirm-saved-over").check()
    page.locator("#rule-save").click()

    expect(page.locator(".messages")).to_contain_text("over 1 call people rejected")
    rule = ApprovalRule.objects.get()
    assert ApprovalRuleVersion.objects.get(rule_key=rule.pk).saved_over[0]["approval"] == rejected.pk
    page.goto(f"/rules/{rule.pk}/")
    expect(page.locator("#rule-saved-over")).to_contain_text(f"approval #{rejected.pk}: cancel_order")
    screenshot(page, "rule-saved-over")
