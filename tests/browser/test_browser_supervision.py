"""Supervision in the browser: edit then approve, grants for one run and their revocation, the
two-person rule seen from three contexts, bulk decisions racing another operator, and the
keyboard. Runs go on through the real worker and the demo model (scripted where the test needs
exact calls). With SCREENSHOT_DIR set, the key moments are saved there for the README."""
import json
import re

import pytest
from playwright.sync_api import expect

from runs.models import Approval, ApprovalRule, ApprovalVote, Run, RunGrant, ToolCall
from tests.browser import CANCEL_ORDER, open_edit_box, requires_chromium, screenshot
from tests.conftest import wait_for_status, wait_until
from toolsapp.models import Order, Tool

pytestmark = [pytest.mark.browser, requires_chromium]

FINISHED = tuple(Run.FINISHED_STATUSES)


def open_queue(page):
    page.goto("/approvals/")
    expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
    return page


def card_of_run(page, run_id: int):
    return page.locator(f"#approval-list .approval[data-approval-id][data-run-id='{run_id}']")


def flash(page):
    return page.locator("#approval-flash")


def answer_of(page, approval: Approval):
    """The answer to a decision, beside the card the person acted on (or where it was)."""
    return page.locator(f"#answer-{approval.pk}")


def cancel(order_id: str) -> dict:
    return {"tool_calls": [{"name": "cancel_order", "arguments": {"order_id": order_id, "reason": "customer asked"}}]}


def pending_of(run) -> Approval:
    return wait_until(lambda: Approval.objects.filter(run=run, status=Approval.Status.PENDING).first(),
                      message=f"an approval of run {run.pk} to wait")


def test_operator_edits_the_arguments_and_the_edited_call_runs(live, browser, users, launch, script):
    model = script(cancel("ORD-1001"), {"content": "Done."})
    run = launch("Cancel order ORD-1001 or ORD-1003, whichever the customer means", models=[model])
    approval = pending_of(run)
    queue = open_queue(browser.login(users["operator"]))
    card = card_of_run(queue, run.pk)
    card.locator("details.edit-args summary").click()
    box = card.locator("textarea.edit-arguments")
    expect(box).to_be_enabled()
    assert json.loads(box.input_value()) == {"order_id": "ORD-1001", "reason": "customer asked"}

    # The browser checks the edit against the tool's schema before sending anything.
    box.fill(json.dumps({"order_id": "1003", "reason": "customer asked"}))
    card.locator(".approve-button").click()
    expect(card.locator(".edit-error")).to_be_visible()
    expect(card.locator(".edit-error")).to_contain_text("order_id: must match")
    screenshot(queue, "edit-arguments-refused")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING

    box.fill(json.dumps({"order_id": "ORD-1003", "reason": "the customer meant the lamp"}, indent=2))
    screenshot(queue, "edit-arguments")
    card.locator(".approve-button").click()
    expect(card).to_have_count(0)

    run = wait_for_status(run.pk, *FINISHED)
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.CANCELLED
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN, "the model's arguments ran"
    approval.refresh_from_db()
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert approval.edited_args_hash and approval.edited_args_hash != call.args_hash

    run_page = browser.tab(queue)
    run_page.goto(f"/runs/{run.pk}/")
    edited = run_page.locator("#timeline .call-edited")
    expect(edited).to_be_visible()
    screenshot(run_page, "run-edited-hashes")
    expect(edited.locator(".model-hash")).to_have_text(call.args_hash[:12])
    expect(edited.locator(".ran-hash")).to_have_text(approval.edited_args_hash[:12])
    # What the model read: the result says an operator changed the arguments, and what changed.
    assert "operator_edit" in call.result_text and "ORD-1003" in call.result_text


