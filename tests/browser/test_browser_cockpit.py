"""The operator's cockpit: what a call was asked to do is readable on the run page (arguments as
JSON, sensitive fields masked, an edit field by field), at desktop and at phone width."""
import re
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect

from runs.engine.loop import run_advance
from runs.lifecycle.forks import run_fork
from runs.models import Agent, Approval, ApprovalRule
from runs.supervision.approvals.decide import approval_decide
from tests.browser import (
    PASSWORD,
    assert_no_violations,
    axe_violations,
    open_edit_box,
    requires_chromium,
    screenshot,
    wait_for_seq,
)
from tests.conftest import wait_for_status, wait_until
from toolsapp.models import Tool

pytestmark = [pytest.mark.browser, requires_chromium]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


def at_size(page, size: dict, name: str) -> None:
    page.set_viewport_size(size)
    screenshot(page, f"{name}-{'phone' if size == PHONE else 'desktop'}")


def call_item(page, tool: str):
    return page.locator("#timeline .call[data-call-pk]").filter(has=page.locator(".call-tool", has_text=tool))


def test_the_run_page_shows_each_calls_arguments_with_sensitive_fields_masked(live, browser, users, launch, script):
    Tool.objects.filter(name="create_ticket").update(sensitive_fields=["body"])
    model = script(
        {"tool_calls": [
            {"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}},
            {"id": "t1", "name": "create_ticket", "arguments": {"title": "Heat in Lagos", "body": "card 4111 1111 1111 1111", "priority": "low"}},
        ]},
        {"content": "Filed."},
    )
    run = launch("Weather, then a ticket", models=[model])
    page = browser.login(users["viewer"])
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"/runs/{run.pk}/")
        wait_for_seq(page, run.event_seq)
        weather = call_item(page, "get_weather")
        expect(weather.locator(".call-args-json")).to_contain_text('"city": "Lagos"')
        ticket = call_item(page, "create_ticket")
        expect(ticket.locator(".call-args-json")).to_contain_text('"title": "Heat in Lagos"')
        expect(ticket.locator(".call-args-json")).to_contain_text('"body": "••••"')
        expect(ticket.locator(".call-args-json")).not_to_contain_text("4111")
        # The hash stays beside the arguments, for comparing with logs.
        call = run.tool_calls.get(tool_name="get_weather")
        expect(weather.locator(".call-args-hash")).to_have_attribute("title", f"arguments hash {call.args_hash}")
        at_size(page, size, "run-arguments")


