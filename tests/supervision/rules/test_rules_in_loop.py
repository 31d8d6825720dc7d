"""Approval rules as the loop applies them: a scripted model over HTTP, real tools and orders.

What a user notices: which calls ran without a person, which wait and why (the note), what the
model read of a rejection, and that no rule lets through a call the loop would refuse anyway."""
import pytest
from django.contrib.auth.models import Group
from django.db.models import F

from runs.models import Approval, ApprovalRule, Run
from tests.engine.loop_contract.support import call, calls, result_for
from tests.support.timeline_replay import mismatches
from toolsapp.executors.python import python_handler
from toolsapp.models import Order, Ticket, Tool


def add_rule(name, action="approve", *, position=100, **fields) -> ApprovalRule:
    return ApprovalRule.objects.create(name=name, action=action, position=position, **fields)


def cancel(order_id, call_id="c1", reason="customer asked"):
    return calls(call("cancel_order", {"order_id": order_id, "reason": reason}, call_id))


def status(order_id):
    return Order.objects.get(order_id=order_id).status


@pytest.fixture(autouse=True)
def _timeline_equals_rows(demo_data):
    yield
    problems = [p for run_id in Run.objects.values_list("pk", flat=True) for p in mismatches(run_id)]
    assert problems == []


def test_an_approving_rule_runs_the_call_and_the_decision_names_the_rule(launch, script):
    rule = add_rule("cancels of ORD-1001", tool_pattern="cancel_*",
                    conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1001"}])
    ApprovalRule.objects.filter(pk=rule.pk).update(version=3)
    model = script(cancel("ORD-1001"), {"content": "Cancelled."})
    run = launch("Cancel order ORD-1001", models=[model])

    assert run.status == Run.Status.SUCCEEDED
    assert status("ORD-1001") == Order.Status.CANCELLED
    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.automatic) == (Approval.Status.APPROVED, True)
    assert (approval.rule_id, approval.rule_version, approval.rule_name) == (rule.pk, 3, "cancels of ORD-1001")
    assert approval.decided_by_name == ""


def test_the_first_matching_rule_decides_and_a_rejection_reaches_the_model_with_its_reason(launch, script):
    add_rule("everything", position=20)
    add_rule("not the lamp", "reject", position=10, reason="the lamp order is handled by the shop",
             conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1003"}])
    model = script(calls(call("cancel_order", {"order_id": "ORD-1003", "reason": "asked"}, "lamp"),
                         call("cancel_order", {"order_id": "ORD-1001", "reason": "asked"}, "desk")),
                   {"content": "done"})
    run = launch("Cancel ORD-1001 and ORD-1003", models=[model])

    assert run.status == Run.Status.SUCCEEDED
    assert (status("ORD-1003"), status("ORD-1001")) == (Order.Status.OPEN, Order.Status.CANCELLED)
    told = result_for(script.requests(model)[1], "lamp")
    assert told == {"ok": False, "error": "rejected by rule 'not the lamp' v1: the lamp order is handled by the shop"}
    assert [a.rule_name for a in Approval.objects.filter(run=run).order_by("tool_call__index")] == [
        "not the lamp", "everything"]


def test_ask_two_and_ask_group_wait_for_people_as_the_rule_says(launch, script):
    finance = Group.objects.create(name="finance")
    add_rule("desk needs two", "ask_two", conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1001"}])
    add_rule("lamp to finance", "ask_group", group=finance)
    model = script(calls(call("cancel_order", {"order_id": "ORD-1001", "reason": "asked"}, "desk"),
                         call("cancel_order", {"order_id": "ORD-1003", "reason": "asked"}, "lamp")))
    run = launch("Cancel ORD-1001 and ORD-1003", models=[model])

    assert run.status == Run.Status.AWAITING_APPROVAL
    desk, lamp = Approval.objects.filter(run=run).order_by("tool_call__index")
    assert (desk.status, desk.required_approvals, desk.group_id, desk.rule_name) == (
        Approval.Status.PENDING, 2, None, "desk needs two")
    assert (lamp.status, lamp.required_approvals, lamp.group_id, lamp.rule_name) == (
        Approval.Status.PENDING, 1, finance.pk, "lamp to finance")
    assert status("ORD-1001") == status("ORD-1003") == Order.Status.OPEN


def test_a_critical_tool_needs_two_people_even_when_a_rule_approves(launch, script):
    Tool.objects.filter(name="cancel_order").update(critical=True)
    add_rule("everything")
    run = launch("Cancel order ORD-1001", models=[script(cancel("ORD-1001"))])

    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.required_approvals) == (Approval.Status.PENDING, 2)
    assert approval.note == "Rule 'everything' v1 would approve, but cancel_order is critical, so two people must approve."
    assert status("ORD-1001") == Order.Status.OPEN


def test_an_unseen_order_id_keeps_a_rule_from_approving_and_the_note_says_why(launch, script):
    add_rule("small things")
    run = launch("Cancel my lamp order", models=[script(cancel("ORD-1003"))])

    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.automatic, approval.unseen_ids) == (Approval.Status.PENDING, False, ["ORD-1003"])
    assert approval.note == ("Rule 'small things' v1 would approve, but the arguments hold ORD-1003, "
                             "which this run has never seen.")
    assert status("ORD-1003") == Order.Status.OPEN


