"""What tracing (OTLP) and METRICS_TOKEN cost a run: bench/loop_iterations.py and
bench/concurrent_runs.py, each with tracing off, with tracing on (to a local OTLP/HTTP receiver,
in its own process, that accepts and discards), with METRICS_TOKEN set, and with both, in turn,
round after round, each round starting with the next of them (the machine's speed drifts, and
a place in the round may favour whoever takes it: rotating spreads both over the four). --rounds 4
or 8 gives each configuration each place equally.

Run: .venv/bin/python bench/tracing_overhead.py [--rounds 4] [--runs 200] [--only loop|concurrent]
     .venv/bin/python bench/tracing_overhead.py --cpu --rounds 8   (CPU per iteration, in one process)
REDIS_URL and DATABASE_URL are passed on to the benchmarks.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import ROOT, free_port  # noqa: E402

SINK = """
import sys, time
from tests.support.otlp_receiver import OtlpReceiver
receiver = OtlpReceiver("discard")
print(receiver.start().url, flush=True)
while True:
    time.sleep(60)
"""
# name: (benchmark, pattern of its output, which group of the match). Of the concurrent batches, the
# one with 1 s latency that counts, not the one before it, the first after the workers started.
FIGURES = {
    "loop ms/it (10 its)": ("loop", r"^\s+10\s+([\d.]+)", 1),
    "loop ms/it (100 its)": ("loop", r"^\s+100\s+([\d.]+)", 1),
    "loop ms/it at its 92-100": ("loop", r"project loop:\s+[\d.]+ -> +([\d.]+)", 1),
    "200 runs, 1 s latency (s)": ("concurrent", r"with 1 s model latency: ([\d.]+) s", 1),
    "run start->end median (s)": ("concurrent", r"(?s)\(not counted\).*?from its start to its end: median ([\d.]+)", 1),
    "200 runs, zero latency (runs/s)": ("concurrent", r"with zero latency: \d+ runs in [\d.]+ s = ([\d.]+)", 1),
    "worker CPU ms/iteration": ("concurrent", r"(?s)\(not counted\).*?CPU ms per iteration: workers ([\d.]+)", 1),
}


def start_sink() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", SINK], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def run_bench(kind: str, env: dict, runs: int) -> str:
    args = (
        ["bench/loop_iterations.py"]
        if kind == "loop"
        else ["bench/concurrent_runs.py", "--runs", str(runs), "--repeat", "1"]
    )
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"{args[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def loop_cpu(sink_url: str, rounds: int, iterations: int = 50) -> None:
    """CPU of this process (the driver, and the exporting thread: flushed before reading) per
    iteration of ten runs, tracing off and on in turn: a figure the other loads of a shared
    machine move less than wall time."""
    import tempfile

    from bench._common import setup_django, start_demo_model
    from bench.loop_iterations import TOOL_CALL

    demo, url = start_demo_model()
    os.environ["DEMO_MODEL_URL"] = url
    setup_django(os.path.join(tempfile.mkdtemp(prefix="bench-trace-cpu-"), "bench.sqlite3"))
    import json
    import urllib.request

    from django.conf import settings
    from django.core.management import call_command

    from runs.engine.loop import run_advance
    from runs.lifecycle.runs import run_create
    from runs.models import Agent
    from runs.observability.tracing import exporter as tracing

    call_command("migrate", verbosity=0)

    def one_run() -> tuple[float, float]:
        """Ten runs, then what they queued is exported (batches much like a busy worker's)."""
        runs = []
        for _ in range(10):
            body = json.dumps({"responses": [TOOL_CALL], "record": False}).encode()
            request = urllib.request.Request(url + "/scripts", data=body, headers={"Content-Type": "application/json"})
            model = json.loads(urllib.request.urlopen(request).read())["model"]
            overrides = {
                "models": [model],
                "tools": ["get_weather"],
                "max_iterations": iterations,
                "repeat_limit": 10**9,
                "summarize_on_stop": False,
            }
            task = "What's the weather in Lagos?"
            runs.append(run_create(agent=Agent.objects.get(name="demo"), task=task, overrides=overrides))
        cpu, wall = time.process_time(), time.perf_counter()
        for run in runs:
            run_advance(run_id=run.pk)
        tracing.flush() if settings.TRACES_ENDPOINT else None
        its = 10 * iterations
        return (time.process_time() - cpu) * 1000 / its, (time.perf_counter() - wall) * 1000 / its

    # The CPU spent in tracing's own code, measured where it runs (thread CPU): what the driver's
    # thread does after each commit, and building, encoding and sending in the exporter's thread.
    # Precise where the difference of two whole-process figures is at the mercy of the machine.
    spent = {"build": 0.0, "export": 0.0}

    def timed(function, name):
        def wrapper(*args, **kwargs):
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.thread_time() - started

        return wrapper

    from runs.observability.tracing import run_spans

    run_spans._export = timed(run_spans._export, "build")
    tracing._Exporter.export = timed(tracing._Exporter.export, "export")

    figures: dict[str, list[tuple[float, float]]] = {"off": [], "traces": []}
    try:
        for endpoint in ("", f"{sink_url}/v1/traces"):  # warm up both paths
            settings.TRACES_ENDPOINT = endpoint
            one_run()
        spent.update(build=0.0, export=0.0)
        for _ in range(rounds):
            for name, endpoint in (("off", ""), ("traces", f"{sink_url}/v1/traces")):
                settings.TRACES_ENDPOINT = endpoint
                figures[name].append(one_run())
    finally:
        demo.terminate()
    its = rounds * 10 * iterations
    print(f"ten runs of {iterations} iterations in this process, {rounds} times each, alternately (ms per iteration):")
    for name, seen in figures.items():
        cpu = statistics.median(c for c, _ in seen)
        wall = statistics.median(w for _, w in seen)
        print(
            f"  {name:<7} CPU median {cpu:6.2f} (all: {' '.join(f'{c:.2f}' for c, _ in seen)}); wall median {wall:6.2f}"
        )
    off = statistics.median(c for c, _ in figures["off"])
    paired = statistics.median(on[0] - off_[0] for off_, on in zip(figures["off"], figures["traces"]))
    own = (spent["build"] + spent["export"]) * 1000 / its
    print(f"  tracing adds {100 * paired / off:+.1f}% CPU per iteration (median of the {rounds} paired differences)")
    print(
        f"  CPU in tracing's own code: {own * 1000:.0f} us per iteration = {100 * own / off:.1f}% "
        f"({spent['build'] * 1e6 / its:.0f} us in the driver's thread after the commits, "
        f"{spent['export'] * 1e6 / its:.0f} us building, encoding and sending in the exporter's thread)"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cpu", action="store_true", help="only the CPU per iteration of one process, off and on")
    parser.add_argument("--iterations", type=int, default=50, help="of each run, with --cpu")
    parser.add_argument("--only", choices=("loop", "concurrent"), help="one of the two benchmarks")
    args = parser.parse_args()
    sink, sink_url = start_sink()
    if args.cpu:
        try:
            loop_cpu(sink_url, args.rounds, args.iterations)
        finally:
            sink.terminate()
        return
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "METRICS_TOKEN"}
    base["BENCH_VERBOSE"] = "1"
    token = f"bench-{free_port()}"
    configs = {
        "off": base,
        "traces": dict(base, OTEL_EXPORTER_OTLP_ENDPOINT=sink_url),
        "metrics token": dict(base, METRICS_TOKEN=token),
        "both": dict(base, OTEL_EXPORTER_OTLP_ENDPOINT=sink_url, METRICS_TOKEN=token),
    }
    values: dict[tuple[str, str], list[float]] = {}
    try:
        for round_ in range(1, args.rounds + 1):
            for kind in [args.only] if args.only else ("loop", "concurrent"):
                # Each round starts with the next configuration: with "off" always first, the A/A
                # control (METRICS_TOKEN changes nothing in the loop) once came out 4.6% behind it.
                names = list(configs)
                shift = (round_ - 1) % len(names)
                for name in names[shift:] + names[:shift]:
                    env = configs[name]
                    started = time.perf_counter()
                    output = run_bench(kind, env, args.runs)
                    print(f"round {round_} {kind:<10} {name:<13} ({time.perf_counter() - started:.0f} s)", flush=True)
                    for figure, (bench, pattern, group) in FIGURES.items():
                        match = re.search(pattern, output, re.MULTILINE) if bench == kind else None
                        if match:
                            values.setdefault((figure, name), []).append(float(match.group(group)))
    finally:
        sink.terminate()
    print(f"\n{'figure (median of the rounds)':<34}" + "".join(f"{name:>16}" for name in configs))
    for figure in FIGURES:
        medians = {name: statistics.median(values[figure, name]) for name in configs if values.get((figure, name))}
        if "off" not in medians:
            continue
        cells = [f"{medians['off']:g}"] + [
            f"{medians[name]:g} ({100 * (medians[name] - medians['off']) / medians['off']:+.1f}%)"
            if name in medians
            else "-"
            for name in list(configs)[1:]
        ]
        print(f"{figure:<34}" + "".join(f"{cell:>16}" for cell in cells))
    print("\nevery round:")
    for (figure, name), seen in sorted(values.items()):
        print(f"  {figure:<34} {name:<14} {' / '.join(f'{v:g}' for v in seen)}")


if __name__ == "__main__":
    main()
