"""The approval queue: pending destructive calls, the decision controls, and the audit trail."""
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from projects.access import visible_projects
from runs.controls.budget_requests import budget_requests, budget_requests_count
from runs.engine.storage.snapshots import approval_brief
from runs.models import Approval
from runs.roles import PERM_DECIDE, PERM_VIEW_APPROVAL, PERM_VIEW_BUDGET
from runs.supervision.approvals.bulk_decisions import TwinsUnconfirmed, approvals_decide_many, decided_projects
from runs.supervision.approvals.decide import AlreadyDecided, EditRefused, NotAllowed, approval_decide
from runs.supervision.evidence.twins import confirmed_ids, twins_check
from runs.supervision.queue.card_controls import approval_for_page, approvals_queue_page, decision_refusals
from runs.supervision.queue.cards import (
    PAGE_SIZE,
    approval_decision_text,
    approvals_recent_decisions,
    approvals_waiting,
)
from runs.web.forms.budgets import BudgetRaiseForm

# The buttons of a card: approve alone, approve with a grant for the rest of the run, reject.
DECISIONS = {
    "approve": (True, ""),
    "approve_identical": (True, "identical"),
    "approve_tool": (True, "tool"),
    "reject": (False, ""),
}


class ApprovalDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[(d, d) for d in DECISIONS])
    reason = forms.CharField(required=False, max_length=2000)
    guidance = forms.CharField(required=False, max_length=2000)
    # Sent only when the operator opened the edit box (it is disabled otherwise).
    arguments = forms.CharField(required=False, max_length=100_000, strip=False)
    # The hash of the arguments the card showed: an approval is for those, and for no edit made since.
    args_hash = forms.CharField(required=False, max_length=64)


class BulkDecisionForm(forms.Form):
    ids = forms.TypedMultipleChoiceField(coerce=int, choices=[])  # any ids: each is checked when decided
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    reason = forms.CharField(required=False, max_length=2000)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["ids"].valid_value = lambda value: str(value).isdigit()

    def clean_ids(self):
        ids = list(dict.fromkeys(self.cleaned_data["ids"]))
        if len(ids) > PAGE_SIZE:
            raise forms.ValidationError(f"at most {PAGE_SIZE} approvals at once (one page)")
        return ids


def _queue_context(request) -> dict:
    projects = visible_projects(request.user)
    page = approvals_queue_page(page=request.GET.get("page"), projects=projects)
    decision_refusals(page.object_list, request.user)
    # The queue is oldest first: on its first page, the oldest waiting call is the first shown.
    if page.number == 1:
        oldest = page.object_list[0].approval.requested_at if page.object_list else None
    else:
        oldest = approvals_waiting(projects).oldest_requested_at
    return {
        "pending": page.object_list,
        "page_obj": page,
        "decisions": approvals_recent_decisions(projects=projects),
        "oldest_pending_at": oldest,
        "budget_requests": budget_requests(projects=projects) if request.user.has_perm(PERM_VIEW_BUDGET) else [],
        "raise_form": BudgetRaiseForm(),
    }


def _wants_json(request) -> bool:
    # Explicit: a browser's form post accepts */*, which would match application/json.
    return "application/json" in request.headers.get("Accept", "")


def _back(request, fallback: str = "approval_queue"):
    """Back to the page the form was on (the queue, or one approval's page)."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(target)
    return redirect(fallback)


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
def approval_detail(request, pk: int):
    """One approval with the queue's controls: where escalation e-mails link. A GET never decides."""
    item = approval_for_page(approval_id=pk)
    if item is None:
        raise Http404("No such approval.")
    decision_refusals([item], request.user)
    template = "runs/_approval_detail_body.html" if request.GET.get("partial") else "runs/approval_detail.html"
    return render(request, template, {"item": item, "decision_text": approval_decision_text(item.approval)})


@login_required
@permission_required(PERM_VIEW_APPROVAL, raise_exception=True)
@require_GET
def approval_count(request):
    # The oldest wait as an instant and as seconds now: the badge ages it by its own clock from
    # the seconds, so a browser whose clock is off still shows the right age.
    projects = visible_projects(request.user)
    waiting = approvals_waiting(projects)
    oldest = waiting.oldest_requested_at
    return JsonResponse({
        "pending": waiting.count,
        "expiring": waiting.expiring,
        "budget_waiting": budget_requests_count(projects) if request.user.has_perm(PERM_VIEW_BUDGET) else 0,
        "oldest_requested_at": oldest.isoformat() if oldest else None,
        "oldest_waiting_seconds": round(waiting.oldest_waited_seconds, 1) if oldest else None,
    })


def _decision_message(approval: Approval) -> tuple[str, int]:
    call = approval.tool_call
    if approval.status == Approval.Status.EXPIRED:
        return "Too late: this approval had expired and was recorded as expired, which counts as a rejection.", messages.WARNING
    if approval.status == Approval.Status.PENDING:
        return (
            f"Your approval is {approval.approvals_given} of {approval.required_approvals} for {call.tool_name} "
            f"in run {approval.run_id}: it runs once another person approves.",
            messages.SUCCESS,
        )
    edited = " with your edited arguments" if approval.edited_args_hash else ""
    return f"{approval.get_status_display()} {call.tool_name} in run {approval.run_id}{edited}.", messages.SUCCESS


