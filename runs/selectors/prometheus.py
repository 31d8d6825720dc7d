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
from dataclasses import dataclass

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
    count: int
    total: float


def _histograms(rows: QuerySet, labels: tuple[str, ...], value, bounds, scale: float = 1.0) -> list[Histogram]:
    """One histogram per label combination of `rows`, counting `value` (in units of `scale`
    seconds) against `bounds` (seconds) in one query."""
    buckets = {f"le_{i}": Count("pk", filter=Q(observed__lte=bound / scale)) for i, bound in enumerate(bounds)}
    grouped = (
        rows.annotate(observed=value).filter(observed__isnull=False).values(*labels)
        .annotate(n=Count("pk"), total=Coalesce(Sum("observed"), Value(0.0), output_field=FloatField()), **buckets)
        .order_by(*labels)
    )
    return [
        Histogram(
            labels=tuple(str(row[label]) for label in labels),
            cumulative=tuple(row[f"le_{i}"] for i in range(len(bounds))),
            count=row["n"],
            total=row["total"] * scale,
        )
        for row in grouped
    ]


def _merge(histograms: list[Histogram]) -> list[Histogram]:
    """Histograms with equal labels added together (live and archived rows, tools renamed)."""
    merged: dict[tuple, Histogram] = {}
    for h in histograms:
        if (seen := merged.get(h.labels)) is not None:
            h = Histogram(h.labels, tuple(a + b for a, b in zip(seen.cumulative, h.cumulative)),
                          seen.count + h.count, seen.total + h.total)
        merged[h.labels] = h
    return [merged[key] for key in sorted(merged)]


def _add(totals: dict, key: tuple, value) -> None:
    totals[key] = totals.get(key, 0) + value


def runs_started() -> dict[tuple, int]:
    """{(agent,): runs a worker started}"""
    rows = Run.objects.filter(started_at__isnull=False).values("agent__name").annotate(n=Count("pk"))
    return {(row["agent__name"],): row["n"] for row in rows.order_by("agent__name")}


def runs_ended() -> dict[tuple, int]:
    """{(agent, status, stop_reason): runs that ended}"""
    rows = (
        Run.objects.filter(status__in=Run.FINISHED_STATUSES).values("agent__name", "status", "stop_reason")
        .annotate(n=Count("pk")).order_by("agent__name", "status", "stop_reason")
    )
    return {(row["agent__name"], row["status"], row["stop_reason"]): row["n"] for row in rows}


def run_totals() -> dict[tuple, dict]:
    """{(agent,): {"iterations": n, "takeovers": n}} over every run."""
    rows = (
        Run.objects.values("agent__name")
        .annotate(iterations=Sum("iterations"), takeovers=Sum("takeovers")).order_by("agent__name")
    )
    return {(row["agent__name"],): {"iterations": row["iterations"] or 0, "takeovers": row["takeovers"] or 0}
            for row in rows}


def model_usage() -> dict[tuple, dict]:
    """{(agent, model): {"tokens_in", "tokens_out", "cost_usd"}} from every model call."""
    rows = (
        Step.objects.values("run__agent__name", "model")
        .annotate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost_usd=Sum("cost_usd"))
        .order_by("run__agent__name", "model")
    )
    return {(row["run__agent__name"], row["model"]): {key: row[key] or 0 for key in ("tokens_in", "tokens_out",
                                                                                      "cost_usd")}
            for row in rows}


def model_latency() -> list[Histogram]:
    """Seconds each model call took, by the model that answered."""
    return _histograms(Step.objects.all(), ("model",), F("latency_ms"), MODEL_LATENCY_BUCKETS, scale=0.001)


def _tool_label(names: set[str]):
    return lambda name: name if name in names else UNREGISTERED_TOOL


def tool_calls() -> dict[tuple, int]:
    """{(tool, status): calls that reached an outcome}"""
    label = _tool_label(set(Tool.objects.values_list("name", flat=True)))
    rows = (
        ToolCall.objects.filter(status__in=ToolCall.DONE_STATUSES).values("tool_name", "status")
        .annotate(n=Count("pk")).order_by()
    )
    totals: dict[tuple, int] = {}
    for row in rows:
        _add(totals, (label(row["tool_name"]), row["status"]), row["n"])
    return dict(sorted(totals.items()))


def tool_latency() -> list[Histogram]:
    """Seconds each executed call took, by tool and status."""
    label = _tool_label(set(Tool.objects.values_list("name", flat=True)))
    rows = ToolCall.objects.filter(status__in=ToolCall.DONE_STATUSES)
    found = _histograms(rows, ("tool_name", "status"), F("latency_ms"), TOOL_LATENCY_BUCKETS, scale=0.001)
    return _merge([Histogram((label(h.labels[0]), h.labels[1]), h.cumulative, h.count, h.total) for h in found])


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


def _decisions(model) -> QuerySet:
    return model.objects.filter(status__in=DECIDED).annotate(decider=_DECIDER)


def approvals_decided() -> dict[tuple, int]:
    """{(outcome, decider): decisions}, live and archived."""
    totals: dict[tuple, int] = {}
    for model in (Approval, ArchivedApproval):
        for row in _decisions(model).values("status", "decider").annotate(n=Count("pk")).order_by():
            _add(totals, (row["status"], row["decider"]), row["n"])
    return dict(sorted(totals.items()))


def approval_wait() -> list[Histogram]:
    """Seconds from asking to deciding, by decider, live and archived."""
    found = []
    for model in (Approval, ArchivedApproval):
        rows = _decisions(model).filter(decided_at__isnull=False, requested_at__isnull=False)
        found += _histograms(rows, ("decider",), SecondsBetween("decided_at", "requested_at"), APPROVAL_WAIT_BUCKETS)
    return _merge(found)


def runs_driven() -> int:
    """Runs some worker drives now: a live lease, each holding one worker thread, on any host."""
    live = Run.objects.filter(status__in=Run.ACTIVE_STATUSES, lease_expires_at__gt=timezone.now())
    return live.exclude(lease_owner="").exclude(lease_owner__startswith=LEVER_LEASE_PREFIX).count()
