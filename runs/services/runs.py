"""Creating and cancelling runs."""
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.models import Agent, Run
from runs.services import guards
from runs.services.events import event_record
from runs.snapshots import run_summary
from toolsapp.models import Tool
from toolsapp.verifiers import VERIFIERS

OVERRIDABLE = (
    "models",
    "base_url",
    "tools",
    "max_iterations",
    "repeat_limit",
    "max_wall_seconds",
    "max_tokens",
    "max_cost_usd",
    "first_tool_choice",
    "later_tool_choice",
    "parallel_tool_calls",
    "summarize_on_stop",
)
TOOL_CHOICES = ("auto", "required", "none")
APPROVAL_POLICIES = ("ask", "approve", "reject")


class InvalidRun(ValueError):
    pass


def run_config(*, agent: Agent, overrides: dict, approval_policy: str = "ask") -> dict:
    """The agent's settings with the launch's overrides, checked and frozen for the run."""
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise InvalidRun(f"these settings cannot be overridden: {', '.join(unknown)}")
    config = {
        "agent_name": agent.name,
        "system_prompt": agent.system_prompt,
        "models": list(agent.model_list),
        "base_url": agent.base_url,
        "tools": sorted(agent.tools.values_list("name", flat=True)),
        "max_iterations": agent.max_iterations,
        "repeat_limit": agent.repeat_limit,
        "max_wall_seconds": agent.max_wall_seconds,
        "max_tokens": agent.max_tokens,
        "max_cost_usd": agent.max_cost_usd,
        "max_output_tokens": agent.max_output_tokens,
        "first_tool_choice": agent.first_tool_choice,
        "later_tool_choice": agent.later_tool_choice,
        "parallel_tool_calls": agent.parallel_tool_calls,
        "provider_options": dict(agent.provider_options or {}),
        "verifier": agent.verifier,
        "summarize_on_stop": agent.summarize_on_stop,
        "approval_timeout_seconds": agent.approval_timeout_seconds or settings.APPROVAL_TIMEOUT_SECONDS or None,
        "approval_policy": approval_policy,
    }
    config.update(overrides)
    try:
        guards.check_limits(config)
    except guards.InvalidLimit as exc:
        raise InvalidRun(str(exc)) from None
    if not isinstance(config["models"], list) or not all(isinstance(m, str) and m for m in config["models"]):
        raise InvalidRun("models must be a list of model names")
    if not isinstance(config["tools"], list) or not all(isinstance(t, str) for t in config["tools"]):
        raise InvalidRun("tools must be a list of tool names")
    missing = sorted(set(config["tools"]) - set(Tool.objects.filter(enabled=True).values_list("name", flat=True)))
    if missing:
        raise InvalidRun(f"unknown or disabled tools: {', '.join(missing)}")
    for key in ("first_tool_choice", "later_tool_choice"):
        if config[key] not in TOOL_CHOICES:
            raise InvalidRun(f"{key} must be one of {', '.join(TOOL_CHOICES)}")
    if not isinstance(config["parallel_tool_calls"], bool):
        raise InvalidRun("parallel_tool_calls must be true or false")
    if approval_policy not in APPROVAL_POLICIES:
        raise InvalidRun(f"approval_policy must be one of {', '.join(APPROVAL_POLICIES)}")
    if config["verifier"] and config["verifier"] not in VERIFIERS:
        raise InvalidRun(f"no verifier named {config['verifier']!r}")
    return config


def run_create(
    *,
    agent: Agent,
    task: str,
    user=None,
    overrides: dict | None = None,
    customer: str | None = None,
    approval_policy: str = "ask",
    rerun_of: Run | None = None,
) -> Run:
    task = (task or "").strip()
    if not task:
        raise InvalidRun("the task is empty")
    overrides = dict(overrides or {})
    config = run_config(agent=agent, overrides=overrides, approval_policy=approval_policy)
    with transaction.atomic():
        run = Run.objects.create(
            agent=agent,
            task=task,
            customer=settings.DEFAULT_CUSTOMER if customer is None else customer,
            config=config,
            overrides=overrides,
            created_by=user if user is not None and user.is_authenticated else None,
            rerun_of=rerun_of,
        )
        event_record(run_id=run.pk, kind="run", data=run_summary(run))
    return run


def run_cancel(*, run: Run, user=None) -> Run:
    """Ask a run to stop. A run nobody is driving stops now; a driven one at its next check."""
    from runs.services.loop import lease_claim, lease_release, run_end

    who = user.get_username() if user is not None and getattr(user, "is_authenticated", False) else "an operator"
    Run.objects.filter(pk=run.pk, status__in=Run.ACTIVE_STATUSES).update(cancel_requested=True)
    owner = f"cancel-{run.pk}-{timezone.now().timestamp()}"
    if lease_claim(run.pk, owner):
        try:
            run_end(run_id=run.pk, owner=owner, reason="cancelled", detail=f"Cancelled by {who}.")
        finally:
            lease_release(run.pk, owner)
    run.refresh_from_db()
    return run

