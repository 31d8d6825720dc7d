"""An operator's levers on a run from its page: one view for every lever declared in
runs/controls/levers.py (pause, resume, a message to the agent, stop with a summary...), and its routes.

Each is a POST (CSRF-checked) that calls the lever's service; the service decides whether the run
can still take it (one outcome when it races the run's own end) and says why not in words. A form
post goes back to the run page with a message; a request that accepts JSON gets JSON.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import Http404, JsonResponse
from django.shortcuts import redirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from runs.controls.lever_declaration import Lever
from runs.controls.levers import DECLARED, LeverRefused
from runs.models import Run

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


def lever_view(lever: Lever):
    """The page view of one declared lever."""
    @login_required
    @permission_required(lever.permission, raise_exception=True)
    @require_POST
    def view(request, pk: int):
        # The service refuses a field it cannot take (an empty or too long note), in words.
        body = {lever.body.field: request.POST.get(lever.body.field, "")} if lever.body else {}
        try:
            result = lever.pull(run_id=pk, user=request.user, **body)
        except Run.DoesNotExist:
            raise Http404("No such run.")
        except LeverRefused as exc:
            if _wants_json(request):
                return JsonResponse({"error": str(exc)}, status=409)
            answer_at_controls(request, messages.ERROR, str(exc))
            return back_to_controls(pk)
        text = lever.page_answer(result if isinstance(result, Run) else Run.objects.get(pk=pk))
        if _wants_json(request):
            return JsonResponse({"message": text})
        answer_at_controls(request, messages.SUCCESS, text)
        return back_to_controls(pk)

    view.__name__ = f"run_{lever.name}_view"
    return view


def page_routes() -> list:
    """runs/<pk>/<lever>/, named run_<lever>, for every declared lever."""
    return [path(f"runs/<int:pk>/{lever.slug}/", lever_view(lever), name=lever.page_route) for lever in DECLARED]
