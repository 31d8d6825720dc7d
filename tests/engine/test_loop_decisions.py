"""Fast unit tests of what the loop does with an answer (runs.engine.decisions): no database, no HTTP."""
import pytest

from runs.engine import guards
from runs.engine.decisions import Answer, Counters, ToolFacts, decide_answer, ending_status, stop_before_request
from runs.models import Run, ToolCall

StopReason = Run.StopReason
CONFIG = {"max_iterations": 5, "repeat_limit": 3, "max_tokens": 1000, "max_wall_seconds": 60.0, "max_cost_usd": 1.0}
TOOLS = {
    "read": ToolFacts("read", read_only=True),
    "write": ToolFacts("write"),
    "delete": ToolFacts("delete", destructive=True, idempotent=False),
    "serial": ToolFacts("serial", parallel_safe=False, read_only=True),
}
START = Counters(iterations=0, tokens=0, cost=0.0, elapsed=0.0)


def planned(name, raw="{}", index=0):
    return guards.PlannedCall(index=index, call_id=f"c{index}", tool_name=name, arguments=raw, args_hash=f"{name}:{raw}")


def answer(*calls, finish="tool_calls", refusal=None, tokens=10, cost=0.0, errors=None):
    return Answer(finish, refusal, tokens, cost, list(calls), errors or [None] * len(calls))


def decide(ans, *, config=CONFIG, counters=START, seen=None, tools=TOOLS):
    return decide_answer(answer=ans, config=config, counters=counters, seen=seen or {}, tools=tools)


def test_an_answer_without_calls_is_the_final_answer():
    assert decide(answer(finish="stop")).stop == StopReason.FINAL_ANSWER


def test_an_answer_without_calls_goes_to_the_verifier_first_when_the_agent_has_one():
    decision = decide(answer(finish="stop"), config={**CONFIG, "verifier": "tickets"})
    assert (decision.stop, decision.verify) == (None, True)


@pytest.mark.parametrize("finish,refusal,reason", [
    ("length", None, StopReason.MAX_TOKENS),
    ("content_filter", None, StopReason.CONTENT_FILTER),
    ("stop", "I will not", StopReason.CONTENT_FILTER),
])
def test_a_cut_or_filtered_answer_stops_and_runs_none_of_its_calls(finish, refusal, reason):
    decision = decide(answer(planned("read"), planned("write", index=1), finish=finish, refusal=refusal))
    assert decision.stop == reason
    assert decision.run == decision.ask == ()
    assert {i: r.status for i, r in decision.refused.items()} == {0: ToolCall.Status.SKIPPED, 1: ToolCall.Status.SKIPPED}


def test_the_last_allowed_iteration_runs_no_tools():
    decision = decide(answer(planned("read")), counters=Counters(4, 0, 0.0, 0.0))
    assert decision.stop == StopReason.ITERATION_LIMIT
    assert decision.refused[0].error == "not executed: the iteration limit was reached"


def test_the_answers_own_tokens_count_toward_the_budget_before_its_calls_run():
    decision = decide(answer(planned("read"), tokens=600), counters=Counters(1, 500, 0.0, 0.0))
    assert decision.stop == StopReason.TOKEN_BUDGET and decision.run == ()


def test_the_iteration_cap_is_reported_before_a_budget_used_up_by_the_same_answer():
    decision = decide(answer(planned("read"), tokens=5000), counters=Counters(4, 0, 0.0, 0.0))
    assert decision.stop == StopReason.ITERATION_LIMIT


def test_a_call_reaching_its_repeat_limit_stops_the_run_with_its_hash():
    decision = decide(answer(planned("read", '{"a":1}')), seen={("read", 'read:{"a":1}'): 2})
    assert decision.stop == StopReason.REPEATED_CALL
    assert decision.detail.startswith("read with arguments hash ")


def test_a_per_tool_repeat_limit_wins_over_the_agents():
    tools = {**TOOLS, "read": ToolFacts("read", read_only=True, repeat_limit=1)}
    assert decide(answer(planned("read")), tools=tools).stop == StopReason.REPEATED_CALL


