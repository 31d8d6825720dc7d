"""Long runs within the model's context: older results summarised in the requests (never in the
journal), read back by call id, a refusal for length compacted and retried once, and the run's
own stop reason when nothing fits. Through the real loop, HTTP and the demo model."""
import json

from runs.engine.context import window as context
from runs.models import Run, Step, ToolCall
from tests.engine.loop_contract.support import call, calls, make_agent, result_for, tool_messages

BUDGET = 8000
SUMMARISED = "[Result summarised"


def long_agent(name="long", **fields):
    return make_agent(name, context_budget_tokens=BUDGET, max_iterations=60, max_tokens=10_000_000,
                      max_cost_usd=1000, **fields)


def estimate(request) -> int:
    """Our estimate of a request as the demo model received it (messages and tool definitions)."""
    return sum(context.message_tokens(m) for m in request["messages"]) + context.definitions_tokens(
        request.get("tools") or [])


def test_a_forty_iteration_run_passes_its_budget_several_times_and_finishes_within_it(launch, script, client, settings):
    long_agent()
    entries = [calls(call("big", {"n": i}, f"call_big_{i}")) for i in range(40)]
    entries.append(calls(call("read_tool_result", {"call_id": "call_big_0", "step": 1}, "call_read")))
    entries.append({"content": "All forty read."})
    model = script(*entries)
    run = launch("read forty big things", agent="long", models=[model], tools=["big"])

    assert run.stop_reason == Run.StopReason.FINAL_ANSWER, run.stop_detail
    assert run.answer == "All forty read."
    requests = script.requests(model)
    assert len(requests) == 42
    # The whole transcript is several budgets long; no request passed the budget.
    journal = sum(len(t) for t in ToolCall.objects.filter(run=run).values_list("result_text", flat=True))
    assert journal / context.CHARS_PER_TOKEN > 3 * BUDGET
    assert max(estimate(r) for r in requests) <= BUDGET
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert all(0 < s.context_tokens <= BUDGET for s in steps)
    # Early requests carry every result whole; later ones summarise the oldest.
    assert steps[0].compacted_calls == [] and "call_big_0" in steps[-1].compacted_calls
    last = requests[-1]
    results = {m["tool_call_id"]: m["content"] for m in tool_messages(last)}
    assert results["call_big_0"].startswith(SUMMARISED)
    assert "read_tool_result" in results["call_big_0"] and "call_big_0" in results["call_big_0"]
    assert not results["call_big_39"].startswith(SUMMARISED)  # the two most recent steps stay whole
    assert not results["call_read"].startswith(SUMMARISED)
    # Valid for the provider: one result per call id, right after its assistant message, in order.
    sent = last["messages"]
    for i, message in enumerate(sent):
        for j, tool_call in enumerate(message.get("tool_calls") or ()):
            assert sent[i + 1 + j]["role"] == "tool" and sent[i + 1 + j]["tool_call_id"] == tool_call["id"]
    # The journal keeps every result whole.
    first = ToolCall.objects.get(run=run, call_id="call_big_0")
    assert json.loads(first.result_text) == {"ok": True, "result": {"blob": "x" * 2000}}
    # The model read the first result back, whole.
    read = ToolCall.objects.get(run=run, call_id="call_read")
    assert read.status == ToolCall.Status.SUCCEEDED
    assert read.result_text == first.result_text  # exactly what the model was first sent
    # The read-back tool was offered from the first request that summarised a result, not before.
    offered = ["read_tool_result" in [t["function"]["name"] for t in r.get("tools", [])] for r in requests]
    first_compacted = next(i for i, s in enumerate(steps) if s.compacted_calls)
    assert offered == [i >= first_compacted for i in range(len(requests))]
    assert run.compactions >= 3
    assert steps[-1].tool_definition_tokens > steps[0].tool_definition_tokens > 0
    # Counted where Prometheus reads it.
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = "t0k", []
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t0k").content.decode()
    assert f'agentsite_context_compactions_total{{agent="long"}} {float(run.compactions)}' in text


