"""Which project each of the runs app's routes is about (projects/routes.py)."""
from projects.routes import PERSONAL_ROUTES, register, values
from runs.controls.levers import DECLARED
from runs.models import Agent, Approval, ApprovalRule, Budget, Run, RunGrant, Webhook

run = values(Run, "agent__project_id", pk="pk")
approval = values(Approval, "run__agent__project_id", pk="pk")
grant = values(RunGrant, "run__agent__project_id", pk="pk")
agent = values(Agent, "project_id", pk="pk")
rule = values(ApprovalRule, "project_id", pk="pk")
budget = values(Budget, "project_id", pk="pk")
webhook = values(Webhook, "project_id", pk="pk")


def register_routes() -> None:
    register({
        **dict.fromkeys([
            "run_detail", "run_cancel", "run_rerun", "call_result", "call_arguments", "run_fork", "step_replay",
            "run_compare", "api-run-detail", "api-run-cancel", "api-run-rerun", "api-run-grants", "api-run-fork",
            "api-run-compare", "api-step-replay",
            *(route for lever in DECLARED for route in (lever.page_route, lever.api_route)),  # run_pause, api-run-pause...
        ], run),
        **dict.fromkeys(["approval_decide", "approval_detail", "api-approval-approve", "api-approval-reject"], approval),
        **dict.fromkeys(["grant_revoke", "api-grant-revoke"], grant),
        **dict.fromkeys([
            "agent_detail", "agent_edit", "agent_versions", "agent_version_compare", "agent_version_make_current",
            "api-agent-detail", "api-agent-draft", "api-agent-make-current", "api-agent-versions",
        ], agent),
        **dict.fromkeys(["rule_edit", "rule_delete", "rule_shadow", "api-rule-detail", "api-rule-shadow",
                         "api-rule-versions"], rule),
        **dict.fromkeys(["budget_edit", "budget_delete", "budget_raise", "api-budget-detail", "api-budget-raise"],
                        budget),
        **dict.fromkeys(["webhook_test", "webhook_delete", "webhook_switch"], webhook),
    })
    PERSONAL_ROUTES.add("api-token-revoke")
