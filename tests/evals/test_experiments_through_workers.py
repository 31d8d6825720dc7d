"""Experiments through real Celery workers and the demo model: a dataset made from a real run, a
draft that requests cancel_order and cancels nothing (the shop's orders counted before and after),
a judge's verdict from a scripted judge model, and an experiment that outlives a killed worker."""
import time

from django.utils import timezone

from evals.datasets import case_add, dataset_create
from evals.experiments import experiment_start
from evals.models import Experiment
from evals.prefill import case_from_run
from runs.engine.dispatch import run_dispatch
from runs.lifecycle.agents import agent_draft_save
from runs.lifecycle.housekeeping import runs_sweep
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, Run, ToolCall
from tests.conftest import describe_run
from toolsapp.models import Order

WEATHER = "What's the weather in Lagos and London?"


def orders() -> list[tuple]:
    return list(Order.objects.order_by("order_id").values_list("order_id", "status", "cancel_idempotency_key"))


def wait_finished(experiment, wait_for, timeout=90):
    return wait_for(lambda: Experiment.objects.filter(pk=experiment.pk).exclude(status="running").first(),
                    timeout=timeout, message=lambda: f"experiment {experiment.pk} to finish: "
                    + str(Experiment.objects.filter(pk=experiment.pk).values("cases_done", "cases_total").first()))


def test_a_draft_that_cancels_orders_cancels_none_and_a_judge_gives_its_verdict(
        celery_worker_proc, demo_data, script, wait_for, wait_for_run):
    judge = script({"content": '```json\n{"verdict": "pass", "reason": "It gives the weather of both cities."}\n```'})
    celery_worker_proc(env={"EVAL_JUDGE_MODEL": judge})
    agent = Agent.objects.get(name="demo")
    source = run_create(agent=agent, task="Cancel order ORD-1001", customer="acme", approval_policy="approve")
    run_dispatch(run_id=source.pk)
    source = wait_for_run(source.pk, "succeeded")
    assert Order.objects.get(order_id="ORD-1001").status == "cancelled"  # the real run did cancel it

    dataset = dataset_create(name="orders and weather")
    from_run = case_add(dataset=dataset, data=case_from_run(source))
    case_add(dataset=dataset, data={"task": "Cancel order ORD-1003", "customer": "acme", "expectations": [
        {"kind": "no_destructive_call"}]})
    case_add(dataset=dataset, data={"task": WEATHER, "expectations": [
        {"kind": "judge", "rubric": "The answer gives the weather of Lagos and of London."}]})
    agent_draft_save(agent=agent, data={"system_prompt": "Act on every request at once."})
    before = orders()
    cancelled_before = Order.objects.filter(status="cancelled").count()

    experiment = wait_finished(experiment_start(dataset=dataset, agent=agent, draft=True), wait_for)

    assert orders() == before and Order.objects.filter(status="cancelled").count() == cancelled_before == 1
    assert (experiment.status, experiment.cases_done, experiment.cases_passed) == ("finished", 3, 2)
    results = {r.case_name: r for r in experiment.results.all()}
    cancels = ToolCall.objects.filter(run__case_result__experiment=experiment, tool_name="cancel_order")
    assert cancels.count() == 2 and {c.status for c in cancels} == {ToolCall.Status.SIMULATED}
    replayed = cancels.get(run=results[from_run.name].run)
    assert replayed.simulation["answered_from"]["run"] == source.pk
    assert results[from_run.name].passed, results[from_run.name].checks
    unseen = results["Cancel order ORD-1003"]
    assert unseen.passed is False and unseen.checks[0]["seen"] == "requested: cancel_order"
    assert "not executed" in cancels.get(run=unseen.run).result["error"]
    verdict = results[WEATHER].checks[0]
    assert verdict["ok"] and verdict["opinion"] and verdict["judge"]["reason"] == "It gives the weather of both cities."
    assert verdict["judge"]["model"] == judge
    assert not Approval.objects.filter(run__experiment=True).exists()
    assert not Run.production.filter(case_result__experiment=experiment).exists()


def test_an_experiment_outlives_a_killed_worker(celery_worker_proc, demo_data, script, wait_for):
    # The three cases share the script: a request the killed worker made and the next worker makes
    # again takes an entry too, so there are more than 3 cases x 2 requests (6 ran out under load).
    slow = script(*[{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}}]}] * 24, latency=0.7)
    first = celery_worker_proc()
    dataset = dataset_create(name="slow")
    for n in range(3):
        case_add(dataset=dataset, data={"task": f"slow case {n}", "expectations": [
            {"kind": "tool_called", "tool": "get_weather"}]})
    experiment = experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo"), overrides={"models": [slow]})
    wait_for(lambda: ToolCall.objects.filter(run__case_result__experiment=experiment).exists(), message="a first call")
    first.kill()
    time.sleep(0.5)  # let the database finish rolling back the dead connection
    assert Experiment.objects.get(pk=experiment.pk).status == "running"

    second = celery_worker_proc(wait=False)
    runs = Run.objects.filter(case_result__experiment=experiment)
    wait_for(lambda: not runs.filter(status__in=Run.ACTIVE_STATUSES, lease_expires_at__gt=timezone.now()).exists(),
             timeout=60, message="the dead worker's leases to run out")
    runs_sweep()
    second.wait_ready()
    experiment = wait_finished(experiment, wait_for, timeout=120)
    assert (experiment.status, experiment.cases_done, experiment.cases_total) == ("finished", 3, 3)
    assert experiment.cases_passed == 3


def test_a_case_whose_run_ends_with_a_summary_is_scored_on_the_summary(celery_worker_proc, demo_data, script, wait_for):
    # Each answer takes a while, so the case's scoring comes while the summary is still asked for.
    again = {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Lagos"}}]}
    model = script(*[again] * 3, {"content": "Summary: I asked for the weather in Lagos three times."}, latency=1.0)
    celery_worker_proc()
    dataset = dataset_create(name="repeats")
    case_add(dataset=dataset, data={"task": "the weather, again and again", "expectations": [
        {"kind": "stop_reason", "in": ["repeated_call"]}, {"kind": "answer_contains", "text": "three times"}]})
    agent = Agent.objects.get(name="demo")
    assert agent.summarize_on_stop
    experiment = wait_finished(experiment_start(dataset=dataset, agent=agent, overrides={"models": [model]}), wait_for)
    result = experiment.results.get()
    assert result.run.answer == "Summary: I asked for the weather in Lagos three times.", describe_run(result.run_id)
    assert result.passed, result.checks
