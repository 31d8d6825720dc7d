"""Creating and cancelling runs."""
from django.conf import settings
from django.db import transaction

from runs.controls.levers import operator_name
from runs.engine import guards
from runs.engine.context.window import READ_BACK_TOOL, context_budget
from runs.engine.leases import lease_held
from runs.engine.llm.clients import TRUSTED_BASE_URL_KEY
from runs.engine.loop import run_end
from runs.engine.storage.events import event_record
from runs.engine.storage.snapshots import run_summary
from runs.lifecycle.launch_rules import (
    APPROVAL_POLICIES,
    OVERRIDABLE,
    TOOL_CHOICE_SETTINGS,
    customer_problem,
    launch_bounds_problems,
    launch_defaults,
)
from runs.models import Agent, Run
from runs.roles import PERM_LAUNCH
from toolsapp.models import Tool
from toolsapp.verifiers import VERIFIERS

TOOL_CHOICES = ("auto", "required", "none")


class InvalidRun(ValueError):
    """A launch that cannot start. `setting` names the overridden setting at fault, when one is."""

    def __init__(self, message: str, setting: str | None = None):
        super().__init__(message)
        self.setting = setting


def run_config(*, agent: Agent, overrides: dict, approval_policy: str = "ask", user=None) -> dict:
    """The agent's settings with the launch's overrides, checked and frozen for the run.
    `user`: the person launching (None: the host's operator), whose overrides stay within the agent."""
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise InvalidRun(f"these settings cannot be overridden: {', '.join(unknown)}")
    config = _config(agent=agent, overrides=overrides, approval_policy=approval_policy)
    for setting, message in _config_problems(config):
        raise InvalidRun(message, setting if setting in overrides else None)
    for setting, message in launch_bounds_problems(agent=agent, overrides=overrides, user=user):
        raise InvalidRun(message, setting)
    return _with_context(config, agent)


def _with_context(config: dict, agent: Agent) -> dict:
    """The run's context budget frozen with its other limits (0: compaction off), and whether the
    run may read a summarised result again (the built-in tool, unless an admin disabled it; it is
    not one of the run's chosen tools, which stay the agent's or the launch's)."""
    if not agent.compact_context:
        return {**config, "context_budget": 0, "read_back": False}
    budget = context_budget(models=config["models"] or list(settings.LLM_MODELS),
                            max_output_tokens=config["max_output_tokens"], own_budget=agent.context_budget_tokens)
    read_back = Tool.objects.filter(name=READ_BACK_TOOL, enabled=True).exists()
    return {**config, "context_budget": budget, "read_back": read_back}


def launch_errors(*, agent: Agent, overrides: dict, user=None) -> dict[str, list[str]]:
    """What run_create would refuse in the settings this launch overrides, by setting. Problems
    of the agent's own settings are left to run_create, which refuses the launch as a whole."""
    config = _config(agent=agent, overrides=overrides)
    errors: dict[str, list[str]] = {}
    for setting, message in _config_problems(config):
        if setting in overrides:
            errors.setdefault(setting, []).append(message)
    for setting, message in launch_bounds_problems(agent=agent, overrides=overrides, user=user):
        errors.setdefault(setting, []).append(message)
    return errors


def _config(*, agent: Agent, overrides: dict, approval_policy: str = "ask") -> dict:
    return {
        "agent_name": agent.name,
        "system_prompt": agent.system_prompt,
        **launch_defaults(agent=agent),
        "max_output_tokens": agent.max_output_tokens,
        "provider_options": dict(agent.provider_options or {}),
        "stream_answers": agent.stream_answers,
        "verifier": agent.verifier,
        "approval_timeout_seconds": agent.approval_timeout_seconds or settings.APPROVAL_TIMEOUT_SECONDS or None,
        "escalate_after_seconds": agent.escalate_after_seconds,  # a matching rule's own threshold wins
        "expiry_warning_seconds": agent.expiry_warning_seconds,  # the same
        "approval_policy": approval_policy,
        **overrides,
    }