def test_a_grant_approves_the_next_identical_call_and_stops_after_revocation(live, browser, users, launch, script):
    model = script(cancel("ORD-1003"), cancel("ORD-1003"), cancel("ORD-1001"), cancel("ORD-1003"), {"content": "Done."})
    run = launch("Cancel orders ORD-1003 and ORD-1001", models=[model], repeat_limit=5)
    first = pending_of(run)
    queue = open_queue(browser.login(users["operator"]))
    card_of_run(queue, run.pk).locator(".approve-identical-button").click()
    # The second, identical call runs under the grant; the third (other arguments) asks a person.
    third = wait_until(lambda: Approval.objects.filter(
        run=run, status=Approval.Status.PENDING, tool_call__arguments__contains="ORD-1001").first())
    expect(queue.locator(f".approval[data-approval-id='{third.pk}']")).to_be_visible()

    grant = RunGrant.objects.get(run=run)
    assert (grant.tool_name, grant.args_hash, grant.granted_by_name) == ("cancel_order", first.tool_call.args_hash, "operator")
    second = Approval.objects.filter(run=run).exclude(pk=first.pk).order_by("pk").first()
    assert second.status == Approval.Status.APPROVED and second.automatic and second.grant_id == grant.pk

    run_page = browser.tab(queue)
    run_page.goto(f"/runs/{run.pk}/")
    row = run_page.locator(f"#run-grants tr[data-grant-id='{grant.pk}']")
    expect(row.locator(".grant-scope")).to_contain_text("identical cancel_order calls")
    expect(row.locator(".grant-state")).to_have_text("active")
    granted_call = run_page.locator(f"#timeline .call[data-call-pk='{second.tool_call_id}'] .call-approval")
    expect(granted_call).to_contain_text("grant")
    screenshot(run_page, "run-grants")
    row.locator(".revoke-button").click()
    expect(run_page.locator(f"#run-grants tr[data-grant-id='{grant.pk}'] .grant-state")).to_have_text("revoked by operator")
    expect(run_page.locator(f"#run-grants tr[data-grant-id='{grant.pk}'] .revoke-button")).to_have_count(0)

    # After revocation the same call goes to a person again.
    queue.locator(f".approval[data-approval-id='{third.pk}'] .approve-button").click()
    again = card_of_run(queue, run.pk)
    expect(again.locator("pre.arguments")).to_contain_text("ORD-1003")
    last = pending_of(run)
    assert last.tool_call.args_hash == first.tool_call.args_hash and not last.automatic and last.grant_id is None
    again.locator("input[name=reason]").fill("enough")
    again.locator(".reject-button").click()
    wait_for_status(run.pk, *FINISHED)


def test_a_critical_call_needs_two_operators_and_a_third_context_sees_one_of_two(live, browser, users, launch):
    Tool.objects.filter(name="cancel_order").update(critical=True)
    run = launch(CANCEL_ORDER)
    approval = pending_of(run)
    assert approval.required_approvals == 2

    first = open_queue(browser.login(users["operator"]))
    card = card_of_run(first, run.pk)
    expect(card.locator(".approvals-count")).to_have_text("0 of 2 approvals")
    card.locator(".approve-button").click()
    expect(card.locator(".approvals-count")).to_have_text("1 of 2 approvals")
    said = f"Your approval is 1 of 2 for cancel_order in run {run.pk}: it runs once another person approves."
    expect(answer_of(first, approval)).to_have_text(said)
    expect(first.get_by_text(said)).to_have_count(1)  # once, beside the card, not again at the top

    third = open_queue(browser.login(users["viewer"]))
    seen = card_of_run(third, run.pk)
    expect(seen.locator(".approvals-count")).to_have_text("1 of 2 approvals")
    expect(seen.locator(".voters")).to_have_text("approved by operator")
    screenshot(third, "two-person-one-of-two")

    # The same person cannot give the second approval: the page says so beside a disabled button...
    expect(card.locator(".approve-button")).to_be_disabled()
    expect(card.locator(".decide-refusal")).to_contain_text("You already approved this call")
    # ...and the server refuses it from a page that still offered it (as a stale tab would).
    card.locator(".approve-button").evaluate("button => { delete button.dataset.refused; button.disabled = false; }")
    card.locator(".approve-button").click()
    expect(answer_of(first, approval)).to_contain_text("Not allowed")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and approval.approvals_given == 1

    second = open_queue(browser.login(users["operator2"]))
    card_of_run(second, run.pk).locator(".approve-button").click()
    expect(card_of_run(second, run.pk)).to_have_count(0)
    expect(seen).to_have_count(0)  # the third context's queue follows live
    wait_for_status(run.pk, *FINISHED)
    approval.refresh_from_db()
    assert approval.status == Approval.Status.APPROVED
    assert sorted(ApprovalVote.objects.filter(approval=approval).values_list("user_name", flat=True)) == ["operator", "operator2"]
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.CANCELLED


