"""A call waiting on its run's page: the approval queue's own card, with its evidence, decided there
without leaving the page; the queue's keys are not the run page's. With SCREENSHOT_DIR set, the
card is saved at desktop and phone width, light and dark."""
import pytest
from playwright.sync_api import expect

from runs.models import Approval, Run
from tests.browser import CANCEL_ORDER, assert_no_violations, axe_violations, requires_chromium, screenshot
from tests.conftest import wait_for_status, wait_until

pytestmark = [pytest.mark.browser, requires_chromium]


def waiting_violations(page) -> list[str]:
    """axe-core's findings on the run page's waiting calls (the section and its cards)."""
    return [line for line in axe_violations(page) if "run-waiting" in line.split(" :: ")[0]
            or ".approval" in line.split(" :: ")[0]]


def test_a_waiting_call_is_decided_on_its_run_page_with_its_evidence(live, browser, users, launch):
    run = launch(CANCEL_ORDER)
    approval = wait_until(lambda: Approval.objects.filter(run=run, status=Approval.Status.PENDING).first(),
                          message="the cancel_order call waits")
    page = browser.login(users["operator"])
    page.goto(f"/runs/{run.pk}/")

    section = page.locator("#run-waiting")
    card = section.locator(f".approval[data-approval-id='{approval.pk}']")
    expect(card).to_be_visible()
    expect(card.locator(".evidence")).to_contain_text("What the model had just read")
    expect(card.locator(".evidence")).to_contain_text("lookup_order")
    # Beside the timeline, which still starts in the first screen.
    assert card.bounding_box()["x"] > page.locator("#timeline-title").bounding_box()["x"] + 500
    assert page.locator("#timeline-title").bounding_box()["y"] < 600
    found = {"desktop": waiting_violations(page)}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for name, size in (("", {"width": 1280, "height": 900}), ("-phone", {"width": 390, "height": 844})):
            page.set_viewport_size(size)
            screenshot(page, f"run-waiting{name}-{scheme}")
            found[f"{scheme}{name}"] = waiting_violations(page)
    assert_no_violations(found)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1280, "height": 900})

    # The queue's "a" approves the first card; on a run page it does nothing.
    page.locator("#run-task").click()
    page.keyboard.press("a")
    page.wait_for_timeout(300)
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING

    card.locator(".approve-button").click()
    expect(page.locator("#run-waiting-answers .card-answer").first).to_contain_text(f"Approved cancel_order in run {run.pk}")
    expect(card).to_have_count(0)
    assert page.url.endswith(f"/runs/{run.pk}/")  # still the run page: nothing reloaded it
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.APPROVED
    wait_for_status(run.pk, *Run.FINISHED_STATUSES)
