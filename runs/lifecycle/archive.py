"""Decisions outlive their runs: whatever deletes runs (pruning, the admin) archives their
approvals first, in the same transaction, so a run is never gone while its decisions are lost.
"""
import json
from collections.abc import Iterable

from django.db import transaction

from runs.models import Approval, ArchivedApproval, Run
from runs.observability.metrics import rollups
from runs.observability.prometheus.pruned_totals import pruned_totals_add
from toolsapp.models import Tool
from toolsapp.sensitive import masked


def masked_arguments(arguments: str, sensitive_fields: Iterable[str]) -> str:
    """The call's arguments as archived: values of sensitive keys masked at any depth.

    Unparsable arguments are kept as sent, unless the tool masks something (then nothing is kept:
    the args hash still identifies them).
    """
    sensitive = list(sensitive_fields)
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return "" if sensitive else arguments
    return json.dumps(masked(value, sensitive), ensure_ascii=False) if sensitive else arguments


def approvals_archive(*, run_ids: Iterable[int]) -> int:
    """Copy every approval of these runs into ArchivedApproval; returns how many were copied.

    An approval archived before (a deletion that was retried) is left as it was.
    """
    approvals = list(
        Approval.objects.filter(run_id__in=list(run_ids)).select_related("run", "run__agent", "tool_call")
        .prefetch_related("votes").order_by("pk")
    )
    sensitive_by_tool = dict(
        Tool.objects.filter(name__in={a.tool_call.tool_name for a in approvals}).values_list("name", "sensitive_fields")
    )
    rows = []
    for approval in approvals:
        run, call = approval.run, approval.tool_call
        sensitive = sensitive_by_tool.get(call.tool_name) or []
        rows.append(ArchivedApproval(
            approval_id=approval.pk,
            run_id=run.pk,
            project_id=run.agent.project_id,  # whose it is, kept: the agent may be renamed or deleted later
            agent_name=run.config.get("agent_name") or run.agent.name,
            customer=run.customer,
            run_task=run.task,
            tool_name=call.tool_name,
            call_id=call.call_id,
            arguments=masked_arguments(call.arguments, sensitive),
            args_hash=call.args_hash,
            call_status=call.status,
            status=approval.status,
            note=approval.note,
            reason=approval.reason,
            automatic=approval.automatic,
            decided_by_name=approval.decided_by_name,
            rule_name=approval.rule_name,
            rule_version=approval.rule_version,
            required_approvals=approval.required_approvals,
            # Who approved the arguments decided on: a vote an edit voided was for other arguments.
            voters=[vote.user_name for vote in approval.votes.all() if vote.superseded_at is None],
            edited_arguments=masked_arguments(approval.edited_arguments, sensitive) if approval.edited_arguments else "",
            edited_args_hash=approval.edited_args_hash,
            guidance=approval.guidance,
            requested_at=approval.requested_at,
            decided_at=approval.decided_at,
        ))
    ArchivedApproval.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def runs_delete(*, run_ids: Iterable[int]) -> int:
    """Delete these runs with their steps, calls, events and approvals, archiving the approvals
    first in the same transaction. Returns how many runs were deleted."""
    run_ids = list(run_ids)
    with transaction.atomic():
        approvals_archive(run_ids=run_ids)
        pruned_totals_add(run_ids=run_ids)  # /metrics' counters keep what these runs counted
        rollups.runs_deleted(run_ids=run_ids)  # the metrics page's daily rollups drop them too
        # Reruns of a deleted run stay; they only lose the link (one UPDATE, not one per row).
        Run.objects.filter(rerun_of_id__in=run_ids).update(rerun_of=None)
        _, per_model = Run.objects.filter(pk__in=run_ids).delete()
    return per_model.get(Run._meta.label, 0)
