"""An experiment of 200 cases at 1 s of model latency, through real Celery workers and Redis, on
the default install: printed against the ideal (every case at once), target <= 1.5x as for
concurrent runs.

Each case is a real run's ticket conversation with the stateless demo model, made into a case the
way the dashboard makes one (evals.prefill.case_from_run): search_tickets, create_ticket,
get_ticket, then the answer "Created ticket #N: ...", so four model calls per case whatever the
order the workers take them in (an experiment has one model for all its cases, and a script
answers its entries in order across conversations, so scripts cannot give each case its own
conversation). In the experiment create_ticket is simulated, answered from the case's source run
(its recorded ticket), so the conversation is the same as the source run's and every case passes.
The source runs are made first, by the same workers, and that batch is shown (it warms the workers
up, and is the same conversations as ordinary runs, without the experiment and its scoring).

Ideal: (model calls per case) x latency, every case in parallel; the floor the workers' threads
set is printed beside it (a run holds a thread while it waits for the model).
Timed: from experiment_start (its runs created and dispatched) to its status "finished" (every
case scored). Printed with the pass rate, cases per second, where the time went (dispatch, the
runs' starts and ends, the scoring after each run's end), the workers' CPU per case and their
resident memory.

Run: .venv/bin/python bench/experiments.py [--cases 200] [--latency 1] [--workers 2] [--threads N] [--repeat 1]
--threads defaults to ./start's (manage.py up --concurrency: WORKER_CONCURRENCY, else 50).
Uses DATABASE_URL when set (PostgreSQL; a new database each time), else a temporary SQLite file;
REDIS_URL (db 12 by default), whose keys it deletes before and after.
BENCH_VERBOSE=1 also prints how many runs started, ended and were scored in each second; the CPU of
the demo model, PostgreSQL and Redis; each run's time in its model calls, in its tool calls and
outside both (the loop's own work, and waiting for a working slot or the GIL); and the CPU of
scoring's reads and checks, measured in this process.
"""

import argparse
import atexit
import math
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench._common import cpu_seconds, pids_named, resident_mb, setup_django, start_demo_model  # noqa: E402
from bench.concurrent_runs import machine_speed_ms, start_workers  # noqa: E402

CALLS_PER_CASE = 4  # search_tickets, create_ticket, get_ticket, the answer
TIMEOUT_SECONDS = 600


def default_threads() -> int:
    """The threads of ./start's worker: manage.py up's --concurrency default."""
    from runs.management.commands.up import Command

    return Command().create_parser("manage.py", "up").parse_args([]).concurrency


def task_for(i: int) -> str:
    return f"Create a ticket about the export page failing for account {i}"


def seconds(values) -> str:
    values = sorted(values)
    if not values:
        return "none"
    return (f"median {statistics.median(values):.2f} s, 90th percentile {values[int(len(values) * 0.9)]:.2f} s, "
            f"longest {values[-1]:.2f} s")


def per_second(offsets) -> str:
    counts: dict[int, int] = {}
    for at in offsets:
        counts[int(at)] = counts.get(int(at), 0) + 1
    return " ".join(str(counts.get(i, 0)) for i in range(max(counts, default=-1) + 1))


def wait_until(done, what: str, workers: list[int] | None = None, most: dict | None = None) -> float:
    started = time.perf_counter()
    while not done():
        if time.perf_counter() - started > TIMEOUT_SECONDS:
            raise SystemExit(f"{what} not done after {TIMEOUT_SECONDS} s")
        for pid in workers or []:
            most[pid] = max(most[pid], resident_mb(pid)[0])
        time.sleep(0.05)
    return time.perf_counter() - started


