"""Rules tested against what people decided: a rule as edited (before it is saved), or a whole
new rule set, replayed over the destructive calls people decided in the last BACKTEST_DAYS days
of one project, beside what those people decided.

The replay goes through the loop's own routing: the first matching rule of the set in order
(rules.first_match's rule_matches, with the argument paths the call's evidence marks as outside
content), then routes.route_call with the tool's flags as they are now, the identifiers the run
had not seen (as the approval recorded them), the call's "outcome unknown" after a crash and the
run's policy. Not replayed: twins (whether a twin had run in the window then is not recorded), and
grants (a grant is a person's decision within the run). A single rule is replayed in its place:
the project's other acting rules before it still decide what they decide.

Only calls a person decided are compared (approved or rejected by a person: not by a rule, grant
or policy, not expired, not closed with the run); the others are counted apart. A call asked about
again after a crash counts once, by its newest approval. One streaming query reads the calls (only
the columns the replay needs), one the tools, one the evidence of the calls listed.
"""
import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, Q
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from runs.models import Approval, ApprovalRule
from runs.supervision.routes import APPROVED, REJECTED, route_call
from runs.supervision.rule_preview import OUTCOME_UNKNOWN_NOTE, draft_spec
from runs.supervision.rules import CallFacts, RuleSpec, rule_matches, rule_spec
from toolsapp.models import Tool
from toolsapp.sensitive import masked
from toolsapp.text import loads as bounded_loads

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
    # Every call a person rejected that the set would have approved: what a save over them records.
    rejected_over: list[dict] = field(default_factory=list)

    @property
    def agreed(self) -> int:
        return self.agreed_approved + self.agreed_rejected

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
    """The rule as edited (`spec`, rule_preview.draft_spec), in its place among the project's
    acting rules (its saved version left out), replayed as if it acted: in shadow or disabled,
    it is shown what it would do once it decides."""
    others = [rule for rule in acting_rules(project_id) if spec.id is None or rule.id != spec.id]
    draft = replace(spec, shadow=False)
    # Where the loop would try it: by position, then by id (a new rule's is the newest).
    order = sorted([*others, draft], key=lambda r: (r.position, r.id if r.id is not None else float("inf")))
    labels = [_draft_label(r) if r is draft else r.label for r in order]
    return backtest(order, labels=labels, project_id=project_id, days=days)


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
             now: datetime | None = None) -> Backtest:
    """Replay `rules` (in the order tried) over the project's calls of the last `days` days."""
    days = backtest_days() if days is None else days
    since = (now or timezone.now()) - timedelta(days=days)
    result = Backtest(days=days, since=since)
    tools = {name: (asks, critical, fields or []) for name, asks, critical, fields in
             Tool.objects.values_list("name", "always_ask", "critical", "sensitive_fields")}
    matched = [0] * len(rules)
    listed: dict[str, list[tuple]] = {kind: [] for kind in KIND_WORDS}
    seen_calls: set[int] = set()
    for row in _calls(project_id, since):
        (pk, call_id, run_id, status, automatic, person, edited, unseen, unknown, policy,
         tool_name, arguments, args_hash, agent_id, customer, launcher, outside) = row
        if call_id in seen_calls:
            continue  # asked about again after a crash: its newest approval (read first) counts
        seen_calls.add(call_id)
        if status not in _PEOPLE:
            result.undecided += 1
            continue
        if automatic:
            result.automatic += 1
            continue
        result.considered += 1
        try:
            parsed = bounded_loads(arguments)
        except ValueError:
            result.unreadable += 1
            continue
        facts = CallFacts(tool_name, parsed, agent_id, customer=customer or "", launched_by_id=launcher,
                          outside_paths=tuple(outside or ()))
        index = next((i for i, rule in enumerate(rules) if rule_matches(rule, facts)), None)
        if index is not None:
            matched[index] += 1
        asks, critical, _fields = tools.get(tool_name, (False, False, []))
        route = route_call(
            tool_name=tool_name, args_hash=args_hash, policy=policy or "ask",
            rule=rules[index] if index is not None else None, always_ask=asks, critical=critical,
            unseen_ids=tuple(unseen or ()), outcome_unknown=bool(unknown),
        )
        kind = _compare(result, route.status, person=status, edited=bool(edited), held=bool(route.note))
        if kind is None:
            continue
        if kind == APPROVED_REJECTED:
            result.rejected_over.append({"approval": pk, "run": run_id, "tool": tool_name, "person": person})
        if len(listed[kind]) < LISTED:
            would = _would_words(route, labels[index] if index is not None else "")
            listed[kind].append((kind, pk, run_id, tool_name, args_hash, parsed, would, person, status))
    result.rules = [{"label": label, "name": rule.name, "decided": count}
                    for label, rule, count in zip(labels, rules, matched, strict=True)]
    rows = [item for kind in KIND_WORDS for item in listed[kind]][:LISTED]
    result.disagreements = _listed(rows, tools)
    return result


