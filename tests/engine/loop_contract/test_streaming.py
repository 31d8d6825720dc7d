"""Streamed answers: asked for with `stream: true` through the official client, shown live over the
channel layer while written, and committed exactly as a plain answer would be. Against the demo
model over real HTTP, the real loop, the real publisher and channels-redis."""
import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from django.conf import settings

from runs.engine.llm import completions as llm
from runs.engine.loop import run_advance
from runs.engine.streaming import HIDDEN
from runs.lifecycle.runs import run_create
from runs.models import Agent, Run, Step, ToolCall
from toolsapp.models import Tool

WEATHER = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}, "id": "w1"}]}
FINAL = "Lagos is sunny and 31 degrees; nothing else to report for today."


@pytest.fixture(autouse=True)
def _streams_allowed_again():
    # Which servers refused to stream is remembered per process; each test starts afresh.
    llm._plain_only.clear()
    yield
    llm._plain_only.clear()


def test_a_streamed_answer_is_committed_exactly_as_the_plain_answer_of_the_same_entries(launch, script, demo_server):
    entries = (WEATHER, {"content": FINAL, "stream": {"chunk_chars": 5}})
    streamed_model, plain_model = script(*entries), script(*entries, streaming="ignore")
    streamed, plain = launch("weather?", models=[streamed_model]), launch("weather?", models=[plain_model])
    assert streamed.status == plain.status == Run.Status.SUCCEEDED
    assert streamed.answer == plain.answer == FINAL

    def steps(run):
        return [(s.message, s.finish_reason, s.tokens_in, s.tokens_out, s.notes)
                for s in Step.objects.filter(run=run).order_by("index")]

    def calls(run):
        return [(c.call_id, c.tool_name, c.arguments, c.status) for c in ToolCall.objects.filter(run=run)]

    assert steps(streamed) == steps(plain)
    assert calls(streamed) == calls(plain) == [("w1", "get_weather", '{"city": "Lagos"}', ToolCall.Status.SUCCEEDED)]
    sent = script.requests(streamed_model)
    assert [(r.get("stream"), r.get("stream_options")) for r in sent] == [(True, {"include_usage": True})] * 2


def test_a_stream_cut_in_the_middle_is_that_models_failure_and_the_next_model_answers(launch, script):
    cut = script({"content": "This answer will never be fini", "stream": {"chunk_chars": 3, "cut_after": 4}})
    good = script({"content": FINAL})
    run = launch("hi", models=[cut, good])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, FINAL)
    (step,) = Step.objects.filter(run=run)
    assert step.message["content"] == FINAL and "never be fini" not in json.dumps(step.message)
    assert len(step.model_errors) == 1
    assert step.model_errors[0].startswith(f"{cut}: the streamed answer was cut off: connection failed")
    assert step.model_errors[0].endswith("the partial answer was discarded")


def test_a_stream_cut_on_the_only_model_ends_the_run_as_a_model_error(launch, script):
    cut = script({"content": "abcdefghijkl", "stream": {"chunk_chars": 2, "cut_after": 3}, "repeat": True})
    run = launch("hi", models=[cut])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "the streamed answer was cut off" in run.stop_detail and run.answer == ""


def test_a_stream_that_ends_cleanly_without_a_finish_reason_is_not_taken_as_an_answer(launch, script):
    chunk = {"id": "x", "object": "chat.completion.chunk", "model": "m",
             "choices": [{"index": 0, "delta": {"content": "half an ans"}, "finish_reason": None}]}
    ends_early = script({"raw": f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n",
                         "headers": {"Content-Type": "text/event-stream"}})
    good = script({"content": FINAL})
    run = launch("hi", models=[ends_early, good])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, FINAL)
    (step,) = Step.objects.filter(run=run)
    assert step.model_errors == [f"{ends_early}: the streamed answer was cut off: the stream ended before the answer "
                                 "was complete (1 chunks); the partial answer was discarded"]


