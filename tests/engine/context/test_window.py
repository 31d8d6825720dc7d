"""The context window's decisions as plain functions over messages: what is summarised, in which
order, what never is, and how the estimate counts."""
import json

import pytest

from runs.engine.context import window as context


def conversation(steps: int, result_chars: int = 3000) -> list[dict]:
    messages = [{"role": "system", "content": "Be careful."}, {"role": "user", "content": "Read every page."}]
    for i in range(steps):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "page", "arguments": json.dumps({"n": i})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": json.dumps({"ok": True, "result": "y" * result_chars})})
    return messages


def tokens(messages) -> int:
    return sum(context.message_tokens(m) for m in messages)


def test_under_the_budget_nothing_changes():
    history = conversation(3)
    fitted = context.Window(100_000).fit(history, [], 0)
    assert fitted.messages == history and fitted.compacted == []
    assert fitted.tokens == tokens(history)


def test_no_budget_means_everything_is_sent_however_long():
    history = conversation(50)
    assert context.Window(0).fit(history, [], 0).messages == history


def test_the_oldest_results_go_first_and_only_results_change():
    history = conversation(10)
    notes = [{"role": "user", "content": "An operator's note " * 50}]
    budget = tokens(history) // 2
    fitted = context.Window(budget).fit(history, notes, 0)
    assert fitted.tokens <= budget and fitted.tokens == tokens(fitted.messages)
    assert fitted.compacted == [f"c{i}" for i in range(len(fitted.compacted))]  # oldest first
    for before, after in zip(history + notes, fitted.messages, strict=True):
        if after is not before:
            assert before["role"] == "tool" and after["tool_call_id"] == before["tool_call_id"]
            assert after["content"].startswith("[Result summarised") and "read_tool_result" in after["content"]
    assert fitted.messages[-2]["content"] == history[-1]["content"]  # the latest steps stay whole
    assert fitted.messages[-1] is notes[0]


def test_a_long_run_keeps_one_line_per_old_result_before_giving_up():
    history = conversation(120, result_chars=6000)
    fitted = context.Window(8000).fit(history, [], 300)
    assert fitted.tokens <= 8000
    oldest = fitted.messages[3]["content"]
    assert oldest == "[Result summarised] page c0 (step 1) succeeded; read_tool_result reads it whole."


def test_when_nothing_fits_it_says_so():
    with pytest.raises(context.ContextFull, match="over a budget of 500"):
        context.Window(500).fit(conversation(3), [], 0)


def test_a_harder_compaction_aims_below_what_was_refused():
    history = conversation(10)
    window = context.Window(100_000)
    fitted = window.fit(history, [], 0, context.HARDER, refused_at=10_000)
    assert fitted.tokens <= 7000 and fitted.compacted


def test_a_failed_result_is_summarised_as_failed():
    history = conversation(4)
    history[3] = {**history[3], "content": json.dumps({"ok": False, "error": "e" * 2000})}
    fitted = context.Window(tokens(history) - 500).fit(history, [], 0)
    assert ": failed." in fitted.messages[3]["content"]


def test_the_estimate_counts_non_ascii_text_by_its_bytes_and_errs_high_on_english():
    assert context.text_tokens("abc" * 100) == 100
    assert context.text_tokens("日本語" * 100) == 300  # 3 bytes each: about a token a character
    english = "The quarterly figures show growth in every region. " * 20
    assert context.text_tokens(english) > len(english) / 4


def test_the_budget_is_the_smallest_window_less_the_answer_and_a_margin(settings):
    settings.LLM_CONTEXT_LENGTHS = {"big": 128_000, "small": 8192}
    settings.LLM_CONTEXT_TOKENS = 32_768
    assert context.context_budget(models=["big", "small:q4"], max_output_tokens=1000, own_budget=None) == \
        int(8192 * 0.95) - 1000
    assert context.context_budget(models=["unknown"], max_output_tokens=None, own_budget=None) == \
        int(32_768 * 0.95) - settings.LLM_MAX_OUTPUT_TOKENS
    assert context.context_budget(models=["big"], max_output_tokens=1000, own_budget=5000) == 5000


def test_summaries_stick_so_the_start_of_the_conversation_changes_only_when_more_must_go():
    window = context.Window(6000)
    history = conversation(6)
    first = window.fit(history, [], 0)
    assert first.compacted and first.new == len(first.compacted)
    assert first.tokens <= 6000 * context.Window.HEADROOM  # down to the headroom, not just under
    history += conversation(7)[-2:]  # one more step
    second = window.fit(history, [], 0)
    assert second.messages[:len(history) - 2] == first.messages[:len(history) - 2]  # the same prefix
    assert second.new == 0 and second.compacted == first.compacted
    while second.new == 0:
        history += [{**m, "tool_call_id": m.get("tool_call_id", "") + "x"} if m["role"] == "tool" else
                    {**m, "tool_calls": [{**m["tool_calls"][0], "id": m["tool_calls"][0]["id"] + "x"}]}
                    for m in conversation(7)[-2:]]
        second = window.fit(history, [], 0)
    assert set(first.compacted) < set(second.compacted) and second.tokens <= 6000


