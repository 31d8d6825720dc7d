"""The runs app's tables, one module per concern; everything is importable from `runs.models`."""
from runs.models.archive import ArchivedApproval
from runs.models.budgets import Budget, BudgetHold, BudgetNotice, BudgetRaise
from runs.models.core import Agent, Approval, Run, RunEvent, Step, ToolCall, ToolChoice
from runs.models.evidence import CallEvidence, NudgeShown
from runs.models.levers import OperatorMessage
from runs.models.metrics import PrunedTotals
from runs.models.notifications import BudgetAlert, ChatMessage, Webhook, WebhookDelivery
from runs.models.replays import StepReplay
from runs.models.rollups import RollupDay, RunRollup, StepRollup, ToolRollup, UncountedRun
from runs.models.search import RunSearchText
from runs.models.supervision import (
    ApprovalRule,
    ApprovalRuleVersion,
    ApprovalVote,
    RuleQuorumGroup,
    RunGrant,
    ShadowDecision,
)
from runs.models.versions import AgentVersion

__all__ = [
    "Agent", "AgentVersion", "Approval", "ApprovalRule", "ApprovalRuleVersion", "ApprovalVote", "ArchivedApproval", "BudgetAlert", "Budget", "BudgetHold", "BudgetNotice", "BudgetRaise", "CallEvidence", "ChatMessage", "NudgeShown",
    "OperatorMessage", "PrunedTotals", "RollupDay", "Run", "RunEvent", "RuleQuorumGroup", "RunGrant", "RunRollup", "RunSearchText", "ShadowDecision", "Step", "StepReplay", "StepRollup",
    "ToolCall", "ToolChoice", "ToolRollup", "UncountedRun", "Webhook", "WebhookDelivery",
]
