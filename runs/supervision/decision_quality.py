"""Decision quality, measured: how people decide a project's destructive calls, for the
Supervision page. Plain functions over the approvals (with their evidence, shadow decisions and
nudges); what each figure means is defined once in runs/models/decision_terms.py (time to decide
from the card appearing, quick approvals, contradicted approvals).

A scope is one project's people's decisions (operators and admins read it) or one person's in
that project (everyone reads their own), decided in the period. Every figure is aggregated by
the database: a fixed number of queries, whatever the number of approvals. Percentiles are
nearest-rank (the value at position ceil(p/100 * n)), found with window functions, per day too.
"""
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import BooleanField, Case, CharField, Count, F, FloatField, Func, Q, Value, When, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from runs.days import TruncDay, day_of, day_start
from runs.models import Approval, NudgeShown, ShadowDecision
from runs.models.decision_terms import (
    APPROVED,
    BY_A_PERSON,
    SecondsBetween,
    contradicted,
    decide_seconds,
    failed,
    moot,
    quick_approvals,
    reversed_later,
)
from runs.supervision.shadow_report import verdict

PERIODS = (7, 30, 90)  # days a page may show
DEFAULT_DAYS = 30
LONGEST_SHOWN = 10
CONTRADICTED_SHOWN = 10
PEOPLE_SHOWN = 50
PERCENTS = (50, 90)


@dataclass(frozen=True)
class Scope:
    project_id: int
    person_id: int | None  # one person's decisions only ("just me")
    start: datetime
    end: datetime

    @property
    def days(self) -> list[date]:
        first, last = day_of(self.start), day_of(self.end)
        return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def scope_of(*, project_id: int, person_id: int | None = None, days: int = DEFAULT_DAYS, now=None) -> Scope:
    """The last `days` of the site's days, today included."""
    now = now or timezone.now()
    return Scope(project_id, person_id, day_start(day_of(now) - timedelta(days=days - 1)), now)


def decisions(scope: Scope):
    """People's decisions of the project's calls in the period (the person's only, for one)."""
    rows = Approval.objects.filter(BY_A_PERSON, run__agent__project_id=scope.project_id,
                                   decided_at__gte=scope.start, decided_at__lte=scope.end)
    return rows if scope.person_id is None else rows.filter(decided_by_id=scope.person_id)


@dataclass
class Figures:
    decisions: int = 0
    approved: int = 0
    quick: int = 0  # approvals within the project's quick_approval_seconds of the card appearing
    failed: int = 0
    moot: int = 0
    reversed: int = 0
    contradicted: int = 0  # approvals failed, moot or reversed (one may be several)
    active_hours: int = 0  # clock hours with at least one decision
    decide_p50: float | None = None  # seconds from the card appearing to the decision
    decide_p90: float | None = None
    shadow_agreed: int = 0
    shadow_disagreed: int = 0
    nudges: int = 0

    @property
    def rejected(self) -> int:
        return self.decisions - self.approved

    @property
    def approved_percent(self) -> float | None:
        return _percent(self.approved, self.decisions)

    @property
    def quick_percent(self) -> float | None:
        return _percent(self.quick, self.approved)

    @property
    def contradicted_percent(self) -> float | None:
        return _percent(self.contradicted, self.approved)

    @property
    def shadow_percent(self) -> float | None:
        return _percent(self.shadow_agreed, self.shadow_agreed + self.shadow_disagreed)

    @property
    def per_hour(self) -> float | None:
        """Decisions per hour in the hours the person (or the project's people) decided any."""
        return round(self.decisions / self.active_hours, 1) if self.active_hours else None


def _percent(part: int, whole: int) -> float | None:
    return round(100 * part / whole, 1) if whole else None


class HourOf(Func):
    """The UTC clock hour of a datetime column, as a value to count distinct hours by."""

    output_field = CharField()

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="substr(%(expressions)s, 1, 13)", **extra_context)

    def as_postgresql(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24')",
                           **extra_context)


def _counts() -> dict:
    """The counts every figure and point shares, over rows annotated with `_s` (decide_seconds)."""
    return {
        "n": Count("pk"), "approved": Count("pk", filter=Q(status=APPROVED)),
        "quick": Count("pk", filter=quick_approvals("_s")), "contradicted": Count("pk", filter=contradicted()),
    }