def test_an_id_the_run_looked_up_first_counts_as_seen(launch, script):
    add_rule("small things")
    model = script(calls(call("search_tickets", {"query": "lamp"}, "s")), calls(call("lookup_order", {"order_id": "ORD-1003"}, "l")),
                   cancel("ORD-1003"), {"content": "Cancelled."})
    run = launch("Cancel my lamp order", models=[model])

    assert run.status == Run.Status.SUCCEEDED
    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.rule_name, approval.unseen_ids) == (Approval.Status.APPROVED, "small things", [])
    assert status("ORD-1003") == Order.Status.CANCELLED


def test_an_unseen_order_id_in_a_sensitive_field_keeps_a_rule_from_approving_and_the_note_names_only_the_field(
        launch, script):
    # Masked on the card, the value is still compared with what the run was shown.
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["order_id"])
    add_rule("all cancels")
    run = launch("Cancel my lamp order", models=[script(cancel("ORD-1003"))])

    assert run.status == Run.Status.AWAITING_APPROVAL
    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.automatic, approval.rule_name) == (Approval.Status.PENDING, False, "all cancels")
    assert approval.note == ("Rule 'all cancels' v1 would approve, but the sensitive field order_id holds an "
                             "identifier this run has never seen.")
    assert approval.unseen_ids == ["order_id: ••••"], "the field is named, never its value"
    assert status("ORD-1003") == Order.Status.OPEN


def test_a_seen_order_id_in_a_sensitive_field_is_approved_by_the_rule(launch, script):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["order_id"])
    add_rule("all cancels")
    run = launch("Cancel order ORD-1001", models=[script(cancel("ORD-1001"), {"content": "Cancelled."})])

    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.rule_name, approval.unseen_ids) == (Approval.Status.APPROVED, "all cancels", [])
    assert status("ORD-1001") == Order.Status.CANCELLED


@pytest.mark.parametrize("policy", ["ask", "approve"])
def test_a_tool_marked_always_ask_waits_for_a_person_whatever_the_rule_or_policy(launch, script, policy):
    Tool.objects.filter(name="cancel_order").update(always_ask=True)
    add_rule("everything")
    run = launch("Cancel order ORD-1001", models=[script(cancel("ORD-1001"))], approval_policy=policy)

    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.automatic) == (Approval.Status.PENDING, False)
    assert approval.note == "Rule 'everything' v1 would approve, but cancel_order is marked always ask."
    assert status("ORD-1001") == Order.Status.OPEN


def test_the_approve_all_policy_does_not_approve_an_unseen_id(launch, script):
    run = launch("Cancel my lamp order", models=[script(cancel("ORD-1003"))], approval_policy="approve")

    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.automatic) == (Approval.Status.PENDING, False)
    assert "approve-all policy would approve, but the arguments hold ORD-1003" in approval.note
    assert status("ORD-1003") == Order.Status.OPEN


