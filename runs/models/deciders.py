"""What decided an approval: the one definition the pages, the exports, the metrics figures,
the trace spans and /metrics use, in Python (decider_kind, decider_words) and in SQL
(decider_kind_sql), all in one order. A rule that only sent the call to people did not decide it
(expiry or a person did); a rule and a grant never decide the same approval."""
from django.db.models import Case, CharField, Q, Value, When

EXPIRED, CLOSED, APPROVED, REJECTED = "expired", "closed", "approved", "rejected"  # Approval.Status
ANSWERED = (APPROVED, REJECTED)


def decider_kind(status: str, automatic: bool, granted, rule_name: str) -> str | None:
    """"person", "rule", "grant", "policy", "expiry" or "run_ended"; None while pending."""
    if status == EXPIRED:
        return "expiry"
    if status == CLOSED:
        return "run_ended"
    if status not in ANSWERED:
        return None
    if not automatic:
        return "person"
    if rule_name:
        return "rule"
    return "grant" if granted else "policy"


def decider_words(approval) -> str:
    """The person's name (kept with the decision: it outlives the account), "rule 'refunds' v3",
    "a grant for this run", "the run's policy", "expiry", "the run's end", or "the system"."""
    if approval.decided_by_name:
        return approval.decided_by_name
    kind = decider_kind(approval.status, approval.automatic, approval.grant_id, approval.rule_name)
    if kind == "rule":
        return f"rule {approval.rule_name!r} v{approval.rule_version}"
    words = {"grant": "a grant for this run", "policy": "the run's policy", "expiry": "expiry", "run_ended": "the run's end"}
    return words.get(kind, "the system")


def decider_kind_sql(*, automatic: str = "automatic") -> Case:
    """decider_kind as a SQL expression over the fields live and archived approvals share (no
    grant: a grant and the run's policy are both `automatic`). NULL while pending."""
    return Case(
        When(status=EXPIRED, then=Value("expiry")),
        When(status=CLOSED, then=Value("run_ended")),
        When(status__in=ANSWERED, automatic=False, then=Value("person")),
        When(Q(status__in=ANSWERED, automatic=True) & ~Q(rule_name=""), then=Value("rule")),
        When(status__in=ANSWERED, automatic=True, then=Value(automatic)),
        output_field=CharField(),
    )
