"""Hard bounds: the iteration cap, repeated calls, finish reasons and budgets, and how every ending reads."""

import pytest

from runs.models import Agent, Run, Step, ToolCall
from tests.engine.loop_contract.support import REC, call, calls, make_agent, tool_messages

# --- 3. max_iterations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [0, -1, 2.5, 3.0, "3", None, True, False, 2**53], ids=lambda v: f"max_iterations={v!r}"
)
def test_invalid_max_iterations_is_refused_before_any_model_request(launch, script, value):
    from runs.lifecycle.runs import InvalidRun, run_create

    model = script({"content": "must not be asked"})
    with pytest.raises(InvalidRun, match="max_iterations"):
        run_create(agent=Agent.objects.get(name="demo"), task="hi", overrides={"models": [model], "max_iterations": value})
    assert script.requests(model) == []
    assert not Run.objects.exists()


def test_agent_with_zero_max_iterations_cannot_be_launched(launch, script):
    from runs.lifecycle.runs import InvalidRun, run_create

    agent = make_agent("zero-iterations", max_iterations=0)
    model = script({"content": "must not be asked"})
    with pytest.raises(InvalidRun):
        run_create(agent=agent, task="hi", overrides={"models": [model]})
    assert script.requests(model) == []


def test_max_iterations_at_the_safe_integer_limit_is_accepted(launch, script):
    model = script({"content": "fine"})
    run = launch("hi", models=[model], max_iterations=2**53 - 1)
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER


def test_last_iteration_does_not_execute_tools(launch, script):
    model = script(
        calls(call("probe", {"n": 1}, "c1")),
        calls(call("probe", {"n": 2}, "c2"), call("probe", {"n": 3}, "c3")),
        {"content": "never asked"},
    )
    run = launch("loop", models=[model], tools=["probe"], max_iterations=2, summarize_on_stop=False)
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.ITERATION_LIMIT
    assert run.iterations == 2
    assert len(script.requests(model)) == 2
    # Only the first iteration's call ran.
    assert [c[1] for c in REC.calls] == [{"n": 1}]
    statuses = dict(ToolCall.objects.filter(run=run).values_list("call_id", "status"))
    assert statuses == {"c1": ToolCall.Status.SUCCEEDED, "c2": ToolCall.Status.SKIPPED, "c3": ToolCall.Status.SKIPPED}


def test_single_iteration_run_skips_all_requested_tools(launch, script):
    model = script(calls(call("probe", {"n": 1}, "c1")))
    run = launch("loop", models=[model], tools=["probe"], max_iterations=1, summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.ITERATION_LIMIT
    assert REC.count("contract_probe") == 0
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.SKIPPED


def test_a_run_already_at_its_iteration_limit_asks_the_model_nothing_more(script):
    # E.g. a fork that copied as many iterations as the limit it now has: the cap is checked
    # before a request, not only on the answer.
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create

    model = script({"content": "one request too many"})
    run = run_create(agent=Agent.objects.get(name="demo"), task="loop",
                     overrides={"models": [model], "tools": ["probe"], "max_iterations": 2, "summarize_on_stop": False})
    Run.objects.filter(pk=run.pk).update(iterations=2)
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.ITERATION_LIMIT)
    assert script.requests(model) == []


# --- 4. repeated calls ---------------------------------------------------------------------------


def test_reformatted_identical_calls_stop_the_run_at_the_repeat_limit(launch, script):
    model = script(
        calls(call("probe", '{"n":7}', "c1")),
        calls(call("probe", '{ "n" : 7 }', "c2")),
        calls(call("probe", '{\n  "n": 7\n}', "c3")),
        {"content": "never asked"},
    )
    run = launch("repeat", models=[model], tools=["probe"], summarize_on_stop=False)
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.REPEATED_CALL
    assert REC.count("contract_probe") == 2  # the third, repeated call was not executed
    statuses = dict(ToolCall.objects.filter(run=run).values_list("call_id", "status"))
    assert statuses == {"c1": ToolCall.Status.SUCCEEDED, "c2": ToolCall.Status.SUCCEEDED, "c3": ToolCall.Status.SKIPPED}
    assert len(script.requests(model)) == 3


