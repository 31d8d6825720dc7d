"""Operators' levers on a live run, driven in this process: the real loop in a thread, the scripted
demo model over HTTP (it records every request), and a tool that holds its call until the test
lets it go, so a lever lands exactly where the test means it to. Timelines must replay to the rows.
"""
import queue
import threading

import pytest
from django.db import connection

from runs.controls import levers as levers_module
from runs.controls.levers import LeverRefused, run_message, run_pause, run_resume, run_stop
from runs.engine.context.conversation import build_messages
from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_create
from runs.models import Agent, OperatorMessage, Run, RunEvent, Step
from tests.conftest import wait_until
from tests.engine.loop_contract.support import PROBE_SCHEMA, call, calls
from tests.support.approval_fixtures import make_user
from tests.support.timeline_replay import mismatches
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool


class Gate:
    """Each call of the "gate" tool says it started, then waits until the test releases it."""

    def __init__(self):
        self.entered: queue.Queue = queue.Queue()
        self.release = threading.Semaphore(0)
        self.ran: list[str] = []

    def next_call(self) -> str:
        return self.entered.get(timeout=30)


GATE = Gate()


@python_handler("lever_gate")
def _gate(args, ctx):
    GATE.ran.append(ctx.call_id)
    GATE.entered.put(ctx.call_id)
    GATE.release.acquire(timeout=30)
    return {"n": args.get("n"), "done": True}


@pytest.fixture
def gate(demo_data):
    global GATE
    GATE = Gate()
    Tool.objects.create(name="gate", description="waits for the test", parameters=PROBE_SCHEMA, handler="lever_gate")
    yield GATE
    for _ in range(10):
        GATE.release.release()


@pytest.fixture
def alice(demo_data):
    return make_user("alice", "operators")


@pytest.fixture
def dispatched(monkeypatch):
    """No worker here: a resume's dispatch is recorded, and the test drives the run itself."""
    sent = []
    monkeypatch.setattr(levers_module, "run_dispatch", lambda run_id: sent.append(run_id))
    return sent


def new_run(model: str, **overrides) -> Run:
    overrides = {"models": [model], "tools": ["gate"], "summarize_on_stop": False, **overrides}
    return run_create(agent=Agent.objects.get(name="demo"), task="use the gate", overrides=overrides)


def drive(run_id: int) -> threading.Thread:
    def go():
        try:
            run_advance(run_id=run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=go)
    thread.start()
    return thread


def finish(thread: threading.Thread) -> None:
    thread.join(60)
    assert not thread.is_alive(), "the driver did not return"


def note(text: str) -> dict:
    return {"role": "user", "content": text}


def levers(run: Run) -> list[tuple[str, str, str | None]]:
    return [(d["lever"], d["by"], d.get("text")) for d in
            RunEvent.objects.filter(run=run, kind="lever").order_by("seq").values_list("data", flat=True)]


def test_notes_go_with_the_next_request_and_a_note_typed_after_it_waits_for_the_one_after(script, gate, alice):
    model = script(
        {**calls(call("gate", {"n": 1}, "c1")), "latency": 0.5},
        {**calls(call("gate", {"n": 2}, "c2")), "latency": 0.5},
        {"content": "done"},
    )
    run = new_run(model)
    thread = drive(run.pk)
    wait_until(lambda: len(script.requests(model)) >= 1, timeout=30, message="the first request")
    # Two notes typed while the first request is out (or its call runs): both go with the next one.
    run_message(run_id=run.pk, user=alice, text="first note")
    run_message(run_id=run.pk, user=alice, text="second note")
    assert gate.next_call() == "c1"
    gate.release.release()
    wait_until(lambda: len(script.requests(model)) >= 2, timeout=30, message="the second request")
    # The driver has read the waiting notes for the second request: this one waits for the third.
    run_message(run_id=run.pk, user=alice, text="late note")
    assert gate.next_call() == "c2"
    gate.release.release()
    finish(thread)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    first, second, third = script.requests(model)
    assert note("first note") not in first["messages"]
    assert second["messages"][-2:] == [note("first note"), note("second note")]
    assert note("late note") not in second["messages"]
    assert third["messages"].count(note("late note")) == 1 and third["messages"].count(note("first note")) == 1
    preambles = list(Step.objects.filter(run=run).order_by("index").values_list("preamble", flat=True))
    assert preambles == [[], [note("first note"), note("second note")], [note("late note")]]
    assert list(OperatorMessage.objects.filter(run=run).values_list("text", "step__index")) == [
        ("first note", 2), ("second note", 2), ("late note", 3)]
    # The rows alone rebuild exactly what the model was sent.
    assert build_messages(run)[:-1] == third["messages"]
    assert levers(run) == [("message", "alice", "first note"), ("message", "alice", "second note"),
                           ("message", "alice", "late note")]
    assert mismatches(run.pk) == []


