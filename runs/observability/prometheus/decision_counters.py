"""/metrics' figures of how people decide, as the Supervision page counts them (the terms are
runs/models/decision_terms.py's): decisions per project by who or what decided, seconds from a
card appearing to a person's decision, quick approvals, approvals later contradicted, and nudges
shown. Labels are the project's slug, the kind of decider and the reason a call was contradicted:
a bounded set, never a person's name.

Counted from the rows at scrape time like every other counter (counters.py), one GROUP BY each;
what pruned runs had counted is kept in PrunedTotals (pruned_totals.py). Two figures are read
again as they stand, so they may step down once, which Prometheus reads as a reset: quick
approvals after a project's quick_approval_seconds changes, and a contradiction whose later call
is pruned before the approval it reversed.
"""
from django.db.models import Case, CharField, Count, IntegerField, Q, Value, When

from runs.models import Approval, NudgeShown
from runs.models.deciders import ANSWERED, CLOSED, EXPIRED
from runs.models.decision_terms import BY_A_PERSON, contradicted_why, decide_seconds, quick_approvals
from runs.observability.prometheus.counters import Histogram, _histograms, decode, merge

DECIDE_BUCKETS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0)
PROJECT = "run__agent__project__slug"

# Who or what decided, as deciders.decider_kind says it (a rule before a grant), with a grant and
# the run's policy apart: live rows know their grant.
DECIDER = Case(
    When(status=EXPIRED, then=Value("expiry")),
    When(status=CLOSED, then=Value("run_ended")),
    When(status__in=ANSWERED, automatic=False, then=Value("person")),
    When(Q(status__in=ANSWERED, automatic=True) & ~Q(rule_name=""), then=Value("rule")),
    When(status__in=ANSWERED, automatic=True, grant__isnull=False, then=Value("grant")),
    When(status__in=ANSWERED, automatic=True, then=Value("policy")),
    output_field=CharField(),
)


def _approvals(run_ids):
    return Approval.objects.all() if run_ids is None else Approval.objects.filter(run_id__in=run_ids)


def _counted(rows, labels: tuple[str, ...]) -> list[Histogram]:
    grouped = rows.values(*labels).annotate(n=Count("pk")).order_by(*labels)
    return [Histogram(tuple(str(row[label]) for label in labels), (), 0, 0.0, row["n"]) for row in grouped]


def _decide_rows(run_ids) -> list[Histogram]:
    """Seconds from the card appearing to a person's decision, per project; with the approvals and
    the quick ones among them."""
    quick = Case(When(quick_approvals("observed"), then=Value(1)), default=Value(0), output_field=IntegerField())
    approved = Case(When(status=Approval.Status.APPROVED, then=Value(1)), default=Value(0), output_field=IntegerField())
    return _histograms(_approvals(run_ids).filter(BY_A_PERSON), (PROJECT,), decide_seconds(), DECIDE_BUCKETS,
                       quick=quick, approved=approved)


def _decider_rows(run_ids) -> list[Histogram]:
    return _counted(_approvals(run_ids).exclude(status=Approval.Status.PENDING).annotate(decider=DECIDER),
                    (PROJECT, "decider"))


def _contradicted_rows(run_ids) -> list[Histogram]:
    approved = _approvals(run_ids).filter(status=Approval.Status.APPROVED)  # only an approval is contradicted
    # Grouped by the reason, "" included and left out here: filtering on it in SQL would find
    # the reversals twice.
    rows = approved.annotate(why=contradicted_why(), decider=DECIDER)
    return [h for h in _counted(rows, (PROJECT, "decider", "why")) if h.labels[2]]


def _nudge_rows(run_ids) -> list[Histogram]:
    rows = NudgeShown.objects.all() if run_ids is None else NudgeShown.objects.filter(approval__run_id__in=run_ids)
    return _counted(rows, ("approval__run__agent__project__slug",))


# What deleting runs takes away from these counters, by family of PrunedTotals.
PRUNED_FAMILIES = {
    "decide_seconds": _decide_rows, "project_decisions": _decider_rows, "contradicted": _contradicted_rows,
    "nudges_shown": _nudge_rows,
}


def _with_pruned(family: str, pruned: dict) -> list[Histogram]:
    return merge(PRUNED_FAMILIES[family](None) + decode(pruned.get(family, [])))


def decision_quality_figures(pruned: dict) -> dict:
    """{"decided": {(project, decider): n}, "decide_seconds": [Histogram by (project,)],
    "quick": {(project,): n}, "contradicted": {(project, decider, why): n}, "nudges": {(project,): n}}."""
    decide = _with_pruned("decide_seconds", pruned)
    return {
        "decided": {h.labels: h.rows for h in _with_pruned("project_decisions", pruned)},
        "decide_seconds": [h for h in decide if h.count],
        "quick": {h.labels: h.extra.get("quick", 0) for h in decide},
        "contradicted": {h.labels: h.rows for h in _with_pruned("contradicted", pruned)},
        "nudges": {h.labels: h.rows for h in _with_pruned("nudges_shown", pruned)},
    }
