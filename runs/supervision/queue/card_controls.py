"""Reads for the queue's supervision controls: the two-person state, the group asked, the rule
that routed a call, and whether the operator may edit its arguments or grant it for the run.

Display only: whether a decision is allowed is decided by the services; these say which
controls to offer, and why not, so the page never offers what the server would refuse."""
import json

from django.core.paginator import Page

from hosting.text import loads as bounded_loads
from projects.access import may
from runs.models import Approval
from runs.roles import PERM_DECIDE
from runs.supervision.approvals.checks import ALREADY_VOTED, LAUNCHER_MAY_NOT_APPROVE, only_members
from runs.supervision.evidence.state_checks import state_refresh_stale
from runs.supervision.evidence.twins import twins_attach
from runs.supervision.quality.nudges import cards_shown, nudges_attach
from runs.supervision.queue.cards import PAGE_RELATED, PendingApproval, _pending_items, approvals_pending_page
from runs.supervision.queue.facts import Supervision
from runs.supervision.queue.no_approver import no_approver_attach
from toolsapp.sensitive import masked


def approvals_queue_page(*, page=1, projects: set[int] | None = None) -> Page:
    """approvals_pending_page with what the queue's controls need (no more queries)."""
    page_obj = approvals_pending_page(page=page, projects=projects)
    pending_supervision(page_obj.object_list)
    return page_obj


def approval_for_page(*, approval_id: int) -> PendingApproval | None:
    """One approval, pending or decided, as the queue shows it (its page, the e-mails' link)."""
    approval = (Approval.objects.select_related(*PAGE_RELATED)
                .filter(pk=approval_id).first())
    if approval is None:
        return None
    items = _pending_items([approval])
    pending_supervision(items)
    return items[0]


def pending_supervision(items: list[PendingApproval]) -> None:
    """Fill each item's supervision fields from its approvals_supervision facts, read with the
    items (the API's pending list reads the same), without another query."""
    for item in items:
        approval, facts = item.approval, item.supervision
        item.voters = facts.voters
        item.group_name = facts.group or ""
        item.quorum, item.quorum_missing = facts.quorum, facts.quorum_missing
        item.routed_by = f"rule {approval.rule_name!r} v{approval.rule_version}" if approval.rule_name else ""
        item.schema = facts.parameters
        item.edit_json, item.edit_refusal = edit_offer(item, facts)
        item.grant_refusal = grant_refusal(approval, facts)
    no_approver_attach(items)
    twins_attach(items, own_rows=[item.twin_row for item in items if item.twin_row is not None])
    state_refresh_stale(items)


NOT_YOUR_PROJECT = "Your role in this call's project does not decide: you may watch it."


def decision_refusals(items: list[PendingApproval], user) -> None:
    """Why this person may not decide an item (`decide_refusal`) or may not approve it
    (`approve_refusal`), "" when they may: the page disables those buttons and says why. The
    same rules as checks.check_decider and check_vote, which the server applies whatever a page
    offers. One query at most (the person's groups), however many items."""
    group_ids = None
    for item in items:
        approval = item.approval
        item.decide_refusal = item.approve_refusal = ""
        if approval.status != Approval.Status.PENDING:
            continue
        project_id = item.run.agent.project_id
        if not may(user, PERM_DECIDE, project_id):
            item.decide_refusal = NOT_YOUR_PROJECT
            continue
        if (approval.group_id or approval.quorum_groups) and not user.is_superuser:
            if group_ids is None:
                group_ids = set(user.groups.values_list("pk", flat=True))
            if approval.group_id and approval.group_id not in group_ids:
                item.decide_refusal = only_members(item.group_name)
                continue
            if approval.quorum_groups and not group_ids & set(approval.quorum_groups):
                item.decide_refusal = only_members(" or ".join(item.quorum))
                continue
        if approval.required_approvals > 1:
            if approval.run.created_by_id == user.pk:
                item.approve_refusal = LAUNCHER_MAY_NOT_APPROVE
            elif user.get_username() in item.voters:
                item.approve_refusal = ALREADY_VOTED
    nudges_attach(items, user)
    cards_shown(items)


def edit_offer(item: PendingApproval, facts: Supervision) -> tuple[str, str]:
    """(the arguments as JSON to edit, "") or ("", why editing is not offered).

    Sensitive values stay masked in the edit box as in the view (the secret never reaches the
    page); the server puts the hidden value back where the mask is left unchanged."""
    approval = item.approval
    if approval.status != Approval.Status.PENDING:
        return "", ""
    if not facts.tool_found:
        return "", "The tool no longer exists."
    if not facts.allow_edits:
        return "", "This tool forbids edits."
    if item.arguments_problem:
        return "", "The arguments cannot be shown, so they cannot be edited."
    try:
        # The arguments as they stand: a proposed edit, else the model's.
        arguments = bounded_loads(approval.edited_arguments or item.call.arguments or "{}")
    except ValueError:
        return "", "The arguments cannot be shown, so they cannot be edited."
    masked_value = masked(arguments, facts.sensitive_fields)
    return json.dumps(masked_value, indent=2, ensure_ascii=False), ""




def grant_refusal(approval: Approval, facts: Supervision) -> str:
    """Why "approve for the rest of this run" is not offered, or "" when it is. Grants never
    cover calls that need two people, a named group, or a person every time."""
    if approval.required_approvals > 1 or facts.critical:
        return "No grants for calls that need two people."
    if approval.group_id:
        return "No grants for calls that a named group decides."
    if facts.always_ask:
        return "No grants: this tool always asks a person."
    return ""
