"""An operator's levers on a run from its page: pause, resume, a message to the agent, stop with a summary.

Each is a POST (CSRF-checked) that calls one service; the service decides whether the run can
still take it (one outcome when it races the run's own end) and says why not in words. A form
post goes back to the run page with a message; a request that accepts JSON gets JSON.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs.controls.levers import LeverRefused, run_message, run_pause, run_resume, run_stop
from runs.models import Run
from runs.roles import PERM_CANCEL

# The answer to a control of the run page is shown beside that control (the page scrolls there),
# not at the top of the page: these tags say where (templates/runs/run_detail.html).
RUN_ANSWER = "run-answer"  # the levers, cancel and re-run: the top of the controls column
GRANT_ANSWER = "grant-answer"  # a revoked grant: the grants card
ANCHORS = {RUN_ANSWER: "run-answers", GRANT_ANSWER: "run-grants-section"}


def answer_at_controls(request, level: int, text: str, *, where: str = RUN_ANSWER) -> None:
    messages.add_message(request, level, text, extra_tags=where)


def back_to_controls(pk: int, *, where: str = RUN_ANSWER):
    return redirect(reverse("run_detail", args=[pk]) + f"#{ANCHORS[where]}")


def _wants_json(request) -> bool:
    # Explicit: a browser's form post accepts */*, which would match application/json.
    return "application/json" in request.headers.get("Accept", "")


def _lever(request, pk: int, act, done: str):
    """Pull one lever: `act()` calls the service; `done(result)` is the message when it took."""
    try:
        result = act()
    except Run.DoesNotExist:
        raise Http404("No such run.")
    except LeverRefused as exc:
        if _wants_json(request):
            return JsonResponse({"error": str(exc)}, status=409)
        answer_at_controls(request, messages.ERROR, str(exc))
        return back_to_controls(pk)
    text = done(result)
    if _wants_json(request):
        return JsonResponse({"message": text})
    answer_at_controls(request, messages.SUCCESS, text)
    return back_to_controls(pk)


def _pause_text(run: Run) -> str:
    if run.status == Run.Status.PAUSED:
        return f"Run {run.pk} is paused."
    return f"Run {run.pk} pauses after its current step."


def _stop_text(run: Run) -> str:
    if run.is_finished:
        return f"Run {run.pk} was stopped; the model was asked for a summary."
    return f"Run {run.pk} stops after its current step and asks the model for a summary."


@login_required
@permission_required(PERM_CANCEL, raise_exception=True)
@require_POST
def run_pause_view(request, pk: int):
    return _lever(request, pk, lambda: run_pause(run_id=pk, user=request.user), _pause_text)


@login_required
@permission_required(PERM_CANCEL, raise_exception=True)
@require_POST
def run_resume_view(request, pk: int):
    return _lever(request, pk, lambda: run_resume(run_id=pk, user=request.user), lambda run: f"Run {run.pk} resumes.")


@login_required
@permission_required(PERM_CANCEL, raise_exception=True)
@require_POST
def run_message_view(request, pk: int):
    # The service refuses an empty or too long note, in words.
    text = request.POST.get("text", "")
    return _lever(
        request, pk, lambda: run_message(run_id=pk, user=request.user, text=text),
        lambda note: "Your message goes to the agent before its next model request.",
    )


@login_required
@permission_required(PERM_CANCEL, raise_exception=True)
@require_POST
def run_stop_view(request, pk: int):
    return _lever(request, pk, lambda: run_stop(run_id=pk, user=request.user), _stop_text)
