"""/metrics as Prometheus reads it: scripted runs over the demo model, then a scrape through the
Django client parsed by prometheus-client's own parser. Who may scrape (token, networks), and
figures of a run that a real Celery worker process drove, read by this (web) process."""
from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from runs.engine.dispatch import run_dispatch
from runs.engine.leases import lease_claim
from runs.engine.loop import run_advance
from runs.lifecycle import forks
from runs.lifecycle.runs import run_create
from runs.models import Agent, Approval, ApprovalRule, Run, Step
from runs.supervision.approvals.decide import approval_decide
from tests.engine.loop_contract.support import call, calls
from tests.support.approval_fixtures import pending_approval
from tests.support.worker_tools import SLOW

TOKEN = "scrape-me-7f3a"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_ALLOWED_NETWORKS = []


def scrape(client, **headers) -> dict[tuple, float]:
    """{(sample name, frozenset of labels): value} of one authorised scrape."""
    response = client.get("/metrics", **(headers or AUTH))
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples, name, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0)


def matching(samples, name, **labels) -> dict[frozenset, float]:
    wanted = set(labels.items())
    return {key: v for (n, key), v in samples.items() if n == name and wanted <= key}


def cancel(order_id, call_id):
    return calls(call("cancel_order", {"order_id": order_id, "reason": "asked"}, call_id))


@pytest.fixture
def scripted(launch, script, no_dispatch, alice):
    """Five runs of the demo agent whose figures are known."""
    ApprovalRule.objects.create(name="desk", action="approve", position=10,
                                conditions=[{"path": "$.order_id", "op": "eq", "value": "ORD-1001"}])
    weather = script(calls(call("get_weather", {"city": "Lagos"}, "w1"), call("get_weather", {"city": "London"}, "w2"),
                           call("teleport", {"to": "Mars"}, "t1")),
                     {"content": "Lagos 31, London 12."})
    runs = {"weather": launch(models=[weather])}
    runs["rule"] = launch("Cancel ORD-1001", models=[script(cancel("ORD-1001", "c1"), {"content": "Cancelled."})])
    person = launch("Cancel ORD-1003", models=[script(cancel("ORD-1003", "c2"), {"content": "Not cancelled."})])
    approval_decide(approval_id=pending_approval(person).pk, user=alice, approve=False, reason="no")
    run_advance(run_id=person.pk)
    runs["person"] = Run.objects.get(pk=person.pk)
    runs["waiting"] = launch("Cancel ORD-1002", models=[script(cancel("ORD-1002", "c3"))])
    loop = script(*[calls(call("get_weather", {"city": f"City {i}"}, f"l{i}")) for i in range(3)])
    runs["limit"] = launch("Loop", models=[loop], max_iterations=2, summarize_on_stop=False)
    runs["alice"] = alice
    return runs


def test_runs_by_status_and_stop_reason_iterations_and_tokens(client, token, scripted):
    assert [scripted[k].status for k in ("weather", "rule", "person", "waiting", "limit")] == [
        "succeeded", "succeeded", "succeeded", "awaiting_approval", "failed"]
    m = scrape(client)

    assert value(m, "agentsite_runs_started_total", agent="demo") == 5
    assert value(m, "agentsite_runs_ended_total", agent="demo", status="succeeded", stop_reason="final_answer") == 3
    assert value(m, "agentsite_runs_ended_total", agent="demo", status="failed", stop_reason="iteration_limit") == 1
    assert sum(matching(m, "agentsite_runs_ended_total").values()) == 4  # the waiting run has not ended
    assert value(m, "agentsite_run_iterations_total", agent="demo") == 2 + 2 + 2 + 1 + 2

    steps = Step.objects.filter(run=scripted["weather"])
    answered = steps.first().model
    sums = steps.aggregate(i=Sum("tokens_in"), o=Sum("tokens_out"))
    assert sums["i"] > 0 and sums["o"] > 0  # the demo model reports usage
    assert value(m, "agentsite_model_tokens_total", agent="demo", model=answered, direction="input") == sums["i"]
    assert value(m, "agentsite_model_tokens_total", agent="demo", model=answered, direction="output") == sums["o"]
    assert ("agentsite_model_cost_usd_total", frozenset({("agent", "demo"), ("model", answered)})) in m


