"""The metrics page against a small hand-made dataset whose numbers are known."""
from datetime import UTC, date, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import Agent, Approval, Run, Step, ToolCall
from runs.observability.metrics.page import metrics_summary, nearest_rank_offset
from tests.lifecycle.test_history import user_in

pytestmark = pytest.mark.django_db

START, END = date(2026, 3, 1), date(2026, 3, 7)
MIDNIGHT = datetime(2026, 3, 1, tzinfo=UTC)  # the period's first instant


def at(day: int, hour: int = 12, second: int = 0) -> datetime:
    return datetime(2026, 3, day, hour, 0, second, tzinfo=UTC)


def run(agent, *, status=Run.Status.SUCCEEDED, stop_reason=Run.StopReason.FINAL_ANSWER, iterations=1, created=None,
        tokens=(0, 0), cost=0.0):
    r = Run.objects.create(agent=agent, task="t", status=status, stop_reason=stop_reason, iterations=iterations,
                           tokens_in=tokens[0], tokens_out=tokens[1], cost_usd=cost)
    Run.objects.filter(pk=r.pk).update(created_at=created or at(2))
    return r


def step(r, model, latency, created=None):
    index = Step.objects.filter(run=r).count() + 1
    s = Step.objects.create(run=r, index=index, iteration=index, model=model, latency_ms=latency,
                            message={"role": "assistant"})
    Step.objects.filter(pk=s.pk).update(created_at=created or at(3))
    return s


def call(r, tool, status):
    s = Step.objects.filter(run=r).first() or step(r, "caller", 1.0)
    index = ToolCall.objects.filter(step=s).count()
    return ToolCall.objects.create(run=r, step=s, index=index, call_id=f"c{index}", tool_name=tool, arguments="{}",
                                   args_hash="h", idempotency_key=f"{r.pk}-{s.pk}-{index}", status=status)


def approval(r, status, wait_seconds=None, *, requested=None, automatic=False):
    requested = requested or at(4)
    a = Approval.objects.create(tool_call=call(r, "needs_approval", ToolCall.Status.PENDING), run=r, status=status,
                                automatic=automatic)
    decided = requested + timedelta(seconds=wait_seconds) if wait_seconds is not None else None
    Approval.objects.filter(pk=a.pk).update(requested_at=requested, decided_at=decided)
    return a


@pytest.fixture
def dataset():
    alpha, beta = Agent.objects.create(name="alpha"), Agent.objects.create(name="beta")
    statuses = [Run.Status.SUCCEEDED] * 7 + [Run.Status.FAILED, Run.Status.FAILED, Run.Status.CANCELLED]
    reasons = [Run.StopReason.FINAL_ANSWER] * 7 + [
        Run.StopReason.ITERATION_LIMIT, Run.StopReason.MODEL_ERROR, Run.StopReason.CANCELLED]
    alpha_runs = [run(alpha, status=s, stop_reason=sr, iterations=i)
                  for i, (s, sr) in enumerate(zip(statuses, reasons), start=1)]
    run(alpha, status=Run.Status.RUNNING, stop_reason="", iterations=50)  # still going: no success or iteration figure
    beta_runs = [run(beta, status=Run.Status.FAILED, stop_reason=Run.StopReason.ITERATION_LIMIT, iterations=20)
                 for _ in range(2)]
    outside = run(alpha, iterations=99, created=MIDNIGHT - timedelta(seconds=1), tokens=(7777, 0), cost=9.0)

    # Tokens and cost by day of creation.
    Run.objects.filter(pk=alpha_runs[0].pk).update(created_at=at(1, 0), tokens_in=100, tokens_out=50, cost_usd=0.5)
    Run.objects.filter(pk=alpha_runs[1].pk).update(created_at=at(1, 23), tokens_in=10, tokens_out=5, cost_usd=0.25)
    Run.objects.filter(pk=beta_runs[0].pk).update(created_at=at(7, 23), tokens_in=1000, cost_usd=1.0)

    # Model latency: "fast" 1..20 ms over alpha's runs, "slow" 100/300/200, beta's own 50.
    for latency in range(1, 21):
        step(alpha_runs[latency % 10], "fast", float(latency))
    for latency in (100.0, 300.0, 200.0):
        step(alpha_runs[0], "slow", latency)
    step(beta_runs[0], "slow", 50.0)
    step(outside, "fast", 9999.0)  # a run created before the period: its steps are not counted
    late = run(alpha, created=MIDNIGHT + timedelta(days=7))  # the first instant after the period
    step(late, "fast", 9999.0)

    # Tool calls of runs created in the period.
    for status in [ToolCall.Status.SUCCEEDED] * 8 + [ToolCall.Status.FAILED, ToolCall.Status.SKIPPED]:
        call(alpha_runs[2], "get_weather", status)
    for status in [ToolCall.Status.SUCCEEDED, ToolCall.Status.REJECTED, ToolCall.Status.FAILED, ToolCall.Status.FAILED,
                   ToolCall.Status.PENDING]:
        call(alpha_runs[3], "cancel_order", status)
    for _ in range(5):
        call(outside, "get_weather", ToolCall.Status.FAILED)

    # Approvals: people waited 10, 20, 30, 40 (approved) and 100 s (rejected).
    for wait in (40, 10, 30, 20):
        approval(alpha_runs[4], Approval.Status.APPROVED, wait)
    approval(alpha_runs[5], Approval.Status.REJECTED, 100)
    approval(alpha_runs[5], Approval.Status.APPROVED, 0, automatic=True)
    approval(alpha_runs[6], Approval.Status.EXPIRED, 3600)
    approval(alpha_runs[6], Approval.Status.PENDING)
    approval(beta_runs[1], Approval.Status.REJECTED, 7)
    approval(outside, Approval.Status.APPROVED, 5000, requested=MIDNIGHT - timedelta(seconds=1))
    return alpha, beta


