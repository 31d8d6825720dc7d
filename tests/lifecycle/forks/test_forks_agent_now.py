"""A fork runs within its agent's settings as they are now, not its parent's frozen ones.

What a user notices: after an admin takes a tool away from an agent or lowers a limit, a fork of
an earlier run neither offers that tool to the model nor gets the old limit back; the copied steps
stay as they were (history); the fork's timeline says what differs from its parent's settings; and
a fork whose copied conversation already used what the agent now allows is refused in words."""
import pytest

from runs.engine.loop import run_advance
from runs.lifecycle import forks
from runs.lifecycle.fork_settings import config_differences
from runs.lifecycle.forks import ForkRefused, run_fork
from runs.models import Agent, Run, RunEvent, ToolCall
from tests.engine.loop_contract.support import call, calls
from tests.support.timeline_replay import mismatches
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool

EFFECTS: list[int] = []  # the run of every execution of the test tools
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


@python_handler("test_fork_now_effect")
def _effect(args, ctx):
    EFFECTS.append(ctx.run_id)
    return {"n": args.get("n"), "done": True}


@pytest.fixture(autouse=True)
def _tools(demo_data):
    EFFECTS.clear()
    agent = Agent.objects.get(name="demo")
    agent.tools.add(
        Tool.objects.create(name="effect", handler="test_fork_now_effect", description="test", parameters=SCHEMA),
        Tool.objects.create(name="cancel_everything", handler="test_fork_now_effect", description="test",
                            parameters=SCHEMA),
    )
    yield
    problems = [p for run_id in Run.objects.values_list("pk", flat=True) for p in mismatches(run_id)]
    assert problems == [], "\n".join(problems[:20])


@pytest.fixture
def dispatched(monkeypatch):
    sent = []
    monkeypatch.setattr(forks, "run_dispatch", lambda run_id: sent.append(run_id))
    return sent


def effect(n, call_id, tool="effect"):
    return {**calls(call(tool, {"n": n}, call_id)), "usage": {"prompt_tokens": 100, "completion_tokens": 10}}


def parent_run(launch, model, **overrides):
    run = launch("Do three things", models=[model], summarize_on_stop=False, **overrides)
    assert run.status == Run.Status.SUCCEEDED, run.stop_detail
    return run


def admin_takes_away(*, tool="cancel_everything", **limits):
    agent = Agent.objects.get(name="demo")
    agent.tools.remove(Tool.objects.get(name=tool))
    for name, value in limits.items():
        setattr(agent, name, value)
    agent.save()


def test_a_fork_offers_no_tool_the_admin_took_away_and_keeps_the_lowered_limit(launch, script, alice, dispatched):
    model = script(effect(1, "c1", "cancel_everything"), effect(2, "e2"), effect(3, "e3"), {"content": "parent done"},
                   effect(4, "c4", "cancel_everything"), {"content": "fork done"})
    parent = parent_run(launch, model)
    assert parent.config["max_iterations"] == 10 and "cancel_everything" in parent.config["tools"]
    admin_takes_away(max_iterations=5, system_prompt="Be brief.", approval_timeout_seconds=60)
    ran_before = len(EFFECTS)

    fork = run_fork(run_id=parent.pk, step_index=2, user=alice)

    assert "cancel_everything" not in fork.config["tools"] and "effect" in fork.config["tools"]
    assert (fork.config["max_iterations"], fork.config["system_prompt"], fork.config["approval_timeout_seconds"]) == (
        5, "Be brief.", 60)
    differences = RunEvent.objects.get(run=fork, kind="fork").data["differences"]
    assert "cancel_everything is no longer offered" in differences
    assert "max iterations 10 -> 5" in differences
    assert "the system prompt changed" in differences
    # The copied steps are history: step 1's call of the tool taken away is still there, as recorded.
    copied = ToolCall.objects.get(run=fork, call_id="c1")
    assert (copied.tool_name, copied.status) == ("cancel_everything", ToolCall.Status.SUCCEEDED)

    run_advance(run_id=fork.pk)
    fork.refresh_from_db()
    request = script.requests(model)[4]
    offered = sorted(t["function"]["name"] for t in request.get("tools", []))
    assert "cancel_everything" not in offered and "effect" in offered
    assert request["messages"][0] == {"role": "system", "content": "Be brief."}
    # The model calls the tool anyway: refused as a tool this run does not have, never run.
    again = ToolCall.objects.get(run=fork, call_id="c4")
    assert again.status == ToolCall.Status.FAILED and "tool 'cancel_everything' is not allowed for this agent" in again.error
    assert len(EFFECTS) == ran_before
    assert (fork.status, fork.answer) == (Run.Status.SUCCEEDED, "fork done")


