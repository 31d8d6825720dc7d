"""With the default settings, a run whose worker died is driven again within 30 s, and a slow
model never looks like a dead worker.

The other durability tests shorten the lease to keep them quick; here the first tests use the
defaults a user gets from `./start` (read from a fresh settings module, not this test session's),
with a real worker killed by SIGKILL in the middle of a model call.
"""
import json
import os
import subprocess
import sys
import time

import pytest
from django.utils import timezone

from runs.engine.dispatch import run_dispatch
from runs.lifecycle.housekeeping import runs_sweep
from runs.lifecycle.runs import run_create
from runs.models import Run, Step
from tests.conftest import ROOT
from tests.engine.workers.test_worker_durability import assert_consistent_history, slow

pytestmark = pytest.mark.worker

FINISHED = (Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED)
PICKED_UP_WITHIN = 30  # what the README promises for a worker killed during a run


def default_settings() -> dict:
    """The lease and sweep settings of a fresh process with none of them in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("RUN_LEASE_SECONDS", "SWEEP_INTERVAL_SECONDS")}
    code = (
        "import django, json; django.setup(); from django.conf import settings as s; "
        "print(json.dumps({'lease': s.RUN_LEASE_SECONDS, "
        "'sweep': s.CELERY_BEAT_SCHEDULE['sweep-runs']['schedule']}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**env, "DJANGO_SETTINGS_MODULE": "agentsite.settings"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_default_lease_and_sweep_interval_bring_a_dead_workers_run_back_within_30_seconds():
    defaults = default_settings()
    # The worst case: the worker dies just after renewing its lease; the lease runs out, then the
    # next sweep hands the run out. A few seconds are left for the dispatch and the claim.
    assert defaults["lease"] + defaults["sweep"] <= PICKED_UP_WITHIN - 5, defaults


def test_kill_9_mid_model_call_with_default_settings_another_worker_continues_the_run(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    """Default lease and sweep interval (no test overrides): SIGKILL during a model call."""
    defaults = default_settings()
    # 2 s per model answer: the kill lands in the middle of the second request.
    model = script(*[{"tool_calls": [slow(i, call_id=f"d{i}", seconds=0.1)]} for i in (1, 2)],
                   {"content": "continued after the kill"}, latency=2.0)
    default_env = {"RUN_LEASE_SECONDS": None, "SWEEP_INTERVAL_SECONDS": None}
    first = celery_worker_proc(env=default_env)
    run = run_create(agent=durable_agent, task="two slow answers", overrides={"models": [model]})
    run_dispatch(run_id=run.pk)
    wait_for(lambda: Step.objects.filter(run=run).count() >= 1, message="the first committed step")
    first.kill()
    killed_at = timezone.now()
    lease_at_kill = Run.objects.get(pk=run.pk).lease_expires_at
    # What the dead worker left: a lease that runs out at most one default lease from now.
    assert (lease_at_kill - killed_at).total_seconds() <= defaults["lease"], (lease_at_kill, killed_at)

    celery_worker_proc(env=default_env)
    # Beat's sweep at its default interval, until the run is handed out again.
    missed = []  # sweeps that started after the lease ran out and still left the run alone
    handed_out = False
    deadline = time.monotonic() + 90
    while not handed_out and time.monotonic() < deadline:
        started = timezone.now()
        handed_out = run.pk in runs_sweep()["redispatched"]
        if not handed_out and started > lease_at_kill:
            missed.append(started)
        if not handed_out:
            time.sleep(defaults["sweep"])
    assert handed_out, "the sweep never handed the run out again"
    # The first sweep after the dead worker's lease ran out handed the run to the other worker.
    assert missed == [], f"sweeps after the lease ran out ({lease_at_kill}) left the run stranded: {missed}"

    done = wait_for_run(run.pk, *FINISHED, timeout=90)
    assert (done.status, done.answer, done.takeovers) == (Run.Status.SUCCEEDED, "continued after the kill", 1)
    assert_consistent_history(done)


def test_a_model_three_times_slower_than_the_lease_keeps_its_one_driver(
    celery_worker_proc, durable_agent, script, tool_log, wait_for, wait_for_run
):
    """Shortened lease (3 s), model answers after 9 s, a second idle worker, and the sweep running
    all along: the waiting driver's lease is renewed, so nobody takes the run over."""
    lease = celery_worker_proc.lease_seconds
    model = script({"tool_calls": [slow(1, call_id="s1", seconds=0.1)]}, {"content": "slow but alone"},
                   latency=3 * lease)
    celery_worker_proc()
    celery_worker_proc()
    run = run_create(agent=durable_agent, task="a very slow model", overrides={"models": [model]})
    run_dispatch(run_id=run.pk)
    wait_for(lambda: Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists(), message="the run to start")
    redispatched = []
    deadline = time.monotonic() + 90
    while not Run.objects.filter(pk=run.pk, status__in=FINISHED).exists() and time.monotonic() < deadline:
        redispatched += [r for r in runs_sweep()["redispatched"] if r == run.pk]
        time.sleep(0.5)
    done = wait_for_run(run.pk, *FINISHED)
    assert (done.status, done.answer, done.takeovers) == (Run.Status.SUCCEEDED, "slow but alone", 0)
    assert redispatched == [], "the sweep took the slow model's run for a dead worker's"
    assert len(script.requests(model)) == 2, "a second driver asked the model again"
    assert_consistent_history(done)