def test_nearest_rank_offsets():
    assert [nearest_rank_offset(10, p) for p in (50, 95)] == [4, 9]
    assert [nearest_rank_offset(3, p) for p in (50, 95)] == [1, 2]
    assert [nearest_rank_offset(1, p) for p in (50, 95)] == [0, 0]
    assert nearest_rank_offset(20, 95) == 18


def test_runs_success_rate_and_iterations(dataset):
    m = metrics_summary(start=START, end=END)
    assert m.runs_total == 13
    assert {r.value: r.count for r in m.by_status} == {
        Run.Status.SUCCEEDED: 7, Run.Status.FAILED: 4, Run.Status.CANCELLED: 1, Run.Status.RUNNING: 1}
    assert {r.value: r.count for r in m.by_stop_reason} == {
        Run.StopReason.FINAL_ANSWER: 7, Run.StopReason.ITERATION_LIMIT: 3, Run.StopReason.MODEL_ERROR: 1,
        Run.StopReason.CANCELLED: 1, "": 1}
    assert (m.succeeded_runs, m.finished_runs) == (7, 12)
    assert m.success_rate == pytest.approx(7 / 12)
    # Finished runs' iterations: 1..10, 20, 20 -> 6th of 12 and 12th of 12.
    assert (m.iterations.count, m.iterations.p50, m.iterations.p95) == (12, 6, 20)


def test_one_agent(dataset):
    alpha, beta = dataset
    m = metrics_summary(start=START, end=END, agent=alpha)
    assert m.success_rate == pytest.approx(0.7)
    assert (m.iterations.count, m.iterations.p50, m.iterations.p95) == (10, 5, 10)
    b = metrics_summary(start=START, end=END, agent=beta)
    assert (b.success_rate, b.iterations.p50) == (0.0, 20)
    assert [(r.model, r.steps, r.p50_ms, r.p95_ms) for r in b.model_latency] == [
        ("caller", 1, 1.0, 1.0),  # the step holding the approval's call
        ("slow", 1, 50.0, 50.0),
    ]
    assert b.tool_errors == []
    assert (b.approvals.rejected, b.approvals.approved, b.approvals.wait_seconds.p50) == (1, 0, 7.0)


def test_model_latency_percentiles(dataset):
    alpha, _ = dataset
    m = metrics_summary(start=START, end=END, agent=alpha)
    rows = {r.model: (r.steps, r.p50_ms, r.p95_ms) for r in m.model_latency}
    assert rows["fast"] == (20, 10.0, 19.0)
    assert rows["slow"] == (3, 200.0, 300.0)
    everyone = {r.model: (r.steps, r.p50_ms, r.p95_ms) for r in metrics_summary(start=START, end=END).model_latency}
    assert everyone["slow"] == (4, 100.0, 300.0)  # 50, 100, 200, 300


def test_tool_error_rate(dataset):
    m = metrics_summary(start=START, end=END)
    rows = {r.tool: r for r in m.tool_errors}
    assert set(rows) == {"get_weather", "cancel_order"}  # never-finished calls give no row
    weather, cancel = rows["get_weather"], rows["cancel_order"]
    assert (weather.finished, weather.failed, weather.rejected) == (9, 1, 0)
    assert weather.error_rate == pytest.approx(1 / 9)
    assert (cancel.finished, cancel.failed, cancel.rejected) == (4, 2, 1)
    assert cancel.error_rate == pytest.approx(0.75)
    assert [r.tool for r in m.tool_errors] == ["cancel_order", "get_weather"]  # worst first


