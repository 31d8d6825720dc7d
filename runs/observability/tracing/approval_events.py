"""The decision a call waited for, on its span: who decided (the kind of decider, never a name),
how long it waited from asking and, for a person, from the card appearing (runs/models/
decision_terms.py), whether the arguments were edited, how many twins the decider was shown,
and whether a nudge asked them for a reason.

What the approval's evidence says is read once per commit, in the committing thread
(`decision_facts`, one query, only when the commit holds decided approvals); the spans are built
later, in the exporting thread, from the copies that carry it (no query there)."""
from runs.models import Approval, CallEvidence, NudgeShown
from runs.models.decision_terms import seconds_to_decide
from runs.observability.tracing.values import unix_ns

FACTS = "_trace_decision_facts"  # (shown_at, twins shown, nudged), set on the frozen approval


def decision_facts(approvals: list[Approval]) -> None:
    """Set each decided approval's facts from its evidence and nudges, in one query."""
    decided = {a.pk: a for a in approvals if a.decided_at is not None}
    if not decided:
        return
    nudged = set(NudgeShown.objects.filter(approval_id__in=decided).values_list("approval_id", flat=True))
    found = {pk: (shown_at, twins) for pk, shown_at, twins in
             CallEvidence.objects.filter(pk__in=decided).values_list("pk", "shown_at", "twins_at_decision")}
    for pk, approval in decided.items():
        shown_at, twins = found.get(pk, (None, []))
        approval.__dict__[FACTS] = (shown_at, len(twins) if isinstance(twins, list) else 0, pk in nudged)


def approval_attributes(approval: Approval) -> dict:
    attributes = {"agentsite.approval.status": approval.status}
    kind = Approval.decider_kind(approval.status, approval.automatic, approval.grant_id, approval.rule_name)
    if kind:
        attributes["agentsite.approval.decider"] = kind
    if approval.decided_at is None:
        return attributes
    # Never below 0: a decision stamped by a host whose clock is behind the asking one's.
    attributes["agentsite.approval.wait_ms"] = max((approval.decided_at - approval.requested_at).total_seconds() * 1000, 0.0)
    if approval.status == Approval.Status.APPROVED:
        attributes["agentsite.approval.edited"] = bool(approval.edited_args_hash)
    facts = approval.__dict__.get(FACTS)
    if facts is not None:
        shown_at, twins, nudged = facts
        if kind == "person":
            seconds = seconds_to_decide(approval.requested_at, shown_at, approval.decided_at)
            attributes["agentsite.approval.decide_ms"] = seconds * 1000
            attributes["agentsite.approval.nudged"] = nudged
        attributes["agentsite.approval.twins_shown"] = twins
    return attributes


def approval_events(approval: Approval, event) -> list:
    """The request and, once decided, the decision with its attributes (`event` makes one)."""
    events = [event("agentsite.approval.requested", unix_ns(approval.requested_at), {"agentsite.approval.id": approval.pk})]
    if approval.decided_at is not None:
        events.append(event("agentsite.approval.decided", unix_ns(approval.decided_at), approval_attributes(approval)))
    return events