def test_a_fork_whose_copied_iterations_reach_the_new_cap_is_refused_in_words(launch, script, alice, dispatched):
    parent = parent_run(launch, script(effect(1, "e1"), effect(2, "e2"), effect(3, "e3"), {"content": "done"}))
    admin_takes_away(max_iterations=2)

    with pytest.raises(ForkRefused) as refused:
        run_fork(run_id=parent.pk, step_index=2, user=alice)
    assert str(refused.value) == (
        f"You may not fork run {parent.pk} from step 2: the conversation up to that step already used 2 iterations, "
        "and agent demo now allows at most 2 (max iterations). Fork from an earlier step, or ask an admin to raise "
        "the agent's limit.")
    assert Run.objects.count() == 1 and dispatched == []

    # From step 1 there is one iteration left: the fork may answer, but runs no tool at the cap.
    fork = run_fork(run_id=parent.pk, step_index=1, user=alice)
    assert fork.config["max_iterations"] == 2 and fork.iterations == 1


def test_a_fork_whose_copied_tokens_reach_the_new_budget_is_refused(launch, script, alice, dispatched):
    parent = parent_run(launch, script(effect(1, "e1"), effect(2, "e2"), effect(3, "e3"), {"content": "done"}))
    admin_takes_away(max_tokens=200)
    with pytest.raises(ForkRefused, match=r"already used 220 tokens, and agent demo now allows at most 200 \(max tokens\)"):
        run_fork(run_id=parent.pk, step_index=2, user=alice)
    assert Run.objects.count() == 1


def test_a_parents_choices_go_along_only_where_they_tighten(launch, script, alice, dispatched):
    # Launched at the host's shell (not restricted) with a raised limit, a tighter one and a tool subset.
    parent = parent_run(launch, script(effect(1, "e1"), {"content": "done"}), max_iterations=40, repeat_limit=2,
                        tools=["effect", "cancel_everything"])
    admin_takes_away()

    fork = run_fork(run_id=parent.pk, step_index=1, user=alice)

    # alice may not raise limits: the agent's 10 applies, not the shell's 40; her tighter 2 stays.
    assert (fork.config["max_iterations"], fork.config["repeat_limit"]) == (10, 2)
    assert fork.config["tools"] == ["effect"] and fork.overrides.get("tools") in (None, ["effect"])
    assert fork.config["approval_policy"] == "ask"
    differences = RunEvent.objects.get(run=fork, kind="fork").data["differences"]
    assert differences == ["cancel_everything is no longer offered", "max iterations 40 -> 10"]


def test_config_differences_in_words():
    before = {"tools": ["a", "b"], "max_iterations": 10, "max_cost_usd": 1.0, "system_prompt": "x",
              "approval_timeout_seconds": 600, "models": ["m1"], "base_url": "", "approval_policy": "approve",
              "provider_options": {"k": 1}, "base_url_from_shell": True}
    after = {"tools": ["a", "c"], "max_iterations": 1, "max_cost_usd": 0.5, "system_prompt": "y",
             "approval_timeout_seconds": None, "models": ["m2", "m1"], "base_url": "https://llm.example/v1",
             "approval_policy": "ask", "provider_options": {}}
    assert config_differences(before, after) == [
        "b is no longer offered",
        "c is now offered",
        "models m1 -> m2, m1",
        "model endpoint the default -> https://llm.example/v1",
        "max iterations 10 -> 1",
        "max cost usd 1 -> 0.5",
        "the system prompt changed",
        "provider options changed",
        "approval timeout seconds 600 -> none",
        "approval policy approve -> ask",
    ]
    assert config_differences(before, dict(before)) == []
