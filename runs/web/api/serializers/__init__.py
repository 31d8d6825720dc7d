"""Request and response shapes of the API, one module per resource.

Input serializers read types and text; the rules stay in the services (agent_save, the launch's
overrides and run_config, the limit guards, check_tool_schema). Output serializers describe the
plain dicts of runs.engine.storage.snapshots, shared with the CLI's JSON, for the schema.
"""
from apikit.fields import NameRelatedField, StorableUniqueValidator, choice
from runs.engine.storage.text import check_storable_json, storable_text
from runs.web.api.serializers.agents import AgentSerializer
from runs.web.api.serializers.approvals import (
    ApprovalBriefSerializer,
    ApproveSerializer,
    ArchivedApprovalPageSerializer,
    ArchivedApprovalSerializer,
    BulkDecisionSerializer,
    BulkOutcomeSerializer,
    DecisionResultSerializer,
    DecisionSerializer,
    GrantListSerializer,
    GrantResultSerializer,
    GrantSerializer,
    PendingApprovalSerializer,
    RejectSerializer,
)
from runs.web.api.serializers.fields import UsageSerializer
from runs.web.api.serializers.runs import (
    CallSerializer,
    RunActionSerializer,
    RunCreateSerializer,
    RunDetailSerializer,
    RunListItemSerializer,
    RunPageSerializer,
    RunRerunSerializer,
    RunSummarySerializer,
    StepSerializer,
)
from runs.web.api.serializers.tools import ToolSerializer

__all__ = [
    "AgentSerializer", "ApprovalBriefSerializer", "ApproveSerializer", "ArchivedApprovalPageSerializer",
    "ArchivedApprovalSerializer", "BulkDecisionSerializer", "BulkOutcomeSerializer", "CallSerializer",
    "DecisionResultSerializer", "DecisionSerializer", "GrantListSerializer", "GrantResultSerializer", "GrantSerializer",
    "RejectSerializer",
    "NameRelatedField", "PendingApprovalSerializer", "RunActionSerializer", "RunCreateSerializer",
    "RunDetailSerializer", "RunListItemSerializer", "RunPageSerializer", "RunRerunSerializer", "RunSummarySerializer",
    "StepSerializer", "StorableUniqueValidator", "ToolSerializer", "UsageSerializer", "check_storable_json",
    "choice", "storable_text",
]