def test_usage_missing_from_a_stream_is_estimated_and_labelled(launch, script):
    model = script({"content": FINAL, "stream": {"usage": False}})
    run = launch("hi", models=[model])
    (step,) = Step.objects.filter(run=run)
    assert step.tokens_out == -(-len(FINAL) // 4) and step.tokens_in > 0
    assert any(note.startswith("usage estimated") for note in step.notes)
    assert run.tokens_out == step.tokens_out


def test_a_server_that_refuses_to_stream_is_asked_plainly_and_only_plainly_after_that(launch, script):
    model = script(WEATHER, {"content": FINAL}, streaming="refuse")
    run = launch("weather?", models=[model])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, FINAL)
    assert [bool(r.get("stream")) for r in script.requests(model)] == [True, False, False]
    first, second = Step.objects.filter(run=run).order_by("index")
    assert any("refused a streamed request (HTTP 400" in note for note in first.notes)
    assert not second.notes and not first.model_errors


def test_an_agent_with_streamed_answers_off_sends_plain_requests(launch, script):
    Agent.objects.filter(name="demo").update(stream_answers=False)
    model = script({"content": FINAL})
    run = launch("hi", models=[model])
    assert run.answer == FINAL and run.config["stream_answers"] is False
    assert [r.get("stream") for r in script.requests(model)] == [None]


def _stream_messages(run: Run) -> list[dict]:
    """Drive the run while listening to its group on the real channel layer; the stream messages."""

    async def listen():
        layer = RedisChannelLayer(**settings.CHANNEL_LAYERS["default"]["CONFIG"])
        channel = await layer.new_channel()
        await layer.group_add(run.group_name, channel)
        try:
            await asyncio.get_running_loop().run_in_executor(None, lambda: run_advance(run_id=run.pk))
            got = []
            while True:
                try:
                    message = await asyncio.wait_for(layer.receive(channel), 3)
                except TimeoutError:
                    return got
                if message["type"] == "run.stream":
                    got.append(message)
        finally:
            await layer.group_discard(run.group_name, channel)
            await layer.close_pools()

    return async_to_sync(listen)()


@pytest.mark.django_db(transaction=True)
def test_the_answer_is_shown_growing_a_few_times_a_second_and_sensitive_arguments_only_once_complete(
    demo_data, script
):
    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    slow = {"chunk_chars": 4, "chunk_delay": 0.06}
    model = script(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos, Nigeria, West Africa"}},
                        {"name": "cancel_order", "arguments": {"order_id": "ORD-1", "reason": "card 4242 4242"}}],
         "stream": slow},
        {"content": FINAL, "stream": slow},
    )
    agent = Agent.objects.get(name="demo")
    run = run_create(agent=agent, task="hi", overrides={"models": [model], "tools": ["cancel_order", "get_weather"]},
                     approval_policy="ask")
    messages = _stream_messages(run)
    run.refresh_from_db()
    assert run.status == Run.Status.AWAITING_APPROVAL  # the destructive call waits; the stream is over
    assert messages and all(m["state"] == "writing" and m["step"] == 1 and m["model"] == model for m in messages)
    # About 30 chunks over 1.8 s: a message every 0.25 s at most, never one per chunk.
    assert 2 <= len(messages) <= 8
    arguments = [m["calls"][0]["arguments"] for m in messages if m["calls"]]
    assert all(a is not None and '{"city": "Lagos, Nigeria, West Africa"}'.startswith(a) for a in arguments)
    assert len(set(arguments)) > 1  # it grew
    second = [m["calls"][1] for m in messages if len(m["calls"]) > 1]
    assert second and all(c["arguments"] is None and c["hidden"] == HIDDEN for c in second)
    assert "4242" not in json.dumps(messages)


def test_progress_of_a_run_nobody_watches_stops_being_queued_after_the_first_message(launch, script, monkeypatch):
    from runs.engine.storage import events

    queued, submit = [], events._publisher.submit
    monkeypatch.setattr(events._publisher, "submit", lambda items: queued.extend(items) or submit(items))
    model = script({"content": FINAL * 2, "stream": {"chunk_chars": 2, "chunk_delay": 0.03}})
    run = launch("hi", models=[model])  # about 2 s of stream: 8 messages if somebody watched
    assert run.answer == FINAL * 2
    assert len([m for _, m in queued if m["type"] == "run.stream"]) <= 2


def test_an_error_that_is_not_about_streaming_is_that_models_failure_not_a_plain_retry(launch, script):
    model = script({"status": 400, "error": "the context is too long for this model"}, {"content": FINAL})
    run = launch("hi", models=[model])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "the context is too long" in run.stop_detail
    assert [r.get("stream") for r in script.requests(model)] == [True]
