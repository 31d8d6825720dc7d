"""Order in code: a tool that requires a read earlier in the run (Tool.requires_read) has a call
without it refused as data, telling the model what to call first, and never asks a person."""
import pytest

from runs.engine.tools.prior_reads import read_refusal
from runs.models import Approval, Run, ToolCall
from tests.engine.loop_contract.support import call, calls, result_for
from tests.support.timeline_replay import mismatches
from toolsapp.models import Tool

LOOKUP_FIRST = {"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}
REFUSED = 'cancel_order needs lookup_order with order_id "ORD-1001" earlier in this run: call lookup_order first, then ask again'


@pytest.fixture(autouse=True)
def _lookup_required(demo_data, no_dispatch):
    Tool.objects.filter(name="cancel_order").update(requires_read=LOOKUP_FIRST)
    yield
    problems = [p for run_id in Run.objects.values_list("pk", flat=True) for p in mismatches(run_id)]
    assert problems == []


def cancel(order_id="ORD-1001", call_id="c1"):
    return call("cancel_order", {"order_id": order_id, "reason": "customer asked"}, call_id)


def lookup(order_id="ORD-1001", call_id="l1"):
    return call("lookup_order", {"order_id": order_id}, call_id)


def test_a_cancel_without_a_lookup_is_refused_as_data_and_asks_nobody(launch, script):
    model = script(calls(cancel()), {"content": "I could not cancel it."})
    run = launch("Cancel ORD-1001", models=[model], tools=["lookup_order", "cancel_order"], customer="acme")
    assert run.status == Run.Status.SUCCEEDED
    assert result_for(script.requests(model)[1], "c1") == {"ok": False, "error": REFUSED}
    assert ToolCall.objects.get(run=run, tool_name="cancel_order").status == ToolCall.Status.FAILED
    assert not Approval.objects.filter(run=run).exists()


def test_with_the_lookup_first_the_cancel_reaches_the_queue(launch, script):
    model = script(calls(lookup()), calls(cancel()))
    run = launch("Cancel ORD-1001", models=[model], tools=["lookup_order", "cancel_order"], customer="acme")
    assert run.status == Run.Status.AWAITING_APPROVAL
    assert Approval.objects.get(run=run).status == Approval.Status.PENDING


def test_a_lookup_of_another_order_or_one_that_failed_does_not_count(launch, script):
    # ORD-1002 is looked up (another order); ORD-2001 is another customer's (the lookup fails).
    model = script(calls(lookup("ORD-1002")), calls(lookup("ORD-2001", "l2")), calls(cancel("ORD-2001")),
                   calls(cancel(call_id="c2")), {"content": "gave up"})
    run = launch("Cancel", models=[model], tools=["lookup_order", "cancel_order"], customer="acme")
    requests = script.requests(model)
    assert "ORD-2001" in result_for(requests[3], "c1")["error"]
    assert result_for(requests[4], "c2")["error"] == REFUSED
    assert not Approval.objects.filter(run=run).exists()


def test_a_lookup_in_the_same_answer_is_not_earlier(launch, script):
    model = script(calls(lookup(), cancel()), calls(cancel(call_id="c2")))
    run = launch("Cancel ORD-1001", models=[model], tools=["lookup_order", "cancel_order"], customer="acme")
    assert result_for(script.requests(model)[1], "c1")["error"] == REFUSED
    assert run.status == Run.Status.AWAITING_APPROVAL  # the second ask, after the lookup ran
    assert Approval.objects.get(run=run).tool_call.call_id == "c2"


def test_an_agent_that_may_not_look_up_is_told_the_call_cannot_be_made(launch, script):
    model = script(calls(cancel()), {"content": "done"})
    launch("Cancel ORD-1001", models=[model], tools=["cancel_order"], customer="acme")
    error = result_for(script.requests(model)[1], "c1")["error"]
    assert error == ('cancel_order needs lookup_order with order_id "ORD-1001" earlier in this run, and this agent '
                     "may not call lookup_order: cancel_order cannot be called in this run")


# --- the decision, over plain data -----------------------------------------------------------------


def refusal(arguments, earlier, **kw):
    return read_refusal(tool_name="cancel_order", spec=LOOKUP_FIRST, arguments=arguments, earlier=earlier, **kw)


def test_values_compare_trimmed_and_case_insensitively():
    assert refusal({"order_id": "ORD-1001"}, [{"order_id": " ord-1001 "}]) is None
    assert refusal({"order_id": "ORD-1001"}, [{"order_id": "ORD-10011"}]) == REFUSED
    assert read_refusal(tool_name="t", spec={"tool": "r", "arguments": {"n": "$.n"}}, arguments={"n": 7},
                        earlier=[{"n": "7"}]) is None


def test_no_requirement_and_a_missing_value_and_a_broken_setting():
    assert read_refusal(tool_name="cancel_order", spec={}, arguments={}, earlier=[]) is None
    assert refusal({}, [{"order_id": "ORD-1001"}]) == (
        "cancel_order needs lookup_order earlier in this run with the values at $.order_id of this call, "
        "and this call has none there: call lookup_order first, then ask again with them")
    broken = read_refusal(tool_name="cancel_order", spec={"tool": "lookup_order", "arguments": {"order_id": "order"}},
                          arguments={"order_id": "ORD-1001"}, earlier=[])
    assert broken.startswith("cancel_order cannot be called: its required earlier read is set up wrongly")


def test_a_sensitive_value_is_named_by_its_path_never_quoted():
    error = refusal({"order_id": "ORD-1001"}, [], sensitive_fields=["order_id"])
    assert "ORD-1001" not in error
    assert "order_id equal to this call's $.order_id" in error
