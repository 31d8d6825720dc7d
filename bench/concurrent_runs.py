"""200 concurrent runs of 5 iterations each, through real Celery workers and Redis.

Prints the completion time with 1 s of simulated model latency against the ideal (5 s: five
model calls in a row) and against the anchor: the same conversations as a bare asyncio loop over
the openai client (AsyncOpenAI, one process, no database; answers streamed when the workers
stream theirs, --stream), timed right after each batch against the same demo model, with the CPU per iteration of the workers and of the anchor (targets: no
slower than the anchor, CPU at most 1.3x its); and the runs per second with zero latency; for each batch, the resident
memory (RSS, from /proc) of each worker process: the most seen while the batch ran, and its peak
since the worker started. For 1,000 runs in flight at once: --runs 1000 --threads 500.
Run: .venv/bin/python bench/concurrent_runs.py [--runs 200] [--workers 2] [--threads 100] [--latency 1] [--repeat 3]
Uses DATABASE_URL when set (PostgreSQL), else a temporary SQLite file; REDIS_URL (db 13 by default).
On PostgreSQL, compare on a new database each time: every run here has its own script, so its own
model name, and each adds rows to the day's rollups that every later ending goes through.
Before and after: --code /path/to/other/checkout runs that checkout's workers (same database
schema), alternately with this one; the machine's speed is printed with each batch.
BENCH_VERBOSE=1 also prints, per batch, the CPU milliseconds per iteration of the workers, the
demo model, PostgreSQL and Redis (from /proc) and of the anchor, and how many runs started in
each second.
"""

import argparse
import atexit
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import (  # noqa: E402
    ROOT,
    cpu_seconds,
    pids_named,
    resident_mb,
    setup_django,
    start_demo_model,
    streamed_message,
)

ITERATIONS = 5


def script_for(url: str) -> str:
    tool = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}}]}
    responses = [tool] * (ITERATIONS - 1) + [{"content": "Lagos is sunny."}]
    req = urllib.request.Request(
        url + "/scripts",
        data=json.dumps({"responses": responses, "record": False}).encode(),
        headers={"Content-Type": "application/json"},
    )
    return json.loads(urllib.request.urlopen(req).read())["model"]


def start_workers(count: int, threads: int, env: dict, code: str = str(ROOT)) -> list[subprocess.Popen]:
    procs = []
    for i in range(count):
        log = open(os.path.join(env["BENCH_DIR"], f"worker{i}.log"), "w")
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "agentsite",
                    "worker",
                    "--pool",
                    "threads",
                    "--concurrency",
                    str(threads),
                    "--loglevel",
                    "WARNING",
                    "-n",
                    f"bench{i}@%h",
                    "--without-mingle",
                    "--without-gossip",
                ],
                cwd=code,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    time.sleep(4)  # workers connect and start consuming
    return procs


