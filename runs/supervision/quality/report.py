"""Decision quality, measured: how people decide a project's destructive calls, for the
Supervision page. Plain functions over the approvals (with their evidence, shadow decisions and
nudges); what each figure means is defined once in runs/models/decision_terms.py (time to decide
from the card appearing, quick approvals, contradicted approvals).

A scope is one project's people's decisions (operators and admins read it) or one person's in
that project (everyone reads their own), decided in the period. Every figure is aggregated by
the database: a fixed number of queries, whatever the number of approvals. The counts are read
once per person and day, and summed here into the scope's, each person's and each day's (a
contradiction costs a join; it is found once). Percentiles are nearest-rank (the value at
position ceil(p/100 * n)), overall, per person and per day, from the seconds read once.
"""
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db import connections
from django.db.models import BooleanField, Case, CharField, Count, F, FloatField, Func, Q, Value, When
from django.utils import timezone

from runs.days import TruncDay, day_of, day_start
from runs.models import Approval, CallEvidence, NudgeShown, ShadowDecision
from runs.models.decision_terms import (
    APPROVED,
    BY_A_PERSON,
    SecondsBetween,
    contradicted,
    contradicted_why,
    decide_seconds,
    quick_approvals,
    why_contradicted,
)
from runs.supervision.rules.shadow_report import verdict

PERIODS = (7, 30, 90)  # days a page may show
DEFAULT_DAYS = 30
LONGEST_SHOWN = 10
CONTRADICTED_SHOWN = 10
PEOPLE_SHOWN = 50
PERCENTS = (50, 90)
REASONS = ("failed", "moot", "reversed")  # why an approval was contradicted (decision_terms.contradicted_why)


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


COUNTED = ("decisions", "approved", "quick", *REASONS, "active_hours")


@dataclass
class Counts:
    """What a group of decisions counts; a contradicted approval under the first reason that holds."""

    decisions: int = 0
    approved: int = 0
    quick: int = 0  # approvals within the project's quick_approval_seconds of the card appearing
    failed: int = 0
    moot: int = 0
    reversed: int = 0
    active_hours: int = 0  # clock hours with a decision (summed over people: person-hours)

    def add(self, row) -> None:
        for name, value in zip(COUNTED, row):
            setattr(self, name, getattr(self, name) + value)

    @property
    def rejected(self) -> int:
        return self.decisions - self.approved

    @property
    def contradicted(self) -> int:
        return self.failed + self.moot + self.reversed

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
    def per_hour(self) -> float | None:
        """Decisions per hour in the hours with any decision (a person's, or people's person-hours)."""
        return round(self.decisions / self.active_hours, 1) if self.active_hours else None


@dataclass
class Figures(Counts):
    decide_p50: float | None = None  # seconds from the card appearing to the decision
    decide_p90: float | None = None
    shadow_agreed: int = 0
    shadow_disagreed: int = 0
    nudges: int = 0

    @property
    def shadow_percent(self) -> float | None:
        return _percent(self.shadow_agreed, self.shadow_agreed + self.shadow_disagreed)


@dataclass
class PersonFigures(Counts):
    name: str = ""
    decide_p50: float | None = None


@dataclass
class Report:
    figures: Figures
    people: list[PersonFigures]  # busiest first; empty when not asked for
    days: list[date]
    by_day: dict = field(default_factory=dict)  # day -> Counts
    ranks: dict = field(default_factory=dict)  # (day, percent) -> seconds
    nudges: dict = field(default_factory=dict)  # day -> nudges shown


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


