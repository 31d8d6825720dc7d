"""Forks: start a run from a copy of another's conversation up to a step, and compare it with its parent."""
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.reverse import reverse

from apikit.schema import errors
from apikit.views import ApiView
from runs.lifecycle.forks import ForkRefused, run_fork
from runs.lifecycle.relatives import NotAFork, run_comparison
from runs.lifecycle.run_reads import run_for_page
from runs.models import Run
from runs.roles import PERM_LAUNCH, PERM_VIEW
from runs.web.api import serializers as api
from runs.web.api.serializers.forks import RunComparisonSerializer, RunForkSerializer
from runs.web.api.views.runs import _run_detail


class RunForkView(ApiView):
    required_perms = {"POST": (PERM_LAUNCH, PERM_VIEW)}

    @extend_schema(
        operation_id="runs_fork", summary="Start a new run from a copy of this run's conversation up to a step",
        description=(
            "The fork has the run's agent, task and customer, and the agent's settings as they are now "
            "(the run's launch choices only where they stay within what the caller may choose today), with "
            'the approval policy "ask"; its "fork" event lists what differs from the run\'s settings. A fork '
            "whose copied steps already reach one of the agent's limits is refused (400). Copied calls never "
            "run again; a call the run had not finished is not run by the fork (its model is told). Only the "
            "fork's new calls run, destructive ones after approval."
        ),
        request=RunForkSerializer,
        responses={201: api.RunDetailSerializer, **errors(400, 404)},
        examples=[
            OpenApiExample("Another result for a call of step 2", request_only=True,
                           value={"step": 2, "edit": {"tool_result": {"call_id": "call_1", "content": '{"ok": true}'}}}),
            OpenApiExample("A note for the model", request_only=True,
                           value={"step": 3, "edit": {"message": "Check the order's status first."}}),
        ],
    )
    def post(self, request, pk: int):
        if not Run.objects.filter(pk=pk).exists():
            raise NotFound("No such run.")
        body = RunForkSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        edit = body.validated_data.get("edit") or None
        try:
            fork = run_fork(run_id=pk, step_index=body.validated_data["step"], user=request.user,
                            edit={k: dict(v) if isinstance(v, dict) else v for k, v in edit.items()} if edit else None)
        except ForkRefused as exc:
            raise ValidationError(str(exc))
        headers = {"Location": reverse("api-run-detail", args=[fork.pk], request=request)}
        return Response(_run_detail(run_for_page(run_id=fork.pk)), status=status.HTTP_201_CREATED, headers=headers)


class RunCompareView(ApiView):
    required_perms = {"GET": (PERM_VIEW,)}

    @extend_schema(
        operation_id="runs_compare", summary="A fork side by side with its parent, from the fork step on",
        responses={200: RunComparisonSerializer, **errors(400, 404)},
    )
    def get(self, request, pk: int):
        run = Run.objects.filter(pk=pk).first()
        if run is None:
            raise NotFound("No such run.")
        try:
            return Response(run_comparison(run))
        except NotAFork as exc:
            raise ValidationError(str(exc))