def test_the_timeline_dates_each_status_step_and_ending_in_the_readers_time_zone(live, browser, users, launch, script):
    model = script({"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]}, {"content": "Hot."})
    run = launch("Weather in Lagos", models=[model])
    page = browser.login(users["viewer"], timezone_id="America/New_York")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"/runs/{run.pk}/")
        wait_for_seq(page, run.event_seq)
        # "Status: Running · 2026-12-03 03:44:33 EST": the reader's zone, named (the server keeps UTC).
        running = page.locator("#timeline .run-note[data-status=running]")
        expect(running).to_contain_text(re.compile(r"Status: Running · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d EST"))
        # A step is dated by its event (written in the same transaction as the step).
        first_step = run.events.filter(kind="step").order_by("seq").first()
        local = first_step.created_at.astimezone(ZoneInfo("America/New_York"))
        step_time = page.locator("#step-1 .step-time")
        expect(step_time).to_have_text(local.strftime("%H:%M:%S EST"))
        expect(step_time).to_have_attribute("title", local.strftime("%Y-%m-%d %H:%M:%S EST"))
        expect(page.locator("#timeline .run-end-time")).to_contain_text(" EST")
        expect(page.locator("#live-state")).to_have_text("up to date")
        # The header says when, with its zone, and how long ago.
        created = run.created_at.astimezone(ZoneInfo("America/New_York"))
        expect(page.locator("#run-created-at")).to_have_text(created.strftime("%Y-%m-%d %H:%M:%S EST"))
        expect(page.locator("#run-created-at")).to_have_attribute("title", re.compile(r" UTC$"))
        expect(page.locator("#run-age")).to_have_text(re.compile(r"^\((now|(a|\d+)\sseconds? ago|a minute ago)\)$"))
        at_size(page, size, "run-times")


def test_an_edited_call_shows_what_the_model_asked_and_what_ran_field_by_field(live, browser, users, launch, script):
    model = script(
        {"tool_calls": [{"id": "c1", "name": "cancel_order", "arguments": {"order_id": "ORD-1001", "reason": "customer asked"}}]},
        {"content": "Cancelled."},
    )
    run = launch("Cancel order ORD-1001", models=[model])
    approval = Approval.objects.get(run=run)
    approval_decide(approval_id=approval.pk, user=users["operator"], approve=True, reason="the customer wrote twice",
                    arguments='{"order_id": "ORD-1001", "reason": "duplicate order"}')
    # The decision hands the run to the live worker, which finishes it.
    run = wait_for_status(run.pk, "succeeded")
    page = browser.login(users["viewer"])
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"/runs/{run.pk}/")
        wait_for_seq(page, run.event_seq)
        cancel = call_item(page, "cancel_order")
        edit = cancel.locator(".call-edit")
        expect(edit.locator(".call-edit-head")).to_contain_text("Edited by operator")
        expect(edit.locator(".call-edit-note")).to_have_text("Note: the customer wrote twice")
        row = edit.locator('tr[data-field="reason"]')
        expect(row.locator(".edit-asked")).to_have_text('"customer asked"')
        expect(row.locator(".edit-ran")).to_have_text('"duplicate order"')
        expect(edit.locator("tr[data-field]")).to_have_count(1)  # the order id did not change
        expect(cancel.locator(".call-args-json")).to_contain_text('"reason": "customer asked"')  # the model's own
        at_size(page, size, "run-edited-call")


def phone_pages(run, fork, approval, rule) -> list[str]:
    agent = Agent.objects.get(name="demo")
    tool = Tool.objects.get(name="get_weather")
    return [
        "/runs/", "/runs/new/", f"/runs/{run.pk}/", f"/runs/{run.pk}/fork/?step=1", f"/runs/{fork.pk}/",
        f"/runs/{fork.pk}/compare/", "/approvals/", f"/approvals/{approval.pk}/", "/metrics/", "/agents/",
        f"/agents/{agent.pk}/", f"/agents/{agent.pk}/edit/", "/agents/new/", "/rules/", "/rules/new/",
        f"/rules/{rule.pk}/", "/tools/", f"/tools/{tool.pk}/", f"/tools/{tool.pk}/edit/", "/tools/new/", "/tools/mcp/",
        "/tools/mcp/new/",
    ]


def test_every_page_fits_a_phone_and_the_header_folds_into_a_menu(live, browser, users, launch, script):
    weather = script(
        {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]},
        {"tool_calls": [{"id": "w2", "name": "get_weather", "arguments": {"city": "London"}}]},
        {"content": "Lagos is warm, London is not; a long answer that has to wrap " + "x" * 120},
        {"content": "The fork's own answer."},
    )
    run = launch(models=[weather])
    fork = run_fork(run_id=run.pk, step_index=1, user=users["admin"])
    run_advance(run_id=fork.pk)
    waiting = launch("Cancel order ORD-1001")
    approval = Approval.objects.get(run=waiting)
    rule = ApprovalRule.objects.create(name="small refunds", action="approve", position=10, tool_pattern="cancel_order",
                                       conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1001"}])
    page = browser.login(users["admin"])
    found = {}
    for path in phone_pages(run, fork, approval, rule):
        page.set_viewport_size(DESKTOP)
        page.goto(path)
        page.wait_for_load_state("networkidle")
        found[f"{path} at desktop width"] = axe_violations(page)
        screenshot(page, f"desktop-{path.strip('/').replace('/', '-').replace('?step=1', '') or 'home'}")
        page.set_viewport_size(PHONE)
        found[f"{path} at phone width"] = axe_violations(page)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} is {width} px wide at phone width"
        # The header is one line: its links wait behind the menu button.
        expect(page.locator("#menu-toggle")).to_be_visible()
        expect(page.locator("header .who button", has_text="Sign out")).to_be_hidden()
        name = path.strip("/").replace("/", "-").replace("?step=1", "") or "home"
        screenshot(page, f"phone-{name}")
    assert_no_violations(found)
    header = page.locator("#topbar").bounding_box()
    assert header["height"] < 70, f"the folded header is {header['height']} px tall"
    page.locator("#menu-toggle").click()
    expect(page.locator("#menu-toggle")).to_have_attribute("aria-expanded", "true")
    expect(page.locator("header .who button", has_text="Sign out")).to_be_visible()
    expect(page.locator("header nav a", has_text="Approvals")).to_be_visible()
    screenshot(page, "phone-menu-open")
    page.set_viewport_size(DESKTOP)  # wider: the links are always shown, no button
    expect(page.locator("#menu-toggle")).to_be_hidden()
    expect(page.locator("header .who button", has_text="Sign out")).to_be_visible()


