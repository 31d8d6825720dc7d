"""The queue's budget requests (the runs a spent budget holds), raising a budget, and letting held
runs go on: at once after a raise, or at the sweep when the budget is gone, turned off or its
period turned. What a budget counts and when it holds a run is runs/controls/budgets.py."""
import math
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from runs.controls.budgets import (
    _enabled,
    amount_text,
    budgets_forget,
    budgets_used,
    limit_for,
    period_end,
    reached,
)
from runs.controls.levers import budget_resume
from runs.engine.storage.events import approvals_changed
from runs.models import Budget, BudgetHold, BudgetRaise, Run

# --- letting held runs go on ---------------------------------------------------------------------

def hold_release(hold_row: BudgetHold, *, by: str = "its budget (no longer reached)") -> bool:
    """Let a held run go on: a paused one is resumed (queued, or awaiting its pending decisions),
    a queued one is handed to the workers; it checks its budgets again when it next asks. False
    when someone released it first."""
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


def budget_requests_count(projects: set[int] | None = None) -> int:
    """How many runs wait on a budget (the header's badge). 0 without an enabled budget (no
    statement: the runs a deleted or disabled budget held go on at the next sweep)."""
    if not _enabled()[0]:
        return 0
    holds = BudgetHold.objects.filter(run__status__in=(Run.Status.QUEUED, Run.Status.PAUSED))
    if projects is not None:
        holds = holds.filter(run__agent__project_id__in=projects)
    return holds.count()


def budget_requests(*, limit: int = 100, projects: set[int] | None = None, run_id: int | None = None) -> list[BudgetRequest]:
    """The runs waiting on a budget, oldest first, with what their budget has used now (none
    without an enabled budget, as budget_requests_count); with `run_id`, that run's request only
    (its page offers the same raise as the queue)."""
    if not _enabled()[0]:
        return []
    holds = BudgetHold.objects.filter(run__status__in=(Run.Status.QUEUED, Run.Status.PAUSED))
    if projects is not None:
        holds = holds.filter(run__agent__project_id__in=projects)
    if run_id is not None:
        holds = holds.filter(run_id=run_id)
    holds = list(holds.select_related("run", "run__agent", "budget")[:limit])
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
    # A run of another project is refused in the words of one that does not exist: a raise names
    # only runs its budget may count, and the answer tells nothing of other teams' runs.
    if run_id is not None:
        runs = Run.objects.filter(pk=run_id, agent__project_id=budget.project_id)
        if not BudgetHold.objects.filter(run__in=runs).exists() and not runs.filter(status__in=Run.ACTIVE_STATUSES).exists():
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