def quality_report(scope: Scope, *, people: bool = True) -> Report:
    """The scope's figures, each person's (`people`) and each day's, in five queries: the counts
    per person, day and reason of contradiction (each found once for all the rows), the hours
    with decisions per person and day, the seconds to decide (for the percentiles), the rules in
    shadow, the nudges per day. The scope's hours are person-hours: its decisions an hour are a
    person's."""
    grouped = (
        decisions(scope).annotate(_s=decide_seconds(), _why=contradicted_why(scope.project_id), _day=TruncDay("decided_at"))
        .values_list("decided_by_name", "_day", "_why")
        .annotate(n=Count("pk"), approved=Count("pk", filter=Q(status=APPROVED)),
                  quick=Count("pk", filter=quick_approvals("_s")))
        .order_by()
    )
    hours = (decisions(scope).annotate(_day=TruncDay("decided_at")).values_list("decided_by_name", "_day")
             .annotate(hours=Count(HourOf("decided_at"), distinct=True)).order_by())
    figures, by_person, by_day = Figures(), defaultdict(Counts), defaultdict(Counts)
    rows = [(name, day, (n, approved, quick, *(n if why == reason else 0 for reason in REASONS), 0))
            for name, day, why, n, approved, quick in grouped]
    rows += [(name, day, (0, 0, 0, 0, 0, 0, n)) for name, day, n in hours]
    for name, day, counts in rows:
        figures.add(counts)
        by_person[name].add(counts)
        by_day[_day(day)].add(counts)
    ranks = seconds_percentiles(scope)
    figures.decide_p50, figures.decide_p90 = ranks.get(("all", None, 50)), ranks.get(("all", None, 90))
    figures.shadow_agreed, figures.shadow_disagreed = shadow_agreement(scope)
    nudges = {_day(day): n for day, n in nudges_in(scope).annotate(_day=TruncDay("shown_at")).values_list("_day")
              .annotate(n=Count("pk")).order_by()}
    figures.nudges = sum(nudges.values())
    busiest = sorted(by_person.items(), key=lambda item: (-item[1].decisions, item[0]))[:PEOPLE_SHOWN] if people else []
    return Report(
        figures=figures,
        people=[PersonFigures(**vars(counts), name=name, decide_p50=ranks.get(("person", name, 50)))
                for name, counts in busiest],
        days=scope.days, by_day=dict(by_day),
        ranks={(day, p): seconds for (kind, day, p), seconds in ranks.items() if kind == "day"},
        nudges=nudges,
    )


def seconds_percentiles(scope: Scope) -> dict:
    """{("all", None, p) | ("day", day, p) | ("person", name, p): the nearest-rank percentile of the
    seconds to decide}: the seconds read once, bare (a float, a day and a name a decision), and
    sorted here. Ranking them in the database instead (a window function per grouping) sorted
    the rows once per grouping and cost three to four times as much at 100,000 decisions."""
    query = (decisions(scope).annotate(_s=decide_seconds(), _day=TruncDay("decided_at"))
             .values_list("_day", "decided_by_name", "_s").order_by())
    sql, params = query.query.sql_with_params()
    with connections[query.db].cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    groups = defaultdict(list)
    for day, name, seconds in found:
        for key in (("all", None), ("day", _day(day)), ("person", name)):
            groups[key].append(seconds)
    ranks = {}
    for (kind, group), values in groups.items():
        values.sort()
        for p in PERCENTS:
            rank = -(-p * len(values) // 100)  # ceil(p n / 100), in whole numbers
            ranks[kind, group, p] = round(values[max(rank, 1) - 1], 3)  # to the millisecond, as decision_terms measures
    return ranks


# --- Rules in shadow, nudges ---------------------------------------------------------------------


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


# --- Longest waits, contradicted calls ------------------------------------------------------------


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


WHY_WORDS = {"failed": "failed", "moot": "changed nothing", "reversed": "reversed by a later call"}


def contradicted_calls(scope: Scope, *, limit: int = CONTRADICTED_SHOWN) -> list[Contradicted]:
    """The scope's latest approvals that were later contradicted, with the first reason that holds
    (told apart here for the few rows read: in SQL, a second time would find the reversals again)."""
    found = (decisions(scope).filter(contradicted(scope.project_id)).select_related("tool_call", "evidence")
             .defer("tool_call__arguments", "tool_call__result", "evidence__data")
             .order_by("-decided_at", "-pk")[:limit])
    return [Contradicted(a, why_contradicted(a.tool_call.status, _evidence_state(a), a.tool_call.result_text))
            for a in found]


def _evidence_state(approval: Approval) -> dict:
    try:
        return approval.evidence.state
    except CallEvidence.DoesNotExist:
        return {}


# --- Over time -------------------------------------------------------------------------------------


def _day(value) -> date:
    return date.fromisoformat(value) if isinstance(value, str) else value


def series_charts(series: Report) -> dict:
    """The report's days as the metrics page's charts draw them (static/js/metrics_charts.js)."""
    x = [int(day_start(day).timestamp()) for day in series.days]
    none = Counts()

    def count(key: str) -> list:
        return [getattr(series.by_day.get(day, none), key) for day in series.days]

    def line(label: str, colour: str, values: list, **extra) -> dict:
        return {"label": label, "colour": colour, "values": values, **extra}

    approved, decided = count("approved"), count("decisions")
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