def test_an_edit_by_the_second_of_two_operators_runs_only_once_another_approves_the_edit(
        live, browser, users, launch, script):
    Tool.objects.filter(name="cancel_order").update(critical=True)
    model = script(cancel("ORD-1001"), {"content": "Done."})
    run = launch("Cancel order ORD-1001 or ORD-1003, whichever the customer means", models=[model])
    approval = pending_of(run)
    first = open_queue(browser.login(users["operator"]))
    card = card_of_run(first, run.pk)
    card.locator(".approve-button").click()
    expect(card.locator(".approvals-count")).to_have_text("1 of 2 approvals")

    second = open_queue(browser.login(users["operator2"]))
    edited = card_of_run(second, run.pk)
    open_edit_box(edited)
    edited.locator("textarea.edit-arguments").fill(json.dumps({"order_id": "ORD-1003", "reason": "the lamp"}))
    edited.locator(".approve-button").click()
    expect(edited.locator(".proposed-edit")).to_contain_text("Proposed edit by operator2")
    expect(edited.locator(".approvals-count")).to_have_text("1 of 2 approvals")
    approval.refresh_from_db()
    assert (approval.status, approval.approvals_given) == (Approval.Status.PENDING, 1), "one review of the edit runs nothing"

    # The first operator's queue follows live: both versions, side by side; Approve approves the edit shown.
    expect(card.locator(".proposed-arguments")).to_contain_text('"ORD-1003"')
    expect(card.locator("pre.arguments").first).to_contain_text('"ORD-1001"')
    screenshot(first, "two-person-proposed-edit")
    card.locator(".approve-button").click()
    expect(card).to_have_count(0)

    wait_for_status(run.pk, *FINISHED)
    assert Order.objects.get(order_id="ORD-1003").status == Order.Status.CANCELLED
    assert Order.objects.get(order_id="ORD-1001").status == Order.Status.OPEN
    approval.refresh_from_db()
    assert (approval.status, approval.decided_by_name) == (Approval.Status.APPROVED, "operator")


def test_bulk_approve_reports_the_one_another_operator_decided_meanwhile(live, browser, users, launch):
    ApprovalRule.objects.create(name="cancellations: ask a person", tool_pattern="cancel_*", action="ask")
    runs = [launch(CANCEL_ORDER), launch("Cancel order ORD-1003")]
    first, second = (pending_of(r) for r in runs)
    mine = open_queue(browser.login(users["operator"]))
    for r in runs:
        expect(card_of_run(mine, r.pk).locator(".routed-by")).to_have_text("sent by rule 'cancellations: ask a person' v1")
    screenshot(mine, "queue-rule-name")
    mine.locator("#select-all").check()
    expect(mine.locator("#bulk-count")).to_have_text("2 selected")

    # This page misses the refresh (a slow network), so it still shows both when it submits.
    mine.route("**/approvals/pending/**", lambda route: route.abort())
    other = open_queue(browser.login(users["operator2"]))
    card_of_run(other, runs[1].pk).locator(".approve-button").click()
    expect(card_of_run(other, runs[1].pk)).to_have_count(0)
    expect(flash(mine)).to_contain_text("Could not refresh the queue")
    mine.unroute("**/approvals/pending/**")
    expect(card_of_run(mine, runs[1].pk).locator("input.select-approval")).to_be_checked()

    mine.locator("#bulk-form input[name=reason]").fill("checked both")
    mine.locator("#bulk-approve").click()
    message = flash(mine).locator("li").first
    expect(message).to_contain_text(f"Approved 1: #{first.pk}")
    expect(message).to_contain_text(f"#{second.pk} already approved by operator2")
    expect(mine.locator("#approval-list .approval")).to_have_count(0)
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.decided_by_name, first.reason) == ("operator", "checked both")
    assert second.decided_by_name == "operator2"
    for r in runs:
        wait_for_status(r.pk, *FINISHED)


