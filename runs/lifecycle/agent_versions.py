"""Versions of an agent: every save makes one (number, who, when, what changed), a draft is saved
without becoming current, two versions compare field by field, and any version can be made
current again (as a new version with its contents). Runs record the version they ran with.

A version holds every setting a person chooses (agent_settings below: the fields of
runs.lifecycle.agent_fields.AGENT_FIELDS, tools by name), so it can be compared and restored
whatever changed since, tools deleted or renamed included.
"""
import difflib
import json
from dataclasses import dataclass, field

from django.db.models import Max

from runs.lifecycle.agent_fields import AGENT_FIELDS
from runs.models import Agent, AgentVersion
from toolsapp.models import Tool

# The settings a version holds: every setting a person chooses, in the editor's order. The one
# difference is in how, not which: "tools" is held as the tools' names, not as rows (agent_settings).
VERSIONED_FIELDS = AGENT_FIELDS
LABELS = {"model_list": "models", "system_prompt": "system prompt", "base_url": "endpoint"}


class VersionNotFound(LookupError):
    pass


def agent_settings(agent: Agent, *, tools: list[str] | None = None) -> dict:
    """What a version of `agent` holds: every setting, its tools by name (sorted)."""
    values = {name: getattr(agent, name) for name in VERSIONED_FIELDS if name != "tools"}
    values["tools"] = sorted(agent.tools.values_list("name", flat=True)) if tools is None else sorted(tools)
    return values


def changed_fields(before: dict | None, after: dict) -> list[str]:
    if before is None:
        return []
    return [name for name in VERSIONED_FIELDS if before.get(name) != after.get(name)]


def version_record(*, agent: Agent, settings: dict, user=None, draft: bool = False, note: str = "") -> AgentVersion:
    """A new version of `agent` (in the caller's transaction; the agent's row is locked so two
    saves at once get two numbers). Not a draft: it becomes the agent's current version."""
    # The current version as the locked row has it (another save may have made one since `agent` was read).
    current_number = Agent.objects.select_for_update().filter(pk=agent.pk).values_list("version", flat=True).first()
    number = next_number(agent)
    current = AgentVersion.objects.filter(agent=agent, number=current_number).values_list("settings", flat=True).first()
    version = AgentVersion.objects.create(
        agent=agent, number=number, settings=settings, draft=draft, changed=changed_fields(current, settings),
        note=note[:200], created_by=user if getattr(user, "is_authenticated", False) else None,
        created_by_name=user.get_username() if getattr(user, "is_authenticated", False) else "",
    )
    if not draft:
        Agent.objects.filter(pk=agent.pk).update(version=number)
        agent.version = number
    return version


def next_number(agent: Agent) -> int:
    """The number the agent's next version (or draft) gets."""
    return (AgentVersion.objects.filter(agent=agent).aggregate(n=Max("number"))["n"] or 0) + 1


def label(name: str) -> str:
    return LABELS.get(name, name.replace("_", " "))


def agent_versions(*, agent: Agent) -> list[AgentVersion]:
    """Newest first, each with `changed_labels` (what it changed, in words) and `based_on`: the version
    it was compared with when saved, the current one then (the newest non-draft before it)."""
    versions = list(AgentVersion.objects.filter(agent=agent).order_by("-number"))
    for position, version in enumerate(versions):
        version.changed_labels = [label(name) for name in version.changed]
        version.based_on = next((v.number for v in versions[position + 1:] if not v.draft), None)
    return versions


def agent_version(*, agent: Agent, number: int) -> AgentVersion:
    version = AgentVersion.objects.filter(agent=agent, number=number).first()
    if version is None:
        raise VersionNotFound(f"agent {agent.name} has no version {number}")
    return version


def version_data(version: AgentVersion) -> dict:
    """A version's settings as agent_save takes them (its tools as the Tool rows of those names;
    a tool deleted since is left out, and said so by agent_save's caller)."""
    data = {name: value for name, value in version.settings.items() if name in VERSIONED_FIELDS}
    data["tools"] = list(Tool.objects.filter(name__in=version.settings.get("tools", [])))
    return data


@dataclass
class Difference:
    name: str
    label: str
    before: object
    after: object
    diff: list[str] = field(default_factory=list)  # a text's lines, unified diff style

    @property
    def before_text(self) -> str:
        return _shown(self.before)

    @property
    def after_text(self) -> str:
        return _shown(self.after)


def _shown(value) -> str:
    """A setting as a person reads it: text as it is, the rest as JSON (null, true, ["a"])."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def version_differences(before: AgentVersion, after: AgentVersion) -> list[Difference]:
    """Field by field, what `after` changes of `before` (the prompt and description as text diffs)."""
    differences = []
    for name in VERSIONED_FIELDS:
        old, new = before.settings.get(name), after.settings.get(name)
        if old == new:
            continue
        diff = []
        if isinstance(old, str) and isinstance(new, str) and name in ("system_prompt", "description"):
            diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"version {before.number}",
                                             f"version {after.number}", lineterm="", n=2))[2:]
        differences.append(Difference(name, label(name), old, new, diff))
    return differences
