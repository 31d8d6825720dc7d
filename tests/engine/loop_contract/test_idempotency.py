"""Idempotency keys: one per call of a run."""
import json

from runs.models import Run, ToolCall
from tests.engine.loop_contract.support import REC, call, calls, result_for, tool_messages
from toolsapp.models import Ticket

# --- 13. idempotency keys ------------------------------------------------------------------------


def test_idempotency_key_identifies_one_call_of_one_run_whatever_its_id(launch, script):
    # Some servers number calls per answer: the same id in two answers is two different calls.
    first = script(calls(call("probe", {"n": 1}, "same_id")), calls(call("probe", {"n": 2}, "same_id")), {"content": "a"})
    second = script(calls(call("probe", {"n": 1}, "same_id")), {"content": "b"})
    run1 = launch("one", models=[first], tools=["probe"])
    run2 = launch("two", models=[second], tools=["probe"])
    keys = [(ctx.run_id, ctx.call_id, ctx.idempotency_key) for _, _, ctx in REC.calls]
    assert len(keys) == 3
    (r1a, _, k1a), (r1b, _, k1b), (r2, _, k2) = keys
    assert (r1a, r1b, r2) == (run1.pk, run1.pk, run2.pk)
    assert k1a != k1b  # same run, same call id, another call
    assert k2 not in (k1a, k1b)  # the first call of another run
    assert all(k for _, _, k in keys)
    stored = list(ToolCall.objects.filter(run=run1).order_by("step__index").values_list("idempotency_key", flat=True))
    assert stored == [k1a, k1b]


def test_create_ticket_twice_with_same_arguments_makes_one_ticket(launch, script):
    args = {"title": "[TEST] printer on fire", "body": "smoke", "priority": "high"}
    model = script(
        calls(call("create_ticket", args, "c1")), calls(call("create_ticket", args, "c2")), {"content": "done"}
    )
    run = launch("tickets", models=[model], tools=["create_ticket"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert Ticket.objects.filter(title="[TEST] printer on fire").count() == 1
    request = script.requests(model)[2]
    first, second = result_for(request, "c1")["result"], result_for(request, "c2")["result"]
    assert first["created"] is True and second["created"] is False
    assert first["ticket_id"] == second["ticket_id"]


def test_a_model_that_reuses_call_ids_still_creates_each_different_ticket(launch, script):
    model = script(
        calls(call("create_ticket", {"title": "[TEST] one", "body": "a", "priority": "low"}, "call_0")),
        calls(call("create_ticket", {"title": "[TEST] two", "body": "b", "priority": "low"}, "call_0")),
        {"content": "done"},
    )
    run = launch("tickets", models=[model], tools=["create_ticket"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert sorted(Ticket.objects.values_list("title", flat=True)) == ["[TEST] one", "[TEST] two"]
    request = script.requests(model)[2]
    results = [json.loads(m["content"])["result"] for m in tool_messages(request)]
    assert [r["created"] for r in results] == [True, True]
    assert results[0]["ticket_id"] != results[1]["ticket_id"]
