"""Operators' levers over the API: pause, resume, a note for the agent, stop with a summary.
Each needs runs.cancel_run (operators; viewers see runs but cannot steer them); a lever that
cannot apply (the run ended, is not paused, ...) answers 409 with the reason in words."""
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apikit.errors import Conflict
from apikit.schema import errors
from apikit.views import ApiView
from runs.controls.lever_state import operator_note_data, run_lever_state
from runs.controls.levers import LeverRefused, run_message, run_pause, run_resume, run_stop
from runs.engine.storage.snapshots import run_summary
from runs.models import Run
from runs.roles import PERM_CANCEL
from runs.web.api.serializers.levers import LeverResultSerializer, RunMessageSerializer


def _pull(lever, **kwargs):
    try:
        return lever(**kwargs)
    except Run.DoesNotExist:
        raise NotFound("No such run.")
    except LeverRefused as exc:
        raise Conflict(str(exc))


def _reply(run: Run, detail: str, **extra) -> Response:
    return Response({"detail": detail, "run": run_summary(run), "levers": run_lever_state(run), **extra})


def _lever_schema(name: str, summary: str, request=None, examples=()):
    return extend_schema(operation_id=f"runs_{name}", summary=summary, request=request, examples=list(examples),
                         responses={200: LeverResultSerializer, **errors(*((400,) if request else ()), 404, 409)})


class RunLeverView(ApiView):
    required_perms = {"POST": (PERM_CANCEL,)}
    takes_no_body = True


class RunPauseView(RunLeverView):
    @_lever_schema("pause", "Pause a run at its next boundary (at once if nobody drives it); it holds no worker while paused")
    def post(self, request, pk: int):
        run = _pull(run_pause, run_id=pk, user=request.user)
        paused = run.status == Run.Status.PAUSED
        return _reply(run, f"Run {pk} is paused." if paused else f"Run {pk} will pause at its next boundary.")


class RunResumeView(RunLeverView):
    @_lever_schema("resume", "Resume a paused run exactly where it stopped")
    def post(self, request, pk: int):
        run = _pull(run_resume, run_id=pk, user=request.user)
        waiting = run.status == Run.Status.AWAITING_APPROVAL
        return _reply(run, f"Run {pk} resumed" + (": it waits for its pending decisions." if waiting else "."))


class RunMessageView(RunLeverView):
    takes_no_body = False  # its RunMessageSerializer says which fields
    @_lever_schema("message", "Send the agent a note, as a user message before its next model request",
                   request=RunMessageSerializer,
                   examples=[OpenApiExample("A hint", request_only=True, value={"text": "Check order ORD-1002 too."})])
    def post(self, request, pk: int):
        body = RunMessageSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        note = _pull(run_message, run_id=pk, user=request.user, text=body.validated_data["text"])
        run = Run.objects.get(pk=pk)
        return _reply(run, f"The note waits for run {pk}'s next model request.", message=operator_note_data(note))


class RunStopView(RunLeverView):
    @_lever_schema("stop", "End a run with a summary: the model is asked, without tools, what was done")
    def post(self, request, pk: int):
        run = _pull(run_stop, run_id=pk, user=request.user)
        text = f"Run {pk} stopped." if run.is_finished else f"Run {pk} will stop with a summary at its next boundary."
        return _reply(run, text)
