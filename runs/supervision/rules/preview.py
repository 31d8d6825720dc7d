"""What a rule would have done to the last destructive calls, shown in the editor before it is saved.

The calls are those that were asked about (they have an approval), newest first; each is taken
once, with its run. A rule that would approve a call still leaves it to a person when a
safeguard holds (see SAFEGUARDS_TEXT): those calls are counted apart, so the admin sees how many
calls the rule could not approve; a critical tool goes to two people unless the rule rejects.
Two queries, however many rules or calls there are.
"""
import copy
import json
from dataclasses import dataclass, field

from hosting.text import loads as bounded_loads
from runs.models import Approval, ApprovalRule
from runs.supervision.rules.changes import rule_assign
from runs.supervision.rules.conditions import CallFacts, RuleSpec, rule_matches, rule_spec
from toolsapp.models import Tool
from toolsapp.sensitive import masked

PREVIEW_CALLS = 1000
EXAMPLES = 5
HASH_PREFIX = 12
# How the notes of calls asked about again after a crash begin (runs.supervision.approvals.gate.CRASH_NOTE).
OUTCOME_UNKNOWN_NOTE = "Outcome unknown"


@dataclass
class PreviewExample:
    tool: str
    args_hash: str  # the first characters only: enough to tell calls apart
    run_id: int
    arguments: str = ""  # compact JSON, the tool's sensitive fields masked, cut at ARGUMENTS_CHARS
    outcome: str = ""  # what the rule would have done to it, in words


ARGUMENTS_CHARS = 300
OUTCOMES = {
    "approve": "approved automatically",
    "blocked": "would approve, but a safeguard sends it to a person",
    "reject": "rejected automatically",
    "ask_two": "sent to two people",
    "ask_group": "sent to a named group",
    "ask_quorum": "sent to several people (a quorum)",
    "ask": "sent to one person",
}


@dataclass
class RulePreview:
    considered: int = 0  # the calls looked at (at most PREVIEW_CALLS)
    matched: int = 0
    approve: int = 0
    blocked: int = 0  # the rule says approve, a safeguard sends the call to a person
    reject: int = 0
    ask_two: int = 0
    ask_group: int = 0
    ask_quorum: int = 0
    ask: int = 0
    not_matched: int = 0
    unreadable: int = 0  # arguments that are not JSON: no rule can match them
    examples: list[PreviewExample] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "considered": self.considered, "matched": self.matched, "approve": self.approve,
            "blocked_by_safeguards": self.blocked, "reject": self.reject, "ask_two": self.ask_two,
            "ask_group": self.ask_group, "ask_quorum": self.ask_quorum, "ask": self.ask, "not_matched": self.not_matched,
            "unreadable": self.unreadable,
            "examples": [{"tool": e.tool, "args_hash": e.args_hash, "run_id": e.run_id, "arguments": e.arguments,
                          "outcome": e.outcome} for e in self.examples],
        }


def draft_spec(data: dict, *, rule: ApprovalRule | None = None) -> RuleSpec:
    """The rule being edited, as the loop would read it once saved: `data` (the editor's fields,
    rule_create's form) over the saved rule's fields. Nothing is written."""
    draft = copy.copy(rule) if rule is not None else ApprovalRule()
    rule_assign(draft, data)
    return rule_spec(draft)


def rule_preview(spec: RuleSpec, *, limit: int = PREVIEW_CALLS, project_id: int | None = None) -> RulePreview:
    """What the rule would have done to the last `limit` destructive calls (of `project_id`'s
    runs: a rule decides its own project's calls only)."""
    approvals = Approval.objects.all()
    if project_id is not None:
        approvals = approvals.filter(run__agent__project_id=project_id)
    approvals = (
        approvals.order_by("-pk")
        .select_related("tool_call", "run")
        .only(
            "note", "unseen_ids", "tool_call__tool_name", "tool_call__arguments", "tool_call__args_hash",
            "run__agent_id", "run__customer", "run__created_by_id",
        )[:limit]
    )
    rows, seen_calls = [], set()
    for approval in approvals:
        # A call asked about again after a crash has several approvals: its newest one counts.
        if approval.tool_call_id not in seen_calls:
            seen_calls.add(approval.tool_call_id)
            rows.append(approval)
    tools = Tool.objects.filter(name__in={a.tool_call.tool_name for a in rows}).values_list(
        "name", "always_ask", "critical", "sensitive_fields"
    )
    always_ask, critical, sensitive = set(), set(), {}
    for name, asks, is_critical, fields in tools:
        always_ask.update([name] if asks else [])
        critical.update([name] if is_critical else [])
        sensitive[name] = fields or []
    preview = RulePreview(considered=len(rows))
    for approval in rows:
        call, run = approval.tool_call, approval.run
        try:
            arguments = bounded_loads(call.arguments)
        except ValueError:
            preview.unreadable += 1
            continue
        facts = CallFacts(
            tool_name=call.tool_name, arguments=arguments, agent_id=run.agent_id, customer=run.customer,
            launched_by_id=run.created_by_id,
        )
        if not rule_matches(spec, facts):
            preview.not_matched += 1
            continue
        preview.matched += 1
        action = spec.action
        if call.tool_name in critical and action in (ApprovalRule.Action.ASK, ApprovalRule.Action.APPROVE):
            # A critical tool needs two people whatever a rule says, short of rejecting.
            action = ApprovalRule.Action.ASK_TWO
        outcome = _count(preview, action, blocked=_safeguard_holds(approval, always_ask))
        if len(preview.examples) < EXAMPLES:
            shown = json.dumps(masked(arguments, sensitive.get(call.tool_name, [])), ensure_ascii=False)
            if len(shown) > ARGUMENTS_CHARS:
                shown = shown[: ARGUMENTS_CHARS - 1] + "…"
            preview.examples.append(
                PreviewExample(call.tool_name, call.args_hash[:HASH_PREFIX], run.pk, shown, OUTCOMES[outcome])
            )
    return preview


def _safeguard_holds(approval: Approval, always_ask: set[str]) -> bool:
    return bool(
        approval.unseen_ids
        or approval.tool_call.tool_name in always_ask
        or approval.note.startswith(OUTCOME_UNKNOWN_NOTE)
    )


def _count(preview: RulePreview, action: str, *, blocked: bool) -> str:
    """Count the call under what the rule does to it; returns that count's name (OUTCOMES)."""
    Action = ApprovalRule.Action
    if action == Action.APPROVE:
        name = "blocked" if blocked else "approve"
    elif action == Action.REJECT:
        name = "reject"
    elif action == Action.ASK_TWO:
        name = "ask_two"
    elif action == Action.ASK_GROUP:
        name = "ask_group"
    elif action == Action.ASK_QUORUM:
        name = "ask_quorum"
    else:
        name = "ask"
    setattr(preview, name, getattr(preview, name) + 1)
    return name
