"""Forking a run from a step, through the real loop: a scripted demo model over HTTP, real tools.

What a user notices: the fork's model is sent the copied conversation (with the edit), nothing a
copied step did happens again, calls the parent had not finished are never run by the fork (and
its model is told), and the fork's own calls go through approval under keys of their own."""
import threading

import pytest
from django.contrib.auth.models import User

from runs.engine import guards
from runs.engine.loop import run_advance
from runs.engine.storage.events import event_record
from runs.lifecycle import forks
from runs.lifecycle.forks import NOT_EXECUTED, ForkRefused, run_fork
from runs.lifecycle.relatives import NotAFork, run_comparison, run_family
from runs.lifecycle.reruns import rerun_create
from runs.models import Approval, OperatorMessage, Run, RunEvent, Step, ToolCall
from runs.supervision.approvals import decide
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import call, calls, result_for
from tests.support.timeline_replay import fork_mismatches, mismatches
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool

EFFECTS: list[dict] = []  # every execution of the test tools: their side effects
FORKED: dict[str, object] = {}
LOCK = threading.Lock()
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


@python_handler("test_fork_effect")
def _effect(args, ctx):
    with LOCK:
        EFFECTS.append({"run": ctx.run_id, "n": args.get("n"), "key": ctx.idempotency_key})
    return {"n": args.get("n"), "done": True}


@python_handler("test_fork_from_inside")
def _fork_from_inside(args, ctx):
    # An operator forks the run while this very call runs (another connection, like the web UI).
    with LOCK:
        EFFECTS.append({"run": ctx.run_id, "n": "fork_me", "key": ctx.idempotency_key})
    FORKED["run"] = run_fork(run_id=ctx.run_id, step_index=1, user=User.objects.get(username="alice"))
    return {"forked": True}


@pytest.fixture(autouse=True)
def _tools(demo_data):
    EFFECTS.clear()
    FORKED.clear()
    tools = [
        Tool.objects.create(name="effect", handler="test_fork_effect", description="test", parameters=SCHEMA),
        Tool.objects.create(name="purge", handler="test_fork_effect", description="test", parameters=SCHEMA,
                            destructive=True, idempotent=False),
        Tool.objects.create(name="fork_me", handler="test_fork_from_inside", description="test", parameters=SCHEMA,
                            idempotent=False, parallel_safe=False),
    ]
    from runs.models import Agent

    Agent.objects.get(name="demo").tools.add(*tools)  # a fork by an operator keeps to its agent's tools


@pytest.fixture(autouse=True)
def _timeline_equals_rows(_tools):
    yield
    problems = [p for run_id in Run.objects.values_list("pk", flat=True) for p in mismatches(run_id)]
    assert problems == [], "\n".join(problems[:20])


@pytest.fixture
def dispatched(monkeypatch):
    """No worker here: the runs a fork or a decision hands out, driven by the test."""
    sent = []
    monkeypatch.setattr(forks, "run_dispatch", lambda run_id: sent.append(run_id))
    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: sent.append(run_id))
    return sent


def usage(n):
    return {"usage": {"prompt_tokens": 100 * n, "completion_tokens": n, "cost": 0.001 * n}}


def effect(n, call_id):
    return {**calls(call("effect", {"n": n}, call_id)), **usage(n)}


def four_steps(script, *more):
    """A model that makes three calls, one a step, then answers; `more` answers the fork after."""
    return script(effect(1, "a1"), effect(2, "a2"), effect(3, "a3"), {"content": "parent done", **usage(4)}, *more)


def launched(launch, model, task="Do three things"):
    run = launch(task, models=[model], tools=["effect", "purge", "fork_me"], summarize_on_stop=False)
    assert run.status == Run.Status.SUCCEEDED, run.stop_detail
    return run


