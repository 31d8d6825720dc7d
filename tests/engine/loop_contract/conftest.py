"""The agent loop's contract, end to end: real openai client -> HTTP -> scripted demo model.

Every test scripts the model's exact answers (`script`), drives a run with `launch`, and checks
what a user would notice: the run's outcome, the tool results, and what the model was sent.
After each test, the timeline of every run it produced is replayed and must equal the rows.
"""
import pytest

from runs.models import Run
from tests.engine.loop_contract.support import PROBE_SCHEMA, REC, TEST_TOOLS
from tests.support.timeline_replay import mismatches
from toolsapp.models import Tool


@pytest.fixture(autouse=True)
def _test_tools(demo_data):
    REC.reset()
    for name, fields in TEST_TOOLS.items():
        Tool.objects.create(name=name, description=f"test tool {name}", parameters=PROBE_SCHEMA, **fields)
    yield
    REC.release.set()
    REC.barrier.abort()




@pytest.fixture(autouse=True)
def _timeline_equals_rows(_test_tools):
    """Every run a contract test produced: its timeline, replayed alone, equals its rows."""
    yield
    problems = [problem for run_id in Run.objects.values_list("pk", flat=True) for problem in mismatches(run_id)]
    assert problems == [], "the timeline and the database disagree:\n" + "\n".join(problems[:20])
