"""Experiments: every case of a dataset run against one version of an agent (the current one, a
draft, an older one, optionally with other models or limits), through the real workers, with
nothing real changed (runs.lifecycle.experiment_runs), then scored (evals.scoring).
"""
from django.db import transaction
from django.utils import timezone

from evals.models import CaseResult, Dataset, Experiment
from runs.lifecycle.agent_versions import agent_settings
from runs.lifecycle.experiment_runs import EXPERIMENT_OVERRIDES, CaseRun, experiment_runs_create, version_config
from runs.lifecycle.runs import InvalidRun, run_cancel
from runs.models import Agent, AgentVersion, Run


class ExperimentInvalid(ValueError):
    """An experiment that cannot start, in words."""


def version_chosen(*, agent: Agent, version: int | None = None, draft: bool = False) -> tuple[int, dict, bool]:
    """(the version's number, its settings, whether it is a draft) for an experiment: `version` by
    number, the newest draft, or else the current version."""
    if version is not None:
        row = AgentVersion.objects.filter(agent=agent, number=version).first()
        if row is None:
            raise ExperimentInvalid(f"agent {agent.name} has no version {version}")
        return row.number, row.settings, row.draft and row.number != agent.version
    if draft:
        newest = AgentVersion.objects.filter(agent=agent, draft=True, number__gt=agent.version).order_by("-number").first()
        if newest is None:
            raise ExperimentInvalid(f"agent {agent.name} has no draft newer than its current version {agent.version}")
        return newest.number, newest.settings, True
    current = AgentVersion.objects.filter(agent=agent, number=agent.version).first()
    if current is None:  # an agent saved before versions existed
        return agent.version, agent_settings(agent), False
    return current.number, current.settings, False


def experiment_label(*, number: int, draft: bool, current: bool, overrides: dict) -> str:
    words = f"draft v{number}" if draft else f"v{number}" + (" (current)" if current else "")
    if overrides.get("models"):
        words += " with " + ", ".join(overrides["models"])
    limits = [f"{name} {value:g}" for name, value in overrides.items() if name != "models"]
    return words + (f" ({', '.join(limits)})" if limits else "")


def experiment_start(*, dataset: Dataset, agent: Agent, version: int | None = None, draft: bool = False,
                     overrides: dict | None = None, baseline: Experiment | None = None, user=None) -> Experiment:
    """Start an experiment: one experiment run per case, handed to the workers once this commits."""
    overrides = {name: value for name, value in (overrides or {}).items() if value not in (None, "", [])}
    unknown = sorted(set(overrides) - set(EXPERIMENT_OVERRIDES))
    if unknown:
        raise ExperimentInvalid(f"an experiment cannot change: {', '.join(unknown)}")
    cases = list(dataset.cases.order_by("pk"))
    if not cases:
        raise ExperimentInvalid(f"dataset {dataset.name} has no cases")
    number, settings, is_draft = version_chosen(agent=agent, version=version, draft=draft)
    try:
        config, left_out = version_config(agent=agent, settings=settings, overrides=overrides, user=user)
    except InvalidRun as exc:
        raise ExperimentInvalid(str(exc)) from exc
    if baseline is not None and baseline.dataset_id != dataset.pk:
        raise ExperimentInvalid("the baseline is an experiment of another dataset")
    person = getattr(user, "is_authenticated", False)
    with transaction.atomic():
        experiment = Experiment.objects.create(
            dataset=dataset, agent=agent, agent_version=number, draft=is_draft, overrides=overrides,
            label=experiment_label(number=number, draft=is_draft, current=number == agent.version, overrides=overrides),
            left_out_tools=left_out, baseline=baseline, cases_total=len(cases),
            created_by=user if person else None, created_by_name=user.get_username() if person else "",
        )
        try:
            runs = experiment_runs_create(
                agent=agent, config=config, version=number, user=user,
                cases=[CaseRun(c.task, c.customer, c.messages, c.source_run_id, c.answers) for c in cases],
            )
        except InvalidRun as exc:
            raise ExperimentInvalid(str(exc)) from exc
        # Each case's checks as they are now: an edit later changes no result of this experiment.
        CaseResult.objects.bulk_create([CaseResult(experiment=experiment, case=case, case_name=case.name, run=run,
                                                   expectations=list(case.expectations))
                                        for case, run in zip(cases, runs, strict=True)])
    return experiment


def experiment_cancel(*, experiment: Experiment, user=None) -> Experiment:
    """Stop an experiment: its runs still going are cancelled (their cases score as they ended)."""
    if experiment.status != Experiment.Status.RUNNING:
        return experiment
    Experiment.objects.filter(pk=experiment.pk, status=Experiment.Status.RUNNING).update(
        status=Experiment.Status.CANCELLED, finished_at=timezone.now())
    for run in Run.objects.filter(case_result__experiment=experiment, status__in=Run.ACTIVE_STATUSES):
        run_cancel(run=run, user=user)
    experiment.refresh_from_db()
    return experiment


def baseline_for(experiment: Experiment) -> Experiment | None:
    """What an experiment is compared with: its baseline, or else the newest earlier finished
    experiment of the same dataset and agent with the current version."""
    if experiment.baseline_id:
        return experiment.baseline
    earlier = Experiment.objects.filter(dataset=experiment.dataset, agent=experiment.agent, pk__lt=experiment.pk,
                                        status=Experiment.Status.FINISHED, draft=False,
                                        agent_version=experiment.agent.version).order_by("-pk")
    # The current version as it is, not with other models or limits.
    return next((e for e in earlier[:50] if not e.overrides), None)
