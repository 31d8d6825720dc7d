"""An experiment runs a dataset's cases through the real loop and changes nothing real: a call
that would change something is answered from the case's source run when it is the same call, and
otherwise told it was not executed; every requested call is checked all the same."""
from evals.datasets import case_add, dataset_create
from evals.experiments import experiment_start
from evals.prefill import case_from_run
from runs.lifecycle.agents import agent_draft_save
from runs.models import Agent, Approval, Run, ToolCall
from toolsapp.models import Order


def test_a_case_from_a_run_replays_its_cancel_without_cancelling_anything(launch, drive, demo_data):
    source = launch("Cancel order ORD-1001", approval_policy="approve")
    assert source.status == "succeeded", source.stop_detail
    assert Order.objects.get(order_id="ORD-1001").status == "cancelled"
    Order.objects.filter(order_id="ORD-1001").update(status="open", cancel_idempotency_key="")
    dataset = dataset_create(name="orders")
    data = case_from_run(source)
    kinds = [e["kind"] for e in data["expectations"]]
    assert kinds[:2] == ["tool_called", "tool_called"] and "destructive_ids_seen" in kinds
    assert {"kind": "tool_called", "tool": "cancel_order",
            "conditions": [{"path": "$.order_id", "op": "eq", "value": "ORD-1001"},
                           {"path": "$.reason", "op": "eq", "value": "Customer asked to cancel"}]} in data["expectations"]
    case = case_add(dataset=dataset, data=data)
    orders_before = list(Order.objects.order_by("order_id").values_list("order_id", "status", "cancel_idempotency_key"))
    experiment = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo")))
    assert list(Order.objects.order_by("order_id").values_list("order_id", "status", "cancel_idempotency_key")) == orders_before
    result = experiment.results.get()
    run = result.run
    assert run.experiment and run.status == "succeeded", run.stop_detail
    cancel = ToolCall.objects.get(run=run, tool_name="cancel_order")
    assert cancel.status == ToolCall.Status.SIMULATED
    source_cancel = ToolCall.objects.get(run=source, tool_name="cancel_order")
    assert cancel.simulation == {"answered_from": {"run": source.pk, "call_id": source_cancel.call_id}}
    assert cancel.result == source_cancel.result
    assert cancel.result_text == source_cancel.result_text  # what the model read, to the byte
    assert ToolCall.objects.get(run=run, tool_name="lookup_order").status == ToolCall.Status.SUCCEEDED
    assert not Approval.objects.filter(run=run).exists()
    assert result.passed, [(c["label"], c["seen"]) for c in result.checks if not c["ok"]]
    assert experiment.status == "finished" and (experiment.cases_done, experiment.cases_passed) == (1, 1)
    assert result.simulated[0]["tool"] == "cancel_order" and result.simulated[0]["answered_from"]["run"] == source.pk
    assert "approved automatically" not in result.simulated[0]["would_be"]  # no rule: a person decides
    assert case.pk == result.case_id


def test_a_draft_that_cancels_an_unseen_order_cancels_nothing_and_fails_its_checks(launch, drive, demo_data):
    agent = Agent.objects.get(name="demo")
    agent_draft_save(agent=agent, data={"system_prompt": "Cancel whatever is asked."})
    dataset = dataset_create(name="no-cancels")
    case_add(dataset=dataset, data={
        "task": "Cancel order ORD-1003", "customer": "acme", "expectations": [
            {"kind": "tool_not_called", "tool": "cancel_order"}, {"kind": "stop_reason", "in": ["final_answer"]},
        ]})
    open_before = Order.objects.filter(status="open").count()
    experiment = drive(experiment_start(dataset=dataset, agent=agent, draft=True))
    assert Order.objects.filter(status="open").count() == open_before
    assert Order.objects.get(order_id="ORD-1003").status == "open"
    result = experiment.results.get()
    assert experiment.draft and experiment.label.startswith("draft v")
    call = ToolCall.objects.get(run=result.run, tool_name="cancel_order")
    assert call.status == ToolCall.Status.SIMULATED and call.simulation == {"answered_from": None}
    assert "not executed" in call.result["error"]
    assert result.passed is False
    assert [c["ok"] for c in result.checks] == [False, True]
    assert result.checks[0]["seen"] == "1 call of cancel_order"
    assert not Run.production.filter(pk=result.run_id).exists()


