"""Budgets that pause a run and ask, instead of killing it.

Before each model request a started run asks `reached`: if a cost or token budget that covers it
is used up, it pauses at that boundary (as the pause lever does) with "Budget reached: Billing,
$50 a day", and a hold puts it in the queue. A run about to start asks too, runs budgets
included; if one is spent it waits queued, holding no worker. An administrator raises the budget
(for the run, or for every run until a time), or an operator stops the run with a summary; the
sweep lets held runs go on when the period turns. Nothing is lost and no run dies of a budget.

What a budget counts is what the metrics page counts: production runs (no experiments) created
in the site's day or month (runs/days.py), with their own tokens and cost (runs/models/figures.py);
a runs budget counts such runs that started. A start takes the budgets' rows under a lock
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

from django.db import IntegrityError, transaction
from django.db.models import Count, Q, Sum
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from runs.days import day_of, day_start
from runs.engine.events import approvals_changed
from runs.models import Budget, BudgetHold, BudgetNotice, BudgetRaise, Run
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
    if budget.scope == Budget.Scope.AGENT:
        scope &= Q(agent_id=budget.agent_id)
    elif budget.scope == Budget.Scope.PERSON:
        scope &= Q(created_by_id=budget.person_id)
    if budget.measure == Budget.Measure.RUNS:
        scope &= Q(started_at__isnull=False)
    return scope


def budgets_used(budgets: list[Budget], *, now: datetime | None = None) -> dict[int, float]:
    """What each budget's period has used so far, in one query."""
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
    return {b.pk: float(rows[f"b{b.pk}"] or 0) for b in budgets}


def covers(budget: Budget, run: Run) -> bool:
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
    budgets, raises = _enabled()
    if not budgets or run.experiment:
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


# --- letting held runs go on ---------------------------------------------------------------------

def hold_release(hold_row: BudgetHold, *, by: str = "its budget (no longer reached)") -> bool:
    """Let a held run go on: a paused one is resumed (queued, or awaiting its pending decisions),
    a queued one is handed to the workers; it checks its budgets again when it next asks. False
    when someone released it first."""
    from runs.supervision.levers import budget_resume  # the levers own resuming

    with transaction.atomic():
        if not BudgetHold.objects.filter(pk=hold_row.pk).delete()[0]:
            return False
        budget_resume(run_id=hold_row.run_id, by=by)
        approvals_changed(run_id=hold_row.run_id)
    return True


def holds_check(*, limit: int = 200) -> list[int]:
    """The sweep's part: release holds whose budget is gone, disabled, raised or in a new period,
    and forget those of runs that ended. Returns the runs released."""
    holds = list(BudgetHold.objects.select_related("run", "budget")[:limit])
    if not holds:
        return []
    BudgetHold.objects.filter(pk__in=[h.pk for h in holds if h.run.status not in (Run.Status.QUEUED, Run.Status.PAUSED)]).delete()
    budgets_forget()
    released = []
    for row in holds:
        if row.run.status not in (Run.Status.QUEUED, Run.Status.PAUSED):
            continue
        still = row.budget is not None and row.budget.enabled and reached(row.run, starting=row.run.started_at is None)
        if not still and hold_release(row):
            released.append(row.run_id)
    return released


# --- warnings at a share of a budget --------------------------------------------------------------

def budget_notices_send(*, now: datetime | None = None) -> list[BudgetNotice]:
    """Warn once per period for each budget past its alert share (80 % unless set): a webhook
    "budget.warning" and an e-mail to APPROVAL_ESCALATION_EMAILS, in the transaction that records
    the notice (a unique constraint makes concurrent checks harmless)."""
    from runs.webhooks import notify

    now = now or timezone.now()
    budgets = list(Budget.objects.filter(enabled=True).select_related("agent", "person"))
    if not budgets:
        return []
    used = budgets_used(budgets, now=now)
    sent = []
    for budget in budgets:
        start = period_start(budget.period, now)
        if used[budget.pk] < budget.alert_share * budget.limit or budget.limit <= 0:
            continue
        if BudgetNotice.objects.filter(budget=budget, period_start=start).exists():
            continue
        try:
            with transaction.atomic():
                notice = BudgetNotice.objects.create(budget=budget, period_start=start, used=used[budget.pk],
                                                     limit=budget.limit)
                notify("budget.warning", lambda: budget_warning_data(budget, notice))
                transaction.on_commit(lambda b=budget, n=notice: _warning_mail(b, n))
        except IntegrityError:  # another worker sent it first
            continue
        sent.append(notice)
    return sent


def share_text(budget: Budget, notice: BudgetNotice) -> str:
    """ "Billing, $50 a day: $41.20 used (82 %)" """
    share = notice.used / notice.limit if notice.limit else 1
    return f"{budget_text(budget)}: {amount_text(budget.measure, notice.used)} used ({share:.0%})"


def budget_warning_data(budget: Budget, notice: BudgetNotice) -> dict:
    from django.conf import settings
    from django.urls import reverse

    return {"budget": {
        "id": budget.pk, "name": budget.name, "scope": budget.scope, "measure": budget.measure,
        "period": budget.period, "limit": budget.limit, "used": notice.used,
        "alert_share": budget.alert_share, "period_start": notice.period_start.isoformat(),
        "text": share_text(budget, notice), "url": settings.SITE_URL.rstrip("/") + reverse("budget_list"),
    }}


