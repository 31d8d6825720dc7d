"""Python tools from installed packages: the example package in examples/agentsite-tools-example
(installed by requirements.txt) registers `word_count` and a verifier through its `agentsite.tools`
entry point; a module that cannot be loaded stops the process at start, naming it."""
import os
import subprocess
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from runs.engine.loop import run_advance
from runs.lifecycle.runs import run_create
from runs.models import Agent, Run
from tests.engine.loop_contract.support import call, calls, result_for
from toolsapp.executors.python import HANDLER_MODULES, PYTHON_HANDLERS, READ_ONLY_HANDLERS
from toolsapp.models import Tool
from toolsapp.plugins import ENTRY_POINT_GROUP, load_tool_modules
from toolsapp.verifiers import VERIFIER_MODULES, VERIFIERS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "agentsite_tools_example"
HELPERS = "tests.tools.plugin_modules"
TEXT = "The quick brown fox jumps"


def manage_check(**env) -> subprocess.CompletedProcess:
    """`manage.py check` in a fresh process: what starting the site or a worker would say."""
    child_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "agentsite.settings", "TOOL_MODULES": "", **env}
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=child_env, capture_output=True, text=True, timeout=120
    )


def counting_agent() -> Agent:
    tool = Tool.objects.create(
        name="word_count",
        description="Counts the words of a text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        kind=Tool.Kind.PYTHON,
        handler="word_count",
    )
    agent = Agent.objects.create(name="counter", summarize_on_stop=False, verifier="answer_gives_a_number")
    agent.tools.set([tool])
    return agent


# --- the example package -------------------------------------------------------------------------


def test_the_installed_example_package_registers_its_tools_at_start():
    installed = [ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.value == EXAMPLE]
    assert installed == [EXAMPLE], "requirements.txt installs examples/agentsite-tools-example: pip install -r it"
    assert HANDLER_MODULES["word_count"] == EXAMPLE
    assert "word_count" in READ_ONLY_HANDLERS
    assert VERIFIER_MODULES["answer_gives_a_number"] == EXAMPLE
    assert PYTHON_HANDLERS["get_weather"] is not None  # the built-in tools are still there


def test_a_run_calls_the_packaged_tool_and_its_verifier_through_the_loop(demo_data, script):
    agent = counting_agent()
    model = script(
        calls(call("word_count", {"text": TEXT}, "wc")),
        {"content": "It has five words."},  # no digit: the packaged verifier sends it back
        {"content": "It has 5 words."},
    )
    run = run_create(agent=agent, task=f"How many words in {TEXT!r}?", overrides={"models": [model]})
    run_advance(run_id=run.pk)
    run.refresh_from_db()

    assert (run.status, run.stop_reason, run.answer) == (Run.Status.SUCCEEDED, Run.StopReason.FINAL_ANSWER, "It has 5 words.")
    requests = script.requests(model)
    assert result_for(requests[1], "wc") == {"ok": True, "result": {"words": 5, "characters": 25, "unique_words": 5}}
    feedback = requests[2]["messages"][-1]
    assert feedback["content"].startswith("Verification failed: ") and "no number" in feedback["content"]


# --- modules that cannot be loaded ---------------------------------------------------------------


def test_a_missing_module_in_the_setting_is_an_error_naming_it():
    with pytest.raises(ImproperlyConfigured) as caught:
        load_tool_modules(["acme_tools.not_installed"])
    message = str(caught.value)
    assert "'acme_tools.not_installed'" in message and "AGENTSITE_TOOL_MODULES" in message
    assert "No module named 'acme_tools'" in message


@pytest.mark.worker  # manage.py check in a process of its own
def test_a_missing_module_stops_manage_py_at_start_with_its_name():
    done = manage_check(AGENTSITE_TOOL_MODULES="acme_tools.not_installed")
    assert done.returncode != 0
    assert "ImproperlyConfigured: Tool module 'acme_tools.not_installed' (named in AGENTSITE_TOOL_MODULES)" in done.stderr


@pytest.mark.worker  # manage.py check in a process of its own
def test_the_site_starts_with_the_example_package_and_a_valid_module_list():
    done = manage_check(AGENTSITE_TOOL_MODULES="tests.support.worker_tools")
    assert done.returncode == 0, done.stderr
    assert "no issues" in done.stdout


@pytest.mark.worker  # manage.py check in a process of its own
def test_a_module_that_raises_on_import_is_an_error_naming_it_and_its_entry_point():
    broken = EntryPoint(name="acme", value=f"{HELPERS}.broken", group=ENTRY_POINT_GROUP)
    with pytest.raises(ImproperlyConfigured) as caught:
        load_tool_modules([], from_entry_points=[broken])
    message = str(caught.value)
    assert f"'{HELPERS}.broken'" in message
    assert f"entry point acme = '{HELPERS}.broken' (group agentsite.tools)" in message
    assert "RuntimeError: the tools' settings file is missing" in message

    done = manage_check(AGENTSITE_TOOL_MODULES=f"{HELPERS}.broken")
    assert done.returncode != 0
    assert f"Tool module '{HELPERS}.broken'" in done.stderr and "settings file is missing" in done.stderr


@pytest.mark.worker  # manage.py check in a process of its own
def test_a_handler_name_two_modules_register_is_an_error_naming_both():
    with pytest.raises(ImproperlyConfigured) as caught:
        load_tool_modules([f"{HELPERS}.word_count_again"])
    message = str(caught.value)
    assert f"Python tool handler 'word_count' is registered by both {EXAMPLE} and {HELPERS}.word_count_again" in message
    assert HANDLER_MODULES["word_count"] == EXAMPLE  # the first one stays

    done = manage_check(AGENTSITE_TOOL_MODULES=f"{HELPERS}.word_count_again")
    assert done.returncode != 0
    assert f"'word_count' is registered by both {EXAMPLE} and {HELPERS}.word_count_again" in done.stderr


def test_a_verifier_name_two_modules_register_is_an_error_naming_both():
    with pytest.raises(ImproperlyConfigured) as caught:
        load_tool_modules([f"{HELPERS}.verifier_again"])
    assert f"Verifier 'answer_gives_a_number' is registered by both {EXAMPLE} and {HELPERS}.verifier_again" in str(
        caught.value
    )
    assert VERIFIERS["answer_gives_a_number"].__module__ == EXAMPLE
