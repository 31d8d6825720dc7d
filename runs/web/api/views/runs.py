"""Runs: history, launch, detail, cancel and exports."""
from django.http import StreamingHttpResponse
from django.utils.decorators import method_decorator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.reverse import reverse

from apikit.errors import Conflict
from apikit.negotiation import IgnoreAcceptHeader
from apikit.paging import PAGE_PARAMETER, page_number, page_url
from apikit.schema import errors, form_parameters
from apikit.views import ApiView, form_or_400
from hosting.replica import reads_from_replica, replica_streamed
from runs.controls.lever_state import run_lever_state
from runs.engine.storage.snapshots import run_data, run_summary
from runs.lifecycle.exports import runs_csv, runs_jsonl
from runs.lifecycle.launch import rerun_launch, run_launch
from runs.lifecycle.launch_rules import LaunchNotAllowed, launch_policy
from runs.lifecycle.relatives import run_family
from runs.lifecycle.run_list import run_history, run_history_page
from runs.lifecycle.run_marks import run_decision_counts, status_label
from runs.lifecycle.run_reads import run_for_page
from runs.lifecycle.runs import InvalidRun, run_cancel
from runs.models import Run
from runs.roles import PERM_CANCEL, PERM_LAUNCH, PERM_VIEW
from runs.web.api import serializers as api
from runs.web.forms.filters import HistoryFilterForm


def _run_detail(run: Run) -> dict:
    rejected, edited = run_decision_counts(run_id=run.pk)
    return {
        **run_data(run),
        "status_label": status_label(run),
        "calls_rejected": rejected,
        "calls_edited": edited,
        "agent_id": run.agent_id,
        "customer": run.customer,
        "created_by": run.created_by.get_username() if run.created_by_id and run.created_by else None,
        "rerun_of": run.rerun_of_id,
        "forked_from": run.forked_from_id,
        "forked_at_step": run.forked_at_step,
        "agent_version": run.agent_version,
        "experiment": run.experiment,
        "family": run_family(run),
        "cancel_requested": run.cancel_requested,
        "levers": run_lever_state(run),
        "overrides": run.overrides,
    }


class RunListView(ApiView):
    required_perms = {"GET": (PERM_VIEW,), "POST": (PERM_LAUNCH,)}

    @extend_schema(
        operation_id="runs_list", summary="Run history, newest first, with the history page's filters",
        parameters=[*form_parameters(HistoryFilterForm), PAGE_PARAMETER],
        responses={200: api.RunPageSerializer, **errors(400)},
    )
    @method_decorator(reads_from_replica)  # slightly stale is fine here (hosting/replica.py)
    def get(self, request):
        filters = HistoryFilterForm(request.query_params, user=request.user)
        form_or_400(filters)
        page = run_history_page(run_history(**filters.filters()), number=page_number(request))
        return Response({
            "count": page.total if page.total_is_exact else page.total - 1,
            "count_is_exact": page.total_is_exact,
            "next": page_url(request, page.number + 1 if page.has_next else None),
            "previous": page_url(request, page.number - 1 if page.has_previous else None),
            "results": [
                {
                    "run_id": run.pk,
                    "created_at": run.created_at,
                    "agent_id": run.agent.pk,
                    "agent": run.agent.name,
                    "task_preview": run.task_preview[:120],
                    "status": run.shown_status,
                    "status_label": status_label(run),
                    "stop_reason": run.stop_reason or None,
                    "calls_rejected": run.calls_rejected,
                    "calls_edited": run.calls_edited,
                    "iterations": run.iterations,
                    "tokens_in": run.tokens_in,
                    "tokens_out": run.tokens_out,
                    "cost_usd": run.cost_usd,
                }
                for run in page.runs
            ],
        })

    @extend_schema(
        operation_id="runs_create", summary="Launch a run; a worker drives it",
        request=api.RunCreateSerializer,
        responses={201: api.RunDetailSerializer, **errors(400)},  # 403: approval_policy "approve" without the right
        examples=[
            OpenApiExample("The demo agent", request_only=True,
                           value={"agent": "demo", "task": "What's the weather in Lagos and London?"}),
            OpenApiExample("A destructive call that waits for approval", request_only=True,
                           value={"agent": "demo", "task": "Cancel order ORD-1001", "max_iterations": 5}),
        ],
    )
    def post(self, request):
        launch = api.RunCreateSerializer(data=request.data, context={"request": request})
        launch.is_valid(raise_exception=True)
        data = launch.validated_data
        policy = _policy(request, data)
        try:
            run = run_launch(
                agent=data["agent"], task=data["task"], user=request.user, approval_policy=policy,
                overrides=data["overrides"], customer=data.get("customer", "").strip() or None,
            )
        except InvalidRun as exc:
            raise ValidationError({exc.setting: [str(exc)]} if exc.setting else str(exc))
        return _created(request, run)


