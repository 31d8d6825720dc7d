"""A rule tried in shadow, in the browser: an admin puts a rule in shadow with one click, a live
call waits for a person anyway, the person decides in the queue, and the rule's page shows where
the rule would have disagreed."""
import pytest
from playwright.sync_api import expect

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, ApprovalRule, Run, ShadowDecision
from runs.supervision.rules.changes import rule_create
from tests.browser import CANCEL_ORDER, axe_violations, requires_chromium, screenshot
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]


def test_a_rule_in_shadow_leaves_the_call_to_people_and_shows_where_it_disagreed(live, browser, users):
    rule = rule_create(data={"name": "cancels", "tool_pattern": "cancel_order", "action": "approve"},
                       user=users["admin"])
    admin = browser.login(users["admin"])
    admin.goto("/rules/")
    row = admin.locator(f"#rule-table .rule-row[data-rule-id='{rule.pk}']")
    row.get_by_role("button", name="Put in shadow").click()
    expect(admin.locator(".messages")).to_contain_text("is in shadow (version 2)")
    expect(row.locator(".rule-mode")).to_contain_text("in shadow")
    assert ApprovalRule.objects.get(pk=rule.pk).shadow

    run = run_create(agent=Agent.objects.get(name="demo"), task=CANCEL_ORDER, user=users["operator"])
    run_dispatch(run_id=run.pk)
    wait_for_status(run.pk, Run.Status.AWAITING_APPROVAL)  # the rule would approve; a person decides
    approval = Approval.objects.get(run=run)
    assert ShadowDecision.objects.get(approval=approval).outcome == "approve"

    operator = browser.login(users["operator"])
    operator.goto(f"/approvals/{approval.pk}/")
    expect(operator.locator("body")).not_to_contain_text("cancels")  # people decide as if it did not exist
    operator.locator("input[name=reason]").first.fill("the customer kept the order")
    operator.get_by_role("button", name="Reject").first.click()
    wait_for_status(run.pk, Run.Status.SUCCEEDED, Run.Status.FAILED)

    admin.goto(f"/rules/{rule.pk}/")
    section = admin.locator("#rule-shadow")
    expect(section.locator("#rule-shadow-state")).to_contain_text("This rule is in shadow.")
    version = section.locator(".shadow-version[data-version='2']")
    expect(version.locator("[data-count=seen]")).to_have_text("1")
    expect(version.locator("[data-count=disagreed]")).to_have_text("1")
    expect(section.locator(".shadow-disagreement")).to_contain_text("rejected by operator: the customer kept the order")
    assert axe_violations(admin) == []
    screenshot(admin, "rule-shadow")
    admin.set_viewport_size({"width": 390, "height": 844})
    screenshot(admin, "rule-shadow-phone")
    admin.goto("/rules/")
    screenshot(admin, "rule-list-shadow-phone")
    admin.set_viewport_size({"width": 1280, "height": 900})
    screenshot(admin, "rule-list-shadow")

    admin.goto(f"/rules/{rule.pk}/")
    admin.locator("#rule-shadow-toggle").click()
    # It would approve the call the operator rejected: one click does not let it decide; the
    # editor names the call, and a Save that confirms it by name does.
    expect(admin.locator(".messages")).to_contain_text(f"approval {approval.pk} (run {run.pk}, cancel_order, rejected by operator)")
    assert ApprovalRule.objects.get(pk=rule.pk).shadow
    admin.locator("#id_shadow").uncheck()
    admin.locator("#rule-preview-button").click()
    admin.locator("#rule-confirm-saved-over").check()
    admin.locator("#rule-save").click()
    expect(admin.locator(".messages")).to_contain_text("saved (version 3")
    assert not ApprovalRule.objects.get(pk=rule.pk).shadow
    admin.goto(f"/rules/{rule.pk}/")
    expect(admin.locator("#rule-shadow-toggle")).to_have_text("Put in shadow")
