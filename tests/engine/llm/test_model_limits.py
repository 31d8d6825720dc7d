"""What a model server can make a worker hold: a bounded answer, JSON of bounded depth. Against
the demo model over real HTTP, through the official openai client."""
import gzip
import json

from runs.models import Run, Step


def _completion(content: str) -> dict:
    return {"id": "x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}]}


def test_an_answer_larger_than_the_cap_is_that_models_error_and_the_next_model_answers(launch, script, settings):
    settings.LLM_MAX_RESPONSE_BYTES = 50_000
    huge = script({"content": "x" * 200_000, "repeat": True})
    good = script({"content": "sane answer"})
    run = launch("hi", models=[huge, good])
    assert run.status == Run.Status.SUCCEEDED and run.answer == "sane answer"
    step = Step.objects.get(run=run)
    assert len(step.model_errors) == 1
    assert huge in step.model_errors[0] and "larger than 50000 bytes (LLM_MAX_RESPONSE_BYTES)" in step.model_errors[0]
    assert len(script.requests(huge)) == 1  # refused, not retried: the same server sends the same body


def test_a_small_compressed_answer_that_inflates_past_the_cap_is_refused(launch, script, settings):
    settings.LLM_MAX_RESPONSE_BYTES = 50_000
    body = gzip.compress(json.dumps(_completion("y" * 5_000_000)).encode())
    assert len(body) < 50_000  # on the wire it is small; decoded it is 5 MB
    bomb = script({"raw": body, "headers": {"Content-Encoding": "gzip"}, "repeat": True})
    run = launch("hi", models=[bomb])
    assert run.status == Run.Status.FAILED and run.stop_reason == Run.StopReason.MODEL_ERROR
    assert "larger than 50000 bytes" in run.stop_detail


def test_a_compressed_answer_within_the_cap_is_read(launch, script):
    body = gzip.compress(json.dumps(_completion("zipped answer")).encode())
    zipped = script({"raw": body, "headers": {"Content-Encoding": "gzip"}})
    run = launch("hi", models=[zipped])
    assert run.status == Run.Status.SUCCEEDED and run.answer == "zipped answer"


def test_an_answer_nested_a_hundred_thousand_levels_deep_is_a_model_error_not_a_crash(launch, script):
    bomb = script({"raw": "[" * 100_000 + "]" * 100_000, "repeat": True})
    run = launch("hi", models=[bomb])
    assert run.status == Run.Status.FAILED and run.stop_reason == Run.StopReason.MODEL_ERROR
    assert "nested deeper than 64 levels" in run.stop_detail
