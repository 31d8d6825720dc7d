"""The rules of a launch (who may launch what; runs are made in runs.py and launched through
launch.py): what one launch may change of its agent's settings, the one list of them, the agent's
value of each, which of a launch's choices are overrides, and what a person launching may choose.

The launch page's form, the API's launch serializer, the `run_agent` command, the launch page's
placeholders and run_config all read the lists below.

People (the dashboard and the API, re-runs included) launch within what the agent allows: its
tools only, limits at most the agent's unless they may change agents (then up to the hard
maxima), and the "ask" approval policy unless they have the right to choose another. Whoever
types at the host's shell (`run_agent`, user None) is the host's operator and is not restricted.
"""
from runs.models import Agent
from runs.roles import PERM_APPROVE_ALL, PERM_MANAGE_AGENTS

# How a run decides destructive calls: a person, or a policy for every call.
APPROVAL_POLICIES = ("ask", "approve", "reject")
POLICY_LABELS = {
    "ask": "Ask a person for every destructive call",
    "reject": "Reject every destructive call",
    "approve": "Approve every destructive call automatically",
}
CUSTOMER_CHARS = 100


class LaunchNotAllowed(PermissionError):
    """The person launching may not choose this (a 403, or a form error)."""

# Limits a launch may set, in the order the launch page shows them (guards.POSITIVE_INT_LIMITS
# says which are whole numbers).
LIMIT_SETTINGS = ("max_iterations", "repeat_limit", "max_wall_seconds", "max_tokens", "max_cost_usd")
TOOL_CHOICE_SETTINGS = ("first_tool_choice", "later_tool_choice")
# What the launch page and the API offer: model names in order, enabled tool names, limits, tool choices.
LAUNCH_CHOICES = ("models", "tools", *LIMIT_SETTINGS, *TOOL_CHOICE_SETTINGS)
# Everything a launch may override (the command line also sets base_url; a re-run copies its original's).
OVERRIDABLE = (*LAUNCH_CHOICES, "base_url", "parallel_tool_calls", "summarize_on_stop")


def launch_defaults(*, agent: Agent, tools: list[str] | None = None) -> dict:
    """The agent's value of every overridable setting. `tools`, the agent's tool names, saves a
    query per agent when the caller read them for several agents at once."""
    if tools is None:
        tools = list(agent.tools.values_list("name", flat=True))
    return {
        "models": list(agent.model_list),
        "tools": sorted(tools),
        **{name: getattr(agent, name) for name in (*LIMIT_SETTINGS, *TOOL_CHOICE_SETTINGS)},
        "base_url": agent.base_url,
        "parallel_tool_calls": agent.parallel_tool_calls,
        "summarize_on_stop": agent.summarize_on_stop,
    }


def launch_overrides(*, agent: Agent, chosen: dict) -> dict:
    """The chosen settings that differ from the agent's. A setting chosen as None, or as what the
    agent already has, is not an override (so a later change to the agent still applies to re-runs
    of this launch for everything the user did not choose). Tool names are kept sorted."""
    unknown = sorted(set(chosen) - set(OVERRIDABLE))
    if unknown:
        raise ValueError(f"these settings cannot be overridden: {', '.join(unknown)}")
    chosen = {name: value for name, value in chosen.items() if value is not None}
    if isinstance(chosen.get("tools"), (list, tuple)):
        chosen["tools"] = sorted(chosen["tools"])
    defaults = launch_defaults(agent=agent)
    return {name: value for name, value in chosen.items() if value != defaults[name]}


def launch_policy(*, user, requested: str | None) -> str:
    """The approval policy of a run this user launches: "ask" unless they chose another they may.

    Rejecting every call can only prevent effects, so anyone who may launch may choose it;
    approving every call needs the right (PERM_APPROVE_ALL, or a superuser)."""
    policy = requested or "ask"
    if policy not in APPROVAL_POLICIES:
        raise ValueError(f"approval_policy must be one of {', '.join(APPROVAL_POLICIES)}")
    if policy == "approve" and user is not None and not user.has_perm(PERM_APPROVE_ALL):
        raise LaunchNotAllowed(
            "You may not launch a run that approves destructive calls automatically "
            f"(it needs the permission {PERM_APPROVE_ALL}); choose \"ask\" or \"reject\"."
        )
    return policy


def launch_bounds_problems(*, agent: Agent, overrides: dict, user):
    """(setting, message) for each override beyond what `user` may choose for `agent`'s runs."""
    if user is None:
        return
    tools = overrides.get("tools")
    if isinstance(tools, list):
        allowed = set(agent.tools.values_list("name", flat=True))
        extra = sorted({t for t in tools if isinstance(t, str)} - allowed)
        if extra:
            yield "tools", f"not tools of agent {agent.name}: {', '.join(extra)} (a run may use only its agent's tools)"
    if user.has_perm(PERM_MANAGE_AGENTS):
        return  # may raise limits, up to the hard maxima that run_config checks
    for name in LIMIT_SETTINGS:
        value, limit = overrides.get(name), getattr(agent, name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > limit:
            shown = f"{limit:g}" if isinstance(limit, float) else limit
            yield name, f"{name} may be at most the agent's {shown}; only people who may change agents can raise it"


def customer_problem(customer: str) -> str | None:
    """What is wrong with a customer name typed at a launch (agents keep no list of customers)."""
    if len(customer) > CUSTOMER_CHARS:
        return f"the customer must be at most {CUSTOMER_CHARS} characters"
    if not customer.isprintable():
        return "the customer must be printable text, without control characters or line breaks"
    if customer != customer.strip():
        return "the customer must not start or end with spaces"
    return None
