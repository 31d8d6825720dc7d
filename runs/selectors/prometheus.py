"""Reads for /metrics: running totals of everything runs did, counted from the database.

Counters are sums over rows, not numbers kept in a process: a run driven by any worker process
on any host is counted the moment its rows commit, and every web process answers a scrape with
the same figures. Each family is one GROUP BY query (a dozen per scrape, whatever the number of
runs); histograms are counted by the database too, one conditional COUNT per bucket.

Approvals are counted from live and archived rows together (pruning archives every decision
first), so their counters never go down. Runs, model calls and tool calls are deleted when old
runs are pruned: their counters go down then, which Prometheus reads as a counter reset (see the
README's "Prometheus").
"""
from dataclasses import dataclass, field

from django.db.models import Case, CharField, Count, F, FloatField, Q, QuerySet, Sum, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from runs.models import Approval, ArchivedApproval, Run, Step, ToolCall
from runs.selectors.aggregates import SecondsBetween
from toolsapp.models import Tool

MODEL_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
TOOL_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
APPROVAL_WAIT_BUCKETS = (5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)
# The model names a tool; a name no tool has (a model inventing tools) is counted under this
# label, so one misbehaving model cannot add a series per invented name.
UNREGISTERED_TOOL = "unregistered"
# Levers hold a run's lease for a moment from the web process; that is not a worker's slot.
LEVER_LEASE_PREFIX = "lever-"
DECIDED = (Approval.Status.APPROVED, Approval.Status.REJECTED, Approval.Status.EXPIRED)


@dataclass(frozen=True)
class Histogram:
    labels: tuple[str, ...]
    cumulative: tuple[int, ...]  # observations <= each bound, in the bounds' order
    count: int  # observations (rows with a value)
    total: float
    rows: int = 0  # rows of the group, with a value or not
    extra: dict = field(default_factory=dict)  # further sums of the group


def _histograms(rows: QuerySet, labels: tuple[str, ...], value, bounds, scale: float = 1.0, **sums) -> list[Histogram]:
    """One histogram per label combination of `rows`, counting `value` (in units of `scale`
    seconds; rows without one are counted in `rows` only) against `bounds` (seconds), with the
    `sums` of each group, in one query."""
    buckets = {f"le_{i}": Count("pk", filter=Q(observed__lte=bound / scale)) for i, bound in enumerate(bounds)}
    grouped = (
        rows.annotate(observed=value).values(*labels)
        .annotate(rows=Count("pk"), n=Count("observed"), total=Coalesce(Sum("observed"), Value(0.0),
                                                                         output_field=FloatField()),
                  **buckets, **{name: Sum(expression) for name, expression in sums.items()})
        .order_by(*labels)
    )
    return [
        Histogram(
            labels=tuple(str(row[label]) for label in labels),
            cumulative=tuple(row[f"le_{i}"] for i in range(len(bounds))),
            count=row["n"],
            total=row["total"] * scale,
            rows=row["rows"],
            extra={name: row[name] or 0 for name in sums},
        )
        for row in grouped
    ]


def _merge(histograms: list[Histogram]) -> list[Histogram]:
    """Histograms with equal labels added together (live and archived rows, tools renamed)."""
    merged: dict[tuple, Histogram] = {}
    for h in histograms:
        if (seen := merged.get(h.labels)) is not None:
            h = Histogram(h.labels, tuple(a + b for a, b in zip(seen.cumulative, h.cumulative)),
                          seen.count + h.count, seen.total + h.total, seen.rows + h.rows)
        merged[h.labels] = h
    return [merged[key] for key in sorted(merged)]


def _add(totals: dict, key: tuple, value) -> None:
    totals[key] = totals.get(key, 0) + value


@dataclass(frozen=True)
class RunFigures:
    started: dict  # {(agent,): runs a worker started}
    ended: dict  # {(agent, status, stop_reason): runs that ended}
    iterations: dict  # {(agent,): loop iterations}
    takeovers: dict  # {(agent,): leases taken over from dead workers}


