"""Browser notifications for calls to decide: turned on in "Your settings", shown for an operator who
may decide a call that arrives, never for a viewer.

Headless Chromium cannot show a real notification reliably: the page's `Notification` is replaced
by a recorder (what was constructed, with what), which also answers the permission prompt."""
import re

import pytest
from playwright.sync_api import expect

from runs.models import Approval, Run
from tests.browser import (
    CANCEL_ORDER,
    RUN_URL,
    assert_no_violations,
    axe_violations,
    requires_chromium,
    run_id_of,
    screenshot,
)

pytestmark = [pytest.mark.browser, requires_chromium]

RECORD_NOTIFICATIONS = """
window.__shown = [];
window.Notification = class {
  static permission = "granted";
  static requestPermission() { return Promise.resolve("granted"); }
  constructor(title, options = {}) {
    window.__shown.push({ title, body: options.body, tag: options.tag });
    window.__lastNotification = this;
  }
  close() {}
};
"""


def recording(page):
    """Every later page of this person records its notifications in window.__shown."""
    page.context.grant_permissions(["notifications"])
    page.context.add_init_script(RECORD_NOTIFICATIONS)
    return page


def announcing(page):
    """The page's socket was told to announce calls (notify.js asked, the server said yes)."""
    page.goto("/runs/")
    expect(page.locator("html")).to_have_attribute("data-announcing", "on")
    return page


def test_a_notification_fires_for_an_operator_who_may_decide_and_not_for_a_viewer(live, browser, users):
    operator = recording(browser.login(users["operator"]))
    operator.locator("#nav-you").click()
    expect(operator.locator("h1")).to_have_text("Your settings")
    toggle = operator.locator("#notify-toggle")
    expect(toggle).to_be_enabled()
    expect(toggle).not_to_be_checked()
    toggle.check()
    expect(operator.locator("#notify-state")).to_contain_text("On: calls you may decide show a notification.")
    operator.locator("#sound-toggle").check()
    screenshot(operator, "your-settings")
    announcing(operator)

    viewer = recording(browser.login(users["viewer"]))
    viewer.goto("/settings/you/")
    expect(viewer.locator("#notify-refusal")).to_contain_text("may view calls but not decide them")
    expect(viewer.locator("#notify-toggle")).to_be_disabled()
    # Say a viewer turned them on while their role could decide: the server still sends nothing.
    viewer.evaluate("localStorage.setItem('agentsite.notify', 'on')")
    announcing(viewer)

    launcher = browser.login(users["admin"])
    launcher.goto("/runs/new/")
    launcher.locator("#id_agent").select_option(label="demo")
    launcher.locator("#id_task").fill(CANCEL_ORDER)
    launcher.locator("#launch-button").click()
    launcher.wait_for_url(RUN_URL)
    run_id = run_id_of(launcher)
    expect(launcher.locator("#run-status")).to_have_attribute("data-status", Run.Status.AWAITING_APPROVAL)
    approval = Approval.objects.get(run_id=run_id)

    operator.wait_for_function("window.__shown.length > 0")
    assert operator.evaluate("window.__shown") == [{
        "title": "cancel_order waits for your decision", "body": f"Run {run_id}: {CANCEL_ORDER}",
        "tag": f"approval-{approval.pk}",
    }]
    # The viewer's badge heard of the call; the announcement would have come right after it.
    expect(viewer.locator("#approval-badge")).to_have_text("1")
    assert viewer.evaluate("window.__shown") == []

    operator.evaluate("window.__lastNotification.onclick()")
    operator.wait_for_url(re.compile(rf"/approvals/{approval.pk}/$"))
    expect(operator.locator(f".approval[data-approval-id='{approval.pk}'] .approve-button")).to_be_visible()


PHONE = {"width": 390, "height": 844}


def test_a_pending_calls_link_opens_its_card_decidable_with_a_thumb_on_a_phone(live, browser, users, launch):
    """The approval.pending webhook's link (what a chat or pager message carries) opens the call's
    own card: on a phone, its two buttons on the first screen, big enough for a thumb, with the
    evidence right there; it passes axe, light and dark."""
    from urllib.parse import urlsplit

    from runs.notifications.webhooks import approval_pending_data

    run = launch(CANCEL_ORDER)
    approval = Approval.objects.get(run=run, status=Approval.Status.PENDING)
    link = urlsplit(approval_pending_data(approval)["approval"]["url"]).path
    assert link == f"/approvals/{approval.pk}/"

    page = browser.login(users["operator"])
    page.set_viewport_size(PHONE)
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.goto(link)
        expect(page.locator("#approval-live-status")).to_have_text("Live updates: on.")
        card = page.locator(f".approval[data-approval-id='{approval.pk}']")
        screenshot(page, f"approval-from-link-phone-{scheme}")
        for name in ("approve", "reject"):
            button = card.locator(f".{name}-button")
            expect(button).to_be_visible()
            # Read in the page, once laid out: the card may be re-rendered by its live refresh.
            box = page.wait_for_function(
                """selector => { const b = document.querySelector(selector);
                    const r = b && b.getBoundingClientRect();
                    return r && r.height > 0 ? {y: r.top, height: r.height, width: r.width} : null; }""",
                arg=f".approval[data-approval-id='{approval.pk}'] .{name}-button").json_value()
            assert box["y"] + box["height"] <= PHONE["height"], f"{name} is below the first screen: {box}"
            assert box["height"] >= 44 and box["width"] >= 44, f"{name} is too small for a thumb: {box}"
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        expect(card.locator(".evidence .value-source[data-path='$.order_id']")).to_contain_text("ORD-1001")
        found[f"approval page ({scheme}, phone)"] = axe_violations(page)
    assert_no_violations(found)
