"""A tool copied into another project: a new tool of that project with the same settings, made
through the tools' one write path (forms.tool_save_in_project, which calls services.tool_save and
the decision settings' checks), named so that it says it is a copy (tool names are the site's
only once). The original is not changed."""
from toolsapp.decision_settings import FIELDS as DECISION_FIELDS
from toolsapp.decision_settings import LINKS
from toolsapp.executors import config_typed, discovery_of
from toolsapp.forms import tool_save_in_project
from toolsapp.models import Tool
from toolsapp.services import EDITABLE, TOOL_NAME, ToolInvalid

MAX_NAME = 64


class CopyRefused(Exception):
    """A copy not made; the message says why, to the person."""


def copy_name(name: str, into_slug: str, *, taken) -> str:
    """`name` as the copy in project `into_slug` is named: "<name>-<project>", then "-2", "-3"...
    until `taken(candidate)` is false, always a valid tool name (letters, digits, _ and -)."""
    suffix = "".join(c for c in into_slug if TOOL_NAME.match(c)) or "copy"
    for number in range(1, 1000):
        tail = f"-{suffix}" + (f"-{number}" if number > 1 else "")
        candidate = name[:MAX_NAME - len(tail)] + tail
        if not taken(candidate):
            return candidate
    raise CopyRefused(f"Every name for a copy of {name} is taken: rename one of the copies first.")


def tool_copy(*, tool: Tool, into) -> Tool:
    """A copy of `tool` in project `into`. A discovered tool comes with its source (an MCP server's
    with the server), and a tool the site shares is every project's already: neither is copied."""
    discovered = discovery_of(tool.kind)
    if discovered:
        raise CopyRefused(discovered.not_copied.format(tool=tool.name, project=into))
    if tool.project_id is None:
        raise CopyRefused(f"{tool.name} is shared by the site: every project's agents may use it already.")
    if tool.project_id == into.pk:
        raise CopyRefused(f"{tool.name} is a tool of {into} already.")
    data = {field: getattr(tool, field) for field in EDITABLE}
    data["name"] = copy_name(tool.name, into.slug, taken=lambda name: Tool.objects.filter(name=name).exists())
    data.update(config_typed(tool))  # the settings its kind declares (toolsapp/executors/)
    # A check or a required read names another tool of its own project: the copy has neither.
    data.update({field: getattr(tool, field) for field in DECISION_FIELDS if field not in LINKS})
    try:
        return tool_save_in_project(tool=None, data=data, project=into)
    except ToolInvalid as exc:
        raise CopyRefused(f"{tool.name} could not be copied: {exc}") from None
