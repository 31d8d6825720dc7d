"""Rules tested against what people decided: a rule as edited (before it is saved), or a whole
new rule set, replayed over the destructive calls people decided in the last BACKTEST_DAYS days
of one project, beside what those people decided.

The replay goes through the loop's own routing: the first matching rule of the set in order
(conditions.first_match's rule_matches, with the argument paths the call's evidence marks as outside
content), then who_decides.route_call with the tool's flags as they are now, the identifiers the run
had not seen (as the approval recorded them), the call's "outcome unknown" after a crash and the
run's policy. Not replayed: twins (whether a twin had run in the window then is not recorded), and
grants (a grant is a person's decision within the run). A single rule is replayed in its place:
the project's other acting rules before it still decide what they decide.

Only calls a person decided are compared (approved or rejected by a person: not by a rule, grant
or policy, not expired, not closed with the run); the others are counted apart. A call asked about
again after a crash counts once, by its newest approval. One streaming query reads the calls (only
the columns the replay needs), one their runs, one the tools, one the evidence of the calls listed.
"""
import heapq
import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, F, JSONField, Q, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.sql.constants import MULTI
from django.utils import timezone

from runs.models import Agent, Approval, ApprovalRule, Run, ToolCall
from runs.supervision.rules.conditions import CallFacts, RuleSpec, rule_matches, rule_spec
from runs.supervision.rules.preview import OUTCOME_UNKNOWN_NOTE, draft_spec
from runs.supervision.rules.who_decides import APPROVED, REJECTED, route_call
from toolsapp.models import Tool
from toolsapp.sensitive import masked

DEFAULT_DAYS = 30
LISTED = 50  # disagreements listed with their evidence; every one is counted
ARGUMENTS_CHARS = 500
READ_PREVIEW_CHARS = 300
SAID_CHARS = 1000
CHUNK = 5000

# The kinds of disagreement, in the order they are listed: the one that can do harm first.
APPROVED_REJECTED = "approved_rejected"
APPROVED_EDITED = "approved_edited"
REJECTED_APPROVED = "rejected_approved"
KIND_WORDS = {
    APPROVED_REJECTED: "would have approved what a person rejected",
    APPROVED_EDITED: "would have approved a call a person edited first",
    REJECTED_APPROVED: "would have rejected what a person approved",
}
NOT_REPLAYED = (
    "Twins are not replayed: whether the same call had run shortly before is not recorded with the decision. "
    "Grants are not replayed: a grant is a person's decision within its run. Tools' flags (always ask, "
    "critical) are read as they are now."
)
_PEOPLE = (Approval.Status.APPROVED, Approval.Status.REJECTED)


def backtest_days() -> int:
    return int(getattr(settings, "BACKTEST_DAYS", DEFAULT_DAYS))


@dataclass
class Disagreement:
    kind: str
    approval: int
    run: int
    tool: str
    args_hash: str
    arguments: str  # compact JSON, the tool's sensitive fields masked, cut at ARGUMENTS_CHARS
    would: str  # what the rule set would have done, in words
    person: str  # who decided
    person_decision: str  # "approved" or "rejected"
    decided_at: datetime | None = None
    reason: str = ""  # the person's reason, as they gave it
    evidence: dict = field(default_factory=dict)  # the card's evidence (CallEvidence.data), previews

    @property
    def words(self) -> str:
        return KIND_WORDS[self.kind]

    def as_dict(self) -> dict:
        return {
            "kind": self.kind, "words": self.words, "approval": self.approval, "run": self.run, "tool": self.tool,
            "args_hash": self.args_hash, "arguments": self.arguments, "would": self.would, "person": self.person,
            "person_decision": self.person_decision, "decided_at": self.decided_at, "reason": self.reason,
            "evidence": self.evidence,
        }