def batch(n: int, url: str, watch: dict | None = None) -> float:
    """Create n runs, dispatch them all, return seconds until the last one finished."""
    from django.db import transaction

    from runs.engine.dispatch import run_dispatch
    from runs.lifecycle.runs import run_create
    from runs.models import Agent, Run

    agent = Agent.objects.get(name="demo")
    models = [script_for(url) for _ in range(n)]
    with transaction.atomic():
        runs = [
            run_create(
                agent=agent,
                task="What's the weather in Lagos?",
                overrides={"models": [m], "tools": ["get_weather"], "repeat_limit": 100},
            )
            for m in models
        ]
    ids = [r.pk for r in runs]
    watch = dict(watch or {}, postgres=pids_named("postgres"), redis=pids_named("redis-server"))
    cpu_before = {name: cpu_seconds(pids) for name, pids in watch.items()}
    kernel_before = cpu_seconds(watch.get("workers", []), kernel_only=True)
    workers = watch.get("workers", [])
    most_resident = dict.fromkeys(workers, 0.0)
    started = time.perf_counter()
    with transaction.atomic():
        for run_id in ids:
            run_dispatch(run_id=run_id)
    dispatched = time.perf_counter() - started
    while True:
        open_ = Run.objects.filter(pk__in=ids).exclude(status__in=Run.FINISHED_STATUSES).count()
        if open_ == 0:
            break
        if time.perf_counter() - started > 300:
            raise SystemExit(f"{open_} runs still open after 300 s")
        for pid in workers:
            most_resident[pid] = max(most_resident[pid], resident_mb(pid)[0])
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    if workers:
        peaks = ", ".join(
            f"{most:.0f} MB (peak since start {resident_mb(pid)[1]:.0f} MB)" for pid, most in most_resident.items()
        )
        print(f"  resident memory per worker process during a batch of {n} runs: {peaks}; target <= 300 MB at 1,000")
    used = {name: cpu_seconds(pids) - cpu_before[name] for name, pids in watch.items()}
    if workers:
        batch.workers_cpu_ms = 1000 * used["workers"] / (n * ITERATIONS)  # the figure held against the anchor's
    if os.environ.get("BENCH_VERBOSE"):
        per_iteration = ", ".join(f"{name} {1000 * s / (n * ITERATIONS):.1f}" for name, s in used.items())
        kernel = cpu_seconds(watch.get("workers", []), kernel_only=True) - kernel_before
        print(
            f"  CPU ms per iteration: {per_iteration} (workers in the kernel: {1000 * kernel / (n * ITERATIONS):.1f})"
        )
        from django.db.models import Max, Min

        span = Run.objects.filter(pk__in=ids).aggregate(first=Min("started_at"), last=Max("started_at"))
        print(
            f"  dispatch took {dispatched:.2f} s; runs started over {(span['last'] - span['first']).total_seconds():.2f} s"
        )
        starts = sorted(Run.objects.filter(pk__in=ids, started_at__isnull=False).values_list("started_at", flat=True))
        per_second: dict[int, int] = {}
        for at in starts:
            second = int((at - starts[0]).total_seconds())
            per_second[second] = per_second.get(second, 0) + 1
        print("  runs started per second:", " ".join(f"{per_second.get(i, 0)}" for i in range(max(per_second) + 1)))
        took = sorted(
            (f - s).total_seconds()
            for s, f in Run.objects.filter(pk__in=ids, started_at__isnull=False, finished_at__isnull=False).values_list(
                "started_at", "finished_at"
            )
        )
        if took:
            print(
                f"  each run from its start to its end: median {statistics.median(took):.2f} s, "
                f"90th percentile {took[int(len(took) * 0.9)]:.2f} s, longest {took[-1]:.2f} s"
            )
    ok = Run.objects.filter(pk__in=ids, status=Run.Status.SUCCEEDED).count()
    if ok != n:
        print(f"  warning: {n - ok} runs did not succeed")
    return elapsed


async def _anchor_conversations(
    url: str, models: list[str], system_prompt: str, tools: list[dict], timeout: float, stream: bool = False
) -> int:
    """The bare loop: one AsyncOpenAI client, every conversation a coroutine, no database. Streamed
    answers when the workers stream theirs (the same requests of the model server either way)."""
    import asyncio

    import openai

    # The workers' timeout (a connection to a busy demo model can take seconds), the client's retries.
    client = openai.AsyncOpenAI(base_url=url, api_key="demo", timeout=timeout)
    result = json.dumps({"city": "Lagos", "temperature_c": 31, "conditions": "sunny"})

    async def conversation(model: str) -> int:
        messages = [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": "What's the weather in Lagos?"},
        ]
        for asked in range(1, ITERATIONS + 1):
            if stream:
                chunks = await client.chat.completions.create(model=model, messages=messages, tools=tools, stream=True)
                message = streamed_message([chunk async for chunk in chunks])
            else:
                reply = await client.chat.completions.create(model=model, messages=messages, tools=tools)
                message = reply.choices[0].message.model_dump(exclude_none=True)
            messages.append(message)
            if not message.get("tool_calls"):
                return asked
            messages.extend({"role": "tool", "tool_call_id": call["id"], "content": result} for call in message["tool_calls"])
        return asked

    asked = await asyncio.gather(*(conversation(m) for m in models))
    await client.close()
    return sum(asked)