def _calls(project_id: int, since: datetime):
    """The project's approvals asked for since `since`, newest first, as the replay's columns."""
    return (
        Approval.objects.filter(run__agent__project_id=project_id, requested_at__gte=since)
        .annotate(
            policy=KeyTextTransform("approval_policy", "run__config"),
            unknown=ExpressionWrapper(Q(note__startswith=OUTCOME_UNKNOWN_NOTE), output_field=BooleanField()),
        )
        .order_by("-pk")
        .values_list(
            "pk", "tool_call_id", "run_id", "status", "automatic", "decided_by_name", "edited_args_hash",
            "unseen_ids", "unknown", "policy", "tool_call__tool_name", "tool_call__arguments",
            "tool_call__args_hash", "run__agent_id", "run__customer", "run__created_by_id", "evidence__outside_paths",
        )
        .iterator(chunk_size=CHUNK)
    )


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
    """The disagreements to list, with the person's reason and the card's evidence (one query)."""
    details = {
        pk: (decided_at, reason, data)
        for pk, decided_at, reason, data in Approval.objects.filter(pk__in=[row[1] for row in rows]).values_list(
            "pk", "decided_at", "reason", "evidence__data"
        )
    }
    listed = []
    for kind, pk, run_id, tool, args_hash, parsed, would, person, status in rows:
        decided_at, reason, data = details.get(pk, (None, "", None))
        shown = json.dumps(masked(parsed, tools.get(tool, (False, False, []))[2]), ensure_ascii=False)
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


# --- Saving over people's rejections --------------------------------------------------------------


class SavedOverUnconfirmed(Exception):
    """A save of a rule that would have approved calls people rejected, without the saver
    confirming exactly those calls. `calls` names them (saved_over entries)."""

    def __init__(self, calls: list[dict]):
        self.calls = calls
        super().__init__(saved_over_words(calls))


def saved_over_needed(data: dict, *, rule: ApprovalRule | None, project_id: int) -> list[dict]:
    """The calls a person rejected that the rule, saved with `data`, would have approved; [] when
    the rule as saved decides nothing (disabled or in shadow)."""
    enabled = data.get("enabled", rule.enabled if rule is not None else True)
    shadow = data.get("shadow", rule.shadow if rule is not None else False)
    if not enabled or shadow:
        return []
    return rule_backtest(draft_spec(data, rule=rule), project_id=project_id).rejected_over


def saved_over_check(data: dict, *, rule: ApprovalRule | None, project_id: int, confirmed) -> list[dict]:
    """What the new version records in `saved_over`; raises SavedOverUnconfirmed unless
    `confirmed` (approval ids) is exactly the set of calls it would have approved over people's
    rejections now: one that appeared or left since the person read them asks again."""
    calls = saved_over_needed(data, rule=rule, project_id=project_id)
    if {call["approval"] for call in calls} != set(confirmed or ()):
        if calls:
            raise SavedOverUnconfirmed(calls)
    return calls


def saved_over_words(calls: list[dict]) -> str:
    shown = "; ".join(f"approval {c['approval']} (run {c['run']}, {c['tool']}, rejected by {c['person'] or 'a person'})"
                      for c in calls[:10])
    more = f"; and {len(calls) - 10} more" if len(calls) > 10 else ""
    return (f"This rule would have approved {len(calls)} call{'s' if len(calls) != 1 else ''} that a person "
            f"rejected: {shown}{more}. Confirm them by their approval ids to save over them.")


def confirmed_ids(text: str) -> set[int]:
    """Approval ids as a form posts them: "12,15 18"."""
    return {int(part) for part in text.replace(",", " ").split() if part.isdigit()}