def test_a_provider_that_counts_more_scales_the_estimate_up():
    window = context.Window(8000)
    history = conversation(3)
    estimated = window.fit(history, [], 0).tokens
    window.observe(estimated, estimated * 2)
    assert window.fit(history, [], 0).tokens == pytest.approx(estimated * 2, abs=1)
    window.observe(30_000, 10**6)  # never more than MAX_SCALE
    assert window.scale == context.MAX_SCALE
    window.observe(estimated, 1)  # counting fewer never lowers it
    assert window.scale == context.MAX_SCALE


def test_repeated_call_ids_are_told_apart_by_their_step():
    history = conversation(4)
    for message in history:
        if message["role"] == "tool":
            message["tool_call_id"] = "call_0"
        for tool_call in message.get("tool_calls") or ():
            tool_call["id"] = "call_0"
    fitted = context.Window(tokens(history) * 9 // 10).fit(history, [], 0)
    assert '{"call_id": "call_0", "step": 1}' in fitted.messages[3]["content"]
    assert '{"call_id": "call_0", "step": 2}' in fitted.messages[5]["content"]


def test_without_the_read_back_tool_a_summary_does_not_offer_it():
    history = conversation(4)
    fitted = context.Window(tokens(history) * 9 // 10, read_back=False).fit(history, [], 0)
    assert fitted.compacted
    assert all("read_tool_result" not in m.get("content", "") for m in fitted.messages)
    assert "kept in the run's journal" in fitted.messages[3]["content"]


def test_a_large_answer_cap_leaves_half_the_window_to_the_conversation(settings):
    settings.LLM_CONTEXT_LENGTHS, settings.LLM_CONTEXT_TOKENS = {}, 32_768
    assert context.context_budget(models=["x"], max_output_tokens=32_768, own_budget=None) == \
        int(32_768 * 0.95) - 16_384


def test_a_small_request_counted_larger_teaches_nothing():
    window = context.Window(100_000)
    window.observe(100, 1000)  # the provider's template around a tiny request
    assert window.scale == 1.0


def test_a_refused_calls_long_arguments_become_a_note_of_their_size_hash_and_reason():
    huge = json.dumps({"body": "x" * 100_000})
    sent = context.refused_arguments(huge, arguments_hash="0123456789abcdef" * 4,
                                     error="invalid arguments at body: " + "why " * 100)
    assert isinstance(sent, str) and len(sent) < 600
    note = json.loads(sent)[context.REFUSED_NOTE]  # a JSON object, as servers that parse arguments need
    assert note["characters"] == len(huge)
    assert note["arguments_hash"] == "0123456789ab"
    assert note["refused_because"].startswith("invalid arguments at body: why") and len(note["refused_because"]) == 200
    # A summary of the call's result names the hash of the arguments, not of the note.
    assert context.shown_hash(sent) == "0123456789ab"


def test_a_refused_calls_short_arguments_go_back_as_sent_so_the_model_can_fix_them():
    short = '{"body": 12, "oops": true'
    assert context.refused_arguments(short, arguments_hash="ab" * 32, error="not JSON") == short
    assert context.refused_arguments(None, arguments_hash="ab" * 32, error="none") is None


@pytest.mark.django_db
def test_only_calls_refused_before_they_ran_have_their_long_arguments_noted():
    from runs.engine.context.conversation import step_messages
    from runs.models import ToolCall

    huge, short = json.dumps({"body": "x" * 50_000}), json.dumps({"body": 7})
    message = {"role": "assistant", "content": "", "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": "note", "arguments": arguments}}
        for i, arguments in enumerate([huge, short, huge])]}
    refused = ToolCall(call_id="c0", arguments=huge, args_hash="f" * 64, status=ToolCall.Status.FAILED,
                       error="invalid arguments at body: too long", result_text='{"ok": false}')
    small = ToolCall(call_id="c1", arguments=short, args_hash="e" * 64, status=ToolCall.Status.FAILED,
                     error="invalid arguments at body: not a string", result_text='{"ok": false}')
    ran = ToolCall(call_id="c2", arguments=huge, args_hash="d" * 64, status=ToolCall.Status.FAILED, latency_ms=3.0,
                   error="the disk is full", result_text='{"ok": false}')
    messages = step_messages([], message, [refused, small, ran])

    assert [m["role"] for m in messages] == ["assistant", "tool", "tool", "tool"]
    assert [m["tool_call_id"] for m in messages[1:]] == ["c0", "c1", "c2"]  # one result per call, in order
    sent = [c["function"]["arguments"] for c in messages[0]["tool_calls"]]
    assert json.loads(sent[0])[context.REFUSED_NOTE]["arguments_hash"] == "f" * 12
    assert sent[1] == short and sent[2] == huge  # a short mistake stays; a call that ran stays whole
    assert message["tool_calls"][0]["function"]["arguments"] == huge  # the step's own message is not changed
