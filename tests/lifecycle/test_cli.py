"""The `run_agent` and `show_run` management commands, through call_command with --json."""
import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.lifecycle import launch as launch_module
from runs.models import Run, ToolCall
from toolsapp.models import Order

ROOT = Path(__file__).resolve().parents[2]


def run_agent(*args):
    out = StringIO()
    call_command("run_agent", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def show_run(run_id):
    out = StringIO()
    call_command("show_run", str(run_id), "--json", stdout=out)
    return json.loads(out.getvalue())


def weather_call(call_id="c1"):
    return {"tool_calls": [{"id": call_id, "name": "get_weather", "arguments": {"city": "Lagos"}}]}


# --- happy paths -----------------------------------------------------------------------------------


def test_run_agent_json_reports_the_answer_and_steps(demo_data, script):
    model = script(weather_call(), {"content": "Lagos is sunny."})
    data = run_agent("weather in Lagos", "--model", model)
    assert data["status"] == Run.Status.SUCCEEDED
    assert data["stop_reason"] == Run.StopReason.FINAL_ANSWER
    assert data["answer"] == "Lagos is sunny."
    assert data["iterations"] == 2
    assert [s["model"] for s in data["steps"]] == [model, model]
    (call,) = data["steps"][0]["calls"]
    assert call["tool"] == "get_weather" and call["ok"] is True and call["status"] == ToolCall.Status.SUCCEEDED
    assert Run.objects.get(pk=data["run_id"]).answer == "Lagos is sunny."


def test_run_agent_uses_the_model_fallback_list_in_order(demo_data, script):
    good = script({"content": "second answered"})
    data = run_agent("hi", "--model", "script:nope", "--model", good)
    assert data["answer"] == "second answered"
    assert data["steps"][0]["model"] == good
    assert "script:nope" in data["steps"][0]["model_errors"][0]


def test_run_agent_max_iterations_stops_before_tools_run(demo_data, script):
    model = script(weather_call(), {"content": "never asked"})
    data = run_agent("weather", "--model", model, "--max-iterations", "1")
    assert data["stop_reason"] == Run.StopReason.ITERATION_LIMIT
    assert data["status"] == Run.Status.FAILED
    assert data["stop_detail"]
    assert data["steps"][0]["calls"][0]["status"] == ToolCall.Status.SKIPPED


def test_run_agent_tools_flag_limits_the_offered_tools(demo_data, script):
    model = script({"content": "ok"})
    run_agent("hi", "--model", model, "--tools", "get_weather, lookup_order")
    (body,) = script.requests(model)
    assert sorted(t["function"]["name"] for t in body["tools"]) == ["get_weather", "lookup_order"]


def test_run_agent_first_tool_choice_is_sent(demo_data, script):
    model = script({"content": "ok"})
    run_agent("hi", "--model", model, "--first-tool-choice", "none")
    assert script.requests(model)[0]["tool_choice"] == "none"


def test_run_agent_without_a_decision_leaves_the_run_waiting(demo_data):
    data = run_agent("Cancel order ORD-1001")
    assert data["status"] == Run.Status.AWAITING_APPROVAL
    assert Order.objects.get(order_id="ORD-1001").status == "open"


def test_run_agent_approve_all_cancels_the_order(demo_data):
    data = run_agent("Cancel order ORD-1001", "--approve-all")
    assert data["status"] == Run.Status.SUCCEEDED
    assert Order.objects.get(order_id="ORD-1001").status == "cancelled"


def test_run_agent_reject_all_leaves_the_order_alone(demo_data):
    data = run_agent("Cancel order ORD-1001", "--reject-all")
    assert Order.objects.get(order_id="ORD-1001").status == "open"
    cancel = [c for s in data["steps"] for c in s["calls"] if c["tool"] == "cancel_order"]
    assert len(cancel) == 1 and cancel[0]["status"] == ToolCall.Status.REJECTED
    assert cancel[0]["error"].startswith("rejected by operator")
    assert "did not cancel" in data["answer"]


def test_run_agent_customer_flag_scopes_the_tools(demo_data):
    data = run_agent("Cancel order ORD-1001", "--customer", "globex", "--approve-all")
    assert Order.objects.get(order_id="ORD-1001").status == "open"
    assert "not found for this customer" in data["answer"]


def test_show_run_prints_the_same_run(demo_data, script):
    model = script(weather_call(), {"content": "Lagos is sunny."})
    data = run_agent("weather", "--model", model)
    shown = show_run(data["run_id"])
    assert shown == data


def test_show_run_of_a_missing_run_exits_2(demo_data):
    with pytest.raises(CommandError) as info:
        show_run(999999)
    assert info.value.returncode == 2


# --- bad flag values: exit 2, no model request -----------------------------------------------------


@pytest.mark.parametrize(
    "value", ["0", "-1", "2.5", "abc", "", " ", "true", "9007199254740992", "1e3"], ids=lambda v: repr(v)
)
def test_bad_max_iterations_exits_2_without_asking_the_model(demo_data, script, value):
    model = script({"content": "must not be asked"})
    with pytest.raises(CommandError) as info:
        run_agent("hi", "--model", model, "--max-iterations", value)
    assert info.value.returncode == 2
    assert "max-iterations" in str(info.value)
    assert script.requests(model) == []
    assert not Run.objects.exists()


def test_run_agent_drives_the_run_itself_and_enqueue_hands_it_to_the_workers(demo_data, script, monkeypatch):
    sent = []
    monkeypatch.setattr(launch_module, "run_dispatch", lambda *, run_id: sent.append(run_id))
    model = script({"content": "done here"})
    driven = run_agent("hi", "--model", model)
    assert driven["status"] == Run.Status.SUCCEEDED and sent == [], "no worker is told of a run this process drives"
    queued = run_agent("hi", "--model", model, "--enqueue")
    assert queued["status"] == Run.Status.QUEUED and sent == [queued["run_id"]]
    assert len(script.requests(model)) == 1, "the queued run waits for a worker"


def test_max_iterations_at_the_safe_integer_limit_is_accepted(demo_data, script):
    model = script({"content": "ok"})
    data = run_agent("hi", "--model", model, "--max-iterations", str(2**53 - 1))
    assert data["status"] == Run.Status.SUCCEEDED


@pytest.mark.parametrize(
    "args",
    [
        ["--agent", "no-such-agent"],
        ["--base-url", "ftp://example.com/v1"],
        ["--base-url", "not a url"],
        ["--model", "  "],
        ["--tools", "get_weather,no_such_tool"],
        ["--api-key", "sk-test", "--enqueue"],
    ],
    ids=["unknown-agent", "ftp-base-url", "no-scheme-base-url", "blank-model", "unknown-tool", "api-key-enqueue"],
)
def test_bad_flags_exit_2_without_asking_the_model(demo_data, script, settings, args):
    model = script({"content": "must not be asked"})
    extra = [] if "--model" in args else ["--model", model]
    with pytest.raises(CommandError) as info:
        run_agent("hi", *extra, *args)
    assert info.value.returncode == 2
    assert script.requests(model) == []
    assert not Run.objects.exists()
    assert settings.LLM_API_KEY == ""  # a refused key is not kept for later runs


def test_invalid_first_tool_choice_is_refused_without_asking_the_model(demo_data, script):
    model = script({"content": "must not be asked"})
    with pytest.raises(CommandError):
        run_agent("hi", "--model", model, "--first-tool-choice", "always")
    assert script.requests(model) == []


@pytest.mark.worker  # runs the CLI in a process of its own
def test_invalid_flag_value_on_the_command_line_exits_2():
    # argparse refuses the value before Django touches the database or the network.
    proc = subprocess.run(
        [sys.executable, "manage.py", "run_agent", "hi", "--first-tool-choice", "always"],
        check=False,
        cwd=ROOT,
        env={**os.environ, "LLM_API_KEY": "", "LLM_BASE_URL": "http://127.0.0.1:9/v1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--first-tool-choice" in proc.stderr
