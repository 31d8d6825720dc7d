"""What a long run looks like on its page: each step's request size and tool-definition cost, the
results a request carried as summaries, the cached and reasoning tokens, and the run's
compactions; the results themselves stay whole on the page."""
import pytest
from playwright.sync_api import expect

from runs.models import Agent, Run, Step
from tests.browser import requires_chromium, screenshot, wait_for_seq
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool

pytestmark = [pytest.mark.browser, requires_chromium]

USAGE = {"prompt_tokens": 1200, "completion_tokens": 40, "prompt_tokens_details": {"cached_tokens": 1024},
         "completion_tokens_details": {"reasoning_tokens": 16}}


@python_handler("browser_report_page", read_only=True)
def _report_page(args, ctx):
    return {"page": args.get("page"), "text": "Quarterly figures by region and month. " * 60}


def reader(script) -> tuple[Agent, str]:
    """An agent with a 3,000-token budget and a tool of long results, and a model that reads eight
    pages of it, then answers (every answer reports cached and reasoning tokens)."""
    Tool.objects.create(name="report_page", description="A page of the report.", handler="browser_report_page",
                        parameters={"type": "object", "properties": {"page": {"type": "integer"}}})
    agent = Agent.objects.create(name="reader", context_budget_tokens=3000, summarize_on_stop=False)
    agent.tools.set(Tool.objects.filter(name="report_page"))
    entries = [{"tool_calls": [{"name": "report_page", "arguments": {"page": i}, "id": f"page_{i}"}], "usage": USAGE}
               for i in range(8)]
    return agent, script(*entries, {"content": "The report shows growth in every region.", "usage": USAGE})


def test_a_compacted_run_shows_its_request_sizes_summaries_and_token_kinds(live, browser, users, launch, script):
    _, model = reader(script)
    run = launch("Sum up the report", agent="reader", models=[model])
    assert run.status == Run.Status.SUCCEEDED and run.compactions > 0
    last = Step.objects.filter(run=run).order_by("-index").first()
    assert last.compacted_calls

    for width, height, name in ((1280, 900, "run-context-desktop"), (390, 844, "run-context-phone")):
        page = browser.login(users["operator"])
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"/runs/{run.pk}/")
        wait_for_seq(page, run.event_seq)
        expect(page.locator("#run-compactions")).to_have_text(str(run.compactions))
        expect(page.locator("#run-tokens-cached")).to_have_text(str(run.tokens_cached))
        expect(page.locator("#run-tokens-reasoning")).to_have_text(str(run.tokens_reasoning))
        step = page.locator(f"#step-{last.index}")
        expect(step.locator(".step-tokens")).to_have_text("1200 in (1024 cached) / 40 out (16 reasoning) tokens")
        expect(step.locator(".step-request")).to_have_text(
            f"request ~{last.context_tokens} tokens, of which tool definitions ~{last.tool_definition_tokens}")
        expect(step.locator(".step-compacted")).to_contain_text(
            f"{len(last.compacted_calls)} older results sent as a summary to fit the context budget")
        expect(step.locator(".step-compacted")).to_contain_text("page_0")
        expect(page.locator("#step-1 .step-compacted")).to_have_count(0)  # the first request carried everything
        # The page shows the results themselves, not the summaries the model was sent.
        expect(page.locator("#step-1 .call-preview")).to_contain_text("Quarterly figures by region")
        screenshot(page, name)
        page.close()


def test_the_live_page_draws_the_same_while_the_run_goes_on(live, browser, users, demo_data, script):
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create

    agent, model = reader(script)
    run = run_create(agent=agent, task="Sum up the report", overrides={"models": [model]})
    page = browser.login(users["operator"])
    page.goto(f"/runs/{run.pk}/")
    expect(page.locator("#timeline-empty")).to_be_visible()
    run_advance(run_id=run.pk)  # here, while the page listens: every step arrives as an event
    run.refresh_from_db()
    wait_for_seq(page, run.event_seq)
    last = Step.objects.filter(run=run).order_by("-index").first()
    step = page.locator(f"#step-{last.index}")
    expect(step.locator(".step-tokens")).to_have_text("1200 in (1024 cached) / 40 out (16 reasoning) tokens")
    expect(step.locator(".step-request")).to_have_text(
        f"request ~{last.context_tokens} tokens, of which tool definitions ~{last.tool_definition_tokens}")
    expect(step.locator(".step-compacted")).to_contain_text("page_0")
    expect(page.locator("#run-compactions")).to_have_text(str(run.compactions))
    expect(page.locator("#run-tokens-cached")).to_have_text(str(run.tokens_cached))
