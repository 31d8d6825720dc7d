"""What a fork may do: its agent's settings as they are now, not its parent's frozen ones.

A fork copies its parent's conversation, not its parent's rights. Everything that bounds what a run
may do (tools, limits and budgets, models and endpoints, approval timeouts, the system prompt)
comes from the agent as it is now, as for a re-run (reruns.py). The parent's launch choices go
along only where the person forking could make them today: its tools that the agent still has,
and its limits where they stay within what that person may set (launch_rules.launch_bounds_problems);
a choice beyond that gives way to the agent's value. The approval policy is "ask".

A fork whose copied conversation already used what the agent now allows (iterations, tokens or
cost) is refused rather than created: it could only stop at once (the caps are checked before the
next model request), perhaps after a summary request the budget no longer covers.
"""
from urllib.parse import urlsplit

from runs.engine.llm.clients import TRUSTED_BASE_URL_KEY
from runs.lifecycle.launch_rules import LIMIT_SETTINGS, launch_bounds_problems, launch_overrides
from runs.lifecycle.runs import run_config
from runs.models import Run

# The settings named by what differs, in the order a person reads them (others follow, by name).
ORDER = ("tools", "models", "base_url", *LIMIT_SETTINGS, "max_output_tokens", "system_prompt", "provider_options",
         "verifier", "approval_timeout_seconds", "escalate_after_seconds", "expiry_warning_seconds", "approval_policy")
# Said without their values: long text, or options that may hold a provider's keys.
CHANGED_ONLY = {"system_prompt": "the system prompt changed", "provider_options": "provider options changed"}
NOT_SETTINGS = {TRUSTED_BASE_URL_KEY}  # a mark of who launched the parent, not a setting
# The budgets a copied conversation has already spent: (setting, what is counted, the counter).
SPENT = (("max_iterations", "iterations", "iterations"), ("max_tokens", "tokens", "tokens"),
         ("max_cost_usd", "USD", "cost"))


def fork_settings(*, parent: Run, user) -> tuple[dict, dict]:
    """(config, overrides) of a fork of `parent` made by `user` (None: the host's operator).
    Raises runs.lifecycle.runs.InvalidRun when the agent's settings are no longer valid."""
    agent = parent.agent
    chosen = dict(parent.overrides)
    if isinstance(chosen.get("tools"), list):  # a tool the agent no longer has is never regained
        allowed = set(agent.tools.values_list("name", flat=True))
        chosen["tools"] = [name for name in chosen["tools"] if name in allowed]
    for setting, _message in list(launch_bounds_problems(agent=agent, overrides=chosen, user=user)):
        chosen.pop(setting, None)  # beyond what this person may set: the agent's value
    if user is None:  # the shell is not bounded by the agent, but a fork of its run is
        for name in LIMIT_SETTINGS:
            if _number(chosen.get(name)) and chosen[name] > getattr(agent, name):
                chosen.pop(name)
    overrides = launch_overrides(agent=agent, chosen=chosen)
    return run_config(agent=agent, overrides=overrides, approval_policy="ask", user=user), overrides


def spent_problem(config: dict, *, agent_name: str, iterations: int, tokens: int, cost: float) -> str | None:
    """Why a fork that starts with these counters could not go on under `config`, or None."""
    spent = {"iterations": iterations, "tokens": tokens, "cost": cost}
    for setting, unit, counter in SPENT:
        if spent[counter] >= config[setting]:
            return (f"the conversation up to that step already used {_shown(spent[counter])} {unit}, and agent "
                    f"{agent_name} now allows at most {_shown(config[setting])} ({_label(setting)}). Fork from an "
                    "earlier step, or ask an admin to raise the agent's limit.")
    return None


def config_differences(before: dict, after: dict) -> list[str]:
    """What differs between a parent's settings and its fork's, in words ("max iterations 10 -> 1")."""
    keys = [k for k in ORDER if k in before or k in after]
    keys += sorted((set(before) | set(after)) - set(ORDER) - NOT_SETTINGS)
    differences = []
    for key in keys:
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key == "tools":
            old, new = set(old or ()), set(new or ())
            differences += [f"{name} is no longer offered" for name in sorted(old - new)]
            differences += [f"{name} is now offered" for name in sorted(new - old)]
        elif key in CHANGED_ONLY:
            differences.append(CHANGED_ONLY[key])
        elif key == "base_url":
            differences.append(f"model endpoint {_endpoint(old)} -> {_endpoint(new)}")
        else:
            differences.append(f"{_label(key)} {_value(old)} -> {_value(new)}")
    return differences


def _label(setting: str) -> str:
    return setting.replace("_", " ")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _value(value) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return _shown(value)


def _endpoint(url) -> str:
    """An endpoint as its scheme, host and path: never a user or password written into the URL."""
    if not url:
        return "the default"
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a URL the agent form would take: say no more than that it changed
        return "(not a valid URL)"
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"
