"""Call arguments from a real model server, nested deeper than the JSON depth limit."""
from runs.models import Run
from tests.engine.loop_contract.support import REC, one_call


def test_call_arguments_nested_deeper_than_the_limit_are_an_error_for_the_model(launch, script):
    # 100 levels: Python's json reads it, but nothing after it (checks, rendering, storage) should have to.
    deep = '{"n": 1, "deep": ' + "[" * 100 + "]" * 100 + "}"  # the schema allows extra keys
    run, _, result = one_call(launch, script, "probe", deep, tools=["probe"])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert result["ok"] is False and "nested too deeply (deeper than 64 levels)" in result["error"]
    assert REC.count("contract_probe") == 0
