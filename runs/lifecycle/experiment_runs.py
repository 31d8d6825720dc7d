"""Runs of an experiment (the evals app): one case run with an agent version's settings, whose
calls that would change something are simulated (runs/engine/tools/simulation.py), kept out of
everything operators watch (Run.experiment).

The version's settings are those of runs.lifecycle.agent_versions (a draft's too); a tool it names
that was deleted or disabled since is left out, and said so. The launch is the host's (no person's
bounds apply): nothing an experiment does leaves it, and who may start one is checked by its caller.
"""
import copy
import json
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from runs.engine.context.conversation import build_messages
from runs.engine.dispatch import run_send
from runs.engine.guards import parse_arguments
from runs.engine.storage.snapshots import run_summary
from runs.lifecycle.agent_versions import VERSIONED_FIELDS
from runs.lifecycle.launch_rules import LIMIT_SETTINGS, customer_problem
from runs.lifecycle.runs import InvalidRun, run_config
from runs.models import Agent, Run, RunEvent
from runs.roles import PERM_MANAGE_AGENTS
from toolsapp.models import Tool
from toolsapp.sensitive import masked

# What an experiment may change of the version it runs, beside the version itself.
EXPERIMENT_OVERRIDES = ("models", "max_iterations", "max_wall_seconds", "max_tokens", "max_cost_usd")


def version_config(*, agent: Agent, settings: dict, overrides: dict, user=None) -> tuple[dict, list[str]]:
    """(the frozen config of a run of `agent` with a version's `settings` and an experiment's
    `overrides`, the version's tools left out because they are gone or disabled). `user`: who
    starts it (None: the host's shell); like a launch, a limit above the version's needs the right
    to change agents."""
    unknown = sorted(set(overrides) - set(EXPERIMENT_OVERRIDES))
    if unknown:
        raise InvalidRun(f"an experiment cannot change: {', '.join(unknown)}")
    candidate = copy.copy(agent)
    for name in VERSIONED_FIELDS:
        if name not in ("tools", "name") and name in settings:
            setattr(candidate, name, settings[name])
    if user is not None and not user.has_perm(PERM_MANAGE_AGENTS):
        for name in LIMIT_SETTINGS:
            value, limit = overrides.get(name), getattr(candidate, name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > limit:
                raise InvalidRun(f"the experiment's {name} may be at most the version's {limit:g}; only people who may "
                                 "change agents can raise it", name)
    wanted = list(settings.get("tools", []))
    usable = set(Tool.objects.filter(name__in=wanted, enabled=True).values_list("name", flat=True))
    tools = sorted(name for name in wanted if name in usable)
    config = run_config(agent=candidate, overrides={"tools": tools, **overrides}, user=None)
    return config, sorted(set(wanted) - usable)


def conversation_before(run: Run, step: int | None) -> list[dict]:
    """The messages a case replays after its task: the run's conversation as step `step`'s request
    carried it (the steps before it, with their results), without the system prompt and the task
    (the version under test brings its own prompt, the case its task). None: nothing before.
    A case is read by everyone who sees datasets: the values of tools' sensitive fields in the
    calls are masked, as everywhere they are shown (the model then reads them masked too)."""
    if not step or step <= 1:
        return []
    messages = build_messages(run, before_step=step)[2:]
    sensitive = dict(Tool.objects.exclude(sensitive_fields=[]).values_list("name", "sensitive_fields"))
    return [_masked_calls(message, sensitive) if message.get("tool_calls") else message for message in messages]


def _masked_calls(message: dict, sensitive: dict[str, list[str]]) -> dict:
    calls = []
    for call in message["tool_calls"]:
        function = call.get("function") or {}
        fields = sensitive.get(function.get("name"))
        parsed, _error = parse_arguments(function.get("arguments"))
        if fields and parsed is not None:
            call = {**call, "function": {**function, "arguments": json.dumps(masked(parsed, fields), ensure_ascii=False)}}
        calls.append(call)
    return {**message, "tool_calls": calls}


@dataclass(frozen=True)
class CaseRun:
    """What one experiment run starts from."""

    task: str
    customer: str
    messages: list[dict]
    source_run_id: int | None
    answers: list[dict]  # the source run's answered calls (runs.engine.tools.simulation.recorded_answers)


def experiment_runs_create(*, agent: Agent, config: dict, cases: list[CaseRun], version: int | None,
                           user=None) -> list[Run]:
    """Queued experiment runs, one per case, in the caller's transaction and in a few statements
    whatever their number (an experiment of hundreds of cases starts at once); handed to the
    workers once it commits. Raises InvalidRun (with the case's position) before writing anything."""
    for position, case in enumerate(cases, 1):
        if not (case.task or "").strip():
            raise InvalidRun(f"case {position}: the task is empty")
        if customer_problem(case.customer):
            raise InvalidRun(f"case {position}: {customer_problem(case.customer)}", "customer")
    person = user if getattr(user, "is_authenticated", False) else None
    now = timezone.now()
    runs = [
        Run(agent=agent, task=case.task.strip(), customer=case.customer, experiment=True,
            config={**config, "experiment": {"source_run": case.source_run_id, "answers": list(case.answers or [])}},
            pending_messages=list(case.messages or []), agent_version=version, created_by=person,
            event_seq=1, dispatched_at=now)  # its first event, below; handed out at commit
        for case in cases
    ]
    with transaction.atomic():
        Run.objects.bulk_create(runs)
        # Nobody watches a run that did not exist a moment ago: its first event is stored, not published.
        RunEvent.objects.bulk_create([RunEvent(run=run, seq=1, kind="run", data=run_summary(run)) for run in runs])
        ids = [run.pk for run in runs]
        transaction.on_commit(lambda: [run_send(run_id) for run_id in ids])
    return runs
