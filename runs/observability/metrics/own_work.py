"""What a run did itself: the one definition of the work every figure counts.

A fork starts with copies of its parent's steps (model calls) up to and including its fork
point, their tool calls, and the parent's iterations, tokens and cost at that point
(runs/lifecycle/forks.py): its limits apply to the conversation as a whole. That copied work was
done, and is counted, by the parent; a fork of a fork copies its parent's copies too. So every
figure (the metrics page, its daily rollups, /metrics and the budget alerts) counts a run's own
work only, as defined here:

- its own model calls and tool calls: those after its fork point (all of a run that is no fork);
- its own iterations, tokens and cost: its counters less what it inherited, which is what its
  copied steps hold (their tokens and cost; the iteration of the last one), kept on the fork's row
  when it is made (Run.inherited_*; migration 0024 filled them in for older forks). Copies are
  never changed, so what a fork inherited stays what it started with.

A fork's parent may be deleted (pruning): the fork keeps its copies and its fork point, so what
it did itself stays the same.

For sets of rows the copies are found apart: forks are few, so they are a small hashed set the
big GROUP BYs exclude without a join. A run's own counters are column arithmetic: no subquery per
run (PostgreSQL would price one for every run, CASE or not, and compile the query with JIT).
"""

from django.db.models import F, QuerySet

from runs.models import Run, Step, ToolCall
from runs.models.figures import own_cost, own_iterations, own_tokens  # noqa: F401 (counted here)


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


def inherited_of(run: Run) -> tuple[int, int, float]:
    """(iterations, tokens, cost) `run` inherited: (0, 0, 0.0) for a run that is no fork."""
    return run.inherited_iterations, run.inherited_tokens_in + run.inherited_tokens_out, run.inherited_cost_usd