def source_runs(n: int, workers: list[int]) -> tuple[list, float, float]:
    """n ordinary runs of the ticket conversation (the cases' source runs), dispatched at once;
    (the runs, seconds until the last one ended, the workers' CPU seconds meanwhile)."""
    from django.db import transaction

    from runs.engine.dispatch import run_dispatch
    from runs.lifecycle.runs import run_create
    from runs.models import Agent, Run

    agent = Agent.objects.get(name="demo")
    with transaction.atomic():
        runs = [run_create(agent=agent, task=task_for(i)) for i in range(n)]
    ids = [r.pk for r in runs]
    cpu = cpu_seconds(workers)
    started = time.perf_counter()
    with transaction.atomic():
        for run_id in ids:
            run_dispatch(run_id=run_id)
    open_runs = Run.objects.filter(pk__in=ids).exclude(status__in=Run.FINISHED_STATUSES)
    wait_until(lambda: not open_runs.exists(), f"{n} source runs")
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(workers) - cpu
    runs = list(Run.objects.filter(pk__in=ids).order_by("pk"))
    wrong = [r for r in runs if r.status != Run.Status.SUCCEEDED or r.iterations != CALLS_PER_CASE]
    if wrong:
        r = wrong[0]
        raise SystemExit(f"{len(wrong)} source runs did not succeed in {CALLS_PER_CASE} iterations "
                         f"(run {r.pk}: {r.status}, {r.iterations} iterations, {r.stop_reason}: {r.answer!r})")
    return runs, elapsed, cpu


def where_runs_wait(run_ids: list[int]) -> str:
    """Each run's time in its model calls (as the loop measured them), its tool calls, and the rest."""
    from django.db.models import Sum

    from runs.models import Run, Step, ToolCall

    model_ms = dict(Step.objects.filter(run_id__in=run_ids).values("run_id").annotate(ms=Sum("latency_ms"))
                    .values_list("run_id", "ms"))
    tool_ms = dict(ToolCall.objects.filter(run_id__in=run_ids).values("run_id").annotate(ms=Sum("latency_ms"))
                   .values_list("run_id", "ms"))
    calls = sorted(Step.objects.filter(run_id__in=run_ids).values_list("latency_ms", flat=True))
    rest = []
    for run_id, s, f in Run.objects.filter(pk__in=run_ids).values_list("pk", "started_at", "finished_at"):
        if s and f:
            rest.append((f - s).total_seconds() - (model_ms.get(run_id) or 0) / 1000 - (tool_ms.get(run_id) or 0) / 1000)
    per_run_tools = [ms / 1000 for ms in tool_ms.values() if ms is not None]
    return (f"each model call as the loop timed it: {seconds([ms / 1000 for ms in calls])}; each run's tool calls: "
            f"{seconds(per_run_tools)}; each run's time outside both: {seconds(rest)}")


def scoring_cost(run_ids: list[int], sample: int = 20) -> str:
    """CPU of the reading part of scoring (what case_score reads and checks, not its writes), here."""
    from evals import expectations
    from evals.models import CaseResult
    from evals.scoring import run_facts, simulated_records
    from runs.models import Run

    cpu = time.process_time()
    for result in CaseResult.objects.select_related("case").filter(run_id__in=run_ids[:sample]):
        run = Run.objects.get(pk=result.run_id)
        facts, calls, tools = run_facts(run)
        expectations.check_all(list(result.case.expectations), facts)
        simulated_records(run, calls, tools)
    return f"scoring's reads and checks, in this process: {1000 * (time.process_time() - cpu) / sample:.1f} ms CPU per case"


def make_dataset(runs: list):
    from evals.datasets import case_add, dataset_create
    from evals.prefill import case_from_run

    dataset = dataset_create(name=f"bench experiments {len(runs)} cases {time.time():.0f}")
    for run in runs:
        case_add(dataset=dataset, data=case_from_run(run))
    return dataset


