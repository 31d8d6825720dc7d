"""Where a destructive call goes when the loop asks for a decision, as one pure function over
plain data: the run's policy, the first matching rule, the tool's flags, the identifiers the run
had not seen, the run's grants. route_facts.call_route gathers these, and the gate writes what
this returns.

The order (the shared design of issue 14):
1. a call whose outcome is unknown after a crash goes to one person, whatever anything else says;
2. a reject-all policy rejects;
3. the first matching rule: reject rejects with its reason; approve approves unless a safeguard
   holds (tool marked always-ask, an identifier the run never saw, outcome unknown); ask_two asks
   two people, ask_group a named group, ask_quorum N people with one from each of its groups;
   ask is the default (as if no rule matched);
4. a critical tool needs two people, whatever approves it;
5. a grant of the run approves an identical call (same tool and arguments hash) or any call of
   its tool, never a call that needs two people or a group, a tool grant never an unseen id;
6. an approve-all policy approves unless a safeguard holds;
7. else one person.
Nothing that approves automatically can widen what the loop allows: a call gets here only after
the schema and the agent's tool list let it through, and its tool still checks ownership.
"""
from dataclasses import dataclass

from runs.supervision.rules.conditions import RuleSpec

PENDING, APPROVED, REJECTED = "pending", "approved", "rejected"


@dataclass(frozen=True)
class GrantFacts:
    """An active grant of the run for this call's tool: `args_hash` "" covers every call of it."""

    id: int
    args_hash: str


@dataclass(frozen=True)
class Route:
    """What to write on the call's new approval."""

    status: str  # PENDING (people decide), APPROVED or REJECTED (decided now, automatically)
    reason: str = ""  # of an automatic decision
    note: str = ""  # for the people who decide: why nothing decided it automatically
    rule: RuleSpec | None = None  # the rule that decided or routed it
    grant_id: int | None = None  # the grant that approved it
    required_approvals: int = 1
    group_id: int | None = None
    quorum_group_ids: tuple[int, ...] = ()  # each gives one of the approvals, from different people

    @property
    def automatic(self) -> bool:
        return self.status != PENDING


def route_call(
    *,
    tool_name: str,
    args_hash: str,
    policy: str,
    rule: RuleSpec | None,
    always_ask: bool = False,
    critical: bool = False,
    unseen_ids: tuple[str, ...] = (),
    unseen_sensitive: tuple[str, ...] = (),
    outcome_unknown: bool = False,
    grants: tuple[GrantFacts, ...] = (),
    twins_ran: tuple[str, ...] = (),
) -> Route:
    """The route of one destructive call (see the module's docstring for the order).

    `unseen_sensitive` names the sensitive fields whose values hold an identifier the run never
    saw: they hold a call back as `unseen_ids` do, and the note names the field, never the value.
    `twins_ran` says, in words, which twins of the call ran in the window ("ran 3 min ago in run
    17: succeeded"): nothing approves such a call automatically, a grant for identical calls neither."""
    action = rule.action if rule is not None else "ask"
    if not outcome_unknown:
        if policy == "reject":
            return Route(REJECTED, reason="automatic: reject-all policy of this run")
        if action == "reject":
            return Route(REJECTED, reason=rule.reason.strip() or "no reason given", rule=rule)
    two = critical or action in ("ask_two", "ask_quorum")
    group_id = rule.group_id if action == "ask_group" else None
    required = 2 if two else 1
    quorum = ()
    if action == "ask_quorum":
        required = max(required, rule.approvals_needed or 2)
        quorum = rule.quorum_group_ids
    would, grant = _would_approve(action, rule, policy, grants, args_hash, two=two)
    if outcome_unknown:
        # One person, whatever anything else says: approving is a decision about a second effect.
        note = _held_back(would, ["the outcome of this call is unknown after a crash"]) if would else ""
        return Route(PENDING, note=note)
    people = {"rule": rule, "required_approvals": required, "group_id": group_id, "quorum_group_ids": quorum}
    if not would:
        return Route(PENDING, **people)
    # An identical grant was given by a person who read these very arguments: its ids were seen.
    identical = grant is not None and grant.args_hash
    unseen, unseen_fields = ((), ()) if identical else (unseen_ids, unseen_sensitive)
    blocks = _safeguards(
        tool_name, always_ask=always_ask, unseen_ids=unseen, unseen_sensitive=unseen_fields, critical=critical
    ) + [f"the same call {twin}" for twin in twins_ran]
    if blocks:
        return Route(PENDING, note=_held_back(would, blocks), **people)
    if grant is not None:
        return Route(APPROVED, reason="automatic: a grant for this run", grant_id=grant.id)
    if action == "approve":
        return Route(APPROVED, reason=f"automatic: rule {rule.name!r} v{rule.version}", rule=rule)
    return Route(APPROVED, reason="automatic: approve-all policy of this run")


def _would_approve(action: str, rule: RuleSpec | None, policy: str, grants, args_hash: str, *, two: bool):
    """(who would approve the call automatically, in words, or "", and the grant when it is one).

    A rule that asks two people or a group is explicit: neither a grant nor the policy overrides
    it. A rule that asks one person is the default, so grants and the policy still apply."""
    if action == "approve":
        return f"Rule {rule.name!r} v{rule.version}", None
    if action != "ask":
        return "", None
    grant = None if two else _grant_for(grants, args_hash)
    if grant is not None:
        return "A grant for this run", grant
    if policy == "approve":
        return "The run's approve-all policy", None
    return "", None


def _grant_for(grants: tuple[GrantFacts, ...], args_hash: str) -> GrantFacts | None:
    """The grant that covers the call: one for identical calls first, then one for its tool."""
    identical = [g for g in grants if g.args_hash and g.args_hash == args_hash]
    whole_tool = [g for g in grants if not g.args_hash]
    return (identical or whole_tool or [None])[0]


def _safeguards(
    tool_name: str, *, always_ask: bool, unseen_ids: tuple[str, ...], unseen_sensitive: tuple[str, ...] = (),
    critical: bool,
) -> list[str]:
    """Why nothing may approve this call automatically, in words; [] when nothing holds it back."""
    reasons = []
    if always_ask:
        reasons.append(f"{tool_name} is marked always ask")
    if critical:
        reasons.append(f"{tool_name} is critical, so two people must approve")
    if unseen_ids:
        reasons.append(f"the arguments hold {_and(unseen_ids)}, which this run has never seen")
    if unseen_sensitive:
        fields, hold = ("field", "holds an identifier") if len(unseen_sensitive) == 1 else ("fields", "hold identifiers")
        reasons.append(f"the sensitive {fields} {_and(unseen_sensitive)} {hold} this run has never seen")
    return reasons


def _held_back(would: str, reasons: list[str]) -> str:
    """"Rule 'small refunds' v3 would approve, but the arguments hold ORD-999, which this run has never seen." """
    return f"{would} would approve, but {_and(reasons, sep='; and ')}."


def _and(items, sep: str = ", ") -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    if sep == ", ":
        return f"{', '.join(items[:-1])} and {items[-1]}"
    return sep.join(items)


# --- What the model reads -----------------------------------------------------------------------


# --- The facts of one call (the only reads here) ----------------------------------------------------


