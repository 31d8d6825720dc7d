"""The budgets page: each budget with what its period used so far (everyone who sees runs);
administrators add, change and delete them, and raise one from the queue's budget requests."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.db.models import Count
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from projects.access import scoped
from runs.controls.budget_requests import RaiseRefused, budget_raise
from runs.controls.budgets import amount_text, budget_text, budgets_used, limit_for, period_end
from runs.models import Budget, BudgetHold, BudgetRaise, Run
from runs.roles import PERM_CHANGE_BUDGET, PERM_VIEW_BUDGET
from runs.web.forms.budgets import BudgetForm, BudgetRaiseForm
from runs.web.views.approvals import _back


def _rows(user) -> list[dict]:
    budgets = list(scoped(Budget.objects.select_related("agent", "person", "project"), user))
    now = timezone.now()
    used = budgets_used(budgets, now=now)
    raises = list(BudgetRaise.objects.filter(until__gt=now, run=None).order_by("until"))
    # The runs each budget holds now (a hold of an ended run is forgotten by the next sweep).
    holding = dict(BudgetHold.objects.filter(budget__in=budgets, run__status__in=(Run.Status.QUEUED, Run.Status.PAUSED))
                   .values("budget_id").annotate(n=Count("pk")).values_list("budget_id", "n"))
    rows = []
    for budget in budgets:
        limit = limit_for(budget, raises, None, now)  # raises for every run: those of one run are not listed
        share = used[budget.pk] / limit if limit else (1.0 if used[budget.pk] else 0.0)
        rows.append({
            "budget": budget, "text": budget_text(budget), "used": amount_text(budget.measure, used[budget.pk]),
            "limit": amount_text(budget.measure, limit), "raised": limit != budget.limit,
            "raises": [r for r in raises if r.budget_id == budget.pk],
            "share": share, "percent": min(100, round(share * 100)), "spent": used[budget.pk] >= limit,
            "warned": budget.enabled and share >= budget.alert_share, "ends": period_end(budget.period, now),
            "holding": holding.get(budget.pk, 0),
        })
    return rows


@login_required
@permission_required(PERM_VIEW_BUDGET, raise_exception=True)
def budget_list(request):
    return render(request, "runs/budget_list.html", {"rows": _rows(request.user)})


@login_required
@permission_required("runs.add_budget", raise_exception=True)
def budget_create(request):
    return _budget_form(request, Budget())


@login_required
@permission_required(PERM_CHANGE_BUDGET, raise_exception=True)
def budget_edit(request, pk: int):
    return _budget_form(request, get_object_or_404(Budget, pk=pk))


def _budget_form(request, budget: Budget):
    adding = budget.pk is None
    form = BudgetForm(request.POST if request.method == "POST" else None, instance=budget, user=request.user)
    if form.is_bound and form.is_valid():
        budget = form.save()
        messages.success(request, f"Budget {budget_text(budget)} {'added' if adding else 'saved'}: "
                                  "it applies from the next boundary of each run it covers.")
        return redirect("budget_list")
    return render(request, "runs/budget_form.html", {"form": form, "budget": budget, "adding": adding})


@login_required
@permission_required("runs.delete_budget", raise_exception=True)
@require_POST
def budget_delete(request, pk: int):
    budget = get_object_or_404(Budget, pk=pk)
    text = budget_text(budget)
    budget.delete()
    messages.success(request, f"Budget {text} deleted: the runs it held go on within a few seconds.")
    return redirect("budget_list")


@login_required
@permission_required(PERM_CHANGE_BUDGET, raise_exception=True)
@require_POST
def budget_raise_view(request, pk: int):
    budget = get_object_or_404(Budget, pk=pk)
    form = BudgetRaiseForm(request.POST)
    if not form.is_valid():
        problems = "; ".join(f"{form.fields[f].label if f in form.fields else 'raise'}: {' '.join(e)}"
                             for f, e in form.errors.items())
        messages.error(request, f"Budget {budget.name} was not raised. {problems}")
        return _back(request)
    data = form.cleaned_data
    run_id = data["run"] if data["applies_to"] == "run" else None
    try:
        released = budget_raise(budget_id=budget.pk, user=request.user, limit=data["limit"], until=data["until"],
                                run_id=run_id)
    except RaiseRefused as exc:
        messages.error(request, f"Budget {budget.name} was not raised: {exc}")
        return _back(request)
    until = timezone.localtime(data["until"]).strftime("%Y-%m-%d %H:%M")
    who = f"for run {run_id}" if run_id else "for every run it covers"
    if released:
        went_on = f" Run{'s' if len(released) > 1 else ''} {', '.join(map(str, released))} went on."
    elif run_id:
        went_on = " It cannot go on yet: another budget, or the new limit, still holds it."
    else:
        went_on = ""
    messages.success(request, f"Budget {budget.name} raised to {amount_text(budget.measure, data['limit'])} {who} "
                              f"until {until}.{went_on}")
    return _back(request)
