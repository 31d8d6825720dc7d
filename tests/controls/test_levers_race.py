"""A lever pulled as the run ends has exactly one outcome: it applies (its event comes before the
run's end, and the rows say what it did), or it is refused as too late and changes nothing.
The real loop runs in a thread against the demo model while this thread pulls the lever at a
spread of moments; on SQLite and on PostgreSQL (DATABASE_URL)."""
import threading
import time

import pytest
from django.db import connection

from runs.controls.levers import LeverRefused, run_message, run_pause, run_stop
from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_create
from runs.models import Agent, OperatorMessage, Run, RunEvent, Step
from tests.conftest import wait_until
from tests.support.timeline_replay import mismatches

TOO_LATE = "Too late: the run ended as "
PULL = {
    "pause": lambda run_id, user: run_pause(run_id=run_id, user=user),
    "stop": lambda run_id, user: run_stop(run_id=run_id, user=user),
    "message": lambda run_id, user: run_message(run_id=run_id, user=user, text="one more thing"),
}


def race(run_id: int, lever: str, user, moment) -> str | None:
    """Drive the run in a thread and pull the lever at `moment` (a callable that waits for it,
    given the driving thread): None when it applied, else the refusal."""
    started = threading.Event()

    def go():
        started.set()
        try:
            run_advance(run_id=run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=go)
    thread.start()
    started.wait(10)
    moment(thread)
    try:
        PULL[lever](run_id, user)
        refusal = None
    except LeverRefused as exc:
        refusal = str(exc)
    thread.join(60)
    assert not thread.is_alive()
    return refusal


def after(seconds: float):
    return lambda thread: time.sleep(seconds)


def while_the_model_answers(script, model: str):
    """Steered: the driver waits on the model's answer (sent 0.5 s after the request), so the run
    has not ended when the lever is pulled: it applies."""
    return lambda thread: wait_until(lambda: len(script.requests(model)) == 1, message="the model request")


def once_the_run_ended(thread) -> None:
    """Steered: the driver has ended the run: the lever is too late."""
    thread.join(60)


@pytest.mark.parametrize("lever", ["pause", "stop", "message"])
def test_a_lever_racing_the_runs_end_applies_or_is_too_late_never_both(script, alice, lever):
    outcomes = []
    # The first two pulls are steered to each side of the run's end, so both outcomes are checked
    # every time; the others land at a spread of moments around it.
    for attempt in range(8):
        model = script({"content": "done", "latency": 0.5 if attempt == 0 else 0.01}, {"content": "summary"})
        run = run_create(agent=Agent.objects.get(name="demo"), task="end soon",
                         overrides={"models": [model], "tools": [], "summarize_on_stop": False})
        moment = {0: while_the_model_answers(script, model), 1: once_the_run_ended}.get(attempt, after(attempt * 0.006))
        refusal = race(run.pk, lever, alice, moment)
        run.refresh_from_db()
        events = list(RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", "kind", "data"))
        pulled = [seq for seq, kind, data in events if kind == "lever" and data["lever"] == lever]
        if refusal is not None:
            outcomes.append("too late")
            assert refusal.startswith(TOO_LATE), refusal
            assert run.is_finished and pulled == []
            assert not run.pause_requested and not run.stop_requested_by_name
            assert not OperatorMessage.objects.filter(run=run).exists()
        else:
            outcomes.append("applied")
            assert len(pulled) == 1
            ended = [seq for seq, kind, data in events if kind == "run" and data["status"] in Run.FINISHED_STATUSES]
            assert not ended or pulled[0] < ended[0], "a lever was recorded after the run had ended"
            if lever == "pause":
                assert run.status == Run.Status.PAUSED or (run.is_finished and run.pause_requested)
            if lever == "stop":  # even when the model's last answer was on its way: the stop came first
                assert (run.status, run.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.OPERATOR_STOP)
                last = Step.objects.filter(run=run).order_by("index").last()
                assert run.stop_detail == "Stopped by alice with a summary."
                assert last.kind == Step.Kind.SUMMARY and run.answer == last.message["content"]
            if lever == "message":
                assert OperatorMessage.objects.filter(run=run).count() == 1
        assert mismatches(run.pk) == []
    print(f"{lever}: {outcomes}")
    assert outcomes[:2] == ["applied", "too late"], outcomes
    assert set(outcomes) == {"applied", "too late"}
