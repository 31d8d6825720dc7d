"""Models: fallback and retries, garbage answers, and the one log line per iteration."""
import json
import logging

import pytest

from runs.models import Run, Step
from tests.engine.loop_contract.support import FAST, call, calls

# --- 9. model fallback and retries -----------------------------------------------------------------



def test_falls_back_to_the_next_model_after_repeated_500s(launch, script):
    bad = script({"status": 500, "error": "boom", "repeat": True, "headers": FAST})
    good = script({"content": "from the good model"})
    run = launch("hi", models=[bad, good])
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer == "from the good model"
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1
    assert bad in step.model_errors[0] and "500" in step.model_errors[0] and "boom" in step.model_errors[0]


def test_falls_back_when_the_model_does_not_exist(launch, script):
    good = script({"content": "fallback ok"})
    run = launch("hi", models=["script:nope", good])
    assert run.answer == "fallback ok"
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1 and "script:nope" in step.model_errors[0] and "404" in step.model_errors[0]


def test_rate_limited_model_is_retried_a_bounded_number_of_times_then_skipped(launch, script, settings):
    bad = script({"status": 429, "error": "slow down", "repeat": True, "headers": FAST})
    good = script({"content": "second model"})
    run = launch("hi", models=[bad, good])
    assert run.answer == "second model"
    assert len(script.requests(bad)) == settings.LLM_MAX_RETRIES + 1
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1 and "429" in step.model_errors[0]


def test_a_single_429_is_retried_on_the_same_model(launch, script):
    model = script({"status": 429, "error": "slow down", "headers": FAST}, {"content": "after the wait"})
    other = script({"content": "must not be asked"})
    run = launch("hi", models=[model, other])
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer == "after the wait"
    assert Step.objects.get(run=run).model == model
    assert len(script.requests(model)) == 2
    assert script.requests(other) == []


@pytest.mark.parametrize("garbage", ["this is not json", '{"unexpected": "shape"}', '"just a string"'])
def test_garbage_response_counts_as_a_model_failure(launch, script, garbage):
    bad = script({"raw": garbage, "status": 200, "repeat": True})
    good = script({"content": "sane answer"})
    run = launch("hi", models=[bad, good])
    assert run.answer == "sane answer"
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1 and bad in step.model_errors[0]


def test_when_every_model_fails_the_run_fails_with_the_errors(launch, script):
    first = script({"status": 500, "error": "first exploded", "repeat": True, "headers": FAST})
    second = script({"status": 503, "error": "second unavailable", "repeat": True, "headers": FAST})
    run = launch("hi", models=[first, second, "script:nope"])
    assert run.status == Run.Status.FAILED
    assert run.stop_reason == Run.StopReason.MODEL_ERROR
    assert "first exploded" in run.stop_detail
    assert "second unavailable" in run.stop_detail
    assert "script:nope" in run.stop_detail
    assert not Step.objects.filter(run=run).exists()


# --- 14. logging ---------------------------------------------------------------------------------

SECRET = "sk-live-9f8e7d6c5b4a-DO-NOT-LOG"


def test_one_structured_log_line_per_iteration_without_raw_arguments(launch, script, caplog):
    caplog.set_level(logging.DEBUG)
    model = script(
        calls(call("probe", {"n": 1, "api_key": SECRET}, "c1"), call("probe", {"n": SECRET}, "c2")),
        {"content": "done"},
    )
    run = launch("log", models=[model], tools=["probe"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER

    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "runs.loop"]
    iterations = [line for line in lines if line.get("event") == "iteration"]
    assert [line["iteration"] for line in iterations] == [1, 2]
    first, last = iterations
    for line in iterations:
        assert line["run"] == run.pk
        assert line["model"] == model
        assert isinstance(line["latency_ms"], (int, float))
        assert {"tools", "args_hashes", "stop_reason"} <= set(line)
    assert first["tools"] == ["probe", "probe"]
    assert len(first["args_hashes"]) == 2 and all(first["args_hashes"])
    assert first["stop_reason"] is None
    assert last["tools"] == [] and last["stop_reason"] == Run.StopReason.FINAL_ANSWER

    for record in caplog.records:
        assert SECRET not in record.getMessage()
    assert SECRET not in caplog.text


@pytest.mark.parametrize("reported", [-100, float("nan"), "lots", True, float("inf")], ids=repr)
def test_a_cost_that_makes_no_sense_counts_as_zero_and_never_lowers_the_budget(launch, script, reported):
    model = script(
        {**calls(call("probe", {"n": 1})), "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cost": reported}},
        {**calls(call("probe", {"n": 2})), "usage": {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.6}},
        {"content": "should never be asked"},
    )
    run = launch("spend", models=[model], tools=["probe"], max_cost_usd=0.5)
    assert run.stop_reason == Run.StopReason.COST_BUDGET
    assert run.cost_usd == pytest.approx(0.6)
    assert list(Step.objects.filter(run=run).order_by("index").values_list("cost_usd", flat=True)) == [0, 0.6]


def test_negative_token_counts_count_as_zero(launch, script):
    model = script({"content": "done", "usage": {"prompt_tokens": -500, "completion_tokens": -7}})
    run = launch("tokens", models=[model])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert (run.tokens_in, run.tokens_out) == (0, 0)