def test_tool_calls_by_tool_and_status_with_their_latency(client, token, scripted):
    m = scrape(client)

    assert value(m, "agentsite_tool_calls_total", tool="get_weather", status="succeeded") == 2
    assert value(m, "agentsite_tool_calls_total", tool="get_weather", status="failed") == 1  # "City 0"
    assert value(m, "agentsite_tool_calls_total", tool="get_weather", status="skipped") == 1  # the limit
    assert value(m, "agentsite_tool_calls_total", tool="cancel_order", status="succeeded") == 1  # the rule's
    assert value(m, "agentsite_tool_calls_total", tool="cancel_order", status="rejected") == 1  # alice's
    # A tool the model invented is counted, under one label whatever its name.
    assert value(m, "agentsite_tool_calls_total", tool="unregistered", status="failed") == 1
    assert not matching(m, "agentsite_tool_calls_total", tool="teleport")

    executed = matching(m, "agentsite_tool_call_duration_seconds_count", tool="get_weather", status="succeeded")
    assert list(executed.values()) == [2]
    assert value(m, "agentsite_tool_call_duration_seconds_count", tool="get_weather", status="failed") == 1
    assert not matching(m, "agentsite_tool_call_duration_seconds_count", status="skipped")  # never ran
    buckets = matching(m, "agentsite_tool_call_duration_seconds_bucket", tool="get_weather", status="succeeded")
    by_bound = sorted((float(dict(k)["le"]), v) for k, v in buckets.items())
    assert by_bound[-1] == (float("inf"), 2)
    assert [v for _, v in by_bound] == sorted(v for _, v in by_bound)  # cumulative


def test_model_latency_histogram_by_the_model_that_answered(client, token, scripted):
    m = scrape(client)
    for run in (scripted[k] for k in ("weather", "rule", "person", "waiting", "limit")):
        model = Step.objects.filter(run=run).first().model
        steps = Step.objects.filter(model=model).count()
        assert value(m, "agentsite_model_request_duration_seconds_count", model=model) == steps
        assert value(m, "agentsite_model_request_duration_seconds_bucket", model=model, le="+Inf") == steps
        latency = Step.objects.filter(model=model).aggregate(s=Sum("latency_ms"))["s"] / 1000
        assert value(m, "agentsite_model_request_duration_seconds_sum", model=model) == pytest.approx(latency)


def test_approvals_pending_and_decided_by_rule_or_person_with_wait_times(client, token, scripted):
    m = scrape(client)

    assert value(m, "agentsite_approvals_pending") == 1
    assert value(m, "agentsite_approvals_decided_total", outcome="approved", decider="rule") == 1
    assert value(m, "agentsite_approvals_decided_total", outcome="rejected", decider="person") == 1
    assert sum(matching(m, "agentsite_approvals_decided_total").values()) == 2
    assert value(m, "agentsite_approval_wait_seconds_count", decider="person") == 1
    assert value(m, "agentsite_approval_wait_seconds_count", decider="rule") == 1

    # A wait of ten minutes lands between the 300 s and 900 s buckets.
    waiting = pending_approval(scripted["waiting"])
    Approval.objects.filter(pk=waiting.pk).update(
        status=Approval.Status.APPROVED, decided_by_name="alice", decided_at=waiting.requested_at + timedelta(minutes=10))
    m = scrape(client)
    assert value(m, "agentsite_approvals_pending") == 0
    assert value(m, "agentsite_approvals_decided_total", outcome="approved", decider="person") == 1
    assert value(m, "agentsite_approval_wait_seconds_bucket", decider="person", le="300.0") == 1
    assert value(m, "agentsite_approval_wait_seconds_bucket", decider="person", le="900.0") == 2