def test_a_fork_with_an_edited_result_sends_the_copied_history_and_repeats_no_effect(launch, script, alice, dispatched):
    model = four_steps(script, effect(5, "b1"), {"content": "fork done", **usage(6)})
    parent = launched(launch, model)
    assert [e["n"] for e in EFFECTS] == [1, 2, 3]
    edited = '{"ok":true,"result":{"n":20,"note":"edited"}}'

    fork = run_fork(run_id=parent.pk, step_index=2, user=alice,
                    edit={"tool_result": {"call_id": "a2", "content": edited}})
    assert dispatched == [fork.pk]
    assert (fork.forked_from_id, fork.forked_at_step, fork.status, fork.config["approval_policy"]) == (
        parent.pk, 2, Run.Status.QUEUED, "ask")
    run_advance(run_id=fork.pk)
    fork.refresh_from_db()

    assert (fork.status, fork.answer) == (Run.Status.SUCCEEDED, "fork done")
    requests = script.requests(model)
    first = requests[4]["messages"]  # the parent's requests were the first four
    expected = [dict(m) for m in requests[2]["messages"]]  # what the parent sent after its step 2
    expected[-1]["content"] = edited
    assert first == expected
    assert result_for(requests[4], "a2") == {"ok": True, "result": {"n": 20, "note": "edited"}}
    # No tool of a copied step ran again: the fork's only effect is its own new call, under its own key.
    assert [(e["run"], e["n"]) for e in EFFECTS] == [(parent.pk, 1), (parent.pk, 2), (parent.pk, 3), (fork.pk, 5)]
    assert EFFECTS[-1]["key"] == guards.idempotency_key(fork.pk, 3, 0) != EFFECTS[0]["key"]
    a2 = ToolCall.objects.get(run=fork, call_id="a2")
    assert (a2.status, a2.result["edited_by"], a2.result["recorded"]) == (
        ToolCall.Status.SUCCEEDED, "alice", ToolCall.objects.get(run=parent, call_id="a2").result)
    # The copied steps count: iterations, tokens and cost go on from the parent's step 2.
    assert (fork.iterations, fork.tokens_in, fork.tokens_out) == (4, 100 * (1 + 2 + 5 + 6), 1 + 2 + 5 + 6)
    assert fork.cost_usd == pytest.approx(0.001 * (1 + 2 + 5 + 6))
    assert fork_mismatches(fork.pk) == []


def test_an_edited_answer_replaces_the_text_the_model_reads(launch, script, alice, dispatched):
    model = four_steps(script, {"content": "second thoughts"})
    parent = launched(launch, model)

    fork = run_fork(run_id=parent.pk, step_index=4, user=alice, edit={"answer": "  I am not sure yet.  "})
    run_advance(run_id=fork.pk)
    fork.refresh_from_db()

    sent = script.requests(model)[4]["messages"]
    assert sent[-1] == {**Step.objects.get(run=parent, index=4).message, "content": "I am not sure yet."}
    assert (fork.answer, Step.objects.filter(run=fork).count()) == ("second thoughts", 5)
    assert [e["n"] for e in EFFECTS] == [1, 2, 3]


def test_a_message_edit_waits_for_the_forks_first_request(launch, script, alice, dispatched):
    parent = launched(launch, four_steps(script))

    fork = run_fork(run_id=parent.pk, step_index=3, user=alice, edit={"message": "Use order ORD-1003 instead."})

    # The driver sends waiting notes (the levers' part); here the note waits, and the timeline shows it.
    note = OperatorMessage.objects.get(run=fork)
    assert (note.text, note.author_name, note.step_id) == ("Use order ORD-1003 instead.", "alice", None)
    lever = RunEvent.objects.get(run=fork, kind="lever").data
    assert (lever["lever"], lever["by"], lever["text"]) == ("message", "alice", "Use order ORD-1003 instead.")
    assert RunEvent.objects.get(run=fork, kind="fork").data | {"at": None} == {
        "parent": parent.pk, "step": 3, "edit": "message", "by": "alice", "at": None, "differences": []}



def test_a_message_edit_reaches_the_forks_first_request(launch, script, alice, dispatched):
    model = four_steps(script, {"content": "shorter", **usage(5)})
    parent = launched(launch, model)

    fork = run_fork(run_id=parent.pk, step_index=3, user=alice, edit={"message": "Say it again, shorter."})
    run_advance(run_id=fork.pk)
    fork.refresh_from_db()

    first = script.requests(model)[4]["messages"]
    assert first[-1] == {"role": "user", "content": "Say it again, shorter."}
    assert fork.status == Run.Status.SUCCEEDED and fork.answer == "shorter"
    note = OperatorMessage.objects.get(run=fork)
    assert note.step == Step.objects.get(run=fork, index=4), "sent once, with the fork's first new step"
    assert mismatches(fork.pk) == []