def quality_figures(scope: Scope) -> Figures:
    """The scope's figures: four queries (counts, percentiles, shadow rules, nudges)."""
    rows = decisions(scope).annotate(_s=decide_seconds())
    found = rows.aggregate(
        **_counts(), failed=Count("pk", filter=failed()), moot=Count("pk", filter=moot()),
        reversed=Count("pk", filter=reversed_later()), hours=Count(HourOf("decided_at"), distinct=True),
    )
    ranks = nearest_ranks(decisions(scope), decide_seconds(), PERCENTS)
    agreed, disagreed = shadow_agreement(scope)
    return Figures(
        decisions=found["n"], approved=found["approved"], quick=found["quick"], failed=found["failed"],
        moot=found["moot"], reversed=found["reversed"], contradicted=found["contradicted"], active_hours=found["hours"],
        decide_p50=_seconds(ranks.get((None, 50))), decide_p90=_seconds(ranks.get((None, 90))),
        shadow_agreed=agreed, shadow_disagreed=disagreed, nudges=nudges_in(scope).count(),
    )


def nearest_ranks(rows, value, percents: tuple[int, ...], *, by=None) -> dict:
    """{(group or None, percent): the nearest-rank percentile of `value`} over `rows`, per group
    of `by` (an expression) when given: one query, the rows ranked by window functions and only
    the ranks wanted read back (rank r is the p-th percentile of n rows when r - 1 < p n / 100 <= r)."""
    partition = [F("_group")] if by is not None else None
    ranked = rows.annotate(_value=value, _group=by if by is not None else Value(None, output_field=CharField()))
    ranked = ranked.filter(_value__isnull=False).annotate(
        _n=Window(Count("pk"), partition_by=partition),
        _rank=Window(RowNumber(), partition_by=partition, order_by=[F("_value").asc(), F("pk").asc()]),
    )
    wanted = Q()
    for p in percents:
        wanted |= Q(_hundred_rank__gte=F("_n") * p, _hundred_below__lt=F("_n") * p)
    ranked = ranked.annotate(_hundred_rank=F("_rank") * 100, _hundred_below=(F("_rank") - 1) * 100).filter(wanted)
    found = {}
    for group, rank, n, seconds in ranked.order_by().values_list("_group", "_rank", "_n", "_value"):
        for p in percents:
            if rank * 100 >= n * p > (rank - 1) * 100:
                found[group, p] = round(seconds, 3)  # to the millisecond, as decision_terms measures
    return found


def shadow_agreement(scope: Scope) -> tuple[int, int]:
    """(agreed, disagreed): rules in shadow against the people's decisions of the scope, as each
    rule's shadow report counts them (a rule that would have left the call to people counts neither)."""
    edited = Case(When(~Q(approval__edited_args_hash=""), then=Value(True)), default=Value(False),
                  output_field=BooleanField())
    rows = (ShadowDecision.objects.filter(approval__in=decisions(scope)).annotate(edited=edited)
            .values_list("outcome", "approval__status", "approval__automatic", "edited").annotate(n=Count("pk")).order_by())
    kinds = defaultdict(int)
    for outcome, status, automatic, was_edited, n in rows:
        kinds[verdict(outcome, status, automatic, was_edited)] += n
    return kinds["agreed"], kinds["disagreed"]


def nudges_in(scope: Scope):
    rows = NudgeShown.objects.filter(project_id=scope.project_id, shown_at__gte=scope.start, shown_at__lte=scope.end)
    return rows if scope.person_id is None else rows.filter(user_id=scope.person_id)


# --- People, longest waits, contradicted calls ---------------------------------------------------


@dataclass(frozen=True)
class PersonFigures:
    name: str
    decisions: int
    approved: int
    quick: int
    contradicted: int
    active_hours: int
    decide_p50: float | None

    @property
    def per_hour(self) -> float | None:
        return round(self.decisions / self.active_hours, 1) if self.active_hours else None

    @property
    def quick_percent(self) -> float | None:
        return _percent(self.quick, self.approved)


def people_figures(scope: Scope) -> list[PersonFigures]:
    """Each person's figures in the scope, busiest first (PEOPLE_SHOWN at most): two queries.
    By the name kept with each decision, which outlives the account."""
    rows = (decisions(scope).annotate(_s=decide_seconds()).values_list("decided_by_name")
            .annotate(**_counts(), hours=Count(HourOf("decided_at"), distinct=True)).order_by("-n", "decided_by_name"))
    rows = list(rows[:PEOPLE_SHOWN])
    medians = nearest_ranks(decisions(scope).filter(decided_by_name__in=[r[0] for r in rows]), decide_seconds(),
                            (50,), by=F("decided_by_name"))
    return [PersonFigures(name, n, approved, quick, wrong, hours, _seconds(medians.get((name, 50))))
            for name, n, approved, quick, wrong, hours in rows]


@dataclass(frozen=True)
class Waited:
    approval: Approval
    seconds: float


