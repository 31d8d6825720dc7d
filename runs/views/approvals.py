"""The approval queue: pending destructive calls, the decision buttons, and the audit trail."""
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from runs.models import Approval
from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL
from runs.selectors.approvals import (
    approval_decision_text,
    approvals_oldest_pending,
    approvals_pending_count,
    approvals_pending_page,
    approvals_recent_decisions,
)
from runs.services.approvals import AlreadyDecided, approval_decide
from runs.snapshots import approval_brief


class ApprovalDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=2000)


def _queue_context(request) -> dict:
    page = approvals_pending_page(page=request.GET.get("page"))
    return {"pending": page.object_list, "page_obj": page, "decisions": approvals_recent_decisions()}


def _wants_json(request) -> bool:
    # Explicit: a browser's form post accepts */*, which would match application/json.
    return "application/json" in request.headers.get("Accept", "")


@login_required
@permission_required(PERM_VIEW_APPROVAL, raise_exception=True)
@require_GET
def approval_queue(request):
    return render(request, "runs/approvals.html", _queue_context(request))


@login_required
@permission_required(PERM_VIEW_APPROVAL, raise_exception=True)
@require_GET
def approval_queue_partial(request):
    return render(request, "runs/_approval_list.html", _queue_context(request))


@login_required
@permission_required(PERM_VIEW_APPROVAL, raise_exception=True)
@require_GET
def approval_count(request):
    # The oldest wait as an instant and as seconds now: the badge ages it by its own clock from
    # the seconds, so a browser whose clock is off still shows the right age.
    oldest = approvals_oldest_pending()
    waited = max(0.0, (timezone.now() - oldest.requested_at).total_seconds()) if oldest else None
    return JsonResponse({
        "pending": approvals_pending_count(),
        "oldest_requested_at": oldest.requested_at.isoformat() if oldest else None,
        "oldest_waiting_seconds": round(waited, 1) if oldest else None,
    })


@login_required
@permission_required(PERM_DECIDE, raise_exception=True)
@require_POST
def approval_decide_view(request, pk: int):
    form = ApprovalDecisionForm(request.POST)
    if not form.is_valid():
        if _wants_json(request):
            return JsonResponse({"error": "invalid decision", "fields": form.errors}, status=400)
        return HttpResponseBadRequest("invalid decision")
    approve = form.cleaned_data["decision"] == "approve"
    try:
        approval = approval_decide(approval_id=pk, user=request.user, approve=approve, reason=form.cleaned_data["reason"])
    except Approval.DoesNotExist:
        raise Http404("no such approval")
    except AlreadyDecided as exc:
        winner = exc.approval
        text = f"Already {approval_decision_text(winner)}."
        if _wants_json(request):
            return JsonResponse({"error": text, "approval": approval_brief(winner)}, status=409)
        messages.error(request, text)
        return redirect("approval_queue")

    if approval.status == Approval.Status.EXPIRED:
        text = "Too late: this approval had expired and was recorded as expired, which counts as a rejection."
        level = messages.WARNING
    else:
        text = f"{approval.get_status_display()} {approval.tool_call.tool_name} in run {approval.run_id}."
        level = messages.SUCCESS
    if _wants_json(request):
        return JsonResponse({"message": text, "approval": approval_brief(approval)})
    messages.add_message(request, level, text)
    return redirect("approval_queue")