def test_the_runs_api_says_which_version_a_run_ran_and_whether_it_was_an_experiment(launch, drive, demo_data):
    from tests.support.approval_fixtures import make_user
    from tests.web.api.test_api import api

    source = launch("What's the weather in Lagos and London?")
    dataset = dataset_create(name="api")
    case_add(dataset=dataset, data=case_from_run(source))
    agent = Agent.objects.get(name="demo")
    experiment = drive(experiment_start(dataset=dataset, agent=agent))
    client = api(make_user("vic", "viewers"))
    real = client.get(f"/api/v1/runs/{source.pk}/").json()
    simulated = client.get(f"/api/v1/runs/{experiment.results.get().run_id}/").json()
    assert (real["experiment"], real["agent_version"]) == (False, agent.version or None)
    assert (simulated["experiment"], simulated["agent_version"]) == (True, experiment.agent_version)


def test_a_case_from_a_later_step_starts_from_the_runs_conversation_before_it(launch, drive, demo_data, script):
    source = launch("What's the weather in Lagos and London?")
    data = case_from_run(source, step=2, with_conversation=True)
    assert [m["role"] for m in data["messages"]] == ["assistant", "tool", "tool"]
    assert not any(e["kind"] == "tool_called" for e in data["expectations"])  # step 2 called nothing
    dataset = dataset_create(name="from step 2")
    case_add(dataset=dataset, data=data)
    experiment = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo")))
    result = experiment.results.get()
    assert result.passed, result.checks
    assert result.run.iterations == 1 and not ToolCall.objects.filter(run=result.run).exists()
    assert "Lagos" in result.run.answer and "London" in result.run.answer


def test_a_conversation_a_model_would_refuse_is_refused_when_the_case_is_written(demo_data):
    from evals.datasets import CaseInvalid

    dataset = dataset_create(name="talks")
    orphan = [{"role": "tool", "tool_call_id": "x1", "content": "{}"}]
    try:
        case_add(dataset=dataset, data={"task": "t", "messages": orphan})
    except CaseInvalid as invalid:
        assert invalid.errors == {"messages": [
            "Message 1: a tool result answers no call of the assistant message before it ('x1')."]}
    else:
        raise AssertionError("a tool result without its call was accepted")
    answered = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "x1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x1", "content": "{}"}, {"role": "user", "content": "and now?"}]
    assert case_add(dataset=dataset, data={"task": "t", "messages": answered}).messages == answered


def test_calls_a_crash_left_open_in_an_experiment_are_settled_without_asking_anyone(demo_data):
    from django.utils import timezone

    from runs.engine.loop import run_advance
    from runs.lifecycle.experiment_runs import CaseRun, experiment_runs_create, version_config
    from runs.models import Step
    from toolsapp.models import Tool

    Tool.objects.filter(name="create_ticket").update(in_experiments="real", idempotent=False)
    agent = Agent.objects.get(name="demo")
    config, _ = version_config(agent=agent, settings={"tools": ["cancel_order", "create_ticket", "lookup_order"]},
                               overrides={})
    run = experiment_runs_create(agent=agent, config=config, version=None,
                                 cases=[CaseRun("Cancel order ORD-1003", "acme", [], None, [])])[0]
    calls = [{"id": "c1", "type": "function", "function": {"name": "cancel_order", "arguments": '{"order_id": "ORD-1003", "reason": "r"}'}},
             {"id": "c2", "type": "function", "function": {"name": "create_ticket", "arguments": '{"title": "t"}'}}]
    step = Step.objects.create(run=run, index=1, iteration=1, model="demo",
                               message={"role": "assistant", "content": None, "tool_calls": calls})
    ToolCall.objects.create(run=run, step=step, index=0, call_id="c1", tool_name="cancel_order",
                            arguments=calls[0]["function"]["arguments"], args_hash="h1", idempotency_key="k1")
    ToolCall.objects.create(run=run, step=step, index=1, call_id="c2", tool_name="create_ticket", arguments='{"title": "t"}',
                            args_hash="h2", idempotency_key="k2", status=ToolCall.Status.STARTED, started_at=timezone.now())
    Run.objects.filter(pk=run.pk).update(iterations=1, status=Run.Status.RUNNING)
    run_advance(run_id=run.pk)
    settled = {c.call_id: c for c in ToolCall.objects.filter(run=run, step=step)}
    assert settled["c1"].status == ToolCall.Status.SIMULATED and "not executed" in settled["c1"].result["error"]
    assert settled["c2"].status == ToolCall.Status.UNKNOWN and "asks no one" in settled["c2"].error
    assert not Approval.objects.filter(run=run).exists()
    assert Order.objects.get(order_id="ORD-1003").status == "open"
    assert Run.objects.get(pk=run.pk).is_finished


