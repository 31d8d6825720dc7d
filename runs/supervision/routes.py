"""Where a destructive call goes when the loop asks for a decision, as one pure function over
plain data: the run's policy, the first matching rule, the tool's flags, the identifiers the run
had not seen, the run's grants. `approval_request` gathers these and writes what this returns.

The order (the shared design of issue 14):
1. a call whose outcome is unknown after a crash goes to one person, whatever anything else says;
2. a reject-all policy rejects;
3. the first matching rule: reject rejects with its reason; approve approves unless a safeguard
   holds (tool marked always-ask, an identifier the run never saw, outcome unknown); ask_two asks
   two people, ask_group a named group; ask is the default (as if no rule matched);
4. a critical tool needs two people, whatever approves it;
5. a grant of the run approves an identical call (same tool and arguments hash) or any call of
   its tool, never a call that needs two people or a group, a tool grant never an unseen id;
6. an approve-all policy approves unless a safeguard holds;
7. else one person.
Nothing that approves automatically can widen what the loop allows: a call gets here only after
the schema and the agent's tool list let it through, and its tool still checks ownership.
"""
from dataclasses import dataclass

from django.db import connection

from runs.engine.guards import parse_arguments
from runs.models import ApprovalRule, RunGrant
from runs.supervision.provenance import call_unseen_ids
from runs.supervision.rules import CallFacts, RuleSpec, first_match, rules_in_force
from toolsapp.sensitive import MASK

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
) -> Route:
    """The route of one destructive call (see the module's docstring for the order).

    `unseen_sensitive` names the sensitive fields whose values hold an identifier the run never
    saw: they hold a call back as `unseen_ids` do, and the note names the field, never the value."""
    action = rule.action if rule is not None else "ask"
    if not outcome_unknown:
        if policy == "reject":
            return Route(REJECTED, reason="automatic: reject-all policy of this run")
        if action == "reject":
            return Route(REJECTED, reason=rule.reason.strip() or "no reason given", rule=rule)
    two = critical or action == "ask_two"
    group_id = rule.group_id if action == "ask_group" else None
    would, grant = _would_approve(action, rule, policy, grants, args_hash, two=two)
    if outcome_unknown:
        # One person, whatever anything else says: approving is a decision about a second effect.
        note = _held_back(would, ["the outcome of this call is unknown after a crash"]) if would else ""
        return Route(PENDING, note=note)
    people = {"rule": rule, "required_approvals": 2 if two else 1, "group_id": group_id}
    if not would:
        return Route(PENDING, **people)
    # An identical grant was given by a person who read these very arguments: its ids were seen.
    identical = grant is not None and grant.args_hash
    unseen, unseen_fields = ((), ()) if identical else (unseen_ids, unseen_sensitive)
    blocks = _safeguards(
        tool_name, always_ask=always_ask, unseen_ids=unseen, unseen_sensitive=unseen_fields, critical=critical
    )
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

def rejection_payload(approval, reason: str) -> dict:
    """The result the model reads for a rejected call: who rejected it and why, and what to do
    instead when the person said so."""
    if approval.automatic and approval.rule_name:
        error = f"rejected by rule {approval.rule_name!r} v{approval.rule_version}: {reason}"
    else:
        error = f"rejected by operator: {reason}"
    payload = {"ok": False, "error": error}
    if approval.guidance:
        payload["guidance"] = approval.guidance
    return payload


# --- The facts of one call (the only reads here) ----------------------------------------------------


def call_route(*, call, tool, run, config: dict, outcome_unknown: bool = False) -> tuple[Route, tuple[str, ...]]:
    """(the route of `call`, the identifiers of its arguments the run had not seen, a sensitive
    one as "field: ••••").

    Reads the rules in force now (a rule changed since the last call counts with its new version),
    the run's active grants for the tool and, for the arguments, what the run had been shown."""
    policy = config.get("approval_policy", "ask")
    arguments, _error = parse_arguments(call.arguments)  # a call that got here has valid arguments
    arguments = arguments or {}
    rule = _matching_rule(run=run, call=call, arguments=arguments)
    grants = tuple(
        GrantFacts(pk, args_hash)
        for pk, args_hash in RunGrant.objects.filter(
            run_id=run.pk, tool_name=call.tool_name, revoked_at__isnull=True, args_hash__in=[call.args_hash, ""]
        ).order_by("pk").values_list("pk", "args_hash")
    )
    unseen, unseen_fields = [], []
    if policy != "reject":
        unseen, unseen_fields = call_unseen_ids(
            run=run, call=call, arguments=arguments, sensitive_fields=tool.sensitive_fields or []
        )
    route = route_call(
        tool_name=call.tool_name, args_hash=call.args_hash, policy=policy, rule=rule,
        always_ask=tool.always_ask, critical=tool.critical, unseen_ids=tuple(unseen),
        unseen_sensitive=tuple(unseen_fields), outcome_unknown=outcome_unknown, grants=grants,
    )
    # What the approval records: the ids, and each sensitive field that held one by its name only.
    return route, (*unseen, *(f"{name}: {MASK}" for name in unseen_fields))


def _matching_rule(*, run, call, arguments) -> RuleSpec | None:
    """The first rule in force that matches the call, its row held as read until the loop's
    transaction commits the approval that names it.

    Held (FOR KEY SHARE: what the approval's foreign key check takes at commit anyway, so runs do
    not wait for each other), the rule cannot be saved or deleted before the decision commits: a
    save waits, and once it returns no call is decided by the version it replaced. Without the
    hold, a rule deleted meanwhile failed the approval's foreign key at commit, and with it the
    whole step (the run ended with an internal error). A rule saved or deleted after it was read
    and before it was held is read again, as it is now."""
    while True:
        rules = rules_in_force(run.agent_id)
        facts = CallFacts(call.tool_name, arguments, run.agent_id, customer=run.customer or "",
                          launched_by_id=run.created_by_id)
        rule = first_match(rules, facts)
        if rule is None or _rule_held(rule):
            return rule


def _rule_held(rule: RuleSpec) -> bool:
    """Hold the rule's row until the transaction ends; False when it is no longer the version read.
    SQLite needs no hold: the loop's write transaction keeps every other writer out from its start."""
    if connection.vendor != "postgresql":
        return True
    table = connection.ops.quote_name(ApprovalRule._meta.db_table)
    with connection.cursor() as cursor:
        # After waiting for a save, READ COMMITTED returns the row as that save left it.
        cursor.execute(f"SELECT version FROM {table} WHERE id = %s FOR KEY SHARE", [rule.id])
        row = cursor.fetchone()
    return row is not None and row[0] == rule.version
