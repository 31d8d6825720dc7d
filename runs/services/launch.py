"""What one launch may change of its agent's settings: the one list of them, the agent's value of
each, and which of a launch's choices are overrides.

The launch page's form, the API's launch serializer, the `run_agent` command, the launch page's
placeholders and run_config all read the lists below.
"""
from runs.models import Agent

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
