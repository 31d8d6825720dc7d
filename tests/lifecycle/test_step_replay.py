"""Replay one step's request against several models: each receives exactly the request the step
sent, answers side by side, no tool runs and nothing is added to the run; who may do it."""
import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run, Step, ToolCall
from tests.engine.loop_contract.support import FAST, call, calls
from tests.support.approval_fixtures import make_user

WEATHER = [call("get_weather", {"city": "Lagos"}, "w1"), call("get_weather", {"city": "London"}, "w2")]


@pytest.fixture
def operator(demo_data):
    client = Client()
    client.force_login(make_user("otto_r", "operators"))
    return client


def test_each_model_gets_the_steps_exact_request_and_nothing_is_recorded(launch, script, operator):
    original = script(calls(*WEATHER), {"content": "Lagos 31, London 12."})
    run = launch("Weather in Lagos and London?", models=[original], later_tool_choice="required")
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    before = (Step.objects.filter(run=run).count(), ToolCall.objects.filter(run=run).count(), run.tokens_in)
    calm = script({"content": "It is sunny in Lagos and rainy in London."})
    eager = script(calls(call("cancel_order", {"order_id": "ORD-1001", "reason": "why not"})))
    broken = script({"status": 500, "error": "overloaded", "repeat": True, "headers": FAST})

    page = operator.get(reverse("step_replay", args=[run.pk]), {"step": 2})
    assert page.status_code == 200 and original in page.content.decode()  # the step's model, prefilled
    response = operator.post(reverse("step_replay", args=[run.pk]), {"step": 2, "models": f"{calm}\n{eager}, {broken}"})
    assert response.status_code == 200
    answers = response.context["answers"]
    assert [a.model for a in answers] == [calm, eager, broken]
    assert answers[0].ok and answers[0].content == "It is sunny in Lagos and rainy in London."
    assert answers[0].tokens_in > 0 and answers[0].latency_ms > 0
    assert answers[1].ok and answers[1].tool_calls == [{"name": "cancel_order",
                                                          "arguments": '{"order_id": "ORD-1001", "reason": "why not"}'}]
    assert not answers[2].ok and "overloaded" in answers[2].error
    html = response.content.decode()
    assert "asks for <strong>cancel_order</strong>" in html and "(not run)" in html

    sent = script.requests(original)[1]  # what step 2 sent when the run asked
    for model in (calm, eager):
        replayed = script.requests(model)[0]
        assert replayed["messages"] == sent["messages"] and replayed["tools"] == sent["tools"]
        assert replayed["tool_choice"] == sent["tool_choice"] == "required"
    run.refresh_from_db()
    assert (Step.objects.filter(run=run).count(), ToolCall.objects.filter(run=run).count(), run.tokens_in) == before
    from toolsapp.models import Order
    assert Order.objects.get(order_id="ORD-1001").status == "open"  # nothing ran


def test_the_run_page_offers_it_and_bad_input_is_refused(launch, script, operator, demo_data):
    run = launch("hi", models=[script({"content": "hello"})])
    assert f'data-replay-url="/runs/{run.pk}/replay/"' in operator.get(reverse("run_detail", args=[run.pk])).content.decode()
    url = reverse("step_replay", args=[run.pk])
    assert operator.get(url, {"step": 9}).status_code == 404
    assert operator.get(url, {"step": "x"}).status_code == 404
    assert operator.get(reverse("step_replay", args=[run.pk + 100]), {"step": 1}).status_code == 404
    too_many = operator.post(url, {"step": 1, "models": "a,b,c,d,e,f"})
    assert "at most 5 models at once" in too_many.content.decode() and too_many.context["answers"] is None
    nothing = operator.post(url, {"step": 1, "models": " , \n"})
    assert nothing.context["answers"] is None and nothing.context["form"].errors
    Run.objects.filter(pk=run.pk).update(config={**run.config, "context_budget": 5})
    too_long = operator.post(url, {"step": 1, "models": "m"})
    assert too_long.status_code == 200 and too_long.context["answers"] is None
    assert any("no longer fits the run's context budget" in e for e in too_long.context["form"].non_field_errors())
    assert "no longer fits the run&#x27;s context budget" in too_long.content.decode()  # shown on the page


def test_who_may_replay(launch, script, demo_data, client):
    run = launch("hi", models=[script({"content": "hello"})])
    url = reverse("step_replay", args=[run.pk])
    assert client.get(url, {"step": 1}).status_code == 302  # sign in first
    viewer = Client()
    viewer.force_login(make_user("vera_r", "viewers"))
    assert viewer.get(url, {"step": 1}).status_code == 403  # a replay spends tokens, as a launch does
    assert 'data-replay-url' not in viewer.get(reverse("run_detail", args=[run.pk])).content.decode()
    csrf = Client(enforce_csrf_checks=True)
    csrf.force_login(make_user("olga_r", "operators"))
    assert csrf.post(url, {"step": 1, "models": "m"}).status_code == 403


def test_a_providers_error_never_shows_a_sensitive_argument(launch, script, operator):
    from toolsapp.models import Tool

    Tool.objects.filter(name="get_weather").update(sensitive_fields=["city"])
    original = script(calls(call("get_weather", {"city": "Atlantis-7731"}, "w1")), {"content": "done"})
    run = launch("Weather?", models=[original])
    echo = script({"status": 400, "error": "bad request near 'Atlantis-7731'", "repeat": True})
    response = operator.post(reverse("step_replay", args=[run.pk]), {"step": 2, "models": echo})
    answer = response.context["answers"][0]
    assert not answer.ok and "bad request near" in answer.error
    assert "Atlantis-7731" not in answer.error and "Atlantis-7731" not in response.content.decode()
