"""Reads for /metrics: running totals of everything runs did, counted from the database.

Counters are sums over rows, not numbers kept in a process: a run driven by any worker process
on any host is counted the moment its rows commit, and every web process answers a scrape with
the same figures. One GROUP BY query per table (runs, model calls, tool calls, live and archived
approvals), whatever the number of runs; histograms are counted by the database too, one
conditional COUNT per bucket.

Work is counted once: a fork starts with copies of its parent's model calls, tool calls and
iterations (runs/lifecycle/forks.py), which the parent already counted; only what the fork does
after its fork point counts for it (runs/observability/metrics/own_work.py, as on the metrics page, in its
rollups and in the budget alerts).

Counters never go down: pruning archives every decision first (they are counted from live and
archived rows), and adds what the runs, model calls and tool calls it deletes had counted to
PrunedTotals in the same transaction (runs/lifecycle/archive.py), which is added back here.
"""
from dataclasses import dataclass, field

from django.db.models import Count, F, FloatField, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from runs.models import Approval, ArchivedApproval, PrunedTotals, Run, Step, ToolCall
from runs.models.deciders import decider_kind_sql
from runs.observability.metrics import own_work
from runs.observability.metrics.aggregates import approval_wait_seconds
from toolsapp.models import Tool

# PrunedTotals keeps counts per bound: after changing the model or tool bounds, delete its
# "steps" or "tool_calls" row (those histograms then restart, as after a reset).
MODEL_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
TOOL_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
APPROVAL_WAIT_BUCKETS = (5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 14400.0, 86400.0)
# The model names a tool; a name no tool has (a model inventing tools) is counted under this
# label, so one misbehaving model cannot add a series per invented name.
UNREGISTERED_TOOL = "unregistered"
# Levers hold a run's lease for a moment from the web process; that is not a worker's slot.
LEVER_LEASE_PREFIX = "lever-"
DECIDED = (Approval.Status.APPROVED, Approval.Status.REJECTED, Approval.Status.EXPIRED, Approval.Status.CLOSED)


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


def merge(histograms: list[Histogram]) -> list[Histogram]:
    """Histograms with equal labels added together (live and archived rows, tools renamed)."""
    merged: dict[tuple, Histogram] = {}
    for h in histograms:
        if (seen := merged.get(h.labels)) is not None:
            h = Histogram(h.labels, tuple(a + b for a, b in zip(seen.cumulative, h.cumulative)),
                          seen.count + h.count, seen.total + h.total, seen.rows + h.rows,
                          {key: seen.extra.get(key, 0) + h.extra.get(key, 0) for key in {*seen.extra, *h.extra}})
        merged[h.labels] = h
    return [merged[key] for key in sorted(merged)]


def _add(totals: dict, key: tuple, value) -> None:
    totals[key] = totals.get(key, 0) + value


def _run_rows(run_ids) -> list[Histogram]:
    runs = Run.production.all() if run_ids is None else Run.production.filter(pk__in=run_ids)
    rows = (
        runs.values("agent__name", "status", "stop_reason")
        .annotate(n=Count("pk"), started=Count("pk", filter=Q(started_at__isnull=False)),
                  iterations=Sum(own_work.own_iterations()), takeovers=Sum("takeovers"),
                  compactions=Sum("compactions"))
        .order_by("agent__name", "status", "stop_reason")
    )
    return [Histogram((row["agent__name"], row["status"], row["stop_reason"]), (), 0, 0.0, row["n"],
                      {key: row[key] or 0 for key in ("started", "iterations", "takeovers", "compactions")})
            for row in rows]


def _step_rows(run_ids) -> list[Histogram]:
    steps = Step.objects.filter(run__experiment=False)  # an experiment's runs count nowhere, pruned or not
    steps = own_work.own_steps(steps if run_ids is None else steps.filter(run_id__in=run_ids))
    return _histograms(steps, ("run__agent__name", "model"), F("latency_ms"), MODEL_LATENCY_BUCKETS, scale=0.001,
                       tokens_in=F("tokens_in"), tokens_out=F("tokens_out"), cost_usd=F("cost_usd"),
                       tokens_cached=F("tokens_cached"), tokens_reasoning=F("tokens_reasoning"))


def _call_rows(run_ids) -> list[Histogram]:
    names = set(Tool.objects.values_list("name", flat=True))
    calls = own_work.own_calls(ToolCall.objects.filter(status__in=ToolCall.DONE_STATUSES, run__experiment=False))
    calls = calls if run_ids is None else calls.filter(run_id__in=run_ids)
    return merge([
        Histogram((h.labels[0] if h.labels[0] in names else UNREGISTERED_TOOL, h.labels[1]), h.cumulative,
                  h.count, h.total, h.rows)
        for h in _histograms(calls, ("tool_name", "status"), F("latency_ms"), TOOL_LATENCY_BUCKETS, scale=0.001)
    ])