def experiment(dataset, workers: list[int], model_pid: int) -> dict:
    """Start an experiment of every case of `dataset`; its figures once every case is scored."""
    from django.utils import timezone

    from evals.experiments import experiment_start
    from evals.models import CaseResult, Experiment
    from runs.models import Agent

    agent = Agent.objects.get(name="demo")
    watch = {"workers": workers, "model": [model_pid], "postgres": pids_named("postgres"),
             "redis": pids_named("redis-server")}
    cpu_before = {name: cpu_seconds(pids) for name, pids in watch.items()}
    most = dict.fromkeys(workers, 0.0)
    wall0 = timezone.now()
    started = time.perf_counter()
    exp = experiment_start(dataset=dataset, agent=agent)
    dispatched = time.perf_counter() - started
    state = Experiment.objects.filter(pk=exp.pk)
    wait_until(lambda: state.filter(status=Experiment.Status.FINISHED).exists(),
               f"experiment {exp.pk}", workers, most)
    elapsed = time.perf_counter() - started
    used = {name: cpu_seconds(pids) - cpu_before[name] for name, pids in watch.items()}
    exp.refresh_from_db()
    rows = list(CaseResult.objects.filter(experiment=exp).values_list(
        "run__started_at", "run__finished_at", "scored_at", "run__iterations", "passed", "run_id"))

    def offset(at):
        return (at - wall0).total_seconds()

    return {
        "experiment": exp, "elapsed": elapsed, "dispatched": dispatched, "cpu": used, "resident": most,
        "started": [offset(s) for s, *_ in rows if s],
        "ended": [offset(f) for _, f, *_ in rows if f],
        "scored": [offset(c) for _, _, c, *_ in rows if c],
        "run_seconds": [(f - s).total_seconds() for s, f, *_ in rows if s and f],
        "score_delay": [(c - f).total_seconds() for _, f, c, *_ in rows if f and c],
        "iterations": sorted({row[3] for row in rows}), "run_ids": [row[5] for row in rows],
        "finished_at": offset(exp.finished_at) if exp.finished_at else float("nan"),
    }