def longest_waits(scope: Scope, *, limit: int = LONGEST_SHOWN) -> list[Waited]:
    """The calls that waited longest for people: asked of the scope's people and decided in the
    period (a person's, for one), or, for the whole project, still waiting or expired in it;
    from asking to the decision, or to now."""
    now = scope.end
    waited = Case(
        When(decided_at__isnull=True, then=SecondsBetween(Value(now), F("requested_at"))),
        default=SecondsBetween(F("decided_at"), F("requested_at")), output_field=FloatField(),
    )
    if scope.person_id is not None:
        rows = decisions(scope)
    else:
        rows = Approval.objects.filter(
            Q(BY_A_PERSON) | Q(status=Approval.Status.EXPIRED), run__agent__project_id=scope.project_id,
            decided_at__gte=scope.start, decided_at__lte=scope.end,
        ) | Approval.objects.filter(status=Approval.Status.PENDING, run__agent__project_id=scope.project_id)
    found = (rows.annotate(_waited=waited).select_related("tool_call").defer("tool_call__arguments", "tool_call__result",
                                                                              "tool_call__result_text")
             .order_by("-_waited", "pk")[:limit])
    return [Waited(approval, round(max(0.0, approval._waited or 0.0), 3)) for approval in found]


@dataclass(frozen=True)
class Contradicted:
    approval: Approval
    why: str  # "failed", "moot" or "reversed"


WHY_WORDS = {
    "failed": "the call failed",
    "moot": "it changed nothing: its check or the tool said it was already done",
    "reversed": "a later call on the same thing changed it again",
}


def contradicted_calls(scope: Scope, *, limit: int = CONTRADICTED_SHOWN) -> list[Contradicted]:
    """The scope's latest approvals that were later contradicted, with the first reason that holds."""
    why = Case(When(failed(), then=Value("failed")), When(moot(), then=Value("moot")),
               When(reversed_later(), then=Value("reversed")), default=Value(""), output_field=CharField())
    found = (decisions(scope).filter(contradicted()).annotate(_why=why).select_related("tool_call")
             .defer("tool_call__arguments", "tool_call__result", "tool_call__result_text")
             .order_by("-decided_at", "-pk")[:limit])
    return [Contradicted(approval, approval._why) for approval in found]


# --- Over time -------------------------------------------------------------------------------------


@dataclass
class Series:
    days: list[date]
    counts: dict = field(default_factory=dict)  # day -> {"n", "approved", "quick", "contradicted"}
    ranks: dict = field(default_factory=dict)  # (day, percent) -> seconds
    nudges: dict = field(default_factory=dict)  # day -> nudges shown


def quality_series(scope: Scope) -> Series:
    """The scope's figures per site day: three queries."""
    rows = (decisions(scope).annotate(_s=decide_seconds(), _day=TruncDay("decided_at")).values("_day")
            .annotate(**_counts()).order_by())
    counts = {_day(row.pop("_day")): row for row in rows}
    ranks = {(_day(day), p): seconds for (day, p), seconds in
             nearest_ranks(decisions(scope), decide_seconds(), PERCENTS, by=TruncDay("decided_at")).items()}
    nudges = {_day(day): n for day, n in nudges_in(scope).annotate(_day=TruncDay("shown_at")).values_list("_day")
              .annotate(n=Count("pk")).order_by()}
    return Series(scope.days, counts, ranks, nudges)


def _day(value) -> date:
    return date.fromisoformat(value) if isinstance(value, str) else value


def series_charts(series: Series) -> dict:
    """The series as the metrics page's charts draw them (static/js/metrics_charts.js)."""
    x = [int(day_start(day).timestamp()) for day in series.days]

    def count(key: str) -> list:
        return [series.counts.get(day, {}).get(key, 0) for day in series.days]

    def line(label: str, colour: str, values: list, **extra) -> dict:
        return {"label": label, "colour": colour, "values": values, **extra}

    approved, decided = count("approved"), count("n")
    charts = [
        ("decisions", "Decisions by people", "Calls people approved and rejected each day.", "count", [
            line("Approved", "--ok", approved), line("Rejected", "--bad", [n - a for n, a in zip(decided, approved)])]),
        ("time-to-decide", "Time to decide", "From the card appearing to the decision: median (solid) and 90th "
         "percentile (dashed); empty where nobody decided.", "seconds", [
            line(f"p{p}", "--wait", [_seconds(series.ranks.get((day, p))) for day in series.days], dash=p == 90)
            for p in PERCENTS]),
        ("quick-contradicted", "Quick, contradicted, nudged", "Quick approvals, approvals later contradicted, and "
         "nudges shown, each day.", "count", [
            line("Quick approvals", "--warn", count("quick")), line("Contradicted", "--bad", count("contradicted")),
            line("Nudges shown", "--chart-violet", [series.nudges.get(day, 0) for day in series.days])]),
    ]
    return {
        "unit": "day", "zone": timezone.get_current_timezone_name(),
        "charts": [{"id": key, "title": title, "note": note, "unit": "day", "x": x, "format": unit, "series": lines}
                   for key, title, note, unit, lines in charts],
    }


def _seconds(value) -> float | None:
    return None if value is None else round(float(value), 1)
