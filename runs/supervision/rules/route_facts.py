"""The facts a call's route is decided from, read from the database when the loop asks: the
call's arguments, the rule in force (held until the decision commits), the run's grants, the
identifiers its model was never shown, the argument values that came from outside content (the
call's evidence) and its twins that ran. who_decides.route_call decides from them, as plain data."""
from dataclasses import dataclass, field

from django.db import connection

from runs.engine.guards import parse_arguments
from runs.models import ApprovalRule, RunGrant
from runs.supervision.evidence import twins
from runs.supervision.evidence.provenance import call_unseen_ids
from runs.supervision.evidence.sources import Evidence, call_evidence
from runs.supervision.rules.conditions import CallFacts, RuleSpec, first_match, rules_enabled
from runs.supervision.rules.shadow import shadow_routes
from runs.supervision.rules.who_decides import GrantFacts, Route, route_call
from toolsapp.sensitive import MASK


@dataclass
class CallRoutes:
    """What the gate writes for one asked-about call: its route, the identifiers it holds that the
    run had not seen, what rules in shadow would have decided, and its evidence (stored as
    CallEvidence with the approval: `identity` is the key its twins share)."""

    route: Route
    unseen: tuple[str, ...]
    shadowed: list[tuple[RuleSpec, Route]]
    evidence: Evidence
    project_id: int | None = None
    identity: str = ""
    twins_ran: tuple[str, ...] = field(default_factory=tuple)


def call_route(*, call, tool, run, config: dict, outcome_unknown: bool = False) -> tuple[Route, tuple[str, ...]]:
    """(the route of `call`, the identifiers of its arguments the run had not seen, a sensitive
    one as "field: ••••")."""
    routes = call_routes(call=call, tool=tool, run=run, config=config, outcome_unknown=outcome_unknown)
    return routes.route, routes.unseen


def call_routes(*, call, tool, run, config: dict, outcome_unknown: bool = False) -> CallRoutes:
    """`call_route`, what each rule in shadow would have decided instead (shadow.shadow_routes;
    none for a call asked about again after a crash: its first asking was recorded), and the
    call's evidence.

    Reads the rules in force now (a rule changed since the last call counts with its new version),
    the run's active grants for the tool, for the arguments what the run had been shown and where
    each value came from (evidence.sources.call_evidence), and the twins of the call that ran in the
    window in the run's project (twins.twins_ran): a twin that ran holds the call for a person."""
    policy = config.get("approval_policy", "ask")
    arguments, _error = parse_arguments(call.arguments)  # a call that got here has valid arguments
    arguments = arguments or {}
    evidence = call_evidence(run=run, call=call, arguments=arguments, tool=tool)
    project_id = run.agent.project_id
    identity = twins.call_identity(call.tool_name, arguments, tool.identifier_fields or ())
    ran = tuple(twins.twins_ran(project_id=project_id, identity=identity, exclude_run_id=run.pk))
    facts = CallFacts(call.tool_name, arguments, run.agent_id, customer=run.customer or "",
                      launched_by_id=run.created_by_id, outside_paths=tuple(evidence.outside_paths))
    rule, acting, shadows = _matching_rule(run=run, facts=facts)
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

    def route_under(rule: RuleSpec | None) -> Route:
        return route_call(
            tool_name=call.tool_name, args_hash=call.args_hash, policy=policy, rule=rule,
            always_ask=tool.always_ask, critical=tool.critical, unseen_ids=tuple(unseen),
            unseen_sensitive=tuple(unseen_fields), outcome_unknown=outcome_unknown, grants=grants, twins_ran=ran,
        )

    shadowed = [] if outcome_unknown or not shadows else shadow_routes(
        acting=acting, shadows=shadows, facts=facts, route_for=route_under
    )
    # What the approval records: the ids, and each sensitive field that held one by its name only.
    return CallRoutes(
        route=route_under(rule), unseen=(*unseen, *(f"{name}: {MASK}" for name in unseen_fields)), shadowed=shadowed,
        evidence=evidence, project_id=project_id, identity=identity, twins_ran=ran,
    )


def _matching_rule(*, run, facts: CallFacts) -> tuple[RuleSpec | None, list[RuleSpec], list[RuleSpec]]:
    """(The first acting rule that matches the call, the acting rules, the rules in shadow), the
    first one's row held as read until the loop's transaction commits the approval that names it.

    Held (FOR KEY SHARE: what the approval's foreign key check takes at commit anyway, so runs do
    not wait for each other), the rule cannot be saved or deleted before the decision commits: a
    save waits, and once it returns no call is decided by the version it replaced. Without the
    hold, a rule deleted meanwhile failed the approval's foreign key at commit, and with it the
    whole step (the run ended with an internal error). A rule saved or deleted after it was read
    and before it was held is read again, as it is now."""
    while True:
        rules = rules_enabled(run.agent_id)
        acting = [r for r in rules if not r.shadow]
        rule = first_match(acting, facts)
        if rule is None or _rule_held(rule):
            return rule, acting, [r for r in rules if r.shadow]


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
