"""How a rule in shadow compares with the people who decided meanwhile: per version, how many
calls it would have decided, how often it agreed with the person's decision, and the calls where
it did not. Reads only; two queries whatever the number of calls.

Agreement is counted only where both sides decided: the rule would approve or reject, and a
person approved or rejected. A person's approval of edited arguments disagrees with a rule that
would have approved the model's own arguments. A rule that would have left the call to people
(an ask action, or an approval a safeguard holds back) neither agrees nor disagrees; nor does a
call something else decided automatically, or one nobody decided (still waiting, expired, the
run ended).
"""
from dataclasses import dataclass, field

from django.db.models import BooleanField, Case, Count, Q, Value, When

from runs.models import Approval, ShadowDecision

DISAGREEMENTS_SHOWN = 50
Outcome = ShadowDecision.Outcome
_DECIDED_BY_PEOPLE = (Approval.Status.APPROVED, Approval.Status.REJECTED)


@dataclass
class VersionAgreement:
    version: int
    seen: int = 0  # calls it would have decided
    agreed: int = 0
    disagreed: int = 0
    left_to_people: int = 0  # it would have asked people (or a safeguard would have)
    decided_otherwise: int = 0  # something else decided automatically (a rule, a grant, a policy)
    undecided: int = 0  # still waiting, expired, or closed with the run
    outcomes: dict = field(default_factory=dict)  # outcome -> count

    @property
    def compared(self) -> int:
        return self.agreed + self.disagreed

    @property
    def agreement_percent(self) -> int | None:
        return round(100 * self.agreed / self.compared) if self.compared else None

    def as_dict(self) -> dict:
        return {
            "version": self.version, "seen": self.seen, "agreed": self.agreed, "disagreed": self.disagreed,
            "agreement_percent": self.agreement_percent, "left_to_people": self.left_to_people,
            "decided_otherwise": self.decided_otherwise, "undecided": self.undecided, "outcomes": self.outcomes,
        }


@dataclass
class Disagreement:
    decision: ShadowDecision
    people: str  # what the person did, in words

    def as_dict(self) -> dict:
        d, approval = self.decision, self.decision.approval
        return {
            "approval": approval.pk, "run": approval.run_id, "tool": approval.tool_call.tool_name,
            "args_hash": approval.tool_call.args_hash, "rule_version": d.rule_version, "would": d.outcome,
            "would_words": d.get_outcome_display(), "detail": d.detail, "people": self.people,
            "decided_by": approval.decided_by_name, "decided_at": approval.decided_at,
        }


@dataclass
class ShadowReport:
    versions: list[VersionAgreement]
    disagreements: list[Disagreement]

    @property
    def seen(self) -> int:
        return sum(v.seen for v in self.versions)

    def as_dict(self) -> dict:
        return {"versions": [v.as_dict() for v in self.versions],
                "disagreements": [d.as_dict() for d in self.disagreements]}


def verdict(outcome: str, status: str, automatic: bool, edited: bool) -> str:
    """"agreed", "disagreed", "left_to_people", "decided_otherwise" or "undecided": one shadow
    decision against what happened to its call."""
    if status not in _DECIDED_BY_PEOPLE:
        return "undecided"
    if automatic:
        return "decided_otherwise"
    if outcome not in (Outcome.APPROVE, Outcome.REJECT):
        return "left_to_people"
    approved_as_is = status == Approval.Status.APPROVED and not edited
    if outcome == Outcome.APPROVE:
        return "agreed" if approved_as_is else "disagreed"
    return "agreed" if status == Approval.Status.REJECTED else "disagreed"


def _edited():
    return Case(When(~Q(approval__edited_args_hash=""), then=Value(True)), default=Value(False), output_field=BooleanField())


def shadow_report(rule_key: int, *, shown: int = DISAGREEMENTS_SHOWN) -> ShadowReport:
    """The rule's shadow record, newest version first, and its newest disagreements."""
    rows = (
        ShadowDecision.objects.filter(rule_key=rule_key)
        .annotate(edited=_edited())
        .values("rule_version", "outcome", "approval__status", "approval__automatic", "edited")
        .annotate(n=Count("pk"))
        .order_by()
    )
    versions: dict[int, VersionAgreement] = {}
    for row in rows:
        v = versions.setdefault(row["rule_version"], VersionAgreement(row["rule_version"]))
        n = row["n"]
        v.seen += n
        v.outcomes[row["outcome"]] = v.outcomes.get(row["outcome"], 0) + n
        kind = verdict(row["outcome"], row["approval__status"], row["approval__automatic"], row["edited"])
        setattr(v, kind, getattr(v, kind) + n)
    disagreeing = (
        Q(outcome=Outcome.APPROVE, approval__status=Approval.Status.REJECTED)
        | Q(outcome=Outcome.APPROVE, approval__status=Approval.Status.APPROVED, edited=True)
        | Q(outcome=Outcome.REJECT, approval__status=Approval.Status.APPROVED)
    )
    newest = (
        ShadowDecision.objects.filter(rule_key=rule_key).annotate(edited=_edited())
        .filter(disagreeing, approval__automatic=False)
        .select_related("approval", "approval__tool_call")
        .order_by("-created_at", "-pk")[:shown]
    )
    return ShadowReport(
        versions=sorted(versions.values(), key=lambda v: -v.version),
        disagreements=[Disagreement(d, _people_words(d.approval)) for d in newest],
    )


def _people_words(approval: Approval) -> str:
    who = approval.decided_by_name or "a person"
    if approval.status == Approval.Status.REJECTED:
        return f"rejected by {who}" + (f": {approval.reason}" if approval.reason else "")
    return f"approved by {who} with edited arguments" if approval.edited_args_hash else f"approved by {who}"