def test_a_rule_decides_with_a_wait_of_zero_and_no_wait_is_ever_negative(client, token, scripted):
    """A rule decides in the moment the call is asked: its decision's time is its request's (it was
    taken before the INSERT stamped the request, a few milliseconds early). A person's decision
    stamped by a host whose clock runs behind the asking one's counts as a wait of 0, not less."""
    ruled = Approval.objects.get(run=scripted["rule"])
    assert ruled.rule_name == "desk" and ruled.automatic
    assert ruled.decided_at == ruled.requested_at
    m = scrape(client)
    assert value(m, "agentsite_approval_wait_seconds_sum", decider="rule") == 0.0

    person = Approval.objects.get(run=scripted["person"])
    Approval.objects.filter(pk=person.pk).update(decided_at=person.requested_at - timedelta(seconds=5))
    m = scrape(client)
    assert value(m, "agentsite_approval_wait_seconds_sum", decider="person") == 0.0
    assert value(m, "agentsite_approval_wait_seconds_bucket", decider="person", le="5.0") == 1
    assert all(v >= 0 for (name, _labels), v in m.items() if name.startswith("agentsite_approval_wait_seconds"))


def test_no_counter_goes_down_when_runs_are_pruned(client, token, scripted):
    from runs.lifecycle.archive import runs_delete

    before = scrape(client)
    runs_delete(run_ids=[scripted["weather"].pk, scripted["rule"].pk, scripted["person"].pk])
    runs_delete(run_ids=[scripted["limit"].pk])  # a second deletion adds to the first
    assert Run.objects.count() == 1
    after = scrape(client)

    counted = {key: v for key, v in before.items() if not key[0].startswith(("agentsite_approvals_pending",
                                                                              "agentsite_worker_slots_busy"))}
    assert {key: after.get(key) for key in counted} == counted
    assert value(after, "agentsite_runs_ended_total", agent="demo", status="succeeded", stop_reason="final_answer") == 3
    assert value(after, "agentsite_tool_calls_total", tool="unregistered", status="failed") == 1
    assert value(after, "agentsite_approvals_decided_total", outcome="rejected", decider="person") == 1

    # Runs after the pruning add to what was pruned.
    model = Step.objects.filter(run=scripted["waiting"]).first().model
    approval_decide(approval_id=pending_approval(scripted["waiting"]).pk, user=scripted["alice"], approve=True)
    run_advance(run_id=scripted["waiting"].pk)
    later = scrape(client)
    assert value(later, "agentsite_runs_ended_total", agent="demo", status="succeeded", stop_reason="final_answer") == 4
    assert sum(matching(later, "agentsite_tool_calls_total", tool="cancel_order").values()) == 3
    assert value(later, "agentsite_model_request_duration_seconds_count", model=model) == 2


WORK = ("agentsite_run_iterations_total", "agentsite_model_tokens_total", "agentsite_model_cost_usd_total",
        "agentsite_model_request_duration_seconds", "agentsite_tool_calls_total", "agentsite_tool_call_duration_seconds")


def test_a_fork_does_not_count_again_the_work_it_copied_from_its_parent(client, token, scripted, monkeypatch):
    """A fork starts with copies of its parent's model calls, tool calls and iterations up to its
    fork point; its parent counted that work already. Neither the fork nor its pruning moves them."""
    from runs.lifecycle.archive import runs_delete
    from runs.lifecycle.forks import run_fork

    monkeypatch.setattr(forks, "run_dispatch", lambda run_id: None)  # the fork stays queued
    before = scrape(client)
    fork = run_fork(run_id=scripted["weather"].pk, step_index=2, user=scripted["alice"])
    assert (fork.iterations, Step.objects.filter(run=fork).count(), fork.tool_calls.count()) == (2, 2, 3)
    assert fork.tokens_in > 0
    after = scrape(client)
    work = {key: v for key, v in before.items() if key[0].startswith(WORK)}
    assert value(work, "agentsite_run_iterations_total", agent="demo") == 9 and work
    assert {key: after.get(key) for key in work} == work
    assert {key for key in after if key[0].startswith(WORK)} == set(work)  # no new series either

    # What the fork does itself counts: one more iteration, one more model call (as if driven).
    Step.objects.create(run=fork, index=3, iteration=3, model="fork-model", message={}, latency_ms=80.0,
                        tokens_in=5, tokens_out=1, finish_reason="stop")
    Run.objects.filter(pk=fork.pk).update(iterations=3)
    grown = {key: v for key, v in scrape(client).items() if key[0].startswith(WORK)}
    assert value(grown, "agentsite_run_iterations_total", agent="demo") == 10
    assert value(grown, "agentsite_model_tokens_total", agent="demo", model="fork-model", direction="input") == 5
    assert value(grown, "agentsite_model_request_duration_seconds_count", model="fork-model") == 1
    assert {key: grown[key] for key in work if key[0] != "agentsite_run_iterations_total"} == {
        key: v for key, v in work.items() if key[0] != "agentsite_run_iterations_total"}

    runs_delete(run_ids=[fork.pk])  # pruned: what it counted stays, and no more
    assert {key: v for key, v in scrape(client).items() if key[0].startswith(WORK)} == grown