def anchor_main(url: str) -> None:
    """In its own process (--anchor): read the models and tools on stdin, time the bare loop."""
    import asyncio

    import openai  # noqa: F401  (imported before the clock starts)

    given = json.load(sys.stdin)
    started, cpu = time.perf_counter(), time.process_time()
    requests = asyncio.run(
        _anchor_conversations(url, given["models"], given["system_prompt"], given["tools"], given["timeout"],
                              given.get("stream", False))
    )
    print(
        json.dumps({"seconds": time.perf_counter() - started, "requests": requests, "cpu": time.process_time() - cpu})
    )


def anchor(n: int, url: str, model_pid: int) -> float:
    """Seconds for the bare asyncio loop over the openai client (the anchor the workers are held to):
    n conversations of the same script at once, in one process, against the same demo model."""
    from django.conf import settings

    from runs.engine.tools.run_tools import RunTools
    from runs.models import Agent

    agent = Agent.objects.get(name="demo")
    given = {
        "models": [script_for(url) for _ in range(n)],
        "tools": RunTools(["get_weather"]).definitions,
        "system_prompt": agent.system_prompt,
        "timeout": settings.LLM_TIMEOUT_SECONDS,
        "stream": agent.stream_answers,  # asked as the workers ask
    }
    proc = subprocess.Popen(
        [sys.executable, __file__, "--anchor", url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT
    )
    cpu_before = cpu_seconds([model_pid])
    out, _ = proc.communicate(json.dumps(given).encode())
    if proc.returncode != 0:
        print(f"  warning: the anchor failed (exit status {proc.returncode}); its error is above")
        anchor.cpu_ms = float("nan")
        return float("nan")
    found = json.loads(out)
    if found["requests"] != n * ITERATIONS:
        print(f"  warning: the anchor made {found['requests']} requests, not {n * ITERATIONS}")
    anchor.cpu_ms = 1000 * found["cpu"] / (n * ITERATIONS)
    if os.environ.get("BENCH_VERBOSE"):
        used = {"anchor": found["cpu"], "model": cpu_seconds([model_pid]) - cpu_before}
        print(
            "  anchor CPU ms per iteration: "
            + ", ".join(f"{k} {1000 * s / (n * ITERATIONS):.1f}" for k, s in used.items())
        )
    return found["seconds"]


def machine_speed_ms() -> float:
    """Milliseconds for a fixed piece of pure-Python work: this machine's speed varies by a third
    from one hour to the next, and every figure above moves with it."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        json.dumps([{"n": i, "s": str(i) * 3} for i in range(20000)])
        best = min(best, time.perf_counter() - started)
    return best * 1000


def warm_up(n: int, url: str, workers: list[int]) -> None:
    # Long-running workers already have their threads, database connections and model clients;
    # new ones create them during their first burst, so that burst is shown but not counted.
    print(f"  first batch after the workers started (not counted): {batch(n, url, {'workers': workers}):.2f} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3, help="measured batches per phase (the machine is noisy)")
    parser.add_argument("--only", choices=["latency", "zero"], help="measure one phase only")
    parser.add_argument(
        "--code", default=str(ROOT), help="the checkout whose workers to run (e.g. the old code, for before and after)"
    )
    parser.add_argument("--stream", choices=["on", "off"], default="on",
                        help="streamed answers (the default) or plain requests, to measure what streaming costs")
    parser.add_argument("--anchor", metavar="URL", help=argparse.SUPPRESS)  # the anchor's own process
    args = parser.parse_args()
    if args.anchor:
        return anchor_main(args.anchor)
    # Stopped from outside (timeout, Ctrl-C): still stop the workers, or they would keep taking
    # the next benchmark's tasks from Redis.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

    tmp = tempfile.mkdtemp(prefix="bench-concurrent-")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/13")
    demo_slow, url_slow = start_demo_model(latency=args.latency)
    demo_fast, url_fast = start_demo_model(latency=0.0)
    # Also when a batch fails (SystemExit): the demo models would outlive the benchmark otherwise.
    atexit.register(lambda: (demo_slow.terminate(), demo_fast.terminate()))
    os.environ["DEMO_MODEL_URL"] = url_slow
    setup_django(os.path.join(tmp, "bench.sqlite3"))
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    from runs.models import Agent

    # Streamed answers (the default) or plain requests: --stream off measures what streaming costs.
    Agent.objects.filter(name="demo").update(stream_answers=args.stream == "on")
    print(f"answers: {'streamed' if args.stream == 'on' else 'plain requests'} (--stream {args.stream})")
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()
    env = dict(
        os.environ,
        BENCH_DIR=tmp,
        LOG_LEVEL="WARNING",
        SQLITE_PATH=settings.DATABASES["default"]["NAME"] if connection.vendor == "sqlite" else "",
        DEMO_MODEL_URL=url_slow,
    )
    procs = start_workers(args.workers, args.threads, env, args.code) if args.only != "zero" else []
    try:
        print(
            f"database: {connection.vendor}; {args.workers} worker processes x {args.threads} threads; "
            f"{args.runs} runs x {ITERATIONS} iterations; workers' code {args.code}; machine speed {machine_speed_ms():.1f} ms "
            "(a fixed piece of Python work, lower is faster)"
        )
        if procs:
            warm_up(args.runs, url_slow, [p.pid for p in procs])
        ideal = ITERATIONS * args.latency
        times, anchors, cpu_ratios = [], [], []
        for _ in range(args.repeat if args.only != "zero" else 0):
            times.append(batch(args.runs, url_slow, {"workers": [p.pid for p in procs], "model": [demo_slow.pid]}))
            # The anchor right after, on the same machine at nearly the same moment (it is noisy).
            anchors.append(anchor(args.runs, url_slow, demo_slow.pid))
            cpu_ratios.append(batch.workers_cpu_ms / anchor.cpu_ms)
            print(
                f"with {args.latency:g} s model latency: {times[-1]:.2f} s for {args.runs} runs "
                f"(ideal {ideal:.1f} s, {times[-1] / ideal:.2f}x ideal); "
                f"bare asyncio loop {anchors[-1]:.2f} s ({anchors[-1] / ideal:.2f}x); workers/anchor "
                f"{times[-1] / anchors[-1]:.2f} (target <= 1); CPU per iteration: workers {batch.workers_cpu_ms:.1f} ms, "
                f"anchor {anchor.cpu_ms:.1f} ms ({cpu_ratios[-1]:.2f}x, target <= 1.3); "
                f"machine speed now {machine_speed_ms():.1f} ms"
            )
        if len(times) > 1:
            ratios = [t / a for t, a in zip(times, anchors)]
            print(
                f"  median {statistics.median(times):.2f} s ({statistics.median(times) / ideal:.2f}x), "
                f"best {min(times):.2f} s ({min(times) / ideal:.2f}x); bare asyncio loop median "
                f"{statistics.median(anchors):.2f} s, best {min(anchors):.2f} s; workers/anchor median "
                f"{statistics.median(ratios):.2f}; CPU per iteration workers/anchor median {statistics.median(cpu_ratios):.2f}"
            )
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=20)
    # Zero latency: the same workers against the instant demo model.
    env["DEMO_MODEL_URL"] = url_fast
    procs = start_workers(args.workers, args.threads, env, args.code) if args.only != "latency" else []
    try:
        if procs:
            warm_up(args.runs, url_fast, [p.pid for p in procs])
        for _ in range(args.repeat if procs else 0):
            elapsed = batch(args.runs, url_fast, {"workers": [p.pid for p in procs], "model": [demo_fast.pid]})
            print(
                f"with zero latency: {args.runs} runs in {elapsed:.2f} s = {args.runs / elapsed:.1f} runs/s "
                f"({args.runs * ITERATIONS / elapsed:.0f} iterations/s)"
            )
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=20)
        demo_slow.terminate()
        demo_fast.terminate()


if __name__ == "__main__":
    main()
