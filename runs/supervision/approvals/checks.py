"""What `approval_decide` checks before its one conditional UPDATE: who may decide a call (a named
group's members; for two-person calls, two different people, neither the run's launcher), what an
edit of the arguments may be (a JSON object the tool's schema accepts, for a tool that allows
edits), which arguments an approval is for (an edit needs every approval again), and which grant
a decision may give.

Nothing here writes. A check that fails raises NotAllowed (the person may not do this: 403 in the
API) or EditRefused (the request cannot be honoured as sent: 400).
"""
import json
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import Group
from django.db.models import Q

from hosting.text import storable_json, storable_text
from runs.engine.guards import args_hash, parse_arguments
from runs.models import Approval, ApprovalVote, ToolCall
from toolsapp.models import Tool
from toolsapp.schemas import validate_arguments
from toolsapp.sensitive import MASK

MAX_EDIT_CHARS = 100_000
IDENTICAL, WHOLE_TOOL = "identical", "tool"
GRANT_SCOPES = ("", IDENTICAL, WHOLE_TOOL)
ALREADY_VOTED = "You already approved this call: another person must give the next approval."
LAUNCHER_MAY_NOT_APPROVE = "You launched this run: two other people must approve this call."


def only_members(group: str | None) -> str:
    return f"Only members of {group or 'the named group'} may decide this call."


def quorum_names(group_ids: list[int]) -> str:
    """ "Finance or Support": the groups of a quorum, in the rule's order."""
    names = dict(Group.objects.filter(pk__in=group_ids).values_list("pk", "name"))
    listed = [names.get(pk, f"group #{pk}") for pk in group_ids]
    return " or ".join(listed)


class NotAllowed(Exception):
    """This person may not take this decision (group, launcher, second vote of the same person)."""


class EditRefused(ValueError):
    """The edited arguments cannot be used: the message says why, for the operator."""


class GrantRefused(EditRefused):
    """The grant asked for cannot be given with this decision (a 400, like a refused edit)."""


@dataclass(frozen=True)
class Edit:
    text: str  # the arguments as the operator approved them (compact JSON)
    hash: str  # guards.args_hash of them, comparable with ToolCall.args_hash


def check_decider(*, approval: Approval, user, approve: bool) -> None:
    """Raise NotAllowed unless `user` may take this decision on `approval` (see also check_vote).

    Rejecting stays open to anyone who may decide (launcher or earlier approver included): it can
    only stop a call. Approving a two-person call needs people other than the launcher."""
    if approval.group_id and not user.is_superuser and not user.groups.filter(pk=approval.group_id).exists():
        raise NotAllowed(only_members(approval.group.name if approval.group else None))
    quorum = approval.quorum_groups
    if quorum and not user.is_superuser and not user.groups.filter(pk__in=quorum).exists():
        raise NotAllowed(only_members(quorum_names(quorum)))
    if not approve or approval.required_approvals < 2:
        return
    if approval.run.created_by_id == user.pk:
        raise NotAllowed(LAUNCHER_MAY_NOT_APPROVE)


def check_vote(*, approval: Approval, user, approve: bool, restart: bool) -> None:
    """Raise NotAllowed when `user` already approved the arguments as they stand: each person once
    for the same arguments. An edit (`restart`) voids the votes before it, the editor's own too."""
    if approve and approval.required_approvals > 1 and not restart and voted(approval=approval, user=user):
        raise NotAllowed(ALREADY_VOTED)


def voted(*, approval: Approval, user) -> bool:
    # By name (what the unique key holds) or by account (a person renamed since they voted); only
    # votes that still count: one for arguments an edit replaced does not.
    return ApprovalVote.objects.filter(
        Q(user_name=user.get_username()) | Q(user=user), approval=approval, superseded_at__isnull=True
    ).exists()


