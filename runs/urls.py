from django.urls import path

from runs.views import agents, approvals, history, metrics, rules, runs

urlpatterns = [
    path("", history.home, name="home"),
    path("runs/", history.run_list, name="run_list"),
    path("runs/new/", runs.run_launch, name="run_launch"),
    path("runs/<int:pk>/", runs.run_detail, name="run_detail"),
    path("runs/<int:pk>/cancel/", runs.run_cancel_view, name="run_cancel"),
    path("runs/<int:pk>/rerun/", runs.run_rerun, name="run_rerun"),
    path("runs/<int:pk>/calls/<int:call_pk>/result/", runs.call_result, name="call_result"),
    path("approvals/", approvals.approval_queue, name="approval_queue"),
    path("approvals/pending/", approvals.approval_queue_partial, name="approval_queue_partial"),
    path("approvals/count/", approvals.approval_count, name="approval_count"),
    path("approvals/<int:pk>/decide/", approvals.approval_decide_view, name="approval_decide"),
    path("approvals/<int:pk>/", approvals.approval_detail, name="approval_detail"),
    path("approvals/bulk/", approvals.approval_bulk, name="approval_bulk"),
    path("grants/<int:pk>/revoke/", runs.grant_revoke_view, name="grant_revoke"),
    path("metrics/", metrics.metrics, name="metrics"),
    path("agents/", agents.agent_list, name="agent_list"),
    path("agents/new/", agents.agent_create, name="agent_create"),
    path("agents/<int:pk>/", agents.agent_detail, name="agent_detail"),
    path("agents/<int:pk>/edit/", agents.agent_edit, name="agent_edit"),
    path("rules/", rules.rule_list_view, name="rule_list"),
    path("rules/new/", rules.rule_create_view, name="rule_create"),
    path("rules/<int:pk>/", rules.rule_edit_view, name="rule_edit"),
    path("rules/<int:pk>/delete/", rules.rule_delete_view, name="rule_delete"),
]
