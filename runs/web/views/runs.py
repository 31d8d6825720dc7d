"""Launching a run, its live page, and the actions on it."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from projects.access import may
from projects.holders import holders_of, names_text
from runs.controls.budget_requests import budget_requests
from runs.demo_model.scenarios import DEMO_EXAMPLES
from runs.lifecycle.call_arguments import run_call_arguments, run_timeline
from runs.lifecycle.launch import rerun_launch, run_launch
from runs.lifecycle.launch_rules import POLICY_LABELS, LaunchNotAllowed, launch_policy
from runs.lifecycle.relatives import run_family
from runs.lifecycle.replay import replays_of_run
from runs.lifecycle.run_marks import decision_marks, run_decision_counts, status_label
from runs.lifecycle.run_reads import agent_defaults, call_in_run, run_for_page
from runs.lifecycle.runs import InvalidRun, run_cancel
from runs.models import Approval, BudgetHold, Run, RunGrant, ToolCall
from runs.roles import PERM_CANCEL, PERM_CHANGE_BUDGET, PERM_DECIDE, PERM_LAUNCH, PERM_VIEW, PERM_VIEW_APPROVAL
from runs.supervision.approvals.grants import grant_revoke, grants_of_run
from runs.supervision.queue.card_controls import approval_for_page, decision_refusals
from runs.web.forms.launch import LaunchForm
from runs.web.timeline_html import timeline_html
from runs.web.views.levers import GRANT_ANSWER, answer_at_controls, back_to_controls
from toolsapp.builtin import MEMORY_TOOLS


@login_required
@permission_required(PERM_LAUNCH, raise_exception=True)
def run_launch_view(request):
    # ?agent=<pk> preselects the agent; ?task= fills the task (the demo's example links).
    initial = {"agent": request.GET.get("agent"), "task": request.GET.get("task", "")[:20_000]}
    form = LaunchForm(request.POST if request.method == "POST" else None, initial=initial, user=request.user)
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            run = run_launch(
                agent=data["agent"],
                task=data["task"],
                user=request.user,
                overrides=form.overrides(),
                customer=data["customer"] or None,
                approval_policy=data["approval_policy"],
            )
        except InvalidRun as exc:
            form.add_error(exc.setting if exc.setting in form.fields else None, str(exc))
        else:
            return redirect("run_detail", pk=run.pk)
    agents = list(form.fields["agent"].queryset)
    return render(request, "runs/launch.html", {"form": form, "agent_defaults": agent_defaults(agents=agents),
                                                "example_tasks": DEMO_EXAMPLES})


@login_required
@permission_required(PERM_VIEW, raise_exception=True)
@require_safe
def run_detail(request, pk: int):
    run = run_for_page(run_id=pk)
    if run is None:
        raise Http404("No such run.")
    sees_approvals = request.user.has_perm(PERM_VIEW_APPROVAL)
    waiting = run_waiting_cards(run, request.user) if sees_approvals else []
    if request.GET.get("partial") == "waiting":  # the run page's script, when approvals change
        if not sees_approvals:
            raise PermissionDenied("You may not see approvals.")
        return render(request, "runs/_run_waiting.html", {"waiting": waiting})
    context = {
        # Its calls waiting for a person, as the queue's cards (the same evidence, the same controls).
        "sees_approvals": sees_approvals,
        "waiting": waiting,
        "run": run,
        # The run it came from (fork or re-run), its forks and its re-runs.
        "family": run_family(run),
        "ws_path": f"/ws/runs/{run.pk}/",
        "status_labels": {**dict(Run.Status.choices), Run.STOPPING: Run.STOPPING_LABEL},
        "call_status_labels": dict(ToolCall.Status.choices),
        "stop_reason_labels": dict(Run.StopReason.choices),
        # Which statuses are final: the page applies events and never decides this itself.
        "status_groups": {"run_finished": list(Run.FINISHED_STATUSES), "call_done": list(ToolCall.DONE_STATUSES),
                          "call_unknown": [ToolCall.Status.UNKNOWN]},
        "call_result_url": reverse("call_result", args=[run.pk, 0]),
        "approval_url": reverse("approval_detail", args=[0]),
        "grants": grants_of_run(run.pk),
        "replays": replays_of_run(run.pk),
        "policy_labels": POLICY_LABELS,
        # Its agent's long-term memory, when the run called a memory tool (the facts page filters by run).
        "used_memory": any(f"\n{name}\n" in run.tools_used for name in MEMORY_TOOLS),
    }
    rejected, edited = run_decision_counts(run_id=run.pk)
    # Beside its status: an operator's stop in words, and the calls people refused or changed.
    context["status_text"], context["marks"] = status_label(run), decision_marks(rejected=rejected, edited=edited)
    timeline = run_timeline(run=run)
    context.update(budget_context(run, request.user))
    context["timeline_html"] = timeline_html(run=run, timeline=timeline)
    context["timeline_arguments"] = timeline["arguments"]
    return render(request, "runs/run_detail.html", context)


def budget_context(run: Run, user) -> dict:
    """A run a budget holds: what lets it go on, who may raise the budget (named), and the queue's
    raise for those who may."""
    hold = BudgetHold.objects.filter(run=run).first() if not run.is_finished else None
    if hold is None:
        return {"budget_hold": None}
    budget_request = next(iter(budget_requests(run_id=run.pk)), None)
    project_id = budget_request.budget.project_id if budget_request and budget_request.budget else run.agent.project_id
    return {
        "budget_hold": hold,
        "budget_request": budget_request,
        "budget_raisers": names_text(holders_of(PERM_CHANGE_BUDGET, project_id)),
        "may_raise": bool(budget_request and budget_request.budget) and may(user, PERM_CHANGE_BUDGET, project_id),
    }


WAITING_CARDS = 10  # of one run on its page (each read as its own page reads it); the rest in the queue


def run_waiting_cards(run: Run, user) -> list:
    """The run's calls waiting for a person, oldest first, as the approval queue shows them."""
    ids = (Approval.objects.filter(run=run, status=Approval.Status.PENDING).order_by("requested_at", "pk")
           .values_list("pk", flat=True)[:WAITING_CARDS])
    items = [item for item in (approval_for_page(approval_id=pk) for pk in ids) if item is not None]
    decision_refusals(items, user)
    return items