def _policy(request, data) -> str:
    try:
        return launch_policy(user=request.user, requested=data.get("approval_policy"))
    except LaunchNotAllowed as exc:
        raise PermissionDenied(str(exc))


def _created(request, run: Run) -> Response:
    headers = {"Location": reverse("api-run-detail", args=[run.pk], request=request)}
    return Response(_run_detail(run_for_page(run_id=run.pk)), status=status.HTTP_201_CREATED, headers=headers)


class RunRerunView(ApiView):
    required_perms = {"POST": (PERM_LAUNCH,)}

    @extend_schema(
        operation_id="runs_rerun", summary="Run a finished run's task again (its agent, overrides and customer)",
        description='The approval policy is not copied: "ask" unless the body chooses another the user may choose.',
        request=api.RunRerunSerializer,
        responses={201: api.RunDetailSerializer, **errors(400, 404, 409)},
    )
    def post(self, request, pk: int):
        original = Run.objects.select_related("agent").filter(pk=pk).first()
        if original is None:
            raise NotFound("No such run.")
        if not original.is_finished:
            raise Conflict(f"Run {original.pk} has not finished yet.")
        body = api.RunRerunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        policy = _policy(request, body.validated_data)
        try:
            run = rerun_launch(original=original, user=request.user, approval_policy=policy)
        except InvalidRun as exc:
            raise ValidationError({exc.setting: [str(exc)]} if exc.setting else str(exc))
        return _created(request, run)


class RunDetailView(ApiView):
    required_perms = {"GET": (PERM_VIEW,)}

    @extend_schema(operation_id="runs_retrieve", summary="A run with every step and tool call", responses={200: api.RunDetailSerializer, **errors(404)})
    def get(self, request, pk: int):
        run = run_for_page(run_id=pk)
        if run is None:
            raise NotFound("No such run.")
        return Response(_run_detail(run))


class RunCancelView(ApiView):
    required_perms = {"POST": (PERM_CANCEL,)}
    takes_no_body = True

    @extend_schema(
        operation_id="runs_cancel", summary="Cancel a run: now if nobody drives it, else at its next check",
        request=None,
        responses={200: api.RunActionSerializer, **errors(404, 409)},
    )
    def post(self, request, pk: int):
        run = Run.objects.filter(pk=pk).first()
        if run is None:
            raise NotFound("No such run.")
        if run.is_finished:
            raise Conflict(f"Run {run.pk} had already finished ({run.get_status_display().lower()}).")
        run = run_cancel(run=run, user=request.user)
        text = f"Run {run.pk} was cancelled." if run.is_finished else f"Run {run.pk} will stop at its next check."
        return Response({"detail": text, "run": run_summary(run)})


class RunExportView(ApiView):
    required_perms = {"GET": (PERM_VIEW,)}
    content_negotiation_class = IgnoreAcceptHeader
    kind = ""  # "jsonl" or "csv"
    FILES = {
        "jsonl": ("application/jsonl; charset=utf-8", runs_jsonl),
        "csv": ("text/csv; charset=utf-8", runs_csv),
    }

    def get(self, request):
        filters = HistoryFilterForm(request.query_params, user=request.user)
        form_or_400(filters)
        content_type, render = self.FILES[self.kind]
        # Read while it streams, from the replica when there is one (hosting/replica.py).
        response = StreamingHttpResponse(replica_streamed(render(run_history(**filters.filters()))), content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="runs.{self.kind}"'
        return response


def _export_schema(kind: str, media_type: str, description: str):
    return extend_schema(
        operation_id=f"runs_export_{kind}", summary=f"Export the matching runs with steps and calls as {description}",
        description=(
            "Arguments appear only as their keyed hash (args_hash); tool results, previews, error texts, "
            "model messages and answers are left out."
        ),
        parameters=form_parameters(HistoryFilterForm),
        responses={(200, media_type): OpenApiResponse(OpenApiTypes.STR, description=description), **errors(400)},
    )


class RunExportJsonlView(RunExportView):
    kind = "jsonl"

    @_export_schema("jsonl", "application/jsonl", "JSON Lines (one run per line)")
    def get(self, request):
        return super().get(request)


class RunExportCsvView(RunExportView):
    kind = "csv"

    @_export_schema("csv", "text/csv", "CSV (one row per tool call)")
    def get(self, request):
        return super().get(request)