def _warning_mail(budget: Budget, notice: BudgetNotice) -> None:
    """The warning by e-mail, after its commit: to the agent's escalation addresses for an agent's
    budget, else APPROVAL_ESCALATION_EMAILS. A mail server that refuses it is logged, not retried
    (the webhook is the delivery that is retried)."""
    from django.conf import settings
    from django.core.mail import EmailMessage
    from django.urls import reverse

    from runs.supervision.escalation import escalation_recipients

    to = escalation_recipients(budget.agent) if budget.agent_id else list(settings.APPROVAL_ESCALATION_EMAILS)
    if not to:
        return
    text = share_text(budget, notice)
    body = "\n".join([
        f"Budget {text}.", "",
        f"At {budget.limit:g} the runs it covers pause before their next model request and wait in the",
        "approvals queue, where an administrator may raise it; new runs wait queued.", "",
        settings.SITE_URL.rstrip("/") + reverse("budget_list"),
    ])
    try:
        EmailMessage(subject=f"[Agentsite] Budget {text}", body=body, to=to,
                     headers={"X-Agentsite-Budget": str(budget.pk)}).send()
    except Exception as exc:  # the notice stays recorded: one warning a period, even when mail is down
        log.warning("could not send the warning of budget %s by e-mail: %s", budget.pk, exc)


# --- the queue's budget requests, and raising a budget --------------------------------------------

class RaiseRefused(Exception):
    """A raise that cannot be made, in words for the administrator; nothing was changed."""


@dataclass(frozen=True)
class BudgetRequest:
    """A run waiting on a budget, as the queue shows it."""

    hold: BudgetHold
    run: Run
    budget: Budget | None
    used: float | None
    limit: float | None
    period_ends: datetime | None

    @property
    def used_text(self) -> str:
        return amount_text(self.budget.measure, self.used) if self.budget else ""

    @property
    def limit_text(self) -> str:
        return amount_text(self.budget.measure, self.limit) if self.budget else ""

    @property
    def suggested_limit(self) -> float:
        """What the raise form offers: half as much again as what is used, or the limit, whichever is more."""
        if not self.budget:
            return 0
        wanted = max(self.limit or 0, self.used or 0) * 1.5 or 1
        return math.ceil(wanted) if self.budget.measure != Budget.Measure.COST else math.ceil(wanted * 100) / 100


def budget_requests_count() -> int:
    """How many runs wait on a budget (the header's badge). 0 without an enabled budget (no
    statement: the runs a deleted or disabled budget held go on at the next sweep)."""
    if not _enabled()[0]:
        return 0
    return BudgetHold.objects.filter(run__status__in=(Run.Status.QUEUED, Run.Status.PAUSED)).count()


def budget_requests(*, limit: int = 100) -> list[BudgetRequest]:
    """The runs waiting on a budget, oldest first, with what their budget has used now (none
    without an enabled budget, as budget_requests_count)."""
    if not _enabled()[0]:
        return []
    holds = list(BudgetHold.objects.filter(run__status__in=(Run.Status.QUEUED, Run.Status.PAUSED))
                 .select_related("run", "run__agent", "budget")[:limit])
    budgets = list({h.budget.pk: h.budget for h in holds if h.budget is not None}.values())
    now = timezone.now()
    used = budgets_used(budgets, now=now)
    raises = list(BudgetRaise.objects.filter(budget__in=budgets, until__gt=now))
    return [BudgetRequest(hold=h, run=h.run, budget=h.budget, used=used.get(h.budget_id),
                          limit=limit_for(h.budget, raises, h.run_id, now) if h.budget else None,
                          period_ends=period_end(h.budget.period, now) if h.budget else None)
            for h in holds]


def budget_raise(*, budget_id: int, user, limit: float, until: datetime, run_id: int | None = None,
                 now: datetime | None = None) -> list[int]:
    """Lift a budget to `limit` until `until`, for one run or for every run it covers, and let the
    runs it held go on where it now allows them. Returns the runs released."""
    now = now or timezone.now()
    budget = Budget.objects.filter(pk=budget_id).first()
    if budget is None:
        raise RaiseRefused("That budget no longer exists.")
    if not (limit > budget.limit) or limit != limit or limit == float("inf"):
        raise RaiseRefused(f"The new limit must be above the budget's own, {amount_text(budget.measure, budget.limit)}.")
    if until <= now:
        raise RaiseRefused("The raise must last until a time still to come.")
    if (until - now).days > 366:
        raise RaiseRefused("A raise lasts at most a year: change the budget itself for longer.")
    if run_id is not None and not BudgetHold.objects.filter(run_id=run_id).exists() \
            and not Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).exists():
        raise RaiseRefused("That run is not waiting on a budget any more.")
    name = user.get_username() if user is not None and user.is_authenticated else "an administrator"
    BudgetRaise.objects.create(budget=budget, run_id=run_id, limit=limit, until=until, by_name=name)
    budgets_forget()
    released = []
    holds = BudgetHold.objects.filter(budget=budget).select_related("run")
    if run_id is not None:
        holds = holds.filter(run_id=run_id)
    for row in holds:
        if row.run.status in (Run.Status.QUEUED, Run.Status.PAUSED) \
                and not reached(row.run, starting=row.run.started_at is None, now=now) \
                and hold_release(row, by=f"{name}, who raised its budget"):
            released.append(row.run_id)
    return released
