"""The rule editor's preview: what a rule would have done to the last destructive calls, with the
calls a safeguard keeps from automatic approval counted apart."""
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import Agent, Approval, ApprovalRule, Run, Step, ToolCall
from runs.supervision.approvals.gate import CRASH_NOTE
from runs.supervision.rules.preview import draft_spec, rule_preview
from tests.support.approval_fixtures import make_user
from toolsapp.models import Tool

CANCEL_ORD = {"name": "cancel ORD orders", "tool_pattern": "cancel_*", "action": "approve",
              "conditions": [{"path": "$.order_id", "op": "matches", "value": "^ORD-"}]}


class Calls:
    """Destructive calls that were asked about, written as the loop leaves them."""

    def __init__(self):
        self.n = 0
        self.alice = make_user("alice-launcher", "operators")
        self.run = Run.objects.create(agent=Agent.objects.get(name="demo"), task="t", customer="ACME", created_by=self.alice)

    def add(self, tool: str, arguments, *, note: str = "", unseen=(), run=None) -> ToolCall:
        self.n += 1
        run = run or self.run
        step = Step.objects.create(run=run, index=self.n, iteration=self.n, model="m", message={})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        call = ToolCall.objects.create(
            run=run, step=step, index=0, call_id=f"call-{self.n}", tool_name=tool, arguments=text,
            args_hash=f"{self.n:02d}" + "ab" * 31, idempotency_key=f"key-{self.n}",
        )
        self.ask(call, note=note, unseen=unseen)
        return call

    def ask(self, call: ToolCall, *, note: str = "", unseen=()) -> Approval:
        approval = Approval.objects.create(tool_call=call, run=call.run, note=note, unseen_ids=list(unseen))
        ToolCall.objects.filter(pk=call.pk).update(approval=approval)
        return approval


@pytest.fixture
def calls(demo_data):
    return Calls()


def test_counts_approvals_and_the_calls_a_safeguard_keeps_from_the_rule(calls):
    calls.add("cancel_order", {"order_id": "ORD-1"})
    calls.add("cancel_order", {"order_id": "ORD-2"}, unseen=["ORD-2"])
    calls.add("cancel_order", {"order_id": "ORD-3"}, note=CRASH_NOTE)
    calls.add("cancel_order", {"order_id": "X-4"})
    calls.add("create_ticket", {"title": "printer"})
    calls.add("cancel_order", "{not json")
    # Asked about again after a crash: one call, counted once, by its newest approval.
    again = calls.add("cancel_order", {"order_id": "ORD-5"})
    calls.ask(again, note=CRASH_NOTE)

    preview = rule_preview(draft_spec(CANCEL_ORD))

    assert preview.as_dict() == {
        "considered": 7, "matched": 4, "approve": 1, "blocked_by_safeguards": 3, "reject": 0, "ask_two": 0,
        "ask_group": 0, "ask_quorum": 0, "ask": 0, "not_matched": 2, "unreadable": 1,
        "examples": [
            {"tool": "cancel_order", "args_hash": again.args_hash[:12], "run_id": calls.run.pk,
             "arguments": '{"order_id": "ORD-5"}', "outcome": BLOCKED},
            {"tool": "cancel_order", "args_hash": "03ababababab", "run_id": calls.run.pk,
             "arguments": '{"order_id": "ORD-3"}', "outcome": BLOCKED},
            {"tool": "cancel_order", "args_hash": "02ababababab", "run_id": calls.run.pk,
             "arguments": '{"order_id": "ORD-2"}', "outcome": BLOCKED},
            {"tool": "cancel_order", "args_hash": "01ababababab", "run_id": calls.run.pk,
             "arguments": '{"order_id": "ORD-1"}', "outcome": "approved automatically"},
        ],
    }


BLOCKED = "would approve, but a safeguard sends it to a person"


def test_the_examples_show_the_arguments_with_the_tools_sensitive_fields_masked(calls):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    calls.add("cancel_order", {"order_id": "ORD-1", "reason": "card 4111"})
    example = rule_preview(draft_spec(CANCEL_ORD)).as_dict()["examples"][0]
    assert example["arguments"] == '{"order_id": "ORD-1", "reason": "••••"}' and "4111" not in str(example)


def test_a_tool_marked_always_ask_is_never_counted_as_approved_and_a_critical_one_goes_to_two(calls):
    calls.add("create_ticket", {"title": "a"})
    calls.add("cancel_order", {"order_id": "ORD-1"})
    Tool.objects.filter(name="create_ticket").update(always_ask=True)
    Tool.objects.filter(name="cancel_order").update(critical=True)

    preview = rule_preview(draft_spec({"tool_pattern": "*", "action": "approve"}))

    assert (preview.matched, preview.approve, preview.blocked, preview.ask_two) == (2, 0, 1, 1)