def test_an_experiments_runs_count_nowhere_in_metrics_even_when_pruned(launch, drive, demo_data):
    from runs.observability.prometheus.counters import figures_of_runs
    from runs.observability.prometheus.pruned_totals import PRUNED_FAMILIES

    source = launch("What's the weather in Lagos and London?")
    dataset = dataset_create(name="pruned")
    case_add(dataset=dataset, data=case_from_run(source))
    experiment = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo")))
    ids = [experiment.results.get().run_id]
    assert all(not figures_of_runs(family, run_ids=ids) for family in PRUNED_FAMILIES)
    assert any(figures_of_runs(family, run_ids=[source.pk]) for family in PRUNED_FAMILIES)


def test_a_case_keeps_its_source_runs_answers_and_an_experiment_its_checks(launch, drive, demo_data):
    source = launch("Cancel order ORD-1001", approval_policy="approve")
    recorded = ToolCall.objects.get(run=source, tool_name="cancel_order")
    dataset = dataset_create(name="kept")
    case = case_add(dataset=dataset, data=case_from_run(source))
    assert [a["tool"] for a in case.answers] == ["lookup_order", "cancel_order"]
    source_id = source.pk
    source.delete()  # pruned after its retention, say
    experiment = experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo"))
    edited = [{"kind": "stop_reason", "in": ["iteration_limit"]}]  # edited after the start
    type(case).objects.filter(pk=case.pk).update(expectations=edited)
    drive(experiment)
    result = experiment.results.get()
    cancel = ToolCall.objects.get(run=result.run, tool_name="cancel_order")
    assert cancel.simulation == {"answered_from": {"run": source_id, "call_id": recorded.call_id}}
    assert cancel.result_text == recorded.result_text
    assert result.passed and len(result.checks) == len(result.expectations) > 1  # the checks as they were


def test_an_answer_nested_too_deep_fails_its_json_check_and_breaks_nothing(drive, demo_data, script):
    deep = script({"content": "[" * 20000 + "]" * 20000})
    dataset = dataset_create(name="deep")
    case_add(dataset=dataset, data={"task": "answer in JSON", "expectations": [
        {"kind": "answer_json", "path": "$.ok", "op": "eq", "value": True}]})
    experiment = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo"),
                                        overrides={"models": [deep]}))
    result = experiment.results.get()
    assert experiment.status == "finished" and result.passed is False
    assert result.checks[0]["seen"] == "the answer is not JSON"


def test_a_cases_copies_mask_sensitive_values_and_still_answer_the_same_call(launch, drive, demo_data):
    from toolsapp.models import Tool

    Tool.objects.filter(name="cancel_order").update(sensitive_fields=["reason"])
    Tool.objects.filter(name="get_weather").update(sensitive_fields=["city"])
    cancel = launch("Cancel order ORD-1001", approval_policy="approve")
    weather = launch("What's the weather in Lagos and London?")
    dataset = dataset_create(name="secrets")
    case = case_add(dataset=dataset, data=case_from_run(cancel))
    recorded = {a["tool"]: a for a in case.answers}
    assert "Customer asked to cancel" not in str(case.answers) and '"reason":"••••"' in recorded["cancel_order"]["arguments"]
    from_step = case_add(dataset=dataset, data=case_from_run(weather, step=2, with_conversation=True))
    assert "Lagos" not in str(from_step.messages[0]["tool_calls"]) and "••••" in str(from_step.messages[0]["tool_calls"])
    assert {"path": "$.reason", "op": "present", "value": None} in next(
        e["conditions"] for e in case.expectations if e.get("tool") == "cancel_order")
    experiment = drive(experiment_start(dataset=dataset, agent=Agent.objects.get(name="demo")))
    replayed = ToolCall.objects.get(run__case_result__case=case, tool_name="cancel_order")
    assert replayed.simulation["answered_from"]["run"] == cancel.pk  # matched by the arguments' keyed hash
    assert experiment.results.get(case=case).passed