def test_keyboard_moves_selects_and_approves_but_not_while_typing(live, browser, users, launch):
    runs = [launch(CANCEL_ORDER), launch("Cancel order ORD-1003")]
    first, second = (pending_of(r) for r in runs)
    page = open_queue(browser.login(users["operator"]))
    cards = page.locator("#approval-list .approval")
    expect(cards).to_have_count(2)

    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_visible()
    page.keyboard.press("?")
    expect(page.locator("#keys-help")).to_be_hidden()

    page.keyboard.press("j")
    expect(cards.nth(0)).to_have_class(re.compile(r"\bfocused\b"))
    page.keyboard.press("j")
    expect(cards.nth(1)).to_have_class(re.compile(r"\bfocused\b"))
    page.keyboard.press("k")
    expect(cards.nth(0)).to_have_class(re.compile(r"\bfocused\b"))
    page.keyboard.press("x")
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    page.keyboard.press("x")
    expect(page.locator("#bulk-count")).to_have_text("none selected")

    # r puts the cursor in the reason field; letters typed there are text, not commands.
    page.keyboard.press("r")
    reason = cards.nth(0).locator("input[name=reason]")
    expect(reason).to_be_focused()
    page.keyboard.type("a jk ok")
    expect(reason).to_have_value("a jk ok")
    first.refresh_from_db()
    assert first.status == Approval.Status.PENDING
    reason.fill("")
    page.keyboard.press("Escape")
    expect(cards.nth(0)).to_be_focused()

    page.keyboard.press("a")
    expect(cards).to_have_count(1)
    first.refresh_from_db()
    assert (first.status, first.decided_by_name) == (Approval.Status.APPROVED, "operator")

    # The next call takes the focus; o opens its edit box, Esc leaves it, a approves unedited.
    expect(cards.nth(0)).to_have_class(re.compile(r"\bfocused\b"))
    page.keyboard.press("o")
    expect(cards.nth(0).locator("textarea.edit-arguments")).to_be_focused()
    page.keyboard.press("Escape")
    page.keyboard.press("a")
    expect(cards).to_have_count(0)
    second.refresh_from_db()
    assert second.status == Approval.Status.APPROVED and second.edited_args_hash == ""
    for r in runs:
        wait_for_status(r.pk, *FINISHED)


def test_the_approval_page_of_an_escalation_link_decides_only_on_a_click(live, browser, users, launch):
    run = launch(CANCEL_ORDER)
    approval = pending_of(run)
    page = browser.login(users["operator"])
    page.goto(f"/approvals/{approval.pk}/")
    expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
    card = page.locator(f".approval[data-approval-id='{approval.pk}']")
    expect(card.locator("pre.arguments")).to_contain_text("ORD-1001")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING, "opening the link decided the call"
    card.locator("input[name=reason]").fill("not this one")
    card.locator("input[name=guidance]").fill("ask the customer which order")
    card.locator(".reject-button").click()
    expect(card.locator(".decided")).to_contain_text("rejected by operator")
    expect(card.locator(".decided")).to_contain_text("Guidance: ask the customer which order")
    expect(card.locator(".reject-button")).to_have_count(0)
    approval.refresh_from_db()
    assert (approval.status, approval.guidance) == (Approval.Status.REJECTED, "ask the customer which order")
    wait_for_status(run.pk, *FINISHED)
