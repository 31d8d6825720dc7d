"""A quorum in the browser: an admin writes "ask several people, one from Finance and one from
Support"; a live call waits; a Finance operator approves in the queue, the card says Support is
still missing, and a Support operator's approval lets the run finish."""
import pytest
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, ApprovalRule, Run
from tests.browser import CANCEL_ORDER, requires_chromium, screenshot
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]


def test_a_call_needs_one_approval_from_each_group(live, browser, users):
    finance, support = Group.objects.create(name="Finance"), Group.objects.create(name="Support")
    users["operator"].groups.add(finance)
    users["operator2"].groups.add(support)

    admin = browser.login(users["admin"])
    admin.goto("/rules/new/")
    expect(admin.locator("#field-quorum_groups")).to_be_hidden()
    admin.locator("#id_name").fill("cancels need finance and support")
    admin.locator("#id_tool_pattern").fill("cancel_order")
    admin.locator("#id_action").select_option("ask_quorum")
    expect(admin.locator("#field-quorum_groups")).to_be_visible()
    admin.locator("#id_approvals_needed").fill("2")
    quorum = admin.locator("#field-quorum_groups")
    quorum.get_by_label("Finance").check()
    quorum.get_by_label("Support").check()
    screenshot(admin, "rule-quorum-form")
    admin.locator("#rule-save").click()
    expect(admin.locator(".rule-quorum")).to_have_text("2 people, one from each of Finance, Support")
    rule = ApprovalRule.objects.get()
    assert (rule.action, rule.approvals_needed) == ("ask_quorum", 2)

    run = run_create(agent=Agent.objects.get(name="demo"), task=CANCEL_ORDER, user=users["admin"])
    run_dispatch(run_id=run.pk)
    wait_for_status(run.pk, Run.Status.AWAITING_APPROVAL)
    approval = Approval.objects.get(run=run)

    first = browser.login(users["operator"])
    first.goto("/approvals/")
    card = first.locator(f"[data-approval-id='{approval.pk}']")
    expect(card.locator(".asks-quorum")).to_have_text("one from each of Finance, Support: still needs Finance, Support")
    card.get_by_role("button", name="Approve", exact=True).click()
    expect(card.locator(".asks-quorum")).to_have_text("one from each of Finance, Support: still needs Support")
    expect(card.locator(".approvals-count")).to_have_text("1 of 2 approvals")
    screenshot(first, "approvals-quorum")
    first.set_viewport_size({"width": 390, "height": 844})
    screenshot(first, "approvals-quorum-phone")

    second = browser.login(users["operator2"])
    second.goto(f"/approvals/{approval.pk}/")
    second.get_by_role("button", name="Approve", exact=True).click()
    wait_for_status(run.pk, Run.Status.SUCCEEDED)
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given, approval.decided_by_name) == ("approved", 2, "operator2")