def test_lease_takeovers_are_counted(client, token, demo_data):
    run = run_create(agent=Agent.objects.get(name="demo"), task="t", overrides={})
    assert lease_claim(run.pk, "worker-a")
    Run.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert lease_claim(run.pk, "worker-b")  # worker-a died: its lease ran out
    m = scrape(client)
    assert value(m, "agentsite_lease_takeovers_total", agent="demo") == 1
    assert value(m, "agentsite_worker_slots_busy") == 1  # worker-b holds it now


# --- who may scrape --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_with_no_setting_metrics_do_not_exist(client, settings):
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS = "", []
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 404


@pytest.mark.django_db
def test_the_token_is_required_and_checked(client, token):
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}x").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert client.post("/metrics", **AUTH).status_code == 405


@pytest.mark.django_db
def test_the_network_allowlist_reads_the_address_behind_trusted_proxies_only(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8", "2001:db8::/32"]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="2001:db8::5").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.9").status_code == 403
    # No trusted proxy: a client cannot claim an allowed address.
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.9", HTTP_X_FORWARDED_FOR="10.0.0.1").status_code == 403

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    proxy = {"REMOTE_ADDR": "192.168.1.1"}
    assert client.get("/metrics", **proxy, HTTP_X_FORWARDED_FOR="10.0.0.7").status_code == 200
    # What the client wrote before the proxy's own hop is not trusted.
    assert client.get("/metrics", **proxy, HTTP_X_FORWARDED_FOR="10.0.0.7, 172.16.0.4").status_code == 403
    # Two proxies trusted but one hop in the header: the client wrote it, the connection's counts.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 2}
    assert client.get("/metrics", **proxy, HTTP_X_FORWARDED_FOR="10.0.0.7").status_code == 403
    assert client.get("/metrics", **proxy, HTTP_X_FORWARDED_FOR="10.0.0.7, 172.16.0.4").status_code == 200
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}

    settings.METRICS_TOKEN = TOKEN  # both set: both must pass
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", **AUTH).status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.168.1.9", **AUTH).status_code == 403


# --- several processes -------------------------------------------------------------------------------


@pytest.mark.worker
def test_a_run_a_worker_process_drives_shows_in_this_process_scrape(
    client, token, celery_worker_proc, durable_agent, script, wait_for, wait_for_run
):
    celery_worker_proc()
    model = script({"tool_calls": [{"id": "s1", "name": SLOW, "arguments": {"n": 1, "seconds": 1.5}}]},
                   {"content": "done"})
    run = run_create(agent=durable_agent, task="slow", overrides={"models": [model]})
    run_dispatch(run_id=run.pk)

    wait_for(lambda: value(scrape(client), "agentsite_worker_slots_busy") == 1, timeout=60,
             message="the worker's run to show as busy")
    done = wait_for_run(run.pk, Run.Status.SUCCEEDED)
    m = scrape(client)
    assert value(m, "agentsite_worker_slots_busy") == 0
    agent = durable_agent.name
    assert value(m, "agentsite_runs_ended_total", agent=agent, status="succeeded", stop_reason="final_answer") == 1
    assert value(m, "agentsite_tool_calls_total", tool=SLOW, status="succeeded") == 1
    assert value(m, "agentsite_run_iterations_total", agent=agent) == done.iterations == 2
