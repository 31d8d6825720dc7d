"""Budgets that pause a run and ask, instead of killing it.

Before each model request a started run asks `reached`: if a cost or token budget that covers it
is used up, it pauses at that boundary (as the pause lever does) with "Budget reached: Billing,
$50 a day", and a hold puts it in the queue. A run about to start asks too, runs budgets
included; if one is spent it waits queued, holding no worker. An administrator raises the budget
(for the run, or for every run until a time), or an operator stops the run with a summary; the
sweep lets held runs go on when the period turns. Nothing is lost and no run dies of a budget.

What a budget counts is what the metrics page counts: production runs (no experiments) created
in the site's day or month (runs/days.py), with their own tokens and cost (runs/models/figures.py);
a runs budget counts such runs that started. A replay of a step against other models
(runs/lifecycle/replay.py) spends too: cost and tokens budgets add what the replays of the runs
they cover spent in the period, and a replay is refused, before any model is asked, when one
of them is reached. A start takes the budgets' rows under a lock
(PostgreSQL `SELECT ... FOR UPDATE`; SQLite's IMMEDIATE write transaction is one writer at a
time) and writes its start in the same transaction, so two runs starting at once are counted one
after the other: a runs budget with one left starts exactly one of them. A started run reads the
committed figures; the cost of the request it is about to make is unknown, so a budget may be
passed by at most the one request each run in flight makes after the last check.

The enabled budgets and active raises are read once every CACHE_SECONDS per process (and at once
after a change in this process): with no budget, a boundary costs no query. A budget that seems
used up is read again before it holds a run, so a raise made elsewhere counts at once.
"""
import logging
import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from operator import or_

from django.db.models import Count, F, Q, Sum
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from runs.days import day_of, day_start
from runs.engine.storage.events import approvals_changed
from runs.models import Agent, Budget, BudgetHold, BudgetRaise, Run, StepReplay
from runs.models.figures import own_cost, own_tokens

log = logging.getLogger("runs.budgets")
CACHE_SECONDS = 2.0
_cache = {"until": 0.0, "budgets": [], "raises": []}
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class Reached:
    budget_id: int
    used: float
    limit: float
    sentence: str


def budgets_forget(**_) -> None:
    """A budget or a raise changed here: the next check reads them again."""
    _cache["until"] = 0.0


post_save.connect(budgets_forget, sender=Budget, dispatch_uid="budgets_forget_saved")
post_delete.connect(budgets_forget, sender=Budget, dispatch_uid="budgets_forget_deleted")
post_save.connect(budgets_forget, sender=BudgetRaise, dispatch_uid="budget_raises_forget_saved")
post_delete.connect(budgets_forget, sender=BudgetRaise, dispatch_uid="budget_raises_forget_deleted")


def _enabled() -> tuple[list[Budget], list[BudgetRaise]]:
    with _cache_lock:
        if time.monotonic() >= _cache["until"]:
            budgets = list(Budget.objects.filter(enabled=True))
            raises = list(BudgetRaise.objects.filter(budget__enabled=True, until__gt=timezone.now())) if budgets else []
            _cache.update(until=time.monotonic() + CACHE_SECONDS, budgets=budgets, raises=raises)
        return _cache["budgets"], _cache["raises"]


# --- what a budget counts (the one definition) -------------------------------------------------

def period_start(period: str, now: datetime) -> datetime:
    """The start of the site's day or month that `now` is in."""
    day = day_of(now)
    return day_start(day if period == Budget.Period.DAY else day.replace(day=1))


def period_end(period: str, now: datetime) -> datetime:
    day = day_of(now)
    if period == Budget.Period.DAY:
        return day_start(day.fromordinal(day.toordinal() + 1))
    following = day.replace(year=day.year + 1, month=1, day=1) if day.month == 12 else day.replace(month=day.month + 1, day=1)
    return day_start(following)