@dataclass
class Backtest:
    days: int
    since: datetime
    considered: int = 0  # calls a person decided, each once
    agreed_approved: int = 0
    agreed_rejected: int = 0
    left_to_people: int = 0  # the set would have asked people, as happened
    held_by_safeguard: int = 0  # of those: a rule or the policy would approve, a safeguard holds it
    approved_rejected: int = 0
    approved_edited: int = 0
    rejected_approved: int = 0
    automatic: int = 0  # decided by a rule, a grant or a policy then: counted apart
    undecided: int = 0  # waiting, expired, or closed with the run: counted apart
    unreadable: int = 0  # arguments that are not JSON: no rule matches them
    rules: list[dict] = field(default_factory=list)  # each rule of the set: how many calls it was first to match
    disagreements: list[Disagreement] = field(default_factory=list)  # the first LISTED, harmful first
    # Every call a person rejected that the set (or the rule tested, in its place) would have
    # approved: what a save over them records (runs.supervision.rules.saved_over).
    rejected_over: list[dict] = field(default_factory=list)

    @property
    def agreed(self) -> int:
        return self.agreed_approved + self.agreed_rejected

    @property
    def not_replayed(self) -> str:
        return NOT_REPLAYED

    @property
    def disagreed(self) -> int:
        return self.approved_rejected + self.approved_edited + self.rejected_approved

    def as_dict(self) -> dict:
        return {
            "days": self.days, "since": self.since, "considered": self.considered, "agreed": self.agreed,
            "agreed_approved": self.agreed_approved, "agreed_rejected": self.agreed_rejected,
            "left_to_people": self.left_to_people, "held_by_safeguard": self.held_by_safeguard,
            "disagreed": self.disagreed, "approved_rejected": self.approved_rejected,
            "approved_edited": self.approved_edited, "rejected_approved": self.rejected_approved,
            "automatic": self.automatic, "undecided": self.undecided, "unreadable": self.unreadable,
            "rules": self.rules, "disagreements": [d.as_dict() for d in self.disagreements],
            "rejected_over": self.rejected_over, "not_replayed": NOT_REPLAYED,
        }


# --- The rule sets replayed ---------------------------------------------------------------------


def acting_rules(project_id: int) -> list[RuleSpec]:
    """The project's rules that decide calls now (enabled, not in shadow), in the order tried."""
    rows = ApprovalRule.objects.filter(project_id=project_id, enabled=True, shadow=False).order_by("position", "pk")
    # A quorum's groups decide who may approve, never whether the call goes to people: not read.
    return [rule_spec(rule, quorum_group_ids=()) for rule in rows]


def rule_backtest(spec: RuleSpec, *, project_id: int, days: int | None = None) -> Backtest:
    """The rule as edited (`spec`, preview.draft_spec), in its place among the project's
    acting rules (its saved version left out), replayed as if it acted: in shadow or disabled,
    it is shown what it would do once it decides."""
    others = [rule for rule in acting_rules(project_id) if spec.id is None or rule.id != spec.id]
    draft = replace(spec, shadow=False)
    # Where the loop would try it: by position, then by id (a new rule's is the newest).
    order = sorted([*others, draft], key=lambda r: (r.position, r.id if r.id is not None else float("inf")))
    labels = [_draft_label(r) if r is draft else r.label for r in order]
    return backtest(order, labels=labels, project_id=project_id, days=days, deciding=next(i for i, r in enumerate(order) if r is draft))


def ruleset_backtest(specs: list[RuleSpec], *, project_id: int, days: int | None = None) -> Backtest:
    """A whole rule set as drafted, tried in the order given (positions aside). A rule in shadow
    or disabled decides nothing in the loop, so the caller leaves it out (ruleset_specs)."""
    return backtest(list(specs), labels=[_draft_label(r) for r in specs], project_id=project_id, days=days)


def ruleset_specs(drafts: list[dict]) -> tuple[list[RuleSpec], list[int]]:
    """(The specs of the drafts that act, in order; the indexes of those left out: disabled or in
    shadow.) Each draft is rule_create's fields."""
    specs, skipped = [], []
    for index, data in enumerate(drafts):
        spec = draft_spec(data)
        if not data.get("enabled", True) or spec.shadow:
            skipped.append(index)
            continue
        specs.append(replace(spec, position=index))
    return specs, skipped


def _draft_label(spec: RuleSpec) -> str:
    return f"rule {spec.name!r} as edited"


# --- The replay ---------------------------------------------------------------------------------