def test_the_history_search_finds_a_run_by_what_its_tool_returned(live, browser, users, launch, script):
    weather = launch("Check the weather", models=[script(
        {"tool_calls": [{"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}}]}, {"content": "Warm."})])
    launch("Say hello", models=[script({"content": "Hello there."})])
    page = browser.login(users["viewer"])
    found = {}
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto("/runs/")
        if size == PHONE:  # folded on a phone, so that the first screen shows runs
            expect(page.get_by_label("Search")).to_be_hidden()
            page.locator("#history-filter-summary").click()
        search = page.get_by_label("Search")
        expect(page.locator("#id_q_helptext")).to_contain_text("answers and tool results")
        search.fill("SUNNY")  # only in get_weather's result: {"conditions": "sunny", ...}
        search.press("Enter")
        rows = page.locator("tr.run-row")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-run-id", str(weather.pk))
        found[f"search at {size['width']}"] = axe_violations(page)
        at_size(page, size, "history-search")
    assert_no_violations(found)


def test_without_javascript_the_run_page_shows_its_timeline_from_the_server(live, browser, users, launch, script):
    Tool.objects.filter(name="create_ticket").update(sensitive_fields=["body"])
    model = script(
        {"tool_calls": [
            {"id": "w1", "name": "get_weather", "arguments": {"city": "Lagos"}},
            {"id": "t1", "name": "create_ticket", "arguments": {"title": "Heat", "body": "secret plan", "priority": "low"}},
        ]},
        {"content": "Lagos is warm; ticket filed."},
    )
    run = launch("Weather, then a ticket", models=[model])
    context = browser.chromium.new_context(base_url=browser.base_url, java_script_enabled=False, viewport=DESKTOP)
    page = browser._watch(context.new_page())
    page.goto("/login/")
    page.locator("input[name=username]").fill(users["viewer"].username)
    page.locator("input[name=password]").fill(PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.goto(f"/runs/{run.pk}/")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        expect(page.locator("#timeline .step[data-index]")).to_have_count(2)
        expect(call_item(page, "get_weather").locator(".call-args-json")).to_contain_text('"city": "Lagos"')
        expect(call_item(page, "get_weather").locator(".call-status")).to_have_attribute("data-status", "succeeded")
        ticket = call_item(page, "create_ticket").locator(".call-args-json")
        expect(ticket).to_contain_text('"body": "••••"')
        expect(ticket).not_to_contain_text("secret plan")
        expect(page.locator("#step-2 .assistant-text")).to_have_text("Lagos is warm; ticket filed.")
        expect(page.locator("#timeline .run-end")).to_have_attribute("data-status", "succeeded")
        expect(page.locator("#live-state")).to_have_text("")  # never "connecting…" forever
        expect(page.get_by_text("Without JavaScript this is the run as it stood")).to_be_visible()
        at_size(page, size, "run-without-javascript")


def test_a_fresh_install_says_what_to_do_first_and_the_demo_offers_its_example_tasks(live, browser, users):
    page = browser.login(users["operator"])
    found = {}
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto("/runs/")
        first = page.locator("#first-steps")
        expect(first).to_contain_text("Launch a run")
        expect(page.locator("#history-runs, table").first).to_contain_text("No runs yet.")
        found[f"empty runs at {size['width']}"] = axe_violations(page)
        at_size(page, size, "runs-first-visit")
        for path in ("/approvals/", "/metrics/", "/rules/"):
            page.goto(path)
            found[f"empty {path} at {size['width']}"] = axe_violations(page)
    page.set_viewport_size(DESKTOP)
    page.goto("/runs/")
    page.locator("#first-steps a", has_text="Launch a run").click()
    examples = page.locator("#example-tasks .example-task")
    expect(examples).to_have_count(4)
    expect(page.locator("#id_approval_policy + p, #launch-form p.muted").filter(has_text="approve every destructive call")).to_contain_text(
        "no role has that right by default")
    expect(page.locator("#launch-form")).not_to_contain_text("runs.approve_all_launch")
    examples.filter(has_text="Cancel order ORD-1001").click()
    expect(page.locator("#id_task")).to_have_value("Cancel order ORD-1001")
    expect(page.locator("#example-filled")).to_have_text("The task is filled in: press Launch to start the run.")
    assert page.url.endswith("/runs/new/"), "the example filled the task in place"
    at_size(page, DESKTOP, "launch-examples")
    at_size(page, PHONE, "launch-examples")
    page.set_viewport_size(DESKTOP)
    # A launch refused: the page with its errors has no violations either.
    page.locator("#id_task").fill("")
    page.locator("#launch-button").click()
    expect(page.locator("#launch-form .errorlist")).to_be_visible()
    found["launch with an error"] = axe_violations(page)
    page.locator("#id_task").fill("Cancel order ORD-1001")
    page.locator("#launch-button").click()
    expect(page.locator("#run-status")).to_have_attribute("data-status", "awaiting_approval")
    assert_no_violations(found)


def test_the_controls_are_grouped_explained_and_ending_ones_ask_first(live, browser, users, launch, no_dispatch):
    run = launch("Cancel order ORD-1001")  # waits for a person: every control applies
    page = browser.login(users["operator"])
    found = {}
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"/runs/{run.pk}/")
        wait_for_seq(page, run.event_seq)
        steer, end = page.locator("#lever-steer"), page.locator("#lever-end")
        expect(steer.locator("#pause-button")).to_be_visible()
        expect(steer.locator("#message-form")).to_be_visible()
        expect(end.locator("#stop-help")).to_contain_text("writes a summary")
        expect(end.locator("#cancel-help")).to_contain_text("without a summary")
        if size is DESKTOP:
            # The controls sit beside the timeline, which starts in the first screen, not below them.
            title, levers = page.locator("#timeline-title").bounding_box(), steer.bounding_box()
            assert title["y"] < 600, f"the timeline starts {title['y']:.0f} px down"
            assert levers["x"] > title["x"] + 500, "the controls are not beside the timeline"
            expect(page.locator("#to-timeline")).to_be_hidden()
        else:
            page.locator("#to-timeline").click()  # narrow: a link past the controls
            expect(page.locator("#timeline-title")).to_be_focused()
            expect(page.locator("#timeline-title")).to_be_in_viewport()
            page.evaluate("window.scrollTo(0, 0)")
        page.locator("#cancel-button").click()
        expect(page.locator("#cancel-form .confirm-box")).to_be_visible()
        expect(page.locator("#cancel-form .confirm-yes")).to_be_focused()
        found[f"confirming at {size['width']}"] = axe_violations(page)
        at_size(page, size, "run-controls-confirm")
        page.locator("#cancel-form .confirm-no").click()
        expect(page.locator("#cancel-button")).to_be_focused()
    run.refresh_from_db()
    assert run.status == "awaiting_approval", "taking the confirmation back ended nothing"
    page.locator("#stop-button").click()
    page.locator("#stop-form .confirm-no").click()
    page.locator("#cancel-button").click()
    with page.expect_navigation():
        page.locator("#cancel-form .confirm-yes").click()
    expect(page.locator("#run-status")).to_have_attribute("data-status", "cancelled")
    assert_no_violations(found)


def test_the_answer_to_a_run_control_appears_beside_the_controls(live, browser, users, launch, no_dispatch):
    run = launch("Cancel order ORD-1001")  # waits for a person: every control applies
    page = browser.login(users["operator"])
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        page.goto(f"/runs/{run.pk}/")
        page.locator("#message-text").fill(f"Check the address first ({size['width']})")
        with page.expect_navigation():
            page.locator("#message-button").click()
        answer = page.locator("#run-answers .card-answer")
        expect(answer).to_contain_text("Your message goes to the agent")
        expect(answer).to_be_in_viewport()  # the page opened at the controls, not at its top
        expect(page.locator("#message-form")).to_be_in_viewport()
        expect(page.locator("ul.messages")).to_be_hidden()  # not repeated at the top
        assert_no_violations({f"after a message at {size['width']}": axe_violations(page)})
        at_size(page, size, "run-control-answer")


def test_a_run_still_going_offers_no_rerun_until_it_ends(live, browser, users, launch, no_dispatch):
    run = launch("Cancel order ORD-1001")
    page = browser.login(users["operator"])
    page.goto(f"/runs/{run.pk}/")
    wait_for_seq(page, run.event_seq)
    expect(page.locator("#rerun-form")).to_be_hidden()
    page.locator("#cancel-button").click()
    with page.expect_navigation():
        page.locator("#cancel-form .confirm-yes").click()
    expect(page.locator("#rerun-form")).to_be_visible()
    expect(page.get_by_label("Destructive calls of the re-run")).to_be_visible()
    # The re-run menu sits inside its card at a laptop's and a phone's width.
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        outside = page.evaluate("""() => {
            const card = document.getElementById("rerun-form").closest(".card").getBoundingClientRect();
            return ["#rerun-form", "#rerun-policy", "#rerun-button"].filter(s => {
                const r = document.querySelector(s).getBoundingClientRect();
                return r.right > card.right + 0.5 || r.left < card.left - 0.5; });
        }""")
        assert outside == [], (size, outside)
        at_size(page, size, "rerun-menu")


def test_approve_is_disabled_with_its_reason_for_the_launcher_and_a_second_vote_and_non_members_see_why(
    live, browser, users, launch, no_dispatch
):
    from django.contrib.auth.models import Group

    from runs.lifecycle.runs import run_create

    Tool.objects.filter(name="cancel_order").update(critical=True)  # two people, neither the launcher
    launched = run_create(agent=Agent.objects.get(name="demo"), task="Cancel order ORD-1001", user=users["operator"])
    run_advance(run_id=launched.pk)
    finance = Group.objects.create(name="finance")
    ApprovalRule.objects.create(name="finance decides", action="ask_group", group=finance, position=1,
                                tool_pattern="cancel_order", conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1002"}])
    grouped = launch("Cancel order ORD-1002")
    page = browser.login(users["operator"])
    page.goto("/approvals/")
    mine = page.locator(f"article.approval[data-run-id='{launched.pk}']")
    expect(mine.locator(".approve-button")).to_be_disabled()
    expect(mine.locator(".approve-tool-button, .approve-identical-button")).to_have_count(0)  # no grants for two-person calls
    expect(mine.locator(".decide-refusal")).to_have_text("You launched this run: two other people must approve this call.")
    expect(mine.locator(".reject-button")).to_be_enabled()  # a launcher may still stop the call
    theirs = page.locator(f"article.approval[data-run-id='{grouped.pk}']")
    for name in ("reject", "approve"):
        expect(theirs.locator(f".{name}-button")).to_be_disabled()
    expect(theirs.locator(".decide-refusal")).to_have_text("Only members of finance may decide this call.")
    found = {}
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        found[size["width"]] = axe_violations(page)
        at_size(page, size, "queue-refusals")

    other = browser.login(users["operator2"])
    other.goto("/approvals/")
    card = other.locator(f"article.approval[data-run-id='{launched.pk}']")
    card.locator(".approve-button").click()
    expect(card.locator(".approvals-count")).to_have_text("1 of 2 approvals")
    other.reload()
    expect(card.locator(".approve-button")).to_be_disabled()
    expect(card.locator(".decide-refusal")).to_contain_text("You already approved this call")
    assert not {width: lines for width, lines in found.items() if lines}


def test_the_rule_editor_offers_the_tools_takes_a_typed_list_and_shows_only_the_fields_its_action_uses(
    live, browser, users
):
    page = browser.login(users["admin"])
    page.goto("/rules/new/")
    options = page.locator("#rule-tool-suggestions option")
    values = [options.nth(n).get_attribute("value") for n in range(options.count())]
    assert {"*", "cancel_order", "get_weather", "cancel_*"} <= set(values)
    expect(page.locator("#id_tool_pattern")).to_have_attribute("list", "rule-tool-suggestions")
    expect(page.locator("#field-group")).to_be_hidden()  # the default action asks one person
    expect(page.locator("#field-reason")).to_be_hidden()
    page.locator("#id_action").select_option("reject")
    expect(page.locator("#field-reason")).to_be_visible()
    expect(page.locator("#field-group")).to_be_hidden()
    page.locator("#id_action").select_option("ask_group")
    expect(page.locator("#field-group")).to_be_visible()
    expect(page.locator("#field-reason")).to_be_hidden()
    page.locator("#id_action").select_option("approve")
    page.locator("#id_name").fill("two known orders")
    page.locator("#id_tool_pattern").fill("cancel_order")
    page.locator("#condition-add").click()
    row = page.locator("#condition-rows .condition-row")
    row.locator(".condition-path").fill("$.order_id")
    row.locator(".condition-op").select_option("in")
    row.locator(".condition-value").fill("ORD-1001, ORD-1003")
    found = {}
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        found[size["width"]] = axe_violations(page)
        at_size(page, size, "rule-editor")
    page.locator("#rule-save").click()
    expect(page.locator("#rule-list, main")).to_contain_text("two known orders")
    rule = ApprovalRule.objects.get(name="two known orders")
    assert rule.conditions == [{"path": "$.order_id", "op": "in", "value": ["ORD-1001", "ORD-1003"]}]
    assert not {width: lines for width, lines in found.items() if lines}


def test_the_answer_to_a_decision_appears_where_the_person_acted(live, browser, users, launch, no_dispatch):
    Tool.objects.filter(name="cancel_order").update(critical=True)
    first = launch("Cancel order ORD-1001")
    second = launch("Cancel order ORD-1002")
    page = browser.login(users["operator"])
    page.set_viewport_size(PHONE)  # a small screen: the top of the page is far away
    page.goto("/approvals/")
    card = page.locator(f"article.approval[data-run-id='{second.pk}']")
    card.locator(".approve-button").click()
    answer = card.locator(".card-answer")
    expect(answer).to_contain_text("1 of 2")
    expect(answer).to_have_attribute("role", "status")
    expect(answer).to_be_in_viewport()
    at_size(page, PHONE, "queue-answer-in-card")
    # The card as the list shows it again after this person's approval: Approve is theirs no more.
    expect(card.locator(".approve-button")).to_be_disabled()
    # Rejected: the card leaves the list and its answer stays where it was.
    card.locator("input[name=reason]").fill("not today")
    card.locator(".reject-button").click()
    expect(card).to_have_count(0)
    left = page.locator(f".card-answer[data-approval-id='{Approval.objects.get(run=second).pk}']")
    expect(left).to_contain_text("Rejected")
    expect(left).to_be_in_viewport()
    assert page.locator(f"article.approval[data-run-id='{first.pk}']").count() == 1


def test_the_queue_has_a_compact_view_and_the_edit_box_checks_the_schema_as_one_types(live, browser, users, launch, no_dispatch):
    for n in range(1, 4):  # the sample orders
        launch(f"Cancel order ORD-100{n}")
    page = browser.login(users["operator"])
    page.goto("/approvals/")
    cards = page.locator("#approval-live article.approval")
    expect(cards).to_have_count(3)
    expect(page.locator("#approval-live-status")).to_contain_text("on")  # connected: the first refresh is done
    first_height = "document.querySelector('#approval-live article.approval').getBoundingClientRect().height"
    full_height = page.evaluate(first_height)  # in one step: a refresh may replace the cards at any time
    page.locator("#compact-toggle").click()
    expect(page.locator("#compact-toggle")).to_have_attribute("aria-pressed", "true")
    expect(cards.first.locator(".approve-button")).to_be_visible()
    expect(cards.first.locator("input[name=reason]")).to_be_hidden()
    assert page.evaluate(first_height) < full_height * 0.75, "compact cards are shorter"
    found = {"compact": axe_violations(page)}
    at_size(page, DESKTOP, "queue-compact")
    page.reload()  # the choice is kept
    expect(page.locator("#approval-live")).to_have_class("compact")
    page.locator("#compact-toggle").click()
    expect(cards.first.locator("input[name=reason]")).to_be_visible()

    card = cards.first
    open_edit_box(card)
    area = card.locator("textarea.edit-arguments")
    area.fill('{"order_id": "ORDER-1", "reason": "Customer asked to cancel"}')
    error = card.locator(".edit-error")
    expect(error).to_contain_text("order_id")  # before any button is pressed
    expect(area).to_have_attribute("aria-invalid", "true")
    found["typing an edit"] = axe_violations(page)
    area.fill('{"order_id": "ORD-1001", "reason": "Customer asked to cancel"}')
    expect(error).to_be_hidden()
    expect(area).to_have_attribute("aria-invalid", "false")
    assert_no_violations(found)


def test_an_admin_lists_adds_tests_and_removes_webhooks_on_the_settings_page(live, browser, users):
    hooks = live.hooks  # a receiver the live server and worker may reach
    page = browser.login(users["admin"])
    page.locator("#nav-webhooks").click()
    expect(page.locator("#no-webhooks")).to_be_visible()
    page.locator("#id_url").fill("http://10.1.2.3/hook")
    page.locator("#webhook-add").click()
    expect(page.locator("#field-url .errorlist")).to_contain_text("Refused")
    found = {"refused": axe_violations(page)}
    page.locator("#id_url").fill(hooks.url)
    page.locator("#id_description").fill("the on-call channel")
    page.locator("#webhook-add").click()
    card = page.locator("section.receiver", has_text=hooks.url)
    expect(card).to_contain_text("the on-call channel")
    expect(card).to_contain_text("added by admin")
    before = len(hooks.requests)
    card.locator(".webhook-test").click()
    expect(page.locator(".messages")).to_contain_text("A test notification is on its way")
    wait_until(lambda: len(hooks.requests) > before, message="the test notification to arrive")
    assert hooks.events()[-1]["event"] == "webhook.test"
    page.reload()
    delivery = page.locator("section.receiver", has_text=hooks.url).locator("tr.delivery")
    expect(delivery).to_have_count(1)
    expect(delivery).to_have_attribute("data-status", "delivered")
    expect(delivery.locator("td.mono").first).to_have_text("webhook.test")
    for size in (DESKTOP, PHONE):
        page.set_viewport_size(size)
        found[f"listed at {size['width']}"] = axe_violations(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
        at_size(page, size, "webhooks")
    page.set_viewport_size(DESKTOP)
    # Off: it stays listed, says so, and a notification no longer goes to it; on again.
    page.locator("section.receiver", has_text=hooks.url).locator(".webhook-switch").click()
    expect(page.locator(".messages")).to_contain_text("is off")
    card = page.locator("section.receiver", has_text=hooks.url)
    expect(card.locator(".receiver-off")).to_contain_text("Off: gets no new notifications")
    expect(card.locator(".webhook-switch")).to_have_text("Turn on")
    found["off"] = axe_violations(page)
    at_size(page, DESKTOP, "webhooks-off")
    from runs.notifications.webhooks import webhook_urls
    assert hooks.url not in webhook_urls()
    card.locator(".webhook-switch").click()
    expect(page.locator("section.receiver", has_text=hooks.url).locator(".webhook-switch")).to_have_text("Turn off")
    assert hooks.url in webhook_urls()
    page.locator("section.receiver", has_text=hooks.url).locator(".webhook-delete").click()
    expect(page.locator(".messages")).to_contain_text("removed")
    expect(page.locator("#no-webhooks")).to_be_visible()
    assert_no_violations(found)
