"""The settings of an agent that a person chooses: one list, read by the agent service and the
editor's form and serializer (agents.AGENT_FIELDS) and by versions (agent_versions.VERSIONED_FIELDS)."""

# In the editor's order. All are the agent's own columns but "tools", a many-to-many of Tool rows:
# set after the agent is saved (agents.py), held by name in a version (agent_versions.py).
AGENT_FIELDS = (
    "name", "description", "system_prompt", "model_list", "base_url", "tools",
    "max_iterations", "repeat_limit", "max_wall_seconds", "max_tokens", "max_cost_usd", "max_output_tokens",
    "context_budget_tokens", "compact_context",
    "first_tool_choice", "later_tool_choice", "parallel_tool_calls", "stream_answers", "provider_options",
    "verifier", "summarize_on_stop", "approval_timeout_seconds", "escalate_after_seconds", "expiry_warning_seconds",
    "escalation_emails",
    "daily_token_alert", "daily_cost_alert_usd",
)
