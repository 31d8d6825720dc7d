"""Fault matrix: a model endpoint that rate-limits without (or with an absurd) Retry-After, or
answers 200 with no choices. The run ends (or goes on with the next model); nothing half-made is
recorded; the timeline equals the rows."""
from runs.models import Run, Step
from tests.support.timeline_replay import mismatches

EMPTY_CHOICES = '{"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m", "choices": []}'


def test_a_429_without_retry_after_is_retried_on_the_same_model(launch, script):
    # No Retry-After: the client backs off on its own and asks the same model again.
    model = script({"status": 429, "error": "slow down"}, {"content": "after backing off"})
    other = script({"content": "must not be asked"})
    run = launch("hi", models=[model, other])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "after backing off")
    assert Step.objects.get(run=run).model == model
    assert len(script.requests(model)) == 2
    assert script.requests(other) == []
    assert mismatches(run.pk) == []


def test_a_429_asking_to_wait_an_hour_moves_on_to_the_next_model(launch, script):
    # A Retry-After far beyond the client's bound is not waited for: no worker is parked for an hour.
    model = script({"status": 429, "error": "come back later", "headers": {"Retry-After": "3600"}, "repeat": True})
    other = script({"content": "from the next model"})
    run = launch("hi", models=[model, other])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "from the next model")
    step = Step.objects.get(run=run)
    assert step.model == other
    assert len(step.model_errors) == 1 and model in step.model_errors[0] and "429" in step.model_errors[0]
    assert len(script.requests(model)) == 1, "given up at once instead of retried after an hour"
    assert mismatches(run.pk) == []


def test_an_answer_with_empty_choices_counts_as_a_model_failure(launch, script):
    empty = script({"raw": EMPTY_CHOICES, "status": 200, "repeat": True})
    good = script({"content": "a real answer"})
    run = launch("hi", models=[empty, good])
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "a real answer")
    step = Step.objects.get(run=run)
    assert step.model == good
    assert len(step.model_errors) == 1 and empty in step.model_errors[0] and "no choices" in step.model_errors[0]
    assert mismatches(run.pk) == []


def test_only_empty_choices_ends_the_run_as_a_model_error_with_nothing_recorded(launch, script):
    empty = script({"raw": EMPTY_CHOICES, "status": 200, "repeat": True})
    run = launch("hi", models=[empty])
    assert (run.status, run.stop_reason) == (Run.Status.FAILED, Run.StopReason.MODEL_ERROR)
    assert "no choices" in run.stop_detail
    assert not Step.objects.filter(run=run).exists()
    assert mismatches(run.pk) == []