@login_required
@permission_required(PERM_CANCEL, raise_exception=True)
@require_POST
def run_cancel_view(request, pk: int):
    run = get_object_or_404(Run, pk=pk)
    if run.is_finished:
        answer_at_controls(request, messages.INFO, f"Run {run.pk} had already finished ({run.get_status_display().lower()}).")
    else:
        run = run_cancel(run=run, user=request.user)
        if run.is_finished:
            answer_at_controls(request, messages.SUCCESS, f"Run {run.pk} was cancelled.")
        else:
            answer_at_controls(request, messages.SUCCESS, f"Run {run.pk} will stop at its next check.")
    return back_to_controls(run.pk)


@login_required
@permission_required(PERM_DECIDE, raise_exception=True)
@require_POST
def grant_revoke_view(request, pk: int):
    """Revoke a grant: the run's next matching call goes to a person again."""
    try:
        grant = grant_revoke(grant_id=pk, user=request.user)
    except RunGrant.DoesNotExist:
        raise Http404("No such grant.")
    if grant.revoked_by_name == request.user.get_username():
        answer_at_controls(request, messages.SUCCESS, f"Revoked the grant of {grant}: such calls go to a person again.",
                           where=GRANT_ANSWER)
    else:
        answer_at_controls(request, messages.INFO, f"{grant.revoked_by_name} had already revoked the grant of {grant}.",
                           where=GRANT_ANSWER)
    return back_to_controls(grant.run_id, where=GRANT_ANSWER)


@login_required
@permission_required(PERM_LAUNCH, raise_exception=True)
@require_POST
def run_rerun(request, pk: int):
    original = get_object_or_404(Run.objects.select_related("agent"), pk=pk)
    try:
        policy = launch_policy(user=request.user, requested=request.POST.get("approval_policy"))
    except LaunchNotAllowed as exc:
        raise PermissionDenied(str(exc))
    except ValueError as exc:
        answer_at_controls(request, messages.ERROR, f"Could not run it again: {exc}.")
        return back_to_controls(original.pk)
    try:
        run = rerun_launch(original=original, user=request.user, approval_policy=policy)
    except InvalidRun as exc:
        answer_at_controls(request, messages.ERROR, f"Could not run it again: {exc}.")
        return back_to_controls(original.pk)
    return redirect("run_detail", pk=run.pk)


@login_required
@permission_required(PERM_VIEW, raise_exception=True)
@require_safe
def call_arguments(request, pk: int):
    """The run's calls' arguments, masked as in the queue (the run page asks after each step)."""
    if not Run.objects.filter(pk=pk).exists():
        raise Http404("No such run.")
    try:
        after = max(0, int(request.GET.get("after", 0)))
    except ValueError:
        return JsonResponse({"error": "after must be a whole number (a call's id)"}, status=400)
    calls, more = run_call_arguments(run_id=pk, after=after)
    return JsonResponse({"run_id": pk, "calls": calls, "more": more})


@login_required
@permission_required(PERM_VIEW, raise_exception=True)
@require_safe
def call_result(request, pk: int, call_pk: int):
    call = call_in_run(run_id=pk, call_pk=call_pk)
    if call is None:
        raise Http404("No such call in this run.")
    return JsonResponse(
        {
            "run_id": call.run_id,
            "pk": call.pk,
            "id": call.call_id,
            "tool": call.tool_name,
            "status": call.status,
            "truncated": call.truncated,
            "result": call.result,
        }
    )