def _config_problems(config: dict):
    """(setting, message) for each thing wrong with a run's config, in the order they are reported."""
    for name in guards.POSITIVE_INT_LIMITS + guards.POSITIVE_NUMBER_LIMITS:
        check = guards.check_positive_int if name in guards.POSITIVE_INT_LIMITS else guards.check_positive_number
        try:
            check(name, config[name])
        except guards.InvalidLimit as exc:
            yield name, str(exc)
    if not isinstance(config["models"], list) or not all(isinstance(m, str) and m for m in config["models"]):
        yield "models", "models must be a list of model names"
    if not isinstance(config["tools"], list) or not all(isinstance(t, str) for t in config["tools"]):
        yield "tools", "tools must be a list of tool names"
    else:
        enabled = set(Tool.objects.filter(enabled=True).values_list("name", flat=True))
        missing = sorted(set(config["tools"]) - enabled)
        if missing:
            yield "tools", f"unknown or disabled tools: {', '.join(missing)}"
    for key in TOOL_CHOICE_SETTINGS:
        if config[key] not in TOOL_CHOICES:
            yield key, f"{key} must be one of {', '.join(TOOL_CHOICES)}"
    if not isinstance(config["parallel_tool_calls"], bool):
        yield "parallel_tool_calls", "parallel_tool_calls must be true or false"
    if config["approval_policy"] not in APPROVAL_POLICIES:
        yield "approval_policy", f"approval_policy must be one of {', '.join(APPROVAL_POLICIES)}"
    if config["verifier"] and config["verifier"] not in VERIFIERS:
        yield "verifier", f"no verifier named {config['verifier']!r}"


def run_create(
    *,
    agent: Agent,
    task: str,
    user=None,
    overrides: dict | None = None,
    customer: str | None = None,
    approval_policy: str = "ask",
    rerun_of: Run | None = None,
    shell_base_url: str = "",
) -> Run:
    """A new queued run. `user` None is the host's operator (the command line): unrestricted;
    a person's overrides stay within the agent (launch_rules.launch_bounds_problems). Who may choose
    `approval_policy` is checked by the caller (launch_rules.launch_policy). `shell_base_url`: a model
    endpoint typed at the host's shell (run_agent --base-url), which the run then trusts like
    LLM_BASE_URL (see llm.clients.resolve_endpoint). Only the command sets it; a re-run does not copy it."""
    task = (task or "").strip()
    if not task:
        raise InvalidRun("the task is empty")
    if customer is not None and customer_problem(customer):
        raise InvalidRun(customer_problem(customer), "customer")
    if user is not None and not user.has_perm(PERM_LAUNCH, agent):
        # The forms and the API offer only the agents of the person's projects; this is the backstop.
        raise InvalidRun(f"you may not launch runs of {agent.name}: it is not an agent of a project where you launch runs", "agent")
    overrides = dict(overrides or {})
    config = run_config(agent=agent, overrides=overrides, approval_policy=approval_policy, user=user)
    if shell_base_url and config["base_url"] == shell_base_url:
        config[TRUSTED_BASE_URL_KEY] = True
    with transaction.atomic():
        run = Run.objects.create(
            agent=agent,
            task=task,
            customer=settings.DEFAULT_CUSTOMER if customer is None else customer,
            config=config,
            overrides=overrides,
            created_by=user if user is not None and user.is_authenticated else None,
            rerun_of=rerun_of,
            agent_version=agent.version or None,  # 0: an agent saved before versions, outside agent_save
        )
        event_record(run_id=run.pk, kind="run", data=run_summary(run))
    return run


def run_cancel(*, run: Run, user=None) -> Run:
    """Ask a run to stop. A run nobody is driving stops now; a driven one at its next check."""
    who = operator_name(user)
    Run.objects.filter(pk=run.pk, status__in=Run.ACTIVE_STATUSES).update(cancel_requested=True)
    with lease_held(run.pk, "cancel") as owner:
        if owner is not None:
            run_end(run_id=run.pk, owner=owner, reason=Run.StopReason.CANCELLED, detail=f"Cancelled by {who}.")
    run.refresh_from_db()
    return run