def test_calls_with_different_arguments_are_not_repeats(launch, script):
    model = script(*(calls(call("probe", {"n": i})) for i in range(4)), {"content": "done"})
    run = launch("vary", models=[model], tools=["probe"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert REC.count("contract_probe") == 4


def test_per_tool_repeat_limit_overrides_the_agent_limit(launch, script):
    model = script(
        calls(call("probe_limited", {"n": 1}, "c1")),
        calls(call("probe_limited", {"n": 1}, "c2")),
        {"content": "never asked"},
    )
    run = launch("repeat", models=[model], tools=["probe_limited"], repeat_limit=5, summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.REPEATED_CALL
    assert REC.count("contract_probe") == 1


def test_repeat_limit_override_for_the_run(launch, script):
    model = script(calls(call("probe", {"n": 1}, "c1")), calls(call("probe", {"n": 1}, "c2")), {"content": "no"})
    run = launch("repeat", models=[model], tools=["probe"], repeat_limit=2, summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.REPEATED_CALL
    assert REC.count("contract_probe") == 1


def test_stuck_demo_task_ends_as_repeated_call(launch):
    run = launch("stuck")
    assert run.stop_reason == Run.StopReason.REPEATED_CALL
    gets = list(ToolCall.objects.filter(run=run).order_by("step__index").values_list("tool_name", "status"))
    assert gets == [
        ("get_ticket", ToolCall.Status.FAILED),
        ("get_ticket", ToolCall.Status.FAILED),
        ("get_ticket", ToolCall.Status.SKIPPED),
    ]


# --- 10. finish reasons and budgets ----------------------------------------------------------------


def test_length_finish_ends_the_run_as_max_tokens(launch, script):
    model = script({"content": "partial ans", "finish_reason": "length"})
    run = launch("long", models=[model])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.MAX_TOKENS


def test_length_finish_with_tool_calls_runs_no_tools(launch, script):
    model = script({**calls(call("probe", {"n": 1}, "c1")), "finish_reason": "length"})
    run = launch("long", models=[model], tools=["probe"])
    assert run.stop_reason == Run.StopReason.MAX_TOKENS
    assert REC.count("contract_probe") == 0
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.SKIPPED


def test_refusal_ends_the_run_as_content_filter(launch, script):
    model = script({"refusal": "I can't help with that"})
    run = launch("bad request", models=[model])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.CONTENT_FILTER
    assert "I can't help with that" in run.stop_detail


def test_content_filter_finish_ends_the_run_as_content_filter(launch, script):
    model = script({"content": "", "finish_reason": "content_filter"})
    run = launch("bad request", models=[model])
    assert run.stop_reason == Run.StopReason.CONTENT_FILTER


def test_wall_time_budget_stops_the_run(launch, script):
    model = script(calls(call("probe", {"n": 1})), calls(call("probe", {"n": 2})), {"content": "late"}, latency=0.02)
    run = launch("slow", models=[model], tools=["probe"], max_wall_seconds=0.001, summarize_on_stop=False)
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.TIME_BUDGET
    assert REC.count("contract_probe") == 0


def test_token_budget_stops_the_run(launch, script):
    model = script(
        {**calls(call("probe", {"n": 1}, "c1")), "usage": {"prompt_tokens": 300_000, "completion_tokens": 10}},
        {"content": "never asked"},
    )
    run = launch("tokens", models=[model], tools=["probe"])
    assert run.stop_reason == Run.StopReason.TOKEN_BUDGET
    assert REC.count("contract_probe") == 0
    assert run.total_tokens == 300_010
    assert len(script.requests(model)) == 1


def test_cost_budget_stops_the_run(launch, script):
    model = script(
        {**calls(call("probe", {"n": 1}, "c1")), "usage": {"prompt_tokens": 10, "completion_tokens": 1, "cost": 2.5}},
        {"content": "never asked"},
    )
    run = launch("cost", models=[model], tools=["probe"], max_cost_usd=1.0)
    assert run.stop_reason == Run.StopReason.COST_BUDGET
    assert run.cost_usd == pytest.approx(2.5)
    assert REC.count("contract_probe") == 0


def test_a_run_whose_budget_is_already_spent_asks_the_model_nothing_more(script):
    # E.g. a fork that starts with its parent's tokens, or a resumed run: the budgets are checked
    # before a request, not only on an answer.
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create

    model = script({"content": "one request too many", "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
    run = run_create(agent=Agent.objects.get(name="demo"), task="spend",
                     overrides={"models": [model], "tools": ["probe"], "max_tokens": 1000, "summarize_on_stop": False})
    Run.objects.filter(pk=run.pk).update(iterations=1, tokens_in=1000)
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.TOKEN_BUDGET)
    assert script.requests(model) == []


def test_budget_spent_across_iterations_stops_the_run(launch, script):
    usage = {"usage": {"prompt_tokens": 60, "completion_tokens": 0}}
    model = script(
        {**calls(call("probe", {"n": 1})), **usage},
        {**calls(call("probe", {"n": 2})), **usage},
        {"content": "never asked"},
    )
    run = launch("tokens", models=[model], tools=["probe"], max_tokens=100)
    assert run.stop_reason == Run.StopReason.TOKEN_BUDGET
    assert REC.count("contract_probe") == 1


# --- 16. every ending gives a clear answer ---------------------------------------------------------


def _ending(reason, launch, script):
    loop = calls(call("probe", {"n": 1}))
    if reason == Run.StopReason.FINAL_ANSWER:
        return launch("x", models=[script({"content": "done"})])
    if reason == Run.StopReason.ITERATION_LIMIT:
        return launch("x", models=[script(loop)], tools=["probe"], max_iterations=1, summarize_on_stop=False)
    if reason == Run.StopReason.REPEATED_CALL:
        return launch("x", models=[script(loop, loop)], tools=["probe"], repeat_limit=2, summarize_on_stop=False)
    if reason == Run.StopReason.MODEL_ERROR:
        return launch("x", models=["script:nope"])
    if reason == Run.StopReason.MAX_TOKENS:
        return launch("x", models=[script({"content": "cut", "finish_reason": "length"})])
    if reason == Run.StopReason.CONTENT_FILTER:
        return launch("x", models=[script({"content": "", "finish_reason": "content_filter"})])
    if reason == Run.StopReason.TIME_BUDGET:
        return launch(
            "x", models=[script(loop, latency=0.02)], tools=["probe"], max_wall_seconds=0.001, summarize_on_stop=False
        )
    if reason == Run.StopReason.TOKEN_BUDGET:
        return launch("x", models=[script({**loop, "usage": {"prompt_tokens": 10**6}})], tools=["probe"])
    if reason == Run.StopReason.COST_BUDGET:
        return launch("x", models=[script({**loop, "usage": {"cost": 5.0}})], tools=["probe"])
    if reason == Run.StopReason.VERIFICATION_FAILED:
        make_agent("verified", verifier="ticket_exists")
        return launch("x", agent="verified", models=[script({"content": "a"}, {"content": "b"})])
    if reason == Run.StopReason.CANCELLED:
        from runs.lifecycle.runs import run_cancel, run_create

        run = run_create(agent=Agent.objects.get(name="demo"), task="x")
        return run_cancel(run=run)
    if reason == Run.StopReason.CONTEXT_FULL:
        model = script(calls(call("big", {"n": 1})), calls(call("big", {"n": 2})), {"content": "never"},
                       context_window=400)
        return launch("read", models=[model], tools=["big"])
    if reason == Run.StopReason.OPERATOR_STOP:
        from runs.controls.levers import run_stop
        from runs.lifecycle.runs import run_create

        run = run_create(agent=Agent.objects.get(name="demo"), task="x", overrides={"models": [script({"content": "s"})]})
        return run_stop(run_id=run.pk, user=None)
    raise AssertionError(reason)


# Every ending a scripted model can bring about (a lost worker and an internal error cannot).
ENDINGS = [r for r in Run.StopReason if r not in (Run.StopReason.WORKER_LOST, Run.StopReason.INTERNAL_ERROR)]


@pytest.mark.parametrize("reason", ENDINGS)
def test_every_ending_has_a_plain_words_stop_detail(launch, script, reason):
    run = _ending(reason, launch, script)
    assert run.stop_reason == reason
    assert run.is_finished and run.finished_at is not None
    detail = run.stop_detail
    assert detail == detail.strip() and detail
    assert detail != reason and " " in detail
    assert "Traceback" not in detail and "None" not in detail


def test_cancel_during_a_run_stops_before_the_next_model_request(launch, script):
    model = script(calls(call("cancel_me", {}, "c1")), {"content": "never asked"})
    run = launch("cancel me", models=[model], tools=["cancel_me"])
    assert run.status == Run.Status.CANCELLED
    assert run.stop_reason == Run.StopReason.CANCELLED
    assert run.stop_detail == "Cancelled by an operator."
    assert len(script.requests(model)) == 1
    assert ToolCall.objects.get(run=run).status == ToolCall.Status.SUCCEEDED


def test_summary_on_stop_makes_one_tools_free_call_and_uses_it_as_the_answer(launch, script):
    model = script(
        calls(call("probe", {"n": 1}, "c1"), call("probe", {"n": 2}, "c2")),
        {"content": "I was stopped before running the probes; nothing was changed."},
        {"content": "never asked"},
    )
    run = launch("summarise", models=[model], tools=["probe"], max_iterations=1, summarize_on_stop=True)
    assert run.stop_reason == Run.StopReason.ITERATION_LIMIT
    assert run.answer == "I was stopped before running the probes; nothing was changed."
    requests = script.requests(model)
    assert len(requests) == 2
    summary_request = requests[1]
    assert summary_request["tool_choice"] == "none"
    assert "Do not call any tools" in summary_request["messages"][-1]["content"]
    # The history it reads still answers every call.
    assert [m["tool_call_id"] for m in tool_messages(summary_request)] == ["c1", "c2"]
    steps = list(Step.objects.filter(run=run).order_by("index").values_list("kind", flat=True))
    assert steps == [Step.Kind.TURN, Step.Kind.SUMMARY]
    assert REC.count("contract_probe") == 0


def test_without_summary_on_stop_no_extra_request_is_made(launch, script):
    model = script(calls(call("probe", {"n": 1})), {"content": "never asked"})
    run = launch("no summary", models=[model], tools=["probe"], max_iterations=1, summarize_on_stop=False)
    assert run.stop_reason == Run.StopReason.ITERATION_LIMIT
    assert len(script.requests(model)) == 1
    assert run.answer == ""
