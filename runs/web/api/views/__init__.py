"""The REST API: thin views over the same forms, services and selectors as the dashboard, one
module per resource."""
from runs.web.api.views.agents import AgentViewSet
from runs.web.api.views.approvals import (
    ApprovalApproveView,
    ApprovalBulkView,
    ApprovalListView,
    ApprovalRejectView,
    ArchivedApprovalListView,
)
from runs.web.api.views.grants import GrantRevokeView, RunGrantListView
from runs.web.api.views.metrics import MetricsView
from runs.web.api.views.runs import (
    RunCancelView,
    RunDetailView,
    RunExportCsvView,
    RunExportJsonlView,
    RunListView,
    RunRerunView,
)
from runs.web.api.views.tools import ToolViewSet

__all__ = [
    "AgentViewSet", "ApprovalApproveView", "ApprovalBulkView", "ApprovalListView", "ApprovalRejectView", "ArchivedApprovalListView",
    "GrantRevokeView", "MetricsView", "RunCancelView", "RunDetailView", "RunExportCsvView", "RunExportJsonlView", "RunListView",
    "RunGrantListView", "RunRerunView",
    "ToolViewSet",
]
