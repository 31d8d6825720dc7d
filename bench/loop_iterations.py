"""Milliseconds per iteration: the project's loop (database writes included) against a minimal
in-memory loop that calls client.chat.completions.create the straightforward way.

Both talk to the same zero-latency demo model over HTTP, in its own process.
Run: .venv/bin/python bench/loop_iterations.py [--stream off]
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import setup_django, start_demo_model  # noqa: E402

TOOL_CALL = {"repeat": True, "tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}}]}


def straightforward_loop(base_url: str, model: str, tools: list, iterations: int) -> list[float]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="demo")
    weather = {"Lagos": {"city": "Lagos", "temperature_c": 31, "conditions": "sunny"}}
    messages = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "What's the weather in Lagos?"},
    ]
    times = []
    for _ in range(iterations):
        started = time.perf_counter()
        response = client.chat.completions.create(model=model, messages=messages, tools=tools)
        message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            args = json.loads(call.function.arguments)
            result = {"ok": True, "result": weather.get(args["city"])}
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
        times.append((time.perf_counter() - started) * 1000)
    return times


def project_loop(model: str, iterations: int) -> tuple[float, list[float]]:
    """Total ms, and ms per iteration measured between consecutive step commits."""
    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create
    from runs.models import Agent, Step

    run = run_create(
        agent=Agent.objects.get(name="demo"),
        task="What's the weather in Lagos?",
        overrides={"models": [model], "tools": ["get_weather"], "max_iterations": iterations, "repeat_limit": 10**9,
                   "summarize_on_stop": False},
    )
    started = time.perf_counter()
    run_advance(run_id=run.pk)
    elapsed = (time.perf_counter() - started) * 1000
    stamps = list(Step.objects.filter(run=run).order_by("index").values_list("created_at", flat=True))
    assert len(stamps) == iterations, f"expected {iterations} steps, got {len(stamps)}"
    gaps = [(b - a).total_seconds() * 1000 for a, b in zip(stamps, stamps[1:])]
    return elapsed, gaps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--stream", choices=["on", "off"], default="on",
                        help="streamed answers (the default) or plain requests, to measure what streaming costs")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-loop-")
    proc, url = start_demo_model()
    os.environ["DEMO_MODEL_URL"] = url
    setup_django(os.path.join(tmp, "bench.sqlite3"))
    from django.core.management import call_command
    from django.db import connection

    from runs.demo_model.server import DemoModelServer  # noqa: F401  (same package the server runs)
    from toolsapp.models import Tool

    call_command("migrate", verbosity=0)
    from runs.models import Agent

    # Streamed answers (the default) or plain requests: --stream off measures what streaming costs.
    Agent.objects.filter(name="demo").update(stream_answers=args.stream == "on")
    print(f"answers: {'streamed' if args.stream == 'on' else 'plain requests'} (--stream {args.stream})")
    import urllib.request

    def new_script() -> str:
        req = urllib.request.Request(
            url + "/scripts", data=json.dumps({"responses": [TOOL_CALL], "record": False}).encode(),
            headers={"Content-Type": "application/json"},
        )
        return json.loads(urllib.request.urlopen(req).read())["model"]

    tools = [Tool.objects.get(name="get_weather").definition()]
    print(f"database: {connection.vendor}; demo model: {url} (own process, zero latency)")
    print(f"{'iterations':>10} {'project ms/it':>14} {'straightforward ms/it':>22} {'ratio':>7}")
    try:
        project_loop(new_script(), 3)  # warm up both paths
        straightforward_loop(url, new_script(), tools, 3)
        results = {}
        for n in (10, 100):
            total, gaps = project_loop(new_script(), n)
            plain = straightforward_loop(url, new_script(), tools, n)
            results[n] = (gaps, plain)
            ours, theirs = total / n, sum(plain) / n
            print(f"{n:>10} {ours:>14.2f} {theirs:>22.2f} {ours / theirs:>7.2f}   (mean over the whole run)")
        gaps, plain = results[100]
        ours_first, ours_last = sum(gaps[:9]) / 9, sum(gaps[-9:]) / 9
        theirs_first, theirs_last = sum(plain[1:10]) / 9, sum(plain[-9:]) / 9
        print("cost of one iteration early (2-10) and late (92-100) in the 100-iteration runs:")
        print(f"  project loop:         {ours_first:6.2f} -> {ours_last:6.2f} ms")
        print(f"  straightforward loop: {theirs_first:6.2f} -> {theirs_last:6.2f} ms")
        print(f"  ratio at iterations 92-100: {ours_last / theirs_last:.2f} (target <= 0.20)")
    finally:
        proc.terminate()


if __name__ == "__main__":
    main()
