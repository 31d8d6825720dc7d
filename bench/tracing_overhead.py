"""What tracing (OTLP) and METRICS_TOKEN cost a run: bench/loop_iterations.py and
bench/concurrent_runs.py, each with tracing off, with tracing on (to a local OTLP/HTTP receiver,
in its own process, that accepts and discards) and with METRICS_TOKEN set, in turn, round after
round (the machine's speed drifts: alternating spreads the drift over the three).

Run: .venv/bin/python bench/tracing_overhead.py [--rounds 2] [--runs 200]
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
from runs.tests.otlp_receiver import OtlpReceiver
receiver = OtlpReceiver("discard")
print(receiver.start().url, flush=True)
while True:
    time.sleep(60)
"""
FIGURES = {  # name: (benchmark, pattern of its output, which group of the match)
    "loop ms/it (10 its)": ("loop", r"^\s+10\s+([\d.]+)", 1),
    "loop ms/it (100 its)": ("loop", r"^\s+100\s+([\d.]+)", 1),
    "loop ms/it at its 92-100": ("loop", r"project loop:\s+[\d.]+ -> +([\d.]+)", 1),
    "200 runs, 1 s latency (s)": ("concurrent", r"with 1 s model latency: ([\d.]+) s", 1),
    "run start->end median (s)": ("concurrent", r"from its start to its end: median ([\d.]+) s", 1),
    "200 runs, zero latency (runs/s)": ("concurrent", r"with zero latency: \d+ runs in [\d.]+ s = ([\d.]+)", 1),
    "worker CPU ms/iteration": ("concurrent", r"CPU ms per iteration: workers ([\d.]+)", 1),
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    sink, sink_url = start_sink()
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "METRICS_TOKEN"}
    base["BENCH_VERBOSE"] = "1"
    configs = {
        "off": base,
        "traces": dict(base, OTEL_EXPORTER_OTLP_ENDPOINT=sink_url),
        "metrics token": dict(base, METRICS_TOKEN=f"bench-{free_port()}"),
    }
    values: dict[tuple[str, str], list[float]] = {}
    try:
        for round_ in range(1, args.rounds + 1):
            for kind in ("loop", "concurrent"):
                for name, env in configs.items():
                    started = time.perf_counter()
                    output = run_bench(kind, env, args.runs)
                    print(f"round {round_} {kind:<10} {name:<13} ({time.perf_counter() - started:.0f} s)", flush=True)
                    for figure, (bench, pattern, group) in FIGURES.items():
                        match = re.search(pattern, output, re.MULTILINE) if bench == kind else None
                        if match:
                            values.setdefault((figure, name), []).append(float(match.group(group)))
    finally:
        sink.terminate()
    print(f"\n{'figure':<34}" + "".join(f"{name:>22}" for name in configs))
    for figure in FIGURES:
        cells = []
        for name in configs:
            seen = values.get((figure, name), [])
            cells.append(" / ".join(f"{v:g}" for v in seen) + (f" (med {statistics.median(seen):g})" if seen else ""))
        print(f"{figure:<34}" + "".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
