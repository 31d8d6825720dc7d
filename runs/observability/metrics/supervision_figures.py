"""Reads for the metrics page's supervision part: who decides the destructive calls, what each
approval rule did, the time rules and grants saved, and how long calls wait for people.

Over the same approvals as the rest of the page (those of the runs created in the period). Counts
are one GROUP BY each; percentiles are nearest-rank and computed by the database
(runs/observability/metrics/aggregates.py), per rule and per tool for the WAIT_GROUPS largest groups.
"""
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from runs.models import Approval
from runs.observability.metrics.aggregates import approval_wait_seconds, grouped_percentiles, percentile_values

WAIT_GROUPS = 50  # rows of each wait table (the groups with the most decisions)
RULE_ROWS = 100  # rows of the rule hit table
NO_RULE = "(no rule)"

_DECIDED = (Approval.Status.APPROVED, Approval.Status.REJECTED)
# Who decided, as one condition each: they never overlap, and every decision is in one. A grant
# is named before a rule: a rule that said "ask" may be recorded on an approval a grant then took.
DECIDERS = {
    "person": ("People", Q(status__in=_DECIDED, automatic=False)),
    "rule": ("Rules", Q(status__in=_DECIDED, automatic=True, grant__isnull=True) & ~Q(rule_name="")),
    "grant": ("Grants for a run", Q(status__in=_DECIDED, automatic=True, grant__isnull=False)),
    "policy": ("The run's policy", Q(status__in=_DECIDED, automatic=True, grant__isnull=True, rule_name="")),
    "expiry": ("Expiry", Q(status=Approval.Status.EXPIRED)),
    # Nobody decided and no timeout passed: the run ended first (cancelled, stopped, a limit).
    "run_ended": ("Closed: the run ended", Q(status=Approval.Status.CLOSED)),
}
# What a person no longer had to open: the calls rules and grants decided.
SAVED_BY = ("rule", "grant")


@dataclass(frozen=True)
class DeciderShare:
    kind: str  # a key of DECIDERS
    label: str
    count: int
    share: float | None  # of all decisions in the period; None when there are none

    @property
    def percent(self) -> float:
        return 100 * (self.share or 0.0)


@dataclass(frozen=True)
class RuleHits:
    rule_name: str
    rule_version: int | None
    approved: int  # approved automatically by the rule
    rejected: int  # rejected automatically by the rule
    asked: int  # sent to people: "ask", two people, a group, or an "approve" a safeguard stopped
    other: int  # matched, then a grant of the run decided

    @property
    def hits(self) -> int:
        return self.approved + self.rejected + self.asked + self.other


@dataclass(frozen=True)
class WaitRow:
    key: str  # a rule's name (all its versions), or a tool's
    count: int
    p50: float | None
    p90: float | None


@dataclass(frozen=True)
class SupervisionFigures:
    decided: int  # decisions in the period, pending approvals left out
    deciders: list[DeciderShare]
    rule_hits: list[RuleHits]
    saved_calls: int  # decided by rules or grants: calls no person had to open
    person_wait_p50: float | None  # median seconds from asked to decided, people's decisions
    person_wait_p90: float | None
    person_decisions: int
    wait_by_rule: list[WaitRow]
    wait_by_tool: list[WaitRow]

    @property
    def saved_minutes(self) -> float | None:
        """saved_calls times the median wait of people's decisions, in minutes (None without any)."""
        if self.person_wait_p50 is None:
            return None
        return self.saved_calls * self.person_wait_p50 / 60


def supervision_summary(approvals: QuerySet[Approval]) -> SupervisionFigures:
    """The supervision figures of `approvals` (usually the period's, see metrics_summary)."""
    # Aliased: "rule" and "grant" are also fields of an approval.
    found = approvals.aggregate(**{f"n_{kind}": Count("pk", filter=q) for kind, (_label, q) in DECIDERS.items()})
    counts = {kind: found[f"n_{kind}"] for kind in DECIDERS}
    decided = sum(counts.values())
    deciders = [
        DeciderShare(kind=kind, label=label, count=counts[kind], share=counts[kind] / decided if decided else None)
        for kind, (label, _q) in DECIDERS.items()
    ]
    by_people = approvals.filter(DECIDERS["person"][1], decided_at__isnull=False)
    wait = approval_wait_seconds()
    person_decisions = by_people.count()
    overall = percentile_values(by_people, wait, person_decisions, (50, 90))
    return SupervisionFigures(
        decided=decided,
        deciders=deciders,
        rule_hits=_rule_hits(approvals),
        saved_calls=sum(counts[kind] for kind in SAVED_BY),
        person_wait_p50=_seconds(overall[50]),
        person_wait_p90=_seconds(overall[90]),
        person_decisions=person_decisions,
        wait_by_rule=_waits(by_people, "rule_name", wait, empty=NO_RULE),
        wait_by_tool=_waits(by_people, "tool_call__tool_name", wait),
    )


def _rule_hits(approvals: QuerySet[Approval]) -> list[RuleHits]:
    automatic_rule = Q(automatic=True, grant__isnull=True)
    rows = (
        approvals.exclude(rule_name="")
        .order_by()
        .values_list("rule_name", "rule_version")
        .annotate(
            approved=Count("pk", filter=automatic_rule & Q(status=Approval.Status.APPROVED)),
            rejected=Count("pk", filter=automatic_rule & Q(status=Approval.Status.REJECTED)),
            asked=Count("pk", filter=Q(automatic=False)),
            other=Count("pk", filter=Q(automatic=True, grant__isnull=False)),
            hits=Count("pk"),
        )
        .order_by("-hits", "rule_name", "-rule_version")[:RULE_ROWS]
    )
    return [
        RuleHits(rule_name=name, rule_version=version, approved=approved, rejected=rejected, asked=asked, other=other)
        for name, version, approved, rejected, asked, other, _hits in rows
    ]


def _waits(decided: QuerySet[Approval], group: str, wait, *, empty: str = "") -> list[WaitRow]:
    rows = grouped_percentiles(decided, group, wait, (50, 90), limit=WAIT_GROUPS)
    return [
        WaitRow(key=key or empty, count=n, p50=_seconds(found[50]), p90=_seconds(found[90])) for key, n, found in rows
    ]


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
