"""Approvals: the pending queue and the decisions."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response

from apikit.paging import PAGE_PARAMETER, page_number, page_url
from apikit.schema import errors
from apikit.views import ApiView
from hosting.text import loads as bounded_loads
from projects.access import visible_projects
from runs.engine.storage.snapshots import approval_brief, grant_brief
from runs.models import Approval
from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL
from runs.supervision.approvals.bulk_decisions import TwinsUnconfirmed, approvals_decide_many, decided_projects
from runs.supervision.approvals.checks import GrantRefused
from runs.supervision.approvals.decide import AlreadyDecided, EditRefused, NotAllowed, approval_decide
from runs.supervision.approvals.grants import grant_of_approval
from runs.supervision.evidence.twins import twins_check
from runs.supervision.queue.card_controls import pending_supervision
from runs.supervision.queue.cards import (
    ARCHIVE_PAGE,
    approval_decision_text,
    approvals_archived,
    approvals_pending_page,
)
from runs.supervision.queue.facts import Supervision
from runs.web.api import serializers as api
from runs.web.api.serializers.approvals import DecisionConflictSerializer, TwinsConflictSerializer
from toolsapp.sensitive import masked


def _arguments_text(lines) -> str:
    return "\n".join(f"{line.indent}{line.key + ': ' if line.key else ''}{line.text}{',' if line.comma else ''}"
                     for line in lines)


def _arguments_json(text: str, sensitive_fields) -> dict | None:
    """The arguments as a JSON object, each sensitive field's value the string MASK (as every
    page masks them); None when they are not a JSON object (`arguments_problem` says why)."""
    try:
        arguments = bounded_loads(text or "{}")
    except ValueError:
        return None
    return masked(arguments, sensitive_fields) if isinstance(arguments, dict) else None


def _pending_item(item, supervision: Supervision) -> dict:
    approval = item.approval
    return {
        "id": approval.pk,
        "run_id": item.run.pk,
        "agent": item.run.config.get("agent_name", ""),
        "task": item.run.task,
        "tool": item.call.tool_name,
        "call_id": item.call.call_id,
        "args_hash": item.call.args_hash,
        "arguments": _arguments_json(item.call.arguments, supervision.sensitive_fields),
        "arguments_text": _arguments_text(item.lines),
        "arguments_problem": item.arguments_problem,
        "raw_arguments": item.raw_arguments,
        "unseen_identifiers": item.unseen,
        "model_said": item.model_said,
        "note": approval.note,
        "requested_at": approval.requested_at,
        "expires_at": approval.expires_at,
        "expired": item.expired,
        "required_approvals": approval.required_approvals,
        "approvals_given": approval.approvals_given,
        "voters": supervision.voters,
        # An edit proposed on a call that needs several approvals: it runs once they all approved it.
        "proposed_arguments": _arguments_json(approval.edited_arguments, supervision.sensitive_fields)
        if item.proposed_lines else None,
        "proposed_arguments_text": _arguments_text(item.proposed_lines) if item.proposed_lines else None,
        "proposed_args_hash": approval.edited_args_hash or None,
        "proposed_by": supervision.voters[0] if approval.edited_args_hash and supervision.voters else None,
        "group": supervision.group,
        "rule_name": approval.rule_name or None,
        "rule_version": approval.rule_version,
        "allow_edits": supervision.allow_edits,
        "parameters": supervision.parameters,
        # The card's evidence, as the queue shows it (masked when stored).
        "evidence": {key: item.evidence.get(key, default) for key, default in (("said", ""), ("read", []), ("values", []))},
        "outside_paths": item.outside_paths,
        "state": item.state,
        "state_checked_at": item.state_checked_at,
        "twins": item.twins,
    }


def _twins_refused(refusal: TwinsUnconfirmed) -> Response:
    return Response({
        "detail": f"Nothing was approved: {refusal} Send \"twins_confirmed\": {refusal.confirm} to approve anyway.",
        "twins": refusal.conflicts, "twins_to_confirm": refusal.confirm,
    }, status=status.HTTP_409_CONFLICT)


_PAGE = inline_serializer("PendingApprovalPage", {
    "count": serializers.IntegerField(help_text="Pending approvals in all."),
    "next": serializers.URLField(allow_null=True),
    "previous": serializers.URLField(allow_null=True),
    "results": api.PendingApprovalSerializer(many=True),
})


class ApprovalListView(ApiView):
    required_perms = {"GET": (PERM_VIEW_APPROVAL,)}

    @extend_schema(
        operation_id="approvals_pending", summary="Pending approvals, oldest first, 50 a page",
        parameters=[PAGE_PARAMETER], responses={200: _PAGE, **errors(400)},
    )
    def get(self, request):
        page = approvals_pending_page(page=page_number(request), projects=visible_projects(request.user))
        items = list(page.object_list)
        pending_supervision(items)  # what the queue's cards add: twins, the state check's answer
        return Response({
            "count": page.paginator.count,
            "next": page_url(request, page.next_page_number() if page.has_next() else None),
            "previous": page_url(request, page.previous_page_number() if page.has_previous() else None),
            "results": [_pending_item(item, item.supervision) for item in items],
        })


class ApprovalDecisionView(ApiView):
    required_perms = {"POST": (PERM_DECIDE,)}
    approve = True
    serializer = api.DecisionSerializer

    def post(self, request, pk: int):
        decision = self.serializer(data=request.data)
        decision.is_valid(raise_exception=True)
        given = decision.validated_data
        if self.approve and given.get("grant"):  # approving more than this call: its twins first, by name
            try:
                twins_check([pk], confirmed=given.get("twins_confirmed", ()), projects=decided_projects(request.user))
            except TwinsUnconfirmed as exc:
                return _twins_refused(exc)
        try:
            approval = approval_decide(
                approval_id=pk, user=request.user, approve=self.approve, reason=given.get("reason", ""),
                arguments=given.get("arguments"), guidance=given.get("guidance", ""), grant=given.get("grant", ""),
                args_hash=given.get("args_hash", ""),
            )
        except Approval.DoesNotExist:
            raise NotFound("No such approval.")
        except AlreadyDecided as exc:
            winner = exc.approval
            return Response(
                {"detail": f"Already {approval_decision_text(winner)}.", "approval": approval_brief(winner)},
                status=status.HTTP_409_CONFLICT,
            )
        except NotAllowed as exc:
            raise PermissionDenied(str(exc))
        except EditRefused as exc:
            raise ValidationError({"arguments" if not isinstance(exc, GrantRefused) else "grant": [str(exc)]})
        answer = {"detail": decision_text(approval), "approval": approval_brief(approval)}
        if given.get("grant") and approval.status == Approval.Status.APPROVED:
            grant = grant_of_approval(approval=approval, scope=given["grant"])
            if grant is not None:
                answer["grant"] = grant_brief(grant)
        return Response(answer)


def decision_text(approval: Approval) -> str:
    """What the person who decided is told."""
    tool, run = approval.tool_call.tool_name, approval.run_id
    if approval.status == Approval.Status.EXPIRED:
        return "Too late: this approval had expired and was recorded as expired, which counts as a rejection."
    if approval.status == Approval.Status.PENDING:
        return (f"Approval {approval.approvals_given} of {approval.required_approvals} recorded for {tool} in run {run}: "
                "another person must approve it too.")
    edited = " with edited arguments" if approval.edited_args_hash else ""
    return f"{approval.get_status_display()} {tool} in run {run}{edited}."


_DECISION_RESPONSES = {
    200: api.DecisionResultSerializer,
    409: OpenApiResponse(DecisionConflictSerializer, description="Already decided: `detail` says by whom and when, "
                         "`approval` how. Or, approving with a grant, the call has twins not named in "
                         "`twins_confirmed`: `twins` lists them, nothing was decided."),
    **errors(400, 404),
}


class ApprovalApproveView(ApprovalDecisionView):
    approve = True
    serializer = api.ApproveSerializer

    @extend_schema(
        operation_id="approvals_approve", request=api.ApproveSerializer, responses=_DECISION_RESPONSES,
        summary="Approve a pending call, optionally with edited arguments or a grant; the run resumes",
        description="A call that needs two people stays pending after the first approval (`approvals_given` 1 of 2). "
                    "403: this person may not decide it (not in its group, launched the run, already approved). "
                    "400: the edit is refused (not a JSON object, the tool's schema refuses it, the tool forbids "
                    "edits, not the deciding approval) or the grant cannot be given.",
    )
    def post(self, request, pk: int):
        return super().post(request, pk)


class ApprovalRejectView(ApprovalDecisionView):
    approve = False
    serializer = api.RejectSerializer

    @extend_schema(operation_id="approvals_reject", request=api.RejectSerializer, responses=_DECISION_RESPONSES,
                   summary="Reject a pending call, with a reason (and guidance) the model is told",
                   description="One rejection decides, also of a call that needs two people. "
                               "403: only members of the call's group may decide it.")
    def post(self, request, pk: int):
        return super().post(request, pk)


class ApprovalBulkView(ApiView):
    required_perms = {"POST": (PERM_DECIDE,)}

    @extend_schema(
        operation_id="approvals_bulk", summary="Approve or reject several pending calls with one reason",
        description="Each approval is decided on its own: those decided meanwhile are listed in `already`, those "
                    "this person may not decide (or that do not exist) in `refused`; the others are decided. "
                    "An approval of calls that have twins (calls on the same thing, of each other or waiting or "
                    "decided in the window) decides nothing, 409, unless `twins_confirmed` names every one.",
        request=api.BulkDecisionSerializer,
        responses={200: api.BulkOutcomeSerializer,
                   409: OpenApiResponse(TwinsConflictSerializer, description="Twins not confirmed: nothing decided."),
                   **errors(400)},
    )
    def post(self, request):
        body = api.BulkDecisionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            outcome = approvals_decide_many(
                approval_ids=body.validated_data["ids"], user=request.user,
                approve=body.validated_data["decision"] == "approve", reason=body.validated_data.get("reason", ""),
                twins_confirmed=body.validated_data.get("twins_confirmed", ()),
            )
        except TwinsUnconfirmed as exc:
            return _twins_refused(exc)
        return Response({
            "decided": [approval_brief(approval) for approval in outcome.decided],
            "already": [{"id": approval_id, "detail": detail} for approval_id, detail in outcome.already],
            "refused": [{"id": approval_id, "detail": detail} for approval_id, detail in outcome.refused],
        })


def _id_parameter(request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:  # "²" is a digit to isdigit, not to int
        raise ValidationError({name: ["A non-negative integer."]})
    return int(raw)


class ArchivedApprovalListView(ApiView):
    """Decisions of runs that were pruned or deleted: they outlive their runs."""

    required_perms = {"GET": (PERM_VIEW_APPROVAL,)}

    @extend_schema(
        operation_id="approvals_archived", summary="Decisions of deleted runs, in the order they were archived",
        parameters=[
            OpenApiParameter("run_id", OpenApiTypes.INT, OpenApiParameter.QUERY, description="Only this run's."),
            OpenApiParameter("after", OpenApiTypes.INT, OpenApiParameter.QUERY,
                             description="The `id` of the last row of the previous page (`next` has it)."),
        ],
        responses={200: api.ArchivedApprovalPageSerializer, **errors(400)},
    )
    def get(self, request):
        run_id, after = _id_parameter(request, "run_id"), _id_parameter(request, "after") or 0
        rows = approvals_archived(run_id=run_id, after=after, limit=ARCHIVE_PAGE + 1,
                                  projects=visible_projects(request.user))
        page, more = rows[:ARCHIVE_PAGE], len(rows) > ARCHIVE_PAGE
        following = None
        if more:
            query = request.query_params.copy()
            query["after"] = str(page[-1].pk)
            following = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
        return Response({"next": following, "results": api.ArchivedApprovalSerializer(page, many=True).data})
