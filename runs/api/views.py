"""The REST API: thin views over the same forms, services and selectors as the dashboard."""
from django.db.models import ProtectedError
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers, status, viewsets
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from runs.api import serializers as api
from runs.api.errors import Conflict, exception_handler
from runs.api.permissions import RolePermissions
from runs.api.schema import errors, form_parameters
from runs.forms import LaunchForm
from runs.forms_admin import HistoryFilterForm, MetricsFilterForm
from runs.models import Agent, Approval, Run
from runs.roles import (
    PERM_ADD_AGENT,
    PERM_ADD_TOOL,
    PERM_CANCEL,
    PERM_DECIDE,
    PERM_DELETE_AGENT,
    PERM_DELETE_TOOL,
    PERM_LAUNCH,
    PERM_MANAGE_AGENTS,
    PERM_MANAGE_TOOLS,
    PERM_VIEW,
    PERM_VIEW_AGENT,
    PERM_VIEW_APPROVAL,
    PERM_VIEW_TOOL,
)
from runs.selectors.approvals import approval_decision_text, approval_with_decider, approvals_pending
from runs.selectors.exports import runs_csv, runs_jsonl
from runs.selectors.history import run_history, run_history_page
from runs.selectors.metrics import metrics_summary
from runs.selectors.runs import run_for_page
from runs.services.approvals import AlreadyDecided, approval_decide
from runs.services.dispatch import run_dispatch
from runs.services.runs import InvalidRun, run_cancel, run_create
from runs.snapshots import approval_brief, run_data, run_summary
from toolsapp.models import Tool


class ApiMixin:
    # Token first: an anonymous request then gets 401 with "WWW-Authenticate: Token" (the first
    # class names the challenge); a session still works, with its CSRF check on writes.
    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [RolePermissions]
    required_perms: dict[str, tuple[str, ...]] = {}

    def get_exception_handler(self):
        return exception_handler


class ApiView(ApiMixin, APIView):
    pass


def _form_or_400(form) -> dict:
    """The dashboard form's cleaned data, or a 400 with its messages by field."""
    if not form.is_valid():
        raise ValidationError({name: [e["message"] for e in errs] for name, errs in form.errors.get_json_data().items()})
    return form.cleaned_data


def _page_number(request) -> int:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= 1_000_000:
        raise ValidationError({"page": ["A page number from 1 to 1000000."]})
    return int(raw)


def _page_url(request, number: int | None) -> str | None:
    if number is None:
        return None
    query = request.query_params.copy()
    query["page"] = str(number)
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")


def _run_detail(run: Run) -> dict:
    return {
        **run_data(run),
        "agent_id": run.agent_id,
        "customer": run.customer,
        "created_by": run.created_by.get_username() if run.created_by_id and run.created_by else None,
        "rerun_of": run.rerun_of_id,
        "cancel_requested": run.cancel_requested,
        "overrides": run.overrides,
    }


PAGE_PARAMETER = OpenApiParameter("page", OpenApiTypes.INT, OpenApiParameter.QUERY, description="1-based page number.")


# --- Runs ---------------------------------------------------------------------------------------------