def backtest(rules: list[RuleSpec], *, labels: list[str], project_id: int, days: int | None = None,
             now: datetime | None = None, deciding: int | None = None) -> Backtest:
    """Replay `rules` (in the order tried) over the project's calls of the last `days` days.
    With `deciding` (a rule's index), `rejected_over` holds the calls a person rejected that this
    rule itself would have approved (a save of it is a save over those); else every such call."""
    days = backtest_days() if days is None else days
    since = (now or timezone.now()) - timedelta(days=days)
    result = Backtest(days=days, since=since)
    tools = {name: (asks, critical, fields or []) for name, asks, critical, fields in
             Tool.objects.values_list("name", "always_ask", "critical", "sensitive_fields")}
    matched = [0] * len(rules)
    listed: dict[str, list[tuple]] = {kind: [] for kind in KIND_WORDS}  # each a heap of the newest
    routes: dict[tuple, object] = {}
    candidates: dict[tuple, tuple[int, ...]] = {}
    whole_runs = [replace(rule, conditions=()) for rule in rules]
    outside_read = any(c.get("op") == "outside" for rule in rules for c in rule.conditions)
    runs = runs_facts(project_id, since)
    for row in _rows(calls_query(project_id, since, outside=outside_read)):
        pk, run_id, status, automatic, person, edited, unseen, tool_name, arguments, outside, unknown = row
        if status not in _PEOPLE:
            result.undecided += 1
            continue
        if automatic:
            result.automatic += 1
            continue
        result.considered += 1
        try:
            # Arguments that reached a person were read by the loop's bounded reader already.
            parsed = json.loads(arguments)
        except (ValueError, TypeError, RecursionError):
            result.unreadable += 1
            continue
        if run_id not in runs:  # ended before the window yet asked in it (a clock moved): read alone
            runs.update(runs_facts(project_id, None, run_id=run_id))
        agent_id, customer, launcher, policy = runs[run_id]
        facts = CallFacts(tool_name, parsed, agent_id, customer=customer or "", launched_by_id=launcher,
                          outside_paths=tuple(_json_list(outside)))
        # The rules whose tool, agent, customer and launcher fit, found once per kind of run and
        # tool by rule_matches itself (conditions left out); then each is tried whole, in order.
        fit = (tool_name, agent_id, facts.customer, launcher)
        if fit not in candidates:
            candidates[fit] = tuple(i for i, rule in enumerate(whole_runs) if rule_matches(rule, facts))
        index = next((i for i in candidates[fit] if rule_matches(rules[i], facts)), None)
        if index is not None:
            matched[index] += 1
        unseen = tuple(_json_list(unseen))
        # The route depends on these only (no grants, no twins): worked out once per kind of call.
        key = (tool_name, policy, index, bool(unseen), bool(unknown))
        route = routes.get(key)
        if route is None:
            asks, critical, _fields = tools.get(tool_name, (False, False, []))
            route = routes[key] = route_call(
                tool_name=tool_name, args_hash="", policy=policy or "ask",  # the hash is for grants: none
                rule=rules[index] if index is not None else None, always_ask=asks, critical=critical,
                unseen_ids=unseen, outcome_unknown=bool(unknown),
            )
        kind = _compare(result, route.status, person=status, edited=bool(edited), held=bool(route.note))
        if kind is None:
            continue
        if kind == APPROVED_REJECTED and (deciding is None or index == deciding):
            result.rejected_over.append({"approval": pk, "run": run_id, "tool": tool_name, "person": person})
        item = (pk, run_id, tool_name, _would_words(route, labels[index] if index is not None else ""), person, status)
        (heapq.heappush if len(listed[kind]) < LISTED else heapq.heappushpop)(listed[kind], item)
    result.rules = [{"label": label, "name": rule.name, "decided": count}
                    for label, rule, count in zip(labels, rules, matched, strict=True)]
    result.rejected_over.sort(key=lambda call: -call["approval"])
    newest = [(kind, *item) for kind in KIND_WORDS for item in sorted(listed[kind], reverse=True)][:LISTED]
    result.disagreements = _listed(newest, tools)
    return result


def calls_query(project_id: int, since: datetime, *, outside: bool = True):
    """The project's calls asked about since `since`, each with the approval that counts now
    (its newest: a call asked about again after a crash points at it), as the replay's columns, in
    no order (streamed: _rows). Read from the calls' side, so each call comes once by its own
    pointer. The runs' facts are read apart (runs_facts): once per run, not per call (a run's
    settings hold its whole system prompt). Without `outside`, the evidence's outside paths are
    not read (no rule looks at them, and the evidence table is the widest to join)."""
    query = ToolCall.objects.filter(
        run__agent_id__in=Agent.objects.filter(project_id=project_id).values("pk"), approval__requested_at__gte=since,
    ).annotate(
        outside=F("approval__evidence__outside_paths") if outside else Value(None, output_field=JSONField()),
        unknown=ExpressionWrapper(Q(approval__note__startswith=OUTCOME_UNKNOWN_NOTE), output_field=BooleanField()),
    )
    return query.order_by().values_list(*_COLUMNS, *_ANNOTATED)


_COLUMNS = ("approval_id", "run_id", "approval__status", "approval__automatic", "approval__decided_by_name",
            "approval__edited_args_hash", "approval__unseen_ids", "tool_name", "arguments")
