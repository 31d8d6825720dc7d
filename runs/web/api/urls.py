"""/api/schema/ (OpenAPI 3) and /api/v1/... (resources); unknown /api/ paths answer JSON 404s."""
from django.http import JsonResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView
from rest_framework.routers import SimpleRouter

from runs.web.api import views
from runs.web.api.views import levers, tokens
from runs.web.api.views.budgets import BudgetViewSet
from runs.web.api.views.forks import RunCompareView, RunForkView
from runs.web.api.views.replays import StepReplayView
from runs.web.api.views.rules import RuleViewSet

router = SimpleRouter()
router.register("agents", views.AgentViewSet, basename="api-agent")
router.register("tools", views.ToolViewSet, basename="api-tool")
router.register("rules", RuleViewSet, basename="api-rule")
router.register("budgets", BudgetViewSet, basename="api-budget")  # (+ <id>/raise/, requests/)  # approval rules (+ preview/, <id>/versions/)


@csrf_exempt  # an unknown path is a 404 whatever the method, never a CSRF page
def not_found(request, *args, **kwargs):
    return JsonResponse({"detail": "No such API endpoint."}, status=404)


urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # API tokens: sign in for one, list and revoke one's own (runs/web/api/views/tokens.py).
    path("v1/token/", tokens.TokenView.as_view(), name="api-token"),
    path("v1/tokens/", tokens.TokenListView.as_view(), name="api-token-list"),
    path("v1/tokens/<int:pk>/revoke/", tokens.TokenRevokeView.as_view(), name="api-token-revoke"),
    path("v1/runs/", views.RunListView.as_view(), name="api-run-list"),
    path("v1/runs/export.jsonl", views.RunExportJsonlView.as_view(), name="api-run-export-jsonl"),
    path("v1/runs/export.csv", views.RunExportCsvView.as_view(), name="api-run-export-csv"),
    path("v1/runs/<int:pk>/", views.RunDetailView.as_view(), name="api-run-detail"),
    path("v1/runs/<int:pk>/cancel/", views.RunCancelView.as_view(), name="api-run-cancel"),
    path("v1/runs/<int:pk>/rerun/", views.RunRerunView.as_view(), name="api-run-rerun"),
    # Operators' levers, as runs/controls/levers.py declares them (runs/web/api/views/levers.py).
    *levers.api_routes(),
    path("v1/runs/<int:pk>/grants/", views.RunGrantListView.as_view(), name="api-run-grants"),
    path("v1/runs/<int:pk>/fork/", RunForkView.as_view(), name="api-run-fork"),
    path("v1/runs/<int:pk>/compare/", RunCompareView.as_view(), name="api-run-compare"),
    path("v1/runs/<int:pk>/steps/<int:index>/replay/", StepReplayView.as_view(), name="api-step-replay"),
    path("v1/grants/<int:pk>/revoke/", views.GrantRevokeView.as_view(), name="api-grant-revoke"),
    path("v1/approvals/", views.ApprovalListView.as_view(), name="api-approval-list"),
    path("v1/approvals/archived/", views.ArchivedApprovalListView.as_view(), name="api-approval-archived"),
    path("v1/approvals/bulk/", views.ApprovalBulkView.as_view(), name="api-approval-bulk"),
    path("v1/approvals/<int:pk>/approve/", views.ApprovalApproveView.as_view(), name="api-approval-approve"),
    path("v1/approvals/<int:pk>/reject/", views.ApprovalRejectView.as_view(), name="api-approval-reject"),
    path("v1/metrics/", views.MetricsView.as_view(), name="api-metrics"),
    path("v1/", include(router.urls)),
    re_path(r"^", not_found),
]