def test_approval_counts_and_wait_percentiles(dataset):
    alpha, _ = dataset
    a = metrics_summary(start=START, end=END, agent=alpha).approvals
    assert (a.approved, a.rejected, a.expired, a.pending) == (5, 1, 1, 1)
    # People's decisions only (the automatic one is left out): 10, 20, 30, 40, 100 s.
    assert (a.wait_seconds.count, a.wait_seconds.p50, a.wait_seconds.p95) == (5, 30.0, 100.0)


@pytest.mark.parametrize("rollups", [False, True])
def test_a_decision_stamped_before_its_request_waits_0_on_the_page_never_less(client, rollups):
    """A person's decision stamped by a web host whose clock runs 5 s behind the worker's that asked
    (or a rule's decision recorded before #46): the page's waits count it as 0 s."""
    agent = Agent.objects.create(name="alpha")
    r = run(agent)
    approval(r, Approval.Status.APPROVED, -5)
    approval(r, Approval.Status.REJECTED, 10)
    m = metrics_summary(start=START, end=END, agent=agent, rollups=rollups)
    assert (m.approvals.wait_seconds.count, m.approvals.wait_seconds.p50, m.approvals.wait_seconds.p95) == (2, 0.0, 10.0)
    assert (m.supervision.person_wait_p50, m.supervision.person_wait_p90) == (0.0, 10.0)
    assert [w.p50 for w in m.supervision.wait_by_tool] == [0.0]

    client.force_login(user_in("viewers", "vera"))
    html = client.get(reverse("metrics"), {"date_from": "2026-03-01", "date_to": "2026-03-07",
                                           "agent": agent.pk}).content.decode()
    assert 'data-p50="0.0"' in html and 'data-p50="-' not in html


def test_tokens_and_cost_per_day(dataset):
    days = metrics_summary(start=START, end=END).per_day
    assert [d.day for d in days] == [START + timedelta(days=i) for i in range(7)]
    by_day = {d.day.day: (d.runs, d.tokens, round(d.cost_usd, 6)) for d in days}
    assert by_day[1] == (2, 165, 0.75)
    assert by_day[7] == (1, 1000, 1.0)
    assert by_day[2] == (10, 0, 0.0)
    assert by_day[3] == by_day[4] == (0, 0, 0.0)


def test_page_shows_the_numbers_and_charts(client, dataset):
    alpha, _ = dataset
    client.force_login(user_in("viewers", "vera"))
    response = client.get(reverse("metrics"), {"date_from": "2026-03-01", "date_to": "2026-03-07", "agent": alpha.pk})
    assert response.status_code == 200
    html = response.content.decode()
    for selector in ("metrics-filters", "metric-success-rate", "chart-status", "chart-stop-reason",
                     "chart-tokens-per-day", "table-model-latency", "table-tool-errors", "approval-wait"):
        assert f'id="{selector}"' in html, selector
    assert "70.0%" in html
    assert 'class="bar-row"' in html and 'class="bar" style="width: 100.0%"' in html
    assert 'data-model="fast"' in html and 'data-p95="19.0"' in html
    assert 'data-tool="cancel_order" data-error-rate="0.750000"' in html
    assert 'data-day="2026-03-01" data-tokens="165"' in html
    assert 'data-p50="30.0"' in html and 'data-approved="5"' in html
    assert 'src="http' not in html and "chart.js" not in html.lower()  # CSS bars, no library


def test_default_period_is_the_last_seven_days(client):
    agent = Agent.objects.create(name="alpha")
    today = run(agent, created=timezone.now())
    run(agent, created=timezone.now() - timedelta(days=8))
    client.force_login(user_in("viewers", "vera"))
    m = client.get(reverse("metrics")).context["m"]
    assert (m.end - m.start).days == 6 and m.end == timezone.localdate()
    assert m.runs_total == 1 and today.pk


@pytest.mark.parametrize("params, field", [
    ({"date_from": "2026-03-08", "date_to": "2026-03-01"}, "date_to"),
    ({"date_from": "soon"}, "date_from"),
    ({"agent": "12345678"}, "agent"),
    ({"date_from": "2020-01-01", "date_to": "2026-01-01"}, "date_from"),
])
def test_bad_filters_are_form_errors(client, params, field):
    client.force_login(user_in("viewers", "vera"))
    response = client.get(reverse("metrics"), params)
    assert response.status_code == 200
    assert field in response.context["form"].errors and response.context["m"] is None
    assert 'class="errorlist' in response.content.decode()


def test_metrics_needs_permission(client):
    assert client.get(reverse("metrics")).status_code == 302
    client.force_login(user_in(None, "nobody"))
    assert client.get(reverse("metrics")).status_code == 403
