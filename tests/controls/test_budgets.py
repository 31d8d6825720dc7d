"""Budgets that pause a run and ask, driven through the real loop against the scripted model over
HTTP: a started run pauses at the boundary before the request that would pass a budget, a new run
of a spent budget waits queued, a raise or the turn of the period lets them go on, and two runs
starting at once on a budget with one run left start exactly one (SQLite and PostgreSQL)."""
import threading
import time
from datetime import datetime, timedelta

import pytest
from django.core import mail
from django.db import connection
from django.utils import timezone

from runs.controls import budgets
from runs.controls import levers as levers_module
from runs.controls.budget_requests import RaiseRefused, budget_raise, budget_requests
from runs.controls.budget_warnings import budget_notices_send
from runs.controls.levers import LeverRefused, run_resume, run_stop
from runs.engine.loop import run_advance
from runs.lifecycle.housekeeping import runs_sweep
from runs.lifecycle.runs import run_create
from runs.models import Agent, Budget, BudgetHold, BudgetNotice, BudgetRaise, Run, RunEvent, ToolCall, WebhookDelivery
from tests.support.approval_fixtures import make_user
from tests.support.timeline_replay import mismatches
from toolsapp.executors.python import python_handler
from toolsapp.models import Tool


def tool_call(name: str, args: str, call_id: str, tokens: int) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}],
            "usage": {"prompt_tokens": tokens, "completion_tokens": 0}}


def answer(text: str, tokens: int = 10) -> dict:
    return {"content": text, "usage": {"prompt_tokens": tokens, "completion_tokens": 0}}


@pytest.fixture(autouse=True)
def _timeline_equals_rows(demo_data):
    """Every run's timeline (the budget's pauses and holds included), replayed alone, equals its rows."""
    yield
    problems = [problem for run_id in Run.objects.values_list("pk", flat=True) for problem in mismatches(run_id)]
    assert problems == [], "the timeline and the database disagree:\n" + "\n".join(problems[:20])


@pytest.fixture
def dispatched(monkeypatch):
    """No worker here: what a release hands to the workers is recorded; the test drives it."""
    sent = []
    monkeypatch.setattr(levers_module, "run_dispatch", lambda run_id: sent.append(run_id))
    return sent


@pytest.fixture
def people(demo_data):
    return {"ada": make_user("ada", "admins"), "olga": make_user("olga", "operators"),
            "otto": make_user("otto", "operators")}


def new_run(model: str, user=None, **overrides) -> Run:
    overrides = {"models": [model], "summarize_on_stop": False, **overrides}
    return run_create(agent=Agent.objects.get(name="demo"), task="check the weather", user=user, overrides=overrides)


