"""Rules deciding calls, seen in the browser: an admin writes an approve rule in the editor, an
operator's run is approved by it (the run page and the queue's audit trail name the rule and its
version, v2 after an edit), and a call holding an identifier the run never saw is left to a
person whatever the rule says. Real worker, demo model over HTTP (scripted where the model must
call with an id nobody showed it). With SCREENSHOT_DIR set, the key moments are saved there."""
import pytest
from playwright.sync_api import expect

from runs.models import Approval, ApprovalRule, Run
from tests.browser import CANCEL_ORDER, RUN_URL, requires_chromium, run_id_of, screenshot
from tests.conftest import wait_for_status
from toolsapp.models import Order

pytestmark = [pytest.mark.browser, requires_chromium]

RULE = "cancel open orders of acme"
FINISHED = tuple(Run.FINISHED_STATUSES)


def launch_in_page(page, task: str, *, customer: str) -> int:
    """Fill the Launch page like a person would; the id of the run page it lands on."""
    page.goto("/runs/new/")
    page.locator("#id_agent").select_option(label="demo")
    page.locator("#id_task").fill(task)
    page.locator("#id_customer").fill(customer)
    page.locator("#launch-button").click()
    page.wait_for_url(RUN_URL)
    return run_id_of(page)


def cancel_call_approval(page):
    """What the run page says about its cancel_order call's approval."""
    call = page.locator("#timeline .call").filter(has=page.locator(".call-tool", has_text="cancel_order"))
    return call.locator(".call-approval")


def audit_row(page, approval: Approval):
    return page.locator(f"#approval-audit .audit-row[data-approval-id='{approval.pk}']")


def open_queue(page):
    page.goto("/approvals/")
    expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
    return page


def test_a_rule_written_in_the_editor_approves_a_run_and_every_page_names_it_and_its_version(
    live, browser, users, launch
):
    # Two earlier calls for the preview to weigh, both rejected by their runs' policy: one the
    # rule would approve (acme's ORD-1003), one it would not (globex's ORD-2001).
    launch("Cancel order ORD-1003", approval_policy="reject", customer="acme")
    launch("Cancel order ORD-2001", approval_policy="reject", customer="globex")

    admin = browser.login(users["admin"])
    admin.goto("/rules/new/")
    admin.locator("#id_name").fill(RULE)
    admin.locator("#id_tool_pattern").fill("cancel_order")
    admin.locator("#condition-add").click()
    row = admin.locator("#condition-rows .condition-row")
    row.locator(".condition-path").fill("$.order_id")
    row.locator(".condition-op").select_option("matches")
    row.locator(".condition-value").fill("^ORD-100")
    admin.locator("#id_customer").fill("acme")
    admin.locator("#id_action").select_option("approve")
    admin.locator("#rule-preview-button").click()
    preview = admin.locator("#rule-preview")
    expect(preview.locator("[data-count=matched]")).to_have_text("1")
    expect(preview.locator("[data-count=not_matched]")).to_have_text("1")
    expect(preview.locator("[data-count=approve]")).to_have_text("1")
    words = admin.locator("#rule-preview-words")
    expect(words).to_contain_text("$.order_id contains a match of the RE2 pattern '^ORD-100'")
    expect(words).to_contain_text("customer is acme")  # what narrows the rule, all of it
    screenshot(admin, "rule-preview")
    admin.locator("#rule-save").click()
    expect(admin.locator(".messages")).to_contain_text("saved (version 1)")

    operator = browser.login(users["operator"])
    run_id = launch_in_page(operator, CANCEL_ORDER, customer="acme")
    expect(operator.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(cancel_call_approval(operator)).to_have_text(f"Approved by rule '{RULE}' v1")
    expect(operator.locator("#run-answer")).to_contain_text("Cancelled order ORD-1001")
    screenshot(operator, "run-approved-by-rule")
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED
    first = Approval.objects.get(run_id=run_id)
    assert (first.status, first.automatic, first.rule_name, first.rule_version) == (
        Approval.Status.APPROVED, True, RULE, 1)
    assert first.decided_by_name == ""  # nobody: the rule decided

    open_queue(operator)
    expect(operator.locator("#approval-list .approval")).to_have_count(0)
    expect(audit_row(operator, first).locator(".decider")).to_have_text(f"rule '{RULE}' v1")

    # The admin narrows the rule; what it decides from now on carries the new version.
    admin.goto("/rules/")
    admin.locator("#rule-table .rule-row").get_by_role("link", name=RULE).click()
    expect(admin.locator("h1")).to_contain_text("v1")
    row = admin.locator("#condition-rows .condition-row")
    expect(row.locator(".condition-value")).to_have_value("^ORD-100")
    row.locator(".condition-value").fill("^ORD-100[0-9]$")
    admin.locator("#rule-save").click()
    expect(admin.locator(".messages")).to_contain_text("saved (version 2)")
    expect(admin.locator("#rule-table .rule-row .rule-version")).to_have_text("v2")

    run_id = launch_in_page(operator, "Cancel order ORD-1003", customer="acme")
    expect(operator.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(cancel_call_approval(operator)).to_have_text(f"Approved by rule '{RULE}' v2")
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.CANCELLED
    second = Approval.objects.get(run_id=run_id)
    assert (second.rule_version, second.automatic) == (2, True)
    open_queue(operator)
    expect(audit_row(operator, second).locator(".decider")).to_have_text(f"rule '{RULE}' v2")
    expect(audit_row(operator, first).locator(".decider")).to_have_text(f"rule '{RULE}' v1")  # history stays


def test_a_call_with_an_id_the_run_never_saw_waits_for_a_person_though_the_rule_would_approve(
    live, browser, users, launch, script
):
    ApprovalRule.objects.create(
        name=RULE, tool_pattern="cancel_order", customer="acme", action=ApprovalRule.Action.APPROVE,
        conditions=[{"path": "$.order_id", "op": "matches", "value": "^ORD-100"}],
    )
    # The model cancels ORD-1003 straight away: no lookup, and the task names no order.
    model = script(
        {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": "ORD-1003", "reason": "customer asked"}}]},
        {"content": "Cancelled the lamp order."},
    )
    run = launch("Cancel the customer's desk lamp order", customer="acme", models=[model])
    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    assert approval.status == Approval.Status.PENDING and not approval.automatic
    assert approval.unseen_ids == ["ORD-1003"]

    queue = open_queue(browser.login(users["operator"]))
    card = queue.locator(f"#approval-list .approval[data-approval-id='{approval.pk}']")
    expect(card.locator("header .flag-unseen")).to_have_text("unseen id")
    expect(card.locator("pre.arguments .flag-unseen")).to_have_attribute("title", "ORD-1003: not in the task or any earlier tool result")
    expect(card.locator(".note")).to_have_text(
        f"Rule '{RULE}' v1 would approve, but the arguments hold ORD-1003, which this run has never seen.")
    screenshot(queue, "queue-unseen-id")
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.OPEN

    run_page = browser.tab(queue)
    run_page.goto(f"/runs/{run.pk}/")
    expect(cancel_call_approval(run_page)).to_contain_text("Waiting for approval")
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.OPEN  # nothing ran meanwhile

    card.locator(".approve-button").click()
    expect(card).to_have_count(0)
    expect(audit_row(queue, approval).locator(".decider")).to_have_text("operator")
    wait_for_status(run.pk, *FINISHED)
    expect(run_page.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(cancel_call_approval(run_page)).to_have_text("Approved by operator")
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.CANCELLED