def test_without_compaction_the_same_run_sends_everything(launch, script):
    long_agent("whole", compact_context=False)
    model = script(*[calls(call("big", {"n": i})) for i in range(12)], {"content": "done"})
    run = launch("read", agent="whole", models=[model], tools=["big"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert run.config["context_budget"] == 0 and run.config["read_back"] is False
    assert not any("read_tool_result" in json.dumps(r.get("tools")) for r in script.requests(model))
    assert max(estimate(r) for r in script.requests(model)) > BUDGET
    assert not any(m["content"].startswith(SUMMARISED) for m in tool_messages(script.requests(model)[-1]))
    assert run.compactions == 0


def test_a_refusal_for_length_is_compacted_harder_asked_once_more_and_not_refused_again(launch, script):
    long_agent()
    # The provider's window is smaller than our budget thinks: it refuses a request once the
    # conversation passes 2,600 of its tokens, well before our budget of 8,000.
    model = script(*[calls(call("big", {"n": i}, f"c{i}")) for i in range(14)], {"content": "fits now"},
                   context_window=2600)
    run = launch("read", agent="long", models=[model], tools=["big"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER, run.stop_detail
    steps = list(Step.objects.filter(run=run).order_by("index"))
    retried = [s for s in steps if any("summarised harder" in e for e in s.model_errors)]
    assert len(retried) == 1, [s.model_errors for s in steps]  # the budget stays below what was refused
    assert retried[0].compacted_calls and retried[0].index < len(steps) - 3
    assert len(script.requests(model)) == len(steps) + 1  # one request refused, asked once more


def test_a_conversation_that_fits_nowhere_ends_with_its_own_reason(launch, script):
    long_agent()
    model = script(*[calls(call("big", {"n": i})) for i in range(8)], {"content": "never"}, context_window=600)
    run = launch("read", agent="long", models=[model], tools=["big"])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.CONTEXT_FULL
    assert run.stop_detail.startswith("The conversation no longer fits the model's context, even with older results")
    assert "model_error" not in run.stop_reason


def test_a_run_over_its_budget_before_any_request_ends_without_asking(launch, script):
    make_agent("tiny", context_budget_tokens=50)
    model = script({"content": "never asked"})
    run = launch("x" * 1000, agent="tiny", models=[model])
    assert run.stop_reason == Run.StopReason.CONTEXT_FULL
    assert script.requests(model) == []
    assert "over a budget of 50" in run.stop_detail


def test_without_compaction_a_refusal_for_length_ends_the_run_saying_so(launch, script):
    make_agent("plain", compact_context=False)
    model = script({"content": "never"}, context_window=20)
    run = launch("a task longer than twenty tokens, surely, with all these words in it", agent="plain", models=[model])
    assert run.stop_reason == Run.StopReason.CONTEXT_FULL
    assert "summarising older results is off for this agent" in run.stop_detail
    assert len(script.requests(model)) == 1  # not retried: nothing to summarise


def test_a_server_that_numbers_calls_per_answer_gets_the_right_result_back(launch, script):
    """Some servers call every answer's first call call_0: the summaries and the read-back tool
    tell them apart by their step."""
    long_agent()
    entries = [calls(call("big", {"n": i}, "call_0")) for i in range(14)]
    entries.append(calls(call("read_tool_result", {"call_id": "call_0", "step": 2}, "call_0")))
    entries.append({"content": "done"})
    model = script(*entries)
    run = launch("read", agent="long", models=[model], tools=["big"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER, run.stop_detail
    sent = tool_messages(script.requests(model)[-2])
    assert '{"call_id": "call_0", "step": 2}' in sent[1]["content"]  # step 2's summary says so
    read = ToolCall.objects.get(run=run, tool_name="read_tool_result")
    second = ToolCall.objects.get(run=run, step__index=2)
    assert json.loads(second.arguments) == {"n": 1}
    assert read.status == ToolCall.Status.SUCCEEDED and read.result_text == second.result_text


def test_a_provider_that_counts_more_tokens_than_the_estimate_gets_smaller_requests(launch, script):
    long_agent()
    # The provider reports three times the tokens we estimate (a tokenizer that splits finer):
    # the loop scales its estimates to match, and compacts as the provider counts.
    entries = [{**calls(call("big", {"n": i})), "usage": {"prompt_tokens": 0, "completion_tokens": 5}}
               for i in range(10)]
    model = script(*entries, {"content": "done"})
    run = launch("read", agent="long", models=[model], tools=["big"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    plain = list(Step.objects.filter(run=run).order_by("index").values_list("context_tokens", flat=True))
    assert not any(Step.objects.filter(run=run).values_list("compacted_calls", flat=True))  # it all fits

    long_agent("fine")
    counted = [{**calls(call("big", {"n": i})), "usage": {"prompt_tokens": 3 * plain[i] if i < len(plain) else 0,
                                                           "completion_tokens": 5}} for i in range(10)]
    model = script(*counted, {"content": "done"})
    run = launch("read", agent="fine", models=[model], tools=["big"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER, run.stop_detail
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert steps[0].context_tokens == plain[0]  # a small request teaches nothing
    sent = script.requests(model)
    scaled = [s for s in steps if s.context_tokens >= 2.9 * estimate(sent[s.index - 1])]
    assert scaled and scaled[0].index <= 5  # from the first request of a quarter of the budget on
    assert all(s.context_tokens <= BUDGET for s in steps)
    assert any(s.compacted_calls for s in steps)  # what fitted by our count alone did not


def test_a_disabled_read_back_tool_is_neither_offered_nor_named(launch, script):
    from toolsapp.models import Tool

    Tool.objects.filter(name="read_tool_result").update(enabled=False)
    long_agent()
    model = script(*[calls(call("big", {"n": i})) for i in range(16)], {"content": "done"})
    run = launch("read", agent="long", models=[model], tools=["big"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER and run.config["read_back"] is False
    assert run.compactions > 0
    requests = script.requests(model)
    assert not any("read_tool_result" in json.dumps(r) for r in requests)
    assert any("kept in the run's journal" in m["content"] for m in tool_messages(requests[-1]))


NOTE_SCHEMA = {"type": "object", "properties": {"body": {"type": "string", "maxLength": 4000}}, "required": ["body"]}


def test_a_megabyte_of_refused_arguments_goes_back_as_a_note_and_the_run_goes_on(launch, script):
    """A model writes a megabyte of arguments once, past the schema's maxLength: the call is refused,
    and later requests carry a note of them (size, keyed hash, why refused), not the megabyte."""
    from toolsapp.models import Tool

    Tool.objects.create(name="write_note", description="keep a note", parameters=NOTE_SCHEMA, handler="contract_probe")
    make_agent("notes", max_tokens=10_000_000)  # the megabyte counts about 250,000 tokens of output
    huge = json.dumps({"body": "x" * 1_000_000})
    model = script({**calls(call("write_note", huge, "call_huge")), "stream": {"chunk_chars": 65536}},
                   calls(call("write_note", {"body": "short"}, "call_short")),
                   {"content": "Written."})
    run = launch("write it down", agent="notes", models=[model], tools=["write_note"])

    assert run.stop_reason == Run.StopReason.FINAL_ANSWER, run.stop_detail
    refused = ToolCall.objects.get(run=run, call_id="call_huge")
    assert refused.status == ToolCall.Status.FAILED
    assert refused.error.endswith("a string of 1,000,000 characters starting \"" + "x" * 60 + "\") does not satisfy maxLength 4000")
    assert refused.arguments == huge  # the journal keeps what the model sent
    assert Step.objects.get(run=run, index=1).message["tool_calls"][0]["function"]["arguments"] == huge
    assert ToolCall.objects.get(run=run, call_id="call_short").status == ToolCall.Status.SUCCEEDED
    requests = script.requests(model)
    assert len(requests) == 3
    for later in requests[1:]:
        assert len(json.dumps(later)) < 50_000  # not the megabyte
        messages = later["messages"]
        asked = [i for i, m in enumerate(messages) if any(c["id"] == "call_huge" for c in m.get("tool_calls") or ())]
        assert len(asked) == 1
        arguments = messages[asked[0]]["tool_calls"][0]["function"]["arguments"]
        assert isinstance(arguments, str)  # the protocol's type: a JSON text
        note = json.loads(arguments)["arguments_not_sent_again"]
        assert note["characters"] == len(huge)
        assert note["arguments_hash"] == refused.args_hash[:12]
        assert note["refused_because"] == refused.error
        assert "x" * 600 not in arguments
        # Still exactly one result per call id, right after its assistant message.
        assert messages[asked[0] + 1]["tool_call_id"] == "call_huge"
        assert result_for(later, "call_huge")["error"] == refused.error
    assert result_for(requests[2], "call_short")["ok"] is True
