"""Tokens sent per run, with and without compaction, for a long run; and how far our estimate of a
request is from what the demo model counts.

One run of N iterations whose tool returns a few thousand characters each time (a page of
search results, say), through the real loop, over HTTP to the demo model in its own process:
once with a context budget (older results summarised in the requests) and once without.
Printed: the input tokens the model reported over the whole run, the largest request, the
iterations, and the ratio. Then our pre-send estimate against the model's reported prompt tokens.

Run: .venv/bin/python bench/context_tokens.py [--iterations 60] [--result-chars 6000] [--budget 8000]
"""
import argparse
import json
import os
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import setup_django, start_demo_model  # noqa: E402


def new_script(url: str, iterations: int) -> str:
    entries = [{"tool_calls": [{"name": "bench_page", "arguments": {"page": i}}]} for i in range(iterations)]
    entries.append({"content": "Read every page."})
    req = urllib.request.Request(url + "/scripts", data=json.dumps({"responses": entries}).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())["model"]


def one_run(url: str, agent, iterations: int) -> dict:
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create
    from runs.models import Step

    model = new_script(url, iterations)
    run = run_create(agent=agent, task="Read every page of the report and sum it up.",
                     overrides={"models": [model], "max_iterations": iterations + 1, "summarize_on_stop": False})
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    steps = list(Step.objects.filter(run=run).order_by("index").values_list("tokens_in", "context_tokens"))
    return {
        "stop": run.stop_reason, "iterations": run.iterations, "tokens_in": run.tokens_in,
        "largest": max(t for t, _ in steps), "compactions": run.compactions,
        "estimates": [(estimate, reported) for reported, estimate in steps],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--result-chars", type=int, default=6000)
    parser.add_argument("--budget", type=int, default=8000)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-context-")
    proc, url = start_demo_model()
    os.environ["DEMO_MODEL_URL"] = url
    setup_django(os.path.join(tmp, "bench.sqlite3"))
    from django.core.management import call_command

    from runs.models import Agent
    from toolsapp.executors.python import python_handler
    from toolsapp.models import Tool

    call_command("migrate", verbosity=0)
    text = ("Quarterly figures for the northern region, by product line and month. " * 200)[: args.result_chars]

    @python_handler("bench_page", read_only=True)
    def bench_page(arguments, ctx):
        return {"page": arguments.get("page"), "text": text}

    Tool.objects.create(name="bench_page", description="One page of the report.", handler="bench_page",
                        parameters={"type": "object", "properties": {"page": {"type": "integer"}}})
    limits = {"max_tokens": 10**9, "max_cost_usd": 10**6, "max_iterations": args.iterations + 1,
              "summarize_on_stop": False, "stream_answers": False}
    compacted = Agent.objects.create(name="compacted", context_budget_tokens=args.budget, **limits)
    whole = Agent.objects.create(name="whole", compact_context=False, **limits)
    for agent in (compacted, whole):
        agent.tools.set(Tool.objects.filter(name="bench_page"))
    print(f"a run of {args.iterations} iterations, each tool result {args.result_chars:,} characters; "
          f"demo model {url} (own process)")
    try:
        on = one_run(url, compacted, args.iterations)
        off = one_run(url, whole, args.iterations)
        print(f"{'':<34} {'input tokens':>14} {'largest request':>16} {'compactions':>12} {'ended':>14}")
        print(f"{'with compaction (budget ' + format(args.budget, ',') + ')':<34} {on['tokens_in']:>14,} "
              f"{on['largest']:>16,} {on['compactions']:>12} {on['stop']:>14}")
        print(f"{'without compaction':<34} {off['tokens_in']:>14,} {off['largest']:>16,} {off['compactions']:>12} "
              f"{off['stop']:>14}")
        print(f"tokens sent with compaction: {on['tokens_in'] / off['tokens_in']:.2f} of those without "
              f"({off['tokens_in'] / on['tokens_in']:.1f}x fewer)")
        ratios = [estimate / reported for estimate, reported in on["estimates"] + off["estimates"] if reported]
        ratios.sort()
        print(f"our estimate / the demo model's reported prompt tokens over {len(ratios)} requests: "
              f"min {ratios[0]:.2f}, median {ratios[len(ratios) // 2]:.2f}, max {ratios[-1]:.2f} "
              "(above 1: the estimate errs on the safe side; the demo counts 4 characters a token and "
              "not the tool definitions)")
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()
