"""Rules in shadow: what a rule would have decided about a live call, as plain data.

A rule in shadow is tried on every destructive call the loop asks about, in its place among the
rules that act: it "would have decided" a call when, had it been acting, it would have been the
first rule to match. What it would have decided is then the route the call would have taken
under it (who_decides.route_call, with every safeguard, grant and policy), so its record is what
turning it on would really have done, not just what its action says. People decide as if the
rule did not exist: nothing of it reaches the queue.
"""
from collections.abc import Callable, Iterable

from runs.models import ShadowDecision
from runs.supervision.rules.conditions import CallFacts, RuleSpec, first_match, rule_matches
from runs.supervision.rules.who_decides import APPROVED, REJECTED, Route

Outcome = ShadowDecision.Outcome


def shadow_routes(
    *, acting: Iterable[RuleSpec], shadows: Iterable[RuleSpec], facts: CallFacts,
    route_for: Callable[[RuleSpec], Route],
) -> list[tuple[RuleSpec, Route]]:
    """(rule, the route it would have given) for each rule in shadow that would have decided this
    call: it matches, and no acting rule tried before it matches too."""
    acting = list(acting)
    decided = []
    for shadow in shadows:
        if not rule_matches(shadow, facts):
            continue
        tried = sorted([*acting, shadow], key=lambda rule: (rule.position, rule.id))
        if first_match(tried, facts) is shadow:
            decided.append((shadow, route_for(shadow)))
    return decided


def shadow_outcome(route: Route) -> tuple[str, str]:
    """(outcome, its words) of a route a rule in shadow would have given."""
    if route.status == APPROVED:
        return Outcome.APPROVE, route.reason
    if route.status == REJECTED:
        return Outcome.REJECT, route.reason
    if route.note:  # it would approve, but a safeguard holds the call for a person
        return Outcome.BLOCKED, route.note
    if route.required_approvals > 1:
        return Outcome.ASK, f"{route.required_approvals} people"
    return Outcome.ASK, "a named group" if route.group_id else "one person"


def shadow_decisions_record(approval, routes: list[tuple[RuleSpec, Route]]) -> None:
    """Write what each rule in shadow would have decided about `approval`'s call (in the loop's
    transaction, with the approval itself)."""
    rows = []
    for rule, route in routes:
        outcome, detail = shadow_outcome(route)
        rows.append(ShadowDecision(
            approval=approval, rule_key=rule.id, rule_version=rule.version, rule_name=rule.name,
            outcome=outcome, detail=detail,
        ))
    if rows:
        ShadowDecision.objects.bulk_create(rows)