def report(found: dict, args, threads_total: int) -> float:
    exp, elapsed = found["experiment"], found["elapsed"]
    ideal = CALLS_PER_CASE * args.latency
    floor = math.ceil(args.cases / threads_total) * ideal
    rate = exp.pass_rate
    print(
        f"with {args.latency:g} s model latency: experiment of {exp.cases_total} cases on {args.workers} workers "
        f"x {args.threads} threads: {elapsed:.2f} s from start to finished (all scored); ideal {ideal:.1f} s "
        f"({CALLS_PER_CASE} model calls per case, every case at once): {elapsed / ideal:.2f}x ideal (target <= 1.5); "
        f"pass rate {'n/a' if rate is None else f'{100 * rate:.0f}%'} ({exp.cases_passed}/{exp.cases_done}); "
        f"{exp.cases_total / elapsed:.1f} runs/s; machine speed now {machine_speed_ms():.1f} ms"
    )
    if threads_total < args.cases:
        print(f"  the workers' {threads_total} threads hold {threads_total} runs at once: {args.cases} cases take "
              f"{math.ceil(args.cases / threads_total)} rounds, a floor of {floor:.1f} s ({elapsed / floor:.2f}x that)")
    if found["iterations"] != [CALLS_PER_CASE]:
        print(f"  warning: iterations per case {found['iterations']}, not only {CALLS_PER_CASE}")
    started, ended, scored = found["started"], found["ended"], found["scored"]
    print(
        f"  where the time went (seconds after the start): experiment_start (runs made, dispatched) "
        f"{found['dispatched']:.2f}; runs started {min(started):.2f} to {max(started):.2f}; runs ended "
        f"{min(ended):.2f} to {max(ended):.2f}; cases scored {min(scored):.2f} to {max(scored):.2f}; "
        f"experiment finished {found['finished_at']:.2f} (seen {elapsed:.2f})"
    )
    print(f"  each run from its start to its end: {seconds(found['run_seconds'])}")
    print(f"  each case's scoring after its run ended: {seconds(found['score_delay'])}")
    cpu = found["cpu"]
    print(f"  workers' CPU per case {1000 * cpu['workers'] / args.cases:.0f} ms "
          f"({1000 * cpu['workers'] / (args.cases * CALLS_PER_CASE):.1f} ms per model call); resident memory per "
          "worker during the experiment: "
          + ", ".join(f"{mb:.0f} MB" for mb in found["resident"].values()))
    if os.environ.get("BENCH_VERBOSE"):
        print("  runs started per second:", per_second(started))
        print("  runs ended per second:  ", per_second(ended))
        print("  cases scored per second:", per_second(scored))
        print("  CPU seconds: " + ", ".join(f"{name} {s:.1f}" for name, s in cpu.items()))
        print("  " + where_runs_wait(found["run_ids"]))
        print("  " + scoring_cost(found["run_ids"]))
    return elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, help="threads per worker (default: ./start's)")
    parser.add_argument("--repeat", type=int, default=1, help="experiments measured (the machine is noisy)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each figure as it comes, also into a file
    # Stopped from outside (timeout, Ctrl-C): still stop the workers and the demo model.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))

    tmp = tempfile.mkdtemp(prefix="bench-experiments-")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/12")
    demo, url = start_demo_model(latency=args.latency)
    procs: list = []

    def stop_all():
        for p in [*procs, demo]:
            if p.poll() is None:
                p.terminate()
        for p in [*procs, demo]:
            try:
                p.wait(timeout=20)
            except Exception:
                p.kill()
                p.wait()
        procs.clear()

    def stop_demo():
        if demo.poll() is None:
            demo.terminate()
            demo.wait(timeout=10)

    atexit.register(stop_demo)
    os.environ["DEMO_MODEL_URL"] = url
    setup_django(os.path.join(tmp, "bench.sqlite3"))
    import redis
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    args.threads = args.threads or default_threads()
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.flushdb()
    env = dict(
        os.environ,
        BENCH_DIR=tmp,
        LOG_LEVEL="WARNING",
        SQLITE_PATH=settings.DATABASES["default"]["NAME"] if connection.vendor == "sqlite" else "",
        DEMO_MODEL_URL=url,
    )
    failed = True
    try:
        # A stop while they start would lose their handles (and leave them running): it waits until they are kept.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        try:
            procs.extend(start_workers(args.workers, args.threads, env))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
        workers = [p.pid for p in procs]
        print(
            f"database: {connection.vendor}; {args.workers} worker processes x {args.threads} threads; "
            f"{args.cases} cases x {CALLS_PER_CASE} model calls at {args.latency:g} s; Redis {settings.REDIS_URL}; "
            f"machine speed {machine_speed_ms():.1f} ms (a fixed piece of Python work, lower is faster)"
        )
        runs, took, cpu = source_runs(args.cases, workers)
        print(f"  the cases' {args.cases} source runs, as ordinary runs (warms the workers up, not counted): "
              f"{took:.2f} s ({took / (CALLS_PER_CASE * args.latency):.2f}x ideal); workers' CPU per run "
              f"{1000 * cpu / args.cases:.0f} ms")
        if os.environ.get("BENCH_VERBOSE"):
            print("  " + where_runs_wait([r.pk for r in runs]))
        dataset = make_dataset(runs)
        times = [report(experiment(dataset, workers, demo.pid), args, args.workers * args.threads)
                 for _ in range(args.repeat)]
        if len(times) > 1:
            ideal = CALLS_PER_CASE * args.latency
            print(f"  median {statistics.median(times):.2f} s ({statistics.median(times) / ideal:.2f}x), "
                  f"best {min(times):.2f} s ({min(times) / ideal:.2f}x)")
        failed = False
    finally:
        stop_all()
        broker.flushdb()  # the queues, the cache, the leases: nothing left for the next user of this db
        connection.close()
        if failed:
            print(f"worker logs kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
