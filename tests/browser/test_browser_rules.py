"""The rule editor in the browser: an admin writes a rule, previews what it would have done to the
last destructive calls, and saves it."""
import pytest
from playwright.sync_api import expect

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, ApprovalRule, ApprovalRuleVersion, Run
from tests.browser import CANCEL_ORDER, requires_chromium, screenshot
from tests.conftest import wait_for_status

pytestmark = [pytest.mark.browser, requires_chromium]


def parked_run(user) -> Run:
    """A run of the live worker, waiting for a person to approve its cancel_order call."""
    run = run_create(agent=Agent.objects.get(name="demo"), task=CANCEL_ORDER, user=user)
    run_dispatch(run_id=run.pk)
    return wait_for_status(run.pk, Run.Status.AWAITING_APPROVAL)


def test_admin_writes_a_rule_sees_its_preview_and_saves_it(live, browser, users):
    run = parked_run(users["operator"])
    page = browser.login(users["admin"])
    page.goto("/")
    page.locator("#nav-rules").click()
    expect(page.locator("#rule-table")).to_contain_text("No rules")
    page.locator("#rule-new").click()
    expect(page.locator("#rule-safeguards")).to_contain_text("never applies to a call whose outcome is unknown")

    page.locator("#id_name").fill("cancel ORD orders")
    page.locator("#id_tool_pattern").fill("cancel_*")
    # The conditions as rows: path, operator, value (text that is not JSON is taken as text).
    expect(page.locator("#id_conditions")).to_be_hidden()
    page.locator("#condition-add").click()
    row = page.locator("#condition-rows .condition-row")
    row.locator(".condition-path").fill("$.order_id")
    row.locator(".condition-op").select_option("matches")
    row.locator(".condition-value").fill("^ORD-")
    page.locator("#id_action").select_option("ask_two")
    page.locator("#rule-preview-button").click()

    preview = page.locator("#rule-preview")
    expect(preview).to_be_visible()
    expect(preview.locator("[data-count=matched]")).to_have_text("1")
    expect(preview.locator("[data-count=ask_two]")).to_have_text("1")
    expect(preview.locator("[data-count=approve]")).to_have_text("0")
    expect(page.locator("#rule-preview-examples")).to_contain_text(f"run #{run.pk}")
    # Each matched call as tool, run, masked arguments and what the rule would have done.
    example = page.locator("#rule-preview-examples .preview-example").first
    expect(example.locator(".preview-arguments")).to_contain_text('"order_id": "ORD-')
    expect(example.locator(".preview-outcome")).to_have_text("sent to two people")
    expect(page.locator("#id_name")).to_have_value("cancel ORD orders")  # still the draft
    expect(row.locator(".condition-value")).to_have_value("^ORD-")
    expect(page.locator("#rule-preview-words")).to_contain_text("$.order_id contains a match of the RE2 pattern '^ORD-'")
    assert not ApprovalRule.objects.exists()
    screenshot(page, "rule-preview-ask-two")

    page.locator("#rule-save").click()
    expect(page.locator(".messages")).to_contain_text("saved (version 1)")
    row = page.locator("#rule-table .rule-row")
    expect(row).to_have_count(1)
    expect(row.locator(".rule-when")).to_contain_text("$.order_id contains a match of the RE2 pattern '^ORD-'")
    expect(row.locator(".rule-action")).to_have_attribute("data-action", "ask_two")
    expect(row.locator(".rule-version")).to_have_text("v1")
    expect(page.locator("#rule-history .rule-change[data-change=created]")).to_contain_text("admin")
    rule = ApprovalRule.objects.get()
    assert (rule.tool_pattern, rule.action, rule.updated_by_name) == ("cancel_*", "ask_two", "admin")
    assert rule.conditions == [{"path": "$.order_id", "op": "matches", "value": "^ORD-"}]
    assert ApprovalRuleVersion.objects.filter(rule_key=rule.pk, version=1).exists()


def test_admin_writes_a_whole_value_condition_for_one_launchers_runs(live, browser, users):
    operator = users["operator"]
    page = browser.login(users["admin"])
    page.goto("/rules/new/")
    page.locator("#id_name").fill("operator's cancels")
    page.locator("#id_tool_pattern").fill("cancel_order")
    page.locator("#condition-add").click()
    row = page.locator("#condition-rows .condition-row")
    # The whole-value match comes first among the pattern operators, each saying what it does.
    options = row.locator(".condition-op option")
    labels = [options.nth(i).inner_text() for i in range(options.count())]
    assert labels.index("matches, as a whole value, the RE2 pattern") < labels.index("contains a match of the RE2 pattern")
    row.locator(".condition-path").fill("$.order_id")
    row.locator(".condition-op").select_option("fullmatch")
    row.locator(".condition-value").fill(r"ORD-\d+")
    page.locator("#id_launched_by").select_option(label="operator")
    page.locator("#rule-save").click()

    expect(page.locator(".messages")).to_contain_text("saved (version 1)")
    when = page.locator("#rule-table .rule-row .rule-when")
    expect(when).to_contain_text(r"$.order_id matches, as a whole value, the RE2 pattern 'ORD-\\d+'")
    expect(when).to_contain_text("launched by operator")
    rule = ApprovalRule.objects.get()
    assert rule.conditions == [{"path": "$.order_id", "op": "fullmatch", "value": r"ORD-\d+"}]
    assert rule.launched_by_id == operator.pk