def run_figures() -> RunFigures:
    rows = (
        Run.objects.values("agent__name", "status", "stop_reason")
        .annotate(n=Count("pk"), started=Count("pk", filter=Q(started_at__isnull=False)),
                  iterations=Sum("iterations"), takeovers=Sum("takeovers"))
        .order_by("agent__name", "status", "stop_reason")
    )
    figures = RunFigures({}, {}, {}, {})
    for row in rows:
        agent = (row["agent__name"],)
        _add(figures.started, agent, row["started"])
        _add(figures.iterations, agent, row["iterations"] or 0)
        _add(figures.takeovers, agent, row["takeovers"] or 0)
        if row["status"] in Run.FINISHED_STATUSES:
            figures.ended[(row["agent__name"], row["status"], row["stop_reason"])] = row["n"]
    return figures


def model_figures() -> tuple[dict, list[Histogram]]:
    """({(agent, model): {"tokens_in", "tokens_out", "cost_usd"}}, seconds each model call took
    by the model that answered), from every model call in one query."""
    found = _histograms(Step.objects.all(), ("run__agent__name", "model"), F("latency_ms"), MODEL_LATENCY_BUCKETS,
                        scale=0.001, tokens_in=F("tokens_in"), tokens_out=F("tokens_out"), cost_usd=F("cost_usd"))
    usage = {h.labels: h.extra for h in found}
    latency = _merge([Histogram((h.labels[1],), h.cumulative, h.count, h.total, h.rows) for h in found])
    return usage, latency


def tool_figures() -> tuple[dict, list[Histogram]]:
    """({(tool, status): calls that reached an outcome}, seconds those that ran took)."""
    names = set(Tool.objects.values_list("name", flat=True))
    rows = ToolCall.objects.filter(status__in=ToolCall.DONE_STATUSES)
    found = _merge([
        Histogram((h.labels[0] if h.labels[0] in names else UNREGISTERED_TOOL, h.labels[1]), h.cumulative,
                  h.count, h.total, h.rows)
        for h in _histograms(rows, ("tool_name", "status"), F("latency_ms"), TOOL_LATENCY_BUCKETS, scale=0.001)
    ])
    return {h.labels: h.rows for h in found}, [h for h in found if h.count]


def approvals_pending() -> int:
    return Approval.objects.filter(status=Approval.Status.PENDING).count()


_ANSWERED = (Approval.Status.APPROVED, Approval.Status.REJECTED)
# Who decided, from the fields live and archived approvals share: a person, a rule, the run's own
# automatic approval (its policy or a grant) or nobody in time (expiry). Exclusive; pending is none.
_DECIDER = Case(
    When(status=Approval.Status.EXPIRED, then=Value("expiry")),
    When(status__in=_ANSWERED, automatic=False, then=Value("person")),
    When(Q(status__in=_ANSWERED, automatic=True) & ~Q(rule_name=""), then=Value("rule")),
    When(status__in=_ANSWERED, automatic=True, then=Value("automatic")),
    output_field=CharField(),
)


def approval_figures() -> tuple[dict, list[Histogram]]:
    """({(outcome, decider): decisions}, seconds from asking to deciding by decider), live and
    archived decisions together."""
    found = []
    for model in (Approval, ArchivedApproval):
        rows = model.objects.filter(status__in=DECIDED).annotate(decider=_DECIDER)
        found += _histograms(rows, ("status", "decider"), SecondsBetween("decided_at", "requested_at"),
                             APPROVAL_WAIT_BUCKETS)
    decided = {h.labels: h.rows for h in _merge(found)}
    wait = _merge([Histogram((h.labels[1],), h.cumulative, h.count, h.total, h.rows) for h in found])
    return decided, [h for h in wait if h.count]


def runs_driven() -> int:
    """Runs some worker drives now: a live lease, each holding one worker thread, on any host."""
    live = Run.objects.filter(status__in=Run.ACTIVE_STATUSES, lease_expires_at__gt=timezone.now())
    return live.exclude(lease_owner="").exclude(lease_owner__startswith=LEVER_LEASE_PREFIX).count()
