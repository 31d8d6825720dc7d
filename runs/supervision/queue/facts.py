"""Reads for deciding calls under supervision rules: who approved a two-person call so far, which
group decides it, and what its tool says about edits, grants and masking.

The one reader of these facts: the API's pending list and the queue page (card_controls) both
build on approvals_supervision, so they cannot disagree."""
from collections import defaultdict
from dataclasses import dataclass, field

from django.contrib.auth.models import Group

from runs.models import Approval, ApprovalVote
from runs.supervision.approvals.quorum import groups_uncovered, quorum_voters
from toolsapp.models import Tool


@dataclass(frozen=True)
class Supervision:
    voters: list[str] = field(default_factory=list)  # who approved the arguments as they stand, in order
    group: str | None = None  # only its members decide
    quorum: tuple[str, ...] = ()  # groups that must each give one approval, in the rule's order
    quorum_missing: tuple[str, ...] = ()  # of them, those still without one
    tool_found: bool = False  # the tool is still there (edits and its flags need it)
    allow_edits: bool = False  # the tool (still there) allows edited arguments
    parameters: dict = field(default_factory=dict)  # the tool's JSON schema, which an edit must satisfy
    critical: bool = False  # the tool needs two people every time
    always_ask: bool = False  # the tool asks a person every time (no rule or grant approves it)
    sensitive_fields: tuple[str, ...] = ()  # argument names whose values stay masked


def tools_read(names) -> dict[str, dict]:
    """{tool name: what approvals_supervision reads of it}, in one query: the queue reads its cards'
    tools and the tools their evidence quotes together."""
    return {
        t["name"]: t
        for t in Tool.objects.filter(name__in=set(names)).values(
            "name", "allow_argument_edits", "parameters", "critical", "always_ask", "sensitive_fields"
        )
    }


def approvals_supervision(approvals: list[Approval], *, tools: dict[str, dict] | None = None) -> dict[int, Supervision]:
    """Supervision of each approval by id, in three queries at most however many approvals there
    are (each approval's tool_call must be loaded with it); two with `tools`, their tools already
    read (tools_read)."""
    if not approvals:
        return {}
    voters: dict[int, list[str]] = defaultdict(list)
    several = [a.pk for a in approvals if a.required_approvals > 1]  # only these take votes
    if several:
        # Only the votes that count: one for arguments an edit replaced does not.
        counting = ApprovalVote.objects.filter(approval_id__in=several, superseded_at__isnull=True)
        for approval_id, name in counting.order_by("created_at", "pk").values_list(
            "approval_id", "user_name"
        ):
            voters[approval_id].append(name)
    group_ids = {a.group_id for a in approvals if a.group_id} | {g for a in approvals for g in a.quorum_groups}
    groups = dict(Group.objects.filter(pk__in=group_ids).values_list("pk", "name")) if group_ids else {}
    quorums = {a.pk: _quorum(a, groups) for a in approvals if a.quorum_groups}  # rare: two queries each
    if tools is None:
        tools = tools_read(a.tool_call.tool_name for a in approvals)
    result = {}
    for approval in approvals:
        tool = tools.get(approval.tool_call.tool_name)
        result[approval.pk] = Supervision(
            voters=voters.get(approval.pk, []), group=groups.get(approval.group_id), tool_found=tool is not None,
            **quorums.get(approval.pk, {}), **_tool_facts(tool),
        )
    return result


def _quorum(approval: Approval, groups: dict[int, str]) -> dict:
    def name(pk):
        return groups.get(pk, f"group #{pk}")

    missing = []
    if approval.status == Approval.Status.PENDING:
        voters = quorum_voters(approval_id=approval.pk, group_ids=approval.quorum_groups)
        missing = groups_uncovered(approval.quorum_groups, voters)
    return {"quorum": tuple(name(pk) for pk in approval.quorum_groups), "quorum_missing": tuple(name(pk) for pk in missing)}


def _tool_facts(tool: dict | None) -> dict:
    if tool is None:
        return {}
    return {
        "allow_edits": tool["allow_argument_edits"], "parameters": tool["parameters"] or {},
        "critical": tool["critical"], "always_ask": tool["always_ask"],
        "sensitive_fields": tuple(tool["sensitive_fields"] or ()),
    }
