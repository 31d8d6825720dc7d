"""Real Celery workers load the tools of installed packages at start, like the web process: the
example package's `word_count` (see tests/tools/test_plugins.py) runs in a worker, and a worker
told to load a module that is not there does not start, saying which."""
import pytest

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.runs import run_create
from runs.models import Agent, Run, ToolCall
from tests.conftest import wait_until
from tests.engine.loop_contract.support import call, calls
from toolsapp.models import Tool

pytestmark = pytest.mark.worker


def test_a_worker_runs_the_tool_of_an_installed_package(celery_worker_proc, demo_data, script, wait_for_run):
    tool = Tool.objects.create(
        name="word_count",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        kind=Tool.Kind.PYTHON,
        handler="word_count",
    )
    agent = Agent.objects.create(name="counter", summarize_on_stop=False, verifier="answer_gives_a_number")
    agent.tools.set([tool])
    model = script(calls(call("word_count", {"text": "one two three"}, "wc")), {"content": "3 words."})
    worker = celery_worker_proc()
    run = run_create(agent=agent, task="count", overrides={"models": [model]})
    run_dispatch(run_id=run.pk)

    run = wait_for_run(run.pk, Run.Status.SUCCEEDED, Run.Status.FAILED)
    assert (run.status, run.answer) == (Run.Status.SUCCEEDED, "3 words."), run.stop_detail
    result = ToolCall.objects.get(run=run, call_id="wc").result
    assert result == {"ok": True, "result": {"words": 3, "characters": 13, "unique_words": 3}}
    # The worker, not this process, drove the run. Celery writes "succeeded in" after the task
    # returns, so just after the run's commit the line can still be on its way to the log.
    wait_until(lambda: "succeeded in" in worker.log(), timeout=15, message="the worker to log the task's end")


def test_a_worker_told_to_load_a_missing_module_stops_at_start_naming_it(celery_worker_proc):
    worker = celery_worker_proc(env={"AGENTSITE_TOOL_MODULES": "acme_tools.not_installed"}, wait=False)
    worker.proc.wait(timeout=120)
    assert worker.proc.returncode != 0
    assert "Tool module 'acme_tools.not_installed' (named in AGENTSITE_TOOL_MODULES)" in worker.log()