def drive_together(runs: list[Run]) -> None:
    """Drive the runs in threads of their own, let go at the same moment."""
    start = threading.Barrier(len(runs))

    def drive(run_id):
        try:
            start.wait(10)
            run_advance(run_id=run_id)
        finally:
            connection.close()

    threads = [threading.Thread(target=drive, args=(r.pk,)) for r in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a driver did not return"


def levers(run: Run) -> list[tuple]:
    return [(d["lever"], d["by"], d.get("text")) for d in
            RunEvent.objects.filter(run=run, kind="lever").order_by("seq").values_list("data", flat=True)]


def test_a_run_pauses_before_the_request_that_would_pass_a_token_budget_and_a_raise_lets_it_finish(
        script, people, dispatched):
    Budget.objects.create(name="Support", scope="agent", agent=Agent.objects.get(name="demo"), measure="tokens",
                          period="day", limit=1000)
    model = script(tool_call("get_weather", '{"city": "Paris"}', "c1", 1500), answer("Sunny in Paris."))
    run = new_run(model, user=people["olga"])
    run_advance(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED
    assert len(script.requests(model)) == 1  # the second request would pass the budget: not sent
    assert run.paused_by_name == "its budget"
    hold = BudgetHold.objects.get(run=run)
    assert hold.sentence == "Budget reached: Support, 1,000 tokens a day"
    assert levers(run)[-1] == ("paused", "its budget", "Budget reached: Support, 1,000 tokens a day")
    [request] = budget_requests()
    assert (request.run.pk, request.used, request.limit) == (run.pk, 1500.0, 1000.0)

    # A raise below what is used leaves it waiting; one above lets it go on, for this run only.
    with pytest.raises(RaiseRefused, match="above the budget's own, 1,000 tokens"):
        budget_raise(budget_id=hold.budget_id, user=people["ada"], limit=900, until=timezone.now() + timedelta(hours=1))
    assert budget_raise(budget_id=hold.budget_id, user=people["ada"], limit=1200,
                        until=timezone.now() + timedelta(hours=1), run_id=run.pk) == []
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED
    released = budget_raise(budget_id=hold.budget_id, user=people["ada"], limit=5000,
                            until=timezone.now() + timedelta(hours=1), run_id=run.pk)
    assert released == [run.pk] and dispatched == [run.pk]
    assert levers(run)[-1][:2] == ("resume", "ada, who raised its budget")
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    run_advance(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.answer == "Sunny in Paris."
    assert len(script.requests(model)) == 2
    assert not BudgetHold.objects.exists()
    # A new run of the agent waits: the raise was for that run only.
    other_model = script(answer("ok"))
    other = new_run(other_model)
    run_advance(run_id=other.pk)
    other.refresh_from_db()
    assert other.status == Run.Status.QUEUED and script.requests(other_model) == []


def test_a_new_run_of_a_spent_budget_waits_queued_and_starts_when_the_period_turns(script, people, dispatched):
    Budget.objects.create(name="Olga's runs", scope="person", person=people["olga"], measure="runs",
                          period="day", limit=1)
    first = new_run(script(answer("one")), user=people["olga"])
    run_advance(run_id=first.pk)
    assert Run.objects.get(pk=first.pk).status == Run.Status.SUCCEEDED

    model = script(answer("two"))
    second = new_run(model, user=people["olga"])
    run_advance(run_id=second.pk)
    second.refresh_from_db()
    assert second.status == Run.Status.QUEUED and second.started_at is None
    assert script.requests(model) == []
    assert BudgetHold.objects.get(run=second).sentence == "Budget reached: Olga's runs, 1 run a day"
    assert levers(second) == [("held", "its budget", "Budget reached: Olga's runs, 1 run a day")]
    # Somebody else's run is not covered.
    theirs = new_run(script(answer("theirs")), user=people["otto"])
    run_advance(run_id=theirs.pk)
    assert Run.objects.get(pk=theirs.pk).status == Run.Status.SUCCEEDED

    # The sweep does not hand the held run out again while its budget is spent...
    Run.objects.filter(pk=second.pk).update(dispatched_at=timezone.now() - timedelta(hours=1))
    assert second.pk not in runs_sweep()["redispatched"]
    assert dispatched == []
    # ...and lets it go once the period turned: the first run now counts towards yesterday, made
    # a second before today began (whatever the hour the test runs at, a period that started a
    # day early would still count it).
    today = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    Run.objects.filter(pk=first.pk).update(created_at=today - timedelta(seconds=1))
    budgets.budgets_forget()
    assert runs_sweep()["budget_released"] == [second.pk]
    assert dispatched == [second.pk]
    run_advance(run_id=second.pk)
    second.refresh_from_db()
    assert second.status == Run.Status.SUCCEEDED and second.answer == "two"
    assert not BudgetHold.objects.exists()


@pytest.mark.parametrize("clock", ["00:00:00", "00:30:00", "00:59:59", "01:00:00", "12:00:00", "23:59:59"])
def test_a_period_starts_at_the_beginning_of_its_own_day_and_month_at_any_hour(clock):
    now = timezone.make_aware(datetime.fromisoformat(f"2026-03-01T{clock}"))
    assert budgets.period_start(Budget.Period.DAY, now) == timezone.make_aware(datetime(2026, 3, 1))
    assert budgets.period_end(Budget.Period.DAY, now) == timezone.make_aware(datetime(2026, 3, 2))
    assert budgets.period_start(Budget.Period.MONTH, now) == timezone.make_aware(datetime(2026, 3, 1))
    assert budgets.period_end(Budget.Period.MONTH, now) == timezone.make_aware(datetime(2026, 4, 1))


def test_an_operator_stops_a_run_a_budget_paused_with_a_summary_and_nothing_is_lost(script, people, dispatched):
    Budget.objects.create(name="Everything", measure="tokens", period="month", limit=100)
    model = script(tool_call("get_weather", '{"city": "Paris"}', "c1", 500), answer("Paris: sunny, as far as I got."))
    run = new_run(model, user=people["olga"], summarize_on_stop=True)
    run_advance(run_id=run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED

    run_stop(run_id=run.pk, user=people["otto"])
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Run.Status.CANCELLED, Run.StopReason.OPERATOR_STOP)
    assert run.answer == "Paris: sunny, as far as I got."
    assert run.tool_calls.get().status in ToolCall.DONE_STATUSES  # the call made before the pause kept its result
    assert budget_requests() == []


def test_experiments_are_not_counted_and_not_held(script, people):
    Budget.objects.create(name="Everything", measure="runs", period="day", limit=0)
    run = new_run(script(answer("fine")), user=people["olga"])
    Run.objects.filter(pk=run.pk).update(experiment=True, config={**run.config, "experiment": {"source_run": None, "answers": []}})
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.stop_detail
    assert budgets.budgets_used(list(Budget.objects.all())) == {Budget.objects.get().pk: 0.0}


def test_a_budget_warns_once_a_period_at_its_share_by_webhook_and_email(script, people, settings):
    settings.WEBHOOK_URLS = ["http://127.0.0.1:9/hook"]
    settings.APPROVAL_ESCALATION_EMAILS = ["oncall@example.com"]
    budget = Budget.objects.create(name="Support", measure="tokens", period="day", limit=1000, alert_share=0.5)
    run = new_run(script(answer("ok", tokens=400)), user=people["olga"])
    run_advance(run_id=run.pk)
    assert budget_notices_send() == []  # 400 of 1,000: below half

    run = new_run(script(answer("ok", tokens=200)), user=people["olga"])
    run_advance(run_id=run.pk)
    sent = budget_notices_send()
    assert [n.budget_id for n in sent] == [budget.pk]
    assert budget_notices_send() == []  # once a period
    delivery = WebhookDelivery.objects.get(event="budget.warning")
    assert delivery.body["budget"]["text"] == "Support, 1,000 tokens a day: 600 tokens used (60%)"
    [message] = mail.outbox
    assert message.to == ["oncall@example.com"]
    assert message.subject == "[Agentsite] Budget Support, 1,000 tokens a day: 600 tokens used (60%)"
    # The next day is a new period: it warns again.
    BudgetNotice.objects.update(period_start=timezone.now() - timedelta(days=2))
    assert len(budget_notices_send()) == 1


def test_two_runs_starting_at_once_on_a_budget_with_one_run_left_start_exactly_one(script, people, monkeypatch):
    """Each start reads the count slowly (the window a race needs); under the budget's lock the
    second start counts the first, on SQLite and on PostgreSQL."""
    Budget.objects.create(name="One more", measure="runs", period="day", limit=1)
    counted = budgets.budgets_used

    def slowly(*args, **kwargs):
        used = counted(*args, **kwargs)
        time.sleep(0.5)
        return used

    monkeypatch.setattr(budgets, "budgets_used", slowly)
    runs = [new_run(script(answer(f"run {i}")), user=people["olga"]) for i in range(2)]
    drive_together(runs)
    statuses = sorted(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("status", flat=True))
    assert statuses == [Run.Status.QUEUED, Run.Status.SUCCEEDED]
    assert BudgetHold.objects.count() == 1


BOTH_IN_THEIR_TOOL = threading.Barrier(2, timeout=20)


@python_handler("budget_meet")
def _meet(args, ctx):
    BOTH_IN_THEIR_TOOL.wait()  # both runs' first steps (and their tokens) are committed by now
    return {"ok": True}


def test_two_runs_reaching_a_budget_at_once_both_pause_and_new_runs_wait(script, people, dispatched):
    """Neither slips through: at their boundaries both read the committed figures, which hold both."""
    BOTH_IN_THEIR_TOOL.reset()
    meet = Tool.objects.create(name="meet", description="waits for the other run", parameters={"type": "object"},
                               handler="budget_meet")
    Agent.objects.get(name="demo").tools.add(meet)
    Budget.objects.create(name="Shared", measure="tokens", period="day", limit=1000)
    models = [script(tool_call("meet", "{}", "c1", 600), answer("done")) for _ in range(2)]
    runs = [new_run(model, user=people["olga"], tools=["meet"]) for model in models]
    drive_together(runs)
    assert [Run.objects.get(pk=r.pk).status for r in runs] == [Run.Status.PAUSED, Run.Status.PAUSED]
    assert all(len(script.requests(model)) == 1 for model in models)
    # A new run of a spent budget waits queued, before its first request.
    model = script(answer("later"))
    later = new_run(model, user=people["otto"])
    run_advance(run_id=later.pk)
    assert Run.objects.get(pk=later.pk).status == Run.Status.QUEUED and script.requests(model) == []
    assert BudgetHold.objects.count() == 3


def test_a_raise_made_in_another_process_counts_at_once_and_resume_waits_for_one(script, people, dispatched):
    """This process has the budget cached as it was (2 s); the raise arrives without telling it,
    as a raise made in the web server reaches a worker. The released run must not pause again."""
    budget = Budget.objects.create(name="Support", measure="tokens", period="day", limit=1000)
    model = script(tool_call("get_weather", '{"city": "Lagos"}', "c1", 1500), answer("Sunny in Lagos."))
    run = new_run(model, user=people["olga"])
    run_advance(run_id=run.pk)
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED

    # Resume is refused while the budget is reached: it would only pause again.
    with pytest.raises(LeverRefused, match="Budget reached: Support, 1,000 tokens a day: an administrator raises"):
        run_resume(run_id=run.pk, user=people["otto"])
    assert Run.objects.get(pk=run.pk).status == Run.Status.PAUSED

    BudgetRaise.objects.bulk_create([BudgetRaise(budget=budget, limit=5000, until=timezone.now() + timedelta(hours=1),
                                                 by_name="ada")])  # no signal: this process is not told
    run_resume(run_id=run.pk, user=people["otto"])  # allowed now
    run_advance(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.answer == "Sunny in Lagos."
    assert [lever for lever, _, _ in levers(run)] == ["paused", "resume"]
