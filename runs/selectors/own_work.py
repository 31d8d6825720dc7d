"""What a run did itself: the one definition of the work every figure counts.

A fork starts with copies of its parent's steps (model calls) up to and including its fork
point, their tool calls, and the parent's iterations, tokens and cost at that point
(runs/services/forks.py): its limits apply to the conversation as a whole. That copied work was
done, and is counted, by the parent; a fork of a fork copies its parent's copies too. So every
figure (the metrics page, its daily rollups, /metrics and the budget alerts) counts a run's own
work only, as defined here:

- its own model calls and tool calls: those after its fork point (all of a run that is no fork);
- its own iterations, tokens and cost: its counters less what it inherited, which is what its
  copied steps hold (their tokens and cost; the iteration of the last one). Copies are never
  changed, so what a fork inherited stays what it started with.

A fork's parent may be deleted (pruning): the fork keeps its copies and its fork point, so what
it did itself stays the same.

For sets of rows the copies are found apart: forks are few, so they are a small hashed set the
big GROUP BYs exclude without a join; for a run's counters a CASE asks only forks for their
copied steps.
"""

from django.db.models import Case, F, FloatField, IntegerField, OuterRef, QuerySet, Subquery, Sum, Value, When
from django.db.models.functions import Coalesce

from runs.models import Run, Step, ToolCall


def copied_steps(*, runs: QuerySet | None = None) -> QuerySet[Step]:
    """The model calls forks copied from their parents (of the runs `runs`, a queryset of run pks)."""
    found = Step.objects.filter(run__forked_at_step__isnull=False, index__lte=F("run__forked_at_step"))
    return found if runs is None else found.filter(run_id__in=runs)


def copied_calls(*, runs: QuerySet | None = None) -> QuerySet[ToolCall]:
    """The tool calls forks copied with those model calls."""
    found = ToolCall.objects.filter(run__forked_at_step__isnull=False, step__index__lte=F("run__forked_at_step"))
    return found if runs is None else found.filter(run_id__in=runs)


def own_steps(steps: QuerySet[Step], *, runs: QuerySet | None = None) -> QuerySet[Step]:
    """`steps` without the copies (`runs`: the runs `steps` are of, when known, to look among fewer forks)."""
    return steps.exclude(pk__in=copied_steps(runs=runs).values("pk"))


def own_calls(calls: QuerySet[ToolCall], *, runs: QuerySet | None = None) -> QuerySet[ToolCall]:
    """`calls` without the copies."""
    return calls.exclude(pk__in=copied_calls(runs=runs).values("pk"))


def run_steps(run: Run) -> QuerySet[Step]:
    """The model calls `run` made itself."""
    return Step.objects.filter(run=run, index__gt=run.forked_at_step or 0)


def run_calls(run: Run) -> QuerySet[ToolCall]:
    """The tool calls `run` made itself."""
    return ToolCall.objects.filter(run=run, step__index__gt=run.forked_at_step or 0)


def _inherited(value, output_field):
    """What a run inherited of `value` (a Sum over its copied steps), 0 for a run that is no fork.
    Only forks are asked: the subquery is behind the CASE."""
    copies = (
        Step.objects.filter(run=OuterRef("pk"), index__lte=OuterRef("forked_at_step"))
        .order_by()
        .values("run")
        .annotate(_inherited=value)
        .values("_inherited")
    )
    zero = Value(0, output_field=output_field)
    return Case(
        When(forked_at_step__isnull=False, then=Coalesce(Subquery(copies, output_field=output_field), zero)),
        default=zero,
        output_field=output_field,
    )


def inherited_iterations():
    # The iteration of the last copied step: a fork's iterations start from it.
    last = Step.objects.filter(run=OuterRef("pk"), index=OuterRef("forked_at_step")).values("iteration")[:1]
    return Case(
        When(forked_at_step__isnull=False, then=Coalesce(Subquery(last), 0)), default=0, output_field=IntegerField()
    )


def inherited_tokens():
    return _inherited(Sum(F("tokens_in") + F("tokens_out")), IntegerField())


def inherited_cost():
    return _inherited(Sum("cost_usd"), FloatField())


def own_iterations():
    """A run's iterations less those it inherited (an expression over Run)."""
    return F("iterations") - inherited_iterations()


def own_tokens():
    """A run's tokens, in and out, less those it inherited."""
    return F("tokens_in") + F("tokens_out") - inherited_tokens()


def own_cost():
    """A run's cost in USD less what it inherited."""
    return F("cost_usd") - inherited_cost()


def inherited_of(run: Run) -> tuple[int, int, float]:
    """(iterations, tokens, cost) `run` inherited: (0, 0, 0.0) without a query when it is no fork."""
    if run.forked_at_step is None:
        return 0, 0, 0.0
    found = Run.objects.filter(pk=run.pk).annotate(
        _iterations=inherited_iterations(), _tokens=inherited_tokens(), _cost=inherited_cost()
    )
    return found.values_list("_iterations", "_tokens", "_cost").first() or (0, 0, 0.0)
