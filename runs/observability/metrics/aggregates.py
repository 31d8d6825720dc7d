"""Database aggregates for the metrics: nearest-rank percentiles and durations in SQL (days: runs/days.py).

Percentiles are nearest-rank (the value at position ceil(p/100 * n) of the sorted values) and
computed by the database, so a million rows never travel to Python: PostgreSQL has exactly that
as an aggregate, PERCENTILE_DISC, computed for every group in one GROUP BY; elsewhere (SQLite)
each percentile is one row read with `ORDER BY value LIMIT 1 OFFSET k`, sorted from whichever end
is nearer (p95 counts back from the top) so the database keeps only k + 1 rows while it sorts.
"""
import math

from django.db import connections
from django.db.models import Aggregate, Case, Count, F, FloatField, QuerySet, Value, When

from runs.models.decision_terms import SecondsBetween  # noqa: F401 - also read from here (tests)


def nearest_rank_offset(count: int, percent: float) -> int:
    """0-based position of the nearest-rank percentile among `count` sorted values."""
    return min(count - 1, max(0, math.ceil(percent / 100 * count) - 1))


def percentile_values(queryset: QuerySet, expression, count: int, percents: tuple[float, ...]) -> dict:
    """{percent: the nearest-rank percentile of `expression`} over `queryset`, which holds `count`
    rows (None for each when it holds none). One query on PostgreSQL, one per percent elsewhere."""
    if count == 0:
        return {percent: None for percent in percents}
    if has_percentile_disc(queryset):
        found = queryset.aggregate(**{f"p{n}": PercentileDisc(expression, p) for n, p in enumerate(percents)})
        return {percent: found[f"p{n}"] for n, percent in enumerate(percents)}
    values = {}
    for percent in percents:
        offset = nearest_rank_offset(count, percent)
        from_top = count - 1 - offset
        order = F("_value").asc() if offset <= from_top else F("_value").desc()
        skip = min(offset, from_top)
        ordered = queryset.annotate(_value=expression).order_by(order).values_list("_value", flat=True)
        found = list(ordered[skip : skip + 1])  # ORDER BY ... LIMIT 1 OFFSET skip
        values[percent] = found[0] if found else None
    return values


def grouped_percentiles(
    queryset: QuerySet, group: str, expression, percents: tuple[float, ...], *, limit: int
) -> list[tuple[object, int, dict]]:
    """(group value, rows, {percent: value}) for the `limit` largest groups of `queryset` by
    `group`, largest first: one GROUP BY on PostgreSQL; elsewhere one count query, then the
    offset reads of `percentile_values` for each group."""
    by_group = queryset.order_by().values_list(group)
    if has_percentile_disc(queryset):
        names = [f"p{n}" for n in range(len(percents))]
        rows = by_group.annotate(
            _n=Count("pk"), **{name: PercentileDisc(expression, p) for name, p in zip(names, percents)}
        ).order_by("-_n", group)[:limit]
        return [(key, n, dict(zip(percents, found))) for key, n, *found in rows]
    counts = list(by_group.annotate(_n=Count("pk")).order_by("-_n", group)[:limit])
    return [
        (key, n, percentile_values(queryset.filter(**{group: key}), expression, n, percents)) for key, n in counts
    ]


def has_percentile_disc(queryset: QuerySet) -> bool:
    return connections[queryset.db].vendor == "postgresql"


class PercentileDisc(Aggregate):
    """PostgreSQL's PERCENTILE_DISC: the value at position ceil(percent/100 * n), as above."""

    function = "PERCENTILE_DISC"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression, percent: float, **extra):
        super().__init__(expression, fraction=repr(percent / 100), **extra)


# On SQLite, Django computes date truncation and datetime differences with Python functions
# called once per row, which costs seconds over a month of runs; these do the same in SQL.



# SecondsBetween: the one definition is with the decisions' terms, in the bottom layer, so the
# supervision figures use it too (supervision and observability never import each other).


def approval_wait_seconds() -> Case:
    """Seconds from asking to deciding (decided_at - requested_at), never below 0. A decision
    stamped by a process whose clock is behind the asking one's, or a rule's decision recorded
    before it took its request's time (a few milliseconds early), is a wait of 0: a negative wait
    would pull down every sum, mean and percentile it enters. None while undecided."""
    return Case(
        When(decided_at__lt=F("requested_at"), then=Value(0.0)),
        default=SecondsBetween("decided_at", "requested_at"),
        output_field=FloatField(),
    )