def test_a_fork_of_a_parked_run_never_runs_the_waiting_call_and_its_own_goes_through_approval(
    launch, script, alice, dispatched
):
    purge = {**calls(call("purge", {"n": 7}, "p1")), **usage(1)}
    model = script(purge, {**calls(call("purge", {"n": 7}, "p2")), **usage(2)}, {"content": "purged", **usage(3)},
                   {"content": "parent purged"})
    parent = launch("Purge seven", models=[model], tools=["purge"], summarize_on_stop=False)
    assert parent.status == Run.Status.AWAITING_APPROVAL

    fork = run_fork(run_id=parent.pk, step_index=1, user=alice)
    run_advance(run_id=fork.pk)
    fork.refresh_from_db()

    copied = ToolCall.objects.get(run=fork, call_id="p1")
    assert (copied.status, copied.approval_id) == (ToolCall.Status.SKIPPED, None)
    assert result_for(script.requests(model)[1], "p1") == {"ok": False, "error": NOT_EXECUTED}
    assert fork.status == Run.Status.AWAITING_APPROVAL
    own = Approval.objects.get(run=fork)
    assert own.tool_call.call_id == "p2"
    assert own.tool_call.idempotency_key == guards.idempotency_key(fork.pk, 2, 0)
    assert EFFECTS == []

    approval_decide(approval_id=own.pk, user=alice, approve=True)
    run_advance(run_id=fork.pk)
    assert Run.objects.get(pk=fork.pk).status == Run.Status.SUCCEEDED
    assert EFFECTS == [{"run": fork.pk, "n": 7, "key": guards.idempotency_key(fork.pk, 2, 0)}]
    # The parent's own call still waits for its person, and runs once, under the parent's key.
    assert Approval.objects.get(run=parent).status == Approval.Status.PENDING
    approval_decide(approval_id=Approval.objects.get(run=parent).pk, user=alice, approve=True)
    run_advance(run_id=parent.pk)
    assert [e["key"] for e in EFFECTS] == [guards.idempotency_key(fork.pk, 2, 0), guards.idempotency_key(parent.pk, 1, 0)]

    # A copy of the call now decided and run shows the parent's decision; no second approval exists.
    again = run_fork(run_id=parent.pk, step_index=1, user=alice)
    copy = ToolCall.objects.select_related("approval").get(run=again, call_id="p1")
    assert (copy.status, copy.approval.decided_by_name) == (ToolCall.Status.SUCCEEDED, "alice")
    assert copy.approval == Approval.objects.get(run=parent) and not Approval.objects.filter(run=again).exists()
    assert RunEvent.objects.get(run=again, kind="step").data["calls"][0]["approval"]["decided_by"] == "alice"
    assert len(EFFECTS) == 2


def test_a_fork_of_a_running_run_leaves_its_unfinished_calls_unrun_and_tells_the_model(launch, script, alice, dispatched):
    both = {**calls(call("fork_me", {"n": 1}, "f1"), call("effect", {"n": 2}, "e1")), **usage(1)}
    model = script(both, {"content": "parent done"}, {"content": "fork done"})
    parent = launched(launch, model)
    fork = FORKED["run"]
    assert [e["n"] for e in EFFECTS] == ["fork_me", 2]  # the parent ran both of its calls

    run_advance(run_id=fork.pk)
    fork.refresh_from_db()

    assert fork.status == Run.Status.SUCCEEDED
    assert [e["run"] for e in EFFECTS] == [parent.pk, parent.pk]  # the fork ran nothing of step 1
    sent = script.requests(model)[2]
    running = result_for(sent, "f1")  # was running in the parent when it was forked
    assert running["ok"] is False and running["error"].startswith(f"outcome unknown: run {parent.pk} was forked")
    assert result_for(sent, "e1") == {"ok": False, "error": NOT_EXECUTED}
    assert dict(ToolCall.objects.filter(run=fork).values_list("call_id", "status")) == {
        "f1": ToolCall.Status.UNKNOWN, "e1": ToolCall.Status.SKIPPED}


def test_edits_that_do_not_fit_are_refused_in_words(launch, script, alice, dispatched):
    parent = launched(launch, four_steps(script))
    refusals = [
        (9, None, f"Run {parent.pk} has no step 9; it has 4 steps so far."),
        (0, None, "A step is a positive whole number, not 0."),
        (2, {"tool_result": {"call_id": "zz", "content": "x"}}, "Step 2 has no call with id 'zz'; its calls are 'a2'."),
        (4, {"tool_result": {"call_id": "a1", "content": "x"}}, "Step 4 made no tool calls, so it has no result to edit."),
        (2, {"answer": "no"}, "The model's answer at step 2 called tools: only an answer without calls can be "
                              "replaced. Edit one of the results instead, or fork from a step without calls."),
        (2, {"message": "   "}, "The message is empty."),
        (2, {"message": "x" * 4001}, "The message is longer than 4000 characters."),
        (2, {"shout": "x"}, 'An edit is one of {"tool_result": {"call_id": "...", "content": "..."}}, '
                            '{"answer": "..."} or {"message": "..."}.'),
    ]
    for step, edit, words in refusals:
        with pytest.raises(ForkRefused) as refused:
            run_fork(run_id=parent.pk, step_index=step, user=alice, edit=edit)
        assert str(refused.value) == words
    with pytest.raises(ForkRefused, match=r"^There is no run 999999\.$"):
        run_fork(run_id=999999, step_index=1, user=alice)
    assert Run.objects.count() == 1 and dispatched == []