@login_required
@permission_required(PERM_DECIDE, raise_exception=True)
@require_POST
def approval_decide_view(request, pk: int):
    form = ApprovalDecisionForm(request.POST)
    if not form.is_valid():
        if _wants_json(request):
            return JsonResponse({"error": "invalid decision", "fields": form.errors}, status=400)
        return HttpResponseBadRequest("invalid decision")
    data = form.cleaned_data
    approve, grant = DECISIONS[data["decision"]]
    # The edit box holds the call's arguments (masked values as shown): sent unchanged, the
    # service finds the same arguments hash and records no edit.
    arguments = data["arguments"] if approve and data["arguments"].strip() else None
    if grant:  # approving more than this call: its twins first, by name (the card's checkbox)
        try:
            twins_check([pk], confirmed=confirmed_ids(request.POST.getlist("confirm_twins")),
                        projects=decided_projects(request.user))
        except TwinsUnconfirmed as exc:
            return _refused(request, _twins_text(exc, card=True), 409, twins=exc)
    try:
        approval = approval_decide(
            approval_id=pk, user=request.user, approve=approve,
            # A nudged card has two reason fields (rejecting, and the nudge's): the one written counts.
            reason=next((r for r in request.POST.getlist("reason") if r.strip()), data["reason"])[:2000],
            arguments=arguments, guidance="" if approve else data["guidance"].strip(), grant=grant,
            args_hash=data["args_hash"],
        )
    except Approval.DoesNotExist:
        raise Http404("no such approval")
    except AlreadyDecided as exc:
        return _refused(request, f"Already {approval_decision_text(exc.approval)}.", 409, approval_brief(exc.approval))
    except EditRefused as exc:  # a refused edit, or a grant this decision cannot give: says which
        return _refused(request, str(exc), 400)
    except NotAllowed as exc:
        return _refused(request, f"Not allowed: {exc}", 403)

    text, level = _decision_message(approval)
    if _wants_json(request):
        return JsonResponse({"message": text, "approval": approval_brief(approval)})
    messages.add_message(request, level, text)
    return _back(request)


def _refused(request, text: str, status: int, approval: dict | None = None, twins: TwinsUnconfirmed | None = None):
    if _wants_json(request):
        body = {"error": text}
        if approval is not None:
            body["approval"] = approval
        if twins is not None:
            body.update(twins=twins.conflicts, twins_to_confirm=twins.confirm)
        return JsonResponse(body, status=status)
    messages.error(request, text)
    return _back(request)


def _already(text: str) -> str:
    """ "already approved by bob at ..." from the service's "Already approved by bob at ...". """
    text = text.strip().rstrip(".")
    return text[0].lower() + text[1:] if text.lower().startswith("already ") else f"already {text}"


def bulk_message(outcome, *, approve: bool) -> str:
    """One message for a bulk decision: what was decided, what others decided meanwhile, what was refused."""
    verb = "Approved" if approve else "Rejected"
    parts = []
    if outcome.decided:
        # A two-person call may still wait after this approval: "#12 (1 of 2 approvals)".
        parts.append(f"{verb} {len(outcome.decided)}: " + ", ".join(
            f"#{a.pk} ({a.approvals_given} of {a.required_approvals} approvals)" if a.status == Approval.Status.PENDING
            else f"#{a.pk}" for a in outcome.decided
        ) + ".")
    else:
        parts.append(f"{verb} none.")
    if outcome.already:
        parts.append("Decided meanwhile: " + "; ".join(f"#{pk} {_already(text)}" for pk, text in outcome.already) + ".")
    if outcome.refused:
        parts.append("Not decided: " + "; ".join(f"#{pk} ({text.rstrip('.')})" for pk, text in outcome.refused) + ".")
    return " ".join(parts)


@login_required
@permission_required(PERM_DECIDE, raise_exception=True)
@require_POST
def approval_bulk(request):
    """Approve or reject the selected approvals with one reason; each is decided on its own."""
    form = BulkDecisionForm(request.POST)
    if not form.is_valid():
        text = "Select at least one approval." if "ids" in form.errors else "invalid bulk decision"
        return _refused(request, text, 400)
    approve = form.cleaned_data["decision"] == "approve"
    try:
        outcome = approvals_decide_many(
            approval_ids=form.cleaned_data["ids"], user=request.user, approve=approve, reason=form.cleaned_data["reason"],
            twins_confirmed=confirmed_ids(request.POST.getlist("confirm_twins")),
        )
    except TwinsUnconfirmed as exc:
        return _bulk_twins_refused(request, exc, ids=form.cleaned_data["ids"], reason=form.cleaned_data["reason"])
    text = bulk_message(outcome, approve=approve)
    if _wants_json(request):
        return JsonResponse({
            "message": text,
            "decided": [a.pk for a in outcome.decided],
            "already": [{"id": pk, "text": t} for pk, t in outcome.already],
            "refused": [{"id": pk, "text": t} for pk, t in outcome.refused],
        })
    level = messages.WARNING if outcome.already or outcome.refused else messages.SUCCESS
    messages.add_message(request, level, text)
    return redirect("approval_queue")


def _twins_text(refusal: TwinsUnconfirmed, *, card: bool = False) -> str:
    how = ("tick “I know …” under the twins on its card, or approve it alone" if card
           else "confirm them by name below, or select fewer")
    return f"Nothing was approved: {refusal} To approve anyway, {how}."


def _bulk_twins_refused(request, refusal: TwinsUnconfirmed, *, ids: list[int], reason: str):
    """A bulk approval holding twins: nothing decided; the page names them and offers to confirm them."""
    context = {"twins_refusal": refusal, "twins_ids": ids, "twins_reason": reason, "twins_text": _twins_text(refusal)}
    if _wants_json(request):
        return JsonResponse({
            "error": context["twins_text"], "twins": refusal.conflicts, "twins_to_confirm": refusal.confirm,
            "confirm_html": render_to_string("runs/_bulk_twins.html", context, request=request),
        }, status=409)
    return render(request, "runs/approvals.html", {**_queue_context(request), **context}, status=409)
