"""Creating and changing tools: the one owner of a tool's rules. The dashboard's tool form, the
admin and the API's ToolSerializer all call it.

Callers turn what was typed into values (JSON text into a dict, a comma list into a list) and
pass them by field name; `tool_validate` says what is wrong, by field, and `tool_save` writes.
A field left out keeps the tool's value (or the model's default for a new tool).
"""
import math
import re

from django.core.exceptions import ValidationError
from django.db import transaction

from hosting.text import MAX_SAFE_INTEGER, storable_json
from toolsapp.executors import config_fields, discovery_of, kind_of
from toolsapp.models import Tool
from toolsapp.schemas import InvalidSchema, check_tool_schema, strict_mode_warnings
from toolsapp.two_people import critical_warning

# What the chat completions API accepts as a function name.
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS = 0.01, 24 * 3600
MAX_SENSITIVE_FIELD_CHARS = 200
EDITABLE = (
    "name", "description", "parameters", "destructive", "always_ask", "critical", "allow_argument_edits",
    "parallel_safe", "idempotent", "in_experiments", "timeout_seconds", "repeat_limit", "sensitive_fields", "kind",
    "handler", "enabled",
)
REQUIRED = ("name", "parameters")
EXPERIMENT_MODES = ("auto", "real", "never")


class ToolInvalid(Exception):
    """What is wrong with the values given for a tool, by field: {"name": ["...", ...], ...}."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()))
        self.errors = errors


def tool_validate(*, tool: Tool | None, data: dict) -> dict:
    """The values to store (EDITABLE fields and config) for `data` applied to the stored `tool`
    (None: a new tool); ToolInvalid when any is refused."""
    errors: dict[str, list[str]] = {}

    def refuse(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    # The config fields, given by field and stored in the tool's config, are those the kinds declare.
    named = (*EDITABLE, *(setting.name for setting in config_fields()))
    given = {field: data[field] for field in named if field in data}
    for field, value in given.items():
        if not storable_json(value):
            refuse(field, f"{field} contains a NUL or an unpaired surrogate character.")
    if tool is None:
        for field in REQUIRED:
            if field not in given:
                refuse(field, "This field is required.")
    values = {**_current(tool), **{field: value for field, value in given.items() if field in EDITABLE}}
    if isinstance(values["name"], str):
        values["name"] = values["name"].strip()
    if isinstance(values["sensitive_fields"], list):
        values["sensitive_fields"] = [n.strip() if isinstance(n, str) else n for n in values["sensitive_fields"]]
        values["sensitive_fields"] = [n for n in values["sensitive_fields"] if n != ""]
    for field, problem in _problems(tool, values, given):
        if field not in errors:
            refuse(field, problem)
    values["config"], problems = _config(tool, values["kind"], given)
    for field, problem in problems.items():
        if field not in errors:
            refuse(field, problem)
    _model_checks(tool, values, errors)
    if errors:
        raise ToolInvalid(errors)
    return values


def tool_save(*, tool: Tool | None = None, data: dict) -> Tool:
    """Create a tool (tool None or unsaved) or change one; ToolInvalid says what is wrong.

    The rules are checked against the row as stored (locked), not against `tool`, which a
    ModelForm may already have changed.
    """
    tool = tool if tool is not None else Tool()
    with transaction.atomic():
        stored = Tool.objects.select_for_update().get(pk=tool.pk) if tool.pk else None
        values = tool_validate(tool=stored, data=data)
        for field, value in values.items():
            setattr(tool, field, value)
        if stored is None:
            tool.save()
        else:
            tool.save(update_fields=[*values, "updated_at"])
    return tool


def tool_notices(*, tool: Tool) -> list[str]:
    """Things worth knowing after saving that do not stop the tool from being saved."""
    notices = [f"Strict mode: {warning}" for warning in strict_mode_warnings(tool.parameters)]
    executor = kind_of(tool.kind)
    if executor is None:
        notices.append(f"Tools of kind {tool.kind!r} cannot be executed by this installation yet.")
    else:
        notices.extend(executor.notices(tool))
    # Marked critical where too few people may decide: saved, and said at once, not found later
    # as a call that waits for ever.
    warning = critical_warning(critical=tool.critical, project_id=tool.project_id,
                               project_name=tool.project.name if tool.project_id else "")
    if warning:
        notices.append(warning)
    return notices


def _current(tool: Tool | None) -> dict:
    if tool is None:
        return {field: Tool._meta.get_field(field).get_default() for field in EDITABLE}
    return {field: getattr(tool, field) for field in EDITABLE}


def _problems(tool: Tool | None, values: dict, given: dict):
    """(field, message) for each rule a value breaks."""
    name, kind = values["name"], values["kind"]
    # What discovery decides (the kind of a discovered tool, its name, that it has no handler)
    # stays as discovery made it.
    discovered = discovery_of(tool.kind) if tool else None
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        yield "name", "Use 1-64 letters, digits, underscores or hyphens (the API's rule)."
    elif discovered and name != tool.name:
        yield "name", discovered.keeps_name
    executor = kind_of(kind)
    if executor is None:
        yield "kind", f"{kind!r} is not a kind of tool."
    elif (discovered or executor.discovery) and kind != (tool.kind if tool else None):
        yield "kind", (discovered or executor.discovery).added
    if discovered and values["handler"] != tool.handler:
        yield "handler", discovered.no_handler
    if "parameters" in given:
        try:
            check_tool_schema(values["parameters"])
        except InvalidSchema as exc:
            yield "parameters", str(exc)
    timeout = values["timeout_seconds"]
    if not _number(timeout) or not math.isfinite(timeout):
        yield "timeout_seconds", "A number of seconds."
    elif not MIN_TIMEOUT_SECONDS <= timeout <= MAX_TIMEOUT_SECONDS:
        yield "timeout_seconds", f"From {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS} seconds."
    limit = values["repeat_limit"]
    if limit is not None and (not _number(limit) or limit != int(limit) or not 1 <= limit <= MAX_SAFE_INTEGER):
        yield "repeat_limit", f"A whole number from 1 to {MAX_SAFE_INTEGER}, or empty for the agent's."
    names = values["sensitive_fields"]
    if not isinstance(names, list) or not all(isinstance(n, str) and len(n) <= MAX_SENSITIVE_FIELD_CHARS for n in names):
        yield "sensitive_fields", f"A list of argument names of up to {MAX_SENSITIVE_FIELD_CHARS} characters."
    for field in ("description", "handler"):
        if not isinstance(values[field], str):
            yield field, "Text."
    if not isinstance(values["in_experiments"], str) or values["in_experiments"] not in EXPERIMENT_MODES:
        yield "in_experiments", f"One of {', '.join(EXPERIMENT_MODES)}."
    elif values["in_experiments"] == "real" and values["destructive"] is True:
        yield "in_experiments", ("A destructive tool never runs in experiments: each of its calls needs a person, "
                                 "and an experiment asks no one.")
    for field in ("destructive", "parallel_safe", "idempotent", "enabled"):
        if not isinstance(values[field], bool):
            yield field, "True or false."


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _config(tool: Tool | None, kind: str, given: dict) -> tuple[dict, dict[str, str]]:
    """(the config to store, its problems by field): the config fields the kind declares (those
    not given stay as they were, when the kind stays), a discovered tool's as discovery wrote it."""
    old = dict(tool.config or {}) if tool else {}
    was, executor = kind_of(tool.kind) if tool else None, kind_of(kind)
    if executor is not None and executor.config_fields:
        typed = {setting.name: given.get(setting.name) for setting in executor.config_fields}
        wrong = {field: "Text." for field, value in typed.items() if value is not None and not isinstance(value, str)}
        if wrong:
            return old, wrong
        return executor.config_from({
            field: (old.get(field, "") if was is executor else "") if value is None else value
            for field, value in typed.items()
        })
    if was is not None and was is not executor and was.config_fields:
        return {}, {}  # typed settings of the kind it was, which this kind has no use for
    return old, {}


def _model_checks(tool: Tool | None, values: dict, errors: dict) -> None:
    """The model's own checks (lengths, the database's number ranges, a unique name) on the
    fields that passed the rules above: nothing unstorable reaches the uniqueness query."""
    candidate = Tool(pk=tool.pk if tool else None, **values)
    candidate._state.adding = tool is None  # so that its own row does not make its name taken
    try:
        candidate.full_clean(exclude=[*errors, "config", "mcp_server"])
    except ValidationError as exc:
        for field, messages in exc.message_dict.items():
            errors.setdefault(field, []).extend(messages)