# What deleting runs takes away from the counters, by family of PrunedTotals.
PRUNED_FAMILIES = {"runs": _run_rows, "steps": _step_rows, "tool_calls": _call_rows}


def figures_of_runs(family: str, *, run_ids: list[int]) -> list[Histogram]:
    """What these runs count in `family`: folded into PrunedTotals before they are deleted."""
    return PRUNED_FAMILIES[family](run_ids)


def encode(histograms: list[Histogram]) -> list:
    return [[list(h.labels), list(h.cumulative), h.count, h.total, h.rows, h.extra] for h in histograms]


def decode(data: list) -> list[Histogram]:
    return [Histogram(tuple(labels), tuple(cumulative), count, total, rows, extra)
            for labels, cumulative, count, total, rows, extra in data]


def _with_pruned(family: str, pruned: dict) -> list[Histogram]:
    return merge(PRUNED_FAMILIES[family](None) + decode(pruned.get(family, [])))


def pruned_totals() -> dict:
    return dict(PrunedTotals.objects.values_list("family", "data"))


@dataclass(frozen=True)
class RunFigures:
    started: dict  # {(agent,): runs a worker started}
    ended: dict  # {(agent, status, stop_reason): runs that ended}
    iterations: dict  # {(agent,): loop iterations}
    takeovers: dict  # {(agent,): leases taken over from dead workers}
    compactions: dict  # {(agent,): requests that summarised older results}


def run_figures(pruned: dict | None = None) -> RunFigures:
    figures = RunFigures({}, {}, {}, {}, {})
    for h in _with_pruned("runs", pruned_totals() if pruned is None else pruned):
        agent, status, stop_reason = h.labels
        _add(figures.started, (agent,), h.extra["started"])
        _add(figures.iterations, (agent,), h.extra["iterations"])
        _add(figures.takeovers, (agent,), h.extra["takeovers"])
        _add(figures.compactions, (agent,), h.extra.get("compactions", 0))  # not in totals pruned before
        if status in Run.FINISHED_STATUSES:
            figures.ended[(agent, status, stop_reason)] = h.rows
    return figures


def model_figures(pruned: dict | None = None) -> tuple[dict, list[Histogram]]:
    """({(agent, model): {"tokens_in", "tokens_out", "cost_usd"}}, seconds each model call took
    by the model that answered)."""
    found = _with_pruned("steps", pruned_totals() if pruned is None else pruned)
    usage = {h.labels: h.extra for h in found}
    latency = merge([Histogram((h.labels[1],), h.cumulative, h.count, h.total, h.rows) for h in found])
    return usage, latency


def tool_figures(pruned: dict | None = None) -> tuple[dict, list[Histogram]]:
    """({(tool, status): calls that reached an outcome}, seconds those that ran took)."""
    found = _with_pruned("tool_calls", pruned_totals() if pruned is None else pruned)
    return {h.labels: h.rows for h in found}, [h for h in found if h.count]


def approvals_pending() -> int:
    return Approval.objects.filter(status=Approval.Status.PENDING).count()


# Who decided, from the fields live and archived approvals share: a person, a rule, the run's own
# automatic approval (its policy or a grant) or nobody in time (expiry). Exclusive; pending is none.
_DECIDER = decider_kind_sql(automatic="automatic")


def decision_figures() -> tuple[dict, list[Histogram]]:
    """({(outcome, decider): decisions}, seconds from asking to deciding by decider), live and
    archived decisions together."""
    found = []
    for model in (Approval, ArchivedApproval):
        rows = model.objects.filter(status__in=DECIDED).annotate(decider=_DECIDER)
        found += _histograms(rows, ("status", "decider"), approval_wait_seconds(),
                             APPROVAL_WAIT_BUCKETS)
    decided = {h.labels: h.rows for h in merge(found)}
    wait = merge([Histogram((h.labels[1],), h.cumulative, h.count, h.total, h.rows) for h in found])
    return decided, [h for h in wait if h.count]


def runs_driven() -> int:
    """Runs some worker drives now: a live lease, each holding one worker thread, on any host."""
    live = Run.production.filter(status__in=Run.ACTIVE_STATUSES, lease_expires_at__gt=timezone.now())
    return live.exclude(lease_owner="").exclude(lease_owner__startswith=LEVER_LEASE_PREFIX).count()
