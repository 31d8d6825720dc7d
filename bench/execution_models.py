"""The design question of issue 28, measured: does a thread per run cost more CPU than one asyncio
event loop holding every run's model request?

The same conversations as the anchor of bench/concurrent_runs.py (five requests each: four
weather calls, then an answer; a fixed tool result; no database), against the same demo model,
driven four ways in a process of their own:

  asyncio          one event loop, AsyncOpenAI, plain requests (the anchor)
  asyncio-stream   the same, answers streamed (the loop streams them by default)
  threads          a thread per conversation, the synchronous OpenAI client, plain requests
  threads-stream   the same, answers streamed

Each prints its wall time and its CPU per request (user + system). The modes are rotated each
round (this machine's speed moves by a third from minute to minute). If "threads" costs about
what "asyncio" costs, moving the worker to an event loop would not lower its CPU per iteration:
what the worker spends beyond the anchor is its own work (the database, validation, tools,
events), which no execution model removes.

Run: .venv/bin/python bench/execution_models.py [--runs 200] [--latency 1] [--rounds 3]
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import ROOT, start_demo_model, streamed_message  # noqa: E402
from bench.concurrent_runs import ITERATIONS, script_for  # noqa: E402

MODES = ("asyncio", "asyncio-stream", "threads", "threads-stream")
TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
RESULT = json.dumps({"city": "Lagos", "temperature_c": 31, "conditions": "sunny"})


def _start(model: str) -> list[dict]:
    return [{"role": "system", "content": "You answer questions about the weather."},
            {"role": "user", "content": f"What's the weather in Lagos? ({model})"}]


def _plain_message(reply) -> dict:
    return reply.choices[0].message.model_dump(exclude_none=True)


def _after(messages: list[dict], message: dict) -> bool:
    """Append the answer and a result per call; whether the conversation goes on."""
    messages.append(message)
    if not message.get("tool_calls"):
        return False
    messages.extend({"role": "tool", "tool_call_id": c["id"], "content": RESULT} for c in message["tool_calls"])
    return True


def run_asyncio(url: str, models: list[str], stream: bool) -> int:
    import asyncio

    import openai

    async def main() -> int:
        client = openai.AsyncOpenAI(base_url=url, api_key="demo", timeout=60)

        async def conversation(model: str) -> int:
            messages = _start(model)
            for asked in range(1, ITERATIONS + 1):
                if stream:
                    chunks = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS, stream=True)
                    message = streamed_message([c async for c in chunks])
                else:
                    message = _plain_message(await client.chat.completions.create(model=model, messages=messages, tools=TOOLS))
                if not _after(messages, message):
                    return asked
            return asked

        asked = await asyncio.gather(*(conversation(m) for m in models))
        await client.close()
        return sum(asked)

    return asyncio.run(main())


def run_threads(url: str, models: list[str], stream: bool) -> int:
    import threading

    import openai

    client = openai.OpenAI(base_url=url, api_key="demo", timeout=60,
                           http_client=openai.DefaultHttpxClient(limits=_limits(len(models))))
    asked = [0] * len(models)

    def conversation(i: int, model: str) -> None:
        messages = _start(model)
        for n in range(1, ITERATIONS + 1):
            asked[i] = n
            if stream:
                message = streamed_message(list(client.chat.completions.create(model=model, messages=messages,
                                                                                tools=TOOLS, stream=True)))
            else:
                message = _plain_message(client.chat.completions.create(model=model, messages=messages, tools=TOOLS))
            if not _after(messages, message):
                return

    threads = [threading.Thread(target=conversation, args=(i, m)) for i, m in enumerate(models)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(asked)


def _limits(n: int):
    import httpx2

    return httpx2.Limits(max_connections=n, max_keepalive_connections=n)


def child(mode: str, url: str) -> None:
    """In its own process: read the models on stdin, drive them, print seconds, requests, CPU."""
    import openai  # noqa: F401  (imported before the clock starts)

    models = json.load(sys.stdin)
    started, cpu = time.perf_counter(), time.process_time()
    run = run_asyncio if mode.startswith("asyncio") else run_threads
    requests = run(url, models, mode.endswith("stream"))
    print(json.dumps({"seconds": time.perf_counter() - started, "requests": requests, "cpu": time.process_time() - cpu}))


def measure(mode: str, url: str, n: int) -> tuple[float, float]:
    models = [script_for(url) for _ in range(n)]
    proc = subprocess.run([sys.executable, __file__, "--child", mode, url], input=json.dumps(models).encode(),
                          stdout=subprocess.PIPE, cwd=ROOT, check=True)
    found = json.loads(proc.stdout)
    if found["requests"] != n * ITERATIONS:
        print(f"  warning: {mode} made {found['requests']} requests, not {n * ITERATIONS}")
    return found["seconds"], 1000 * found["cpu"] / found["requests"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(*args.child)
    demo, url = start_demo_model(latency=args.latency)
    try:
        figures = {mode: [] for mode in MODES}
        print(f"{args.runs} conversations x {ITERATIONS} requests, model latency {args.latency} s, one process each")
        for r in range(args.rounds):
            order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
            for mode in order:
                seconds, cpu = measure(mode, url, args.runs)
                figures[mode].append((seconds, cpu))
                print(f"  round {r + 1} {mode:15} {seconds:6.2f} s   CPU {cpu:5.2f} ms per request", flush=True)
        base = sorted(c for _, c in figures["asyncio"])[len(figures["asyncio"]) // 2]
        print("medians (CPU against asyncio's):")
        for mode, rows in figures.items():
            wall = sorted(s for s, _ in rows)[len(rows) // 2]
            cpu = sorted(c for _, c in rows)[len(rows) // 2]
            print(f"  {mode:15} {wall:6.2f} s   CPU {cpu:5.2f} ms per request ({cpu / base:.2f}x)")
    finally:
        demo.terminate()


if __name__ == "__main__":
    main()
