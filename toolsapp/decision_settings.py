"""A tool's settings for the moment of decision: the arguments that say which thing a call acts on
(identifier_fields: its twins share them), the read-only check run before a person decides
(state_check), the read that must come earlier in the run (requires_read), and whether its results
hold outside content (reads_outside_content).

The tool editor and the API check them here and write them with the tool, in its transaction
(forms.tool_save_in_project), so both refuse the same things in the same words."""
from typing import Any

from toolsapp.argument_paths import path_parts
from toolsapp.models import Tool
from toolsapp.services import ToolInvalid

FIELDS = ("identifier_fields", "state_check", "requires_read", "reads_outside_content")
LINKS = ("state_check", "requires_read")
MAX_LINK_ARGUMENTS = 20
EXAMPLE = '{"tool": "lookup_order", "arguments": {"order_id": "$.order_id"}}'


def _properties(parameters: Any) -> dict | None:
    """The schema's named arguments; None when it names none (any name is then refused)."""
    properties = parameters.get("properties") if isinstance(parameters, dict) else None
    return properties if isinstance(properties, dict) and properties else None


def decision_settings_problems(*, values: dict, parameters: Any, tool_name: str, project_id: int | None) -> dict:
    """What is wrong with the given FIELDS of `values` for a tool named `tool_name`, in project
    `project_id` (None: shared by the site), with arguments `parameters`: {field: [words]}."""
    errors: dict[str, list[str]] = {}
    own = _properties(parameters)
    if "identifier_fields" in values:
        names = values["identifier_fields"]
        if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
            errors["identifier_fields"] = ["A list of this tool's argument names."]
        else:
            unknown = [n for n in names if own is None or n not in own]
            if unknown:
                errors["identifier_fields"] = [f"Not an argument of this tool: {', '.join(unknown)} ({_named(own)})."]
    for field in LINKS:
        if field in values:
            problems = list(_link_problems(field, values[field], own, tool_name, project_id))
            if problems:
                errors[field] = problems
    if "reads_outside_content" in values and not isinstance(values["reads_outside_content"], bool):
        errors["reads_outside_content"] = ["True or false."]
    return errors


def _named(properties: dict | None) -> str:
    return f"its arguments: {', '.join(properties)}" if properties else "its schema names no arguments"


def _link_problems(field: str, spec: Any, own: dict | None, tool_name: str, project_id: int | None):
    """The words for each problem of a state check or a required read."""
    if spec in (None, {}):
        return
    what = "The check" if field == "state_check" else "The read"
    if not isinstance(spec, dict) or set(spec) - {"tool", "arguments"} or not isinstance(spec.get("tool"), str):
        yield f"An object naming a tool and its arguments, such as {EXAMPLE}, or {{}} for none."
        return
    name, mapping = spec["tool"].strip(), spec.get("arguments", {})
    other = Tool.objects.filter(name=name).values("destructive", "project_id", "parameters").first()
    if name == tool_name:
        yield f"{what} must be another tool than this one."
    elif other is None:
        yield f"There is no tool named {name!r}."
    elif other["project_id"] is not None and other["project_id"] != project_id:
        yield (f"{name} is another project's tool: name one of this tool's project or one the site shares."
               if project_id is not None else f"{name} belongs to a project: a tool the site shares names only shared tools.")
    elif field == "state_check" and other["destructive"]:
        yield f"{name} is destructive: a state check runs without asking anyone, so it must only read."
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and k for k in mapping):
        yield f"arguments: an object of {name}'s argument names and paths into this tool's arguments, such as " \
              '{"order_id": "$.order_id"}.'
        return
    if len(mapping) > MAX_LINK_ARGUMENTS:
        yield f"At most {MAX_LINK_ARGUMENTS} arguments."
        return
    theirs = _properties(other["parameters"]) if other is not None else None
    for argument, path in mapping.items():
        if other is not None and (theirs is None or argument not in theirs):
            yield f"{argument}: not an argument of {name} ({_named(theirs)})."
        try:
            first = path_parts(path)[0]
        except ValueError as exc:
            yield f"{argument}: {exc}."
            continue
        if own is None or first not in own:
            yield f"{argument}: {path} is not in this tool's arguments ({_named(own)})."


def decision_settings_save(*, tool: Tool, data: dict) -> None:
    """Write the given FIELDS of `data` on the saved `tool` (in the caller's transaction), checked
    against it as saved; ToolInvalid (toolsapp.services) says what is wrong."""
    values = {field: data[field] for field in FIELDS if field in data}
    if not values:
        return
    for field in LINKS:
        spec = values.get(field)
        if field in values and not spec:
            values[field] = {}
        elif isinstance(spec, dict) and isinstance(spec.get("tool"), str):
            values[field] = {"tool": spec["tool"].strip(), "arguments": spec.get("arguments") or {}}
    if isinstance(values.get("identifier_fields"), list):
        values["identifier_fields"] = [n.strip() if isinstance(n, str) else n for n in values["identifier_fields"]]
    errors = decision_settings_problems(values=values, parameters=tool.parameters, tool_name=tool.name,
                                        project_id=tool.project_id)
    if errors:
        raise ToolInvalid(errors)
    Tool.objects.filter(pk=tool.pk).update(**values)
    for field, value in values.items():
        setattr(tool, field, value)