# --- a rule never widens what the loop allows -----------------------------------------------------


def test_a_rule_approving_everything_cannot_run_a_call_the_loop_refuses(launch, script):
    add_rule("everything")
    bad = script(calls(call("cancel_order", {"order_id": "ORD-1003"}, "no_reason"),
                       call("cancel_order", {"order_id": "DROP TABLE", "reason": "asked"}, "bad_id"),
                       call("cancel_order", {"order_id": "ORD-1001", "reason": "asked"}, "valid")),
                 {"content": "done"})
    run = launch("Cancel orders ORD-1001 and ORD-1003", models=[bad])
    told = script.requests(bad)[1]
    assert result_for(told, "no_reason")["ok"] is False and "reason" in result_for(told, "no_reason")["error"]
    assert result_for(told, "bad_id")["ok"] is False
    assert result_for(told, "valid")["ok"] is True  # the rule is in force: the valid call ran without a person
    assert [a.tool_call.call_id for a in Approval.objects.filter(run=run)] == ["valid"]
    assert status("ORD-1003") == Order.Status.OPEN
    Order.objects.filter(order_id="ORD-1001").update(status=Order.Status.OPEN)

    not_listed = script(cancel("ORD-1001", "c2"), {"content": "done"})
    run = launch("Cancel order ORD-1001", models=[not_listed], tools=["lookup_order"])
    assert "not allowed for this agent" in result_for(script.requests(not_listed)[1], "c2")["error"]
    assert not Approval.objects.filter(run=run).exists()
    assert status("ORD-1001") == Order.Status.OPEN


def test_a_rule_approving_everything_cannot_touch_another_customers_order(launch, script):
    add_rule("everything")
    model = script(cancel("ORD-2001"), {"content": "done"})
    run = launch("Cancel order ORD-2001", models=[model], customer="acme")

    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.rule_name) == (Approval.Status.APPROVED, "everything")
    assert result_for(script.requests(model)[1], "c1") == {"ok": False, "error": "order ORD-2001 not found for this customer"}
    assert status("ORD-2001") == Order.Status.OPEN


# --- a rule changed while the run goes on ---------------------------------------------------------


@python_handler("test_rule_edit")
def _rule_edit(args, ctx):
    # An admin saves the rule between the run's two calls (another connection, like the editor).
    ApprovalRule.objects.filter(name=args["name"]).update(version=F("version") + 1)
    return {"edited": args["name"]}


def test_each_decision_records_the_rule_version_it_used(launch, script):
    Tool.objects.create(name="edit_rule", handler="test_rule_edit", description="test",
                        parameters={"type": "object", "properties": {"name": {"type": "string"}}})
    add_rule("cancels")
    model = script(cancel("ORD-1001", "first"), calls(call("edit_rule", {"name": "cancels"}, "edit")),
                   cancel("ORD-1003", "second"), {"content": "done"})
    run = launch("Cancel ORD-1001 and ORD-1003", models=[model], tools=["cancel_order", "edit_rule"])

    assert run.status == Run.Status.SUCCEEDED
    used = [(a.tool_call.call_id, a.rule_name, a.rule_version) for a in Approval.objects.filter(run=run).order_by("pk")]
    assert used == [("first", "cancels", 1), ("second", "cancels", 2)]


def test_an_id_only_free_text_in_a_tool_result_mentions_does_not_let_a_rule_approve(launch, script):
    # A ticket's body is anyone's words: an order id it mentions was never shown as an order.
    add_rule("everything")
    ticket = Ticket.objects.create(title="[TEST] note", body="Please also cancel ORD-1003, thanks.", priority="low")
    model = script(calls(call("get_ticket", {"ticket_id": ticket.pk}, "read")), cancel("ORD-1003", "c2"))
    run = launch(f"Handle ticket #{ticket.pk}", models=[model])

    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.unseen_ids) == (Approval.Status.PENDING, ["ORD-1003"])
    assert status("ORD-1003") == Order.Status.OPEN


