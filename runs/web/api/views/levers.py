"""Operators' levers over the API: one view for every lever declared in runs/controls/levers.py
(pause, resume, a note for the agent, stop with a summary...), its schema, and its routes.
Each needs its lever's right (runs.cancel_run: operators; viewers see runs but cannot steer them);
a lever that cannot apply (the run ended, is not paused, ...) answers 409 with the reason in words."""
from django.urls import path
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apikit.errors import Conflict
from apikit.schema import errors
from apikit.views import ApiView
from runs.controls.lever_declaration import Lever
from runs.controls.lever_state import run_lever_state
from runs.controls.levers import DECLARED, LeverRefused
from runs.engine.storage.snapshots import run_summary
from runs.models import Run
from runs.web.api.serializers.levers import LeverResultSerializer, lever_body_serializer


def lever_view(lever: Lever) -> type[ApiView]:
    """The API view of one declared lever: POST v1/runs/<pk>/<lever>/, operation runs_<lever>."""
    body = lever_body_serializer(lever) if lever.body else None
    examples = [OpenApiExample(lever.body.example[0], request_only=True, value={lever.body.field: lever.body.example[1]})
                ] if lever.body else []

    class RunLeverView(ApiView):
        required_perms = {"POST": (lever.permission,)}
        takes_no_body = body is None  # else its serializer says which fields

        @extend_schema(operation_id=f"runs_{lever.name}", summary=lever.api_summary, request=body, examples=examples,
                       responses={200: LeverResultSerializer, **errors(*((400,) if body else ()), 404, 409)})
        def post(self, request, pk: int):
            fields = {}
            if body is not None:
                given = body(data=request.data)
                given.is_valid(raise_exception=True)
                fields = given.validated_data
            try:
                result = lever.pull(run_id=pk, user=request.user, **fields)
            except Run.DoesNotExist:
                raise NotFound("No such run.")
            except LeverRefused as exc:
                raise Conflict(str(exc))
            run = result if isinstance(result, Run) else Run.objects.get(pk=pk)
            extra = lever.api_extra(result) if lever.api_extra else {}
            return Response({"detail": lever.api_answer(run), "run": run_summary(run), "levers": run_lever_state(run),
                             **extra})

    RunLeverView.__name__ = RunLeverView.__qualname__ = "Run" + "".join(p.title() for p in lever.name.split("_")) + "View"
    return RunLeverView


def api_routes() -> list:
    """v1/runs/<pk>/<lever>/, named api-run-<lever>, for every declared lever."""
    return [path(f"v1/runs/<int:pk>/{lever.slug}/", lever_view(lever).as_view(), name=lever.api_route)
            for lever in DECLARED]
