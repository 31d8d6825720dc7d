from runs.models import Run, ToolCall


def test_weather_demo_runs_parallel_calls_then_answers(launch):
    run = launch("What's the weather in Lagos and London?")
    assert run.status == Run.Status.SUCCEEDED
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    assert "Lagos: 31" in run.answer and "London: 12" in run.answer
    calls = ToolCall.objects.filter(run=run)
    assert sorted(c.tool_name for c in calls) == ["get_weather", "get_weather"]
    assert all(c.status == ToolCall.Status.SUCCEEDED for c in calls)


def test_script_final_answer(launch, script):
    model = script({"content": "hello there"})
    run = launch("say hi", models=[model])
    assert run.status == Run.Status.SUCCEEDED
    assert run.answer == "hello there"
    body = script.requests(model)[0]
    assert body["messages"][1] == {"role": "user", "content": "say hi"}
    assert {t["function"]["name"] for t in body["tools"]} >= {"get_weather", "cancel_order"}