# --- numbers that are not numbers ---------------------------------------------------------------

PAID = []


@python_handler("test_pay_out")
def _pay_out(args, ctx):
    PAID.append(args["amount"])
    return {"paid": args["amount"]}


@pytest.fixture
def pay_out(demo_data):
    PAID.clear()
    return Tool.objects.create(
        name="pay_out", handler="test_pay_out", description="test", destructive=True,
        parameters={"type": "object", "properties": {"amount": {"type": "number", "maximum": 1000}},
                    "required": ["amount"]},
    )


@pytest.mark.parametrize("amount", ["NaN", "Infinity", "-Infinity"])
def test_a_number_that_is_not_finite_is_a_bad_argument_no_rule_decides(launch, script, pay_out, amount):
    # NaN passes `maximum: 1000` and is not "gt 1000": before, the approving rule ran it.
    add_rule("nothing above 1000", "reject", position=10, conditions=[{"path": "$.amount", "op": "gt", "value": 1000}])
    add_rule("everything", position=20)
    model = script(calls(call("pay_out", f'{{"amount": {amount}}}', "pay")), {"content": "I could not pay."})
    run = launch("Pay out", models=[model], tools=["pay_out"])

    assert run.status == Run.Status.SUCCEEDED
    told = result_for(script.requests(model)[1], "pay")
    assert told["ok"] is False
    assert "not finite" in told["error"]
    assert PAID == [] and not Approval.objects.filter(run=run).exists()


def test_an_operator_edit_with_a_number_that_is_not_finite_is_refused(launch, script, pay_out, alice, no_dispatch):
    from runs.supervision.approvals.decide import EditRefused, approval_decide
    run = launch("Pay out", models=[script(calls(call("pay_out", {"amount": 10}, "pay")))], tools=["pay_out"])
    approval = Approval.objects.get(run=run)

    with pytest.raises(EditRefused, match="not finite"):
        approval_decide(approval_id=approval.pk, user=alice, approve=True, arguments='{"amount": NaN}')
    approval.refresh_from_db()
    assert approval.status == Approval.Status.PENDING and PAID == []


# --- who launched the run is an account, not a name ----------------------------------------------


def launch_as(user, task, model):
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create
    from runs.models import Agent
    run = run_create(agent=Agent.objects.get(name="demo"), task=task, user=user, overrides={"models": [model]})
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    return run


def test_a_launcher_rule_follows_the_account_when_someone_else_takes_its_name(script, demo_data):
    from tests.support.approval_fixtures import make_user
    ada = make_user("ada", "operators")
    add_rule("ada's cancels", tool_pattern="cancel_order", launched_by=ada)
    ada.username = "ada.lovelace"
    ada.save()
    newcomer = make_user("ada", "operators")  # a new person takes the name the rule used to say

    theirs = launch_as(newcomer, "Cancel order ORD-1001", script(cancel("ORD-1001")))
    assert Approval.objects.get(run=theirs).status == Approval.Status.PENDING
    assert status("ORD-1001") == Order.Status.OPEN

    hers = launch_as(ada, "Cancel order ORD-1003", script(calls(call("lookup_order", {"order_id": "ORD-1003"}, "l")),
                                                           cancel("ORD-1003"), {"content": "Cancelled."}))
    approval = Approval.objects.get(run=hers)
    assert (approval.status, approval.rule_name) == (Approval.Status.APPROVED, "ada's cancels")
    assert status("ORD-1003") == Order.Status.CANCELLED


def test_a_launcher_name_that_matched_no_account_approves_nobodys_call(script, demo_data):
    from tests.support.approval_fixtures import make_user
    add_rule("carol's cancels", tool_pattern="cancel_order", launched_by_unresolved="carol")
    carol = make_user("carol", "operators")  # the name exists now, the rule still means nobody

    run = launch_as(carol, "Cancel order ORD-1001", script(cancel("ORD-1001")))
    approval = Approval.objects.get(run=run)
    assert (approval.status, approval.rule_name) == (Approval.Status.PENDING, "")
    assert status("ORD-1001") == Order.Status.OPEN