class RunListView(ApiView):
    required_perms = {"GET": (PERM_VIEW,), "POST": (PERM_LAUNCH,)}

    @extend_schema(
        operation_id="runs_list", summary="Run history, newest first, with the history page's filters",
        parameters=[*form_parameters(HistoryFilterForm), PAGE_PARAMETER],
        responses={200: api.RunPageSerializer, **errors(400)},
    )
    def get(self, request):
        filters = HistoryFilterForm(request.query_params)
        _form_or_400(filters)
        page = run_history_page(run_history(**filters.filters()), number=_page_number(request))
        return Response({
            "count": page.total if page.total_is_exact else page.total - 1,
            "count_is_exact": page.total_is_exact,
            "next": _page_url(request, page.number + 1 if page.has_next else None),
            "previous": _page_url(request, page.number - 1 if page.has_previous else None),
            "results": [
                {
                    "run_id": run.pk,
                    "created_at": run.created_at,
                    "agent_id": run.agent.pk,
                    "agent": run.agent.name,
                    "task_preview": run.task_preview[:120],
                    "status": run.status,
                    "stop_reason": run.stop_reason or None,
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
        responses={201: api.RunDetailSerializer, **errors(400)},
        examples=[
            OpenApiExample("The demo agent", request_only=True,
                           value={"agent": "demo", "task": "What's the weather in Lagos and London?"}),
            OpenApiExample("A destructive call that waits for approval", request_only=True,
                           value={"agent": "demo", "task": "Cancel order ORD-1001", "max_iterations": 5}),
        ],
    )
    def post(self, request):
        launch = api.RunCreateSerializer(data=request.data)
        launch.is_valid(raise_exception=True)
        # The launch form holds the dashboard's rules (ranges, known tools, what counts as an override).
        form = LaunchForm(launch.as_launch_form_data())
        data = _form_or_400(form)
        try:
            run = run_create(
                agent=data["agent"], task=data["task"], user=request.user,
                overrides=form.overrides(), customer=data["customer"].strip() or None,
            )
        except InvalidRun as exc:
            raise ValidationError(str(exc))
        run_dispatch(run_id=run.pk)
        headers = {"Location": reverse("api-run-detail", args=[run.pk], request=request)}
        return Response(_run_detail(run_for_page(run_id=run.pk)), status=status.HTTP_201_CREATED, headers=headers)


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


class IgnoreAcceptHeader(BaseContentNegotiation):
    """The export answers a file whatever the client accepts (errors are JSON)."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type

    def select_parser(self, request, parsers):
        return parsers[0]


class RunExportView(ApiView):
    required_perms = {"GET": (PERM_VIEW,)}
    content_negotiation_class = IgnoreAcceptHeader
    kind = ""  # "jsonl" or "csv"
    FILES = {
        "jsonl": ("application/jsonl; charset=utf-8", runs_jsonl),
        "csv": ("text/csv; charset=utf-8", runs_csv),
    }

    def get(self, request):
        filters = HistoryFilterForm(request.query_params)
        _form_or_400(filters)
        content_type, render = self.FILES[self.kind]
        response = StreamingHttpResponse(render(run_history(**filters.filters())), content_type=content_type)
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


# --- Approvals ----------------------------------------------------------------------------------------


def _arguments_text(lines) -> str:
    return "\n".join(f"{line.indent}{line.key + ': ' if line.key else ''}{line.text}{',' if line.comma else ''}"
                     for line in lines)


class ApprovalListView(ApiView):
    required_perms = {"GET": (PERM_VIEW_APPROVAL,)}

    @extend_schema(operation_id="approvals_pending", summary="Pending approvals, oldest first", responses={200: api.PendingApprovalSerializer(many=True), **errors()})
    def get(self, request):
        return Response([
            {
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
            for item in approvals_pending()
        ])


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
            winner = approval_with_decider(exc.approval)
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


# --- Agents and tools ---------------------------------------------------------------------------------


def _crud_schema(name: str, serializer):
    return extend_schema_view(
        list=extend_schema(summary=f"{name}s", responses={200: serializer(many=True), **errors(404)}),
        retrieve=extend_schema(summary=f"One {name.lower()}", responses={200: serializer, **errors(404)}),
        create=extend_schema(summary=f"Create a {name.lower()} (admins)", responses={201: serializer, **errors(400)}),
        update=extend_schema(summary=f"Replace a {name.lower()} (admins)", responses={200: serializer, **errors(400, 404)}),
        partial_update=extend_schema(summary=f"Change a {name.lower()} (admins)",
                                     responses={200: serializer, **errors(400, 404)}),
        destroy=extend_schema(summary=f"Delete a {name.lower()} (admins)", responses={204: None, **errors(404, 409)}),
    )


class CrudViewSet(ApiMixin, viewsets.ModelViewSet):
    view_perm = manage_perm = add_perm = delete_perm = ""

    @property
    def required_perms(self):
        return {
            "GET": (self.view_perm,),
            "POST": (self.add_perm, self.manage_perm),  # the dashboard's create needs both too
            "PUT": (self.manage_perm,),
            "PATCH": (self.manage_perm,),
            "DELETE": (self.delete_perm,),
        }


@_crud_schema("Agent", api.AgentSerializer)
class AgentViewSet(CrudViewSet):
    queryset = Agent.objects.prefetch_related("tools").order_by("name")
    serializer_class = api.AgentSerializer
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_AGENT, PERM_MANAGE_AGENTS, PERM_ADD_AGENT, PERM_DELETE_AGENT

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except ProtectedError:
            raise Conflict(f"Agent {instance.name} has runs, so it cannot be deleted (runs keep their agent).")


@_crud_schema("Tool", api.ToolSerializer)
class ToolViewSet(CrudViewSet):
    queryset = Tool.objects.select_related("mcp_server").order_by("name")
    serializer_class = api.ToolSerializer
    view_perm, manage_perm, add_perm, delete_perm = PERM_VIEW_TOOL, PERM_MANAGE_TOOLS, PERM_ADD_TOOL, PERM_DELETE_TOOL


# --- Metrics ----------------------------------------------------------------------------------------


class MetricsView(ApiView):
    required_perms = {"GET": (PERM_VIEW,)}

    @extend_schema(
        operation_id="metrics_retrieve", summary="Outcomes, iterations, tool errors, model latency, usage per day and approval waits",
        parameters=form_parameters(MetricsFilterForm),
        responses={200: OpenApiTypes.OBJECT, **errors(400)},
    )
    def get(self, request):
        data = _form_or_400(MetricsFilterForm(request.query_params))
        m = metrics_summary(start=data["date_from"], end=data["date_to"], agent=data["agent"])
        counts = lambda rows: [{"value": r.value, "label": r.label, "count": r.count} for r in rows]  # noqa: E731
        return Response({
            "start": m.start,
            "end": m.end,
            "agent_id": m.agent.pk if m.agent else None,
            "runs_total": m.runs_total,
            "finished_runs": m.finished_runs,
            "succeeded_runs": m.succeeded_runs,
            "success_rate": m.success_rate,
            "by_status": counts(m.by_status),
            "by_stop_reason": counts(m.by_stop_reason),
            "iterations": {"count": m.iterations.count, "p50": m.iterations.p50, "p95": m.iterations.p95},
            "tool_errors": [
                {"tool": r.tool, "finished": r.finished, "failed": r.failed, "rejected": r.rejected,
                 "error_rate": r.error_rate}
                for r in m.tool_errors
            ],
            "model_latency": [
                {"model": r.model, "steps": r.steps, "p50_ms": r.p50_ms, "p95_ms": r.p95_ms} for r in m.model_latency
            ],
            "per_day": [{"day": d.day, "runs": d.runs, "tokens": d.tokens, "cost_usd": d.cost_usd} for d in m.per_day],
            "approvals": {
                "approved": m.approvals.approved,
                "rejected": m.approvals.rejected,
                "expired": m.approvals.expired,
                "pending": m.approvals.pending,
                "wait_seconds": {"count": m.approvals.wait_seconds.count, "p50": m.approvals.wait_seconds.p50,
                                 "p95": m.approvals.wait_seconds.p95},
            },
        })


# --- Tokens -----------------------------------------------------------------------------------------


class TokenView(ObtainAuthToken):
    """POST username and password, get the user's API token (the same one on every call)."""

    permission_classes = [AllowAny]

    def get_exception_handler(self):
        return exception_handler

    @extend_schema(
        operation_id="token_create", summary="Get your API token from your username and password",
        responses={200: inline_serializer("Token", {"token": serializers.CharField()}), **errors(400)},
    )
    def post(self, request, *args, **kwargs):
        return super().post(request, *args, **kwargs)
