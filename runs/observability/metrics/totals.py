"""The declared totals (figures.py) of rows: of a window's runs and their own work, for the raw
path and for the runs the rolled-up path reads raw, and by day and agent, for the rollups. One
aggregate query per kind of row that has totals; none for a kind that has none."""

from collections import Counter

from django.db.models import QuerySet

from runs.days import TruncDay
from runs.observability.metrics import figures
from runs.observability.metrics.figures import CALLS, RUNS, STEPS

_PREFIX = "_total_"  # the aggregates' aliases: never a field's name


def _aggregates(rows: str) -> dict:
    return {_PREFIX + total.name: total.aggregate for total in figures.TOTALS if total.rows == rows}


def totals_of(*, runs: QuerySet | None = None, steps: QuerySet | None = None, calls: QuerySet | None = None) -> Counter:
    """{total name: value} over the runs `runs` and the model calls `steps` and tool calls `calls`
    (each run's own: the caller leaves the copies of forks out); a kind not given counts nothing."""
    found = Counter()
    for rows, queryset in ((RUNS, runs), (STEPS, steps), (CALLS, calls)):
        aggregates = _aggregates(rows)
        if queryset is None or not aggregates:
            continue
        for alias, value in queryset.order_by().aggregate(**aggregates).items():
            found[alias.removeprefix(_PREFIX)] += value or 0
    return found


def totals_by_day(*, runs: QuerySet, steps: QuerySet, calls: QuerySet) -> list[tuple]:
    """(day as the database gives it, agent id, total name, value) of the runs `runs`, each by
    the day its run was created, as totals_of counts them."""
    found = []
    for rows, queryset, run in ((RUNS, runs, ""), (STEPS, steps, "run__"), (CALLS, calls, "run__")):
        aggregates = _aggregates(rows)
        if not aggregates:
            continue
        grouped = (
            queryset.order_by()
            .annotate(_day=TruncDay(f"{run}created_at"))
            .values_list("_day", f"{run}agent_id")
            .annotate(**aggregates)
        )
        for day, agent, *values in grouped:
            found += [(day, agent, alias.removeprefix(_PREFIX), value or 0) for alias, value in zip(aggregates, values)]
    return found