def _scope(budget: Budget, now: datetime) -> Q:
    scope = Q(created_at__gte=period_start(budget.period, now))
    # A budget counts its own project's runs only (a team's spending, not the site's).
    scope &= Q(agent_id__in=Agent.objects.filter(project_id=budget.project_id).values("pk"))
    if budget.scope == Budget.Scope.AGENT:
        scope &= Q(agent_id=budget.agent_id)
    elif budget.scope == Budget.Scope.PERSON:
        scope &= Q(created_by_id=budget.person_id)
    if budget.measure == Budget.Measure.RUNS:
        scope &= Q(started_at__isnull=False)
    return scope


def _replay_scope(budget: Budget, now: datetime) -> Q:
    """The replays a cost or tokens budget counts: those of the runs it covers (any run, an
    experiment's too: a replay is a person's spending, never an experiment's), made in its period."""
    scope = Q(created_at__gte=period_start(budget.period, now), run__agent__project_id=budget.project_id)
    if budget.scope == Budget.Scope.AGENT:
        scope &= Q(run__agent_id=budget.agent_id)
    elif budget.scope == Budget.Scope.PERSON:
        scope &= Q(run__created_by_id=budget.person_id)
    return scope


def budgets_used(budgets: list[Budget], *, now: datetime | None = None) -> dict[int, float]:
    """What each budget's period has used so far: the runs' own figures in one query, and, for
    cost and tokens budgets, what replays of their steps spent in one more."""
    if not budgets:
        return {}
    now = now or timezone.now()
    sums = {}
    for budget in budgets:
        scope = _scope(budget, now)
        if budget.measure == Budget.Measure.COST:
            sums[f"b{budget.pk}"] = Sum(own_cost(), filter=scope)
        elif budget.measure == Budget.Measure.TOKENS:
            sums[f"b{budget.pk}"] = Sum(own_tokens(), filter=scope)
        else:
            sums[f"b{budget.pk}"] = Count("pk", filter=scope)
    rows = Run.production.filter(reduce(or_, (_scope(b, now) for b in budgets))).aggregate(**sums)
    used = {b.pk: float(rows[f"b{b.pk}"] or 0) for b in budgets}
    spending = [b for b in budgets if b.measure != Budget.Measure.RUNS]
    if spending:
        replay_sums = {
            f"b{b.pk}": Sum("cost_usd" if b.measure == Budget.Measure.COST else F("tokens_in") + F("tokens_out"),
                            filter=_replay_scope(b, now))
            for b in spending
        }
        replays = StepReplay.objects.filter(reduce(or_, (_replay_scope(b, now) for b in spending))).aggregate(**replay_sums)
        for budget in spending:
            used[budget.pk] += float(replays[f"b{budget.pk}"] or 0)
    return used


def _project_of(run: Run) -> int:
    """The run's project, read once per run object (the agent when it was read with the run)."""
    if Run.agent.is_cached(run):
        return run.agent.project_id
    if not hasattr(run, "_budget_project_id"):
        run._budget_project_id = Agent.objects.filter(pk=run.agent_id).values_list("project_id", flat=True).first()
    return run._budget_project_id


def covers(budget: Budget, run: Run) -> bool:
    if budget.project_id != _project_of(run):
        return False
    if budget.scope == Budget.Scope.AGENT:
        return budget.agent_id == run.agent_id
    if budget.scope == Budget.Scope.PERSON:
        return budget.person_id is not None and budget.person_id == run.created_by_id
    return True


def limit_for(budget: Budget, raises: list[BudgetRaise], run_id: int | None, now: datetime) -> float:
    """The budget's limit for a run: the highest raise in force for it or for everyone, else its own."""
    lifted = [r.limit for r in raises
              if r.budget_id == budget.pk and r.until > now and (r.run_id is None or r.run_id == run_id)]
    return max([budget.limit, *lifted])


def amount_text(measure: str, value: float) -> str:
    if measure == Budget.Measure.COST:
        return f"${value:,.0f}" if float(value).is_integer() else f"${value:,.2f}"
    number = f"{value:,.0f}"
    return f"{number} tokens" if measure == Budget.Measure.TOKENS else f"{number} run{'' if value == 1 else 's'}"