@pytest.mark.parametrize("action,counted", [("reject", "reject"), ("ask_two", "ask_two"), ("ask_group", "ask_group"), ("ask", "ask")])
def test_other_actions_are_counted_by_what_they_do(calls, action, counted):
    calls.add("cancel_order", {"order_id": "ORD-1"}, unseen=["ORD-1"])  # safeguards only hold back approvals
    calls.add("cancel_order", {"order_id": "ORD-2"})

    preview = rule_preview(draft_spec({**CANCEL_ORD, "action": action}))

    assert preview.matched == 2 and getattr(preview, counted) == 2 and preview.blocked == 0


def test_the_run_decides_agent_customer_and_launcher_conditions(calls):
    other = Run.objects.create(agent=calls.run.agent, task="t", customer="Globex")
    calls.add("cancel_order", {"order_id": "ORD-1", "customer": "ACME"})
    calls.add("cancel_order", {"order_id": "ORD-2", "customer": "ACME"}, run=other)

    own_customer = [{"path": "$.customer", "op": "eq", "value": "$run.customer"}]
    assert rule_preview(draft_spec({**CANCEL_ORD, "conditions": own_customer})).matched == 1
    assert rule_preview(draft_spec({**CANCEL_ORD, "launched_by": calls.alice})).matched == 1
    assert rule_preview(draft_spec({**CANCEL_ORD, "customer": "Globex"})).examples[0].run_id == other.pk
    elsewhere = Agent.objects.create(name="elsewhere")
    assert rule_preview(draft_spec({**CANCEL_ORD, "agent": elsewhere})).matched == 0


def test_only_the_newest_calls_are_read_in_a_fixed_number_of_queries(calls):
    for n in range(6):
        calls.add("cancel_order", {"order_id": f"ORD-{n}"})

    with CaptureQueriesContext(connection) as queries:
        preview = rule_preview(draft_spec(CANCEL_ORD), limit=4)

    assert (preview.considered, preview.matched) == (4, 4)
    assert {e.args_hash[:2] for e in preview.examples} == {"06", "05", "04", "03"}
    assert len(queries) == 2


def test_a_call_parked_by_a_real_run_is_in_the_preview(launch):
    run = launch("Cancel order ORD-1001")
    assert run.status == Run.Status.AWAITING_APPROVAL

    preview = rule_preview(draft_spec({"tool_pattern": "cancel_order", "action": "approve"}))

    assert preview.matched == 1 and preview.approve + preview.blocked == 1
    assert preview.examples[0].run_id == run.pk


def test_a_run_without_a_customer_is_not_its_own_customer(calls):
    nobodys = Run.objects.create(agent=calls.run.agent, task="t", customer="")
    calls.add("cancel_order", {"order_id": "ORD-1", "customer": ""}, run=nobodys)
    calls.add("cancel_order", {"order_id": "ORD-2"}, run=nobodys)

    own_customer = [{"path": "$.customer", "op": "eq", "value": "$run.customer"}]
    assert rule_preview(draft_spec({**CANCEL_ORD, "conditions": own_customer})).matched == 0


def test_the_preview_shows_a_searching_pattern_letting_through_what_the_whole_value_match_does_not(calls):
    calls.add("cancel_order", {"order_id": "SKU-1"})
    calls.add("cancel_order", {"order_id": "SKU-1; DROP everything"})

    def matched(op):
        return rule_preview(draft_spec({**CANCEL_ORD, "conditions": [{"path": "$.order_id", "op": op, "value": r"SKU-\d+"}]})).matched

    assert (matched("fullmatch"), matched("matches")) == (1, 2)


def test_the_launcher_is_an_account_and_a_name_without_one_matches_nothing(calls):
    calls.add("cancel_order", {"order_id": "ORD-1"})
    alice = calls.alice
    alice.username = "alice-renamed"
    alice.save()

    assert rule_preview(draft_spec({**CANCEL_ORD, "launched_by": alice})).matched == 1
    orphan = ApprovalRule(launched_by_unresolved="alice-launcher")
    assert rule_preview(draft_spec(CANCEL_ORD, rule=orphan)).matched == 0
    assert rule_preview(draft_spec({**CANCEL_ORD, "launched_by": None}, rule=orphan)).matched == 1
