"""Reads for deciding calls under supervision rules: who approved a two-person call so far, which
group decides it, and whether (and against which schema) its tool allows edited arguments."""
from collections import defaultdict
from dataclasses import dataclass, field

from django.contrib.auth.models import Group

from runs.models import Approval, ApprovalVote
from toolsapp.models import Tool


@dataclass(frozen=True)
class Supervision:
    voters: list[str] = field(default_factory=list)  # who approved so far, in order
    group: str | None = None  # only its members decide
    allow_edits: bool = False  # the tool (still there) allows edited arguments
    parameters: dict = field(default_factory=dict)  # the tool's JSON schema, which an edit must satisfy


def approvals_supervision(approvals: list[Approval]) -> dict[int, Supervision]:
    """Supervision of each approval by id, in three queries however many approvals there are
    (each approval's tool_call must be loaded with it)."""
    if not approvals:
        return {}
    voters: dict[int, list[str]] = defaultdict(list)
    for approval_id, name in ApprovalVote.objects.filter(approval__in=approvals).order_by("created_at", "pk").values_list(
        "approval_id", "user_name"
    ):
        voters[approval_id].append(name)
    group_ids = {a.group_id for a in approvals if a.group_id}
    groups = dict(Group.objects.filter(pk__in=group_ids).values_list("pk", "name")) if group_ids else {}
    tools = {
        name: (allow, parameters)
        for name, allow, parameters in Tool.objects.filter(name__in={a.tool_call.tool_name for a in approvals}).values_list(
            "name", "allow_argument_edits", "parameters"
        )
    }
    result = {}
    for approval in approvals:
        allow, parameters = tools.get(approval.tool_call.tool_name, (False, {}))
        result[approval.pk] = Supervision(
            voters=voters.get(approval.pk, []), group=groups.get(approval.group_id), allow_edits=allow,
            parameters=parameters or {},
        )
    return result
