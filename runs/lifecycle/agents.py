"""Creating and changing agents: every rule on an agent's settings, for the dashboard and the API.

The dashboard's form and the API's serializer only read their input (text, numbers, lists,
tool ids or names); what the values must be is decided here, once, by field.
"""
import copy
from collections.abc import Callable

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import transaction

from projects.models import default_project_id
from runs.engine.guards import (
    POSITIVE_INT_LIMITS,
    POSITIVE_NUMBER_LIMITS,
    InvalidLimit,
    check_positive_int,
    check_positive_number,
)
from runs.engine.storage.text import check_storable_json, storable_text
from runs.lifecycle.agent_fields import AGENT_FIELDS  # every setting a person chooses, in the editor's order
from runs.lifecycle.agent_versions import agent_settings, agent_version, version_data, version_record
from runs.models import Agent, AgentVersion
from toolsapp.verifiers import VERIFIERS

MAX_MODEL_NAME = 200
MAX_ESCALATION_EMAILS_CHARS = 2000
_HTTP_URL = URLValidator(schemes=["http", "https"])


class InvalidAgent(ValueError):
    """Settings an agent cannot have; `errors` holds the messages by field ("__all__" for none)."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()))
        self.errors = errors


def _text(value):
    if isinstance(value, str) and not storable_text(value):
        raise ValidationError("Text with a NUL or an unpaired surrogate character cannot be stored.")


def _model_list(models):
    if not isinstance(models, list) or not all(isinstance(name, str) for name in models):
        raise ValidationError("A list of model names.")
    if any(not name.strip() for name in models):
        raise ValidationError("A model name cannot be empty.")
    if any(len(name) > MAX_MODEL_NAME for name in models):
        raise ValidationError(f"A model name is longer than {MAX_MODEL_NAME} characters.")
    check_storable_json(models, "A model name")


def _base_url(url):
    _text(url)
    if url:
        _HTTP_URL(url)


def _tools(tools):
    disabled = sorted(tool.name for tool in tools if not tool.enabled)
    if disabled:
        # run_create refuses disabled tools, so every run of this agent would fail to start.
        raise ValidationError(f"These tools are disabled: {', '.join(disabled)}.")


def _provider_options(options):
    if not isinstance(options, dict):
        raise ValidationError("This must be a JSON object ({...}).")
    check_storable_json(options, "provider_options")


def _verifier(name):
    _text(name)
    if name and name not in VERIFIERS:
        raise ValidationError(f"No verifier named {name!r}.")


def _escalation_emails(text):
    _text(text)
    if len(text or "") > MAX_ESCALATION_EMAILS_CHARS:
        raise ValidationError(f"At most {MAX_ESCALATION_EMAILS_CHARS} characters.")
    wrong = []
    for address in (text or "").split(","):
        try:
            if address.strip():
                validate_email(address.strip())
        except ValidationError:
            wrong.append(address.strip())
    if wrong:
        raise ValidationError(f"Not e-mail addresses: {', '.join(wrong)} (separate addresses with commas).")


def _limit(check, name: str, optional: bool = False) -> Callable:
    def rule(value):
        if value is None and optional:
            return
        try:
            check(name, value)
        except InvalidLimit as exc:
            raise ValidationError(str(exc)) from None

    return rule


# One rule per field; the model's own checks (lengths, choices, ranges its column can hold, a
# unique name) run after these, on the fields that passed them.
_RULES: dict[str, Callable] = {
    "name": _text,
    "description": _text,
    "system_prompt": _text,
    "model_list": _model_list,
    "base_url": _base_url,
    "tools": _tools,
    "provider_options": _provider_options,
    "verifier": _verifier,
    "escalation_emails": _escalation_emails,
    **{name: _limit(check_positive_int, name) for name in POSITIVE_INT_LIMITS},
    **{name: _limit(check_positive_number, name) for name in POSITIVE_NUMBER_LIMITS},
    **{name: _limit(check_positive_int, name, optional=True)
       for name in ("max_output_tokens", "context_budget_tokens", "approval_timeout_seconds", "escalate_after_seconds",
                    "expiry_warning_seconds", "daily_token_alert")},
    "daily_cost_alert_usd": _limit(check_positive_number, "daily_cost_alert_usd", optional=True),
}


def agent_errors(*, agent: Agent | None, data: dict, project=None) -> dict[str, list[str]]:
    """What is wrong with `data` as new settings of `agent` (None: a new agent, in `project`), by
    field; {} when nothing is. Fields left out of `data` keep the agent's values (a new agent's
    defaults)."""
    unknown = sorted(set(data) - set(AGENT_FIELDS))
    if unknown:
        raise TypeError(f"not settings of an agent: {', '.join(unknown)}")
    errors: dict[str, list[str]] = {}
    for name, value in data.items():
        rule = _RULES.get(name)
        try:
            if rule is not None:
                rule(value)
        except ValidationError as exc:
            errors[name] = list(exc.messages)
    candidate = copy.copy(agent) if agent is not None else Agent(**({"project": project} if project else {}))
    _assign(candidate, {name: value for name, value in data.items() if name not in errors})
    # An agent calls its own project's tools and the site's shared ones, never another team's.
    owned = [t for t in data.get("tools") or () if t.project_id is not None]
    project_id = candidate.project_id or (default_project_id() if owned else None)  # a new agent goes into Default
    foreign = sorted(t.name for t in owned if t.project_id != project_id)
    if foreign:
        errors.setdefault("tools", []).append(f"Not tools of this agent's project: {', '.join(foreign)}.")
    try:
        # Never with text that failed above: the uniqueness query would carry it to the database.
        candidate.full_clean(exclude=[*errors, "project"])  # None: Default, at the save
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            errors.setdefault(name, []).extend(messages)
    return errors


def agent_save(*, agent: Agent | None, data: dict, user=None, note: str = "", project=None) -> Agent:
    """Create an agent (agent=None, in `project`: None is Default) or change the given settings of
    one, after every rule above: a new version of it (by `user`), its current one."""
    errors = agent_errors(agent=agent, data=data, project=project)
    if errors:
        raise InvalidAgent(errors)
    agent = agent if agent is not None else Agent(**({"project": project} if project else {}))
    with transaction.atomic():
        _assign(agent, data)
        agent.save()
        if "tools" in data:
            agent.tools.set(data["tools"])
        version_record(agent=agent, settings=agent_settings(agent), user=user, note=note)
    return agent


def agent_draft_save(*, agent: Agent, data: dict, user=None, note: str = "") -> AgentVersion:
    """A draft version of `agent` with these settings changed, after every rule above: the agent
    and its runs go on with the current version until the draft is made current."""
    errors = agent_errors(agent=agent, data=data)
    if errors:
        raise InvalidAgent(errors)
    candidate = copy.copy(agent)
    _assign(candidate, data)
    tools = [tool.name for tool in data["tools"]] if "tools" in data else list(agent.tools.values_list("name", flat=True))
    with transaction.atomic():
        return version_record(agent=agent, settings=agent_settings(candidate, tools=tools), user=user, draft=True,
                              note=note)


def _assign(agent: Agent, data: dict) -> None:
    for name, value in data.items():
        if name != "tools":  # many-to-many: set after saving
            setattr(agent, name, value)


def version_make_current(*, agent: Agent, number: int, user=None) -> AgentVersion:
    """Make version `number` (a draft or an older version) current: a new version with its
    contents, through every rule of agent_save (a tool disabled since refuses it)."""
    version = agent_version(agent=agent, number=number)
    data = version_data(version)
    missing = sorted(set(version.settings.get("tools", [])) - {tool.name for tool in data["tools"]})
    with transaction.atomic():
        agent_save(agent=agent, data=data, user=user, note=f"made current from version {number}"
                   + (f" (without the deleted tools {', '.join(missing)})" if missing else ""))
    return AgentVersion.objects.get(agent=agent, number=agent.version)
