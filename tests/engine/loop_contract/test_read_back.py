"""read_tool_result reads the run's own results only: call ids repeat across runs (servers number
calls per answer, call_0 in every run), and one run must never be handed another's result."""
import json

import pytest

from runs.models import ToolCall
from tests.engine.loop_contract.support import one_call
from toolsapp.executors.base import ToolContext, ToolError
from toolsapp.executors.python import PYTHON_HANDLERS


def read_back(run, call_id):
    return PYTHON_HANDLERS["read_tool_result"]({"call_id": call_id},
                                                ToolContext(run_id=run.pk, call_id="call_read", idempotency_key="k-read"))


def test_a_call_id_two_runs_share_reads_back_each_runs_own_result(launch, script):
    first, _, _ = one_call(launch, script, "probe", {"n": 1}, tools=["probe"], call_id="call_0")
    second, _, _ = one_call(launch, script, "probe", {"n": 2}, tools=["probe"], call_id="call_0")
    [mine] = ToolCall.objects.filter(run=second, call_id="call_0").values_list("result_text", flat=True)
    [theirs] = ToolCall.objects.filter(run=first, call_id="call_0").values_list("result_text", flat=True)
    assert mine != theirs  # the two results differ, so reading the wrong one shows

    assert read_back(second, "call_0") == json.loads(mine)["result"] == {"n": 2, "seen": True}
    assert read_back(first, "call_0") == json.loads(theirs)["result"]


def test_a_call_id_only_another_run_has_is_not_found(launch, script):
    other, _, _ = one_call(launch, script, "probe", {"n": 1}, tools=["probe"], call_id="call_elsewhere")
    mine, _, _ = one_call(launch, script, "probe", {"n": 2}, tools=["probe"], call_id="call_0")

    with pytest.raises(ToolError, match="this run has no earlier call with the id 'call_elsewhere'"):
        read_back(mine, "call_elsewhere")
    assert read_back(other, "call_elsewhere") is not None