def approved_arguments(*, approval: Approval, edit: Edit | None, text: str | None, seen_hash: str = "") -> Edit:
    """The arguments one approval is for, as an Edit (text "" for the model's own arguments).

    The edit sent, or the model's arguments sent back; without arguments, the arguments as they
    stand: the model's, or an edit a person proposed, which must then be named by its hash
    (`seen_hash`, what the person's page showed): a page still showing the model's arguments must
    not approve an edit its reader never saw. Raises EditRefused when `seen_hash` is out of date."""
    call: ToolCall = approval.tool_call
    if edit is not None:
        return edit
    if text is not None and text.strip():  # the model's own arguments, sent back
        return Edit(text="", hash=call.args_hash)
    if approval.edited_args_hash:
        if seen_hash != approval.edited_args_hash:
            by = (ApprovalVote.objects.filter(approval=approval, superseded_at__isnull=True)
                  .order_by("pk").values_list("user_name", flat=True).first()) or "another person"
            raise EditRefused(
                f"{by} proposed edited arguments ({approval.edited_args_hash[:12]}): look at them, then approve them "
                "by their hash or send the arguments you approve."
            )
        return Edit(text=approval.edited_arguments, hash=approval.edited_args_hash)
    if seen_hash and seen_hash != call.args_hash:
        raise EditRefused("The arguments changed since you saw them: look at the call again.")
    return Edit(text="", hash=call.args_hash)


def edit_of(*, approval: Approval, tool: Tool | None, text: str | None, approve: bool) -> Edit | None:
    """The checked edit of the call's arguments, or None when there is none (no text, blank text,
    or the same arguments as the model's). Raises EditRefused with the reason in words."""
    if text is None or not text.strip():
        return None
    call: ToolCall = approval.tool_call
    if not approve:
        raise EditRefused("Edited arguments go with an approval; a rejection runs nothing.")
    if tool is None:
        raise EditRefused(f"The tool {call.tool_name!r} is no longer available.")
    if not tool.allow_argument_edits:
        raise EditRefused(f"The tool {tool.name!r} does not allow edited arguments: approve or reject the call as sent.")
    if len(text) > MAX_EDIT_CHARS or not storable_text(text):
        raise EditRefused(f"The edited arguments must be at most {MAX_EDIT_CHARS} characters of storable text.")
    edited, error = parse_arguments(text)
    if error:
        raise EditRefused(f"The edited {error}.")
    # A mask left as shown keeps the value of the arguments as they stand (a proposed edit's, else the model's).
    original, _ = parse_arguments(approval.edited_arguments or call.arguments)
    edited = unmasked(edited, original or {}, {f.lower() for f in tool.sensitive_fields})
    if not storable_json(edited):
        raise EditRefused("The edited arguments contain a NUL or an unpaired surrogate character.")
    error = validate_arguments(tool.parameters, edited, tool.sensitive_fields)
    if error:
        raise EditRefused(f"The tool's schema refuses the edited arguments: {error}.")
    text = json.dumps(edited, ensure_ascii=False)
    digest = args_hash(text, settings.ARGS_HASH_KEY)
    if digest == call.args_hash:
        return None  # the model's own arguments, reformatted: nothing was changed
    return Edit(text=text, hash=digest)


def unmasked(edited, original, sensitive: set[str]):
    """`edited` with each sensitive field left as the queue showed it (MASK) given back the
    model's value at the same place: an operator edits what they see, never the hidden value."""
    if isinstance(edited, dict) and isinstance(original, dict):
        return {
            key: original[key] if str(key).lower() in sensitive and value == MASK and key in original
            else unmasked(value, original.get(key), sensitive)
            for key, value in edited.items()
        }
    if isinstance(edited, list) and isinstance(original, list):
        return [unmasked(v, original[i] if i < len(original) else None, sensitive) for i, v in enumerate(edited)]
    return edited


def check_grant(*, approval: Approval, tool: Tool | None, approve: bool, scope: str) -> None:
    """Raise GrantRefused unless a grant of `scope` ("", "identical", "tool") may go with this decision.

    Grants never cover calls that need two people or a named group, nor tools marked always-ask
    or critical (the loop would not apply them): giving one would promise what cannot happen."""
    if scope not in GRANT_SCOPES:
        raise GrantRefused(f"A grant is {IDENTICAL!r} (identical calls) or {WHOLE_TOOL!r} (every call of the tool).")
    if not scope:
        return
    if not approve:
        raise GrantRefused("A grant goes with an approval, not a rejection.")
    if approval.required_approvals > 1 or approval.group_id:
        raise GrantRefused("Calls that need two people or a named group cannot be granted for the rest of the run.")
    if tool is None or tool.critical or tool.always_ask:
        raise GrantRefused("This tool is marked always-ask or critical: each of its calls goes to a person.")