def test_family_and_comparison_from_the_fork_point_on(launch, script, alice, dispatched):
    model = four_steps(script, effect(5, "b1"), {"content": "fork done", **usage(6)})
    parent = launched(launch, model)
    fork = run_fork(run_id=parent.pk, step_index=2, user=alice, edit={"tool_result": {"call_id": "a2", "content": "{}"}})
    run_advance(run_id=fork.pk)
    rerun = rerun_create(original=parent, user=alice)

    family = run_family(parent)
    assert (family["parent"], [f["run_id"] for f in family["forks"]], [r["run_id"] for r in family["reruns"]]) == (
        None, [fork.pk], [rerun.pk])
    assert family["forks"][0]["step"] == 2 and family["forks"][0]["status"] == Run.Status.SUCCEEDED
    assert run_family(Run.objects.get(pk=fork.pk))["parent"] | {"created_at": None} == {
        "run_id": parent.pk, "status": "succeeded", "status_label": "Succeeded", "created_at": None,
        "relation": "fork", "step": 2}

    compared = run_comparison(Run.objects.get(pk=fork.pk))
    assert (compared["fork_step"], compared["edit"]) == (2, {"edit": "tool_result", "by": "alice", "call_id": "a2"})
    assert [(r["index"], r["shared"], bool(r["parent"]), bool(r["fork"])) for r in compared["rows"]] == [
        (2, True, True, True), (3, False, True, True), (4, False, True, True)]
    third = compared["rows"][1]
    assert [c["tool"] for c in third["parent"]["calls"]] == ["effect"] == [c["tool"] for c in third["fork"]["calls"]]
    assert third["parent"]["calls"][0]["args_hash"] != third["fork"]["calls"][0]["args_hash"]  # n 3 vs n 5
    assert len(third["fork"]["calls"][0]["args_hash"]) == 12
    assert (compared["parent"]["since_fork"]["total_tokens"], compared["fork"]["since_fork"]["total_tokens"]) == (
        303 + 404, 505 + 606)
    assert compared["fork"]["since_fork"]["cost_usd"] == pytest.approx(0.011)
    assert compared["parent"]["run_totals"]["tokens_in"] == 1000 and compared["fork"]["run_totals"]["tokens_in"] == 1400
    assert compared["fork"]["stop_reason"] == compared["parent"]["stop_reason"] == "final_answer"
    with pytest.raises(NotAFork, match="is not a fork"):
        run_comparison(parent)


def test_the_replay_check_sees_a_fork_whose_copied_step_has_no_event(launch, script, alice, dispatched):
    parent = launched(launch, four_steps(script))
    fork = run_fork(run_id=parent.pk, step_index=3, user=alice)
    assert fork_mismatches(fork.pk) == []
    step_two = RunEvent.objects.get(run=fork, kind="step", data__index=2)
    step_two.delete()
    assert fork_mismatches(fork.pk) == [f"fork {fork.pk}: copied step 2 has no event"]
    RunEvent.objects.create(run=fork, seq=step_two.seq, kind="step", data=step_two.data)


def test_notes_an_operator_sent_in_the_copied_steps_go_along_with_who_and_when(launch, script, alice, dispatched):
    parent = launched(launch, four_steps(script))
    # As the message lever leaves them: a note sent with step 2 (its row names the step), and its event.
    note = OperatorMessage.objects.create(run=parent, text="Check the second one twice.", author_name="bob",
                                          step=Step.objects.get(run=parent, index=2))
    event_record(run_id=parent.pk, kind="lever", data={"lever": "message", "by": "bob",
                                                        "at": note.created_at.isoformat(), "text": note.text})

    fork = run_fork(run_id=parent.pk, step_index=3, user=alice, edit={"message": "Now the third."})

    copied, waiting = OperatorMessage.objects.filter(run=fork).order_by("created_at", "pk")
    assert (copied.text, copied.author_name, copied.created_at, copied.step.index) == (
        note.text, "bob", note.created_at, 2)
    assert (copied.step.run_id, waiting.text, waiting.step_id) == (fork.pk, "Now the third.", None)
    timeline = [(kind, data.get("index") or data.get("text")) for kind, data in
                RunEvent.objects.filter(run=fork).exclude(kind__in=("fork", "run")).order_by("seq").values_list("kind", "data")]
    assert timeline == [("step", 1), ("lever", note.text), ("step", 2), ("step", 3), ("lever", "Now the third.")]
