"""The approval queue in the browser: live arrivals, approve and reject, who may decide."""
import pytest
from playwright.sync_api import expect

from runs.models import Approval, Run, ToolCall
from tests.browser import (
    CANCEL_ORDER,
    FINISHED,
    RUN_URL,
    mark_page,
    requires_chromium,
    run_id_of,
    screenshot,
    still_same_page,
)
from toolsapp.models import Order

pytestmark = [pytest.mark.browser, requires_chromium]


def open_queue(page):
    """The approval queue, once its socket is connected (so later changes arrive live)."""
    page.goto("/approvals/")
    expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
    return page


def card_of_run(page, run_id: int):
    return page.locator(f"#approval-list .approval[data-approval-id][data-run-id='{run_id}']")


def test_approval_appears_live_for_another_operator_whose_approval_lets_the_run_finish(live, browser, users):
    page_b = open_queue(browser.login(users["operator2"]))
    mark_page(page_b)
    expect(page_b.locator("#approval-list .approval")).to_have_count(0)
    expect(page_b.locator("#approval-badge")).to_have_text("0")

    page_a = browser.login(users["operator"])
    page_a.goto("/runs/new/")
    page_a.locator("#id_agent").select_option(label="demo")
    page_a.locator("#id_task").fill(CANCEL_ORDER)
    page_a.locator("#launch-button").click()
    page_a.wait_for_url(RUN_URL)
    run_id = run_id_of(page_a)
    mark_page(page_a)
    expect(page_a.locator("#run-status")).to_have_attribute("data-status", Run.Status.AWAITING_APPROVAL)
    cancel_call = page_a.locator("#timeline .call").filter(has=page_a.locator(".call-tool", has_text="cancel_order"))
    expect(cancel_call.locator(".call-approval")).to_have_attribute("data-approval-status", Approval.Status.PENDING)
    expect(cancel_call.locator(".call-approval a")).to_have_text("open the approval queue")
    expect(page_a.locator("#approval-badge")).to_have_text("1")

    # B did not reload: the card and the badge came through the approvals socket.
    card = card_of_run(page_b, run_id)
    expect(card).to_be_visible()
    expect(card.locator(".tool")).to_have_text("cancel_order")
    expect(card.locator("pre.arguments")).to_contain_text("ORD-1001")
    expect(page_b.locator("#approval-badge")).to_have_text("1")
    assert still_same_page(page_b), "the approval queue reloaded"
    screenshot(page_b, "approval-queue")

    approval_id = card.get_attribute("data-approval-id")
    card.locator(".approve-button").click()
    expect(page_b.locator("#approval-list .approval")).to_have_count(0)
    expect(page_b.locator("#approval-badge")).to_have_text("0")
    audit = page_b.locator(f"#approval-audit .audit-row[data-approval-id='{approval_id}']")
    expect(audit).to_contain_text("operator2")
    expect(audit.locator(".status")).to_have_text("Approved")

    # A's page goes on by itself: the worker executes the call and the model answers.
    expect(page_a.locator("#run-status")).to_have_attribute("data-status", Run.Status.SUCCEEDED)
    expect(page_a.locator("#run-answer")).to_contain_text("Cancelled order ORD-1001")
    expect(cancel_call.locator(".call-status")).to_have_attribute("data-status", ToolCall.Status.SUCCEEDED)
    expect(cancel_call.locator(".call-approval")).to_have_attribute("data-approval-status", Approval.Status.APPROVED)
    expect(cancel_call.locator(".call-approval")).to_have_text("Approved by operator2")
    expect(page_a.locator("#approval-badge")).to_have_text("0")
    assert still_same_page(page_a), "the run page reloaded"
    assert Run.objects.get(pk=run_id).status == Run.Status.SUCCEEDED


def test_rejection_with_a_reason_reaches_the_model_and_the_run_page(live, browser, users, launch):
    run = launch(CANCEL_ORDER)  # driven here until it parks at the approval
    assert run.status == Run.Status.AWAITING_APPROVAL
    queue = open_queue(browser.login(users["operator"]))
    run_page = browser.tab(queue)
    run_page.goto(f"/runs/{run.pk}/")
    expect(run_page.locator("#run-status")).to_have_attribute("data-status", Run.Status.AWAITING_APPROVAL)
    expect(run_page.locator("#live-state")).to_have_text("live")
    mark_page(run_page)

    card = card_of_run(queue, run.pk)
    card.locator("input[name=reason]").fill("too risky")
    card.locator(".reject-button").click()
    expect(card).to_have_count(0)
    expect(queue.locator("#approval-audit .audit-row").first).to_contain_text("too risky")

    expect(run_page.locator("#run-status")).to_have_attribute("data-status", FINISHED)
    expect(run_page.locator("#run-answer")).to_contain_text("I did not cancel order ORD-1001")
    expect(run_page.locator("#run-answer")).to_contain_text("too risky")
    expect(run_page.locator("#timeline .call-approval[data-approval-status=rejected]")).to_have_text(
        "Rejected by operator: too risky"
    )
    call = run_page.locator("#timeline .call").filter(has=run_page.locator(".call-tool", has_text="cancel_order"))
    expect(call.locator(".call-status")).to_have_attribute("data-status", ToolCall.Status.REJECTED)
    assert still_same_page(run_page), "the run page reloaded"
    run.refresh_from_db()
    assert run.status in Run.FINISHED_STATUSES
    assert Order.objects.get(order_id="ORD-1001").status == "open", "a rejected cancellation was executed"


def test_viewer_sees_the_queue_without_decision_buttons(live, browser, users, launch):
    run = launch(CANCEL_ORDER)
    assert run.status == Run.Status.AWAITING_APPROVAL
    page = open_queue(browser.login(users["viewer"]))
    card = card_of_run(page, run.pk)
    expect(card).to_be_visible()
    expect(card.locator("pre.arguments")).to_contain_text("ORD-1001")
    expect(page.locator("#approval-badge")).to_have_text("1")
    expect(page.locator(".approve-button")).to_have_count(0)
    expect(page.locator(".reject-button")).to_have_count(0)
    expect(page.locator("input[name=reason]")).to_have_count(0)
    expect(page.locator("nav")).not_to_contain_text("Launch")

    # Nor can the viewer decide by posting the form by hand (with a valid CSRF token).
    approval = Approval.objects.get(run=run)
    status = page.evaluate(
        """async (url) => {
            const token = document.cookie.split("; ").find((c) => c.startsWith("csrftoken=")).slice(10);
            const body = new FormData();
            body.set("decision", "approve");
            const response = await fetch(url, {method: "POST", body, headers: {"X-CSRFToken": token, Accept: "application/json"}});
            return response.status;
        }""",
        f"/approvals/{approval.pk}/decide/",
    )
    assert status == 403
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING
