"""A waiting call about to expire, in the browser: the header's badge says "1 expiring" without a
reload when the sweep warns, and the card says it expires soon."""
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs.engine.dispatch import run_dispatch, task_send
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, Run
from tests.browser import CANCEL_ORDER, requires_chromium, screenshot
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]


def test_the_badge_and_the_card_warn_before_a_call_expires(live, browser, users):
    Agent.objects.filter(name="demo").update(approval_timeout_seconds=3600)
    run = run_create(agent=Agent.objects.get(name="demo"), task=CANCEL_ORDER, user=users["operator"])
    run_dispatch(run_id=run.pk)
    wait_for_status(run.pk, Run.Status.AWAITING_APPROVAL)
    page = browser.login(users["operator"])
    page.goto("/approvals/")
    expiring = page.locator("#approval-expiring")
    expect(page.locator("#approval-badge")).to_have_text("1")
    expect(expiring).to_be_hidden()

    approval = Approval.objects.get(run=run)
    Approval.objects.filter(pk=approval.pk).update(warn_at=timezone.now() - timedelta(seconds=1))
    task_send("runs.tasks.sweep_runs")  # the worker's sweep warns, and tells every open page

    expect(expiring).to_have_text("1 expiring")  # live: the sweep's change reached the page
    expect(expiring).to_be_visible()
    assert Approval.objects.get(pk=approval.pk).warned_at is not None
    page.reload()
    expect(page.locator(f"[data-approval-id='{approval.pk}'] .expiring-soon")).to_contain_text("expires soon")
    screenshot(page, "approvals-expiring")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "approvals-expiring-phone")
