"""Decision quality in the browser: the Supervision page with a seeded history (its figures, its
three charts drawn with their tables, the longest waits and the contradicted calls linked), and
the nudge on a card after a streak of quick approvals (Approve without a reason refused in words,
with one accepted). Axe-clean at desktop and phone width in both colour schemes; with
SCREENSHOT_DIR set, each is pictured."""
import pytest
from playwright.sync_api import expect

from projects.models import Project
from runs.models import Agent, Approval
from tests.browser import CANCEL_ORDER, PASSWORD, assert_no_violations, axe_violations, requires_chromium, screenshot
from tests.conftest import wait_until
from tests.supervision.quality.history import history
from tests.supervision.quality.seed import at, decided, run_of

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP, PHONE = {"width": 1280, "height": 900}, {"width": 390, "height": 844}
CHARTS = ("decisions", "time-to-decide", "quick-contradicted")


def everywhere(page, name: str, found: dict, *, only=None) -> None:
    """Axe (its findings on `only`'s markup when given) and pictures at both widths in both schemes."""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, size in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(size)
            lines = axe_violations(page)
            found[f"{name} ({scheme}, {width})"] = [line for line in lines if only is None or only in line]
            screenshot(page, f"{name}-{width}-{scheme}")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(DESKTOP)


def test_the_supervision_page_shows_the_seeded_history(live, browser):
    h = history()
    h.alice.set_password(PASSWORD)
    h.alice.save()
    page = browser.login(h.alice)
    page.goto("/approvals/")
    page.locator("#link-supervision").click()
    expect(page.locator("h1")).to_have_text("Supervision")
    page.locator("#id_project").select_option("shop")
    page.locator("#id_days").select_option("30")
    page.locator("#supervision-filters button").click()
    expect(page.locator("#figure-time-to-decide [data-p50]")).to_have_text("8 s")
    expect(page.locator("#figure-time-to-decide [data-p90]")).to_have_text("1 min")
    expect(page.locator("#figure-quick .metric")).to_have_text("5")
    expect(page.locator("#figure-contradicted .metric")).to_have_text("4")
    for chart in CHARTS:
        expect(page.locator(f"#series-{chart}")).to_have_attribute("data-drawn", "true")
    page.locator("#series-decisions summary").click()
    approved = page.locator("#table-series-decisions tbody td:nth-child(2)").evaluate_all(
        "cells => cells.reduce((sum, cell) => sum + Number(cell.dataset.value || 0), 0)")
    assert approved == 9
    expect(page.locator("#table-people tbody tr")).to_have_count(2)
    waiting = h.approvals["waiting"]
    expect(page.locator("#table-waits tbody tr").first).to_have_attribute("data-approval", str(waiting.pk))
    found = {}
    everywhere(page, "supervision", found)
    page.locator("#id_whose").select_option("me")
    page.locator("#supervision-filters button").click()
    expect(page.locator("#figure-decisions .metric")).to_have_text("8")
    expect(page.locator("#people")).to_have_count(0)
    everywhere(page, "supervision-me", found)
    assert_no_violations(found)


def test_the_nudge_asks_for_a_reason_after_quick_approvals(live, browser, users, launch):
    operator = users["operator"]
    demo = Agent.objects.get(name="demo")
    Project.objects.filter(pk=demo.project_id).update(nudge_after_quick_approvals=3, quick_approval_seconds=5)
    done = run_of(demo)
    for n in range(3):
        decided(done, by=operator, asked=at(19, 9, 60 * n), shown=2, took=2)
    run = launch(CANCEL_ORDER)
    approval = wait_until(lambda: Approval.objects.filter(run=run, status=Approval.Status.PENDING).first(),
                          message="the cancel_order call waits")
    page = browser.login(operator)
    page.goto("/approvals/")
    card = page.locator(f"#approval-list .approval[data-approval-id='{approval.pk}']")
    nudge = card.locator(".nudge")
    expect(nudge).to_contain_text("You approved the last 3 calls within 5 s of seeing them: "
                                  "give a one-line reason to approve this one.")
    found = {}
    everywhere(page, "queue-nudge", found, only="nudge")
    assert_no_violations(found)

    card.evaluate("card => { card.dataset.before = 'refusal'; }")
    card.locator(".approve-button").click()
    expect(page.locator(f"#answer-{approval.pk}")).to_contain_text("give a one-line reason to approve this one")
    assert Approval.objects.get(pk=approval.pk).status == Approval.Status.PENDING
    # The queue shows the list again after every decision sent, refused or not: type once it has.
    card = page.locator(f"#approval-list .approval[data-approval-id='{approval.pk}']:not([data-before])")
    card.get_by_label("Your reason for approving").fill("Customer confirmed on the phone")
    card.locator(".approve-button").click()
    wait_until(lambda: Approval.objects.get(pk=approval.pk).status == Approval.Status.APPROVED,
               message="the approval with a reason is recorded")
    assert Approval.objects.get(pk=approval.pk).reason == "Customer confirmed on the phone"
