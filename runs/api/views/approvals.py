"""Approvals: the pending queue and the decisions."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response

from runs.api import serializers as api
from runs.api.schema import errors
from runs.api.views.base import ApiView
from runs.api.views.runs import PAGE_PARAMETER, _page_number, _page_url
from runs.models import Approval
from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL
from runs.selectors.approvals import (
    ARCHIVE_PAGE,
    approval_decision_text,
    approvals_archived,
    approvals_pending_page,
)
from runs.services.approvals import AlreadyDecided, approval_decide
from runs.snapshots import approval_brief


def _arguments_text(lines) -> str:
    return "\n".join(f"{line.indent}{line.key + ': ' if line.key else ''}{line.text}{',' if line.comma else ''}"
                     for line in lines)


def _pending_item(item) -> dict:
    return {
        "id": item.approval.pk,
        "run_id": item.run.pk,
        "agent": item.run.config.get("agent_name", ""),
        "task": item.run.task,
        "tool": item.call.tool_name,
        "call_id": item.call.call_id,
        "args_hash": item.call.args_hash,
        "arguments": _arguments_text(item.lines),
        "arguments_problem": item.arguments_problem,
        "raw_arguments": item.raw_arguments,
        "unseen_identifiers": item.unseen,
        "model_said": item.model_said,
        "note": item.approval.note,
        "requested_at": item.approval.requested_at,
        "expires_at": item.approval.expires_at,
        "expired": item.expired,
    }


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
        page = approvals_pending_page(page=_page_number(request))
        return Response({
            "count": page.paginator.count,
            "next": _page_url(request, page.next_page_number() if page.has_next() else None),
            "previous": _page_url(request, page.previous_page_number() if page.has_previous() else None),
            "results": [_pending_item(item) for item in page.object_list],
        })


class ApprovalDecisionView(ApiView):
    required_perms = {"POST": (PERM_DECIDE,)}
    approve = True

    def post(self, request, pk: int):
        decision = api.DecisionSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        reason = decision.validated_data.get("reason", "")
        try:
            approval = approval_decide(approval_id=pk, user=request.user, approve=self.approve, reason=reason)
        except Approval.DoesNotExist:
            raise NotFound("No such approval.")
        except AlreadyDecided as exc:
            winner = exc.approval
            return Response(
                {"detail": f"Already {approval_decision_text(winner)}.", "approval": approval_brief(winner)},
                status=status.HTTP_409_CONFLICT,
            )
        if approval.status == Approval.Status.EXPIRED:
            text = "Too late: this approval had expired and was recorded as expired, which counts as a rejection."
        else:
            text = f"{approval.get_status_display()} {approval.tool_call.tool_name} in run {approval.run_id}."
        return Response({"detail": text, "approval": approval_brief(approval)})


_DECISION_RESPONSES = {
    200: api.DecisionResultSerializer,
    409: OpenApiResponse(api.DecisionResultSerializer, description="Already decided: `detail` says by whom and when."),
    **errors(400, 404),
}


class ApprovalApproveView(ApprovalDecisionView):
    approve = True

    @extend_schema(operation_id="approvals_approve", summary="Approve a pending call; the run resumes",
                   request=api.DecisionSerializer, responses=_DECISION_RESPONSES)
    def post(self, request, pk: int):
        return super().post(request, pk)


class ApprovalRejectView(ApprovalDecisionView):
    approve = False

    @extend_schema(operation_id="approvals_reject", summary="Reject a pending call, with a reason the model is told",
                   request=api.DecisionSerializer, responses=_DECISION_RESPONSES)
    def post(self, request, pk: int):
        return super().post(request, pk)


def _id_parameter(request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or len(raw) > 18:
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
        rows = approvals_archived(run_id=run_id, after=after, limit=ARCHIVE_PAGE + 1)
        page, more = rows[:ARCHIVE_PAGE], len(rows) > ARCHIVE_PAGE
        following = None
        if more:
            query = request.query_params.copy()
            query["after"] = str(page[-1].pk)
            following = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
        return Response({"next": following, "results": api.ArchivedApprovalSerializer(page, many=True).data})