def budget_text(budget: Budget, limit: float | None = None) -> str:
    """ "Billing, $50 a day" """
    return f"{budget.name}, {amount_text(budget.measure, budget.limit if limit is None else limit)} {budget.get_period_display()}"


def budget_problems(*, scope, agent, person, measure, limit, alert_share) -> dict[str, str]:
    """What is wrong with a budget's fields, by field, in words (the page's form and the API)."""
    problems = {}
    if scope == Budget.Scope.AGENT and agent is None:
        problems["agent"] = "Choose the agent whose runs this budget covers."
    if scope == Budget.Scope.PERSON and person is None:
        problems["person"] = "Choose the person whose runs this budget covers."
    if limit is not None:
        if not math.isfinite(limit) or limit < 0:
            problems["limit"] = "A number, 0 or more."
        elif measure == Budget.Measure.RUNS and not float(limit).is_integer():
            problems["limit"] = "A whole number of runs."
    if alert_share is not None and (not math.isfinite(alert_share) or not 0 < alert_share <= 1):
        problems["alert_share"] = "A share above 0, at most 1 (0.8 is 80 %)."
    return problems


# --- what the loop asks (through runs/engine/hooks.py) ------------------------------------------

def reached(run: Run, *, starting: bool, lock: bool = False, now: datetime | None = None) -> Reached | None:
    """The first budget covering `run` that is used up, or None. `starting`: the run has not
    started yet, so runs budgets count too. `lock`: inside the transaction that starts the run,
    the budgets' rows are locked first, so starts are counted one after the other.

    A budget found used up is confirmed against budgets and raises read afresh: a raise made a
    moment ago in another process (the queue's Raise) must not pause again the run it released."""
    if run.experiment:
        return None
    return _spent_confirmed(run, starting=starting, lock=lock, now=now)


def replay_reached(run: Run, *, now: datetime | None = None) -> Reached | None:
    """The first cost or tokens budget covering `run` that is used up, asked before a replay of
    one of its steps sends anything: a replay spends as its run does (an experiment's run too), so
    it is refused where the run would pause. Runs budgets count runs started, never replays."""
    return _spent_confirmed(run, starting=False, lock=False, now=now)


def _spent_confirmed(run: Run, *, starting: bool, lock: bool, now: datetime | None) -> Reached | None:
    budgets, raises = _enabled()
    if not budgets:
        return None
    now = now or timezone.now()
    found = _first_spent(run, budgets, raises, starting=starting, lock=lock, now=now)
    if found is not None:
        budgets_forget()
        budgets, raises = _enabled()
        found = _first_spent(run, budgets, raises, starting=starting, lock=False, now=now)
    return found


def _first_spent(run, budgets, raises, *, starting: bool, lock: bool, now: datetime) -> Reached | None:
    mine = [b for b in budgets if covers(b, run) and (starting or b.measure != Budget.Measure.RUNS)]
    if not mine:
        return None
    if lock:
        list(Budget.objects.select_for_update().filter(pk__in=[b.pk for b in mine]).order_by("pk").values_list("pk"))
    used = budgets_used(mine, now=now)
    for budget in mine:
        limit = limit_for(budget, raises, run.pk, now)
        if used[budget.pk] >= limit:
            return Reached(budget.pk, used[budget.pk], limit, f"Budget reached: {budget_text(budget, limit)}")
    return None


def hold(run: Run, found: Reached) -> None:
    """In the caller's transaction: `run` waits on the budget found."""
    BudgetHold.objects.update_or_create(run=run, defaults={"budget_id": found.budget_id, "sentence": found.sentence})
    approvals_changed(run_id=run.pk)  # the queue shows it as a budget request, live


def admitted(run: Run) -> None:
    """In the caller's transaction: `run` starts, so it waits on no budget any more. Without a
    budget covering it there is no hold to forget (the sweep forgets those of deleted budgets):
    no statement."""
    budgets, _ = _enabled()
    if any(covers(b, run) for b in budgets):
        BudgetHold.objects.filter(run=run).delete()


class Budgets:
    """What the engine's hook calls."""

    reached = staticmethod(reached)
    hold = staticmethod(hold)
    admitted = staticmethod(admitted)