_ANNOTATED = ("outside", "unknown")


def runs_facts(project_id: int, since: datetime | None, *, run_id: int | None = None) -> dict[int, tuple]:
    """{run id: (agent id, customer, launcher id, approval policy)} of the project's runs that
    were not over before `since` (or the one run `run_id`): what rules and the policy read of a run."""
    runs = Run.objects.filter(agent__project_id=project_id)
    if run_id is not None:
        runs = runs.filter(pk=run_id)
    if since is not None:
        runs = runs.filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
    rows = runs.annotate(policy=KeyTextTransform("approval_policy", "config")).order_by().values_list(
        "pk", "agent_id", "customer", "created_by_id", "policy")
    return {pk: facts for pk, *facts in rows.iterator(chunk_size=CHUNK)}


def _rows(query):
    """The query's rows as the database sends them, in chunks (a server-side cursor on
    PostgreSQL): no per-value conversion, at 100,000 rows it cost more than the replay itself.
    The replay reads its JSON lists and booleans itself (_json_list; 0 and 1 on SQLite)."""
    # Django selects the columns first and the annotations after them, in the order named.
    assert (*query.query.values_select, *query.query.annotation_select) == (*_COLUMNS, *_ANNOTATED)
    compiler = query.query.get_compiler(using=query.db)
    for chunk in compiler.execute_sql(MULTI, chunked_fetch=True, chunk_size=CHUNK):
        yield from chunk


def _json_list(value) -> list:
    """A JSON list column as read raw: text on SQLite (and on PostgreSQL as Django reads jsonb),
    or already a list; [] for none."""
    if not value or value in ("[]", "null"):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return value if isinstance(value, list) else []


def _compare(result: Backtest, replayed: str, *, person: str, edited: bool, held: bool) -> str | None:
    """Count one call a person decided; the kind of disagreement, or None when there is none."""
    if replayed == APPROVED:
        if person == Approval.Status.REJECTED:
            kind = APPROVED_REJECTED
        elif edited:
            kind = APPROVED_EDITED
        else:
            result.agreed_approved += 1
            return None
    elif replayed == REJECTED:
        if person == Approval.Status.REJECTED:
            result.agreed_rejected += 1
            return None
        kind = REJECTED_APPROVED
    else:
        result.left_to_people += 1
        result.held_by_safeguard += held
        return None
    setattr(result, kind, getattr(result, kind) + 1)
    return kind


def _would_words(route, label: str) -> str:
    by = label or ("the run's policy" if not route.rule else route.rule.label)
    if route.status == APPROVED:
        return f"approved automatically by {by}"
    reason = route.reason if route.rule is not None else ""
    return f"rejected automatically by {by}" + (f": {reason}" if reason else "")


def _listed(rows: list[tuple], tools: dict) -> list[Disagreement]:
    """The disagreements to list, with the arguments, the person's reason and the card's evidence
    (one query)."""
    details = {
        pk: (decided_at, reason, arguments, args_hash, data)
        for pk, decided_at, reason, arguments, args_hash, data in Approval.objects.filter(pk__in=[row[1] for row in rows])
        .values_list("pk", "decided_at", "reason", "tool_call__arguments", "tool_call__args_hash", "evidence__data")
    }
    listed = []
    for kind, pk, run_id, tool, would, person, status in rows:
        decided_at, reason, arguments, args_hash, data = details.get(pk, (None, "", "{}", "", None))
        shown = json.dumps(masked(json.loads(arguments), tools.get(tool, (False, False, []))[2]), ensure_ascii=False)
        listed.append(Disagreement(
            kind=kind, approval=pk, run=run_id, tool=tool, args_hash=args_hash, arguments=_cut(shown, ARGUMENTS_CHARS),
            would=would, person=person, person_decision=status, decided_at=decided_at, reason=reason,
            evidence=evidence_preview(data or {}),
        ))
    return listed


def evidence_preview(data: dict) -> dict:
    """The card's evidence, compact: the model's words, each result it had read cut to a preview
    (masked as stored), and where each argument value came from (as stored, masked)."""
    read = []
    for item in data.get("read") or ():
        text = str(item.get("text", ""))
        read.append({**{k: v for k, v in item.items() if k != "text"}, "preview": _cut(text, READ_PREVIEW_CHARS),
                     "chars": item.get("chars", len(text))})
    return {"said": _cut(str(data.get("said") or ""), SAID_CHARS), "read": read, "values": list(data.get("values") or ())}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
