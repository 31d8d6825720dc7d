"""Twins in the browser: two runs cancelling the same order show each other on their cards, and a
bulk approval of both decides nothing until the person ticks the line naming them; a grant for
the rest of a run asks the same on the card. With SCREENSHOT_DIR set, the moments are saved."""
import asyncio
import threading

import pytest
from channels_redis.core import RedisChannelLayer
from playwright.sync_api import expect

from runs.engine.storage.events import APPROVALS_GROUP
from runs.models import Approval, Run, RunGrant
from tests.browser import CANCEL_ORDER, assert_no_violations, axe_violations, requires_chromium, screenshot
from tests.conftest import wait_for_status, wait_until
from tests.supervision.evidence.twins import with_evidence

pytestmark = [pytest.mark.browser, requires_chromium]

FINISHED = tuple(Run.FINISHED_STATUSES)


def waiting(launch) -> Approval:
    run = launch(CANCEL_ORDER)
    approval = wait_until(lambda: Approval.objects.filter(run=run, status=Approval.Status.PENDING).first(),
                          message="the cancel_order call waits")
    return with_evidence(approval)


def open_queue(page):
    page.goto("/approvals/")
    expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
    return page


def card(page, approval: Approval):
    return page.locator(f"#approval-list .approval[data-approval-id='{approval.pk}']")


def twins_violations(page) -> list[str]:
    """axe-core's findings on the twins' own markup (the cards' boxes, the bulk confirmation)."""
    return [line for line in axe_violations(page) if "twins" in line.split(" :: ")[0]]


def tell_queues_changed(redis_url: str, *, run_id: int) -> None:
    """What the loop says when a run's approvals change, on the live server's channel layer (from a
    thread of its own: Playwright's event loop runs in this one)."""
    layer = RedisChannelLayer(hosts=[redis_url])
    message = {"type": "approvals.changed", "run_id": run_id}
    sender = threading.Thread(target=lambda: asyncio.run(layer.group_send(APPROVALS_GROUP, message)))
    sender.start()
    sender.join()


def status(approval: Approval) -> str:
    return Approval.objects.get(pk=approval.pk).status


def test_a_bulk_approval_of_two_runs_cancelling_one_order_waits_for_their_names(live, browser, users, launch):
    first, second = waiting(launch), waiting(launch)
    page = open_queue(browser.login(users["operator"]))
    expect(card(page, first).locator(".twins")).to_contain_text(f"#{second.pk} cancel_order: also waiting in run {second.run_id}")
    expect(card(page, second).locator(".twins")).to_contain_text(f"#{first.pk} cancel_order: also waiting in run {first.run_id}")
    screenshot(page, "queue-twins")
    assert_no_violations({"queue": twins_violations(page)})

    page.locator("#select-all").check()
    page.locator("#bulk-form input[name=reason]").fill("both checked")
    page.locator("#bulk-approve").click()
    confirmation = page.locator("#bulk-twins")
    expect(confirmation).to_be_focused()
    expect(confirmation).to_contain_text(
        f"#{first.pk} cancel_order in run {first.run_id} and #{second.pk} cancel_order in run {second.run_id} "
        "act on the same thing")
    assert (status(first), status(second)) == ("pending", "pending")
    found = {"queue": twins_violations(page)}
    for scheme in ("light", "dark"):  # as a phone shows it, in both themes
        page.emulate_media(color_scheme=scheme)
        for name, size in (("", {"width": 1280, "height": 900}), ("-phone", {"width": 390, "height": 844})):
            page.set_viewport_size(size)
            screenshot(page, f"queue-twins-confirm{name}-{scheme}")
            found[f"{scheme}{name}"] = twins_violations(page)
    assert_no_violations(found)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})

    # Unticked, the browser does not send it; ticked, both are approved with the one reason.
    confirmation.locator("#bulk-twins-approve").click()
    expect(card(page, first)).to_have_count(1)
    confirmation.get_by_label(f"#{first.pk} cancel_order in run {first.run_id} and").check()
    confirmation.locator("#bulk-twins-approve").click()
    expect(page.locator("#approval-flash li").first).to_contain_text(f"Approved 2: #{first.pk}, #{second.pk}")
    expect(page.locator("#bulk-twins")).to_have_count(0)
    expect(page.locator("#approval-list .approval")).to_have_count(0)
    for approval in (first, second):
        approval.refresh_from_db()
        assert (approval.status, approval.decided_by_name, approval.reason) == ("approved", "operator", "both checked")
        wait_for_status(approval.run_id, *FINISHED)


def test_a_grant_for_the_rest_of_the_run_asks_for_the_twins_on_the_card(live, browser, users, launch):
    first, second = waiting(launch), waiting(launch)
    page = open_queue(browser.login(users["operator"]))
    mine = card(page, first)
    mine.locator(".approve-identical-button").click()
    expect(mine.locator(".card-answer")).to_contain_text("Nothing was approved")
    assert status(first) == "pending" and not RunGrant.objects.exists()

    card(page, first).locator("input.confirm-twins").check()
    # The list is fetched again when anything changes (here: a word from another run): the card is
    # replaced, and the tick stays, since it names the same twins.
    card(page, first).evaluate("el => el.setAttribute('data-before-refresh', '')")
    tell_queues_changed(live.redis_url, run_id=second.run_id)
    expect(page.locator("#approval-list .approval[data-before-refresh]")).to_have_count(0)
    expect(card(page, first).locator("input.confirm-twins")).to_be_checked()
    card(page, first).locator(".approve-identical-button").click()
    expect(card(page, first)).to_have_count(0)
    assert status(first) == "approved" and RunGrant.objects.get().source_approval_id == first.pk
    # The other one is approved alone, its card naming the twin, now approved.
    expect(card(page, second).locator(".twins")).to_contain_text(f"#{first.pk} cancel_order: ")
    card(page, second).locator(".approve-button").click()
    expect(card(page, second)).to_have_count(0)
    for approval in (first, second):
        wait_for_status(approval.run_id, *FINISHED)
