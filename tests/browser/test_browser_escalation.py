"""Escalation in the browser: the header's oldest wait, and the e-mailed link to a queue item."""
import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.models import Approval, Run
from runs.supervision.approvals.escalation import approvals_escalate
from tests.browser import CANCEL_ORDER, PASSWORD, TIMEOUT_MS, requires_chromium
from tests.supervision.approvals.test_escalation import mailbox  # noqa: F401 (fixture: a local SMTP server)

pytestmark = [pytest.mark.browser, requires_chromium]


def test_the_header_says_how_long_the_oldest_call_has_waited(live, browser, users, launch):
    run = launch(CANCEL_ORDER)
    assert run.status == Run.Status.AWAITING_APPROVAL
    Approval.objects.filter(run=run).update(requested_at=timezone.now() - timedelta(minutes=4, seconds=5))
    page = browser.login(users["viewer"])
    page.goto("/runs/")
    expect(page.locator("#approval-badge")).to_have_text("1")  # the count stays a number
    expect(page.locator("#approval-oldest")).to_have_text(re.compile(r"^· oldest [45] min$"))
    expect(page.locator("#approval-badge")).to_have_attribute("title", re.compile(r"^1 waiting · oldest [45] min$"))


def test_the_emailed_link_asks_to_sign_in_then_opens_the_item_and_decides_nothing(
    live, browser, users, launch, mailbox, settings  # noqa: F811
):
    run = launch(CANCEL_ORDER)
    approval = Approval.objects.get(run=run)
    settings.SITE_URL = live.url
    Approval.objects.filter(pk=approval.pk).update(escalate_at=timezone.now())
    assert approvals_escalate() == [approval.pk]
    [mail] = mailbox.messages
    link = re.search(r"http\S+/approvals/\d+/", mail["body"]).group(0)

    context = browser.chromium.new_context(base_url=live.url)  # nobody signed in
    context.set_default_timeout(TIMEOUT_MS)
    page = browser._watch(context.new_page())
    page.goto(link)
    expect(page).to_have_url(re.compile(r"/login/"))
    page.locator("input[name=username]").fill(users["operator"].username)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("main form button[type=submit]").click()
    expect(page).to_have_url(link)
    expect(page.locator("main")).to_contain_text("cancel_order")
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING  # opening the link decided nothing
