"""Every kind of token counted: the cached part of the input and the reasoning part of the output,
as providers report them, recorded per step and run, priced at their own rates, and shown on the
run page, in the API, the exports, /metrics and the traces. And what each request carried: its
estimated size and what its tool definitions cost."""
import csv
import io
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runs.models import Run, Step
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import make_user
from tests.web.api.test_api import api

USAGE = {
    "prompt_tokens": 1000, "completion_tokens": 500,
    "prompt_tokens_details": {"cached_tokens": 800}, "completion_tokens_details": {"reasoning_tokens": 300},
}


@pytest.fixture
def priced(settings):
    settings.LLM_PRICES = {"script": [1.0, 2.0, 0.5, 4.0]}  # per million: input, output, cached, reasoning


@pytest.mark.parametrize("streaming", ["stream", "refuse"], ids=["streamed", "plain"])
def test_cached_and_reasoning_tokens_are_counted_and_priced_at_their_rates(launch, script, priced, streaming):
    model = script(
        {**calls(call("get_weather", {"city": "Lagos"})), "usage": USAGE},
        {"content": "Sunny.", "usage": {**USAGE, "prompt_tokens_details": {"cached_tokens": 100},
                                         "completion_tokens_details": {}}},
        streaming=streaming,
    )
    run = launch("weather", models=[model])
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER
    first, second = Step.objects.filter(run=run).order_by("index")
    assert (first.tokens_cached, first.tokens_reasoning) == (800, 300)
    assert (second.tokens_cached, second.tokens_reasoning) == (100, 0)
    # 200 input at 1, 800 cached at 0.5, 200 output at 2, 300 reasoning at 4 (per million).
    assert first.cost_usd == pytest.approx((200 * 1 + 800 * 0.5 + 200 * 2 + 300 * 4) / 1e6)
    assert second.cost_usd == pytest.approx((900 * 1 + 100 * 0.5 + 500 * 2) / 1e6)
    assert (run.tokens_cached, run.tokens_reasoning) == (900, 300)
    assert run.cost_usd == pytest.approx(first.cost_usd + second.cost_usd)
    assert first.context_tokens > first.tool_definition_tokens > 0


def test_a_provider_that_reports_the_cost_is_not_priced_again(launch, script, priced):
    model = script({"content": "ok", "usage": {**USAGE, "cost": 0.0123}})
    run = launch("hi", models=[model])
    assert run.cost_usd == pytest.approx(0.0123)
    assert run.tokens_cached == 800


def test_odd_details_count_as_nothing_and_never_more_than_the_totals(launch, script, priced):
    model = script({"content": "ok", "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                               "prompt_tokens_details": {"cached_tokens": 99},
                                               "completion_tokens_details": {"reasoning_tokens": -4}}})
    run = launch("hi", models=[model])
    step = Step.objects.get(run=run)
    assert (step.tokens_cached, step.tokens_reasoning) == (10, 0)


def test_the_page_api_exports_and_metrics_show_them(launch, script, priced, client, settings):
    model = script({"content": "ok", "usage": USAGE})
    run = launch("hi", models=[model])
    alice = make_user("alice_kinds", "operators")
    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-tokens-cached">800<' in page and 'id="run-tokens-reasoning">300<' in page
    assert "1000 in (800 cached) / 500 out (300 reasoning) tokens" in page
    assert "request ~" in page and "of which tool definitions ~" in page
    assert f"{run.config['context_budget']} tokens a request; older tool results are summarised beyond it" in page

    detail = api(alice).get(f"/api/v1/runs/{run.pk}/").json()
    assert detail["usage"]["tokens_cached"] == 800 and detail["usage"]["tokens_reasoning"] == 300
    assert detail["usage"]["compactions"] == 0
    step = detail["steps"][0]
    assert (step["tokens_cached"], step["tokens_reasoning"]) == (800, 300)
    assert step["context_tokens"] > step["tool_definition_tokens"] > 0 and step["compacted_calls"] == []

    body = b"".join(api(alice).get("/api/v1/runs/export.jsonl").streaming_content).decode()
    record = json.loads(body.splitlines()[0])
    assert (record["tokens_cached"], record["tokens_reasoning"]) == (800, 300)
    assert record["steps"][0]["tokens_cached"] == 800
    rows = list(csv.DictReader(io.StringIO(b"".join(api(alice).get("/api/v1/runs/export.csv").streaming_content).decode())))
    assert rows[0]["run_tokens_cached"] == "800" and rows[0]["step_tokens_reasoning"] == "300"
    assert rows[0]["run_tokens_in"] == "1000"  # the earlier columns keep their places

    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = "t0k", []
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t0k").content.decode()
    samples = {(s.name, s.labels.get("model")): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples[("agentsite_model_cached_input_tokens_total", model)] == 800
    assert samples[("agentsite_model_reasoning_output_tokens_total", model)] == 300
    assert ("agentsite_context_compactions_total", None) in samples
