"""An agent copied into another project: a new agent of that project with the same settings and a
name that says it is a copy (agent names are the site's only once), made through agent_save (every
rule on an agent's settings, its first version). The original is not changed.

An agent calls its own project's tools and the site's shared ones: the copy keeps the shared ones,
and for each of its project's tools the copy already made in the new project (toolsapp.tool_copies
names it), if any; the others are named to the person, who copies them too."""
from dataclasses import dataclass

from runs.lifecycle.agent_fields import AGENT_FIELDS
from runs.lifecycle.agents import InvalidAgent, agent_save
from runs.models import Agent
from toolsapp.models import Tool
from toolsapp.tool_copies import CopyRefused, copy_name

MAX_NAME = 100


@dataclass(frozen=True)
class AgentCopied:
    agent: Agent
    tools_left: list[str]  # the tools of its project it used that have no copy in the new one


def agent_copy_name(name: str, into_name: str, *, taken) -> str:
    """"<name> (copy in <project>)", then "(copy 2 in ...)"... until `taken(candidate)` is false."""
    for number in range(1, 1000):
        tail = f" (copy{f' {number}' if number > 1 else ''} in {into_name})"
        candidate = name[:MAX_NAME - len(tail)] + tail
        if not taken(candidate):
            return candidate
    raise CopyRefused(f"Every name for a copy of {name} is taken: rename one of the copies first.")


def agent_copy(*, agent: Agent, into, user) -> AgentCopied:
    if agent.project_id == into.pk:
        raise CopyRefused(f"{agent.name} is an agent of {into} already.")
    data = {field: getattr(agent, field) for field in AGENT_FIELDS if field != "tools"}
    data["name"] = agent_copy_name(agent.name, into.name, taken=lambda name: Agent.objects.filter(name=name).exists())
    tools, left = [], []
    copies = {tool.name: tool for tool in Tool.objects.filter(project=into)}
    for tool in agent.tools.order_by("name"):
        if tool.project_id is None or tool.project_id == into.pk:
            tools.append(tool)
        elif (copy := copies.get(copy_name(tool.name, into.slug, taken=lambda name: False))) is not None:
            tools.append(copy)  # its first copy there
        else:
            left.append(tool.name)
    data["tools"] = tools
    try:
        copied = agent_save(agent=None, data=data, user=user, project=into, note=f"Copied from {agent.name}.")
    except InvalidAgent as exc:
        raise CopyRefused(f"{agent.name} could not be copied: {exc}") from None
    return AgentCopied(agent=copied, tools_left=left)