def test_bad_calls_are_refused_as_errors_and_the_others_still_run():
    decision = decide(answer(planned("nope"), planned("write", index=1), errors=["unknown tool 'nope'", None]))
    assert decision.stop is None
    assert decision.refused[0] == decision.refused[0].__class__(ToolCall.Status.FAILED, "unknown tool 'nope'")
    assert decision.run == (1,)


def test_destructive_calls_wait_for_a_person_and_nothing_is_run_before_the_step_is_recorded():
    decision = decide(answer(planned("read"), planned("delete", index=1)))
    assert (decision.run, decision.ask) == ((0,), (1,))
    assert decision.reads_first is False


def test_reads_run_first_only_when_every_runnable_call_only_reads():
    assert decide(answer(planned("read"), planned("read", '{"b":2}', 1))).reads_first is True
    assert decide(answer(planned("read"), planned("write", index=1))).reads_first is False


def test_calls_run_together_only_when_every_tool_named_is_parallel_safe():
    assert decide(answer(planned("read"), planned("write", index=1))).parallel is True
    together = decide(answer(planned("read"), planned("serial", index=1)))
    assert (together.parallel, together.reads_first) == (False, False)
    unknown = decide(answer(planned("read"), planned("nope", index=1), errors=[None, "unknown tool"]))
    assert unknown.parallel is False and unknown.run == (0,)


def test_before_a_request_a_cancel_comes_first_then_budgets_then_the_iteration_cap():
    spent = Counters(iterations=5, tokens=2000, cost=0.0, elapsed=0.0)
    assert stop_before_request(config=CONFIG, counters=spent, cancel_requested=True) == StopReason.CANCELLED
    assert stop_before_request(config=CONFIG, counters=spent, cancel_requested=False) == StopReason.TOKEN_BUDGET
    capped = Counters(iterations=5, tokens=0, cost=0.0, elapsed=0.0)
    assert stop_before_request(config=CONFIG, counters=capped, cancel_requested=False) == StopReason.ITERATION_LIMIT
    assert stop_before_request(config=CONFIG, counters=START, cancel_requested=False) is None


def test_each_stop_reason_ends_in_one_status():
    assert ending_status(StopReason.FINAL_ANSWER) == Run.Status.SUCCEEDED
    assert ending_status(StopReason.CANCELLED) == Run.Status.CANCELLED
    assert ending_status(StopReason.OPERATOR_STOP) == Run.Status.CANCELLED  # an operator's stop is no failure
    others = set(StopReason) - {StopReason.FINAL_ANSWER, StopReason.CANCELLED, StopReason.OPERATOR_STOP}
    assert {ending_status(reason) for reason in others} == {Run.Status.FAILED}


def test_an_operators_stop_comes_after_a_cancel_and_before_the_limits():
    spent = Counters(iterations=5, tokens=5000, cost=0.0, elapsed=0.0)
    assert stop_before_request(config=CONFIG, counters=START, cancel_requested=False, stop_requested=True) == StopReason.OPERATOR_STOP
    assert stop_before_request(config=CONFIG, counters=spent, cancel_requested=False, stop_requested=True) == StopReason.OPERATOR_STOP
    assert stop_before_request(config=CONFIG, counters=START, cancel_requested=True, stop_requested=True) == StopReason.CANCELLED


def test_an_operators_stop_always_gets_its_summary_and_limits_only_when_the_agent_asks():
    from runs.engine.summaries import summary_wanted

    assert summary_wanted(StopReason.OPERATOR_STOP, {"summarize_on_stop": False})
    assert summary_wanted(StopReason.ITERATION_LIMIT, {"summarize_on_stop": True})
    assert not summary_wanted(StopReason.ITERATION_LIMIT, {"summarize_on_stop": False})
    assert not summary_wanted(StopReason.CANCELLED, {"summarize_on_stop": True})