def test_pause_at_the_boundary_then_a_note_and_resume_go_on_where_the_run_stopped(script, gate, alice, dispatched):
    bob = make_user("bob", "operators")
    model = script(calls(call("gate", {"n": 1}, "c1")), calls(call("gate", {"n": 2}, "c2")), {"content": "done"})
    run = new_run(model)
    thread = drive(run.pk)
    assert gate.next_call() == "c1"
    run = run_pause(run_id=run.pk, user=alice)
    assert run.status == Run.Status.RUNNING and run.pause_requested  # the driver holds it: next boundary
    gate.release.release()
    finish(thread)  # the driver returns: the run holds no worker while paused

    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED and run.paused_by_name == "alice" and run.paused_at is not None
    assert not run.pause_requested and run.lease_owner == "" and run.active_seconds > 0
    assert len(script.requests(model)) == 1 and run.iterations == 1
    assert run_advance(run_id=run.pk).status == Run.Status.PAUSED  # a stray task does not wake it
    assert len(script.requests(model)) == 1

    run_message(run_id=run.pk, user=bob, text="c2 is the last one")
    run = run_resume(run_id=run.pk, user=alice)
    assert run.status == Run.Status.QUEUED and dispatched == [run.pk]
    thread = drive(run.pk)
    assert gate.next_call() == "c2"
    gate.release.release()
    finish(thread)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert gate.ran == ["c1", "c2"]  # no call ran again
    assert list(Step.objects.filter(run=run).order_by("index").values_list("index", flat=True)) == [1, 2, 3]
    second = script.requests(model)[1]
    assert second["messages"][-1] == note("c2 is the last one")
    assert [m for m in second["messages"] if m["role"] == "tool"][0]["tool_call_id"] == "c1"
    assert levers(run) == [("pause", "alice", None), ("paused", "alice", None),
                           ("message", "bob", "c2 is the last one"), ("resume", "alice", None)]
    assert mismatches(run.pk) == []


def test_stop_ends_the_run_at_the_boundary_with_a_tools_free_summary_as_its_answer(script, gate, alice):
    model = script(calls(call("gate", {"n": 1}, "c1")), {"content": "I ran the gate once."}, {"content": "never"})
    run = new_run(model)  # summarize_on_stop is off: the operator's stop asks for one anyway
    thread = drive(run.pk)
    assert gate.next_call() == "c1"
    assert run_stop(run_id=run.pk, user=alice).status == Run.Status.RUNNING
    with pytest.raises(LeverRefused, match="alice asked the run to stop"):
        run_pause(run_id=run.pk, user=alice)
    gate.release.release()
    finish(thread)

    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.OPERATOR_STOP)
    assert run.stop_detail == "Stopped by alice with a summary."
    assert run.answer == "I ran the gate once."
    requests = script.requests(model)
    assert len(requests) == 2 and requests[1]["tool_choice"] == "none"
    assert "Stopped by alice with a summary." in requests[1]["messages"][-1]["content"]
    assert list(Step.objects.filter(run=run).order_by("index").values_list("kind", flat=True)) == ["turn", "summary"]
    assert gate.ran == ["c1"]
    assert mismatches(run.pk) == []


def test_a_run_nobody_drives_pauses_and_stops_at_once(script, gate, alice):
    model = script({"content": "Nothing was done yet."})
    run = new_run(model)  # queued, no worker
    assert run_pause(run_id=run.pk, user=alice).status == Run.Status.PAUSED
    run = run_stop(run_id=run.pk, user=alice)
    assert (run.status, run.stop_reason, run.answer) == (
        Run.Status.CANCELLED, Run.StopReason.OPERATOR_STOP, "Nothing was done yet.")
    assert levers(run) == [("pause", "alice", None), ("paused", "alice", None), ("stop", "alice", None)]
    assert mismatches(run.pk) == []


def test_levers_that_cannot_apply_say_why_and_change_nothing(launch, script, gate, alice):
    finished = launch("What's the weather in Lagos?")
    before = RunEvent.objects.filter(run=finished).count()
    for lever, kwargs in ((run_pause, {}), (run_resume, {}), (run_stop, {}), (run_message, {"text": "hello"})):
        with pytest.raises(LeverRefused, match=r"^Too late: the run ended as Succeeded \(Final answer\)\.$"):
            lever(run_id=finished.pk, user=alice, **kwargs)
    assert RunEvent.objects.filter(run=finished).count() == before
    assert not OperatorMessage.objects.exists()

    queued = new_run(script({"content": "x"}))
    with pytest.raises(LeverRefused, match="not paused"):
        run_resume(run_id=queued.pk, user=alice)
    for text, problem in (("   ", "empty"), ("x" * 4001, "too long"), ("a\x00b", "NUL")):
        with pytest.raises(LeverRefused, match=problem):
            run_message(run_id=queued.pk, user=alice, text=text)
    run_pause(run_id=queued.pk, user=alice)
    with pytest.raises(LeverRefused, match=r"already paused \(by alice\)"):
        run_pause(run_id=queued.pk, user=alice)
    with pytest.raises(Run.DoesNotExist):
        run_pause(run_id=10**9, user=alice)


def test_the_sweep_never_hands_out_a_paused_run(script, gate, alice, settings):
    from datetime import timedelta

    from django.utils import timezone

    from runs.lifecycle.housekeeping import runs_sweep

    run = new_run(script({"content": "x"}))
    run_pause(run_id=run.pk, user=alice)
    long_ago = timezone.now() - timedelta(seconds=settings.RUN_REQUEUE_AFTER_SECONDS + 3600)
    Run.objects.filter(pk=run.pk).update(created_at=long_ago, lease_expires_at=long_ago)
    assert run.pk not in runs_sweep()["redispatched"]
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED


def test_a_stop_asked_while_the_model_writes_its_final_answer_still_ends_the_run_as_stopped(script, gate, alice):
    model = script({"content": "all done", "latency": 2.0}, {"content": "Summary: answered at once."})
    run = new_run(model)
    thread = drive(run.pk)
    wait_until(lambda: len(script.requests(model)) >= 1, timeout=30, message="the request")
    run_stop(run_id=run.pk, user=alice)  # the lever came first: the run's own end must not win
    finish(thread)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.OPERATOR_STOP)
    assert run.answer == "Summary: answered at once."
    assert [s.message["content"] for s in Step.objects.filter(run=run).order_by("index")] == [
        "all done", "Summary: answered at once."]
    assert mismatches(run.pk) == []
