"""Runs of an experiment (the evals app): one case run with an agent version's settings, whose
calls that would change something are simulated (runs/engine/simulation.py), kept out of
everything operators watch (Run.experiment).

The version's settings are those of runs.lifecycle.agent_versions (a draft's too); a tool it names
that was deleted or disabled since is left out, and said so. The launch is the host's (no person's
bounds apply): nothing an experiment does leaves it, and who may start one is checked by its caller.
"""
import copy

from django.db import transaction

from runs.engine.conversation import build_messages
from runs.engine.events import event_record
from runs.engine.snapshots import run_summary
from runs.lifecycle.agent_versions import VERSIONED_FIELDS
from runs.lifecycle.launch import customer_problem
from runs.lifecycle.runs import InvalidRun, run_config
from runs.models import Agent, Run
from toolsapp.models import Tool

# What an experiment may change of the version it runs, beside the version itself.
EXPERIMENT_OVERRIDES = ("models", "max_iterations", "max_wall_seconds", "max_tokens", "max_cost_usd")


def version_config(*, agent: Agent, settings: dict, overrides: dict) -> tuple[dict, list[str]]:
    """(the frozen config of a run of `agent` with a version's `settings` and an experiment's
    `overrides`, the version's tools left out because they are gone or disabled)."""
    unknown = sorted(set(overrides) - set(EXPERIMENT_OVERRIDES))
    if unknown:
        raise InvalidRun(f"an experiment cannot change: {', '.join(unknown)}")
    candidate = copy.copy(agent)
    for name in VERSIONED_FIELDS:
        if name not in ("tools", "name") and name in settings:
            setattr(candidate, name, settings[name])
    wanted = list(settings.get("tools", []))
    usable = set(Tool.objects.filter(name__in=wanted, enabled=True).values_list("name", flat=True))
    tools = sorted(name for name in wanted if name in usable)
    config = run_config(agent=candidate, overrides={"tools": tools, **overrides}, user=None)
    return config, sorted(set(wanted) - usable)


def conversation_before(run: Run, step: int | None) -> list[dict]:
    """The messages a case replays after its task: the run's conversation as step `step`'s request
    carried it (the steps before it, with their results), without the system prompt and the task
    (the version under test brings its own prompt, the case its task). None: nothing before."""
    if not step or step <= 1:
        return []
    return build_messages(run, before_step=step)[2:]


def experiment_run_create(*, agent: Agent, config: dict, task: str, customer: str, messages: list[dict],
                          source_run_id: int | None, version: int | None, user=None) -> Run:
    """A queued experiment run (its caller dispatches it once its transaction commits)."""
    task = (task or "").strip()
    if not task:
        raise InvalidRun("the task is empty")
    if customer_problem(customer):
        raise InvalidRun(customer_problem(customer), "customer")
    config = {**config, "experiment": {"source_run": source_run_id}}
    with transaction.atomic():
        run = Run.objects.create(
            agent=agent, task=task, customer=customer, config=config, experiment=True,
            pending_messages=list(messages or []), agent_version=version,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        event_record(run_id=run.pk, kind="run", data=run_summary(run))
    return run
