"""A tool's flags are read before each call runs: an administrator who marks a tool destructive
or disables it changes what happens to its next call, also in a run already being driven."""
from runs.models import Approval, Run, ToolCall
from tests.engine.loop_contract.support import REC, call, calls, result_for


def flip(flag, value):
    return call("flip", {"tool": "probe", "flag": flag, "value": value}, "f1")


def test_a_tool_marked_destructive_during_a_run_makes_its_next_call_wait_for_a_person(launch, script):
    model = script(calls(call("probe", {"n": 1}, "p1")), calls(flip("destructive", True)),
                   calls(call("probe", {"n": 2}, "p2")), {"content": "done"})

    run = launch("probe twice", models=[model], tools=["probe", "flip"], summarize_on_stop=False)

    assert run.status == Run.Status.AWAITING_APPROVAL
    assert ToolCall.objects.get(run=run, call_id="p1").status == ToolCall.Status.SUCCEEDED
    second = ToolCall.objects.select_related("approval").get(run=run, call_id="p2")
    assert second.status == ToolCall.Status.AWAITING_APPROVAL
    assert second.approval.status == Approval.Status.PENDING
    assert [c[1] for c in REC.calls if c[0] == "contract_probe"] == [{"n": 1}], "the second probe must wait"


def test_a_tool_disabled_during_a_run_refuses_its_next_call_as_unavailable(launch, script):
    model = script(calls(flip("enabled", False)), calls(call("probe", {"n": 2}, "p2")), {"content": "done"})

    run = launch("probe after the flip", models=[model], tools=["probe", "flip"], summarize_on_stop=False)

    assert run.status == Run.Status.SUCCEEDED
    refused = result_for(script.requests(model)[2], "p2")
    assert refused["ok"] is False and "unavailable" in refused["error"] and "disabled" in refused["error"]
    assert ToolCall.objects.get(run=run, call_id="p2").status == ToolCall.Status.FAILED
    assert REC.count("contract_probe") == 0
    # The model is no longer offered the disabled tool.
    assert [t["function"]["name"] for t in script.requests(model)[2]["tools"]] == ["flip"]


def test_a_tool_marked_not_idempotent_during_a_run_is_marked_started_before_it_runs(launch, script):
    from runs.models import RunEvent

    model = script(calls(flip("idempotent", False)), calls(call("probe", {"n": 2}, "p2")), {"content": "done"})

    run = launch("probe after the flip", models=[model], tools=["probe", "flip"], summarize_on_stop=False)

    assert run.status == Run.Status.SUCCEEDED
    probe = ToolCall.objects.get(run=run, call_id="p2")
    statuses = [e.data["status"] for e in RunEvent.objects.filter(run=run, kind="call").order_by("seq")
                if e.data["pk"] == probe.pk]
    assert statuses == [ToolCall.Status.STARTED, ToolCall.Status.SUCCEEDED]
